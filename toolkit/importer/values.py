"""Integer scalars of a kernel as index expressions (:mod:`mpmd_lab.expr`), with bounds.

A kernel computes its indices from ``lax.axis_index``, ``pl.program_id``, loop
counters and literals with ``+ - *``, ``lax.rem`` / ``lax.div`` (C semantics: they
truncate) and ``%`` / ``//`` (``jnp.remainder`` / ``jnp.floor_divide``: they floor).
The scenario's expressions floor, as Python does. Each value here carries the
interval it lies in (an axis index in ``[0, size - 1]``, a loop counter in ``[start,
stop - 1]``), so a truncating ``rem`` of a value that is never negative is written
as ``%``, a comparison the bounds decide is a constant, and whatever the interval
cannot decide is refused (``None``), never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpmd_lab import expr as E

#: int32 bounds: a value nothing bounds lies here
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class Int:
    """An integer (or boolean: ``is_bool``) scalar: its expression and its bounds."""

    expr: E.Expr
    lo: int = INT_MIN
    hi: int = INT_MAX
    is_bool: bool = False
    #: a boolean's value as an integer expression (0 or 1) written with ``+ - * //``
    #: only: the scenario's expressions have no cast, and a comparison where a number
    #: is taken (a loop bound, an index) is a bool to JAX
    number: Int | None = field(default=None, compare=False, repr=False)

    @property
    def const(self) -> int | None:
        if isinstance(self.expr, E.Const):
            return self.expr.value
        if self.lo == self.hi:
            return self.lo
        return None

    def text(self) -> int | str:
        """The scenario's field form: an int, or the expression's text."""
        c = self.const
        return c if c is not None else self.expr.label()


def const(v: int | bool) -> Int:
    v = int(v)
    return Int(E.Const(v), v, v, is_bool=False)


def boolean(v: bool) -> Int:
    return Int(E.Const(int(bool(v))), int(bool(v)), int(bool(v)), is_bool=True)


def name(n: str, lo: int, hi: int) -> Int:
    return Int(E.Name(n), lo, hi)


def call(fn: str, arg: int | str, lo: int, hi: int) -> Int:
    return Int(E.Call(fn, arg), lo, hi)


def _clamp(lo: int, hi: int) -> tuple[int, int]:
    return max(lo, INT_MIN), min(hi, INT_MAX)


# ---------------------------------------------------------------- affine form


def _affine(e: E.Expr) -> tuple[dict[E.Expr, int], int]:
    """``e`` as ``sum(coeff * atom) + const`` (atoms: whatever is not + - * by a const)."""
    if isinstance(e, E.Const):
        return {}, e.value
    if isinstance(e, E.Neg):
        t, c = _affine(e.a)
        return {k: -v for k, v in t.items()}, -c
    if isinstance(e, E.BinOp) and e.op in "+-":
        ta, ca = _affine(e.a)
        tb, cb = _affine(e.b)
        sign = 1 if e.op == "+" else -1
        out = dict(ta)
        for k, v in tb.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v}, ca + sign * cb
    if isinstance(e, E.BinOp) and e.op == "*":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, E.Const):
                t, c = _affine(x)
                factor = y.value
                return {a: v * factor for a, v in t.items() if v * factor}, c * factor
    return {e: 1}, 0


def _from_affine(terms: dict[E.Expr, int], c: int) -> E.Expr:
    out: E.Expr | None = None
    # positive terms first (``dev - s + 4``, not ``-s + dev + 4``), otherwise in order
    for atom, k in sorted(terms.items(), key=lambda kv: kv[1] < 0):
        term: E.Expr = atom if abs(k) == 1 else E.BinOp("*", atom, E.Const(abs(k)))
        if out is None:
            out = term if k > 0 else E.Neg(term)
        else:
            out = E.BinOp("+" if k > 0 else "-", out, term)
    if out is None:
        return E.Const(c)
    if c > 0 and all(k < 0 for k in terms.values()):  # ``1 - c``, not ``-c + 1``
        out = E.Const(c)
        for atom, k in terms.items():
            term = atom if k == -1 else E.BinOp("*", atom, E.Const(-k))
            out = E.BinOp("-", out, term)
        return out
    if c > 0:
        return E.BinOp("+", out, E.Const(c))
    if c < 0:
        return E.BinOp("-", out, E.Const(-c))
    return out


def simplify(e: E.Expr) -> E.Expr:
    t, c = _affine(e)
    return _from_affine(t, c)


# ---------------------------------------------------------------- arithmetic


def add(a: Int, b: Int) -> Int:
    lo, hi = _clamp(a.lo + b.lo, a.hi + b.hi)
    return Int(simplify(E.BinOp("+", a.expr, b.expr)), lo, hi)


def sub(a: Int, b: Int) -> Int:
    lo, hi = _clamp(a.lo - b.hi, a.hi - b.lo)
    return Int(simplify(E.BinOp("-", a.expr, b.expr)), lo, hi)


def neg(a: Int) -> Int:
    lo, hi = _clamp(-a.hi, -a.lo)
    return Int(simplify(E.Neg(a.expr)), lo, hi)


def mul(a: Int, b: Int) -> Int:
    corners = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
    lo, hi = _clamp(min(corners), max(corners))
    if a.const is not None and b.const is not None:
        return const(a.const * b.const)
    return Int(simplify(E.BinOp("*", a.expr, b.expr)), lo, hi)


def _positive(b: Int) -> bool:
    """A traced divisor its bounds keep at least 1 (``pl.program_id(0) + 1``)."""
    return b.const is None and not b.is_bool and b.lo >= 1


def floor_mod(a: Int, b: Int) -> Int | None:
    """``a % b`` as Python (and ``jnp.remainder``) computes it."""
    k = b.const
    if _positive(b):
        if 0 <= a.lo and a.hi < b.lo:
            return a
        return Int(E.BinOp("%", a.expr, b.expr), 0, b.hi - 1)
    if k is None or k == 0:
        return None
    if a.const is not None:
        return const(a.const % k)
    if k > 0:
        if 0 <= a.lo and a.hi < k:
            return a
        return Int(E.BinOp("%", a.expr, E.Const(k)), 0, k - 1)
    if k < a.lo and a.hi <= 0:
        return a
    return Int(E.BinOp("%", a.expr, E.Const(k)), k + 1, 0)


def floor_div(a: Int, b: Int) -> Int | None:
    """``a // b`` as Python (and ``jnp.floor_divide``) computes it."""
    k = b.const
    if _positive(b):  # monotonic in each operand: its bounds are the corners'
        corners = [a.lo // b.lo, a.lo // b.hi, a.hi // b.lo, a.hi // b.hi]
        return Int(E.BinOp("//", a.expr, b.expr), min(corners), max(corners))
    if k is None or k == 0:
        return None
    if a.const is not None:
        return const(a.const // k)
    if k == 1:
        return a
    lo, hi = sorted((a.lo // k, a.hi // k))
    if lo == hi:
        return const(lo)
    return Int(E.BinOp("//", a.expr, E.Const(k)), lo, hi)


def trunc_rem(a: Int, b: Int) -> Int | None:
    """``lax.rem``: the remainder with the sign of ``a`` (C's ``%``)."""
    k = b.const
    if _positive(b) and a.lo >= 0:  # both never negative: C's % is Python's
        return floor_mod(a, b)
    if k is None or k == 0:
        return None
    if a.const is not None:
        q = abs(a.const) % abs(k)
        return const(q if a.const >= 0 else -q)
    if a.lo >= 0:
        return floor_mod(a, const(abs(k)))
    if a.hi <= 0:
        m = floor_mod(neg(a), const(abs(k)))
        return None if m is None else neg(m)
    return None


def trunc_div(a: Int, b: Int) -> Int | None:
    """``lax.div``: the quotient rounded towards zero."""
    k = b.const
    if _positive(b) and a.lo >= 0:  # both never negative: truncating is flooring
        return floor_div(a, b)
    if k is None or k == 0:
        return None
    if a.const is not None:
        q = abs(a.const) // abs(k)
        return const(q if (a.const >= 0) == (k > 0) else -q)
    if a.lo >= 0 and k > 0:
        return floor_div(a, b)
    if a.hi <= 0 and k > 0:
        d = floor_div(neg(a), b)
        return None if d is None else neg(d)
    return None


def minimum(a: Int, b: Int) -> Int | None:
    if a.hi <= b.lo:
        return a
    if b.hi <= a.lo:
        return b
    return None


def maximum(a: Int, b: Int) -> Int | None:
    if a.lo >= b.hi:
        return a
    if b.lo >= a.hi:
        return b
    return None


_DECIDE = {
    "==": lambda a, b: (a.hi < b.lo or a.lo > b.hi, a.const is not None and a.const == b.const),
    "!=": lambda a, b: (a.const is not None and a.const == b.const, a.hi < b.lo or a.lo > b.hi),
    "<": lambda a, b: (a.lo >= b.hi, a.hi < b.lo),
    "<=": lambda a, b: (a.lo > b.hi, a.hi <= b.lo),
    ">": lambda a, b: (a.hi <= b.lo, a.lo > b.hi),
    ">=": lambda a, b: (a.hi < b.lo, a.lo >= b.hi),
}


def compare(op: str, a: Int, b: Int) -> Int:
    """A comparison; a constant when the bounds decide it."""
    never, always = _DECIDE[op](a, b)
    if always:
        return boolean(True)
    if never:
        return boolean(False)
    return Int(E.Compare(op, a.expr, b.expr), 0, 1, is_bool=True, number=_compare_number(op, a, b))


def _at_least_zero(d: Int) -> Int | None:
    """``int(d >= 0)`` in ``+ - //``: with ``M > -d.lo`` and ``M > d.hi``, ``(d + M) // M``
    is 1 for ``0 <= d <= d.hi`` and 0 for ``d.lo <= d < 0``."""
    if d.lo >= 0:
        return const(1)
    if d.hi < 0:
        return const(0)
    m = max(-d.lo, d.hi + 1)
    if m >= 2**30:
        return None  # unbounded: no such M in int32
    return floor_div(add(d, const(m)), const(m))


def _compare_number(op: str, a: Int, b: Int) -> Int | None:
    if op in ("==", "!="):
        ge, le = _at_least_zero(sub(a, b)), _at_least_zero(sub(b, a))
        if ge is None or le is None:
            return None
        eq = mul(ge, le)
        return eq if op == "==" else sub(const(1), eq)
    d = {
        "<": lambda: sub(sub(b, a), const(1)),
        "<=": lambda: sub(b, a),
        ">": lambda: sub(sub(a, b), const(1)),
        ">=": lambda: sub(a, b),
    }[op]()
    return _at_least_zero(d)


def logical(op: str, a: Int, b: Int) -> Int:
    """``and`` / ``or`` of two booleans (folded when one is a constant)."""
    for x, y in ((a, b), (b, a)):
        c = x.const
        if c is not None:
            if op == "and":
                return y if c else boolean(False)
            return boolean(True) if c else y
    items: list[E.Expr] = []
    for x in (a, b):
        if isinstance(x.expr, E.BoolOp) and x.expr.op == op:
            items += x.expr.items
        else:
            items.append(x.expr)
    number = None
    if a.number is not None and b.number is not None:
        both = mul(a.number, b.number)
        number = both if op == "and" else sub(add(a.number, b.number), both)
    return Int(E.BoolOp(op, tuple(items)), 0, 1, is_bool=True, number=number)


def logical_not(a: Int) -> Int:
    c = a.const
    if c is not None:
        return boolean(not c)
    number = sub(const(1), a.number) if a.number is not None else None
    if isinstance(a.expr, E.Not):
        return Int(a.expr.a, 0, 1, is_bool=True, number=number)
    if isinstance(a.expr, E.Compare):
        flip = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
        e = E.Compare(flip[a.expr.op], a.expr.a, a.expr.b)
        return Int(e, 0, 1, is_bool=True, number=number)
    return Int(E.Not(a.expr), 0, 1, is_bool=True, number=number)


def as_int(a: Int) -> Int | None:
    """An integer conversion (``convert_element_type`` to an integer dtype); a boolean
    becomes 0 or 1, written in arithmetic (None when that cannot be written)."""
    if not a.is_bool:
        return a
    c = a.const
    if c is not None:
        return const(c)
    return a.number


def select(pred: Int, cases: list[Int]) -> Int | None:
    """``lax.select_n(pred, *cases)`` when the bounds decide ``pred``."""
    c = pred.const
    if c is None or not 0 <= c < len(cases):
        return None
    return cases[c]


def select_arith(pred: Int, cases: list[Int]) -> Int | None:
    """``lax.select_n(pred, *cases)`` of integers on a traced predicate, in arithmetic:
    ``sum(case_k * int(pred == k))`` (two cases: ``a + int(pred) * (b - a)``)."""
    if len(cases) == 2:
        n = as_int(pred) if pred.is_bool else (pred if 0 <= pred.lo and pred.hi <= 1 else None)
        if n is None:
            return None
        a, b = cases
        r = add(a, mul(n, sub(b, a)))
    else:
        if pred.is_bool or pred.lo < 0 or pred.hi > len(cases) - 1:
            return None
        r = None
        for k, case in enumerate(cases):
            if not pred.lo <= k <= pred.hi:
                continue
            n = as_int(compare("==", pred, const(k)))
            if n is None:
                return None
            term = mul(case, n)
            r = term if r is None else add(r, term)
        if r is None:
            return None
    assert r is not None
    lo, hi = min(x.lo for x in cases), max(x.hi for x in cases)
    return const(r.const) if r.const is not None else Int(r.expr, lo, hi)


def fits(a: Int) -> bool:
    """Whether the expression's text fits the scenario's limits."""
    if a.const is not None:
        return True
    text = a.expr.label()
    if len(text) > E.MAX_TEXT:
        return False
    try:
        E.parse(text)
    except E.ExprError:
        return False
    return True


__all__ = [
    "INT_MAX",
    "INT_MIN",
    "Int",
    "add",
    "as_int",
    "boolean",
    "call",
    "compare",
    "const",
    "fits",
    "floor_div",
    "floor_mod",
    "logical",
    "logical_not",
    "maximum",
    "minimum",
    "mul",
    "name",
    "neg",
    "select",
    "simplify",
    "sub",
    "trunc_div",
    "trunc_rem",
]
