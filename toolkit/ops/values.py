"""Values computed in registers: ``compute {dst, value}`` is ``dst[...] = value``.

``value`` is an elementwise expression written as a Pallas kernel writes it::

    "a_ref[...] + b_ref[...] * 2.0"
    "jnp.where(x_ref[...] > 0, x_ref[...], 0.0)"
    "lax.broadcasted_iota(jnp.int32, (8, 128), 1).astype(jnp.float32) * s_ref[...]"

The grammar (parsed with :mod:`ast`; nothing is evaluated by Python): loads ``ref[...]``
of a parameter, output, scratch or ``let`` view (a rank-0 view is a scalar load; a tuple
leaf is ``x[0][...]``), where the kernel runs (``lax.axis_index('dev')`` or the bare
axis name ``dev``, ``pl.program_id(0)``, ``lax.axis_size('dev')``, a loop variable:
int32), int, float and bool literals (weakly typed, as JAX's Python
scalars), ``+ - * / // %``, unary ``-``, comparisons, ``jnp.where(c, x, y)``,
``jnp.maximum`` / ``jnp.minimum``, ``x.astype(jnp.DTYPE)``,
``lax.bitcast_convert_type(x, jnp.DTYPE)`` and
``lax.broadcasted_iota(jnp.DTYPE, (d0, ...), dim)``, ``pl.semaphore_read(sem)`` (a
semaphore's value: int32), and the reductions ``jnp.sum`` / ``jnp.max`` / ``jnp.min``
with ``axis=`` (an int, a tuple, None) and ``keepdims=``. Shapes broadcast as numpy's do and
dtypes promote as jax.numpy's do (a Python scalar takes the other operand's dtype); the
store wants the destination's shape and dtype, as ``ref[...] = v`` does.

A tree types itself (JAX's shape and dtype rules, JAX's messages), evaluates with numpy
(each step in the dtype JAX computes it in) and prints as JAX source and as a label.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Protocol

from mpmd_lab import dtypes, sharding
from mpmd_lab import expr as E
from mpmd_lab.ops.scratch import BARRIER_DTYPE, SEMAPHORE_DTYPE
from mpmd_lab.record import Record
from mpmd_lab.sharding import ShardSpec
from pydantic import AfterValidator

#: longest value text accepted, deepest nesting
MAX_TEXT = 2000
MAX_DEPTH = 48

_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "int32",
    "int16",
    "int8",
    "uint32",
    "uint16",
    "uint8",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
)


class ValueSyntaxError(ValueError):
    """Not a value of the grammar above (the message says what)."""


class ValueTypeError(Exception):
    """JAX's error for a value: the code, JAX's message and exception type."""

    def __init__(self, code: str, message: str, jax_type: str) -> None:
        super().__init__(message)
        self.code, self.message, self.jax_type = code, message, jax_type


class Ty(Record):
    """A value's type: shape, dtype, whether it is weakly typed (a Python scalar), and its
    sharding over the device mesh (a global call's load of a sharded input; None: none)."""

    __slots__ = ("shape", "dtype", "weak", "sharding")
    shape: tuple[int, ...]
    dtype: str
    weak: bool
    sharding: ShardSpec | None

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: str,
        weak: bool = False,
        sharding: ShardSpec | None = None,
    ) -> None:
        self.shape, self.dtype, self.weak, self.sharding = shape, dtype, weak, sharding


#: what a load gives ``Node.typed``: ``(shape, dtype)``, or ``(shape, dtype, sharding)``
#: where the loaded ref is sharded over the device mesh (a global call's input)
Loaded = tuple[Any, ...]


class Writer(Protocol):
    """How a value is written out: its loads' refs and its index expressions (the
    exporter's source writer has both; ``LABEL`` writes them as a scenario does)."""

    def ref(self, name: str) -> str: ...

    def expr(self, e: E.Expr) -> str: ...


class Label:
    """A value as a scenario writes it, its loads renamed by ``names`` (default: none)."""

    def __init__(self, names: Mapping[str, str] | None = None) -> None:
        self.names = names or {}

    def ref(self, name: str) -> str:
        return self.names.get(name, name)

    def expr(self, e: E.Expr) -> str:
        return e.label()


LABEL = Label()


class Node(Record):
    """A value expression (immutable)."""

    __slots__ = ()

    def loads(self) -> Iterator[str]:
        """The names of the refs it loads, in evaluation order (repeats included)."""
        for c in self.children():
            yield from c.loads()

    def children(self) -> tuple[Node, ...]:
        return ()

    def mapped(self, f: Callable[[Node], Node]) -> Node:
        """The same operation over ``f`` of each child (its other fields kept: each
        node's ``__init__`` takes its ``__slots__`` in order)."""
        if not self.children():
            return self
        fields = self._values(self)
        return self.__class__(*(f(v) if isinstance(v, Node) else v for v in fields))

    def indices(self) -> Iterator[Index]:
        """The index expressions it reads."""
        for c in self.children():
            yield from c.indices()

    def sem_reads(self) -> Iterator[SemRead]:
        """The semaphores it reads (``pl.semaphore_read``), in evaluation order."""
        for c in self.children():
            yield from c.sem_reads()

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        """JAX's type of the value (``refs``: name -> (shape, dtype) of each load);
        ValueTypeError where JAX raises."""
        raise NotImplementedError

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        """``(numpy array, weak)``: the value from the loaded arrays ``refs``."""
        raise NotImplementedError

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        """Whether the compiler makes the value a constant (MLIR's canonicalization folds
        an operation of constants, and an integer multiplied by 0): Python numbers and
        what is computed from them; not a load, an iota, an index, a reduction."""
        return False

    def conversions(self, refs: Mapping[str, Loaded]) -> Iterator[tuple[Node, str]]:
        """The conversions (``lax.convert_element_type``) jax.numpy makes of its operands
        before its own operation, in order: each operand not of the dtype it becomes, and
        that dtype."""
        return iter(())

    def source(self, w: Writer) -> str:
        raise NotImplementedError


def loads_before(tree: Node, name: str) -> list[str]:
    """The refs ``tree`` loads, in evaluation order, before it first reads the axis
    ``name`` (in an index expression: ``lax.axis_index``, ``lax.axis_size``); all its
    loads where it never does."""
    out: list[str] = []

    def walk(node: Node) -> bool:
        if isinstance(node, Load):
            out.append(node.name)
            return False
        if isinstance(node, Index):
            return name in node.e.names()
        return any(walk(c) for c in node.children())

    walk(tree)
    return out


class Load(Node):
    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        self.name = name

    def loads(self) -> Iterator[str]:
        yield self.name

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        shape, dtype, *sharded = refs[self.name]
        return Ty(tuple(shape), dtype, False, sharded[0] if sharded else None)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        return refs[self.name], False

    def source(self, w: Writer) -> str:
        return f"{w.ref(self.name)}[...]"


class Lit(Node):
    """A Python scalar: weakly typed (int32, float32 or bool until it meets an array)."""

    __slots__ = ("value",)
    value: bool | int | float

    def __init__(self, value: bool | int | float) -> None:
        self.value = value

    @property
    def dtype(self) -> str:
        v = self.value
        return "bool" if isinstance(v, bool) else "int32" if isinstance(v, int) else "float32"

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        return Ty((), self.dtype, True)

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        return True

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        return np.asarray(self.value, dtypes.np_dtype(self.dtype)), True

    def source(self, w: Writer) -> str:
        return repr(self.value)


class Index(Node):
    """An index expression (``mpmd_lab.expr``) as a scalar: ``lax.axis_index('dev')``,
    ``pl.program_id(0)``, a loop variable; int32 (bool for a condition), as JAX's."""

    __slots__ = ("e",)
    e: E.Expr

    def __init__(self, e: E.Expr) -> None:
        self.e = e

    @property
    def key(self) -> str:
        """Its value's key among the loaded refs (no ref name has a space)."""
        return f"index {self.e.label()}"

    def indices(self) -> Iterator[Index]:
        yield self

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        return Ty((), "bool" if self.e.is_bool else "int32", False)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        return np.asarray(refs[self.key], "bool" if self.e.is_bool else np.int32), False

    def source(self, w: Writer) -> str:
        return w.expr(self.e)


class SemRead(Node):
    """``pl.semaphore_read(sem)``: a semaphore's value now, an int32 scalar (what this
    run's order of signals and waits left in it)."""

    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def key(self) -> str:
        """Its value's key among the loaded refs (no ref name has a space)."""
        return f"semaphore_read {self.name}"

    def sem_reads(self) -> Iterator[SemRead]:
        yield self

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        return Ty((), "int32", False)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        return np.asarray(refs[self.key], np.int32), False

    def source(self, w: Writer) -> str:
        return f"pl.semaphore_read({w.ref(self.name)})"


#: binary operators: the symbol -> JAX's primitive (named in its shape message)
_PRIM = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "//": "rem",
    "%": "rem",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "max": "max",
    "min": "min",
}
_CMP = ("==", "!=", "<", "<=", ">", ">=")
#: the comparison operators (a ``Bin`` of one of these is a boolean array)
COMPARISONS = _CMP
_PREC = {"cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "neg": 7}
_NP = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "true_divide",
    "//": "floor_divide",
    "%": "remainder",
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
    "max": "maximum",
    "min": "minimum",
}


def _kind(dtype: str) -> int:
    return 0 if dtype == "bool" else 2 if dtypes.is_float(dtype) else 1


def promote(a: Ty, b: Ty) -> tuple[str, bool]:
    """jax.numpy's result dtype of two operands (a weak Python scalar takes the other's
    dtype unless it is of a higher kind: ``int32 * 2.0`` is float32, and weak as the
    scalar was, so that it takes a float16's dtype in turn), and its weakness. An 8-bit
    float and a float of another dtype: JAX's TypePromotionError (VALUE_FP8_PROMOTION)."""
    if a.weak and b.weak:
        return (a.dtype if _kind(a.dtype) >= _kind(b.dtype) else b.dtype), True
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if _kind(weak.dtype) <= _kind(strong.dtype):
            return strong.dtype, False
        return weak.dtype, True
    if a.dtype != b.dtype and _kind(a.dtype) == _kind(b.dtype) == 2:
        if a.dtype in _FLOAT8 or b.dtype in _FLOAT8:
            raise _no_promotion(a.dtype, b.dtype)
    return dtypes.promote(a.dtype, b.dtype), False


#: the 8-bit floats, which jax.numpy promotes with no other float
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


def _no_promotion(a: str, b: str) -> ValueTypeError:
    """JAX's TypePromotionError for two floats of which one is 8-bit. JAX names the two
    in the order of the set it makes of them, which for ml_dtypes' dtypes (hashed anew
    in each process) differs from run to run: here, in the operands' order."""
    shown = (a, b)
    return ValueTypeError(
        "VALUE_FP8_PROMOTION",
        f"Input dtypes {shown} have no available implicit dtype promotion path. To avoid "
        "unintended promotion, 8-bit floats do not support implicit promotion. If you'd "
        "like your inputs to be promoted to another type, you can do so explicitly using "
        "e.g. x.astype('float32')",
        "TypePromotionError",
    )


def broadcast(shapes: list[tuple[int, ...]], prim: str) -> tuple[int, ...]:
    """numpy's broadcast of ``shapes`` with JAX's messages: operands of different ranks
    are ranked up first (a ValueError there), then each dim agrees or is 1 (``prim``'s
    TypeError)."""
    rank = max(len(s) for s in shapes)
    shown = ", ".join(repr(tuple(s)) for s in shapes)
    out: list[int] = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes], strict=True):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            if any(len(s) != rank for s in shapes):
                raise ValueTypeError(
                    "ADD_SHAPE_MISMATCH",
                    f"Incompatible shapes for broadcasting: shapes=[{shown}]",
                    "ValueError",
                )
            raise ValueTypeError(
                "ADD_SHAPE_MISMATCH",
                f"{prim} got incompatible shapes for broadcasting: {shown}.",
                "TypeError",
            )
        out.append(big.pop() if big else 1)
    return tuple(out)


def _operand_dtype(prim: str, ty: Ty, pos: int, other: Ty | None = None) -> None:
    """jax.numpy's dtype checks of an operand: no semaphore or barrier values, no
    arithmetic negation or subtraction of booleans."""
    if ty.dtype in (SEMAPHORE_DTYPE, BARRIER_DTYPE):
        if other is not None and other.dtype != ty.dtype:
            raise ValueTypeError(
                "SEMAPHORE_ARITH",
                f"dtype={ty.dtype} is not a valid dtype for JAX type promotion.",
                "ValueError",
            )
        raise ValueTypeError(
            "SEMAPHORE_ARITH",
            f"{prim} does not accept dtype {ty.dtype} at position {pos}. Accepted dtypes at "
            f"position {pos} are subtypes of integer, floating, complexfloating.",
            "TypeError",
        )


class Bin(Node):
    """``a OP b``: arithmetic, a comparison, or ``jnp.maximum`` / ``jnp.minimum``."""

    __slots__ = ("op", "a", "b")
    op: str
    a: Node
    b: Node

    def __init__(self, op: str, a: Node, b: Node) -> None:
        self.op, self.a, self.b = op, a, b

    def children(self) -> tuple[Node, ...]:
        return (self.a, self.b)

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        a, b = self.a.typed(refs), self.b.typed(refs)
        _python_division(self)
        prim = _PRIM[self.op]
        _operand_dtype(prim, a, 0, b)
        _operand_dtype(prim, b, 1, a)
        dtype, weak = promote(a, b)
        if self.op == "-" and dtype == "bool":
            raise ValueTypeError(
                "VALUE_DTYPE",
                "sub does not accept dtype bool at position 0. Accepted dtypes at position 0 "
                "are subtypes of integer, floating, complexfloating.",
                "TypeError",
            )
        if self.op == "//" and _kind(dtype) < 2:
            prim = "div"  # jnp.floor_divide of integers divides first (of floats: rem)
        shape = broadcast([a.shape, b.shape], prim)
        split = None
        if a.sharding is not None or b.sharding is not None:
            # (jax.numpy promotes first: the primitive's operands are of the result dtype)
            inner = "float32" if self.op == "/" and not dtypes.is_float(dtype) else dtype
            operands = [(x.shape, dtypes.short(inner), x.sharding) for x in (a, b)]
            out = dtypes.short("bool" if self.op in _CMP else inner)
            bad = sharding.broadcast_error(prim, operands, out)
            if bad is not None:
                raise ValueTypeError("VALUE_SHARDING", bad, "ShardingTypeError")
            split = sharding.broadcast_result([a.sharding, b.sharding], [a.shape, b.shape])
        if self.op in _CMP:
            return Ty(shape, "bool", False, split)
        if self.op == "/" and not dtypes.is_float(dtype):
            return Ty(shape, "float32", weak, split)  # true division of integers
        if self.op in ("//", "%") and dtype == "bool":
            # (jax.numpy's numeric promotion of booleans)
            return Ty(shape, "int32", weak, split)
        return Ty(shape, dtype, weak, split)

    def conversions(self, refs: Mapping[str, Loaded]) -> Iterator[tuple[Node, str]]:
        """Both operands to their promoted dtype (true division of integers: float32; //
        and % of booleans: int32, jax.numpy's numeric promotion)."""
        a, b = self.a.typed(refs), self.b.typed(refs)
        dtype = promote(a, b)[0]
        if self.op == "/" and not dtypes.is_float(dtype):
            dtype = "float32"
        elif self.op in ("//", "%") and dtype == "bool":
            dtype = "int32"
        return _converted(((self.a, a), (self.b, b)), dtype)

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        """Of constants, or integers times a Python 0, a Python 0 divided by integers
        (``//`` or ``%``), integers modulo a Python 0 or 1 (arith.muli by 0, divsi and
        remsi of 0, remsi by 0 and 1 fold; not floats, where NaN and inf stay)."""
        if self.a.constant(refs) and self.b.constant(refs):
            return True
        if _kind(self.typed(refs).dtype) != 1:
            return False
        if self.op == "*":
            return 0 in (_python(self.a), _python(self.b))
        if self.op == "%" and _python(self.b) in (0, 1):
            return True
        return self.op in ("//", "%") and _python(self.a) == 0

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        (x, xw), (y, yw) = self.a.eval(refs), self.b.eval(refs)
        dtype, weak = promote(Ty(x.shape, _name(x), xw), Ty(y.shape, _name(y), yw))
        if self.op == "/" and not dtypes.is_float(dtype):
            dtype = "float32"  # true division of integers
        elif self.op in ("//", "%") and dtype == "bool":
            dtype = "int32"
        dt = dtypes.np_dtype(dtype)
        x, y = np.asarray(x).astype(dt), np.asarray(y).astype(dt)
        with np.errstate(all="ignore"):
            if self.op == "//":
                out = _floor_divide(x, y)
            elif self.op == "%":
                out = _remainder(x, y)
            else:
                out = getattr(np, _NP[self.op])(x, y)
            if self.op in ("max", "min") and _kind(dtype) == 2:
                out = _signed_zero(self.op, x, y, out)
        return np.asarray(out if self.op in _CMP else np.asarray(out).astype(dt)), weak

    def source(self, w: Writer) -> str:
        if self.op in ("max", "min"):
            fn = "maximum" if self.op == "max" else "minimum"
            return f"jnp.{fn}({self.a.source(w)}, {self.b.source(w)})"
        p = _PREC["cmp" if self.op in _CMP else self.op]
        # (Python chains comparisons: a comparison's operand that compares is bracketed)
        left = _wrap(self.a, self.a.source(w), p + 1 if self.op in _CMP else p)
        right = _wrap(self.b, self.b.source(w), p + 1)
        return f"{left} {self.op} {right}"


def _signed_zero(op: str, x: Any, y: Any, out: Any) -> Any:
    """``lax.max`` / ``lax.min`` of two zeros as XLA computes them: -0 is below +0
    (numpy's maximum and minimum return either)."""
    import numpy as np

    neg_x, neg_y = np.signbit(x.astype(np.float32)), np.signbit(y.astype(np.float32))
    neg = (neg_x & neg_y) if op == "max" else (neg_x | neg_y)
    zero = np.zeros_like(out)
    return np.where((x == 0) & (y == 0), np.where(neg, -zero, zero), out)


def _python(n: Node) -> bool | int | float | None:
    """The Python number a value of Python numbers is (Python computes it before JAX
    sees it: ``1 % 0.5`` is 0.0), else None."""
    import operator

    if isinstance(n, Lit):
        return n.value
    if isinstance(n, Neg):
        v = _python(n.a)
        return None if v is None else -v
    if isinstance(n, Bin) and n.op in _PY_OPS:
        a, b = _python(n.a), _python(n.b)
        if a is None or b is None:
            return None
        try:
            return getattr(operator, _PY_OPS[n.op])(a, b)
        except (ZeroDivisionError, OverflowError):
            return None
    return None


#: the operators Python applies to two Python numbers (the operator module's names)
_PY_OPS = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "truediv",
    "//": "floordiv",
    "%": "mod",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
}


def _python_division(n: Bin) -> None:
    """Python's ZeroDivisionError where ``n`` divides two Python numbers by zero (the
    kernel's body raises it as it is traced: EXPR_ZERO_DIVISION)."""
    import operator

    if n.op not in ("/", "//", "%"):
        return
    a, b = _python(n.a), _python(n.b)
    if a is None or b is None or b != 0:
        return
    try:
        getattr(operator, _PY_OPS[n.op])(a, b)
    except ZeroDivisionError as e:
        raise ValueTypeError("EXPR_ZERO_DIVISION", str(e), "ZeroDivisionError") from None


def _int_div(x: Any, y: Any) -> Any:
    """``lax.div`` of integers as XLA computes it: truncated toward zero; by zero, every
    bit set (-1, or an unsigned dtype's largest); the smallest signed value by -1, itself."""
    import numpy as np

    x, y = np.broadcast_arrays(x, y)
    low = np.iinfo(x.dtype).min
    wraps = (x == low) & (y == -1) if low < 0 else np.zeros(x.shape, bool)
    zero = y == 0
    safe = np.where(zero | wraps, np.ones_like(y), y)
    q = (x - np.fmod(x, safe)) // safe  # (exact: the remainder is taken off first)
    return np.where(zero, ~np.zeros_like(x), np.where(wraps, x, q))


def _int_rem(x: Any, y: Any) -> Any:
    """``lax.rem`` of integers as XLA computes it: the sign of ``x``; by zero, ``x``; the
    smallest signed value by -1, zero."""
    import numpy as np

    x, y = np.broadcast_arrays(x, y)
    low = np.iinfo(x.dtype).min
    wraps = (x == low) & (y == -1) if low < 0 else np.zeros(x.shape, bool)
    zero = y == 0
    safe = np.where(zero | wraps, np.ones_like(y), y)
    return np.where(zero, x, np.fmod(x, safe))


def _floor_divide(x: Any, y: Any) -> Any:
    """``jnp.floor_divide`` as jax.numpy computes it (not numpy's: an integer divided by
    zero is -1 or -2 there, a float's quotient is rounded from the corrected division)."""
    import numpy as np

    if x.dtype.kind == "u":
        return _int_div(x, y)
    if x.dtype.kind in "ib":
        q = _int_div(x, y)
        select = (np.sign(x) != np.sign(y)) & (_int_rem(x, y) != 0)
        return np.where(select, q - np.ones_like(q), q)
    # _float_divmod: x1 - mod divided by x2 (x1 itself by zero), one off where the signs
    # of mod and x2 differ, rounded half away from zero (lax.round)
    mod = np.fmod(x, y)
    div = np.true_divide(np.where(y == 0, x, x - mod), y)
    one = np.ones_like(div)
    div = np.where((mod != 0) & (np.sign(y) != np.sign(mod)), div - one, div)
    whole = np.trunc(div)
    half = np.abs(div - whole) >= np.asarray(0.5, div.dtype)
    return np.where(half, whole + np.copysign(one, div), whole)


def _remainder(x: Any, y: Any) -> Any:
    """``jnp.remainder`` as jax.numpy computes it: the truncated remainder (an integer's
    by zero taken by one), plus ``y`` where its sign and the remainder's differ; a zero
    keeps ``x``'s sign (numpy's takes ``y``'s)."""
    import numpy as np

    if x.dtype.kind in "iub":
        y = np.where(y == 0, np.ones_like(y), y)
        trunc = _int_rem(x, y)
    else:
        trunc = np.fmod(x, y)
    zero = np.zeros_like(trunc)
    plus = ((trunc < zero) != (y < np.zeros_like(y))) & (trunc != zero)
    return np.where(plus, trunc + y, trunc)


class Neg(Node):
    __slots__ = ("a",)
    a: Node

    def __init__(self, a: Node) -> None:
        self.a = a

    def children(self) -> tuple[Node, ...]:
        return (self.a,)

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        a = self.a.typed(refs)
        _operand_dtype("neg", a, 0)
        if a.dtype == "bool":
            raise ValueTypeError(
                "VALUE_DTYPE",
                "neg does not accept dtype bool. Accepted dtypes are subtypes of integer, "
                "floating, complexfloating.",
                "TypeError",
            )
        return a

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        return self.a.constant(refs)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        x, w = self.a.eval(refs)
        with np.errstate(all="ignore"):
            return np.negative(x), w

    def source(self, w: Writer) -> str:
        return "-" + _wrap(self.a, self.a.source(w), _PREC["neg"])


class Where(Node):
    """``jnp.where(c, x, y)``: ``c`` taken as a truth value."""

    __slots__ = ("c", "x", "y")
    c: Node
    x: Node
    y: Node

    def __init__(self, c: Node, x: Node, y: Node) -> None:
        self.c, self.x, self.y = c, x, y

    def children(self) -> tuple[Node, ...]:
        return (self.c, self.x, self.y)

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        c, x, y = (n.typed(refs) for n in self.children())
        for i, t in enumerate((c, x, y)):
            _operand_dtype("select_n", t, i)
        dtype, weak = promote(x, y)
        # jnp.where ranks up and broadcasts its three at once (x and y only, by a scalar
        # condition)
        shapes = [c.shape, x.shape, y.shape] if c.shape else [x.shape, y.shape]
        try:
            shape = broadcast(shapes, "select_n")
        except ValueTypeError:
            shown = ", ".join(repr(tuple(s)) for s in shapes)
            raise ValueTypeError(
                "ADD_SHAPE_MISMATCH",
                f"Incompatible shapes for broadcasting: shapes=[{shown}]",
                "ValueError",
            ) from None
        return Ty(shape, dtype, weak)

    def conversions(self, refs: Mapping[str, Loaded]) -> Iterator[tuple[Node, str]]:
        """``x`` and ``y`` to their promoted dtype (a condition not boolean is compared
        with zero, not converted)."""
        x, y = self.x.typed(refs), self.y.typed(refs)
        return _converted(((self.x, x), (self.y, y)), promote(x, y)[0])

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        return all(n.constant(refs) for n in self.children())

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        (c, _), (x, xw), (y, yw) = (n.eval(refs) for n in self.children())
        dtype, weak = promote(Ty(x.shape, _name(x), xw), Ty(y.shape, _name(y), yw))
        dt = dtypes.np_dtype(dtype)
        return np.where(np.asarray(c).astype(bool), x.astype(dt), y.astype(dt)), weak

    def source(self, w: Writer) -> str:
        c, x, y = (n.source(w) for n in self.children())
        return f"jnp.where({c}, {x}, {y})"


class _Converted(Node):
    """A value ``a`` made a value of ``dtype`` (``Cast``, ``Bitcast``)."""

    __slots__ = ("a", "dtype")
    a: Node
    dtype: str

    def __init__(self, a: Node, dtype: str) -> None:
        self.a, self.dtype = a, dtype

    def children(self) -> tuple[Node, ...]:
        return (self.a,)

    def constant(self, refs: Mapping[str, Loaded]) -> bool:
        return self.a.constant(refs)


class Cast(_Converted):
    """``x.astype(dtype)`` (jax.numpy's conversion: float to int truncates toward zero)."""

    __slots__ = ()

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        a = self.a.typed(refs)
        _operand_dtype("convert_element_type", a, 0)
        return Ty(a.shape, dtypes.canonical(self.dtype), False)

    def conversions(self, refs: Mapping[str, Loaded]) -> Iterator[tuple[Node, str]]:
        return _converted(((self.a, self.a.typed(refs)),), dtypes.canonical(self.dtype))

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        x, _ = self.a.eval(refs)
        x = np.asarray(x)
        new = dtypes.np_dtype(self.dtype)
        if x.dtype.kind == "f" or x.dtype.name in _NARROW_FLOATS:
            if new.kind in "iu":  # XLA's conversion saturates, and NaN is zero
                info = np.iinfo(new)
                wide = x.astype(np.float64)
                whole = np.clip(np.trunc(np.nan_to_num(wide, nan=0.0)), info.min, info.max)
                return whole.astype(new), False
        with np.errstate(all="ignore"):
            return x.astype(new), False

    def source(self, w: Writer) -> str:
        return f"{_wrap(self.a, self.a.source(w), 99)}.astype({dtypes.jnp_expr(self.dtype)})"


class Bitcast(_Converted):
    """``lax.bitcast_convert_type(x, dtype)``: the same bits read as ``dtype`` (a wider
    source gains a minor dim of the width ratio, a narrower one loses it, as JAX's rule
    says; Mosaic GPU lowers only dtypes of one width)."""

    __slots__ = ()

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        a = self.a.typed(refs)
        _operand_dtype("bitcast_convert_type", a, 0)
        new = dtypes.canonical(self.dtype)
        # JAX's shape rule, then its dtype rule
        src, dst = dtypes.bits(a.dtype), dtypes.bits(new)
        if src == dst:
            shape = a.shape
        elif src > dst:
            shape = (*a.shape, src // dst)
        elif not a.shape or a.shape[-1] * src != dst:
            last = a.shape[-1] if a.shape else 1
            raise ValueTypeError(
                "BITCAST_VALUE_SHAPE",
                f"Attempting to convert array of shape {a.shape!r} from {a.dtype} of size "
                f"{src} bits to {new} of size {dst}, bits but {last} * {src} != {dst}",
                "ValueError",
            )
        else:
            shape = a.shape[:-1]
        if "bool" in (a.dtype, new) and a.dtype != new:
            # (numpy's repr of a dtype quotes its own names, not ml_dtypes')
            shown = f"'{new}'" if new not in _NARROW_FLOATS else new
            raise ValueTypeError(
                "BITCAST_VALUE_BOOL",
                "lax.bitcast_convert_type does not support bool or complex values unless the "
                f"operand and destination types match. Got operand dtype={a.dtype}, "
                f"new_dtype=dtype({shown}). Consider using the arr.view() method instead.",
                "TypeError",
            )
        return Ty(shape, new, False)

    def widths_differ(self, refs: Mapping[str, Loaded]) -> str | None:
        """The operand's dtype where it is not as wide as ``dtype`` (Mosaic GPU does not
        lower that bitcast), else None."""
        a = self.a.typed(refs).dtype
        return a if dtypes.bits(a) != dtypes.bits(dtypes.canonical(self.dtype)) else None

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        x, _ = self.a.eval(refs)
        x = np.asarray(x, order="C")  # (ascontiguousarray makes a scalar rank 1)
        new = dtypes.np_dtype(dtypes.canonical(self.dtype))
        if x.dtype.itemsize == new.itemsize:
            return x.view(new), False
        if x.dtype.itemsize > new.itemsize:
            return x[..., None].view(new), False
        return x.view(new)[..., 0], False

    def source(self, w: Writer) -> str:
        return f"lax.bitcast_convert_type({self.a.source(w)}, {dtypes.jnp_expr(self.dtype)})"


class Iota(Node):
    """``lax.broadcasted_iota(dtype, shape, dim)``: each element's index along ``dim``."""

    __slots__ = ("dtype", "shape", "dim")
    dtype: str
    shape: tuple[int, ...]
    dim: int

    def __init__(self, dtype: str, shape: tuple[int, ...], dim: int) -> None:
        self.dtype, self.shape, self.dim = dtype, shape, dim

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        return Ty(self.shape, self.dtype, False)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        dt = dtypes.np_dtype(self.dtype)
        line = np.arange(self.shape[self.dim]).astype(dt)
        view = [1] * len(self.shape)
        view[self.dim] = self.shape[self.dim]
        return np.broadcast_to(line.reshape(view), self.shape).copy(), False

    def source(self, w: Writer) -> str:
        return f"lax.broadcasted_iota({dtypes.jnp_expr(self.dtype)}, {self.shape!r}, {self.dim})"


#: jax.numpy's result dtype of a sum: small integers and booleans are summed in the
#: default integer of their signedness
_SUM_DTYPE = {
    "bool": "int32",
    "int8": "int32",
    "int16": "int32",
    "uint8": "uint32",
    "uint16": "uint32",
}
#: the floats jnp.sum adds in float32 (its upcast_f16_for_computation)
_F16 = ("float16", "bfloat16")
#: ml_dtypes' floats (numpy's kind "V" for them)
_NARROW_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
_REDUCE_PRIM = {"sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min"}


class Reduce(Node):
    """``jnp.sum`` / ``jnp.max`` / ``jnp.min`` of a value over ``axis`` (an int, a tuple
    of ints, or None: every axis), with ``keepdims``. A sum of booleans or of 8- and
    16-bit integers is in int32 (uint32), as jax.numpy sums them."""

    __slots__ = ("fn", "a", "axis", "keepdims")
    fn: str
    a: Node
    axis: int | tuple[int, ...] | None
    keepdims: bool

    def __init__(
        self, fn: str, a: Node, axis: int | tuple[int, ...] | None, keepdims: bool = False
    ) -> None:
        self.fn, self.a, self.axis, self.keepdims = fn, a, axis, keepdims

    def children(self) -> tuple[Node, ...]:
        return (self.a,)

    def axes(self, rank: int) -> tuple[int, ...]:
        """The axes reduced, each in ``[0, rank)``; JAX's ValueError when one is out of
        bounds or given twice."""
        if self.axis is None:
            return tuple(range(rank))
        given = (self.axis,) if isinstance(self.axis, int) else self.axis
        out: list[int] = []
        for ax in given:
            if not -rank <= ax < rank:
                raise ValueTypeError(
                    "VALUE_AXIS",
                    f"axis {ax} is out of bounds for array of dimension {rank}",
                    "ValueError",
                )
            out.append(ax % rank)
        if len(set(out)) != len(out):
            raise ValueTypeError(
                "VALUE_AXIS", f"duplicate value in 'axis': {tuple(given)!r}", "ValueError"
            )
        return tuple(sorted(out))

    def partial(self, rank: int) -> bool:
        """Whether it keeps some axis of its operand (a reduction along an axis, not of
        the whole value)."""
        return len(self.axes(rank)) < rank

    def dtype_of(self, dtype: str) -> str:
        return _SUM_DTYPE.get(dtype, dtype) if self.fn == "sum" else dtype

    def computed_in(self, dtype: str) -> str:
        """The dtype it reduces a value of ``dtype`` in: its result's, but float32 for a
        sum of 16-bit floats (jax.numpy's upcast_f16_for_computation)."""
        return "float32" if self.fn == "sum" and dtype in _F16 else self.dtype_of(dtype)

    def conversions(self, refs: Mapping[str, Loaded]) -> Iterator[tuple[Node, str]]:
        a = self.a.typed(refs)
        return _converted(((self.a, a),), self.computed_in(a.dtype))

    def typed(self, refs: Mapping[str, Loaded]) -> Ty:
        a = self.a.typed(refs)
        _operand_dtype(_REDUCE_PRIM[self.fn], a, 0)
        axes = self.axes(len(a.shape))
        shape = tuple(
            1 if i in axes else d for i, d in enumerate(a.shape) if self.keepdims or i not in axes
        )
        return Ty(shape, self.dtype_of(a.dtype), False)

    def eval(self, refs: Mapping[str, Any]) -> tuple[Any, bool]:
        import numpy as np

        x, _ = self.a.eval(refs)
        x = np.asarray(x)
        axes = self.axes(x.ndim)
        dt = dtypes.np_dtype(self.dtype_of(_name(x)))
        # jnp.sum of 16-bit floats adds in float32 and rounds the sum once
        acc = dtypes.np_dtype(self.computed_in(_name(x)))
        ufunc: Any = {"sum": np.add, "max": np.maximum, "min": np.minimum}[self.fn]
        with np.errstate(all="ignore"):
            out = ufunc.reduce(x.astype(acc), axis=axes, keepdims=self.keepdims)
        return np.asarray(out).astype(dt), False

    def source(self, w: Writer) -> str:
        args = [self.a.source(w)]
        if self.axis is not None:
            args.append(f"axis={self.axis!r}")
        if self.keepdims:
            args.append("keepdims=True")
        return f"jnp.{self.fn}({', '.join(args)})"


def _converted(operands: tuple[tuple[Node, Ty], ...], dtype: str) -> Iterator[tuple[Node, str]]:
    """Each operand (and its type) not of ``dtype``, made one (``Node.conversions``)."""
    return ((n, dtype) for n, t in operands if t.dtype != dtype)


def _name(a: Any) -> str:
    """A numpy array's dtype as a scenario names it."""
    import numpy as np

    dt = np.asarray(a).dtype
    return "bool" if dt == np.bool_ else str(dt.name)


def _prec(n: Node) -> int:
    if isinstance(n, Index):
        return 99 if isinstance(n.e, E.Name | E.Call | E.Const) else 0
    if isinstance(n, Bin) and n.op not in ("max", "min"):
        return _PREC["cmp" if n.op in _CMP else n.op]
    if isinstance(n, Neg):
        return _PREC["neg"]
    if isinstance(n, Lit) and not isinstance(n.value, bool) and n.value < 0:
        return _PREC["neg"]
    return 99


def _wrap(n: Node, text: str, prec: int) -> str:
    return f"({text})" if _prec(n) < prec else text


# ---------------------------------------------------------------- parsing

_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_GRAMMAR = (
    "loads ref[...], numbers, axis names, lax.axis_index, pl.program_id, + - * / // %, "
    "comparisons, jnp.where, jnp.maximum, jnp.minimum, x.astype(jnp.DTYPE), "
    "lax.bitcast_convert_type(x, jnp.DTYPE), lax.broadcasted_iota(jnp.DTYPE, shape, dim), "
    "pl.semaphore_read(sem), jnp.sum / jnp.max / jnp.min(x, axis=..., keepdims=...)"
)


def parse(text: str) -> Node:
    """A value from its text; ValueSyntaxError when it is none."""
    hit = _PARSED.get(text)
    if hit is not None:
        return hit
    if not isinstance(text, str) or not text.strip():
        raise ValueSyntaxError("a value is a non-empty string")
    if len(text) > MAX_TEXT:
        raise ValueSyntaxError(f"a value is at most {MAX_TEXT} characters")
    if not text.isascii() or any(not ch.isprintable() for ch in text):
        raise ValueSyntaxError("a value is printable ASCII")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueSyntaxError(f"not an expression: {e.msg} at column {e.offset}") from None
    node = _node(tree.body, 0)
    if len(_PARSED) >= 1024:
        _PARSED.clear()
    _PARSED[text] = node
    return node


_PARSED: dict[str, Node] = {}


def _node(n: ast.AST, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise ValueSyntaxError("value nested too deeply")
    d = depth + 1
    if isinstance(n, ast.Constant) and isinstance(n.value, bool | int | float):
        v = n.value
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**31) <= v < 2**31:
            raise ValueSyntaxError(f"{v} does not fit an int32")
        if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
            raise ValueSyntaxError("a literal is finite")
        return Lit(v)
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
        if n.slice.value is Ellipsis:
            return Load(_ref_name(n.value))
    if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
        return Bin(_BINOPS[type(n.op)], _node(n.left, d), _node(n.right, d))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        inner = _node(n.operand, d)
        if isinstance(inner, Lit):  # (Python negates a number: -True is the int -1)
            return Lit(-inner.value)
        return Neg(inner)
    if isinstance(n, ast.Compare):
        if len(n.ops) != 1 or type(n.ops[0]) not in _CMPOPS:
            raise ValueSyntaxError("a comparison compares two values with ==, !=, <, <=, > or >=")
        return Bin(_CMPOPS[type(n.ops[0])], _node(n.left, d), _node(n.comparators[0], d))
    if isinstance(n, ast.Name):
        return Index(_index(n.id))
    if isinstance(n, ast.Call) and _dotted(n.func) in _INDEX_CALLS:
        return _index_call(n)
    if isinstance(n, ast.Call):
        return _call(n, d)
    raise ValueSyntaxError(f"{ast.unparse(n)[:40]!r} is not part of a value ({_GRAMMAR})")


#: the calls that read where the kernel runs, as JAX writes them and as index
#: expressions do
_INDEX_CALLS = {
    "lax.axis_index": "",
    "jax.lax.axis_index": "",
    "pl.program_id": "program_id",
    "pl.num_programs": "num_programs",
    "lax.axis_size": "axis_size",
    "jax.lax.axis_size": "axis_size",
    "program_id": "program_id",
    "num_programs": "num_programs",
    "axis_size": "axis_size",
}


def _index(text: str) -> E.Expr:
    try:
        return E.parse(text)
    except E.ExprError as e:
        raise ValueSyntaxError(str(e)) from None


def _index_call(n: ast.Call) -> Index:
    """``lax.axis_index('dev')`` (the name ``dev``), ``pl.program_id(0)``, ...: an index
    expression read where the kernel runs."""
    fn = _INDEX_CALLS[_dotted(n.func)]
    if len(n.args) != 1 or n.keywords:
        raise ValueSyntaxError(f"{_dotted(n.func)}() takes one argument")
    a = n.args[0]
    arg = a.value if isinstance(a, ast.Constant) else a.id if isinstance(a, ast.Name) else None
    if not isinstance(arg, str | int) or isinstance(arg, bool):
        raise ValueSyntaxError(f"{_dotted(n.func)}() takes an axis name or a grid dimension")
    return Index(_index(str(arg) if not fn else f"{fn}({arg})"))


def _ref_name(n: ast.AST) -> str:
    """The ref a load names: ``x`` or a tuple leaf ``x[0]``."""
    if isinstance(n, ast.Name):
        return n.id
    if (
        isinstance(n, ast.Subscript)
        and isinstance(n.value, ast.Name)
        and isinstance(n.slice, ast.Constant)
        and type(n.slice.value) is int
    ):
        return f"{n.value.id}[{n.slice.value}]"
    raise ValueSyntaxError("a load is ref[...] (or param[i][...] for a tuple leaf)")


def _dotted(n: ast.AST) -> str:
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute):
        return f"{_dotted(n.value)}.{n.attr}"
    return "?"


def _dtype(n: ast.AST) -> str:
    text = _dotted(n)
    name = text.removeprefix("jnp.").removeprefix("np.")
    name = "bool" if name == "bool_" else name
    if name not in _DTYPES:
        raise ValueSyntaxError(f"{text} is not a dtype (jnp.float32, jnp.int32, ...)")
    return name


def _reduce(fn: str, n: ast.Call, d: int) -> Reduce:
    """``jnp.sum(x)``, ``jnp.max(x, axis=1)``, ``jnp.min(x, axis=(0, 1), keepdims=True)``."""
    if len(n.args) != 1:
        raise ValueSyntaxError(f"jnp.{fn}(x, axis=..., keepdims=...) takes one value")
    axis: int | tuple[int, ...] | None = None
    keepdims = False
    for k in n.keywords:
        try:
            v = ast.literal_eval(k.value)
        except ValueError:
            raise ValueSyntaxError(f"jnp.{fn}'s {k.arg} is a literal") from None
        if k.arg == "axis":
            ok = (
                v is None
                or type(v) is int
                or (isinstance(v, tuple) and len(v) <= 8 and all(type(a) is int for a in v))
            )
            if not ok:
                raise ValueSyntaxError(f"jnp.{fn}'s axis is None, an int or a tuple of ints")
            axis = v
        elif k.arg == "keepdims" and type(v) is bool:
            keepdims = v
        else:
            raise ValueSyntaxError(f"jnp.{fn} takes axis= and keepdims= (True or False)")
    return Reduce(fn, _node(n.args[0], d), axis, keepdims)


def _call(n: ast.Call, d: int) -> Node:
    fn = _dotted(n.func)
    if fn in ("jnp.sum", "jnp.max", "jnp.min"):
        return _reduce(fn[4:], n, d)
    if n.keywords:
        raise ValueSyntaxError(f"{fn}(...) takes positional arguments only")
    args = n.args
    if isinstance(n.func, ast.Attribute) and n.func.attr == "astype":
        if len(args) != 1:
            raise ValueSyntaxError("x.astype(dtype) takes one dtype")
        inner = _node(n.func.value, d)
        if isinstance(inner, Lit):  # (JAX: AttributeError, or a SyntaxError for 2.astype)
            raise ValueSyntaxError(
                f"{ast.unparse(n.func.value)} is a Python number, which has no .astype: "
                "write the number alone (it takes the dtype of the value it meets)"
            )
        return Cast(inner, _dtype(args[0]))
    if fn == "lax.bitcast_convert_type":
        if len(args) != 2:
            raise ValueSyntaxError("lax.bitcast_convert_type(x, dtype) takes a value and a dtype")
        return Bitcast(_node(args[0], d), _dtype(args[1]))
    if fn == "pl.semaphore_read":
        if len(args) != 1 or not isinstance(args[0], ast.Name):
            raise ValueSyntaxError("pl.semaphore_read(sem) takes one semaphore (a name)")
        return SemRead(args[0].id)
    if fn == "jnp.where":
        if len(args) != 3:
            raise ValueSyntaxError("jnp.where(c, x, y) takes three values")
        c, x, y = (_node(a, d) for a in args)
        return Where(c, x, y)
    if fn in ("jnp.maximum", "jnp.minimum"):
        if len(args) != 2:
            raise ValueSyntaxError(f"{fn}(x, y) takes two values")
        return Bin("max" if fn == "jnp.maximum" else "min", _node(args[0], d), _node(args[1], d))
    if fn == "lax.broadcasted_iota":
        if len(args) != 3:
            raise ValueSyntaxError("lax.broadcasted_iota(dtype, shape, dim) takes three arguments")
        dtype = _dtype(args[0])
        try:
            shape = ast.literal_eval(args[1])
            dim = ast.literal_eval(args[2])
        except ValueError:
            raise ValueSyntaxError(
                "broadcasted_iota's shape and dim are literal integers"
            ) from None
        shape = (shape,) if type(shape) is int else shape
        ok = isinstance(shape, tuple | list) and all(type(s) is int and s > 0 for s in shape)
        if not ok or type(dim) is not int or not 0 <= dim < len(shape):
            raise ValueSyntaxError(
                "broadcasted_iota takes a shape of positive ints and a dim in it"
            )
        if dtype == "bool":
            raise ValueSyntaxError("broadcasted_iota makes numbers: an integer or float dtype")
        if len(shape) > 8 or any(s > 2**20 for s in shape):
            raise ValueSyntaxError("broadcasted_iota's shape is too large")
        return Iota(dtype, tuple(shape), dim)
    raise ValueSyntaxError(f"unknown function {fn}(...): {_GRAMMAR}")


def _check(text: str) -> str:
    try:
        parse(text)
    except ValueSyntaxError as e:
        raise ValueError(str(e)) from None
    return text


ValueText = Annotated[str, AfterValidator(_check)]


__all__ = ["COMPARISONS", "Node", "Reduce", "Ty", "ValueTypeError", "parse", "promote"]
