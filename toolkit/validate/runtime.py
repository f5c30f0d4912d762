"""What only running reveals (JAX never raises these before a run).

- AT_SLICE_CLAMPED (reported with the view, a warning);
- PROGRAM_ID_GPU_INTERP: ``pl.program_id`` under the GPU interpreter (warning).

What the CPU interpreters cannot run (views and statements alike) is
:mod:`mpmd_lab.validate.interp`.

Races, deadlocks, out-of-bounds indices and device ids are judged by running the call
data-free through the engine: :mod:`mpmd_lab.validate.sync`.
"""

from __future__ import annotations

import math

from mpmd_lab.fields import Path, sub_path
from mpmd_lab.ops import Let
from mpmd_lab.validate.context import Ctx


def check_runtime(ctx: Ctx) -> None:
    if ctx.build_failed:
        return
    if ctx.s.run.interpret == "gpu":
        _program_id(ctx)


def _program_id(ctx: Ctx) -> None:
    """``pl.program_id`` in a program of several blocks: 0 in every one of them under
    JAX's GPU interpreter (a GPU gives each block its index)."""
    for prog in ctx.programs:
        mesh = ctx.s.call.programs[prog.index].mesh
        blocks = math.prod(mesh.grid.values()) * math.prod(mesh.cluster.values())
        if blocks <= 1:
            continue
        for st in prog.stmts:
            if "program_id" not in st.calls:
                continue  # (``Stmt.calls``: none of its expressions calls it)
            node = st.node
            # (each hit reported as it is found, in the op's order: no list per statement)
            if isinstance(node, Let):
                for k, t in enumerate(node.transforms):
                    if t.uses_call("program_id"):
                        _pid_warning(ctx, (*st.path, "transforms", k), blocks)
            else:
                for sub, e in node.exprs():
                    if "program_id" in e.calls():
                        _pid_warning(ctx, sub_path(st.path, sub), blocks)


def _pid_warning(ctx: Ctx, path: Path, blocks: int) -> None:
    ctx.add(
        "PROGRAM_ID_GPU_INTERP",
        path,
        "pl.program_id is 0 in every block under the GPU interpreter: "
        f"all {blocks} blocks use the same slice here (on a GPU they "
        "differ); use a `block` index (lax.axis_index) instead",
        severity="warning",
    )
