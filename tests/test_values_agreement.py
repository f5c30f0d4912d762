"""``compute`` values where the check or the simulator disagreed with real JAX
(``bench/fuzz_values.py`` found each class), held against JAX on this CPU.

The simulator against JAX's CPU interpreter bit for bit: jax.numpy's own floor division
and remainder (not numpy's: by zero, of negative numbers, the sign of a zero), XLA's
saturating float-to-integer conversion (NaN is zero; XLA's CPU and GPU backends and
Mosaic GPU's ``cvt.rzi`` saturate alike), a sum of 16-bit floats added in float32, a
bitcast of a scalar. The check's verdict against JAX's trace and Mosaic GPU lowering:
a Python scalar promoted to a higher kind stays weak, a bitcast's shape rule before its
dtype rule, a comparison of comparisons exported with its brackets, 8-bit scalars and
8-bit equality, which the lowering computes.
"""

from __future__ import annotations

import copy
import re

import pytest
from jaxprobe import answers, assert_agrees
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error
from simulate_support import run_in_jax, same_bits

I32 = [7, -7, 0, -(2**31), 5, -5, 2**31 - 1, -1]
U32 = [7, 0, 4294967295, 3, 0, 2, 1, 4294967294]
F32 = [1.0, -1.0, 0.0, -0.0, 2.5, -2.5, 7.0, -7.0]


def _scenario(
    name: str,
    value: str,
    out: tuple[str, list[int]],
    *buffers: tuple[str, list[int], object],
    interpret: str = "hlo",
) -> dict:
    names = "abcd"[: len(buffers)]
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": {
            n: {"dtype": d, "shape": s, "init": init, "seed": i}
            for i, (n, (d, s, init)) in enumerate(zip(names, buffers, strict=True))
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": n, "param": f"{n}_ref"} for n in names],
            "outputs": {"o": {"dtype": out[0], "shape": out[1]}},
            "programs": [
                {
                    "mesh": {"grid": {"blocks": 1}, "cluster": {}, "threads": None},
                    "body": [{"op": "compute", "dst": "o", "value": value}],
                }
            ],
        },
        "run": {"interpret": interpret, "detect_races": False},
    }


def _divisors(dtype: str, values: list) -> list:
    """Each value divided by each of 0, -1, 2, -2 (a dividend and divisor per element)."""
    return [v for v in values for _ in range(4)], [d for _ in values for d in (0, -1, 2, -2)]


def _int_pair(name: str, value: str, dtype: str, values: list) -> dict:
    a, b = _divisors(dtype, values)
    if dtype.startswith("u"):
        b = [d % 2**32 if d < 0 else d for d in b]
    n = len(a)
    return _scenario(name, value, (dtype, [n]), (dtype, [n], a), (dtype, [n], b))


#: values the simulator computed other than JAX's interpreter (each fails without its fix)
SIMULATED = [
    _int_pair("int-floordiv", "a_ref[...] // b_ref[...]", "int32", I32),
    _int_pair("uint-floordiv", "a_ref[...] // b_ref[...]", "uint32", U32),
    _scenario(  # int16 by an int8 zero: promoted to int16, -2 and -1 (numpy: 0)
        "small-floordiv",
        "lax.broadcasted_iota(jnp.int16, (4, 128), 1) // a_ref[...]",
        ("int16", [4, 128]),
        ("int8", [4, 1], [[0], [-1], [3], [-128]]),
        interpret="gpu",
    ),
    _scenario(  # float: the sign of a zero remainder is the dividend's (numpy: the divisor's)
        "float-rem",
        "a_ref[...] % b_ref[...]",
        ("float32", [32]),
        ("float32", [32], _divisors("float32", F32)[0]),
        ("float32", [32], [float(d) for d in _divisors("float32", F32)[1]]),
    ),
    _scenario(
        "float-floordiv",
        "a_ref[...] // b_ref[...]",
        ("bfloat16", [32]),
        ("bfloat16", [32], _divisors("float32", F32)[0]),
        ("bfloat16", [32], [float(d) for d in _divisors("float32", F32)[1]]),
    ),
    _scenario(  # NaN (0 / 0), inf, -inf, out of range, negative into unsigned
        "float-to-int",
        "(a_ref[...] / b_ref[...]).astype(jnp.int32) + (a_ref[...] / b_ref[...]).astype("
        "jnp.uint8).astype(jnp.int32) * 65536",
        ("int32", [8]),
        ("float32", [8], [0.0, 1.0, -1.0, 3e9, -3e9, 300.0, -2.5, 255.9]),
        ("float32", [8], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
        interpret="gpu",
    ),
    _scenario(  # jnp.sum of bfloat16 adds in float32 and rounds once
        "bf16-sum",
        "jnp.sum(a_ref[...], axis=-1)",
        ("bfloat16", []),
        ("bfloat16", [256], "random"),
        interpret="gpu",
    ),
    _scenario(  # the minimum of two zeros is -0 if either is (numpy's: the second)
        "min-zeros",
        "jnp.minimum(a_ref[...], b_ref[...])",
        ("bfloat16", [4]),
        ("bfloat16", [4], [-0.0, 0.0, -0.0, 0.0]),
        ("bfloat16", [4], [0.0, -0.0, -0.0, 0.0]),
    ),
    _scenario(  # the maximum of two zeros is +0 unless both are -0
        "max-zeros",
        "jnp.maximum(a_ref[...], b_ref[...])",
        ("float32", [4]),
        ("float32", [4], [-0.0, 0.0, -0.0, 0.0]),
        ("float32", [4], [0.0, -0.0, -0.0, 0.0]),
        interpret="gpu",
    ),
    _scenario(  # a scalar's bitcast into a narrower dtype: two halves
        "scalar-bitcast",
        "lax.bitcast_convert_type(a_ref[...], jnp.uint16)",
        ("uint16", [2]),
        ("uint32", [], 4294967294),
    ),
    _scenario(  # a weakly typed float (int32 * 2.0) stored into a float16 ref: converted
        "weak-float-into-f16",
        "a_ref[...] * 2.5",
        ("float16", [8]),
        ("int32", [8], [1, -3, 70000, 0, 7, -1, 2**31 - 1, 13]),
    ),
]


@pytest.mark.slow
def test_values_simulate_as_jax_interprets_them():
    scenarios = [load_scenario(copy.deepcopy(d)) for d in SIMULATED]
    problems = []
    for s, got in zip(scenarios, run_in_jax(scenarios), strict=True):
        assert first_error(check(s)) is None or first_error(check(s)).stage == "gpu-lower"
        assert not isinstance(got, str), f"{s.name}: JAX failed: {got}"
        sim = simulate(s, check=False)
        if not sim.ok:
            problems.append(f"{s.name}: simulate fails: {sim.error}")
        elif not same_bits(sim.outputs["o"], got["o"], flushed=True):
            problems.append(f"{s.name}: simulate {sim.outputs['o']} JAX {got['o']}")
    assert problems == []


F8 = ("float8_e5m2", [], 1.5)
F8_ARRAY = ("float8_e5m2", [8, 128], "random")
BOOL_SRC = ("float32", [2, 128], "random")

#: verdicts the check gave other than JAX's (each fails without its fix)
VERDICTS = {
    # int32 * 2.0 is a weak float32: it takes float16's dtype in turn (JAX valid) ...
    "weak-float": _scenario(
        "weak-float",
        "a_ref[...] * 2.0 + b_ref[...]",
        ("float16", [8, 128]),
        ("int32", [8, 128], "iota"),
        ("float16", [8, 128], "random"),
    ),
    # ... and a float32 store of it is a float16 store (SWAP_DTYPE_MISMATCH)
    "weak-float-store": _scenario(
        "weak-float-store",
        "jnp.minimum(a_ref[...], -1.5) + b_ref[...]",
        ("float32", [8, 128]),
        ("int8", [8, 128], "iota"),
        ("bfloat16", [8, 128], "random"),
    ),
    # a bool widened: the shape rule speaks first (BITCAST_VALUE_SHAPE)
    "bitcast-bool-wider": _scenario(
        "bitcast-bool-wider",
        "lax.bitcast_convert_type(a_ref[...] > 0.0, jnp.bfloat16)",
        ("bfloat16", [2, 128]),
        BOOL_SRC,
    ),
    # an ml_dtypes dtype unquoted in JAX's message (BITCAST_VALUE_BOOL)
    "bitcast-bool-f8": _scenario(
        "bitcast-bool-f8",
        "lax.bitcast_convert_type(a_ref[...] > 0.0, jnp.float8_e4m3fn)",
        ("float8_e4m3fn", [2, 128]),
        BOOL_SRC,
    ),
    # a comparison of comparisons, bracketed in the export (Python chains a > b == c)
    "compare-compares": _scenario(
        "compare-compares",
        "((a_ref[...] > b_ref[...]) == (b_ref[...] > 0.0)).astype(jnp.float32)",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
        ("float32", [8, 128], "iota"),
    ),
    # 8-bit scalars are computed as scalars (JAX lowers it)
    "byte-scalar": _scenario(
        "byte-scalar",
        "jnp.maximum(0.5, a_ref[...]) + (-a_ref[...])",
        ("float8_e5m2", []),
        F8,
    ),
    # == of 8-bit vectors compares bits (JAX lowers it)
    "byte-equal": _scenario(
        "byte-equal",
        "(a_ref[...] == b_ref[...]).astype(jnp.int32) + (a_ref[...] != b_ref[...])",
        ("int32", [8, 128]),
        ("float8_e5m2", [8, 128], "random"),
        ("float8_e5m2", [8, 128], "iota"),
    ),
    # an 8-bit float iota: LLVM has no such value (GPU_VERIFICATION)
    "iota-f8": _scenario(
        "iota-f8",
        "lax.broadcasted_iota(jnp.float8_e5m2, (8, 128), 1)",
        ("float8_e5m2", [8, 128]),
        BOOL_SRC,
    ),
    # 8-bit floats promote with no other float (VALUE_FP8_PROMOTION, JAX's own order of
    # the two dtypes), in arithmetic and in jnp.where alike ...
    "fp8-times-bf16": _scenario(
        "fp8-times-bf16",
        "a_ref[...] * b_ref[...]",
        ("bfloat16", [8, 128]),
        ("float8_e4m3fn", [8, 128], "random"),
        ("bfloat16", [8, 128], "random"),
    ),
    "fp8-where": _scenario(
        "fp8-where",
        "jnp.where(a_ref[...] > 0.0, b_ref[...], a_ref[...])",
        ("float32", [8, 128]),
        ("float16", [8, 128], "random"),
        ("float8_e5m2", [8, 128], "random"),
    ),
    # ... but with an integer and a Python number it stays 8-bit (JAX traces it)
    "fp8-int": _scenario(
        "fp8-int",
        "(a_ref[...] + b_ref[...] * 2.0).astype(jnp.float32)",
        ("float32", [8, 128]),
        ("float8_e4m3fn", [8, 128], "random"),
        ("int8", [8, 128], "iota"),
    ),
    # % of booleans is int32, as // is (jax.numpy promotes booleans to numbers first)
    "bool-rem": _scenario(
        "bool-rem",
        "(a_ref[...] > 0.0) % (b_ref[...] > 1.0)",
        ("int32", [8, 128]),
        ("float32", [8, 128], "random"),
        ("float32", [8, 128], "iota"),
    ),
    # true division of 8-bit integers divides float32s (JAX lowers it)
    "byte-true-div": _scenario(
        "byte-true-div",
        "(a_ref[...] > 0.0) / b_ref[...]",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
        ("uint8", [8, 128], "iota"),
    ),
    # an 8-bit float iota's verification error comes after the dialect lowering's own
    "iota-f8-then-byte-arith": _scenario(
        "iota-f8-then-byte-arith",
        "jnp.minimum(lax.broadcasted_iota(jnp.float8_e4m3fn, (8, 128), 1), a_ref[...])",
        ("float8_e4m3fn", [8, 128]),
        ("float8_e4m3fn", [], 1.5),
    ),
    # a scalar condition: jnp.where broadcasts x and y only (JAX's message names two)
    "where-scalar-shapes": _scenario(
        "where-scalar-shapes",
        "jnp.where(1.5, a_ref[...], b_ref[...])",
        ("float32", [128]),
        ("float32", [128], "random"),
        ("float32", [64], "random"),
    ),
    # Python negates a Python bool itself: -True is the int -1, a scalar (JAX's store of
    # it fails on its shape, not on a negated bool)
    "negated-true": _scenario(
        "negated-true",
        "-True",
        ("int32", [128]),
        ("float32", [128], "random"),
    ),
    # the dialect lowering's errors come in the order the value computes (8-bit
    # arithmetic, then the remainder of its float result)
    "byte-arith-then-float-rem": _scenario(
        "byte-arith-then-float-rem",
        "(-a_ref[...]).astype(jnp.float32) % 3.0",
        ("float32", [8, 128]),
        ("int8", [8, 128], "iota"),
    ),
    # Python divides two Python numbers as it evaluates the body (EXPR_ZERO_DIVISION)
    "python-zero-division": _scenario(
        "python-zero-division",
        "a_ref[...] + (7 // (1 - True))",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
    ),
    # jnp.where of arrays by a scalar condition, and // of floats by a scalar, which
    # selects by divisor == 0 (GPU_WHERE_BROADCAST) ...
    "where-by-scalar": _scenario(
        "where-by-scalar",
        "jnp.where(pl.program_id(0) == 0, a_ref[...], -a_ref[...])",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
    ),
    "float-floordiv-scalar": _scenario(
        "float-floordiv-scalar",
        "a_ref[...] // 2.0",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
    ),
    # (the lowering rules' errors come in the order the value computes: the division
    # before the bitcast of its quotient, which GPU_BITCAST_WIDTH would refuse)
    "floordiv-then-bitcast": _scenario(
        "floordiv-then-bitcast",
        "lax.bitcast_convert_type(a_ref[...] // 2.0, jnp.int16)",
        ("int16", [256, 2]),
        ("float32", [256], "random"),
    ),
    # ... a remainder of float arrays (GPU_FLOAT_REM) ...
    "float-rem-arrays": _scenario(
        "float-rem-arrays",
        "a_ref[...] % b_ref[...]",
        ("bfloat16", [8, 128]),
        ("bfloat16", [8, 128], "random"),
        ("bfloat16", [8, 128], "random"),
    ),
    # ... but a condition that broadcasts (a row) lowers, and so do remainders of integers
    "where-by-row": _scenario(
        "where-by-row",
        "jnp.where(b_ref[...] > 0.0, a_ref[...] % 3, a_ref[...] // b_ref[...].astype(jnp.int32))",
        ("int32", [8, 128]),
        ("int32", [8, 128], "iota"),
        ("float32", [1, 128], "random"),
    ),
    # conversions (explicit or by promotion) as the dialect lowering makes them
    # (FragmentedArray.astype): an integer array to an 8-bit float (GPU_NARROW_FLOAT_CAST),
    # here int16 promoted to float8 for the addition ...
    "int-to-f8": _scenario(
        "int-to-f8",
        "a_ref[...] + b_ref[...]",
        ("float8_e5m2", [128]),
        ("float8_e5m2", [], 1.5),
        ("int16", [128], "iota"),
    ),
    # ... an 8-bit float to an integer: clamped to its range first, 8-bit arithmetic ...
    "f8-to-int16": _scenario(
        "f8-to-int16", "a_ref[...].astype(jnp.int16)", ("int16", [8, 128]), F8_ARRAY
    ),
    # ... unless both bounds are infinite in the float (folded): the conversion itself
    "f8-to-int32": _scenario(
        "f8-to-int32", "a_ref[...].astype(jnp.int32)", ("int32", [8, 128]), F8_ARRAY
    ),
    # ... to and from bfloat16 (the ptxas at hand converts 8-bit floats to float16) ...
    "f8-to-bf16": _scenario(
        "f8-to-bf16", "a_ref[...].astype(jnp.bfloat16)", ("bfloat16", [8, 128]), F8_ARRAY
    ),
    # ... but to float32 and from float16 they convert ...
    "f8-to-f32-to-f8": _scenario(
        "f8-to-f32-to-f8",
        "(a_ref[...].astype(jnp.float32) * 2.0).astype(jnp.float16).astype(jnp.float8_e5m2)",
        ("float8_e5m2", [8, 128]),
        F8_ARRAY,
    ),
    # ... one 8-bit float to the other: the lowering rule refuses it, scalars too ...
    "f8-to-f8": _scenario(
        "f8-to-f8", "a_ref[...].astype(jnp.float8_e4m3fn)", ("float8_e4m3fn", []), F8
    ),
    # ... numbers to booleans, fewer than 8 a register vector (GPU_CAST_BITWIDTH) ...
    "to-bool-small": _scenario(
        "to-bool-small",
        "a_ref[...].astype(jnp.bool).astype(jnp.int32)",
        ("int32", [8, 128]),
        ("float16", [8, 128], "random"),
    ),
    # ... but 8-bit numbers come 8 a vector
    "to-bool-bytes": _scenario(
        "to-bool-bytes",
        "a_ref[...].astype(jnp.bool).astype(jnp.int32)",
        ("int32", [8, 128]),
        ("int8", [8, 128], "iota"),
    ),
    # jnp.where selects between 8-bit vectors (8-bit arithmetic), by any condition
    "where-bytes": _scenario(
        "where-bytes",
        "jnp.where(a_ref[...] > 0.0, b_ref[...], -1).astype(jnp.int32)",
        ("int32", [8, 128]),
        ("float32", [8, 128], "random"),
        ("int8", [], 3),
    ),
    # a value's register vectors are its first load's or iota's (layout inference takes
    # the first's layout): a mask of bool and uint16 loads is stored whole bytes when the
    # bool load comes first ...
    "bool-store-first-load": _scenario(
        "bool-store-first-load",
        "a_ref[...] != b_ref[...]",
        ("bool", [8, 128]),
        ("bool", [8, 128], "random"),
        ("uint16", [8, 128], "iota"),
    ),
    # ... and not when an int32 iota comes first (the check said valid)
    "bool-store-iota-first": _scenario(
        "bool-store-iota-first",
        "lax.broadcasted_iota(jnp.int32, (8, 128), 0) > a_ref[...].astype(jnp.int32)",
        ("bool", [8, 128]),
        ("int8", [8, 128], "iota"),
    ),
    # ... and so for a conversion to booleans
    "to-bool-first-load": _scenario(
        "to-bool-first-load",
        "(a_ref[...].astype(jnp.int32) + b_ref[...]).astype(jnp.bool).astype(jnp.int32)",
        ("int32", [8, 128]),
        ("int8", [8, 128], "iota"),
        ("int32", [8, 128], "iota"),
    ),
    # a bitcast of a scalar: a 0-d vector, which JAX's lowering asserts against
    "bitcast-scalar": _scenario(
        "bitcast-scalar",
        "lax.bitcast_convert_type(a_ref[...], jnp.float32)",
        ("float32", []),
        ("int32", [], 7),
    ),
    # a reduction of a scalar: vector.shape_cast of a scalar fails verification
    "reduce-scalar": _scenario(
        "reduce-scalar",
        "jnp.max(pl.program_id(0)) + a_ref[...]",
        ("int32", []),
        ("int32", [], 7),
    ),
    # jnp.maximum of booleans: lax.max of booleans, which the lowering rule refuses
    "max-of-masks": _scenario(
        "max-of-masks",
        "jnp.maximum(a_ref[...] > 0.0, a_ref[...] < -1.0).astype(jnp.int32)",
        ("int32", [2, 128]),
        BOOL_SRC,
    ),
    # Python's float floor division by zero (its message is not the integers')
    "python-float-zero-division": _scenario(
        "python-float-zero-division",
        "a_ref[...] + (0.001 // 0)",
        ("float32", [8, 128]),
        ("float32", [8, 128], "random"),
    ),
    # an array broadcast along a dim after one it keeps: no register layout broadcasts it
    # (GPU_LAYOUT_INFERENCE, before the dialect lowering's float remainder) ...
    "inner-broadcast": _scenario(
        "inner-broadcast",
        "a_ref[...] % b_ref[...]",
        ("float16", [4, 8, 128]),
        ("float16", [4, 8, 128], "random"),
        ("float16", [4, 1, 128], "random"),
    ),
    # ... along leading dims it lowers ...
    "leading-broadcast": _scenario(
        "leading-broadcast",
        "a_ref[...] + b_ref[...] - c_ref[...]",
        ("float32", [4, 8, 128]),
        ("float32", [4, 8, 128], "random"),
        ("float32", [1, 1, 128], "random"),
        ("float32", [8, 128], "random"),
    ),
    # ... but a boolean load in a value that broadcasts takes the broadcast's layout, in
    # which its vectors hold less than a byte (GPU_BOOL_VECTOR)
    "bool-load-broadcast": _scenario(
        "bool-load-broadcast",
        "jnp.where(a_ref[...], b_ref[...], 0.0)",
        ("float32", [8, 128]),
        ("bool", [8, 128], "random"),
        ("float32", [128], "random"),
    ),
    # an integer times 0 is a constant once MLIR folds it, before layout inference: its
    # loads are dropped, and the store of 64 elements is a splat store (GPU_SPLAT_STORE,
    # not the load's GPU_LAYOUT_INFERENCE) ...
    "int-times-zero": _scenario(
        "int-times-zero",
        "(a_ref[...] * 0 + 1).astype(jnp.float32)",
        ("float32", [64]),
        ("int32", [64], "iota"),
    ),
    # ... not a float times 0.0 (NaN and inf), nor an iota (its layout is inferred)
    "float-times-zero": _scenario(
        "float-times-zero", "a_ref[...] * 0.0", ("float32", [64]), ("float32", [64], "random")
    ),
    # ... a Python 0 divided by integers folds too (divsi, remsi of 0): no 8-bit arithmetic
    # left of 0 // int8, and a folded part of a value leaves the rest's errors
    "zero-floordiv-bytes": _scenario(
        "zero-floordiv-bytes",
        "(0 // a_ref[...]) + (0 % a_ref[...])",
        ("int8", [256]),
        ("int8", [256], "iota"),
    ),
    "folded-part": _scenario(
        "folded-part",
        "(0 // a_ref[...]).astype(jnp.bfloat16) % a_ref[...].astype(jnp.bfloat16)",
        ("bfloat16", [256]),
        ("int8", [256], "iota"),
    ),
    # ... and integers modulo a Python 0 or 1: the 1-element load is gone (its layout
    # would fail) and the value is the iota's (fuzz_values seed 0, value-53)
    "rem-by-false-folds": _scenario(
        "rem-by-false-folds",
        "lax.broadcasted_iota(jnp.int32, (256,), 0) - (a_ref[...] // a_ref[...]) % (True >= 255)",
        ("int32", [256]),
        ("int8", [1], [3]),
    ),
    "iota-times-zero": _scenario(
        "iota-times-zero",
        "lax.broadcasted_iota(jnp.int32, (64,), 0) * 0",
        ("int32", [64]),
        ("float32", [64], "random"),
    ),
    # a store converts a weakly typed float (a Python number's type) to a float ref, as
    # it does an integer to an integer ref (ref_swap's _maybe_implicit_cast)
    "weak-float-into-f8": _scenario(
        "weak-float-into-f8",
        "jnp.where(a_ref[...], 1e30, a_ref[...])",
        ("float8_e4m3fn", []),
        ("int8", [], 3),
        interpret="gpu",
    ),
}


@pytest.mark.slow
def test_value_verdicts_are_jaxs():
    jax = answers(VERDICTS)
    # (each case is one JAX answers: what the test holds, lest a fix agree by accident)
    expected = {
        "weak-float": None,
        "weak-float-store": "SWAP_DTYPE_MISMATCH",
        "bitcast-bool-wider": "BITCAST_VALUE_SHAPE",
        "bitcast-bool-f8": "BITCAST_VALUE_BOOL",
        "compare-compares": None,
        "byte-scalar": None,
        "byte-equal": None,
        "iota-f8": "GPU_VERIFICATION",
        "fp8-times-bf16": "VALUE_FP8_PROMOTION",
        "fp8-where": "VALUE_FP8_PROMOTION",
        "fp8-int": "GPU_8BIT_ARITH",
        "where-by-scalar": "GPU_WHERE_BROADCAST",
        "float-floordiv-scalar": "GPU_WHERE_BROADCAST",
        "floordiv-then-bitcast": "GPU_WHERE_BROADCAST",
        "float-rem-arrays": "GPU_FLOAT_REM",
        "where-by-row": None,
        "bool-rem": None,
        "python-zero-division": "EXPR_ZERO_DIVISION",
        "negated-true": "SWAP_SHAPE_MISMATCH",
        "byte-arith-then-float-rem": "GPU_8BIT_ARITH",
        "where-scalar-shapes": "ADD_SHAPE_MISMATCH",
        "byte-true-div": None,
        "iota-f8-then-byte-arith": "GPU_8BIT_ARITH",
        "int-to-f8": "GPU_NARROW_FLOAT_CAST",
        "f8-to-int16": "GPU_8BIT_ARITH",
        "f8-to-int32": "GPU_NARROW_FLOAT_CAST",
        "f8-to-bf16": "GPU_FLOAT8_BF16_CAST",
        "f8-to-f32-to-f8": None,
        "f8-to-f8": "GPU_FLOAT8_CAST",
        "to-bool-small": "GPU_CAST_BITWIDTH",
        "to-bool-bytes": None,
        "where-bytes": "GPU_8BIT_ARITH",
        "bitcast-scalar": "GPU_SCALAR_BITCAST",
        "reduce-scalar": "GPU_VERIFICATION",
        "max-of-masks": "GPU_BOOL_MINMAX",
        "python-float-zero-division": "EXPR_ZERO_DIVISION",
        "inner-broadcast": "GPU_LAYOUT_INFERENCE",
        "leading-broadcast": None,
        "bool-load-broadcast": "GPU_BOOL_VECTOR",
        "int-times-zero": "GPU_SPLAT_STORE",
        "float-times-zero": "GPU_LAYOUT_INFERENCE",
        "iota-times-zero": "GPU_LAYOUT_INFERENCE",
        "weak-float-into-f8": None,
        "zero-floordiv-bytes": None,
        "folded-part": "GPU_FLOAT_REM",
        "rem-by-false-folds": None,
        "bool-store-first-load": None,
        "bool-store-iota-first": "GPU_BOOL_VECTOR",
        "to-bool-first-load": None,
    }
    assert {k: v["code"] if v["stage"] else None for k, v in jax.items()} == expected
    problems = []
    for name, d in VERDICTS.items():
        try:
            assert_agrees(d, _in_operand_order(jax[name], d))
        except AssertionError as e:
            problems.append(f"{name}: {e}")
    assert problems == []


@pytest.mark.parametrize("value", ["(2).astype(jnp.int8)", "(-1.5).astype(jnp.float32)"])
def test_a_python_number_has_no_astype(value):
    """JAX fails on it (an AttributeError at trace; ``2.astype`` does not even parse):
    not a value, where the check said valid."""
    assert not hasattr(2, "astype") and not hasattr(-1.5, "astype")
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario("lit", f"a_ref[...] + {value}", ("float32", [8]), BOOL_SRC))
    assert "call.programs[0].body[0].value" in str(e.value) and "no .astype" in str(e.value)


def _in_operand_order(jax: dict, d: dict) -> dict:
    """JAX's answer, a TypePromotionError's two dtypes named in the operands' order as
    the check names them (JAX names them in the order of a set of dtypes, which for
    ml_dtypes' dtypes changes from one process to the next)."""
    m = re.match(r"Input dtypes \('(\w+)', '(\w+)'\)", jax.get("message") or "")
    e = first_error(check(load_scenario(copy.deepcopy(d))))
    if not m or e is None or e.jax is None or not e.jax.message.startswith("Input dtypes"):
        return jax
    ours = re.match(r"Input dtypes \('(\w+)', '(\w+)'\)", e.jax.message)
    assert ours and sorted(ours.groups()) == sorted(m.groups()), (e.jax.message, jax)
    return {**jax, "message": e.jax.message[: ours.end()] + jax["message"][m.end() :]}
