"""What the CPU interpreters cannot run of the collectives language (warnings).

Neither of JAX's CPU interpreters runs semaphores and async copies the way a GPU does
(jax 0.12, measured): the GPU interpreter (``plgpu.InterpretGPUParams``) fills scratch
with NaN, which a semaphore cannot hold (``nan + semaphore``), leaves a TMA load's
barrier allocated (``Barrier remains allocated``), and misreads ``atomic_add`` and
``multimem_load_reduce``; the HLO interpreter (``interpret=True``) has no rule for a
remote or multicast signal, nor for TMA copies. These are limits of this machine, not
errors of the kernel: each is an ``INTERP_LIMIT`` warning, which also tells
``run --backend auto`` to simulate instead.
"""

from __future__ import annotations

from mpmd_lab.validate.context import Ctx

_WHY = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, a GPU runs it, and mpmd-lab's "
    "simulator models it."
)

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
    """The first construct the chosen CPU interpreter cannot run, as a warning."""
    if ctx.build_failed or ctx.trace_failed:
        return
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
