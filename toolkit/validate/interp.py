"""What the CPU interpreters cannot run of a call (warnings): one module, one table.

Neither of JAX's CPU interpreters runs every view and statement the way a GPU does
(jax 0.12, measured):

- views: the GPU interpreter (``plgpu.InterpretGPUParams``) follows only index and
  transpose views (``Unsupported transform: ...``; a multicast view has no
  ``indices``); the HLO interpreter (``interpret=True``) has no discharge rule for
  transposed, remote, multicast or cluster views and cannot evaluate
  ``lax.axis_index`` of a kernel axis. Each is reported with JAX's own code and
  message.
- statements: the GPU interpreter fills scratch with NaN, which a semaphore cannot
  hold (``nan + semaphore``), leaves a TMA load's barrier allocated (``Barrier remains
  allocated``), and misreads ``atomic_add`` and ``multimem_load_reduce``; the HLO
  interpreter has no rule for a remote or multicast signal, nor for TMA copies. Each
  is an ``INTERP_LIMIT`` warning.

These are limits of this machine, not errors of the kernel: every code here is in
:data:`mpmd_lab.diagnostics.INTERP_CANNOT`, which also tells ``run --backend auto`` to
simulate instead. The first view and the first statement each interpreter cannot run
are reported, once each.
"""

from __future__ import annotations

from mpmd_lab import layout_rules as L
from mpmd_lab.ops import BlockIndex, Let
from mpmd_lab.validate.context import Ctx

_WHY = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, a GPU runs it, and mpmd-lab's "
    "simulator models it."
)

# ---------------------------------------------------------------- views

#: view op -> the repr of its transform in the GPU interpreter's error
_GPU_VIEW_REPR = {
    "remote_ref": "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)",
    "reshape": "ReshapeTransform(shape=...)",
    "bitcast": "BitcastTransform(dtype=...)",
    "cluster_ref": "ClusterRefTransform(dims=..., idxs=...)",
}
#: view op -> the transform class the HLO interpreter has no discharge rule for
_HLO_VIEW_CLASS = {
    "transpose": "jax._src.state.types.TransposeTransform",
    "remote_ref": "jax._src.pallas.mosaic_gpu.core.PeerMemRef",
    "multicast_ref": "jax._src.pallas.mosaic_gpu.core.MulticastRef",
    "cluster_ref": "jax._src.pallas.mosaic_gpu.core.ClusterRefTransform",
}


def _view_limit(interp: str, t: object) -> tuple[str, str, str, str] | None:
    """(code, message, JAX's message, explanation) when ``interp`` cannot run view ``t``."""
    op = getattr(t, "op", "")
    if interp == "gpu":
        if op == "multicast_ref":
            return (
                "GPU_INTERP_MULTICAST",
                "JAX's CPU interpreter can't run multicast_ref; simulate does",
                "'MulticastRef' object has no attribute 'indices'",
                "The GPU interpreter cannot run multicast views.",
            )
        if op in _GPU_VIEW_REPR:
            return (
                "GPU_INTERP_UNSUPPORTED_TRANSFORM",
                f"JAX's CPU interpreter can't run {op}; simulate does",
                L.interpret_transform_error(_GPU_VIEW_REPR[op]).message,
                f"The GPU interpreter runs only index and transpose views, not {op}.",
            )
        return None
    if op == "at":
        axis = next((e.block for e in getattr(t, "index", ()) if isinstance(e, BlockIndex)), None)
        if axis is not None:
            return (
                "UNBOUND_AXIS",
                f"JAX's HLO interpreter can't evaluate the kernel axis {axis!r}; the GPU "
                "interpreter (run.interpret: gpu) and simulate can",
                f"Found an unbound axis name: {axis}. To fix this, please call "
                "axis_index under `jax.shard_map`.",
                "The HLO interpreter (interpret=True) cannot evaluate lax.axis_index of a "
                "kernel axis; the GPU interpreter (run.interpret: gpu) can.",
            )
    if op in _HLO_VIEW_CLASS:
        return (
            "HLO_INTERP_NO_DISCHARGE",
            f"JAX's HLO interpreter can't run {op}; simulate does",
            f"<class '{_HLO_VIEW_CLASS[op]}'>",
            f"The HLO interpreter has no discharge rule for {op} views.",
        )
    return None


def _views(ctx: Ctx) -> None:
    """The first view of a statement's ref the chosen CPU interpreter cannot run."""
    interp = ctx.s.run.interpret
    for prog in ctx.programs:
        for st in prog.stmts:
            if isinstance(st.node, Let):
                continue
            for b in st.refs.values():
                for path, t in b.stack:
                    found = _view_limit(interp, t)
                    if found is not None:
                        code, message, jax_message, why = found
                        ctx.add(
                            code,
                            path,
                            message,
                            jax_message=jax_message,
                            severity="warning",
                            stage="interpret",
                            explanation=why + _WHY,
                        )
                        return


# ---------------------------------------------------------------- statements

#: statement op -> what the GPU interpreter does with it
_GPU = {
    "atomic_add": "The GPU interpreter misreads plgpu.atomic_add (it fails with a swap of the "
    "wrong shape).",
    "multimem_load_reduce": "The GPU interpreter cannot run multimem_load_reduce (TypeError: "
    "ref must be a reference).",
}
#: statement op -> what the HLO interpreter does with it
_HLO = {
    "semaphore_signal_multicast": "The HLO interpreter has no rule for semaphore_signal_multicast.",
    "copy_gmem_to_smem": "The HLO interpreter has no rule for TMA copies (copy_gmem_to_smem).",
    "copy_smem_to_gmem": "The HLO interpreter has no rule for TMA copies (copy_smem_to_gmem).",
    "tma_store": "The HLO interpreter has no rule for TMA copies (copy_smem_to_gmem).",
    "multimem_load_reduce": "The HLO interpreter has no rule for multimem_load_reduce.",
    "multimem_store": "The HLO interpreter has no rule for multimem_store.",
    "barrier_wait": "The HLO interpreter has no rule for barriers.",
    "barrier_arrive": "The HLO interpreter has no rule for barriers.",
    "atomic_add": "The HLO interpreter misreads plgpu.atomic_add (it fails unpacking its "
    "operands).",
}
#: on several devices the GPU interpreter also fails TMA loads on a barrier (falsely, and
#: not every time: jax 0.12 and 0.11.2); on one device it runs them
_GPU_MULTI = {
    "copy_gmem_to_smem": "On several devices the GPU interpreter leaves a TMA load's barrier "
    "allocated and fails at the end of the kernel (AssertionError: Barrier remains allocated), "
    "not every time; on one device it runs it.",
}


def check_interpret(ctx: Ctx) -> None:
    """The first view and the first statement the chosen CPU interpreter cannot run."""
    if ctx.build_failed:
        return
    _views(ctx)
    if not ctx.trace_failed:
        _statements(ctx)


def _statements(ctx: Ctx) -> None:
    """The first scratch or statement the chosen CPU interpreter cannot run."""
    interp = ctx.s.run.interpret
    if interp == "gpu":
        for name, sc in ctx.s.call.scratch.items():
            if sc.KIND == "semaphore":
                _limit(
                    ctx,
                    f"call.scratch.{name}",
                    "The GPU interpreter fills scratch with NaN, which a semaphore cannot hold "
                    "(NotImplementedError: nan + semaphore).",
                )
                return
    table = _HLO
    if interp == "gpu":
        table = {**_GPU, **(_GPU_MULTI if ctx.s.num_devices > 1 else {})}
    for prog in ctx.programs:
        for st in prog.stmts:
            kind = getattr(st.node, "kind", "")
            why = table.get(kind)
            if why is None and interp != "gpu" and kind == "semaphore_signal":
                if st.node.device is not None:
                    why = "The HLO interpreter cannot signal another device (Remote signal not "
                    why += "implemented)."
            if why:
                _limit(ctx, st.path, why)
                return


def _limit(ctx: Ctx, path: str, why: str) -> None:
    ctx.add(
        "INTERP_LIMIT", path, why, severity="warning", stage="interpret", explanation=why + _WHY
    )
