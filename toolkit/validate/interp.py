"""What the CPU interpreters cannot run of a call: a fact of this machine, said once.

Neither of JAX's CPU interpreters runs every view, statement and scratch the way a GPU
does (jax 0.12, measured). Each op says what each interpreter does with it, in its own
class (``TransformOp.interpret_limit``, ``StatementOp.interpret_limit``, a scratch
kind's ``INTERPRET_LIMITS``); this module walks the call and finds the first view and
the first scratch or statement it cannot run, and says so in ONE ``info`` diagnostic
per scenario ("on this machine: simulate runs it"), never a warning per node: its code
and path are the first limit's (a view's: JAX's own code and message,
``GPU_INTERP_UNSUPPORTED_TRANSFORM``, ``GPU_INTERP_MULTICAST``,
``HLO_INTERP_NO_DISCHARGE``, ``UNBOUND_AXIS``; a scratch or statement's:
``INTERP_LIMIT``, or JAX's own error), and its explanation names every limit found.

These are limits of this machine, not errors of the kernel: every code here is in
:data:`mpmd_lab.diagnostics.INTERP_CANNOT`, which also tells ``run --backend auto`` to
simulate instead.
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

from mpmd_lab.fields import format_path
from mpmd_lab.ops import Let, StatementOp
from mpmd_lab.ops.base import READ, WRITE
from mpmd_lab.plan import Binding, along_chain, own_steps
from mpmd_lab.record import Record
from mpmd_lab.validate.context import Ctx

_WHY = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, a GPU runs it, and mpmd-lab's "
    "simulator models it."
)


class _Limit(Record):
    """One thing the chosen CPU interpreter cannot run: where, what, and JAX's words."""

    __slots__ = ("code", "path", "what", "why", "jax_message", "jax_type")

    def __init__(
        self,
        code: str,
        path: str,
        what: str,
        why: str,
        jax_message: str | None = None,
        jax_type: str | None = None,
    ) -> None:
        self.code = code
        self.path = path
        self.what = what
        self.why = why
        self.jax_message = jax_message
        self.jax_type = jax_type


def check_interpret(ctx: Ctx) -> None:
    """Say once (an ``info``) what the chosen CPU interpreter cannot run: the first view
    and the first scratch or statement it cannot run."""
    if ctx.build_failed:
        return
    found = [
        x
        for x in (
            _views(ctx),
            None
            if ctx.trace_failed
            else _statements(ctx) or _global_stores(ctx) or _scoped_program_id(ctx),
        )
        if x
    ]
    if not found:
        return
    first = found[0]
    whats = " and ".join(f"{x.what} ({x.path})" for x in found)
    ctx.add(
        first.code,
        first.path,
        f"on this machine: simulate runs it (JAX's CPU interpreter cannot run {whats})",
        jax_message=first.jax_message,
        jax_type=first.jax_type,
        severity="info",
        stage="interpret",
        explanation=" ".join(x.why for x in found) + _WHY,
    )


#: interpreter -> a transform's ``t.interpret_limit(interp)`` (a C callable, no Python
#: frame per transform)
_FIND = {interp: methodcaller("interpret_limit", interp) for interp in ("gpu", "hlo")}


def _views(ctx: Ctx) -> _Limit | None:
    """The first view of a statement's ref the chosen CPU interpreter cannot run."""
    limit = _FIND[ctx.s.run.interpret]
    first = _first_limited(ctx, limit)
    if first is None:
        return None  # (no view of the call has a step it cannot run: no fold to make)
    known, its = first

    # the view's first step it cannot run (its path and transform), with its limit: its
    # source view's, else the first of its own steps; once per view (``along_chain``;
    # the first transform found to have a limit is not asked again)
    def step(y: Binding, found: Any) -> Any:
        if found is None:
            for path, t in own_steps(y):
                answer = its if t is known else limit(t)
                if answer is not None:
                    return path, t, answer
        return found

    memo: dict[int, tuple[Binding, Any]] = {}
    for prog in ctx.programs:
        for st in prog.stmts:
            if type(st.node) is Let:  # (as in _statements: no ABC check per op)
                continue
            for b in st.refs.values():
                if not b.stack:
                    continue  # no view step: nothing to run (and none along its chain)
                hit = along_chain(memo, b, step)
                if hit is not None:
                    path, t, found = hit
                    where, what = format_path(path), f"{t.kind} views"
                    return _Limit(found.code, where, what, found.why, found.jax_message)
    return None


def _first_limited(ctx: Ctx, limit: Any) -> tuple[Any, Any] | None:
    """The first transform a view's stack can hold (an argument's, then each let's, in
    the plan's order) that has a ``limit`` for the interpreter, with it (None: none):
    each asked once, where folding each view's stack asks each view's steps."""
    for a in ctx.s.call.args:
        for t in a.transforms or ():
            if (answer := limit(t)) is not None:
                return t, answer
    for prog in ctx.programs:
        for st in prog.stmts:
            node = st.node
            if type(node) is Let:
                for t in node.transforms:
                    if (answer := limit(t)) is not None:
                        return t, answer
    return None


def _statements(ctx: Ctx) -> _Limit | None:
    """The first scratch or statement the chosen CPU interpreter cannot run."""
    interp = ctx.s.run.interpret
    for name, sc in ctx.s.call.scratch.items():
        why = sc.interpret_limit(interp)
        if why:
            return _Limit("INTERP_LIMIT", f"call.scratch.{name}", f"{sc.kind} scratch", why)
    devices = ctx.s.num_devices
    for prog in ctx.programs:
        for st in prog.stmts:
            node: StatementOp = st.node
            # (a statement is a let or a StatementOp: no isinstance, a slow ABC check)
            if type(node) is Let:
                continue
            e = node.interpret_error(interp)
            if e is not None:  # JAX's own error, as its interpreter raises it
                why = f"The GPU interpreter has no rule for {node.kind}."
                where = format_path(st.path)
                return _Limit(e.code, where, node.kind, why, e.message, e.jax_type)
            why = node.interpret_limit(interp, devices)
            if why:
                return _Limit("INTERP_LIMIT", format_path(st.path), node.kind, why)
    return None


def _global_stores(ctx: Ctx) -> _Limit | None:
    """The first store JAX's HLO interpreter cannot run on the global arrays (no
    shard_map): it types the inputs placed over the device mesh, and not what the kernel
    makes (its outputs, constants), and refuses a store that mixes the two
    (``dynamic_update_slice operand sharding must be equal to update sharding``). Under
    ``pl.kernel`` that is an input stored into an output or an output or constant into an
    input (an input into itself runs); under ``plgpu.kernel``, which loads its inputs
    untyped, any store that reads or writes an input (measured, jax 0.12)."""
    s = ctx.s
    if s.run.interpret != "hlo" or not s.device_mesh or s.run.shard_map is not False:
        return None
    plgpu = s.call.entry == "plgpu.kernel"
    for prog in ctx.programs:
        for st in prog.stmts:
            node = st.node
            if type(node) is Let or not node.PLAIN_STORE:
                continue
            placed = {READ: False, WRITE: False}
            for field, _name, access in node.ref_fields():
                b = st.refs.get(field)
                if b is not None and access in placed:
                    placed[access] |= any(":" not in o for o in b.origin)
            src, dst = placed[READ], placed[WRITE]
            if (src or dst) if plgpu else src != dst:
                why = (
                    "JAX's HLO interpreter, on the global arrays (run.shard_map false), "
                    "cannot store a value into a ref placed otherwise over the device mesh "
                    "(an input is placed on it, what the kernel makes is not); the GPU "
                    "interpreter (run.interpret: gpu) can."
                )
                return _Limit("INTERP_LIMIT", format_path(st.path), f"{node.kind} stores", why)
    return None


def _scoped_program_id(ctx: Ctx) -> _Limit | None:
    """The first ``pl.program_id`` JAX's HLO interpreter cannot evaluate under
    ``plgpu.kernel``: it discharges the kernel's scoped allocation outside the grid,
    where ``pallas_core.axis_frame`` asserts (a bare AssertionError; in a loop, no CPU
    rule for ``program_id``; measured, jax 0.12; ``pl.kernel``'s body runs in the grid,
    and ``pl.num_programs`` is a constant)."""
    if ctx.s.run.interpret != "hlo" or ctx.s.call.entry != "plgpu.kernel":
        return None
    for prog in ctx.programs:
        for st in prog.stmts:
            if any("program_id" in e.calls() for _, _, e in st.exprs):
                why = (
                    "JAX's HLO interpreter evaluates a plgpu.kernel's body outside its grid, "
                    "where pl.program_id has no value (an AssertionError); the GPU "
                    "interpreter (run.interpret: gpu) can."
                )
                return _Limit("INTERP_LIMIT", format_path(st.path), "pl.program_id", why)
    return None
