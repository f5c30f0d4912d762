"""Hostile inputs, fourth round: the day's new paths (affine views, candidates' plans
built like the original's, gather views, the retrace of a rejected kernel), each held
to JAX's own verdict: a clear diagnostic, never a traceback, a hang or a false
"valid"."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from test_datadep import JAX_STAGES, PLGPU, _one_device  # noqa: E402


def _view(index: list[Any], out: list[int], x: list[int] = [4, 128]) -> dict:  # noqa: B006
    """Block b copies ``x_ref.at[*index]`` into the whole of ``out``."""
    body = [
        {"let": "src", "ref": "x_ref", "transforms": [{"op": "at", "index": index}]},
        {"op": "copy", "src": "src", "dst": "out"},
    ]
    s = _one_device(body, [3, 1, 0, 2], "gather-view", PLGPU)
    s["buffers"]["x"]["shape"] = x
    s["call"]["outputs"]["out"]["shape"] = out
    return s


# ------------------------------------------- where a gather view's indices' dims go

#: (view, JAX's first error's code): the loaded indices' dims sit where the first
#: integer entry is when the integer entries are next to each other, else first
GATHER_LAYOUTS = {
    "slice-then-array": (_view([{"ds": ["0", 2]}, "off_ref[...]"], [2, 4]), "GPU_GATHER_LOAD"),
    "slice-then-array-front": (
        _view([{"ds": ["0", 2]}, "off_ref[...]"], [4, 2]),
        "SWAP_SHAPE_MISMATCH",
    ),
    "3d-slice-array-slice": (
        _view([{"ds": ["0", 2]}, "off_ref[...]"], [2, 4, 8], [2, 4, 8]),
        "GPU_GATHER_LOAD",
    ),
    "3d-apart": (
        _view(["off_ref[...]", {"ds": ["0", 2]}, "off_ref[...]"], [4, 2], [4, 4, 8]),
        "GPU_GATHER_LOAD",
    ),
    "3d-apart-in-place": (
        _view(["off_ref[...]", {"ds": ["0", 2]}, "off_ref[...]"], [2, 4], [4, 4, 8]),
        "SWAP_SHAPE_MISMATCH",
    ),
}


@pytest.mark.slow
def test_a_gather_views_indices_dims_go_where_jax_puts_them():
    """``x_ref.at[pl.ds(0, 2), off_ref[...]]`` is (2, 4) to JAX (numpy's rule, in
    NDIndexer.get_indexer_shape): the check typed it (4, 2), the indices' dims always
    first, and said SWAP_SHAPE_MISMATCH at trace for a copy JAX traces (its lowering
    refuses the gather: GPU_GATHER_LOAD); for a (4, 2) destination it said nothing of
    the shapes JAX finds differing."""
    from jaxprobe import probe_many

    names = list(GATHER_LAYOUTS)
    got = probe_many([GATHER_LAYOUTS[n][0] for n in names])
    for name, r in zip(names, got, strict=True):
        s, want = GATHER_LAYOUTS[name]
        d = first_error([x for x in check(load_scenario(s)) if x.stage in JAX_STAGES])
        assert d is not None, name
        assert (d.code, d.stage) == (r["code"], r["stage"]), (name, d.one_line(), r)
        assert want in (r["code"], r["stage"]), (name, r)
        if d.code == "SWAP_SHAPE_MISMATCH":
            assert r["message"].strip() == d.message.strip(), (name, r["message"], d.message)
