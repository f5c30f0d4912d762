"""What only running reveals (JAX never raises these before a run), and interpreter limits.

- AT_SLICE_CLAMPED (reported with the view, a warning);
- PROGRAM_ID_GPU_INTERP: ``pl.program_id`` under the GPU interpreter (warning);
- INTERP_LIMIT and the interpreters' own codes: a transform the CPU interpreter cannot
  run (warning about this machine).

Races, deadlocks, out-of-bounds indices and device ids are judged by running the call
data-free through the engine: :mod:`mpmd_lab.validate.sync`.
"""

from __future__ import annotations

import math

from mpmd_lab.ops import BlockIndex, Let
from mpmd_lab.validate.context import Ctx


def check_runtime(ctx: Ctx) -> None:
    if ctx.build_failed:
        return
    if ctx.s.run.interpret == "gpu":
        _program_id(ctx)
    _interp_limits(ctx)


def _program_id(ctx: Ctx) -> None:
    """``pl.program_id`` in a program of several blocks: 0 in every one of them under
    JAX's GPU interpreter (a GPU gives each block its index)."""
    for prog in ctx.programs:
        mesh = ctx.s.call.programs[prog.index].mesh
        blocks = math.prod(mesh.grid.values()) * math.prod(mesh.cluster.values())
        if blocks <= 1:
            continue
        for st in prog.stmts:
            where: list[str] = []
            if isinstance(st.node, Let):
                for k, t in enumerate(st.node.transforms):
                    if any("program_id" in e.calls() for _, e in t.exprs()):
                        where.append(f"{st.path}.transforms[{k}]")
            else:
                where += [
                    f"{st.path}.{sub}" for sub, e in st.node.exprs() if "program_id" in e.calls()
                ]
            for path in where:
                ctx.add(
                    "PROGRAM_ID_GPU_INTERP",
                    path,
                    "pl.program_id is 0 in every block under the GPU interpreter: "
                    f"all {blocks} blocks use the same slice here (on a GPU they "
                    "differ); use a `block` index (lax.axis_index) instead",
                    severity="warning",
                )


# ---------------------------------------------------------------- interpreter limits

_GPU_INTERP_REPR = {
    "remote_ref": "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)",
    "reshape": "ReshapeTransform(shape=...)",
    "bitcast": "BitcastTransform(dtype=...)",
    "cluster_ref": "ClusterRefTransform(dims=..., idxs=...)",
}
_HLO_CANNOT = {
    "transpose": "jax._src.state.types.TransposeTransform",
    "remote_ref": "jax._src.pallas.mosaic_gpu.core.PeerMemRef",
    "multicast_ref": "jax._src.pallas.mosaic_gpu.core.MulticastRef",
    "cluster_ref": "jax._src.pallas.mosaic_gpu.core.ClusterRefTransform",
}
_LIMIT = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, and a GPU runs it."
)


#: per interpreter: whether a view step is one it cannot run (what ``_interp_limits`` says)
_CANNOT_RUN = {
    "gpu": lambda t: t.op == "multicast_ref" or t.op in _GPU_INTERP_REPR,
    "hlo": lambda t: (
        t.op in _HLO_CANNOT or (t.op == "at" and any(isinstance(e, BlockIndex) for e in t.index))
    ),
}


def _interp_limits(ctx: Ctx) -> None:
    """The first statement the chosen CPU interpreter cannot run (a warning)."""
    interp = ctx.s.run.interpret
    for prog in ctx.programs:
        for st in prog.stmts:
            if isinstance(st.node, Let):
                continue
            for b in st.refs.values():
                # the first step the interpreter cannot run (once per view, from its source)
                cannot = _CANNOT_RUN.get(interp)
                hit = None if cannot is None else ctx.r.first_step(b, f"interp:{interp}", cannot)
                for path, t in () if hit is None else (hit,):
                    if interp == "gpu" and t.op == "multicast_ref":
                        ctx.add(
                            "GPU_INTERP_MULTICAST",
                            path,
                            "JAX's CPU interpreter can't run multicast_ref; simulate does",
                            jax_message="'MulticastRef' object has no attribute 'indices'",
                            severity="warning",
                            explanation="The GPU interpreter cannot run multicast views." + _LIMIT,
                        )
                        return
                    if interp == "gpu" and t.op in _GPU_INTERP_REPR:
                        msg = f"Unsupported transform: {_GPU_INTERP_REPR[t.op]}"
                        ctx.add(
                            "GPU_INTERP_UNSUPPORTED_TRANSFORM",
                            path,
                            f"JAX's CPU interpreter can't run {t.op}; simulate does",
                            jax_message=msg,
                            severity="warning",
                            explanation=f"The GPU interpreter runs only index and transpose "
                            f"views, not {t.op}." + _LIMIT,
                        )
                        return
                    if interp == "hlo" and t.op == "at":
                        axis = next((e.block for e in t.index if isinstance(e, BlockIndex)), None)
                        if axis is not None:
                            msg = (
                                f"Found an unbound axis name: {axis}. To fix this, please call "
                                "axis_index under `jax.shard_map`."
                            )
                            ctx.add(
                                "UNBOUND_AXIS",
                                path,
                                f"JAX's HLO interpreter can't evaluate the kernel axis "
                                f"{axis!r}; the GPU interpreter (run.interpret: gpu) and "
                                "simulate can",
                                jax_message=msg,
                                severity="warning",
                                stage="interpret",
                                explanation="The HLO interpreter (interpret=True) cannot "
                                "evaluate lax.axis_index of a kernel axis; the GPU interpreter "
                                "(run.interpret: gpu) can." + _LIMIT,
                            )
                            return
                    if interp == "hlo" and t.op in _HLO_CANNOT:
                        msg = f"<class '{_HLO_CANNOT[t.op]}'>"
                        ctx.add(
                            "HLO_INTERP_NO_DISCHARGE",
                            path,
                            f"JAX's HLO interpreter can't run {t.op}; simulate does",
                            jax_message=msg,
                            severity="warning",
                            explanation=f"The HLO interpreter has no discharge rule for {t.op} "
                            "views." + _LIMIT,
                        )
                        return
