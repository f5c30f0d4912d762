"""The repairs of a ``compute`` value's and a loop's mistakes (``mpmd_lab.repairs``):
VALUE_FP8_PROMOTION (the 8-bit floats cast to float32, as JAX's message asks);
GPU_WHERE_BROADCAST (the scalar condition broadcast to the result's shape),
GPU_REDUCE_BOOL (booleans reduced as int32, compared with 0), GPU_FLOAT_REM and
GPU_WHERE_BROADCAST of ``%`` and ``//`` of floats by a power of two (taken without a
remainder of floats, bit for bit), and a value holding several of these taken in one
fix; VALUE_AXIS (the whole value reduced where that fits the destination);
LOOP_PYTHON_NOT_INT (a Python ``for`` over a comparison as ``@pl.loop``). Each case is
written here, not one of the knowledge base's examples: the fix is offered, leaves no
error (its ``after`` says so), JAX traces and lowers the repaired kernel for the GPU,
and where JAX's interpreter runs the original, the repaired one computes the same
bits."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jaxprobe import answers
from mpmd_lab.fixes import apply_fix
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error
from simulate_support import run_in_jax, same_bits

JAX_STAGES = ("build", "trace", "gpu-lower")


def _scenario(
    value: str,
    out: tuple[list[int], str],
    buffers: dict[str, tuple[list[int], str, Any]],
    body: list[dict[str, Any]] | None = None,
    mesh: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``out[...] = value`` (or ``body``) in a one-block ``plgpu.kernel`` over
    ``buffers`` (name -> shape, dtype, init), each passed as ``NAME_ref``."""
    s: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": "repair",
        "buffers": {
            n: {"shape": sh, "dtype": dt, "init": init, "seed": i}
            for i, (n, (sh, dt, init)) in enumerate(buffers.items())
        },
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": n, "param": f"{n}_ref"} for n in buffers],
            "outputs": {"out": {"shape": out[0], "dtype": out[1]}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}, "cluster": {}, "threads": None},
                    "body": body or [{"op": "compute", "dst": "out", "value": value}],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }
    if mesh:
        s["device_mesh"] = mesh
    return s


ROWS = ([8, 128], "float32", "random")
SCALAR_POS = ([], "float32", 0.5)
SCALAR_NEG = ([], "float32", -0.5)

#: (name, scenario, its first error's code); the repair's value says nothing of names
CASES: list[tuple[str, dict[str, Any], str]] = [
    # 8-bit floats meeting another float: arithmetic, a comparison, jnp.maximum, where
    (
        "fp8-times-bf16",
        _scenario(
            "x_ref[...] * s_ref[...]",
            ([8, 128], "bfloat16"),
            {"x": ([8, 128], "float8_e4m3fn", "random"), "s": ([8, 128], "bfloat16", "random")},
        ),
        "VALUE_FP8_PROMOTION",
    ),
    (
        "fp8-two-kinds",
        _scenario(
            "x_ref[...] - y_ref[...]",
            ([8, 128], "float16"),
            {"x": ([8, 128], "float8_e5m2", "random"), "y": ([8, 128], "float8_e4m3fn", "iota")},
        ),
        "VALUE_FP8_PROMOTION",
    ),
    (
        "fp8-max-into-fp8",
        _scenario(
            "jnp.maximum(x_ref[...], y_ref[...])",
            ([8, 128], "float8_e4m3fn"),
            {"x": ([8, 128], "float8_e5m2", "random"), "y": ([8, 128], "float8_e4m3fn", "iota")},
        ),
        "VALUE_FP8_PROMOTION",
    ),
    (
        "fp8-compared",
        _scenario(
            "jnp.where(x_ref[...] > t_ref[...], t_ref[...], 0.0)",
            ([8, 128], "float32"),
            {"x": ([8, 128], "float8_e4m3fn", "random"), "t": ROWS},
        ),
        "VALUE_FP8_PROMOTION",
    ),
    (
        "fp8-where-values",
        _scenario(
            "jnp.where(s_ref[...] > 0.0, x_ref[...], s_ref[...])",
            ([8, 128], "bfloat16"),
            {"x": ([8, 128], "float8_e4m3fn", "random"), "s": ([8, 128], "bfloat16", "random")},
        ),
        "VALUE_FP8_PROMOTION",
    ),
    (
        "fp8-twice",
        _scenario(
            "x_ref[...] * s_ref[...] + t_ref[...] * x_ref[...]",
            ([8, 128], "float32"),
            {
                "x": ([8, 128], "float8_e4m3fn", "random"),
                "s": ([8, 128], "bfloat16", "random"),
                "t": ROWS,
            },
        ),
        "VALUE_FP8_PROMOTION",
    ),
    # jnp.where of arrays by a scalar condition: a rank-0 load's, a program id's
    (
        "where-by-positive-scalar",
        _scenario(
            "jnp.where(s_ref[...] > 0.0, x_ref[...], 0.0)",
            ([8, 128], "float32"),
            {"x": ROWS, "s": SCALAR_POS},
        ),
        "GPU_WHERE_BROADCAST",
    ),
    (
        "where-by-negative-scalar",
        _scenario(
            "jnp.where(s_ref[...] > 0.0, x_ref[...] * 2.0, -x_ref[...])",
            ([8, 128], "float32"),
            {"x": ROWS, "s": SCALAR_NEG},
        ),
        "GPU_WHERE_BROADCAST",
    ),
    (
        "where-by-program-id",
        _scenario(
            "jnp.where(pl.program_id(0) == 0, x_ref[...], 1.0)",
            ([256], "float32"),
            {"x": ([256], "float32", "random")},
        ),
        "GPU_WHERE_BROADCAST",
    ),
    (
        "where-nested-ints",
        _scenario(
            "jnp.where(n_ref[...] > 2, jnp.where(n_ref[...] > 5, x_ref[...], 7), x_ref[...] + 1)",
            ([2, 8, 128], "int32"),
            {"x": ([2, 8, 128], "int32", "iota"), "n": ([], "int32", 4)},
        ),
        "GPU_WHERE_BROADCAST",
    ),
    # max / min of booleans
    (
        "any-of-mask",
        _scenario("jnp.max(x_ref[...] > 100.0)", ([], "bool"), {"x": ([256], "float32", "iota")}),
        "GPU_REDUCE_BOOL",
    ),
    (
        "all-of-mask-as-int",
        _scenario(
            "jnp.min(x_ref[...] >= 0).astype(jnp.int32) * 3",
            ([], "int32"),
            {"x": ([8, 128], "int32", "iota")},
        ),
        "GPU_REDUCE_BOOL",
    ),
    # a reduction over an axis named twice or one the value lacks, into a destination
    # the whole reduction fits
    (
        "sum-over-an-axis-twice",
        _scenario(
            "jnp.sum(x_ref[...], axis=(1, 1)) + 1.0",
            ([], "float32"),
            {"x": ([64, 128], "float32", "random")},
        ),
        "VALUE_AXIS",
    ),
    (
        "max-over-an-axis-a-vector-lacks",
        _scenario(
            "jnp.max(x_ref[...], axis=-2) * 2",
            ([], "int32"),
            {"x": ([256], "int32", "iota")},
        ),
        "VALUE_AXIS",
    ),
    (
        "min-kept-over-an-axis-too-many",
        _scenario(
            "jnp.min(x_ref[...], axis=(0, 2), keepdims=True)",
            ([1, 1], "float32"),
            {"x": ROWS},
        ),
        "VALUE_AXIS",
    ),
    # a remainder of floats by a power of two: bit for bit, infinities, NaN and the
    # sign of a zero included (x / y makes them: 1 / 0, 0 / 0)
    (
        "fraction-of-floats",
        _scenario(
            "x_ref[...] % 1.0",
            ([8, 128], "float32"),
            {"x": ([8, 128], "float32", "random")},
        ),
        "GPU_FLOAT_REM",
    ),
    (
        "remainder-by-minus-two-of-quotients",
        _scenario(
            "(x_ref[...] / y_ref[...]) % -2.0",
            ([256], "float16"),
            {
                "x": ([256], "float16", [1.0, -1.0, 0.0, 2.5, -3.0, 1000.0, -7.75, 0.5] * 32),
                "y": ([256], "float16", [0.0, 0.0, 0.0, 1.0, 1.0, 0.125, 1.0, -1.0] * 32),
            },
        ),
        "GPU_FLOAT_REM",
    ),
    (
        "remainder-by-a-quarter-bf16",
        _scenario(
            "x_ref[...] * 3.0 % 0.25 + 1.0",
            ([8, 128], "bfloat16"),
            {"x": ([8, 128], "bfloat16", "random")},
        ),
        "GPU_FLOAT_REM",
    ),
    # a floor division of floats by a power of two (jax.numpy's selects by p == 0, a
    # scalar, and takes a remainder of floats): bit for bit
    (
        "halves-floored",
        _scenario(
            "x_ref[...] // 2.0 + 1.0",
            ([8, 128], "float32"),
            {"x": ([8, 128], "float32", "random")},
        ),
        "GPU_WHERE_BROADCAST",
    ),
    (
        "quotients-floored-by-minus-a-quarter",
        _scenario(
            "(x_ref[...] / y_ref[...]) // -0.25",
            ([256], "bfloat16"),
            {
                "x": ([256], "bfloat16", [1.0, -1.0, 0.0, 2.5, -3.0, 1e20, -7.75, -0.0] * 32),
                "y": ([256], "bfloat16", [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0] * 32),
            },
        ),
        "GPU_WHERE_BROADCAST",
    ),
    # several operations the lowering refuses in one value (one fix alone would leave
    # the others): one fix takes them all, in a loop's condition's body too
    (
        "selected-fraction-in-a-loop",
        _scenario(
            "",
            ([8, 128], "float32"),
            {"x": ([8, 128], "float32", "random"), "s": SCALAR_POS},
            body=[
                {
                    "op": "loop",
                    "var": "i",
                    "start": 0,
                    "stop": 2,
                    "body": [
                        {
                            "op": "when",
                            "cond": "i == 0",
                            "body": [
                                {
                                    "op": "compute",
                                    "dst": "out",
                                    "value": "jnp.where(s_ref[...] > 0.0, x_ref[...] % 2.0, 0.0)",
                                }
                            ],
                        }
                    ],
                }
            ],
        ),
        "GPU_WHERE_BROADCAST",
    ),
    (
        "selected-by-all-of-a-mask",
        _scenario(
            "jnp.where(jnp.min(m_ref[...] >= 0.0), x_ref[...] % 1.0, m_ref[...])",
            ([8, 128], "float32"),
            {"x": ROWS, "m": ([8, 128], "float32", "iota")},
        ),
        "GPU_REDUCE_BOOL",
    ),
    (
        "floored-halves-and-remainders",
        _scenario("x_ref[...] // 0.5 + x_ref[...] % 4.0", ([8, 128], "float32"), {"x": ROWS}),
        "GPU_WHERE_BROADCAST",
    ),
    # a Python for over comparisons
    (
        "python-for-over-a-comparison",
        _scenario(
            "",
            ([256], "float32"),
            {"x": ([256], "float32", "iota")},
            body=[
                {
                    "op": "loop",
                    "var": "i",
                    "via": "python",
                    "start": 0,
                    "stop": "program_id(0) == 0",
                    "body": [{"op": "compute", "dst": "out", "value": "x_ref[...] + 1.0"}],
                }
            ],
        ),
        "LOOP_PYTHON_NOT_INT",
    ),
    (
        "python-for-between-comparisons",
        _scenario(
            "",
            ([256], "float32"),
            {"x": ([256], "float32", "iota")},
            body=[
                {
                    "op": "loop",
                    "var": "i",
                    "via": "python",
                    "start": "dev > 2",
                    "stop": "dev < 3",
                    "body": [{"op": "copy", "src": "x_ref", "dst": "out"}],
                }
            ],
            mesh={"dev": 4},
        ),
        "LOOP_PYTHON_NOT_INT",
    ),
]

#: the cases JAX's interpreter runs as they are (the lowering refuses them): the repair
#: computes the same bits
SAME_BITS = [
    "where-by-positive-scalar",
    "where-by-negative-scalar",
    "where-by-program-id",
    "where-nested-ints",
    "any-of-mask",
    "all-of-mask-as-int",
    "fraction-of-floats",
    "remainder-by-minus-two-of-quotients",
    "remainder-by-a-quarter-bf16",
    "halves-floored",
    "quotients-floored-by-minus-a-quarter",
    "selected-fraction-in-a-loop",
    "selected-by-all-of-a-mask",
    "floored-halves-and-remainders",
]


def _repaired(scenario: dict[str, Any], code: str) -> Any:
    """The scenario after its first error's best fix, which is ``code``'s and says it
    leaves no error."""
    s = load_scenario(copy.deepcopy(scenario))
    d = first_error(check(s))
    assert d is not None and d.code == code, d
    assert d.fix is not None and d.fix.after == [], d
    return apply_fix(s, d.fix)


@pytest.mark.parametrize(("name", "scenario", "code"), CASES, ids=[c[0] for c in CASES])
def test_the_repair_is_offered_and_leaves_no_error(name, scenario, code) -> None:
    fixed = _repaired(scenario, code)
    assert [d.code for d in check(fixed) if d.is_error] == []


def test_a_float_loop_bound_gets_no_loop_repair() -> None:
    """A loaded bound may be a float, which ``range`` refuses and ``pl.loop`` counts in
    float32: LOOP_PYTHON_NOT_INT there is offered no ``pl.loop``."""
    s = _scenario(
        "",
        ([256], "float32"),
        {"x": ([256], "float32", "iota"), "n": ([4], "float32", [1.5, 2.0, 0.0, 3.0])},
        body=[
            {
                "op": "loop",
                "var": "i",
                "via": "python",
                "start": 0,
                "stop": "n_ref[0]",
                "body": [{"op": "copy", "src": "x_ref", "dst": "out"}],
            }
        ],
    )
    d = first_error(check(load_scenario(s)))
    assert d is not None and d.code == "LOOP_PYTHON_NOT_INT"
    assert all("pl.loop" not in f.description for f in d.fixes)


def test_a_remainder_by_no_power_of_two_gets_no_repair() -> None:
    """``x % 3.0``: ``x / 3.0`` rounds, and ``x - trunc * 3.0`` with it; no rewrite
    keeps jax.numpy's bits, so GPU_FLOAT_REM is offered none."""
    s = _scenario("x_ref[...] % 3.0", ([8, 128], "float32"), {"x": ROWS})
    d = first_error(check(load_scenario(s)))
    assert d is not None and d.code == "GPU_FLOAT_REM" and d.fixes == []


def test_a_bad_axis_gets_no_whole_reduction_where_the_destination_is_a_row() -> None:
    """``jnp.sum(x, axis=2)`` of a matrix into a row: the whole sum is a scalar, which
    the row does not take; VALUE_AXIS is offered no repair there."""
    s = _scenario("jnp.sum(x_ref[...], axis=2)", ([128], "float32"), {"x": ROWS})
    d = first_error(check(load_scenario(s)))
    assert d is not None and d.code == "VALUE_AXIS" and d.fixes == []


@pytest.mark.slow
def test_jax_refuses_each_case_and_accepts_its_repair() -> None:
    """The check's first error is JAX's for each case (its code and stage: JAX names
    an 8-bit float's two dtypes in an order of its own, ``test_values_agreement``), and
    JAX builds, traces and lowers each repaired kernel for the GPU."""
    before = {name: s for name, s in (c[:2] for c in CASES)}
    after = {name: _repaired(s, code).to_dict() for name, s, code in CASES}
    jax_before = answers(before, JAX_STAGES)
    for name, scenario, _ in CASES:
        d = first_error(check(load_scenario(copy.deepcopy(scenario))))
        jax = jax_before[name]
        assert d is not None and d.jax is not None and jax["stage"] == d.stage, (name, jax)
        # (JAX's "axis 2 is out of bounds ..." reads as TRANSPOSE_BAD_AXIS to the
        # catalogue, whose message it also is: its text is the check's)
        assert jax["code"] == d.code or d.jax.message in jax["message"], (name, jax)
    for name, got in answers(after, JAX_STAGES).items():
        assert got["stage"] is None, (name, got)


@pytest.mark.slow
def test_a_repaired_value_computes_what_jax_interprets_of_the_original() -> None:
    """Where JAX's interpreter runs the original (the GPU lowering alone refuses it),
    the repaired kernel's output is the original's, bit for bit."""
    cases = {name: (s, code) for name, s, code in CASES if name in SAME_BITS}
    originals = [load_scenario(copy.deepcopy(s)) for s, _ in cases.values()]
    repaired = [_repaired(s, code) for s, code in cases.values()]
    problems = []
    for name, a, b in zip(cases, run_in_jax(originals), run_in_jax(repaired), strict=True):
        assert not isinstance(a, str) and not isinstance(b, str), (name, a, b)
        if not same_bits(b["out"], a["out"]):
            problems.append(f"{name}: {a['out']} became {b['out']}")
    assert problems == []
