"""One-edit remedies for failing transform steps."""

from __future__ import annotations

from typing import Any

from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import get_path
from mpmd_lab.scenario import Scenario

#: a peer view made multicast or the other way round: (this step's view, the earlier
#: one's: what each reaches, ``TransformOp.REACH``; where the earlier view alone writes)
_MIXED = {
    "REF_PEER_TO_MULTICAST": ("multicast", "peer", "one device, not all"),
    "REF_MULTICAST_TO_PEER": ("peer", "multicast", "every device, not one"),
}


def fix_step(s: Scenario, path: str, e: Any, before: Any) -> Fix | list[Fix] | None:
    """A fix for the failing step at ``path``, or the alternatives (the check keeps those
    that make the scenario better, best first)."""
    base, _, last = path.rpartition("[")
    index = int(last.rstrip("]"))
    t = _transform(s, base, index)
    code = e.code
    if code in _MIXED:
        this, earlier, keeps = _MIXED[code]
        return [
            Fix(
                description=f"build the {this} view from the base ref "
                f"(drop the {earlier} step before it)",
                edits=_drop_reach(s, base, index, earlier),
            ),
            Fix(
                description=f"keep the {earlier} view: drop the {this} step (write to {keeps})",
                edits=[Edit(op="remove", path=path)],
            ),
        ]
    # (a reshape has no one-edit remedy that is right in general: the shape is the user's)
    if code in ("TRANSPOSE_RANK", "TRANSPOSE_BAD_AXIS"):
        import re

        m = re.search(r"rank of the type \((\d+)\)", e.message)
        r = len(t.perm) if code == "TRANSPOSE_BAD_AXIS" else int(m.group(1)) if m else 0
        return Fix(
            description=f"use a permutation of the ref's {r} axes (identity; reorder it as meant)",
            edits=[Edit(op="replace", path=f"{path}.perm", value=list(range(r)))],
        )
    if code == "TRANSPOSE_REF_RAW_BUG":
        return Fix(
            description="use the transpose method "
            "(plgpu.transpose_ref fails on an untransformed ref)",
            edits=[Edit(op="replace", path=f"{path}.via", value="method")],
        )
    if code == "AT_TOO_MANY_INDICES":
        r = len(before.shape)
        return Fix(
            description=f"keep only {r} index entries (one per dimension)",
            edits=[Edit(op="replace", path=f"{path}.index", value=_dump(t.index[:r]))],
        )
    if code == "AT_OOB_SLICE":
        idx = _dump(t.index)
        k = int(e.field.split("[")[1].rstrip("]")) if e.field else 0
        d = before.shape[k]
        entry = idx[k]
        # keep the slice's size (what the view's users expect) and move it inside
        if isinstance(entry, dict) and "ds" in entry:
            size = min(entry["ds"][1], d)
            idx[k] = {"ds": [d - size, size]}
        else:
            ends = entry[:2] if isinstance(entry, list) else []
            whole = len(ends) < 2 or not all(isinstance(v, int) for v in ends)
            size = d if whole else min(max(ends[1] - ends[0], 0), d)
            idx[k] = [d - size, d]
        return Fix(
            description=f"move the slice inside the dimension of size {d} "
            f"(keeping its size {size}: start {d - size})",
            edits=[Edit(op="replace", path=f"{path}.index", value=idx)],
        )
    if code == "BITCAST_1D_SAME_WIDTH_BUG":
        return Fix(
            description="drop the same-width 1-D bitcast (jax 0.12 fails on it); "
            "bitcast a 2-D view",
            edits=[Edit(op="remove", path=path)],
        )
    return None


def _dump(x: Any) -> Any:
    if isinstance(x, list):
        return [_dump(v) for v in x]
    if hasattr(x, "model_dump"):
        return x.model_dump(mode="json", exclude_none=True)
    return x


def _transform(s: Scenario, base: str, k: int) -> Any:
    return get_path(s, f"{base}[{k}]")


def _drop_reach(s: Scenario, base: str, upto: int, reach: str) -> list[Edit]:
    """Remove the steps before ``upto`` of the stack at ``base`` that reach ``reach``."""
    ts = get_path(s, base)
    return [
        Edit(op="remove", path=f"{base}[{k}]")
        for k in range(upto - 1, -1, -1)
        if ts[k].REACH == reach
    ]
