"""A kernel's jaxpr (one program of an ``mpmd_map``) as scenario body statements.

Driven by the primitives and their parameters, nothing else:

- integer scalars (``axis_index``, ``program_id``, loop counters, literals and their
  arithmetic) become index expressions with bounds (:mod:`.values`); a condition used
  as a number, and an integer a traced condition picks (``jnp.where``, a ``lax.cond``
  of integers), are written in ``+ - * //`` (the expressions have no cast or select);
  a LOGICAL device id is split into mesh coordinates;
- a ref with its transforms (``NDIndexer``, ``PeerMemRef``, ``MulticastRef``,
  ``ClusterRefTransform``, bitcast, reshape, transpose) becomes a ``let`` view;
- a value is what a ``get`` loaded, a constant, a sum of those (added in JAX's order),
  a multimem reduction or a WGMMA product (``plgpu.wgmma`` into a ``plgpu.ACC`` of
  ``pl.run_scoped``); storing it (``swap``) writes the statements that compute it into
  the destination: ``copy``, ``fill``, ``add``, ``multimem_load_reduce``, ``dot``;
- kernel parameters given one Ref are one memory (a write through one is a write
  through the other);
- semaphores, barriers, async copies, atomics, multimem stores are their statements;
- ``scan`` (``lax.fori_loop`` / ``pl.loop``) is a ``loop``, ``cond`` (``pl.when``,
  ``lax.cond``) is ``when``; ``jit`` and other call primitives are inlined.

Anything else is *unsupported*, by name and with its line: never dropped, never
guessed. A load whose value could change before the store that uses it (a write or a
wait in between, to a ref that is written somewhere) is unsupported too, since the
scenario reads at the store.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab.importer import frames as F
from mpmd_lab.importer import values as V
from mpmd_lab.ops import TRANSFORM_CLASSES, Im2Col

_TRANSFORMS = {c.op_name(): c for c in TRANSFORM_CLASSES}
#: a let's name tag by what memory its view reaches (``TransformOp.REACH``)
REACH_TAG = {"peer": "peer", "multicast": "mc", "cluster": "cl"}


def _reach(step: dict[str, Any]) -> str:
    """What memory a transform step (JSON form) reaches: ``TransformOp.REACH``."""
    return _TRANSFORMS[step["op"]].REACH


class Unsupported(Exception):
    """A construct the scenario language cannot express (its name first)."""


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class View:
    """A kernel ref (``param``) with a stack of scenario transforms."""

    param: str
    transforms: tuple[str, ...] = ()  # JSON text of each transform (hashable)
    space: str = "GMEM"
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    #: the layout transforms every use starts with (a tiled / swizzled scratch's
    #: untile and unswizzle): the scenario's scratch type says them once
    skip: tuple[str, ...] = ()

    def with_(self, t: dict[str, Any], shape: tuple[int, ...], dtype: str | None = None) -> View:
        return View(
            self.param,
            (*self.transforms, json.dumps(t, sort_keys=True)),
            self.space,
            tuple(shape),
            dtype or self.dtype,
        )

    @property
    def stack(self) -> list[dict[str, Any]]:
        return [json.loads(t) for t in self.transforms]

    @property
    def elsewhere(self) -> bool:
        return any(_reach(t) for t in self.stack)


@dataclass(frozen=True)
class Load:
    view: View
    stamp: int  # statements emitted before it
    where: str | None
    loops: tuple[int, ...] = ()  # the loops it is loaded in


@dataclass(frozen=True)
class Const:
    value: Any  # a Python number
    dtype: str
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Sum:
    a: Any
    b: Any
    sign: int  # +1: a + b, -1: a - b
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Computed:
    """An elementwise value computed in registers (a ``compute`` statement's value):
    ``op`` a binary operator of ``mpmd_lab.ops.values`` (``+``, ``max``, ``<``...),
    ``neg``, ``where`` (cond, x, y), ``cast`` (``param``: the dtype) or ``iota``
    (``param``: the dimension)."""

    op: str
    args: tuple[Any, ...]
    dtype: str
    shape: tuple[int, ...]
    param: Any = None


@dataclass(frozen=True)
class SemValue:
    """``pl.semaphore_read(sem)``: the semaphore's value (int32) where it was read
    (``stamp``: how many statements had been emitted by then)."""

    view: View
    stamp: int
    dtype: str = "int32"
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Reduce:
    src: View
    axes: Any  # a name or a list of names, as the user gave them
    reduction: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Dot:
    """``lhs @ rhs`` with float32 accumulation (a WGMMA into a fresh accumulator)."""

    lhs: Load
    rhs: Load
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass
class Acc:
    """A WGMMA accumulator (``plgpu.ACC`` in ``pl.run_scoped``): zeros, or one product."""

    shape: tuple[int, ...]
    dtype: str
    value: Dot | None = None


@dataclass(frozen=True)
class Opaque:
    reason: str
    derived: bool = False  # made by an unsupported equation (already reported)


@dataclass
class Scope:
    body: list[dict[str, Any]]
    path: str
    parent: Scope | None = None
    loop: int | None = None  # the loop's id when this is a loop body
    lets: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)

    def find_let(self, key: tuple[str, tuple[str, ...]]) -> str | None:
        s: Scope | None = self
        while s is not None:
            if key in s.lets:
                return s.lets[key]
            s = s.parent
        return None

    def loops(self) -> tuple[int, ...]:
        out: list[int] = []
        s: Scope | None = self
        while s is not None:
            if s.loop is not None:
                out.append(s.loop)
            s = s.parent
        return tuple(out)


@dataclass
class Effect:
    stamp: int
    writes: frozenset[str]
    sync: bool
    loops: tuple[int, ...]


@dataclass
class Use:
    load: Load
    stamp: int  # the statement that reads it
    loops: tuple[int, ...]  # loops around the use
    load_loops: tuple[int, ...]
    where: str | None


# ---------------------------------------------------------------- the translator


@dataclass
class Mesh:
    """Sizes of every axis name a kernel may use."""

    devices: dict[str, int]
    grid: dict[str, int]
    cluster: dict[str, int]
    threads: tuple[str | None, int] | None

    def size(self, axis: str) -> int | None:
        for m in (self.grid, self.cluster, self.devices):
            if axis in m:
                return m[axis]
        if self.threads and self.threads[0] == axis:
            return self.threads[1]
        return None


def _is(x: Any, *names: str) -> bool:
    return type(x).__name__ in names


def _aval_info(aval: Any) -> tuple[tuple[int, ...], str, str]:
    """(shape, dtype name, memory space) of a ref aval."""
    inner = getattr(aval, "inner_aval", aval)
    shape = tuple(int(d) for d in getattr(inner, "shape", ()))
    dt = getattr(inner, "dtype", None)
    name = str(getattr(dt, "name", dt))
    ms = getattr(aval, "memory_space", None)
    space = str(getattr(ms, "name", None) or ms or "gmem").upper()
    return shape, name, space


def _first_load(v: Any, depth: int = 0) -> Load | None:
    """The first load a computed value reads (depth first), or None."""
    if isinstance(v, Load):
        return v
    if isinstance(v, Computed) and depth < 32:
        for a in v.args:
            if (found := _first_load(a, depth + 1)) is not None:
                return found
    return None


class Translator:
    """One kernel body (a program) into statements; shared names and findings."""

    def __init__(self, mesh: Mesh, program: int, params: list[tuple[Any, View]]):
        self.mesh = mesh
        self.program = program
        self.env: dict[Any, Any] = {v: view for v, view in params}
        self.names: set[str] = {view.param for _, view in params}
        self.names |= set(mesh.devices) | set(mesh.grid) | set(mesh.cluster)
        if mesh.threads and mesh.threads[0]:
            self.names.add(mesh.threads[0])
        self.source: dict[str, str] = {}
        self.unsupported: list[str] = []
        #: each of ``unsupported`` as the scenario's ``not_imported`` says it: what, the
        #: user's line, the body it belongs in
        self.not_imported: list[dict[str, Any]] = []
        self.path = f"call.programs[{program}].body"  # the body being translated
        self.stamp = 0
        self.effects: list[Effect] = []
        self.uses: list[Use] = []
        self.loop_ranges: dict[int, tuple[int, int]] = {}
        self._loops = 0
        self.written: set[str] = set()
        #: extra scratch the body allocates (``pl.run_scoped``): name -> scratch JSON
        self.scratch: dict[str, dict[str, Any]] = {}
        self.where: str | None = None  # the line of the equation being translated
        #: kernel parameter -> the memory it is (two parameters given one Ref share it)
        self.memory: dict[str, str] = {}
        self.kernel_frame: F.Frame | None = None
        #: values given a register layout by ``plgpu.layout_cast`` (by identity): a
        #: compute value has no layouts, so a reduction along an axis of one is refused
        self.cast_layout: set[int] = set()
        self._scope: Scope | None = None  # the body of the equation being translated

    # ------------------------------------------------------------ findings

    def mem(self, param: str) -> str:
        """The memory behind a kernel parameter (shared by parameters given one Ref)."""
        return self.memory.get(param, param)

    def unsupported_(self, what: str, where: str | None = None) -> None:
        where = where if where is not None else self.where
        text = f"{what} (at {_short(where)})" if where else what
        if text not in self.unsupported:
            self.unsupported.append(text)
            self.not_imported.append(
                {"what": what, "source": where, "path": self.path, "text": text}
            )

    def fresh(self, base: str) -> str:
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base) or "v"
        if not base[0].isalpha() and base[0] != "_":
            base = "v" + base
        if base not in self.names:
            self.names.add(base)
            return base
        k = 1
        while f"{base}{k}" in self.names:
            k += 1
        self.names.add(f"{base}{k}")
        return f"{base}{k}"

    # ------------------------------------------------------------ reading atoms

    def read(self, atom: Any) -> Any:
        """The value of a jaxpr atom (a Var from the env, or a Literal)."""
        if _is(atom, "Literal"):
            return _literal(atom)
        if atom in self.env:
            return self.env[atom]
        return Opaque("a value from outside the kernel")

    def int_(self, atom: Any, what: str = "an index") -> V.Int:
        v = self.read(atom)
        if isinstance(v, V.Int):
            return v
        if isinstance(v, Const) and not v.shape and _is_int_dtype(v.dtype):
            return V.const(int(v.value)) if v.dtype != "bool" else V.boolean(bool(v.value))
        if isinstance(v, Opaque):
            raise Unsupported(f"{what} computed from {v.reason}")
        loaded = self._data_int(v)
        if loaded is not None:
            return loaded
        if isinstance(v, Load):
            raise Unsupported(
                f"{what} loaded from memory ({v.view.param}[...]) that is not one integer "
                f"(a {v.view.dtype} of shape {list(v.view.shape)})"
            )
        if isinstance(v, Computed) and not v.shape and _is_int_dtype(v.dtype):
            load = _first_load(v)
            frm = f" of {load.view.param}[...] (loaded at {_short(load.where)})" if load else ""
            kind = "reduction" if v.op == "reduce" else repr(v.op)
            raise Unsupported(
                f"{what} computed in registers by a {kind}{frm}: a scenario's device ids "
                "and indices are integer expressions of scalar loads, pl.semaphore_read and "
                "arithmetic on them, not of a whole array's value"
            )
        raise Unsupported(f"{what} that is not an integer scalar")

    def _data_int(self, v: Any) -> V.Int | None:
        """An integer scalar computed from data as an index expression: a scalar load
        ``ids_ref[0]`` (written as the kernel indexes it), ``pl.semaphore_read(sem)``,
        and integer arithmetic and comparisons of those. Each load is read again where
        the expression is used: ``use`` holds that nothing changes its ref in between.
        None where ``v`` is no such value."""
        scope = self._scope
        if scope is None:
            return None
        if isinstance(v, V.Int):
            return v
        if isinstance(v, Const):
            if v.shape or not _is_int_dtype(v.dtype):
                return None
            return V.boolean(bool(v.value)) if v.dtype == "bool" else V.const(int(v.value))
        if getattr(v, "shape", ()) or not _is_int_dtype(_dtype_of(v) or ""):
            return None
        if isinstance(v, Load):
            view = v.view
            stack = view.stack
            last = stack[-1] if stack else None
            indexes = last is not None and _TRANSFORMS[last["op"]].INDEXES  # (an ``at``)
            entries = last["index"] if indexes and last is not None else None
            if entries and all(type(x) in (int, str) for x in entries):
                base = dataclasses.replace(view, transforms=view.transforms[:-1])
                e: E.Expr = E.Load(self.ref(scope, base), tuple(E.parse(x) for x in entries))
            else:
                e = E.Load(self.ref(scope, view), ())
            self.use(scope, v)
            boolean = view.dtype == "bool"
            return V.Int(e, 0 if boolean else V.INT_MIN, 1 if boolean else V.INT_MAX, boolean)
        if isinstance(v, SemValue):
            return V.Int(E.SemRead(self.ref(scope, v.view)), 0, V.INT_MAX)
        if isinstance(v, Computed) and v.op == "cast" and len(v.args) == 1:
            inner = self._data_int(v.args[0])
            if inner is None or not _is_int_dtype(str(v.param)):
                return None
            if str(v.param) == "bool" and not inner.is_bool:
                return V.compare("!=", inner, V.const(0))
            return inner  # (a truth value as int32: pl.when's own conversion)
        parts: tuple[Any, ...] = ()
        if isinstance(v, Sum):
            parts = (v.a, v.b)
        elif isinstance(v, Computed) and v.op in _INT_OPS:
            parts = v.args
        ints = [self._data_int(x) for x in parts]
        if not parts or any(x is None for x in ints):
            return None
        if isinstance(v, Sum):
            a, b = ints
            assert a is not None and b is not None
            return V.add(a, b) if v.sign > 0 else V.sub(a, b)
        assert isinstance(v, Computed)
        return _INT_OPS[v.op](*ints)

    def text(self, atom: Any, what: str = "an index") -> int | str:
        v = self.int_(atom, what)
        if not V.fits(v):
            raise Unsupported(f"{what} whose expression is longer than a scenario allows")
        return v.text()

    # ------------------------------------------------------------ emitting

    def emit(
        self,
        scope: Scope,
        stmt: dict[str, Any],
        *,
        writes: tuple[View, ...] = (),
        sync: bool = False,
        where: str | None = None,
    ) -> str:
        scope.body.append(stmt)
        path = f"{scope.path}[{len(scope.body) - 1}]"
        w = where if where is not None else self.where
        if w:
            self.source[path] = w
        self.stamp += 1
        bases = frozenset(self.mem(v.param) for v in writes)
        self.written |= bases
        self.effects.append(Effect(self.stamp, bases, sync, scope.loops()))
        return path

    def ref(self, scope: Scope, view: View) -> str:
        """The name a statement uses for ``view``: the parameter, or a ``let``."""
        if not view.transforms:
            return view.param
        key = (view.param, view.transforms)
        found = scope.find_let(key)
        if found:
            return found
        reach = [_reach(t) for t in reversed(view.stack)]
        tag = next((REACH_TAG[r] for r in reach if r), view.stack[-1]["op"])
        name = self.fresh(f"{_stem(view.param)}_{tag}")
        scope.body.append({"let": name, "ref": view.param, "transforms": view.stack})
        path = f"{scope.path}[{len(scope.body) - 1}]"
        if self.where:
            self.source[path] = self.where
        scope.lets[key] = name
        return name

    def use(self, scope: Scope, load: Load) -> None:
        """The next statement reads ``load``'s ref again (the scenario reads at the store)."""
        self.uses.append(Use(load, self.stamp + 1, scope.loops(), load.loops, self.where))

    def check_uses(self) -> None:
        """Every load read later than JAX reads it must read the same value: nothing
        that may change its ref (a write to it, a wait) comes in between, unless the ref
        is written nowhere at all. (Sorted stamps and bisection: a kernel unrolled into
        thousands of statements is checked in n log n, not n squared.)"""
        from bisect import bisect_right

        syncs = [e.stamp for e in self.effects if e.sync]
        writes: dict[str, list[int]] = {}
        for e in self.effects:
            for b in e.writes:
                writes.setdefault(b, []).append(e.stamp)

        def first(stamps: list[int], lo: int, hi: int, closed: bool) -> int | None:
            """The first stamp s with lo < s < hi (s <= hi when ``closed``)."""
            k = bisect_right(stamps, lo)
            if k < len(stamps) and (stamps[k] <= hi if closed else stamps[k] < hi):
                return stamps[k]
            return None

        for u in self.uses:
            base = self.mem(u.load.view.param)
            if base not in self.written:
                continue
            # between the load and the use, and all of every loop around the use that
            # is not around the load (its later iterations come between too)
            spans = [(u.load.stamp, u.stamp, False)]
            spans += [(*self.loop_ranges[k], True) for k in u.loops if k not in u.load_loops]
            hits: list[tuple[int, bool]] = []
            for lo, hi, closed in spans:
                for stamps, is_sync in ((syncs, True), (writes.get(base, []), False)):
                    s = first(stamps, lo, hi, closed)
                    if s is not None:
                        hits.append((s, not is_sync))  # at one stamp, a wait is named first
            if hits:
                _, is_write = min(hits)
                what = f"a write to {base}" if is_write else "a wait"
                self.unsupported_(
                    f"a value loaded from {base} (at {_short(u.load.where)}) and stored "
                    f"after {what}: the scenario would read it later than JAX does",
                    u.where,
                )

    # ------------------------------------------------------------ the walk

    def body(self, jaxpr: Any, scope: Scope) -> None:
        # an equation without a user frame of its own (made inside JAX's helpers, or past
        # a jit boundary, where JAX cuts the traceback) keeps its enclosing one's line
        outer, outer_path = self.where, self.path
        self.path = scope.path
        for eqn in jaxpr.eqns:
            self.where = F.eqn_source(eqn) or outer
            try:
                self.eqn(eqn, scope)
            except Unsupported as e:
                # refused only because an input was (already reported): say nothing more
                if not any(_derived(self.env.get(v)) for v in eqn.invars if not _is(v, "Literal")):
                    self.unsupported_(str(e))
                for v in eqn.outvars:
                    self.env[v] = Opaque(f"{eqn.primitive.name} (unsupported)", derived=True)
        self.where, self.path = outer, outer_path

    def eqn(self, eqn: Any, scope: Scope) -> None:
        self._scope = scope  # (where an index loaded from memory names its ref)
        name = eqn.primitive.name
        rule = getattr(self, "p_" + name.replace("-", "_"), None)
        if rule is None:
            if _is_call(eqn):
                return self.inline(eqn, scope)
            raise Unsupported(f"{name}: no scenario statement does what this primitive does")
        rule(eqn, scope)

    def out(self, eqn: Any, value: Any) -> None:
        for v in eqn.outvars:
            self.env[v] = value

    # ------------------------------------------------------------ integer scalars

    def _scalar_binop(self, eqn: Any, fn: Any, what: str, why: str = "") -> None:
        a, b = (self.read(x) for x in eqn.invars)
        if _is_array_value(a) or _is_array_value(b) or _array_aval(eqn.outvars[0]):
            return self._array_binop(eqn, what)
        x, y = self.int_(eqn.invars[0]), self.int_(eqn.invars[1])
        r = fn(x, y)
        if r is None:
            raise Unsupported(f"{what} {why or 'the bounds of its operands do not decide'}")
        self.out(eqn, r)

    def p_add(self, eqn, scope):
        self._scalar_binop(eqn, V.add, "add")

    def p_sub(self, eqn, scope):
        self._scalar_binop(eqn, V.sub, "sub")

    def p_mul(self, eqn, scope):
        self._scalar_binop(eqn, V.mul, "mul")

    def p_rem(self, eqn, scope):
        why = (
            "of a value that may be negative (or by a traced divisor): lax.rem truncates, the "
            "scenario's % floors; write % (jnp.remainder) where the floor is meant"
        )
        self._scalar_binop(eqn, V.trunc_rem, "rem (lax.rem)", why)

    def p_div(self, eqn, scope):
        why = (
            "of a value that may be negative (or by a traced divisor): lax.div truncates, the "
            "scenario's // floors; write // where the floor is meant"
        )
        self._scalar_binop(eqn, V.trunc_div, "div (lax.div)", why)

    def p_max(self, eqn, scope):
        self._scalar_binop(eqn, V.maximum, "max")

    def p_min(self, eqn, scope):
        self._scalar_binop(eqn, V.minimum, "min")

    def p_clamp(self, eqn, scope):  # lax.clamp(lo, x, hi); lax.switch clamps its index
        if _array_aval(eqn.outvars[0]):
            raise Unsupported("clamp of an array value")
        lo, x, hi = (self.int_(a) for a in eqn.invars)
        r = V.maximum(x, lo)
        r = V.minimum(r, hi) if r is not None else None
        if r is None:
            raise Unsupported("clamp of an index its bounds do not keep inside the limits")
        self.out(eqn, r)

    def p_neg(self, eqn, scope):
        if self._is_value(eqn):
            return self._computed(eqn, "neg", (self.read(eqn.invars[0]),))
        self.out(eqn, V.neg(self.int_(eqn.invars[0])))

    def _compare(self, eqn: Any, op: str) -> None:
        if self._is_value(eqn):
            return self._computed(eqn, op, tuple(self.read(x) for x in eqn.invars))
        self.out(eqn, V.compare(op, self.int_(eqn.invars[0]), self.int_(eqn.invars[1])))

    def p_eq(self, eqn, scope):
        self._compare(eqn, "==")

    def p_ne(self, eqn, scope):
        self._compare(eqn, "!=")

    def p_lt(self, eqn, scope):
        self._compare(eqn, "<")

    def p_le(self, eqn, scope):
        self._compare(eqn, "<=")

    def p_gt(self, eqn, scope):
        self._compare(eqn, ">")

    def p_ge(self, eqn, scope):
        self._compare(eqn, ">=")

    def _logic(self, eqn: Any, op: str) -> None:
        a, b = self.int_(eqn.invars[0]), self.int_(eqn.invars[1])
        if not (a.is_bool and b.is_bool):
            raise Unsupported(f"bitwise {op} of integers")
        self.out(eqn, V.logical(op, a, b))

    def p_and(self, eqn, scope):
        self._logic(eqn, "and")

    def p_or(self, eqn, scope):
        self._logic(eqn, "or")

    def p_not(self, eqn, scope):
        a = self.int_(eqn.invars[0])
        if not a.is_bool:
            raise Unsupported("bitwise not of an integer")
        self.out(eqn, V.logical_not(a))

    def p_select_n(self, eqn, scope):
        if self._is_value(eqn) and len(eqn.invars) == 3:
            pred, no, yes = (self.read(x) for x in eqn.invars)
            if str(eqn.invars[0].aval.dtype) == "bool" and not isinstance(pred, V.Int):
                return self._computed(eqn, "where", (pred, yes, no))
        pred = self.int_(eqn.invars[0], "a select predicate")
        cases = [self.read(x) for x in eqn.invars[1:]]
        c = pred.const
        if c is not None and 0 <= c < len(cases):
            return self.out(eqn, cases[c])
        ints = all(isinstance(x, V.Int) and not x.is_bool for x in cases)
        if ints and not _array_aval(eqn.outvars[0]):
            r = V.select_arith(pred, cases)
            if r is not None and V.fits(r):
                return self.out(eqn, r)
        raise Unsupported("select_n (jnp.where) on a condition the bounds cannot decide")

    def p_convert_element_type(self, eqn, scope):
        v = self.read(eqn.invars[0])
        new = str(eqn.params.get("new_dtype"))
        if isinstance(v, V.Int):
            if new == "bool":
                return self.out(eqn, V.compare("!=", v, V.const(0)))
            if _is_int_dtype(new):
                r = V.as_int(v)
                if r is None:
                    raise Unsupported(
                        "a condition used as an integer (convert_element_type of a bool) that "
                        "the scenario's expressions cannot write without a cast"
                    )
                return self.out(eqn, r)
            return self._computed(eqn, "cast", (v,), new)  # an index as a number
        if isinstance(v, Const):
            return self.out(eqn, Const(_cast(v.value, new), new, v.shape))
        if _dtype_of(v) == new:
            return self.out(eqn, v)
        self._computed(eqn, "cast", (v,), new)

    def p_axis_index(self, eqn, scope):
        axes = eqn.params["axis_name"]
        axes = axes if isinstance(axes, tuple) else (axes,)
        total: V.Int | None = None
        for a in axes:
            size = self.mesh.size(a)
            if size is None:
                raise Unsupported(f"axis_index of an axis no mesh names ({a!r})")
            v = V.name(a, 0, size - 1)
            total = v if total is None else V.add(V.mul(total, V.const(size)), v)
        self.out(eqn, total)

    def p_program_id(self, eqn, scope):
        d = int(eqn.params["axis"])
        sizes = list(self.mesh.grid.values())
        hi = sizes[d] - 1 if d < len(sizes) else 0
        self.out(eqn, V.call("program_id", d, 0, hi))

    def p_num_programs(self, eqn, scope):
        d = int(eqn.params["axis"])
        sizes = list(self.mesh.grid.values())
        self.out(eqn, V.const(sizes[d] if d < len(sizes) else 1))

    def p_axis_size(self, eqn, scope):
        axes = eqn.params.get("axis_name")
        axes = axes if isinstance(axes, tuple) else (axes,)
        n = 1
        for a in axes:
            size = self.mesh.size(a)
            if size is None:
                raise Unsupported(f"axis_size of an axis no mesh names ({a!r})")
            n *= size
        self.out(eqn, V.const(n))

    def p_pjit(self, eqn, scope):
        return self.p_jit(eqn, scope)

    def p_jit(self, eqn, scope):
        fn = eqn.params.get("name")
        scalar = all(not _array_aval(v) for v in (*eqn.invars, *eqn.outvars))
        if scalar and len(eqn.invars) == 2 and len(eqn.outvars) == 1:
            ops = {"remainder": V.floor_mod, "floor_divide": V.floor_div}
            if fn in ops:
                r = ops[fn](self.int_(eqn.invars[0]), self.int_(eqn.invars[1]))
                if r is None:
                    raise Unsupported(f"{fn} by a divisor that is not a constant")
                return self.out(eqn, r)
        ops = {"remainder": "%", "floor_divide": "//"}
        if fn in ops and len(eqn.invars) == 2 and self._is_value(eqn):
            return self._computed(eqn, ops[fn], tuple(self.read(x) for x in eqn.invars))
        return self.inline(eqn, scope)

    def inline(self, eqn: Any, scope: Scope) -> None:
        inner = _sub_jaxpr(eqn)
        if inner is None:
            raise Unsupported(f"{eqn.primitive.name}: a call whose body cannot be read")
        self._bind_consts(inner)
        invars = inner.invars
        if len(invars) != len(eqn.invars):
            raise Unsupported(f"{eqn.primitive.name}: a call with an unexpected signature")
        for a, b in zip(invars, eqn.invars, strict=True):
            self.env[a] = self.read(b)
        where = self.where
        self.body(inner, scope)
        self.where = where
        for o, i in zip(eqn.outvars, inner.outvars, strict=True):
            self.env[o] = self.read(i)

    def _bind_consts(self, jaxpr: Any) -> None:
        for v, c in zip(jaxpr.constvars, jaxpr.consts, strict=False):
            if v in self.env:
                continue
            arr = _concrete(c)
            if arr is None:
                self.env[v] = Opaque("a value from outside the kernel")
            elif arr.ndim == 0 and _is_int_dtype(str(arr.dtype)):
                self.env[v] = V.const(int(arr)) if arr.dtype != bool else V.boolean(bool(arr))
            else:
                self.env[v] = Opaque("an array constant the kernel closes over")

    # ------------------------------------------------------------ arrays

    def _array_binop(self, eqn: Any, what: str) -> None:
        a, b = (self.read(x) for x in eqn.invars)
        out_aval = eqn.outvars[0].aval
        shape = tuple(getattr(out_aval, "shape", ()))
        dtype = str(getattr(out_aval, "dtype", ""))
        computed = any(
            isinstance(x, Computed) or isinstance(x, V.Int) and x.const is None for x in (a, b)
        )
        if what in ("add", "sub") and not computed:
            for x in (a, b):
                if isinstance(x, Opaque):
                    raise Unsupported(f"{what} of {x.reason}")
            if isinstance(a, Const) and isinstance(b, Const) and not a.shape and not b.shape:
                value = a.value + b.value if what == "add" else a.value - b.value
                return self.out(eqn, Const(value, dtype, shape))
            return self.out(eqn, Sum(a, b, 1 if what == "add" else -1, dtype, shape))
        ops = {"add": "+", "sub": "-", "mul": "*", "max": "max", "min": "min"}
        if what.startswith("div") and dtypes.is_float(dtype):
            op = "/"  # lax.div of floats is true division
        elif what in ops:
            op = ops[what]
        else:
            raise Unsupported(
                f"{what} of integer arrays: lax.div and lax.rem truncate, a compute value's "
                "// and % floor (jnp's); write // or % where the floor is meant"
            )
        self._computed(eqn, op, (a, b))

    def _computed(self, eqn: Any, op: str, args: tuple[Any, ...], param: Any = None) -> None:
        """The equation's value as a ``Computed`` of ``args`` (each a load, a constant, a
        sum or a computed value)."""
        for x in args:
            if isinstance(x, Opaque):
                raise Unsupported(f"{eqn.primitive.name} of {x.reason}")
            if isinstance(x, V.Int) and not V.fits(x):
                raise Unsupported(
                    f"{eqn.primitive.name} of an index whose expression is longer than a "
                    "scenario allows"
                )
            if not isinstance(x, Load | Const | Sum | Computed | V.Int | SemValue):
                raise Unsupported(f"{eqn.primitive.name} of a value a compute cannot load")
        aval = eqn.outvars[0].aval
        shape = tuple(int(d) for d in getattr(aval, "shape", ()))
        self.out(eqn, Computed(op, tuple(args), str(aval.dtype), shape, param))

    def _is_value(self, eqn: Any) -> bool:
        """An equation on array values (not on the integers of indices)."""
        return _array_aval(eqn.outvars[0]) or any(_is_array_value(self.read(x)) for x in eqn.invars)

    def p_iota(self, eqn, scope):
        self._computed(eqn, "iota", (), int(eqn.params["dimension"]))

    def p_integer_pow(self, eqn, scope):
        if eqn.params.get("y") != 2:
            raise Unsupported(f"integer_pow (x ** {eqn.params.get('y')}): only x ** 2 is x * x")
        a = self.read(eqn.invars[0])
        self._computed(eqn, "*", (a, a))

    def p_square(self, eqn, scope):
        a = self.read(eqn.invars[0])
        self._computed(eqn, "*", (a, a))

    def p_broadcast_in_dim(self, eqn, scope):
        v = self.read(eqn.invars[0])
        shape = tuple(eqn.params["shape"])
        if isinstance(v, Const) and (not v.shape or all(d == 1 for d in v.shape)):
            return self.out(eqn, Const(_scalar(v.value), v.dtype, shape))
        if isinstance(v, V.Int):  # an index, broadcast where an operation uses it
            dtype = "bool" if v.is_bool else "int32"
            return self.out(eqn, Computed("broadcast", (v,), dtype, shape))
        if isinstance(v, SemValue):
            return self.out(eqn, Computed("broadcast", (v,), v.dtype, shape))
        dims = tuple(eqn.params.get("broadcast_dimensions", ()))
        rank = len(getattr(eqn.invars[0].aval, "shape", ()))
        if isinstance(v, Computed) and v.op == "reduce" and not v.param[2]:
            fn, axes, _ = v.param
            kept = tuple(d for i, d in enumerate(shape) if i not in axes)
            if dims == tuple(i for i in range(len(shape)) if i not in axes) and kept == v.shape:
                # keepdims=True: the reduced axes back as 1s
                if all(shape[i] == 1 for i in axes):
                    kd = Computed("reduce", v.args, v.dtype, shape, (fn, axes, True))
                    return self.out(eqn, kd)
        if isinstance(v, Load | Sum | Computed) and dims == tuple(
            range(len(shape) - rank, len(shape))
        ):
            # numpy's broadcasting: the operation that uses it broadcasts the same way
            return self.out(eqn, Computed("broadcast", (v,), _dtype_of(v) or "", shape))
        raise Unsupported("broadcast_in_dim of an array value along its leading dims")

    def p_broadcast_to(self, eqn, scope):
        """An index broadcast to the shape of an array index next to it: JAX's
        ``NDIndexer`` binds it (``x_ref.at[ids_ref[...], 0]``), and only there, where the
        view is made (a view never used too). Indexing by an array is not imported, so
        neither is this (the Mosaic GPU lowering refuses it: GPU_INDEX_BROADCAST)."""
        raise Unsupported(
            "integer indices of different shapes, an array next to a scalar (a gather view, its "
            "indices broadcast by broadcast_to, which the Mosaic GPU lowering refuses: "
            "GPU_INDEX_BROADCAST)"
        )

    def p_multiple_of(self, eqn, scope):  # pl.multiple_of: a hint, the same value
        self.out(eqn, self.read(eqn.invars[0]))

    def p_layout_cast(self, eqn, scope):
        v = self.read(eqn.invars[0])
        self.cast_layout.add(id(v))
        self.out(eqn, v)

    def _reduce(self, eqn: Any, fn: str) -> None:
        """``jnp.sum`` / ``jnp.max`` / ``jnp.min`` along ``axes`` (a compute value's
        reduction; ``keepdims`` is the ``broadcast_in_dim`` after it)."""
        v = self.read(eqn.invars[0])
        axes = tuple(int(a) for a in eqn.params["axes"])
        rank = len(getattr(eqn.invars[0].aval, "shape", ()))
        if len(axes) < rank and _through_layout_cast(v, self.cast_layout):
            raise Unsupported(
                f"jnp.{fn} along an axis of a value cast to a register layout "
                "(plgpu.layout_cast): a compute value carries no layouts"
            )
        self._computed(eqn, "reduce", (v,), (fn, axes, False))

    def p_reduce_sum(self, eqn, scope):
        self._reduce(eqn, "sum")

    def p_reduce_max(self, eqn, scope):
        self._reduce(eqn, "max")

    def p_reduce_min(self, eqn, scope):
        self._reduce(eqn, "min")

    def p_optimization_barrier(self, eqn, scope):
        for o, i in zip(eqn.outvars, eqn.invars, strict=True):
            self.env[o] = self.read(i)

    # ------------------------------------------------------------ refs and transforms

    def view(self, atom: Any, transforms: Any) -> View:
        base = self.read(atom)
        if not isinstance(base, View):
            raise Unsupported("a ref that is not one of the kernel's parameters or scratch")
        ts = list(transforms or ())
        n = len(base.skip)
        if n and [type(t).__name__ for t in ts[:n]] == list(base.skip):
            ts = ts[n:]
        v = base
        for t in ts:
            v = self.transform(v, t)
        return v

    def transform(self, v: View, t: Any) -> View:
        kind = type(t).__name__
        if kind == "NDIndexer":
            return self._indexer(v, t)
        if kind == "PeerMemRef":
            device = self.device(t.device_id, _id_type(getattr(t, "device_id_type", None)))
            return v.with_({"op": "remote_ref", "device": device}, v.shape)
        if kind == "MulticastRef":
            axes = list(t.collective_axes)
            return v.with_(
                {"op": "multicast_ref", "axes": axes[0] if len(axes) == 1 else axes}, v.shape
            )
        if kind == "ClusterRefTransform":
            block = {
                str(d): self.text(i, "a cluster block") for d, i in zip(t.dims, t.idxs, strict=True)
            }
            return v.with_({"op": "cluster_ref", "block": block}, v.shape)
        if kind in ("BitcastTransform", "RefBitcaster"):
            dt = str(np.dtype(t.dtype).name) if not hasattr(t.dtype, "name") else t.dtype.name
            shape = tuple(getattr(t, "shape", ()) or _bitcast_shape(v.shape, v.dtype, dt))
            return v.with_({"op": "bitcast", "dtype": dt}, shape, dt)
        if kind in ("ReshapeTransform", "RefReshaper"):
            return v.with_({"op": "reshape", "shape": list(t.shape)}, tuple(t.shape))
        if kind in ("TransposeTransform", "TransposeRef", "RefTransposer"):
            perm = list(t.permutation)
            via = "transpose_ref" if "transpose_ref" in F.line_text(self.where) else "method"
            shape = tuple(v.shape[p] for p in perm)
            return v.with_({"op": "transpose", "perm": perm, "via": via}, shape)
        if kind == "Im2ColTransform":
            pads = [list(p) for p in t.padding]
            op = {"op": "im2col_ref", "window_shape": list(t.window_shape), "padding": pads}
            return v.with_(op, Im2Col.model_validate(op).view_shape(v.shape))
        raise Unsupported(f"the ref transform {kind}")

    def _indexer(self, v: View, idx: Any) -> View:
        if tuple(getattr(idx, "int_indexer_shape", ()) or ()):
            raise Unsupported("indexing a ref with an array of indices")
        entries: list[Any] = []
        shape: list[int] = []
        dims = tuple(getattr(idx, "shape", v.shape))
        indices = list(idx.indices)
        if len(indices) > len(dims):
            raise Unsupported("an index with more entries than the ref has dimensions")
        shape_tail = list(dims[len(indices) :])
        for d, ix in zip(dims, indices, strict=False):
            if _is(ix, "Slice"):
                stride = ix.stride if isinstance(ix.stride, int) else _literal_int(ix.stride)
                if stride != 1:
                    raise Unsupported("a strided slice (ref[a:b:step])")
                size = ix.size if isinstance(ix.size, int) else _literal_int(ix.size)
                if size is None:
                    raise Unsupported("a slice of a traced size (pl.ds(start, traced))")
                start = ix.start
                if isinstance(start, int | np.integer):
                    s = int(start)
                    entries.append(None if (s == 0 and size == d) else [s, s + size])
                else:
                    st = self.int_(start, "a slice start")
                    if st.const is not None:
                        s = st.const
                        entries.append(None if (s == 0 and size == d) else [s, s + size])
                    else:
                        if not V.fits(st):
                            raise Unsupported("a slice start longer than a scenario allows")
                        entries.append({"ds": [st.text(), size]})
                shape.append(size)
            else:
                if _is(ix, "Literal") or isinstance(ix, int | np.integer):
                    entries.append(_literal_int(ix))
                else:
                    entries.append(self.text(ix, "an integer index"))
        shape += shape_tail
        while entries and entries[-1] is None:
            entries.pop()
        if not entries:
            return v
        return v.with_({"op": "at", "index": entries}, tuple(shape))

    def device(self, device_id: Any, id_type: str = "MESH") -> Any:
        """A device id as the scenario writes it (mesh coordinates). A LOGICAL id is the
        row-major index over the device mesh: on an N-D mesh, its coordinates."""
        axes = list(self.mesh.devices)
        if id_type == "LOGICAL" and not isinstance(device_id, dict | tuple | list):
            if len(axes) <= 1:
                return self.text(device_id, "a device id")
            e = self.int_(device_id, "a device id")
            out: dict[str, Any] = {}
            stride = int(np.prod([self.mesh.devices[a] for a in axes]))
            for a in axes:
                stride //= self.mesh.devices[a]
                c = V.floor_div(e, V.const(stride)) if stride > 1 else e
                c = V.floor_mod(c, V.const(self.mesh.devices[a])) if c is not None else None
                if c is None or not V.fits(c):
                    raise Unsupported(
                        "a LOGICAL device id the scenario cannot split into mesh coordinates"
                    )
                out[a] = c.text()
            return out
        if isinstance(device_id, dict):
            out = {}
            for k, x in device_id.items():
                if isinstance(k, tuple):
                    raise Unsupported("a device id keyed by a tuple of axes")
                out[str(k)] = self.text(x, "a device id")
            return out
        if isinstance(device_id, tuple | list):
            axes = list(self.mesh.devices)
            if len(device_id) != len(axes):
                raise Unsupported(
                    f"a device id of {len(device_id)} coordinates on a {len(axes)}-D device mesh"
                )
            return {a: self.text(x, "a device id") for a, x in zip(axes, device_id, strict=True)}
        return self.text(device_id, "a device id")

    def _unflatten(self, eqn: Any, key: str = "args_tree") -> Any:
        tree = eqn.params[key]
        return tree.unflatten(list(eqn.invars))

    # ------------------------------------------------------------ loads and stores

    def p_get(self, eqn, scope):
        ref, transforms = _state_args(eqn, "get")
        view = self.view(ref, transforms)
        self.out(eqn, Load(view, self.stamp, self.where, scope.loops()))

    def p_load(self, eqn, scope):  # plgpu.load
        raise Unsupported("plgpu.load (a load with a layout): write ref[...]")

    def p_swap(self, eqn, scope):
        ref, transforms, val = _state_args(eqn, "swap")
        dst = self.view(ref, transforms)
        self.store(scope, dst, self.read(val), val)
        for o in eqn.outvars:
            self.env[o] = Opaque("the value a store replaced (ref.swap)")

    def p_addupdate(self, eqn, scope):
        ref, transforms, val = _state_args(eqn, "addupdate")
        dst = self.view(ref, transforms)
        current = Load(dst, self.stamp, self.where, scope.loops())
        self.store(scope, dst, Sum(current, self.read(val), 1, dst.dtype, dst.shape), None)

    def store(self, scope: Scope, dst: View, value: Any, atom: Any) -> None:
        """The statements that leave ``value`` in ``dst``."""
        if isinstance(value, Load):
            self.use(scope, value)
            src = self.ref(scope, value.view)
            d = self.ref(scope, dst)
            self.emit(scope, {"op": "copy", "src": src, "dst": d}, writes=(dst,))
            return
        if isinstance(value, Const):
            d = self.ref(scope, dst)
            self.emit(scope, {"op": "fill", "dst": d, "value": _scalar(value.value)}, writes=(dst,))
            return
        if isinstance(value, Reduce):
            src, d = self.ref(scope, value.src), self.ref(scope, dst)
            self.emit(
                scope,
                {
                    "op": "multimem_load_reduce",
                    "src": src,
                    "dst": d,
                    "axes": list(value.axes) if isinstance(value.axes, tuple) else value.axes,
                    "reduction": value.reduction,
                },
                writes=(dst,),
            )
            return
        if isinstance(value, Sum):
            try:
                return self._store_sum(scope, dst, value)
            except Unsupported:
                return self._store_value(scope, dst, value)  # a compute value instead
        if isinstance(value, Computed):
            return self._store_value(scope, dst, value)
        if isinstance(value, Dot):
            if dst.dtype != value.dtype:
                raise Unsupported(
                    f"storing a product (wgmma) into a {dst.dtype} ref: the scenario's dot "
                    "stores the float32 accumulator"
                )
            if dst.space != "GMEM" and dst.space != "SMEM":
                raise Unsupported(f"storing a product into {dst.space}")
            for x in (value.lhs, value.rhs):
                self.use(scope, x)
            st = {
                "op": "dot",
                "dst": self.ref(scope, dst),
                "lhs": self.ref(scope, value.lhs.view),
                "rhs": self.ref(scope, value.rhs.view),
            }
            self.emit(scope, st, writes=(dst,))
            return
        if isinstance(value, Opaque):
            raise Unsupported(f"storing {value.reason}")
        if isinstance(value, V.Int):
            raise Unsupported(
                "storing an integer computed from indices (the scenario's fill takes constants)"
            )
        raise Unsupported("storing a value the scenario language cannot compute")

    def _store_value(self, scope: Scope, dst: View, value: Sum | Computed) -> None:
        """``dst[...] = value`` as one ``compute`` statement."""
        text = self._value_text(scope, dst, value)
        d = self.ref(scope, dst)
        self.emit(scope, {"op": "compute", "dst": d, "value": text}, writes=(dst,))

    def _value_text(
        self, scope: Scope, dst: View, value: Sum | Computed, reads_sems: bool = True
    ) -> str:
        """``value``, stored into ``dst``, as a compute value's text (its loads used)."""
        from mpmd_lab.ops import values as VAL

        loads: list[Load | SemValue] = []
        node = self._value_node(value, loads)
        ty = node.typed({f"#{i}": (x.view.shape, x.view.dtype) for i, x in enumerate(loads)})
        if ty.shape != tuple(dst.shape):
            raise Unsupported(
                f"storing a value of shape {ty.shape} into {dst.param} {tuple(dst.shape)} "
                "(broadcast by the store)"
            )
        names = {}
        for i, x in enumerate(loads):
            if isinstance(x, SemValue) and not reads_sems:
                raise Unsupported(
                    f"a semaphore's value (pl.semaphore_read of {x.view.param}) in a "
                    "multimem_store's value"
                )
            if isinstance(x, SemValue):
                if x.stamp != self.stamp:  # the compute would read it later than the kernel
                    raise Unsupported(
                        f"a semaphore's value (pl.semaphore_read of {x.view.param}) stored "
                        "after other statements ran: a compute reads it where it stores"
                    )
            else:
                self.use(scope, x)
            names[f"#{i}"] = self.ref(scope, x.view)
        text = node.source(VAL.Label(names))
        if len(text) > VAL.MAX_TEXT:
            raise Unsupported("a computed value longer than a compute statement takes")
        return text

    def _value_node(self, v: Any, loads: list[Load | SemValue]) -> Any:
        """``v`` as a compute value (``mpmd_lab.ops.values``); each load (and semaphore
        read) is named ``#k``, its index in ``loads``."""
        from mpmd_lab.ops import values as VAL

        if isinstance(v, Load):
            loads.append(v)
            return VAL.Load(f"#{len(loads) - 1}")
        if isinstance(v, SemValue):
            loads.append(v)
            return VAL.SemRead(f"#{len(loads) - 1}")
        if isinstance(v, V.Int) and v.const is not None:
            return VAL.Lit(bool(v.const) if v.is_bool else int(v.const))
        if isinstance(v, V.Int):  # where the kernel runs: an index expression
            return VAL.Index(E.parse(v.text()))
        if isinstance(v, Const):
            return VAL.Lit(_scalar(v.value))
        if isinstance(v, Sum):
            a, b = self._value_node(v.a, loads), self._value_node(v.b, loads)
            return VAL.Bin("+" if v.sign > 0 else "-", a, b)
        if not isinstance(v, Computed):
            raise Unsupported("a value a compute statement cannot load")
        args = [self._value_node(x, loads) for x in v.args]
        if v.op == "neg":
            return VAL.Neg(args[0])
        if v.op == "where":
            return VAL.Where(*args)
        if v.op == "cast":
            return VAL.Cast(args[0], v.param)
        if v.op == "iota":
            return VAL.Iota(v.dtype, v.shape, v.param)
        if v.op == "broadcast":
            return args[0]
        if v.op == "reduce":
            fn, axes, keepdims = v.param
            rank = len(_shape_of(v.args[0]))
            axis: int | tuple[int, ...] | None = axes
            if not keepdims and axes == tuple(range(rank)):
                axis = None  # the whole value, as jnp.sum(x) says it
            elif len(axes) == 1:
                axis = axes[0]
            return VAL.Reduce(fn, args[0], axis, keepdims)
        return VAL.Bin(v.op, args[0], args[1])

    def _store_sum(self, scope: Scope, dst: View, s: Sum) -> None:
        """``dst = t0 + t1 + ...`` as JAX adds them, left to right: the first two terms
        (in either order: addition commutes) with one ``add`` (or a ``fill`` and an
        ``add`` when one is a constant), then one ``add dst = dst + t`` per further term.
        Floating-point addition does not associate, so the order is JAX's."""
        terms = _terms(s)
        if terms is None:
            raise Unsupported("sub of two values (the scenario language adds, copies, fills)")
        for x in terms:
            if isinstance(x, Opaque):
                raise Unsupported(f"add of {x.reason}")
            if not isinstance(x, Load | Const):
                raise Unsupported("a sum of computed values (the scenario language adds refs)")
        consts = [x for x in terms if isinstance(x, Const)]
        if len(terms) - len(consts) == 0:
            total = sum(c.value for c in consts)
            return self.store(scope, dst, Const(total, s.dtype, s.shape), None)
        if any(isinstance(x, Const) for x in terms[2:]) or len(consts) > 1:
            raise Unsupported(
                "a sum that adds a constant after two other terms: the scenario's add reads "
                "two refs, and adding in another order would change the float result"
            )
        first, second = terms[0], terms[1]
        rest = terms[2:]
        mem = self.mem(dst.param)
        for x in rest:
            if self.mem(x.view.param) == mem:
                raise Unsupported(
                    f"a sum of three or more terms stored into {dst.param} that reads "
                    f"{x.view.param} after the first add has written {dst.param}"
                )
        d = self.ref(scope, dst)
        if isinstance(first, Const) or isinstance(second, Const):
            load = second if isinstance(first, Const) else first
            const = first if isinstance(first, Const) else second
            if self.mem(load.view.param) == mem:
                same = (
                    ""
                    if load.view.param == dst.param
                    else f" ({load.view.param} and {dst.param} are one Ref passed twice)"
                )
                raise Unsupported(
                    f"a sum of a constant and {load.view.param} stored into {dst.param}{same}: "
                    "the scenario's add reads two refs, and filling the destination with the "
                    "constant first would overwrite what it reads"
                )
            self.store(scope, dst, const, None)  # dst = the constant first
            self.use(scope, load)
            lv = self.ref(scope, load.view)
            lhs, rhs = (lv, d) if load is first else (d, lv)
        else:
            for x in (first, second):
                self.use(scope, x)
            lhs, rhs = self.ref(scope, first.view), self.ref(scope, second.view)
        self.emit(scope, {"op": "add", "dst": d, "lhs": lhs, "rhs": rhs}, writes=(dst,))
        for x in rest:
            self.use(scope, x)
            rv = self.ref(scope, x.view)
            self.emit(scope, {"op": "add", "dst": d, "lhs": d, "rhs": rv}, writes=(dst,))

    # ------------------------------------------------------------ semaphores

    def p_semaphore_signal(self, eqn, scope):
        ref, transforms, inc, device_id, core_index = self._unflatten(eqn)
        if core_index is not None:
            raise Unsupported("semaphore_signal with a core_index")
        id_type = _id_type(eqn.params.get("device_id_type"))
        sem = self.ref(scope, self.view(ref, transforms))
        st: dict[str, Any] = {
            "op": "semaphore_signal",
            "sem": sem,
            "inc": self.text(inc, "an increment"),
        }
        if device_id is not None:
            st["device"] = self.device(device_id, id_type)
        self.emit(scope, st)

    def p_semaphore_wait(self, eqn, scope):
        ref, transforms, value, decrement = self._unflatten(eqn)
        sem = self.ref(scope, self.view(ref, transforms))
        if isinstance(decrement, bool | np.bool_):
            dec = bool(decrement)
        else:
            d = self.int_(decrement, "decrement")
            if d.const is None:
                raise Unsupported("semaphore_wait with a traced decrement")
            dec = bool(d.const)
        st = {
            "op": "semaphore_wait",
            "sem": sem,
            "value": self.text(value, "a semaphore value"),
            "decrement": bool(dec),
        }
        self.emit(scope, st, sync=True)

    def p_semaphore_signal_multicast(self, eqn, scope):
        ref, transforms, value = self._unflatten(eqn)
        sem = self.ref(scope, self.view(ref, transforms))
        axes = list(eqn.params["collective_axes"])
        st = {
            "op": "semaphore_signal_multicast",
            "sem": sem,
            "inc": self.text(value, "an increment"),
            "axes": axes[0] if len(axes) == 1 else axes,
        }
        self.emit(scope, st)

    def p_semaphore_signal_parallel(self, eqn, scope):
        refs, transforms, incs, device_ids = self._unflatten(eqn)
        for r, t, inc, dev in zip(refs, transforms, incs, device_ids, strict=True):
            sem = self.ref(scope, self.view(r, t))
            st: dict[str, Any] = {"op": "semaphore_signal", "sem": sem, "inc": self.text(inc)}
            if dev is not None:
                st["device"] = self.device(dev)
            self.emit(scope, st)

    def p_semaphore_read(self, eqn, scope):
        """A value a ``compute`` may use (``pl.semaphore_read(sem)`` in its value)."""
        ref, transforms = self._unflatten(eqn)
        self.out(eqn, SemValue(self.view(ref, transforms), self.stamp))

    def p_get_global(self, eqn, scope):
        """``pl.get_global(plgpu.SemaphoreType.REGULAR)``: a semaphore scratch every block
        of the device shares (``alloc: get_global``), named as the user's line names it."""
        aval = eqn.outvars[0].aval
        name = self.fresh(_assigned_name(F.line_text(self.where)) or "global_sem")
        sc, view = scratch_of(name, aval, ())
        if sc.get("kind") != "semaphore":  # JAX's GPU lowering: NotImplementedError
            raise Unsupported("get_global of anything but a semaphore")
        sc["alloc"] = "get_global"
        self.scratch[name] = sc
        self.env[eqn.outvars[0]] = view

    # ------------------------------------------------------------ barriers, async copies

    def _barrier(self, eqn: Any) -> View:
        n = eqn.params["transforms_treedef"].num_leaves
        flat = list(eqn.invars[1 : 1 + n])
        transforms = eqn.params["transforms_treedef"].unflatten(flat)
        return self.view(eqn.invars[0], transforms)

    def p_barrier_wait(self, eqn, scope):
        self.emit(
            scope, {"op": "barrier_wait", "barrier": self.ref(scope, self._barrier(eqn))}, sync=True
        )

    def p_barrier_arrive(self, eqn, scope):
        if eqn.params.get("has_user_predicate"):
            raise Unsupported("barrier_arrive with a predicate")
        self.emit(
            scope,
            {"op": "barrier_arrive", "barrier": self.ref(scope, self._barrier(eqn))},
            sync=True,
        )

    def p_barrier_arrive_and_wait(self, eqn, scope):
        bar = self.ref(scope, self._barrier(eqn))
        self.emit(scope, {"op": "barrier_arrive_and_wait", "barrier": bar}, sync=True)

    def _copy_parts(self, eqn: Any, has_barrier: bool) -> tuple[View, View, View | None]:
        p = eqn.params
        nb = 3 if has_barrier else 2
        flat = list(eqn.invars[nb:])
        if p.get("has_user_predicate"):
            raise Unsupported(f"{eqn.primitive.name} with a predicate")
        ns = p["src_transforms_treedef"].num_leaves
        nd = p["dst_transforms_treedef"].num_leaves
        src = self.view(eqn.invars[0], p["src_transforms_treedef"].unflatten(flat[:ns]))
        dst = self.view(eqn.invars[1], p["dst_transforms_treedef"].unflatten(flat[ns : ns + nd]))
        bar = None
        if has_barrier:
            bt = p["barrier_transforms_treedef"]
            bar = self.view(eqn.invars[2], bt.unflatten(flat[ns + nd : ns + nd + bt.num_leaves]))
        return src, dst, bar

    def p_copy_gmem_to_smem(self, eqn, scope):
        p = eqn.params
        if not p.get("has_barrier"):
            raise Unsupported("copy_gmem_to_smem without a barrier")
        if p.get("leader_tracked") is not None:
            raise Unsupported("copy_gmem_to_smem with leader_tracked")
        if p.get("oob_mode") is not None:
            raise Unsupported("copy_gmem_to_smem with an oob_mode")
        src, dst, bar = self._copy_parts(eqn, True)
        st = {
            "op": "copy_gmem_to_smem",
            "src": self.ref(scope, src),
            "dst": self.ref(scope, dst),
            "barrier": self.ref(scope, bar),
        }
        axes = p.get("collective_axes")
        if axes:  # a multicast load over these cluster axes
            st["collective_axes"] = axes[0] if len(axes) == 1 else list(axes)
        self.emit(scope, st, writes=(dst,))

    def p_copy_smem_to_gmem(self, eqn, scope):
        if eqn.params.get("reduction_op") is not None:
            raise Unsupported("copy_smem_to_gmem with a reduction_op (a reducing TMA store)")
        src, dst, _ = self._copy_parts(eqn, False)
        st: dict[str, Any] = {
            "op": "copy_smem_to_gmem",
            "src": self.ref(scope, src),
            "dst": self.ref(scope, dst),
        }
        if not eqn.params.get("commit_group", True):
            st["commit_group"] = False
        self.emit(scope, st, writes=(dst,))

    def p_commit_smem(self, eqn, scope):
        self.emit(scope, {"op": "commit_smem"})

    def p_wait_smem_to_gmem(self, eqn, scope):
        st: dict[str, Any] = {"op": "wait_smem_to_gmem", "n": int(eqn.params.get("n", 0))}
        if eqn.params.get("wait_read_only"):
            st["wait_read_only"] = True
        self.emit(scope, st, sync=True)

    # ------------------------------------------------------------ collectives, atomics

    def p_multimem_store(self, eqn, scope):
        value = self.read(eqn.invars[0])
        tree = eqn.params.get("transforms_tree")
        transforms = tree.unflatten(list(eqn.invars[2:])) if tree is not None else ()
        dst = self.view(eqn.invars[1], transforms)
        axes = eqn.params["collective_axes"]
        axes = list(axes) if isinstance(axes, tuple | list) else axes
        if isinstance(value, Load):
            self.use(scope, value)
            what = {"src": self.ref(scope, value.view)}
        elif isinstance(value, Computed | Sum):
            what = {"value": self._value_text(scope, dst, value, reads_sems=False)}
        else:
            raise Unsupported(
                "multimem_store of a value the scenario cannot compute (a ref's value or a "
                "compute value)"
            )
        st = {"op": "multimem_store", **what, "dst": self.ref(scope, dst), "axes": axes}
        self.emit(scope, st, writes=(dst,))

    def p_multimem_load_reduce(self, eqn, scope):
        tree = eqn.params["tree"]
        transforms = tree.unflatten(list(eqn.invars[1:]))
        src = self.view(eqn.invars[0], transforms)
        axes = eqn.params["collective_axes"]  # as the user gave it: JAX's lowering
        axes = tuple(axes) if isinstance(axes, tuple | list) else axes  # reads a str apart
        red = str(eqn.params.get("reduction_op", "add"))
        aval = eqn.outvars[0].aval
        self.out(eqn, Reduce(src, axes, red, tuple(aval.shape), str(aval.dtype)))

    def p_mgpu_atomic_store(self, eqn, scope):
        ref, transforms, val = self._unflatten(eqn)
        kind = str(eqn.params.get("atomic_type", "")).rsplit(".", 1)[-1]
        if kind != "ADD":
            raise Unsupported(f"an atomic {kind.lower()} (the scenario has atomic_add)")
        dst = self.view(ref, transforms)
        value = self.read(val)
        if not isinstance(value, Load):
            raise Unsupported("atomic_add of a computed value (the scenario adds a ref's value)")
        self.use(scope, value)
        st = {"op": "atomic_add", "dst": self.ref(scope, dst), "src": self.ref(scope, value.view)}
        self.emit(scope, st, writes=(dst,))

    # ------------------------------------------------------------ WGMMA

    def p_wgmma_ref(self, eqn, scope):
        p = eqn.params
        acc_atom, a_atom, b_atom = eqn.invars[:3]
        flat = list(eqn.invars[3:])
        trees = [p.get(f"{k}_transforms_tree") for k in ("acc", "a", "b")]
        parts, k = [], 0
        for tree in trees:
            n = tree.num_leaves if tree is not None else 0
            parts.append(tree.unflatten(flat[k : k + n]) if tree is not None else ())
            k += n
        acc = self.read(acc_atom)
        if not isinstance(acc, Acc):
            raise Unsupported("wgmma into an accumulator that is not a plgpu.ACC of pl.run_scoped")
        if parts[0]:
            raise Unsupported("wgmma into a view of an accumulator (acc.at[...])")
        if not isinstance(self.read(a_atom), View):
            raise Unsupported(
                "wgmma with the lhs in registers (the scenario's dot reads both operands from SMEM)"
            )
        if acc.value is not None:
            raise Unsupported(
                "a second wgmma into one accumulator (acc += a @ b): the scenario's dot "
                "stores one product"
            )
        a, b = self.view(a_atom, parts[1]), self.view(b_atom, parts[2])
        if a.transforms or b.transforms:
            raise Unsupported(
                "wgmma on a view of an SMEM operand (a slice, transpose or bitcast): the "
                "scenario's dot takes the SMEM refs themselves"
            )
        loops = scope.loops()
        la, lb = (Load(x, self.stamp, self.where, loops) for x in (a, b))
        acc.value = Dot(la, lb, acc.shape)

    def p_wgmma_accumulator_deref(self, eqn, scope):
        acc = self.read(eqn.invars[0])
        if not isinstance(acc, Acc):
            raise Unsupported("reading an accumulator that is not a plgpu.ACC of pl.run_scoped")
        self.out(eqn, acc.value if acc.value is not None else Const(0.0, acc.dtype, acc.shape))

    def p_set_max_registers(self, eqn, scope):
        """A register budget for the warpgroup: no effect on what the kernel computes."""

    # ------------------------------------------------------------ control flow

    def p_cond(self, eqn, scope):
        branches = eqn.params["branches"]
        index = self.int_(eqn.invars[0], "a condition")
        ops = list(eqn.invars[1:])
        if eqn.outvars and _scalar_branches(eqn):
            return self._cond_value(eqn, index, ops)
        for o in eqn.outvars:
            self.env[o] = Opaque("a value a condition computes (cond outputs)")
        n = len(branches)
        conds: list[V.Int] = []
        if n == 2:
            boolish = index.is_bool or isinstance(index.expr, E.Compare | E.BoolOp | E.Not)
            t = (
                V.Int(index.expr, index.lo, index.hi, True)
                if boolish
                else V.compare("!=", index, V.const(0))
            )
            conds = [V.logical_not(t), t]
        else:
            if index.lo < 0 or index.hi > n - 1:
                raise Unsupported("lax.switch on an index outside its branches (clamped)")
            conds = [V.compare("==", index, V.const(k)) for k in range(n)]
        for br, c in zip(branches, conds, strict=True):
            if not br.eqns:
                continue
            if c.const is not None:
                if c.const:  # the branch always runs: inline it
                    self._branch_env(br, ops)
                    self.body(br, scope)
                continue
            if not V.fits(c):
                raise Unsupported("a condition longer than a scenario allows")
            st: dict[str, Any] = {"op": "when", "cond": c.expr.label(), "body": []}
            where = self.where
            path = self.emit(scope, st)
            inner = Scope(st["body"], f"{path}.body", scope)
            self._branch_env(br, ops)
            self.body(br, inner)
            self.where = where

    def _cond_value(self, eqn: Any, index: V.Int, ops: list[Any]) -> None:
        """``lax.cond`` / ``lax.switch`` whose branches only compute integers (a peer, an
        offset): each branch's results, then the one the index picks, in arithmetic."""
        results = []
        for br in eqn.params["branches"]:
            self._branch_env(br, ops)
            for e in br.eqns:
                self.eqn(e, Scope([], "<cond>"))
            results.append([self.read(o) for o in br.outvars])
        n = len(results)
        if n > 2:  # lax.switch clamps its index
            lo, hi = V.const(0), V.const(n - 1)
            index = V.minimum(V.maximum(index, lo) or index, hi) or index
        for k, o in enumerate(eqn.outvars):
            cases = [r[k] for r in results]
            if not all(isinstance(c, V.Int) and not c.is_bool for c in cases):
                raise Unsupported("a condition (lax.cond) whose branches compute different values")
            c = index.const
            r = cases[c] if c is not None and 0 <= c < n else V.select_arith(index, cases)
            if r is None or not V.fits(r):
                raise Unsupported(
                    "a value a condition computes (cond outputs) the bounds cannot decide"
                )
            self.env[o] = r

    def _branch_env(self, br: Any, ops: list[Any]) -> None:
        self._bind_consts(br)
        for a, b in zip(br.invars, ops, strict=True):
            self.env[a] = self.read(b)

    def p_scan(self, eqn, scope):
        p = eqn.params
        jaxpr = p["jaxpr"]
        consts, carry, xs = _scan_groups(eqn)
        if xs:
            raise Unsupported("scan over arrays (lax.scan with xs): a loop over values")
        if p.get("reverse"):
            raise Unsupported("scan in reverse")
        length = int(p["length"])
        self._bind_consts(jaxpr)
        inv = list(jaxpr.invars)
        c_in = inv[len(consts) : len(consts) + len(carry)]
        outs = list(jaxpr.outvars)[: len(carry)]
        counter = _counter(jaxpr, c_in, outs)
        if counter is None:
            if length == 0:
                return
            raise Unsupported("scan without an index counter")
        start = self.int_(carry[counter], "a loop start")
        stop = V.add(start, V.const(length))
        self._loop(eqn, scope, jaxpr, inv[: len(consts)], consts, c_in, carry, counter, start, stop)

    def p_while(self, eqn, scope):
        """``lax.fori_loop`` with traced bounds (and ``lax.while_loop`` of that form): a
        counter carry the body adds one to, a condition ``counter < bound``."""
        p = eqn.params
        body, cond = p["body_jaxpr"], p["cond_jaxpr"]
        nc, nb = int(p["cond_nconsts"]), int(p["body_nconsts"])
        ops = list(eqn.invars)
        cconsts, bconsts, carry = ops[:nc], ops[nc : nc + nb], ops[nc + nb :]
        self._bind_consts(body)
        self._bind_consts(cond)
        binv = list(body.invars)
        c_in = binv[nb:]
        counter = _counter(body, c_in, list(body.outvars))
        if counter is None:
            raise Unsupported(
                "while (lax.while_loop): a loop without an index the body counts up by one"
            )
        start = self.int_(carry[counter], "a loop start")
        # the condition, with the counter as a symbol and every other carry at its value
        probe = "__mpmd_lab_counter"
        cinv = list(cond.invars)
        for a, b in zip(cinv[:nc], cconsts, strict=True):
            self.env[a] = self.read(b)
        for k, (a, b) in enumerate(zip(cinv[nc:], carry, strict=True)):
            self.env[a] = V.name(probe, start.lo, V.INT_MAX) if k == counter else self.read(b)
        for e in cond.eqns:
            if e.primitive.name not in _SCALAR_PRIMS and not _is_call(e):
                raise Unsupported(f"while with a condition that computes {e.primitive.name}")
            self.eqn(e, Scope([], "<cond>"))
        pred = self.read(cond.outvars[0])
        if not isinstance(pred, V.Int):  # a bound loaded from memory (n_ref[0])
            self._scope = scope
            pred = self._data_int(pred)
        stop = _bound_of(pred, probe)
        if stop is None:
            raise Unsupported("while (lax.while_loop) whose condition is not index < bound")
        for k, b in enumerate(carry):  # the bound's interval, when it is a carry's value
            v = self.read(b)
            if k != counter and isinstance(v, V.Int) and v.expr == stop.expr:
                stop = v
        self._loop(eqn, scope, body, binv[:nb], bconsts, c_in, carry, counter, start, stop)

    def _loop(
        self,
        eqn: Any,
        scope: Scope,
        jaxpr: Any,
        const_in: list[Any],
        consts: list[Any],
        c_in: list[Any],
        carry: list[Any],
        counter: int,
        start: V.Int,
        stop: V.Int,
    ) -> None:
        """A ``loop`` statement: the body once per counter value in ``[start, stop)``."""
        for o in eqn.outvars:
            self.env[o] = Opaque("a loop's result")
        if stop.const is not None and start.const is not None and stop.const <= start.const:
            return
        users = F.user_frames(F.eqn_frames(eqn))
        var = self._loop_var(jaxpr, users[-1] if users else None)
        line = F.line_text(self.where)
        via = "pl.loop" if ("pl.loop" in line or "@" in line) else "fori_loop"
        if not (V.fits(start) and V.fits(stop)):
            raise Unsupported("loop bounds longer than a scenario allows")
        st: dict[str, Any] = {
            "op": "loop",
            "var": var,
            "start": start.text(),
            "stop": stop.text(),
            "via": via,
            "body": [],
        }
        where = self.where
        path = self.emit(scope, st)
        self._loops += 1
        lid = self._loops
        begin = self.stamp
        inner = Scope(st["body"], f"{path}.body", scope, loop=lid)
        for a, b in zip(const_in, consts, strict=True):
            self.env[a] = self.read(b)
        for k, (a, b) in enumerate(zip(c_in, carry, strict=True)):
            if k == counter:
                self.env[a] = V.name(var, start.lo, max(start.lo, stop.hi - 1))
            else:
                self.env[a] = self.read(b)
        self.body(jaxpr, inner)
        self.where = where
        self.loop_ranges[lid] = (begin, self.stamp)
        for k, o in enumerate(eqn.outvars[: len(carry)]):
            if k != counter:
                self.env[o] = self.read(carry[k])

    def _loop_var(self, jaxpr: Any, loop_frame: F.Frame | None) -> str:
        """The user's name of the loop index (the body function's first parameter)."""
        fr = F.function_of(jaxpr.eqns, exclude=loop_frame)
        params = F.parameters(fr.file, fr.start_line) if fr and fr.start_line else None
        name = params[0] if params else None
        if not name or not name.isidentifier() or name.startswith("_"):
            name = "i"
        return self.fresh(name)

    def p_run_scoped(self, eqn, scope):
        inner = eqn.params["jaxpr"]
        allinv = list(inner.all_invars) if hasattr(inner, "all_invars") else list(inner.invars)
        ops = list(eqn.invars)
        for a, b in zip(allinv[: len(ops)], ops, strict=True):
            self.env[a] = self.read(b)
        scoped = allinv[len(ops) :]
        fr = F.function_of(inner.eqns, params=len(scoped)) if scoped else None
        names = F.parameters(fr.file, fr.start_line) if fr and fr.start_line else None
        if names is not None and len(names) == len(scoped):
            names = scoped_names(inner, len(scoped), names)
        transforms = eqn.params.get("ref_transforms", ()) or ()
        for k, v in enumerate(scoped):
            if type(v.aval).__name__ == "WGMMAAbstractAccumulatorRef":
                shape, dt, _ = _aval_info(v.aval)
                self.env[v] = Acc(shape, dt)  # registers, zero at the start
                continue
            base = names[k] if names and k < len(names) else f"scoped{k}"
            name = self.fresh(base)
            tr = transforms[k] if k < len(transforms) else ()
            sc, view = scratch_of(name, v.aval, tr)
            self.scratch[name] = {**sc, "alloc": "run_scoped"}
            self.env[v] = view
        self.body(inner, scope)
        outs = list(getattr(inner, "outvars", ()))
        for k, o in enumerate(eqn.outvars):
            value = self.read(outs[k]) if k < len(outs) else None
            if isinstance(value, Load) and value.view.param in {
                self.read(v).param for v in scoped if isinstance(self.read(v), View)
            }:  # a load of the scoped scratch itself: its memory is gone after the scope
                value = None
            if value is None or isinstance(value, Acc | View):
                value = Opaque("a value pl.run_scoped returns")
            self.env[o] = value


# ---------------------------------------------------------------- scratch


#: the integer operations of a ``Computed`` an index expression carries (a scalar
#: computed from a load or a semaphore read)
_INT_OPS: dict[str, Any] = {
    "+": V.add,
    "-": V.sub,
    "*": V.mul,
    "max": V.maximum,
    "min": V.minimum,
    "//": V.floor_div,
    "%": V.floor_mod,
    "neg": V.neg,
    **{op: (lambda a, b, op=op: V.compare(op, a, b)) for op in ("==", "!=", "<", "<=", ">", ">=")},
}


def _assigned_name(line: str) -> str | None:
    """The name a source line assigns (``sem = pl.get_global(...)``: ``sem``)."""
    m = re.match(r"([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)", line)
    return m.group(1) if m else None


def scoped_names(inner: Any, n: int, names: list[str]) -> list[str]:
    """The names of the last ``n`` parameters ``names`` of a ``run_scoped`` body, in the
    order of its jaxpr. Scratch given as a dict is bound by keyword, its keys flattened
    sorted (``{"smem_ref": .., "barrier_ref": ..}``: barrier_ref first), which is not the
    order of the ``def``: JAX's own argument names of the body say which is which."""
    arg_names = tuple(getattr(getattr(inner, "debug_info", None), "arg_names", None) or ())
    given = [str(a) for a in arg_names[len(arg_names) - n :]] if n else []
    keep = names[: len(names) - n]
    tail = names[len(names) - n :]
    if len(given) == n and all(a.isidentifier() for a in given) and set(given) == set(tail):
        return keep + given
    return names


def scratch_of(name: str, aval: Any, ref_transforms: Any) -> tuple[dict[str, Any], View]:
    """A scoped allocation (``plgpu.kernel``'s scratch, ``pl.run_scoped``) as scenario
    scratch, and the view the body sees (the layout transforms undone)."""
    shape, dt, space = _aval_info(aval)
    dtype: Any = getattr(getattr(aval, "inner_aval", aval), "dtype", None)  # JAX's, or None
    tname = type(dtype).__name__
    if dt == "semaphore" or "semaphore" in tname.lower() or "sem" in str(dtype).lower():
        return {"kind": "semaphore", "shape": list(shape)}, View(
            name, (), "GMEM", shape, "semaphore"
        )
    if tname == "ClusterBarrierType":
        n = shape[0] if shape else 1
        if len(shape) > 1:
            raise Unsupported("a cluster barrier array of more than one dimension")
        axes = [a if isinstance(a, str) else a for a in dtype.collective_axes]
        sc: dict[str, Any] = {
            "kind": "cluster_barrier",
            "collective_axes": axes[0] if len(axes) == 1 else axes,
            "num_arrivals": int(dtype.num_arrivals),
            "num_barriers": n,
        }
        return sc, View(name, (), "SMEM", shape, "barrier")
    if tname == "BarrierType":
        if len(shape) > 1:
            raise Unsupported("a barrier array of more than one dimension")
        sc = {
            "kind": "barrier",
            "num_arrivals": int(dtype.num_arrivals),
            "num_barriers": shape[0] if shape else 1,
        }
        return sc, View(name, (), "SMEM", shape, "barrier")
    if space not in ("GMEM", "SMEM", "TMEM"):
        acc = "ACC" in tname or "WGMMA" in type(aval).__name__
        what = "a WGMMA accumulator (plgpu.ACC)" if acc else f"scratch in {space}"
        raise Unsupported(f"{what}: the scenario's scratch lives in SMEM, GMEM or TMEM")
    if dt not in dtypes.DTYPES:
        raise Unsupported(f"scratch of dtype {dt}")
    layout: list[dict[str, Any]] = []
    logical = shape
    ty = aval
    for t in ref_transforms or ():
        k = type(t).__name__
        if k == "UntilingTransform":
            layout.append({"op": "tiling", "tile": list(t.tiling)})
        elif k == "UnswizzleRef":
            layout.append({"op": "swizzle", "bytes": int(t.swizzle)})
        else:
            raise Unsupported(f"the scratch transform {k}")
        ty = t.transform_type(ty)
        logical = _aval_info(ty)[0]
    # the ref transforms undo the layout (unswizzle, then untile): scratch lists them
    # in the order they are applied to the logical shape (tile, then swizzle)
    layout.reverse()
    sc = {"shape": list(logical), "dtype": dt, "memory_space": space}
    if layout:
        sc["transforms"] = layout
    skip = tuple(type(t).__name__ for t in ref_transforms or ())
    return sc, View(name, (), space, tuple(logical), dt, skip)


# ---------------------------------------------------------------- helpers


def _short(where: str | None) -> str:
    """The user's line as they read it (``cell [3], line 11``, ``kernels.py:11``)."""
    return F.display(where)


def _stem(param: str) -> str:
    return param[:-4] if param.endswith("_ref") and len(param) > 4 else param


def _literal(lit: Any) -> Any:
    val = getattr(lit, "val", lit)
    arr = np.asarray(val)
    dt = str(getattr(getattr(lit, "aval", None), "dtype", arr.dtype))
    if arr.ndim == 0:
        py = arr.item()
        if _is_int_dtype(dt) and dt != "bool":
            return V.const(int(py))
        if dt == "bool":
            return V.boolean(bool(py))
        return Const(py, dt)
    return Opaque("an array literal")


def _derived(v: Any) -> bool:
    try:
        return isinstance(v, Opaque) and v.derived
    except TypeError:  # an unhashable atom
        return False


def _literal_int(x: Any) -> int | None:
    try:
        return int(np.asarray(getattr(x, "val", x)))
    except (TypeError, ValueError):
        return None


def _scalar(v: Any) -> Any:
    """A Python bool, int or float (a fill's value)."""
    if isinstance(v, np.generic | np.ndarray):
        v = np.asarray(v).item()
    if isinstance(v, bool | int):
        return v
    return float(v)


def _cast(value: Any, dtype: str) -> Any:
    try:
        return np.asarray(value).astype(dtypes.np_dtype(dtype)).item()
    except Exception:  # noqa: BLE001 - an exotic dtype: keep the value
        return value


def _is_int_dtype(dt: str) -> bool:
    return dt == "bool" or dt.startswith("int") or dt.startswith("uint")


def _array_aval(v: Any) -> bool:
    shape = getattr(getattr(v, "aval", None), "shape", ())
    return bool(shape) or "float" in str(getattr(getattr(v, "aval", None), "dtype", ""))


def _semaphore_read_in(v: Any) -> SemValue | None:
    """The first semaphore read a value is computed from (None: none)."""
    if isinstance(v, SemValue):
        return v
    parts = v.args if isinstance(v, Computed) else (v.a, v.b) if isinstance(v, Sum) else ()
    return next((r for r in map(_semaphore_read_in, parts) if r is not None), None)


def _is_array_value(v: Any) -> bool:
    return isinstance(v, Load | Sum | Reduce | Dot | Computed | SemValue) or (
        isinstance(v, Const) and not _is_int_dtype(v.dtype)
    )


def _shape_of(v: Any) -> tuple[int, ...]:
    if isinstance(v, Load):
        return tuple(v.view.shape)
    return tuple(getattr(v, "shape", ()))


def _through_layout_cast(v: Any, cast: set[int]) -> bool:
    """Whether ``v`` (or a value it is computed from) went through a layout cast."""
    if id(v) in cast:
        return True
    parts = v.args if isinstance(v, Computed) else (v.a, v.b) if isinstance(v, Sum) else ()
    return any(_through_layout_cast(x, cast) for x in parts)


def _dtype_of(v: Any) -> str | None:
    if isinstance(v, Load):
        return v.view.dtype
    return getattr(v, "dtype", None)


def _bitcast_shape(shape: tuple[int, ...], src: str, dst: str) -> tuple[int, ...]:
    a, b = dtypes.bits(src), dtypes.bits(dst)
    if a == b or not shape:
        return shape
    if len(shape) == 1:
        return (shape[0] * a // b,)
    s = list(shape)
    s[-2] = s[-2] * a // b
    return tuple(s)


def _id_type(t: Any) -> str:
    """``"MESH"`` or ``"LOGICAL"`` (a ``pl.DeviceIdType``; MESH when not given)."""
    name = str(getattr(t, "name", t) or "MESH").rsplit(".", 1)[-1].upper()
    return "LOGICAL" if "LOGICAL" in name else "MESH"


def _terms(s: Any) -> list[Any] | None:
    """The terms of a sum, left to right as JAX adds them (``(a + b) + c``: a, b, c); a
    constant subtracted is added negated; None where a value is subtracted."""
    if not isinstance(s, Sum):
        return [s]
    left = _terms(s.a)
    if left is None:
        return None
    b = s.b
    if s.sign < 0:
        if not (isinstance(b, Const) and not b.shape):
            return None
        b = Const(-b.value, b.dtype)
    if isinstance(b, Sum) and len(left) == 1:  # a + (b + c) == (b + c) + a
        inner = _terms(b)
        return None if inner is None else [*inner, *left]
    return [*left, b]  # (a + b) + (c + d): the inner sum stays a computed value


def _state_args(eqn: Any, kind: str) -> tuple[Any, ...]:
    """``(ref, transforms[, value])`` of a get / swap / addupdate equation."""
    tree = eqn.params.get("tree")
    if kind == "get":
        ref = eqn.invars[0]
        n = tree.num_leaves if tree is not None else 0
        leaves = list(eqn.invars[1 : 1 + n])
        return ref, tree.unflatten(leaves) if tree is not None else ()
    ref, val = eqn.invars[0], eqn.invars[1]
    n = tree.num_leaves if tree is not None else 0
    leaves = list(eqn.invars[2 : 2 + n])
    return ref, (tree.unflatten(leaves) if tree is not None else ()), val


def _sub_jaxpr(eqn: Any) -> Any:
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr", "call"):
        j = eqn.params.get(key)
        if j is not None and hasattr(j, "eqns"):
            return j
    return None


def _is_call(eqn: Any) -> bool:
    name = eqn.primitive.name
    return (
        name
        in (
            "closed_call",
            "core_call",
            "remat",
            "checkpoint",
            "custom_jvp_call",
            "custom_vjp_call",
            "custom_vjp_call_jaxpr",
            "custom_vmap_call",
            "named_call",
        )
        and _sub_jaxpr(eqn) is not None
    )


def _concrete(c: Any) -> np.ndarray | None:
    try:
        return np.asarray(c)
    except Exception:  # noqa: BLE001 - a tracer
        return None


def _scan_groups(eqn: Any) -> tuple[list[Any], list[Any], list[Any]]:
    p = eqn.params
    ops = list(eqn.invars)
    if "ft_in" in p:
        try:
            consts, carry, xs = p["ft_in"].update(ops).unpack()
            return list(consts), list(carry), list(xs)
        except Exception:  # noqa: BLE001 - fall back to the tuple shapes
            groups = p["ft_in"]
            n0, n1 = len(groups[0]), len(groups[1])
            return ops[:n0], ops[n0 : n0 + n1], ops[n0 + n1 :]
    n0, n1 = int(p["num_consts"]), int(p["num_carry"])
    return ops[:n0], ops[n0 : n0 + n1], ops[n0 + n1 :]


#: the primitives a loop condition may compute with
_SCALAR_PRIMS = frozenset(
    {
        "add",
        "sub",
        "mul",
        "rem",
        "div",
        "max",
        "min",
        "clamp",
        "multiple_of",
        "neg",
        "lt",
        "le",
        "gt",
        "ge",
        "eq",
        "ne",
        "and",
        "or",
        "not",
        "convert_element_type",
        "select_n",
        "axis_index",
        "program_id",
        "num_programs",
        "pjit",
        "jit",
    }
)


def _scalar_branches(eqn: Any) -> bool:
    """A ``cond`` whose branches only compute integer scalars (no effects, no arrays)."""
    for v in eqn.outvars:
        aval = getattr(v, "aval", None)
        if aval is None or getattr(aval, "shape", None) != () or not _is_int_dtype(str(aval.dtype)):
            return False
    return all(_pure_scalar(br) for br in eqn.params["branches"])


def _pure_scalar(jaxpr: Any, depth: int = 0) -> bool:
    """Only integer arithmetic on scalars: no effect that translating it aside would
    drop (a jitted helper is looked into)."""
    if depth > 20:
        return False
    for e in jaxpr.eqns:
        if e.primitive.name not in _SCALAR_PRIMS:
            return False
        if any(getattr(getattr(v, "aval", None), "shape", ()) != () for v in e.outvars):
            return False
        inner = _sub_jaxpr(e)
        if inner is not None and not _pure_scalar(inner, depth + 1):
            return False
    return True


def _counter(jaxpr: Any, c_in: list[Any], outs: list[Any]) -> int | None:
    """The index of fori_loop's counter among the carries (the others must pass through
    unchanged: a loop-carried value is refused)."""
    counter = None
    for k, (v_in, v_out) in enumerate(zip(c_in, outs, strict=False)):
        if _is_counter(jaxpr, v_in, v_out):
            counter = k
            break
    for k, (v_in, v_out) in enumerate(zip(c_in, outs, strict=False)):
        if k != counter and v_out is not v_in:
            raise Unsupported("a loop-carried value (a fori_loop carry other than the index)")
    return counter


def _bound_of(pred: Any, probe: str) -> V.Int | None:
    """``bound`` when ``pred`` is ``probe < bound`` (or ``bound > probe``)."""
    if not isinstance(pred, V.Int) or not isinstance(pred.expr, E.Compare):
        return None
    c = pred.expr
    pairs = {"<": (c.a, c.b), ">": (c.b, c.a)}
    if c.op not in pairs:
        return None
    var, bound = pairs[c.op]
    if var != E.Name(probe) or probe in bound.names():
        return None
    return V.Int(bound)


def _is_counter(jaxpr: Any, v_in: Any, v_out: Any) -> bool:
    """``v_out = v_in + 1`` in ``jaxpr`` (fori_loop's index)."""
    aval = getattr(v_in, "aval", None)
    if getattr(aval, "shape", None) != () or not _is_int_dtype(str(getattr(aval, "dtype", ""))):
        return False
    for e in jaxpr.eqns:
        if e.primitive.name == "add" and e.outvars and e.outvars[0] is v_out:
            a, b = e.invars
            for x, y in ((a, b), (b, a)):
                if x is v_in and _is(y, "Literal") and _literal_int(y) == 1:
                    return True
    return False


__all__ = [
    "Const",
    "Load",
    "Mesh",
    "Opaque",
    "Scope",
    "Translator",
    "Unsupported",
    "View",
    "scratch_of",
]
