"""Build-stage rules: what ``plgpu.Mesh``, the scratch types and ``pl.kernel`` reject.

Order as the generated call evaluates it: every program's mesh, then the scratch
types (their transforms first), then the kernel object itself.
"""

from __future__ import annotations

from typing import Any

from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.dtypes import bits
from mpmd_lab.scenario import KernelMesh
from mpmd_lab.validate.context import Ctx

MAX_THREADS = 2048 // 128


def mesh_repr(m: KernelMesh) -> str:
    """``plgpu.Mesh``'s dataclass repr, as JAX puts it in its messages."""
    t = m.threads
    return (
        f"Mesh(grid={tuple(m.grid.values())!r}, grid_names={tuple(m.grid)!r}, "
        f"cluster={tuple(m.cluster.values())!r}, cluster_names={tuple(m.cluster)!r}, "
        f"num_threads={None if t is None else t.count!r}, "
        f"thread_name={None if t is None else t.name!r}, kernel_name=None)"
    )


def check_build(ctx: Ctx) -> None:
    c = ctx.s.call
    for i, p in enumerate(c.programs):
        m = p.mesh
        path = f"call.programs[{i}].mesh"
        if len(m.cluster) > 3:
            keep = dict(list(m.cluster.items())[:3])
            ctx.jax(
                "MESH_CLUSTER_RANK",
                path + ".cluster",
                f"cluster= must be at most 3D, got {mesh_repr(m)}.",
                fix=Fix(
                    description=f"keep the first three cluster axes {list(keep)}",
                    edits=[Edit(op="replace", path=path + ".cluster", value=keep)],
                ),
            )
            continue
        if m.threads is not None and m.threads.name is None:
            ctx.jax(
                "MESH_THREADS_PAIR",
                path + ".threads.name",
                "num_threads and thread_name must be either both set or both None, "
                f"got {mesh_repr(m)}",
                fix=Fix(
                    description="name the thread axis 'wg' (warpgroup)",
                    edits=[Edit(op="replace", path=path + ".threads.name", value="wg")],
                ),
            )
            continue
        if m.threads is not None and m.threads.count > MAX_THREADS:
            ctx.jax(
                "MESH_TOO_MANY_THREADS",
                path + ".threads.count",
                "Requested too many CUDA threads per block. Each Mosaic thread corresponds to "
                f"128 CUDA threads. At most {MAX_THREADS} are supported, got {mesh_repr(m)}",
                fix=Fix(
                    description="use 15 threads (16 lowers to too many barriers)",
                    edits=[Edit(op="replace", path=path + ".threads.count", value=15)],
                ),
            )
            continue
    for name, sc in c.scratch.items():
        ts = sc.transforms
        bad = (
            next(((k, t) for k, t in enumerate(ts) if not t.SCRATCH_ONLY), None)
            if ts  # (no layout, no walk)
            else None
        )
        if bad is not None:
            ctx.add(
                "SCRATCH_TRANSFORM",
                f"call.scratch.{name}.transforms[{bad[0]}]",
                f"scratch transforms are tiling or swizzle, not {bad[1].op}",
                stage="schema",
            )
            continue
        found = sc.build_error()  # JAX's rule: mpmd_lab.layout_rules.scratch_build_error
        if found is not None:
            e, field = found
            path = f"call.scratch.{name}"
            ctx.raised(
                e,
                f"{path}.{field}",
                stage=e.stage,
                fix=_scratch_fix(sc, path, e.code, field),
            )
    if c.entry == "plgpu.kernel" and len(c.programs) != 1:
        ctx.add(
            "CODEGEN",
            "call.programs",
            f"plgpu.kernel takes exactly one program (one mesh), not {len(c.programs)}",
            stage="schema",
            fix=None
            if not c.programs
            else Fix(
                description="keep only the first program",
                edits=[
                    Edit(op="remove", path=f"call.programs[{k}]")
                    for k in range(len(c.programs) - 1, 0, -1)
                ],
            ),
        )
        return
    if not c.programs:
        ctx.jax("MPMD_NO_PROGRAMS", "call.programs", "At least one mesh/function pair is required")


def _scratch_fix(sc: Any, path: str, code: str, field: str) -> Fix | None:
    """The fix of a scratch type's build error."""
    if code == "SWIZZLE_VALUE":
        fit = sc.shape[-1] * bits(sc.dtype) // 8 if sc.shape else 0
        if fit not in (32, 64, 128):
            return None
        return Fix(
            description=f"swizzle {fit} bytes (the trailing dimension's width)",
            edits=[Edit(op="replace", path=f"{path}.{field}", value=fit)],
        )
    if code == "TMEM_NO_TRANSFORMS":
        return Fix(
            description="drop the TMEM scratch's transforms",
            edits=[Edit(op="replace", path=path + ".transforms", value=[])],
        )
    if code == "TMEM_DTYPE_PACKED":
        return Fix(
            description="pack the narrow dtype (packed: true)",
            edits=[Edit(op="replace", path=path + ".packed", value=True)],
        )
    if code == "TMEM_ONLY_ARGS":
        return Fix(
            description="drop packed / collective (TMEM-only arguments)",
            edits=[
                Edit(op="replace", path=path + ".packed", value=None),
                Edit(op="replace", path=path + ".collective", value=None),
            ],
        )
    return None
