"""The device mesh's order: a kernel that talks to other devices (NVSHMEM: a peer's
memory or semaphore, multicast, multimem) lowers for the GPU only on a mesh whose device
ids are row-major (``0 .. n-1`` in order, what ``jax.make_mesh`` gives): Mosaic GPU's
custom call raises MESH_DEVICE_ORDER at the end of the lowering otherwise, once the
kernel itself has lowered.
"""

from __future__ import annotations

from mpmd_lab.ops import Let
from mpmd_lab.validate.context import Ctx


def check_device_order(ctx: Ctx) -> None:
    order = ctx.s.device_order
    if order is None or order == sorted(order) or ctx.build_failed or ctx.trace_failed:
        return
    if any(d.is_error and d.stage == "gpu-lower" for d in ctx.diags):
        return  # the kernel's own lowering stops first
    if not _cross_device(ctx):
        return
    ids = " ".join(str(k) for k in order)
    ctx.jax(
        "MESH_DEVICE_ORDER",
        "device_order",
        "Mosaic GPU only supports meshes with device ordering that follows row-major "
        f"device ids. Got: [{ids}] device ids.",
    )


def _cross_device(ctx: Ctx) -> bool:
    """Whether any argument view or statement of the call talks to another device."""
    for a in ctx.s.call.args:
        if any(t.CROSS_DEVICE for t in getattr(a, "transforms", None) or ()):
            return True
    for prog in ctx.programs:
        for st in prog.stmts:
            node = st.node
            if type(node) is Let:
                if any(t.CROSS_DEVICE for t in node.transforms):
                    return True
            elif node.cross_device():
                return True
    return False
