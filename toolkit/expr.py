"""Index expressions: the integers and conditions a kernel computes from where it runs.

A scenario writes them as short strings wherever an index, a device id, a cluster block,
a loop bound or a condition is taken::

    "(dev + i) % 4"      "1 - dev"      "program_id(0) * 128"      "wg == 0 and i < 3"

The grammar is a small subset of Python, parsed with :mod:`ast` (nothing is evaluated
by Python): integers, names, ``+ - * // %``, unary ``-``, comparisons, ``and``/``or``/
``not``, and the calls ``program_id(d)``, ``num_programs(d)`` and ``axis_size(name)``.
A name is a loop variable (innermost first) or a mesh axis, whose value is
``lax.axis_index(name)``: a grid, cluster or thread axis of the program, or a
device-mesh axis. Names are bound by :mod:`mpmd_lab.plan`; here an expression only
knows how to evaluate, print as JAX source and print as a label.

Python semantics for Python ints (constants, axis sizes): ``//`` and ``%`` floor, as
jax.numpy's operators do on traced integers, so the exported source writes them as they
are. A result that reads a traced value (an axis index, a program id, a loop variable)
is JAX's int32: it wraps past 2**31 (``b * 65536 * 32768`` is -2**31 at ``b = 1``), and
``x // 0`` / ``x % 0`` give jax.numpy's values (-1 at 0 else -2, and 0); of Python ints
they are Python's ZeroDivisionError at trace (:class:`ExprZeroDivision`).

Two forms read data instead of where the kernel runs: a scalar load ``ids[0]``,
``ids[dev, 1]``, ``n_ref[...]`` (a parameter, output, scratch or ``let`` view indexed
down to one element, as ``ref[...]`` of a rank-0 ref) and ``pl.semaphore_read(sem)``.
They evaluate only against an :class:`Env` with a :class:`DataReader` (the simulator's
memory); without one they raise :class:`ExprDataDependent`, and :func:`reads_data`
says which expressions are data-dependent.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from mpmd_lab.record import Record

#: Longest expression text accepted (they are typed by hand).
MAX_TEXT = 200
MAX_DEPTH = 32

FUNCTIONS = ("program_id", "num_programs", "axis_size")


class ExprError(ValueError):
    """Not an expression of the grammar above (the message says what)."""


class ExprZeroDivision(ExprError):
    """``//`` or ``%`` by zero of Python ints (no traced value): Python's
    ZeroDivisionError when JAX traces the kernel. ``message``: Python's exact one."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(f"{message} in {where}")
        self.message = message


class ExprDataDependent(ExprError):
    """The expression reads memory (a scalar load, a semaphore's value) and the
    environment has no data to read it from (the graph, a static bound)."""


#: Python's ZeroDivisionError messages, per operator
ZERO_DIVISION = {"//": "integer division or modulo by zero", "%": "integer modulo by zero"}

#: the range of JAX's index type (int32 unless x64): a traced result outside wraps
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def wrap_int32(v: int) -> int:
    """``v`` as int32 arithmetic leaves it (two's complement wraparound)."""
    return (v + 2**31) % 2**32 - 2**31


def traced(e: Expr) -> bool:
    """Whether ``e`` is a traced int32 when JAX traces the kernel (it reads an axis
    index, a program id or a loop variable), not a Python int (constants, axis sizes,
    ``num_programs``): traced arithmetic is int32 and wraps, Python's does not."""
    if isinstance(e, Name):
        return True
    if isinstance(e, Call):
        return e.fn == "program_id"
    if isinstance(e, Load | SemRead):
        return True
    return any(traced(sub) for sub in parts(e))


def parts(e: Expr) -> tuple[Expr, ...]:
    """The sub-expressions of ``e`` (its operands)."""
    items = getattr(e, "items", None)
    if items is not None:
        return tuple(items)
    return tuple(x for x in (getattr(e, "a", None), getattr(e, "b", None)) if isinstance(x, Expr))


class DataReader(Protocol):
    """Where an expression's loads and semaphore reads take their values (the
    simulator's memory, as one actor sees it now)."""

    def load(self, name: str, index: tuple[int, ...]) -> int:
        """The element ``index`` of the ref ``name`` (an integer or a truth value)."""
        ...

    def semaphore(self, name: str) -> int:
        """The value of the semaphore ``name`` names (``pl.semaphore_read``)."""
        ...


class Env(Record):
    """What an expression evaluates against: one actor's coordinates at one moment.

    ``values``: name -> int for axis indices and loop variables; ``sizes``: axis name ->
    size; ``pids`` / ``npids``: ``pl.program_id`` and ``pl.num_programs`` per grid dim;
    ``data``: where loads and semaphore reads read (None: nowhere, they raise
    :class:`ExprDataDependent`).
    """

    __slots__ = ("values", "sizes", "pids", "npids", "data")
    values: Mapping[str, int]
    sizes: Mapping[str, int]
    pids: tuple[int, ...]
    npids: tuple[int, ...]
    data: DataReader | None

    def __init__(
        self,
        values: Mapping[str, int],
        sizes: Mapping[str, int],
        pids: tuple[int, ...] = (),
        npids: tuple[int, ...] = (),
        data: DataReader | None = None,
    ) -> None:
        self.values = values
        self.sizes = sizes
        self.pids = pids
        self.npids = npids
        self.data = data


class Writer:
    """How :meth:`Expr.source` writes names and sizes (the default: as JAX source)."""

    def name(self, n: str) -> str:
        """A free name: an axis index (``lax.axis_index('dev')``) or a loop variable."""
        return f"lax.axis_index({n!r})"

    def axis_size(self, n: str) -> str:
        return f"lax.axis_size({n!r})"

    def ref(self, n: str) -> str:
        """A ref a load or a semaphore read names (as the kernel's parameter)."""
        return n


class _LabelWriter(Writer):
    def name(self, n: str) -> str:
        return n

    def axis_size(self, n: str) -> str:
        return f"axis_size({n})"


LABEL = _LabelWriter()

#: no names, no calls (shared: a leaf's answer, asked of every index expression)
_NONE: frozenset[str] = frozenset()


def _union(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    """``a | b``, without a new set when one is empty (a constant's, mostly)."""
    return (a | b if a else b) if b else a


class Expr(Record):
    """A parsed expression (immutable, hashable): a :class:`~mpmd_lab.record.Record`
    (a dataclass's eq, hash and repr, without its cost at import).

    Each node keeps its free names, its calls and its Python divisions, made once by
    its constructor from its operands' (``_names``, ``_calls``, ``_divisions``: facts of
    the tree, not fields; a subclass's fields are its own ``__slots__``): every rule
    that asks them of an expression reads an attribute, where walking the tree again
    per rule and per check was the cost. ``has_truth`` (read as is, a fact too): whether
    a truth value (a comparison, ``and``/``or``, ``not``) is in it outside a load's
    index, so its value may be a bool to JAX (``value_type``)."""

    __slots__ = ("_names", "_calls", "_divisions", "has_truth")
    _names: frozenset[str]
    _calls: frozenset[str]
    _divisions: tuple[BinOp, ...]
    has_truth: bool

    def eval(self, env: Env) -> int:
        """The value against ``env`` (its ``walked`` function's)."""
        return walked(self)(env)

    def _compile(self) -> Callable[[Env], int]:
        """A function of an ``Env`` that computes the value, its operands' functions
        made once into it (a class defines this, or overrides ``eval``, whose bound
        method is then its function)."""
        if type(self).eval is Expr.eval:
            raise NotImplementedError(f"{type(self).__name__} defines neither _compile nor eval")
        return self.eval

    def _python(self) -> str | None:
        """The value as one Python expression of ``env`` (``compiled``'s fast path: the
        values it computes where nothing fails are the walk's; ``_i32``, ``_neg32``:
        the walk's int32 wrap), or None where the walk alone computes it (a load, a
        semaphore read: what the engine's data reader answers)."""
        return None

    def source(self, w: Writer) -> str:
        """JAX source, names and sizes written by ``w``."""
        raise NotImplementedError

    def label(self) -> str:
        """Compact text for labels (the expression as a user writes it)."""
        return self.source(LABEL)

    def names(self) -> frozenset[str]:
        """The free names (axes and loop variables) the expression reads."""
        return self._names

    def calls(self) -> frozenset[str]:
        """The calls it makes (``program_id``, ...; ``load`` and ``semaphore_read`` for
        the data reads)."""
        return self._calls

    def unbound(self, bound: frozenset[str] | set[str]) -> str | None:
        """The first name (in sorted order) the expression reads that ``bound`` lacks."""
        names = self._names
        if names and not names <= bound:
            return min(n for n in names if n not in bound)
        return None

    def python_divisions(self) -> tuple[BinOp, ...]:
        """The ``//`` and ``%`` in it that Python computes (no traced value in them: a
        division by zero there is Python's ZeroDivisionError at trace), outermost first,
        the right operand's before the left's."""
        return self._divisions

    @property
    def is_const(self) -> bool:
        return not self._names and not self._calls

    def python_int(self) -> int | None:
        """The int Python computes for a constant expression that is not a comparison
        (``"4 - 0"``: where the generated code runs it, JAX is given that int), or None
        (not constant, a bool, or a division by zero: its own error, at trace)."""
        if not self.is_const or self.is_bool:
            return None
        try:
            return self.eval(Env({}, {}))
        except ExprError:
            return None

    @property
    def is_bool(self) -> bool:
        return False


class Const(Expr):
    __slots__ = ("value",)
    value: int

    def __init__(self, value: int) -> None:
        self.value = value
        self._names = self._calls = _NONE
        self._divisions = ()
        self.has_truth = False

    def _compile(self) -> Callable[[Env], int]:
        value = self.value
        return lambda env: value

    def _python(self) -> str | None:
        return f"({self.value!r})"

    def source(self, w: Writer) -> str:
        return repr(self.value)


class Name(Expr):
    __slots__ = ("id",)
    id: str

    def __init__(self, id: str) -> None:
        self.id = id
        self._names = frozenset((id,))
        self._calls = _NONE
        self._divisions = ()
        self.has_truth = False

    def _compile(self) -> Callable[[Env], int]:
        name = self.id

        def value(env: Env) -> int:
            try:
                return env.values[name]
            except KeyError:
                raise ExprError(f"{name!r} has no value here") from None

        return value

    def _python(self) -> str | None:
        return f"env.values[{self.id!r}]"

    def source(self, w: Writer) -> str:
        return w.name(self.id)


class Call(Expr):
    __slots__ = ("fn", "arg")
    fn: str  # program_id | num_programs | axis_size
    arg: int | str

    def __init__(self, fn: str, arg: int | str) -> None:
        self.fn = fn
        self.arg = arg
        self._names = frozenset((str(arg),)) if fn == "axis_size" else _NONE
        self._calls = frozenset((fn,))
        self._divisions = ()
        self.has_truth = False

    def _compile(self) -> Callable[[Env], int]:
        if self.fn == "axis_size":
            axis = str(self.arg)

            def size(env: Env) -> int:
                try:
                    return env.sizes[axis]
                except KeyError:
                    raise ExprError(f"no axis named {axis!r}") from None

            return size
        d = int(self.arg)
        if self.fn == "program_id":  # (past the grid's dims: 0 programs in, 1 of them)
            return lambda env: env.pids[d] if d < len(env.pids) else 0
        return lambda env: env.npids[d] if d < len(env.npids) else 1

    def _python(self) -> str | None:
        if self.fn == "axis_size":
            return f"env.sizes[{str(self.arg)!r}]"
        d = int(self.arg)
        if self.fn == "program_id":
            return f"(env.pids[{d}] if {d} < len(env.pids) else 0)"
        return f"(env.npids[{d}] if {d} < len(env.npids) else 1)"

    def source(self, w: Writer) -> str:
        if self.fn == "axis_size":
            return w.axis_size(str(self.arg))
        if w is LABEL:
            return f"{self.fn}({self.arg})"
        return f"pl.{self.fn}({self.arg!r})"


#: the operators that cannot fail, as functions (``BinOp._compile``)
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6, "neg": 7}
#: the comparisons, as functions (``Compare._compile``)
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _wrap(e: Expr, text: str, prec: int) -> str:
    return f"({text})" if _prec(e) < prec else text


def _prec(e: Expr) -> int:
    if isinstance(e, BinOp):
        return _PREC[e.op]
    if isinstance(e, Neg):
        return _PREC["neg"]
    if isinstance(e, Compare):
        return _PREC["cmp"]
    if isinstance(e, BoolOp):
        return _PREC[e.op]
    if isinstance(e, Not):
        return _PREC["not"]
    return 99


class BinOp(Expr):
    __slots__ = ("op", "a", "b")
    op: str
    a: Expr
    b: Expr

    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op = op
        self.a = a
        self.b = b
        self._names = _union(a._names, b._names)
        self._calls = _union(a._calls, b._calls)
        inner = b._divisions + a._divisions
        self._divisions = (self, *inner) if op in ZERO_DIVISION and not traced(self) else inner
        self.has_truth = a.has_truth or b.has_truth

    def _compile(self) -> Callable[[Env], int]:
        fa, fb = self.a._compile(), self.b._compile()
        wraps = traced(self)  # (int32 arithmetic; a Python int's does not wrap)
        op = _ARITH.get(self.op)
        if op is not None:

            def arith(env: Env) -> int:
                r = op(fa(env), fb(env))
                return r if INT32_MIN <= r <= INT32_MAX or not wraps else wrap_int32(r)

            return arith
        floor = self.op == "//"

        def divide(env: Env) -> int:
            x, y = fa(env), fb(env)
            if y == 0:
                if not wraps:  # Python's own error, at trace
                    raise ExprZeroDivision(ZERO_DIVISION[self.op], self.label())
                return (-1 if x == 0 else -2) if floor else 0  # jax.numpy's int32
            r = x // y if floor else x % y
            return r if INT32_MIN <= r <= INT32_MAX or not wraps else wrap_int32(r)

        return divide

    def _python(self) -> str | None:
        text = self._unwrapped()
        if text is None:
            return None
        # (a division by zero raises here: ``compiled`` asks the walk, which says what)
        return f"_i32{text}" if traced(self) else text

    def _unwrapped(self) -> str | None:
        """``_python`` without the int32 wrap of this operation, nor that of an operation
        under a ``+ - *``: int32 arithmetic is arithmetic modulo 2**32 and ``+ - *``
        keep congruence, so wrapping once where a chain of them ends gives what wrapping
        each one gives (a ``//`` or ``%`` in the chain has its own operands wrapped; an
        operand that is not traced is a Python int either way, never wrapped)."""
        out = []
        for sub in (self.a, self.b):
            if self.op in _ARITH and isinstance(sub, BinOp):
                text = sub._unwrapped()
            else:
                text = sub._python()
            if text is None:
                return None
            out.append(text)
        return f"({out[0]} {self.op} {out[1]})"

    def _text(self, f: Callable[[Expr], str]) -> str:
        p = _PREC[self.op]
        left = _wrap(self.a, f(self.a), p)
        right = _wrap(self.b, f(self.b), p + 1)  # left-associative
        return f"{left} {self.op} {right}"

    def source(self, w: Writer) -> str:
        return self._text(lambda e: e.source(w))


def scaled(a: Expr, k: int) -> BinOp:
    """``a * k``: a block or pid index entry's start, ``axis * stride``."""
    return BinOp("*", a, Const(k))


class Neg(Expr):
    __slots__ = ("a",)
    a: Expr

    def __init__(self, a: Expr) -> None:
        self.a = a
        self._names = a._names
        self._calls = a._calls
        self._divisions = a._divisions
        self.has_truth = a.has_truth

    def _compile(self) -> Callable[[Env], int]:
        fa = self.a._compile()
        wraps = traced(self)

        def negate(env: Env) -> int:
            r = -fa(env)
            return wrap_int32(r) if r > INT32_MAX and wraps else r

        return negate

    def _python(self) -> str | None:
        a = self.a._python()
        if a is None:
            return None
        return f"_neg32(-{a})" if traced(self) else f"(-{a})"

    def source(self, w: Writer) -> str:
        return "-" + _wrap(self.a, self.a.source(w), _PREC["neg"])


class Compare(Expr):
    __slots__ = ("op", "a", "b")
    op: str
    a: Expr
    b: Expr

    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op = op
        self.a = a
        self.b = b
        self._names = _union(a._names, b._names)
        self._calls = _union(a._calls, b._calls)
        self._divisions = b._divisions + a._divisions
        self.has_truth = True

    def _compile(self) -> Callable[[Env], int]:
        fa, fb, op = self.a._compile(), self.b._compile(), _COMPARE[self.op]
        return lambda env: int(op(fa(env), fb(env)))

    def _python(self) -> str | None:
        a, b = self.a._python(), self.b._python()
        if a is None or b is None:
            return None
        return f"int({a} {self.op} {b})"

    def _text(self, f: Callable[[Expr], str]) -> str:
        p = _PREC["cmp"] + 1
        return f"{_wrap(self.a, f(self.a), p)} {self.op} {_wrap(self.b, f(self.b), p)}"

    def source(self, w: Writer) -> str:
        return self._text(lambda e: e.source(w))

    @property
    def is_bool(self) -> bool:
        return True


class BoolOp(Expr):
    __slots__ = ("op", "items")
    op: str  # and | or
    items: tuple[Expr, ...]

    def __init__(self, op: str, items: tuple[Expr, ...]) -> None:
        self.op = op
        self.items = items
        self._names = frozenset().union(*(e._names for e in items))
        self._calls = frozenset().union(*(e._calls for e in items))
        self._divisions = tuple(d for e in reversed(items) for d in e._divisions)
        self.has_truth = True

    def _compile(self) -> Callable[[Env], int]:
        fs = tuple(e._compile() for e in self.items)
        if self.op == "and":
            return lambda env: int(all(f(env) for f in fs))
        return lambda env: int(any(f(env) for f in fs))

    def _python(self) -> str | None:
        items = [e._python() for e in self.items]
        if None in items:
            return None
        return f"int(bool({f' {self.op} '.join(items)}))"  # type: ignore[arg-type]

    def _text(self, f: Callable[[Expr], str], jax: bool) -> str:
        p = _PREC[self.op] + 1
        parts = [_wrap(e, f(e), p) for e in self.items]
        if jax:  # traced booleans combine with & and |, not Python's and/or
            sym = " & " if self.op == "and" else " | "
            return sym.join(f"({x})" if not x.startswith("(") else x for x in parts)
        return f" {self.op} ".join(parts)

    def source(self, w: Writer) -> str:
        return self._text(lambda e: e.source(w), jax=w is not LABEL)

    @property
    def is_bool(self) -> bool:
        return True


class Not(Expr):
    __slots__ = ("a",)
    a: Expr

    def __init__(self, a: Expr) -> None:
        self.a = a
        self._names = a._names
        self._calls = a._calls
        self._divisions = a._divisions
        self.has_truth = True

    def _compile(self) -> Callable[[Env], int]:
        fa = self.a._compile()
        return lambda env: int(not fa(env))

    def _python(self) -> str | None:
        a = self.a._python()
        return None if a is None else f"int(not {a})"

    def source(self, w: Writer) -> str:
        if w is LABEL:
            return "not " + _wrap(self.a, self.a.source(w), _PREC["not"])
        return f"jnp.logical_not({self.a.source(w)})"

    @property
    def is_bool(self) -> bool:
        return True


#: the pseudo-calls of the data reads (``Expr.calls``: never a constant)
_LOAD = frozenset(("load",))
_SEMAPHORE_READ = frozenset(("semaphore_read",))


class Load(Expr):
    """``ref[i, j]`` (``ref[...]`` of a rank-0 ref): one element loaded from memory, as
    ``ids_ref[0]`` reads a device id or an offset from an SMEM or GMEM table."""

    __slots__ = ("ref", "index")
    ref: str
    index: tuple[Expr, ...]  # () for ref[...]

    def __init__(self, ref: str, index: tuple[Expr, ...]) -> None:
        self.ref = ref
        self.index = index
        self._names = frozenset().union(*(e._names for e in index)) if index else _NONE
        # ``load`` (so a load is never a constant), and its indices' calls
        self._calls = _LOAD.union(*(e._calls for e in index))
        self._divisions = tuple(d for e in reversed(index) for d in e._divisions)
        self.has_truth = False  # (what it loads has the ref's dtype, whatever indexes it)

    @property
    def items(self) -> tuple[Expr, ...]:  # (``parts``)
        return self.index

    def _compile(self) -> Callable[[Env], int]:
        fs, ref = tuple(e._compile() for e in self.index), self.ref

        def load(env: Env) -> int:
            idx = tuple(f(env) for f in fs)
            if env.data is None:
                raise ExprDataDependent(f"{self.label()} reads memory, which is not known here")
            return env.data.load(ref, idx)

        return load

    def source(self, w: Writer) -> str:
        inner = ", ".join(e.source(w) for e in self.index) if self.index else "..."
        return f"{w.ref(self.ref)}[{inner}]"


class SemRead(Expr):
    """``pl.semaphore_read(sem)``: a semaphore's value now (int32), as the order of the
    signals and waits so far left it."""

    __slots__ = ("ref",)
    ref: str

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self._names = _NONE
        self._calls = _SEMAPHORE_READ
        self._divisions = ()
        self.has_truth = False

    def _compile(self) -> Callable[[Env], int]:
        ref = self.ref

        def read(env: Env) -> int:
            if env.data is None:
                raise ExprDataDependent(f"{self.label()} reads a semaphore, not known here")
            return env.data.semaphore(ref)

        return read

    def source(self, w: Writer) -> str:
        return f"pl.semaphore_read({w.ref(self.ref)})"


def unbound_message(name: str, exprs: Iterable[Expr] = ()) -> str:
    """JAX's NameError for an axis ``name`` nothing binds where ``exprs`` run: that of
    the first use Python evaluates, ``lax.axis_size``'s (``axis_size(name)``) or
    ``lax.axis_index``'s (a bare name; also where no expression reads it)."""
    use = next((u for u in (_first_use(e, name) for e in exprs) if u is not None), None)
    if use == "axis_size":
        return f"unbound axis name: {name}"
    return (
        f"Found an unbound axis name: {name}. To fix this, please call axis_index under "
        "`jax.shard_map`."
    )


def _first_use(e: Expr, name: str) -> str | None:
    """How ``e`` first reads ``name``, in evaluation order (operands left to right):
    ``"axis_index"``, ``"axis_size"`` or None."""
    if isinstance(e, Name):
        return "axis_index" if e.id == name else None
    if isinstance(e, Call):
        return "axis_size" if e.fn == "axis_size" and str(e.arg) == name else None
    return next((u for u in (_first_use(sub, name) for sub in parts(e)) if u is not None), None)


def data_reads(e: Expr) -> Iterator[Load | SemRead]:
    """The loads and semaphore reads in ``e``, outermost first."""
    if isinstance(e, Load | SemRead):
        yield e
    for sub in parts(e):
        yield from data_reads(sub)


def reads_data(e: Expr) -> bool:
    """Whether ``e`` reads memory (its value depends on data, not only on where the
    kernel runs)."""
    return next(data_reads(e), None) is not None


def value_dtype(
    e: Expr,
    ref_dtype: Callable[[str], str],
    name_dtype: Mapping[str, str] | None = None,
) -> str | None:
    """JAX's dtype of ``e`` where it reads data (``ref_dtype``: a loaded ref's dtype;
    ``name_dtype``: a loop variable's, where its bounds are not int32); None for a
    Python int (weakly typed: it takes the other operand's dtype). A weak int32 (a bool
    with a Python int) is an int32 here; ``value_type`` says it is weak."""
    return value_type(e, ref_dtype, name_dtype)[0]


def value_type(
    e: Expr,
    ref_dtype: Callable[[str], str],
    name_dtype: Mapping[str, str] | None = None,
) -> tuple[str | None, bool]:
    """JAX's dtype of ``e`` (``value_dtype``'s) and whether it is weakly typed (printed
    ``~int32``), as jax.numpy promotes: a Python int is weak (dtype None); an operation
    of a weak and a strong operand is weak where the weak one is of a higher kind (bool
    < int < float: ``(x > 0) * 1`` is a weak int32), and takes the strong one's dtype
    where it is not (``(x > 0) * 1 + i16`` is an int16)."""
    from mpmd_lab import dtypes

    if isinstance(e, Const):
        return None, True
    if isinstance(e, Load):
        return dtypes.canonical(ref_dtype(e.ref)), False
    if e.is_const:  # Python computes it: a comparison's bool, else an int (True + 1: 2)
        return ("bool" if e.is_bool else None), True
    if isinstance(e, BoolOp | Not):
        return "bool", False
    if isinstance(e, Neg):
        return value_type(e.a, ref_dtype, name_dtype)
    if isinstance(e, BinOp | Compare):
        a, wa = value_type(e.a, ref_dtype, name_dtype)
        b, wb = value_type(e.b, ref_dtype, name_dtype)
        weak = wa and wb
        if wa != wb:  # weak where the weak one is of a higher kind; else the strong's dtype
            (w, strong) = (a, b) if wa else (b, a)
            weak = _kind(w or "int32") > _kind(strong or "int32")
            if not weak:
                a = b = strong
        if isinstance(e, Compare):
            return "bool", weak
        if "bool" in (a, b) and None in (a, b):
            return "int32", weak  # (a Python int is of a higher kind than a bool)
        out = combine_dtypes(a, b)
        # jnp.remainder and floor_divide compute booleans as integers
        return ("int32" if out == "bool" and e.op in ("%", "//") else out), weak
    if isinstance(e, Call) and e.fn != "program_id":
        return None, True  # a Python int (an axis size, num_programs)
    if isinstance(e, Name) and name_dtype:
        return name_dtype.get(e.id, "int32"), False
    return "int32", False  # an axis index, a program id, a loop variable, a semaphore's value


def _kind(dtype: str) -> int:
    """A dtype's kind in jax.numpy's promotion: bool < integer < float."""
    from mpmd_lab import dtypes

    return 0 if dtype == "bool" else 2 if dtypes.is_float(dtype) else 1


def value_shape(e: Expr, ref_shape: Callable[[str], tuple[int, ...] | None]) -> tuple[int, ...]:
    """JAX's shape of ``e``'s value: a load with fewer indices than its ref has dims
    (``off_ref[...]`` of a 1-D table) loads the dims left over, and arithmetic and
    comparisons broadcast them (numpy's rule, the longer shape where they disagree);
    () for a scalar. ``ref_shape``: a loaded ref's shape (None: unknown, taken as a
    scalar's). A load indexed by an array (``x[off_ref[...]]``) gathers: the indices'
    shape, then the dims left over."""
    if isinstance(e, Load):  # (array indices: numpy's, their shape before the rest)
        shape = ref_shape(e.ref)
        rest = tuple(shape[len(e.index) :]) if shape is not None else ()
        return broadcast_shapes(tuple(value_shape(i, ref_shape) for i in e.index)) + rest
    if isinstance(e, Const | Name | Call | SemRead):
        return ()
    return broadcast_shapes(tuple(value_shape(sub, ref_shape) for sub in parts(e)))


def broadcast_shapes(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The shape of operands of these shapes broadcast, numpy's rule (aligned on the
    right, a dim of 1 takes the other's: (4,) and (4, 1) are (4, 4)); where they do not
    broadcast (an error JAX raises where it meets it), the longer."""
    out: tuple[int, ...] = ()
    for s in shapes:
        if len(s) > len(out):
            out, s = s, out
        head, tail = out[: len(out) - len(s)], out[len(out) - len(s) :]
        if all(a == b or 1 in (a, b) for a, b in zip(tail, s, strict=True)):
            out = head + tuple(b if a == 1 else a for a, b in zip(tail, s, strict=True))
    return out


def combine_dtypes(a: str | None, b: str | None) -> str | None:
    """The dtype of arithmetic of two operands of these dtypes (None: a Python int,
    which takes the other's)."""
    from mpmd_lab import dtypes

    if a is None or b is None:
        return a or b
    return dtypes.promote(a, b)


def walked(e: Expr) -> Callable[[Env], int]:
    """``e`` as one function of an ``Env`` that walks its tree (a function per node,
    made once per tree: ``Expr.eval``, an answer asked once or a few times), kept for
    the last ``MAX_PARSED`` trees asked."""
    hit = _WALKED.get(id(e))
    if hit is None:
        if len(_WALKED) >= MAX_PARSED:
            _WALKED.clear()
        hit = _WALKED[id(e)] = (e, e._compile())  # (keeps e alive: its id stays its own)
    return hit[1]


def compiled(e: Expr) -> Callable[[Env], int]:
    """``e`` as one function of an ``Env`` for the engine, which evaluates it per actor
    and step: the tree as one Python expression, compiled once per tree (the trees are
    shared, ``parse``; an equal one made again shares its function); the walk
    (``walked``) where the tree is a leaf or loads or reads memory. Where
    the expression fails (a name without a value, a division by zero) the walk computes
    it again and says what (it reads nothing but ``env``: the same answer, or the walk's
    own error). Kept for the last ``MAX_PARSED`` trees asked."""
    hit = _COMPILED.get(id(e))
    if hit is None:
        if len(_COMPILED) >= MAX_PARSED:
            _COMPILED.clear()
        # (an equal tree made again, ``b * 128`` of each load's block index, has its
        # function: trees are compared by content)
        fn = _BY_TREE.get(e)
        if fn is None:
            # (a leaf's walk is one function already; a tree loading memory has no text)
            text = None if isinstance(e, Const | Name | Call) else e._python()
            fn = walked(e) if text is None else _run_of(text, e)
            if len(_BY_TREE) >= MAX_PARSED:
                _BY_TREE.clear()
            _BY_TREE[e] = fn
        hit = _COMPILED[id(e)] = (e, fn)  # (keeps e alive: its id stays its own)
    return hit[1]


#: ``compiled``'s Python function: the expression, the walk where it fails
_RUN = """
def run(env):
    try:
        return {}
    except Exception:
        return walked(tree)(env)
"""


def _run_of(text: str, tree: Expr) -> Callable[[Env], int]:
    """The function ``_RUN`` defines for ``text`` (``tree``'s Python expression)."""
    scope: dict[str, Any] = {"tree": tree, "walked": walked, "_i32": _i32, "_neg32": _neg32}
    exec(compile(_RUN.format(text), "<expr>", "exec"), scope)  # noqa: S102
    fn: Callable[[Env], int] = scope["run"]
    return fn


def _i32(r: int) -> int:
    """A traced result as int32 arithmetic leaves it (``BinOp``'s walk)."""
    return r if INT32_MIN <= r <= INT32_MAX else wrap_int32(r)


def _neg32(r: int) -> int:
    """A traced negation as int32 arithmetic leaves it (``Neg``'s walk)."""
    return wrap_int32(r) if r > INT32_MAX else r


#: id(tree) -> (the tree, its function) (``walked``, ``compiled``)
_WALKED: dict[int, tuple[Expr, Callable[[Env], int]]] = {}
_COMPILED: dict[int, tuple[Expr, Callable[[Env], int]]] = {}
#: ``compiled``'s functions by tree content (equal trees: one function)
_BY_TREE: dict[Expr, Callable[[Env], int]] = {}


# ---------------------------------------------------------------- parsing


def parse(text: str | int | Expr) -> Expr:
    """An expression from its text (or an int, or an Expr); ExprError when it is none."""
    if isinstance(text, str):  # (the usual case first)
        e = _PARSED.get(text)
        if e is None:
            e = _parse_text(text)
            if len(_PARSED) >= MAX_PARSED:
                _PARSED.clear()
            _PARSED[text] = e
        return e
    if isinstance(text, Expr):
        return text
    if isinstance(text, bool):
        raise ExprError("a boolean is not an index expression")
    if isinstance(text, int):
        e = _PARSED_INTS.get(text)
        if e is None:
            if len(_PARSED_INTS) >= MAX_PARSED:
                _PARSED_INTS.clear()
            e = _PARSED_INTS[text] = Const(text)
        return e
    return _parse_text(text)


#: Texts parsed so far (the trees are immutable: every statement, check and run that
#: names ``"(dev + 1) % 4"`` shares one; ``ast.parse`` was a tenth of a check), bounded.
_PARSED: dict[str, Expr] = {}
#: the same for ints (a loop's start, an index): one tree per int
_PARSED_INTS: dict[int, Expr] = {}
MAX_PARSED = 4096


def _parse_text(text: str) -> Expr:
    if not isinstance(text, str):
        raise ExprError(f"an expression is a string or an integer, not {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ExprError(f"an expression is at most {MAX_TEXT} characters")
    if not text.strip():
        raise ExprError("an empty expression")
    if not text.isascii() or any(not ch.isprintable() for ch in text):
        raise ExprError("an expression is printable ASCII")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"not an expression: {e.msg} at column {e.offset}") from None
    return _node(tree.body, 0)


def _node(n: ast.AST, depth: int) -> Expr:
    if depth > MAX_DEPTH:
        raise ExprError("expression nested too deeply")
    d = depth + 1
    if isinstance(n, ast.Constant):
        if isinstance(n.value, bool) or not isinstance(n.value, int):
            raise ExprError(f"{n.value!r} is not an integer")
        if not -(2**31) <= n.value < 2**31:
            raise ExprError(f"{n.value} does not fit an int32")
        return Const(n.value)
    if isinstance(n, ast.Name):
        _identifier(n.id)
        return Name(n.id)
    if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
        return BinOp(_BIN[type(n.op)], _node(n.left, d), _node(n.right, d))
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitAnd | ast.BitOr):
        # ``(dev == 0) & (b == 1)``: how a traced condition is written in JAX (pl.when);
        # of two truth values it is ``and`` / ``or`` (bitwise integer ops are not taken)
        a, b = _node(n.left, d), _node(n.right, d)
        if not (a.is_bool and b.is_bool):
            raise ExprError(
                "& and | combine comparisons ((x == 0) & (y == 1)); a bitwise operation on "
                "integers is not part of an index expression"
            )
        op = "and" if isinstance(n.op, ast.BitAnd) else "or"
        items = [
            *(a.items if isinstance(a, BoolOp) and a.op == op else (a,)),
            *(b.items if isinstance(b, BoolOp) and b.op == op else (b,)),
        ]
        return BoolOp(op, tuple(items))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        inner = _node(n.operand, d)
        return Const(-inner.value) if isinstance(inner, Const) else Neg(inner)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.UAdd):
        return _node(n.operand, d)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return Not(_node(n.operand, d))
    if isinstance(n, ast.Compare):
        if len(n.ops) != 1 or type(n.ops[0]) not in _CMP:
            raise ExprError("a comparison compares two values with ==, !=, <, <=, > or >=")
        return Compare(_CMP[type(n.ops[0])], _node(n.left, d), _node(n.comparators[0], d))
    if isinstance(n, ast.BoolOp):
        op = "and" if isinstance(n.op, ast.And) else "or"
        return BoolOp(op, tuple(_node(v, d) for v in n.values))
    if isinstance(n, ast.Subscript):
        return _load(n, d)
    if isinstance(n, ast.Call):
        return _call(n)
    what = type(n).__name__
    if isinstance(n, ast.BinOp):
        what = f"the operator {type(n.op).__name__}"
    raise ExprError(
        f"{what} is not part of an index expression (integers, names, + - * // %, "
        "comparisons, and/or/not (& | of comparisons), program_id(d), num_programs(d), "
        "axis_size(name), scalar loads ref[i] and pl.semaphore_read(sem))"
    )


def _load(n: ast.Subscript, d: int) -> Load:
    """``ref[i, j]`` or ``ref[...]``: a scalar load."""
    if not isinstance(n.value, ast.Name):
        raise ExprError("a load names its ref: ids[0], ids[dev, 1], n_ref[...]")
    ref = _identifier(n.value.id)
    sl = n.slice
    if isinstance(sl, ast.Constant) and sl.value is Ellipsis:
        return Load(ref, ())
    items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    if any(isinstance(x, ast.Slice) for x in items):
        raise ExprError(f"{ref}[...]: a load in an expression reads one element (no slices)")
    return Load(ref, tuple(_node(x, d) for x in items))


def _call(n: ast.Call) -> Expr:
    dotted = ast.unparse(n.func)
    if dotted in ("pl.semaphore_read", "semaphore_read"):
        if len(n.args) != 1 or n.keywords or not isinstance(n.args[0], ast.Name):
            raise ExprError("pl.semaphore_read(sem) takes one semaphore (a name)")
        return SemRead(_identifier(n.args[0].id))
    fn = n.func.id if isinstance(n.func, ast.Name) else None
    if fn not in FUNCTIONS:
        raise ExprError(f"unknown function {fn or '?'}(...): use one of {', '.join(FUNCTIONS)}")
    if len(n.args) != 1 or n.keywords:
        raise ExprError(f"{fn}() takes one argument")
    a = n.args[0]
    if fn == "axis_size":
        if isinstance(a, ast.Name):
            return Call(fn, _identifier(a.id))
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            return Call(fn, _identifier(a.value))
        raise ExprError("axis_size() takes an axis name")
    if isinstance(a, ast.Constant) and type(a.value) is int and 0 <= a.value <= 2:
        return Call(fn, a.value)
    raise ExprError(f"{fn}() takes a grid dimension 0, 1 or 2")


def _identifier(name: str) -> str:
    import keyword

    if not name.isidentifier() or not name.isascii() or keyword.iskeyword(name):
        raise ExprError(f"{name!r} is not a name")
    if name in FUNCTIONS:
        raise ExprError(f"{name} is a function: write {name}(...)")
    return name


#: the names ``pl.ds`` goes by in a typed index
_DS_NAMES = ("pl.ds", "ds", "pl.dslice", "dslice")


def parse_index(text: str) -> list[Any]:
    """An ``at`` index as a Pallas user types it, as the scenario's JSON entries.

    ``0:64`` -> ``[[0, 64]]``; ``pl.ds(i * 64, 64)`` -> ``[{"ds": ["i * 64", 64]}]``;
    ``i * 64`` -> ``["i * 64"]`` (an integer index: the dim is dropped); ``:`` ->
    ``[None]``; entries are separated by commas (``:, pl.ds(0, 8)``), optionally inside
    ``[...]``. JSON is taken as it is (``[[0, 64]]``; a single entry is put in a list).
    ExprError (a ValueError) says what is wrong and how to write it."""
    s = text.strip()
    if not s:
        raise ExprError("empty: type an index such as 0:64, pl.ds(i * 64, 64), i or :")
    if len(s) > MAX_TEXT * 4:
        raise ExprError(f"an index is at most {MAX_TEXT * 4} characters")
    try:
        value = json.loads(s)
    except json.JSONDecodeError:
        pass
    else:
        return value if isinstance(value, list) else [value]
    if not s.isascii() or any(not ch.isprintable() for ch in s):
        raise ExprError("an index is printable ASCII")
    body = s[1:-1] if s.startswith("[") and s.endswith("]") else s
    try:
        tree = ast.parse(f"_[{body}]", mode="eval").body
    except SyntaxError as e:
        raise ExprError(
            f"not an index ({e.msg}): write 0:64, pl.ds(start, size), an expression such "
            "as i * 64, or : for the whole dim; several entries with commas"
        ) from None
    assert isinstance(tree, ast.Subscript)  # (the text parsed as ``_[...]``)
    items = tree.slice.elts if isinstance(tree.slice, ast.Tuple) else [tree.slice]
    return [_index_entry(n) for n in items]


def format_index(entries: Any) -> str | None:
    """An ``at`` index's JSON entries as a Pallas user writes them (``parse_index`` reads
    it back): ``[[0, 64]]`` -> ``0:64``, ``[{"ds": ["i * 64", 64]}]`` ->
    ``pl.ds(i * 64, 64)``, ``[None, 3]`` -> ``:, 3``. None where an entry has no such
    form (``{"block": ...}``, ``{"pid": ...}``, or not an index at all): show JSON."""
    if not isinstance(entries, list) or not entries:
        return None
    out = []
    for e in entries:
        if hasattr(e, "model_dump"):
            e = e.model_dump(mode="json", exclude_none=True)
        if e is None:
            out.append(":")
        elif isinstance(e, bool):
            return None
        elif isinstance(e, int | str):
            out.append(str(e))
        elif isinstance(e, list) and len(e) == 2 and all(b is None or _int(b) for b in e):
            out.append(":".join("" if b is None else str(b) for b in e))
        elif isinstance(e, dict) and set(e) == {"ds"} and isinstance(e["ds"], list):
            start, size = e["ds"]
            if isinstance(start, bool) or not isinstance(start, int | str) or not _int(size):
                return None
            out.append(f"pl.ds({start}, {size})")
        else:
            return None
    text = ", ".join(out)
    try:  # (parse_index reads JSON first: a lone entry that reads as other JSON stays JSON)
        read = json.loads(text)
    except json.JSONDecodeError:
        return text
    return text if [read] == list(entries) else None


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _index_entry(n: ast.expr) -> Any:
    if isinstance(n, ast.Slice):
        if n.step is not None:
            raise ExprError(f"{ast.unparse(n)}: a step is not supported in an index")
        lo, hi = (_static_int(b, ast.unparse(n)) for b in (n.lower, n.upper))
        return None if lo is None and hi is None else [lo, hi]
    if isinstance(n, ast.Call) and ast.unparse(n.func) in _DS_NAMES:
        named = [kw.value for kw in n.keywords if kw.arg in ("start", "size")]
        args = list(n.args) + named
        if len(args) != 2 or len(named) != len(n.keywords):
            raise ExprError(f"{ast.unparse(n)}: write pl.ds(start, size)")
        start, size = args
        size_value = _index_expr(size)
        if not isinstance(size_value, int) or size_value < 0:
            raise ExprError(f"{ast.unparse(n)}: the size of pl.ds is a static int, not negative")
        return {"ds": [_index_expr(start), size_value]}
    if isinstance(n, ast.Constant) and n.value is Ellipsis:
        raise ExprError("... is not supported in an index: write : for each whole dim")
    return _index_expr(n)


def _static_int(n: ast.expr | None, where: str) -> int | None:
    """A slice bound or a ds size: None (absent) or an int constant, possibly negative."""
    if n is None:
        return None
    e = _index_expr(n)
    if not isinstance(e, int):
        raise ExprError(
            f"{where}: a slice's bounds are static ints here; for a start computed in the "
            "kernel write pl.ds(start, size)"
        )
    return e


def _index_expr(n: ast.expr) -> int | str:
    """An int, or the text of an index expression (checked by ``parse``)."""
    text = ast.unparse(n)
    e = parse(text)
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Neg) and isinstance(e.a, Const):  # (-3)
        return -e.a.value
    return text


def check_text(value: Any) -> Any:
    """A pydantic validator: the value parses (ints pass through), else ValueError."""
    if isinstance(value, str):
        parse(value)
    return value


__all__ = [
    "DataReader",
    "ExprDataDependent",
    "Load",
    "SemRead",
    "data_reads",
    "unbound_message",
    "reads_data",
    "broadcast_shapes",
    "value_dtype",
    "value_type",
    "BinOp",
    "BoolOp",
    "Call",
    "Compare",
    "Const",
    "Env",
    "Expr",
    "ExprError",
    "Name",
    "Neg",
    "Not",
    "Writer",
    "LABEL",
    "check_text",
    "format_index",
    "parse",
    "parse_index",
]
