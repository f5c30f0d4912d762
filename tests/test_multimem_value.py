"""``plgpu.multimem_store`` of a value computed in registers (issue 29:
test_multimem_store_regs stores a register iota): the statement's ``value`` is a compute
value. Its type rules, lowering and simulation against real JAX (trace and the Mosaic GPU
lowering for 'cuda' on the CPU); the import of the kernel is in tests/test_importer.py
(mm_store_regs_iota)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import simulate
from mpmd_lab.codegen import generate
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in a child process

BASE = {
    "name": "multimem-value",
    "buffers": {"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
    "call": {
        "entry": "plgpu.kernel",
        "args": [{"buffer": "x", "param": "x_ref"}],
        "outputs": {"out": {"shape": [256], "dtype": "float32"}},
        "scratch": {"sem": {"kind": "semaphore"}},
        "programs": [
            {
                "mesh": {},
                "body": [
                    {
                        "op": "when",
                        "cond": "dev == 0",
                        "body": [
                            {
                                "op": "multimem_store",
                                "value": "x_ref[...] * 2.0 + 1.0",
                                "dst": "out",
                                "axes": ["dev"],
                            }
                        ],
                    },
                    {"op": "semaphore_signal", "sem": "sem", "device": "1 - dev"},
                    {"op": "semaphore_wait", "sem": "sem"},
                ],
            }
        ],
    },
    "device_mesh": {"dev": 2},
}


def _with(value: str, out: dict | None = None) -> dict:
    d = copy.deepcopy(BASE)
    d["call"]["programs"][0]["body"][0]["body"][0]["value"] = value
    if out is not None:
        d["call"]["outputs"]["out"] = out
    return d


#: (value, out) -> the code both the check and JAX give (None: valid, JAX lowers it)
CASES = [
    ("x_ref[...] * 2.0 + 1.0", None, None),
    ("lax.broadcasted_iota(jnp.int32, (256,), 0)", {"shape": [256], "dtype": "int32"}, None),
    ("x_ref[...].astype(jnp.int32)", None, "MULTIMEM_MISMATCH"),
    ("x_ref[...] * 2.0", {"shape": [2, 128], "dtype": "float32"}, "MULTIMEM_MISMATCH"),
]


def _first_error(data: dict) -> str | None:
    errors = [d for d in check(load_scenario(data)) if d.is_error]
    return errors[0].code if errors else None


def test_the_check_and_jax_agree_on_a_stored_value():
    scenarios = [_with(v, o) for v, o, _ in CASES]
    got = probe_many(scenarios, ("build", "trace", "gpu-lower"))
    for (value, _, want), data, jax in zip(CASES, scenarios, got, strict=True):
        assert jax.get("code") == want, (value, jax)
        assert _first_error(data) == want, value


def test_the_value_is_stored_on_every_device_of_the_axis():
    s = load_scenario(BASE)
    result = simulate(s)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    x = np.arange(512, dtype=np.float32)
    np.testing.assert_array_equal(result.outputs["out"], np.tile(x[:256] * 2 + 1, 2))


def test_the_statement_is_written_and_read_back():
    s = load_scenario(BASE)
    assert "plgpu.multimem_store(x_ref[...] * 2.0 + 1.0, " in generate(s)
    st = s.call.programs[0].body[0].body[0]
    assert st.src is None and [f for f, _, _ in st.ref_fields()] == ["value.x_ref", "dst"]


@pytest.mark.parametrize(
    "stmt,why",
    [
        ({"src": "x_ref", "value": "x_ref[...]"}, "one of them"),
        ({}, "one of them"),
        ({"value": "x_ref[...] * 0 + pl.semaphore_read(sem)"}, "does not read semaphores"),
    ],
)
def test_one_of_src_and_value(stmt, why):
    d = copy.deepcopy(BASE)
    st = {"op": "multimem_store", "dst": "out", "axes": ["dev"], **stmt}
    d["call"]["programs"][0]["body"][0]["body"][0] = st
    with pytest.raises(Exception, match=why):
        load_scenario(d)
