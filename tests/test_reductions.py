"""Reductions in a ``compute`` value (issue 29): ``jnp.sum`` / ``jnp.max`` / ``jnp.min``
over every axis or along some, with ``keepdims``, held against real JAX.

- the simulator against JAX's CPU interpreters (GPU and HLO), bit for bit wherever the
  result does not depend on the order of the additions (maxima, minima, integer sums,
  sums of small integers); a float32 sum of random values is compared to a few ulps of
  the sum of magnitudes, since XLA's CPU reduction adds in its own order (and a GPU in
  another);
- the check's verdict against JAX's Mosaic GPU lowering (``jax.export`` for cuda on the
  CPU): a reduction of the whole value lowers, one along an axis of a plainly loaded
  value is GPU_LAYOUT_INFERENCE;
- the axis rules against JAX's trace (VALUE_AXIS: its type and exact message);
- kernels written as JAX's tests write them (tests/kernels/red_*.py) imported by
  ``from_jax``: faithful ones simulate to the kernel's values; one that reduces a value
  cast to a register layout is a partial import at its line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import probe, simulate
from mpmd_lab.codegen import generate
from mpmd_lab.ops import values as V
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_support import run_in_jax, same_bits  # noqa: E402
from test_importer import KERNELS, _line_of, imported_all  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes


def _scenario(
    name: str,
    value: str,
    shape: list[int],
    out_shape: list[int],
    dtype: str = "float32",
    out: str = "float32",
    init: str = "random",
    interpret: str = "gpu",
) -> dict:
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": {
            "a": {"shape": shape, "dtype": dtype, "init": init, "seed": 0},
            "b": {"shape": shape, "dtype": dtype, "init": "random", "seed": 1},
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "a", "param": "a_ref"}, {"buffer": "b", "param": "b_ref"}],
            "outputs": {"o": {"shape": out_shape, "dtype": out}},
            "programs": [
                {
                    "mesh": {"grid": {"blocks": 1}, "cluster": {}, "threads": None},
                    "body": [{"op": "compute", "dst": "o", "value": value}],
                }
            ],
        },
        "run": {"interpret": interpret, "detect_races": False},
    }


T = [64, 128]
#: (name, value, shape, out shape, dtype, out dtype, exact: bit for bit with JAX,
#:  lowers: JAX's Mosaic GPU lowering accepts it)
CASES = [
    ("max-all", "a_ref[...] - jnp.max(a_ref[...])", T, T, "float32", "float32", True, True),
    ("min-scalar", "jnp.min(a_ref[...] * b_ref[...])", [256], [], "float32", "float32", True,
     True),
    ("count", "jnp.sum(a_ref[...] > 0.0)", [256], [], "float32", "int32", True, True),
    ("int-max", "jnp.max((a_ref[...] * 100.0).astype(jnp.int32))", [256], [], "float32",
     "int32", True, True),
    ("sum-2d", "jnp.sum(a_ref[...], axis=(0, 1))", T, [], "float32", "float32", False, True),
    ("mean-1d", "a_ref[...] - jnp.sum(a_ref[...]) / 256.0", [256], [256], "float32",
     "float32", False, True),
    ("sum-rows", "jnp.sum(a_ref[...], axis=1)", T, [64], "float32", "float32", False, False),
    ("max-cols-kd", "a_ref[...] - jnp.max(a_ref[...], axis=0, keepdims=True)", T, T,
     "float32", "float32", True, False),
    ("min-last", "jnp.min(a_ref[...], axis=-1)", T, [64], "float32", "float32", True, False),
    ("f16-max-rows", "jnp.max(a_ref[...], axis=1)", T, [64], "float16", "float16", True,
     False),
    ("int-sum-rows", "jnp.sum((a_ref[...] * 10.0).astype(jnp.int8), axis=1)", T, [64],
     "float32", "int32", True, False),
]  # fmt: skip


def _cases(interpret: str) -> list:
    return [
        load_scenario(_scenario(f"{n}-{interpret}", v, sh, osh, dt, o, interpret=interpret))
        for n, v, sh, osh, dt, o, _, _ in CASES
    ]


def test_reductions_simulate_as_jax_interprets_them():
    scenarios = _cases("gpu") + _cases("hlo")
    exact = [c[6] for c in CASES] * 2
    results = run_in_jax(scenarios)
    problems = []
    for s, got, bits in zip(scenarios, results, exact, strict=True):
        assert not isinstance(got, str), f"{s.name}: JAX failed: {got}"
        sim = simulate(s, check=False)
        assert sim.ok, (s.name, sim.error)
        mine, theirs = np.asarray(sim.outputs["o"]), np.asarray(got["o"])
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, s.name
        if bits:
            if not same_bits(mine, theirs, flushed=True):
                problems.append(f"{s.name}: simulate {mine.ravel()[:3]} jax {theirs.ravel()[:3]}")
        else:  # a float sum in another order: a few ulps of the sum of magnitudes
            a = np.abs(np.asarray(sim.outputs["o"], np.float64))
            scale = 256 * np.finfo(np.float32).eps * max(float(a.max()), 1.0) * 64
            if not np.allclose(mine, theirs, rtol=0, atol=scale):
                problems.append(f"{s.name}: simulate {mine.ravel()[:3]} jax {theirs.ravel()[:3]}")
    assert problems == []


def test_a_sum_of_small_integers_is_exact():
    """Sums whose every partial sum is exact (small integers) equal JAX's bit for bit."""
    cases = [  # (iota: 0, 1, 2, ...; every partial sum below 2**24)
        ("jnp.sum(a_ref[...], axis=1)", T, [64]),
        ("a_ref[...] - jnp.sum(a_ref[...])", [8, 128], [8, 128]),
    ]
    scenarios = [
        load_scenario(_scenario(f"iota-{i}", v, sh, o, init="iota"))
        for i, (v, sh, o) in enumerate(cases)
    ]
    for s, got in zip(scenarios, run_in_jax(scenarios), strict=True):
        assert not isinstance(got, str), got
        assert same_bits(simulate(s, check=False).outputs["o"], got["o"]), s.name


def test_the_check_says_what_the_gpu_lowering_says():
    """Each case's verdict against JAX's own lowering for the GPU: a whole-value
    reduction lowers; one along an axis of a plainly loaded value fails layout inference,
    with JAX's message, at the value."""
    scenarios = _cases("gpu")
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    for s, r, case in zip(scenarios, results, CASES, strict=True):
        lowers = case[7]
        d = first_error(check(s))
        if lowers:
            assert r.ok, (s.name, r.code, r.message[:200])
            assert d is None, (s.name, d.one_line())
        else:
            assert not r.ok and r.code == "GPU_LAYOUT_INFERENCE", (s.name, r.code, r.message)
            assert d is not None and d.code == "GPU_LAYOUT_INFERENCE", s.name
            assert (d.stage, d.jax.type) == (r.stage, r.error_type)
            assert r.message.startswith(d.jax.message), (d.jax.message, r.message)
            assert d.path == "call.programs[0].body[0].value"


#: (value, shape, out shape, dtype, out dtype, JAX's lowering error or None): booleans
#: in registers lower; a boolean array loaded or stored, or reduced by max / min, do not
BOOLS = [
    ("a_ref[...] > 0.5", [256], [256], "float32", "bool", "GPU_BOOL_VECTOR"),
    ("jnp.where(a_ref[...], 1.0, 0.0)", [256], [256], "bool", "float32", "GPU_BOOL_VECTOR"),
    ("jnp.max(a_ref[...] > 0.5)", T, [], "float32", "bool", "GPU_REDUCE_BOOL"),
    ("jnp.where(jnp.min(a_ref[...] > 0.5), 1.0, 0.0)", [256], [], "float32", "float32",
     "GPU_REDUCE_BOOL"),
    ("jnp.sum(a_ref[...] > 0.5)", [256], [], "float32", "int32", None),
    ("jnp.sum(a_ref[...]) > 0.5", [256], [], "float32", "bool", None),
    ("jnp.max(jnp.where(a_ref[...] > 0.5, 1, 0))", [256], [], "float32", "int32", None),
    # a register vector of 8 booleans or more is a byte: loaded and stored as it is
    ("jnp.where(a_ref[...], 1.0, 0.0)", [1024], [1024], "bool", "float32", None),
    ("jnp.where(a_ref[...], 1.0, 0.0)", [64, 128], [64, 128], "bool", "float32", None),
    ("a_ref[...]", [1024], [1024], "bool", "bool", None),
    ("a_ref[...] == False", [1024], [1024], "bool", "bool", None),
    ("a_ref[...]", [256], [256], "bool", "bool", "GPU_LAYOUT_INFERENCE"),
    # a comparison of float32 (2 per vector) or float16 (4) values, or of an iota
    ("a_ref[...] > 0.5", [64, 128], [64, 128], "float32", "bool", "GPU_BOOL_VECTOR"),
    ("a_ref[...] > 0.5", [1024], [1024], "float16", "bool", "GPU_BOOL_VECTOR"),
    ("lax.broadcasted_iota(jnp.int32, (1024,), 0) > 3", [1024], [1024], "float32", "bool",
     "GPU_BOOL_VECTOR"),
]  # fmt: skip


def test_booleans_lower_where_jax_lowers_them():
    scenarios = [
        load_scenario(_scenario(f"bool-{i}", v, sh, o, dt, od))
        for i, (v, sh, o, dt, od, _) in enumerate(BOOLS)
    ]
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    for s, r, case in zip(scenarios, results, BOOLS, strict=True):
        d = first_error(check(s))
        if case[5] is None:
            assert r.ok and d is None, (case[0], r.message[:200], d)
            continue
        assert d is not None and d.code == case[5], (case[0], d)
        assert not r.ok and (d.stage, d.jax.type) == (r.stage, r.error_type), case[0]
        assert r.message.startswith(d.jax.message), (case[0], r.message[:200])


def test_a_boolean_copy_and_fill_lower_where_jax_lowers_them():
    """The same byte rule for a plain copy (layout inference's error) and a fill (the
    dialect lowering's): 256 booleans are 2 per thread, 1024 a byte."""
    cases = []
    for op, shape, code in [
        ("copy", [256], "GPU_LAYOUT_INFERENCE"),
        ("copy", [1024], None),
        ("copy", [8, 128], None),
        ("fill", [256], "GPU_BOOL_VECTOR"),
        ("fill", [1024], None),
        ("fill", [64, 128], None),
    ]:
        data = _scenario(f"bool-{op}-{len(cases)}", "a_ref[...]", shape, shape, "bool", "bool")
        st = {"op": "copy", "src": "a_ref", "dst": "o"}
        if op == "fill":
            st = {"op": "fill", "dst": "o", "value": True}
        data["call"]["programs"][0]["body"] = [st]
        cases.append((load_scenario(data), code))
    results = probe.probe_many([s for s, _ in cases], ("build", "trace", "gpu-lower"))
    for (s, code), r in zip(cases, results, strict=True):
        d = first_error(check(s))
        if code is None:
            assert r.ok and d is None, (s.name, r.message[:200], d)
            continue
        assert d is not None and d.code == code == r.code, (s.name, d, r.code)
        assert (d.stage, d.jax.type) == (r.stage, r.error_type)
        assert r.message.startswith(d.jax.message), (s.name, r.message[:200])


#: (value, shape): an axis JAX's trace refuses
AXIS_ERRORS = [
    ("jnp.sum(a_ref[...], axis=1)", [256]),
    ("jnp.max(a_ref[...], axis=-3)", T),
    ("jnp.min(a_ref[...], axis=(0, 0))", T),
    ("jnp.sum(a_ref[...], axis=(1, -1))", T),
]


def test_axis_errors_are_jaxs_own():
    scenarios = [
        load_scenario(_scenario(f"axis-{i}", v, sh, [])) for i, (v, sh) in enumerate(AXIS_ERRORS)
    ]
    results = probe.probe_many(scenarios, ("build", "trace"), timeout=120)
    for s, r in zip(scenarios, results, strict=True):
        d = first_error(check(s))
        assert d is not None and d.code == "VALUE_AXIS", (s.name, d)
        assert not r.ok and r.stage == "trace", r
        assert (d.jax.type, d.jax.message) == (r.error_type, r.message), (d.jax, r.message)
        assert d.path == "call.programs[0].body[0].value"


@pytest.mark.parametrize(
    "value",
    [
        "jnp.sum(a_ref[...], axis=n)",
        "jnp.sum(a_ref[...], b_ref[...])",
        "jnp.max(a_ref[...], keepdims=1)",
        "jnp.min(a_ref[...], where=a_ref[...] > 0)",
        "jnp.sum(a_ref[...], axis=(0, 1.5))",
    ],
)
def test_reductions_outside_the_grammar_are_not_a_scenario(value):
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario("bad", value, T, []))
    assert "call.programs[0].body[0].value" in str(e.value)


def test_reductions_print_as_they_parse_and_export():
    for text in [
        "jnp.sum(a_ref[...])",
        "jnp.max(a_ref[...], axis=1)",
        "a_ref[...] - jnp.min(a_ref[...], axis=(0, 1), keepdims=True)",
        "jnp.sum((a_ref[...] > 0.0).astype(jnp.int32), axis=-1) * 2",
    ]:
        assert V.parse(text).source(V.LABEL) == text
    s = load_scenario(
        _scenario("export", "a_ref[...] - jnp.max(a_ref[...], axis=0, keepdims=True)", T, T)
    )
    assert "o[...] = a_ref[...] - jnp.max(a_ref[...], axis=0, keepdims=True)" in generate(s)


# ---------------------------------------------------------------- from_jax

#: kernels that import faithfully, lower in JAX and simulate to the kernel's values
FAITHFUL = ["red_sum_normalize", "red_count_and_min", "red_max_shift_2dev", "red_max_exchange"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, dict]:
    names = [*FAITHFUL, "red_row_sum_axis", "red_row_max_wgmma"]
    return imported_all(names, tmp_path_factory.mktemp("red"))


@pytest.mark.parametrize("name", FAITHFUL)
def test_a_reducing_kernel_imports_faithfully_and_simulates_to_its_values(imported, name):
    r = imported[name]
    imp = r["obj"]
    assert r["lowered"] == "ok"  # real JAX lowers the user's own function for the GPU
    assert imp.faithful and imp.ok, imp.summary()
    assert not [d for d in imp.diagnostics if d.is_error]
    sim = simulate(imp.scenario)
    assert sim.ok, sim.error
    got = imp.outputs(sim.outputs)
    assert len(got) == len(r["expected"])
    for mine, want in zip(got, r["expected"], strict=True):
        assert mine is not None and same_bits(np.asarray(mine), np.asarray(want)), (mine, want)


def test_the_reductions_are_in_the_statements(imported):
    body = imported["red_count_and_min"]["obj"].scenario.call.programs[0].body
    assert [st.value for st in body] == [
        "jnp.sum((x_ref[...] > 0.0).astype(jnp.int32))",
        "jnp.min(x_ref[...]) * 2.0",
    ]
    (st,) = imported["red_sum_normalize"]["obj"].scenario.call.programs[0].body
    assert st.value == "x_ref[...] / jnp.sum(x_ref[...])"


def test_a_row_sum_is_faithful_and_its_lowering_error_is_at_its_line(imported):
    r = imported["red_row_sum_axis"]
    imp = r["obj"]
    assert imp.faithful and not imp.ok
    (d,) = [d for d in imp.diagnostics if d.is_error]
    assert d.code == "GPU_LAYOUT_INFERENCE"
    line = _line_of("red_row_sum_axis", "o_ref[...] = jnp.sum(x_ref[...], axis=1)")
    assert d.source == f"{KERNELS / 'red_row_sum_axis.py'}:{line}"
    assert r["lowered"] == f"ValueError: {d.jax.message}"[: 300 + len("ValueError: ")]
    # simulate says why it stops; asked to go past the lowering error, it gives the
    # values JAX's interpreter computes, the lowering error kept first
    assert not simulate(imp.scenario).ok
    sim = simulate(imp.scenario, past_lowering=True)
    assert sim.outputs and sim.lowering is not None, sim.error
    assert sim.lowering.code == "GPU_LAYOUT_INFERENCE"
    assert same_bits(np.asarray(imp.outputs(sim.outputs)[0]), r["expected"][0])


def test_a_reduction_of_a_layout_cast_value_is_a_partial_import(imported):
    r = imported["red_row_max_wgmma"]
    imp = r["obj"]
    assert r["lowered"] == "ok"  # JAX lowers it: the language lacks the layout, not JAX
    assert not imp.faithful and not imp.ok
    (d,) = [d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED"]
    line = _line_of("red_row_max_wgmma", "o_ref[...] = jnp.max(x, axis=1)")
    assert d.is_error and d.source == f"{KERNELS / 'red_row_max_wgmma.py'}:{line}"
    assert "plgpu.layout_cast" in d.message and "o_ref[...] = jnp.max(x, axis=1)" in d.message
    sim = simulate(imp.scenario)
    assert not sim.ok and sim.outputs == {} and sim.error.code == "IMPORT_UNSUPPORTED"
