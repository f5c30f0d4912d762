"""A value's ``lax.broadcasted_iota`` (a ``compute``'s or a ``multimem_store``'s) is laid
out over a warpgroup's 128 threads (the Mosaic GPU lowering's WG_STRIDED layout): an iota
whose element count is not a multiple of 128 has no register layout, and layout inference
fails (GPU_LAYOUT_INFERENCE), stored as it is, summed, or broadcast against a load. The
check said "valid" (its loads had the rule, its iotas not). Each case against JAX's Mosaic
GPU lowering on this CPU.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jaxprobe import answers, assert_agrees
from test_multimem_value import BASE


def _compute(shape: list[int], value: str, dtype: str = "int32", xshape: Any = None) -> dict:
    return {
        "name": "compute-layout",
        "buffers": {"x": {"shape": xshape or shape, "dtype": dtype}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": shape, "dtype": dtype}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [{"op": "compute", "dst": "out", "value": value}],
                }
            ],
        },
    }


def _iota(shape: list[int], dim: int = 0, dtype: str = "int32") -> dict:
    dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
    return _compute(shape, f"lax.broadcasted_iota(jnp.{dtype}, ({dims}), {dim})", dtype)


CASES = {
    **{f"iota{s}": _iota(s) for s in ([16], [64], [130], [192], [3, 64], [1, 192], [2, 8])},
    "iota-float32": _iota([16], dtype="float32"),
    "iota-summed": _compute([], "jnp.sum(lax.broadcasted_iota(jnp.int32, (16,), 0))", xshape=[128]),
    "iota-column-plus-load": _compute(
        [8, 128], "lax.broadcasted_iota(jnp.int32, (8, 1), 0) + x_ref[...]"
    ),
    # multiples of 128: JAX lowers them
    **{f"iota{s}": _iota(s, len(s) - 1) for s in ([128], [384], [8, 16], [1, 128], [16, 8])},
    "iota-row-plus-load": _compute(
        [8, 128], "lax.broadcasted_iota(jnp.int32, (1, 128), 1) + x_ref[...]"
    ),
}


def _multimem(n: int) -> dict:
    """``plgpu.multimem_store`` of an iota of ``n`` elements (its value is lowered as a
    compute's is)."""
    d = copy.deepcopy(BASE)
    d["buffers"]["x"]["shape"] = d["call"]["outputs"]["out"]["shape"] = [n]
    d["call"]["programs"][0]["body"][0]["body"][0]["value"] = (
        f"lax.broadcasted_iota(jnp.float32, ({n},), 0)"
    )
    return d


CASES |= {f"multimem-iota{n}": _multimem(n) for n in (16, 192, 256)}


@pytest.fixture(scope="module")
def jax_answers() -> dict[str, dict[str, Any]]:
    return answers(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_an_iotas_layout_is_what_jax_lowers(name: str, jax_answers) -> None:
    assert_agrees(CASES[name], jax_answers[name])
