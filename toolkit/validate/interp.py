"""What the CPU interpreters cannot run of a call (warnings).

Neither of JAX's CPU interpreters runs every view, statement and scratch the way a GPU
does (jax 0.12, measured). Each op says what each interpreter does with it, in its own
class (``TransformOp.interpret_limit``, ``StatementOp.interpret_limit``, a scratch
kind's ``INTERPRET_LIMITS``); this module walks the call and reports the first of each:

- views: JAX's own code and message (``GPU_INTERP_UNSUPPORTED_TRANSFORM``,
  ``GPU_INTERP_MULTICAST``, ``HLO_INTERP_NO_DISCHARGE``, ``UNBOUND_AXIS``);
- scratch and statements: an ``INTERP_LIMIT`` warning.

These are limits of this machine, not errors of the kernel: every code here is in
:data:`mpmd_lab.diagnostics.INTERP_CANNOT`, which also tells ``run --backend auto`` to
simulate instead.
"""

from __future__ import annotations

from operator import methodcaller

from mpmd_lab.ops import Let, StatementOp
from mpmd_lab.validate.context import Ctx

_WHY = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, a GPU runs it, and mpmd-lab's "
    "simulator models it."
)


def check_interpret(ctx: Ctx) -> None:
    """The first view and the first statement the chosen CPU interpreter cannot run."""
    if ctx.build_failed:
        return
    _views(ctx)
    if not ctx.trace_failed:
        _statements(ctx)


#: interpreter -> (``first_step``'s key, a transform's ``t.interpret_limit(interp)``: a C
#: callable, no Python frame per step)
_FIND = {
    interp: (f"interpret_limit:{interp}", methodcaller("interpret_limit", interp))
    for interp in ("gpu", "hlo")
}


def _views(ctx: Ctx) -> None:
    """The first view of a statement's ref the chosen CPU interpreter cannot run."""
    # (the view's first step it cannot run, with its limit: its source view's, else the
    # first of its own steps; once per view)
    key, limit = _FIND[ctx.s.run.interpret]
    first_step = ctx.r.first_step
    for prog in ctx.programs:
        for st in prog.stmts:
            if isinstance(st.node, Let):
                continue
            for b in st.refs.values():
                if not b.stack:
                    continue  # no view step: nothing to run (and none along its chain)
                hit = first_step(b, key, limit)
                if hit is not None:
                    path, found = hit
                    ctx.add(
                        found.code,
                        path,
                        found.message,
                        jax_message=found.jax_message,
                        severity="warning",
                        stage="interpret",
                        explanation=found.why + _WHY,
                    )
                    return


def _statements(ctx: Ctx) -> None:
    """The first scratch or statement the chosen CPU interpreter cannot run."""
    interp = ctx.s.run.interpret
    for name, sc in ctx.s.call.scratch.items():
        why = sc.interpret_limit(interp)
        if why:
            _limit(ctx, f"call.scratch.{name}", why)
            return
    devices = ctx.s.num_devices
    for prog in ctx.programs:
        for st in prog.stmts:
            node: StatementOp = st.node
            # (a statement is a let or a StatementOp: no isinstance, a slow ABC check)
            if type(node) is Let:
                continue
            e = node.interpret_error(interp)
            if e is not None:  # JAX's own error, as its interpreter raises it
                ctx.add(
                    e.code,
                    st.path,
                    f"JAX's CPU interpreter can't run {node.kind}; simulate does",
                    jax_message=e.message,
                    jax_type=e.jax_type,
                    severity="warning",
                    stage="interpret",
                    explanation=f"The GPU interpreter has no rule for {node.kind}." + _WHY,
                )
                return
            why = node.interpret_limit(interp, devices)
            if why:
                _limit(ctx, st.path, why)
                return


def _limit(ctx: Ctx, path: str, why: str) -> None:
    ctx.add(
        "INTERP_LIMIT", path, why, severity="warning", stage="interpret", explanation=why + _WHY
    )
