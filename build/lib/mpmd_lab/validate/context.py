"""What every rule needs: the scenario's names resolved, views propagated, diagnostics collected.

One pass (``analyse``) walks the call in the order JAX evaluates it and records, for
each program, every statement with the refs it names (``RefInfo`` from
``mpmd_lab.shapes``); the rule modules then only read this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpmd_lab.catalogue import BY_CODE, OWN
from mpmd_lab.diagnostics import Diagnostic, Fix, JaxError
from mpmd_lab.scenario import BufferArg, Let, Scenario, TupleArg
from mpmd_lab.shapes import RefInfo, Step, base_info, propagate


@dataclass
class Binding:
    """A name the kernel body can use."""

    name: str
    info: RefInfo | None  # None: unusable (a failed view, or a tuple param itself)
    kind: str  # arg, leaf, tuple, output, scratch, capture, view
    path: str  # where it is defined
    origin: tuple[str, ...] = ()  # the buffers / outputs / scratch it aliases
    stmt: int = -1  # body index of a let
    #: every transform from the untransformed ref to this view: (field path, transform)
    stack: tuple[tuple[str, Any], ...] = ()


@dataclass
class Stmt:
    """One body statement, resolved."""

    index: int
    path: str
    node: Any
    refs: dict[str, Binding] = field(default_factory=dict)  # field -> binding (ops)
    steps: list[Step] = field(default_factory=list)  # a let's transform steps
    ok: bool = True  # False once a name could not be resolved


@dataclass
class ProgramInfo:
    index: int
    path: str
    stmts: list[Stmt] = field(default_factory=list)
    trace_failed: bool = False  # a trace-time error stops this body


@dataclass
class ArgInfo:
    index: int
    path: str
    leaves: list[tuple[str, RefInfo | None]]  # (buffer, info after the arg's transforms)
    steps: list[list[Step]]  # per leaf


#: marks the axis names bound outside the kernel (pl.program_id is not available there)
OUTSIDE = "<outside the kernel>"


class Ctx:
    """The scenario under check, the resolved names, and the diagnostics so far."""

    def __init__(self, scenario: Scenario):
        self.s = scenario
        self.diags: list[Diagnostic] = []
        self.args: list[ArgInfo] = []
        self.params: dict[str, Binding] = {}
        self.programs: list[ProgramInfo] = []
        self.trace_failed = False
        self.build_failed = False
        #: (argument, leaf) -> what the transforms did to a plain-array argument
        self.array_errors: dict[tuple[int, int], Any] = {}
        #: notes JAX raises later (gpu-lower, interpret), with their field paths
        self.deferred: list[tuple[Any, str]] = []
        #: (base, stack step paths) -> (root info, propagated steps, step index by path)
        self.stack_cache: dict[tuple[str, tuple[str, ...]], Any] = {}

    # ------------------------------------------------------------ reporting

    def add(
        self,
        code: str,
        path: str,
        message: str,
        *,
        jax_message: str | None = None,
        jax_type: str | None = None,
        severity: str | None = None,
        stage: str | None = None,
        explanation: str = "",
        fix: Fix | None = None,
    ) -> Diagnostic:
        entry = BY_CODE.get(code)
        own = OWN.get(code)
        if stage is None:
            stage = entry.stage if entry else (own[1] if own else "trace")
        if severity is None:
            severity = entry.severity if entry else "error"
        jax = None
        if jax_message is not None:
            jax = JaxError(type=jax_type or (entry.type if entry else "Error"), message=jax_message)
        if not explanation:
            explanation = _explanation(code)
        d = Diagnostic(
            code=code,
            severity=severity,  # type: ignore[arg-type]
            stage=stage,  # type: ignore[arg-type]
            path=path,
            message=message,
            jax=jax,
            explanation=explanation,
            fix=fix,
        )
        self.diags.append(d)
        return d

    def jax(self, code: str, path: str, jax_message: str, **kw: Any) -> Diagnostic:
        """A diagnostic whose message is JAX's own."""
        return self.add(code, path, jax_message, jax_message=jax_message, **kw)

    # ------------------------------------------------------------ helpers

    def root_shape(self, b: Binding) -> tuple[int, ...] | None:
        """The shape of the untransformed ref a binding is a view of."""
        if not b.origin:
            return None
        o = b.origin[0]
        if o.startswith("out:"):
            spec = self.s.call.outputs.get(o[4:])
        elif o.startswith("scratch:"):
            spec = self.s.call.scratch.get(o[8:])
        else:
            spec = self.s.buffers.get(o)
        return None if spec is None else tuple(spec.shape)

    def stack(self, b: Binding) -> tuple[tuple[str, Any], ...]:
        return b.stack

    def chain(self, b: Binding) -> list[str]:
        """The transform ops from the root ref to this view, in order."""
        return [t.op for _, t in b.stack]

    def deferred_for(self, b: Binding) -> list[tuple[Any, str]]:
        """Notes raised later than trace (e.g. a negative pl.ds start) along this view."""
        paths = [p for p, _ in b.stack]
        return [(n, q) for n, q in self.deferred if any(q.startswith(p) for p in paths)]

    def net_perm(self, b: Binding) -> list[int] | None:
        """Which root dim each view dim is, through at/transpose; None after a reshape."""
        root = self.root_shape(b)
        if root is None:
            return None
        perm = list(range(len(root)))
        for _, t in b.stack:
            if t.op == "at":
                idx = list(t.index) + [None] * (len(perm) - len(t.index))
                perm = [d for d, e in zip(perm, idx, strict=False) if not isinstance(e, int)]
            elif t.op == "transpose":
                try:
                    perm = [perm[p] for p in t.perm]
                except IndexError:
                    return None
            elif t.op in ("reshape", "bitcast"):
                return None
        return perm

    @property
    def bound_outside(self) -> frozenset[str]:
        """Axis names lax.axis_index knows outside the kernel: shard_map's."""
        s = self.s
        if s.device_mesh and s.run.shard_map is not False:
            return frozenset(s.device_mesh) | {OUTSIDE}
        return frozenset({OUTSIDE})

    def bound_in(self, p: int) -> frozenset[str]:
        """... and inside program ``p``: also its grid, cluster and thread axes."""
        m = self.s.call.programs[p].mesh
        names = set(m.grid) | set(m.cluster)
        if m.threads is not None and m.threads.name:
            names.add(m.threads.name)
        return (self.bound_outside - {OUTSIDE}) | names

    @property
    def mesh_axes(self) -> tuple[str, ...]:
        return tuple(self.s.device_mesh or {})

    def buffer_info(self, name: str, base: str) -> RefInfo | None:
        b = self.s.buffers.get(name)
        if b is None:
            return None
        return base_info(b.shape, b.dtype, "GMEM", base)


def _explanation(code: str) -> str:
    from mpmd_lab.validate.explain import EXPLANATIONS

    if code in EXPLANATIONS:
        return EXPLANATIONS[code]
    entry = BY_CODE.get(code)
    if entry is not None:
        return entry.title + "."
    own = OWN.get(code)
    return own[0][:1].upper() + own[0][1:] + "." if own else ""


def leaf_name(param: str, i: int) -> str:
    return f"{param}[{i}]"


def arg_buffers(a: BufferArg | TupleArg) -> list[str]:
    return [a.buffer] if isinstance(a, BufferArg) else list(a.tuple)


def is_let(s: Any) -> bool:
    return isinstance(s, Let)


def propagate_path(info: RefInfo, transforms: list[Any]) -> list[Step]:
    return propagate(info, transforms)
