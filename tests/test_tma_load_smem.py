"""A TMA load's SMEM side against real JAX: a load into a transposed or strided view of
a plain SMEM scratch fails in the dialect lowering as a store from one does
(``TMA_MINOR_STRIDE``, ``TMA_SMEM_NOT_CONTIGUOUS``), a tiled, swizzled scratch's
transposed view too; a load into the whole scratch lowers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in a child process

STAGES = ("build", "trace", "gpu-lower")


def _load_into(
    view: list[dict[str, Any]], scratch: dict[str, Any], x: list[int], dtype: str
) -> Scenario:
    """A plgpu.kernel that TMA-loads ``x`` into the view ``view`` of scratch ``s`` and
    copies ``s`` to the output."""
    shape = scratch["shape"]
    return Scenario.model_validate(
        {
            "name": "tma-load-view",
            "buffers": {"x": {"shape": x, "dtype": dtype, "init": "iota"}},
            "call": {
                "entry": "plgpu.kernel",
                "args": [{"buffer": "x", "param": "x_ref"}],
                "outputs": {"out": {"shape": shape, "dtype": dtype}},
                "scratch": {"s": scratch, "bar": {"kind": "barrier"}},
                "programs": [
                    {
                        "mesh": {"grid": {"b": 1}, "cluster": {}, "threads": None},
                        "body": [
                            {"let": "v", "ref": "s", "transforms": view},
                            {
                                "op": "copy_gmem_to_smem",
                                "src": "x_ref",
                                "dst": "v",
                                "barrier": "bar",
                            },
                            {"op": "barrier_wait", "barrier": "bar"},
                            {"op": "tma_store", "src": "s", "dst": "out"},
                            {"op": "wait_smem_to_gmem"},
                        ],
                    }
                ],
            },
        }
    )


T = [{"op": "transpose", "perm": [1, 0]}]
CASES = {
    "transposed f32": (
        _load_into(
            T,
            {"shape": [128, 64], "dtype": "float32", "memory_space": "SMEM"},
            [64, 128],
            "float32",
        ),
        "TMA_MINOR_STRIDE",
    ),
    "transposed f16": (
        _load_into(
            T,
            {"shape": [128, 64], "dtype": "float16", "memory_space": "SMEM"},
            [64, 128],
            "float16",
        ),
        "TMA_MINOR_STRIDE",
    ),
    "column slice": (
        _load_into(
            [{"op": "at", "index": [None, [0, 64]]}],
            {"shape": [64, 128], "dtype": "float32", "memory_space": "SMEM"},
            [64, 64],
            "float32",
        ),
        "TMA_SMEM_NOT_CONTIGUOUS",
    ),
    "transposed tiled swizzled": (
        _load_into(
            T,
            {
                "shape": [128, 64],
                "dtype": "float16",
                "memory_space": "SMEM",
                "transforms": [{"op": "tiling", "tile": [8, 64]}, {"op": "swizzle", "bytes": 128}],
            },
            [64, 128],
            "float16",
        ),
        "TMA_MINOR_STRIDE",
    ),
    "whole": (
        _load_into(
            [],
            {"shape": [64, 128], "dtype": "float32", "memory_space": "SMEM"},
            [64, 128],
            "float32",
        ),
        None,
    ),
}


def test_a_tma_load_into_a_view_of_smem_agrees_with_jax() -> None:
    names = list(CASES)
    scenarios = [CASES[n][0] for n in names]
    for name, s, r in zip(names, scenarios, probe_many(scenarios, stages=STAGES), strict=True):
        mine = first_error([d for d in check(s) if d.stage in ("schema", *STAGES)])
        theirs = r.get("code") if r["stage"] else None
        assert (mine.code if mine else None) == theirs == CASES[name][1], (name, r, mine)
