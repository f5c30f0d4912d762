"""``compute {dst, value}``: values computed in registers, held against real JAX.

The simulator against JAX's CPU interpreters bit for bit (one warm worker for all),
the check's shape and dtype rules against JAX's trace (its exception types and exact
messages), the grammar's refusals as schema errors, the export and the graph.
"""

from __future__ import annotations

import pytest
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error
from simulate_support import run_in_jax, same_bits

N = 256


def _scenario(
    name: str,
    value: str,
    out: str = "float32",
    dtypes: tuple[str, ...] = ("float32", "float32"),
    shapes: tuple[list[int], ...] | None = None,
    out_shape: list[int] | None = None,
    interpret: str = "gpu",
    body: list[dict] | None = None,
) -> dict:
    shapes = shapes or tuple([N] for _ in dtypes)
    names = "abcd"[: len(dtypes)]
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": {
            n: {"shape": s, "dtype": d, "init": "random", "seed": i}
            for i, (n, d, s) in enumerate(zip(names, dtypes, shapes, strict=True))
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": n, "param": f"{n}_ref"} for n in names],
            "outputs": {"o": {"shape": out_shape or [N], "dtype": out}},
            "programs": [
                {
                    "mesh": {"grid": {"blocks": 1}, "cluster": {}, "threads": None},
                    "body": body or [{"op": "compute", "dst": "o", "value": value}],
                }
            ],
        },
        "run": {"interpret": interpret, "detect_races": False},
    }


#: (name, value, output dtype, input dtypes): what kernels compute between load and store
CASES = [
    ("axpy", "a_ref[...] + b_ref[...] * 2.0", "float32", ("float32", "float32")),
    ("sub-div", "(a_ref[...] - 1.0) / b_ref[...]", "float32", ("float32", "float32")),
    ("neg-max-min", "jnp.maximum(-a_ref[...], jnp.minimum(b_ref[...], 0.5))", "float32",
     ("float32", "float32")),
    ("where-cmp", "jnp.where(a_ref[...] > b_ref[...], a_ref[...], b_ref[...] * 0.25)",
     "float32", ("float32", "float32")),
    ("bf16", "a_ref[...] * b_ref[...] + 1.5", "bfloat16", ("bfloat16", "bfloat16")),
    ("f16-promote", "a_ref[...] + b_ref[...]", "float32", ("float16", "float32")),
    ("cast-int", "(a_ref[...] * 10.0).astype(jnp.int32) // 3 % 5", "int32",
     ("float32", "float32")),
    ("int-true-div", "(a_ref[...] * 7.0).astype(jnp.int32) / 2", "float32",
     ("float32", "float32")),
    ("iota", "lax.broadcasted_iota(jnp.int32, (256,), 0).astype(jnp.float32) * a_ref[...]",
     "float32", ("float32", "float32")),
    ("cmp-cast", "(a_ref[...] < 0.0).astype(jnp.float32) + (b_ref[...] >= 0.1).astype("
     "jnp.float32)", "float32", ("float32", "float32")),
    ("float-floordiv-mod", "a_ref[...] * 9.0 // 2.0 + b_ref[...] % 0.75", "float32",
     ("float32", "float32")),
    ("bitcast", "lax.bitcast_convert_type(a_ref[...], jnp.int32) % 1000", "int32",
     ("float32", "float32")),
    ("bitcast-back", "lax.bitcast_convert_type(lax.bitcast_convert_type(a_ref[...], jnp.int32) "
     "+ 1, jnp.float32) - b_ref[...]", "float32", ("float32", "float32")),
]  # fmt: skip


def _cases(interpret: str) -> list:
    out = [
        load_scenario(_scenario(f"{n}-{interpret}", v, o, d, interpret=interpret))
        for n, v, o, d in CASES
    ]
    # a scalar load (a rank-0 ref) broadcast over a vector, and a 2-D iota along dim 1
    out.append(
        load_scenario(
            _scenario(
                f"scalar-{interpret}",
                "jnp.maximum(a_ref[...] * b_ref[...], b_ref[...])",
                shapes=([8, 128], []),
                out_shape=[8, 128],
                interpret=interpret,
            )
        )
    )
    out.append(
        load_scenario(
            _scenario(
                f"iota2d-{interpret}",
                "lax.broadcasted_iota(jnp.float32, (8, 128), 1) - a_ref[...]",
                shapes=([8, 128], [8, 128]),
                out_shape=[8, 128],
                interpret=interpret,
            )
        )
    )
    return out


@pytest.mark.slow
def test_compute_simulates_bit_for_bit_as_jax_interprets_it():
    scenarios = _cases("gpu") + _cases("hlo")
    for s in scenarios:
        # (float // and % run in the interpreters; Mosaic GPU lowers neither: GPU_FLOAT_REM,
        # GPU_WHERE_BROADCAST)
        d = first_error(check(s))
        assert d is None or d.stage == "gpu-lower", (s.name, [d.one_line() for d in check(s)])
    results = run_in_jax(scenarios)
    problems = []
    for s, got in zip(scenarios, results, strict=True):
        assert not isinstance(got, str), f"{s.name}: JAX failed: {got}"
        sim = simulate(s, check=False)
        assert sim.ok, (s.name, sim.error)
        if not same_bits(sim.outputs["o"], got["o"], flushed=True):
            problems.append(f"{s.name}: simulate {sim.outputs['o'][:4]} jax {got['o'][:4]}")
    assert problems == []


def test_values_read_where_the_kernel_runs():
    """Axis indices in a value (a bare axis name, ``lax.axis_index``), on 2 devices,
    against JAX's GPU interpreter; an unknown name is JAX's UNBOUND_AXIS at the value."""
    values = [
        "a_ref[...] + dev",
        "jnp.where(lax.axis_index('dev') == 0, a_ref[...], -b_ref[...])",
        "(a_ref[...] * (dev + 1)).astype(jnp.int32) % 4",
    ]
    scenarios = []
    for i, v in enumerate(values):
        data = _scenario(f"index-{i}", v, "int32" if "int32" in v else "float32")
        data["device_mesh"] = {"dev": 2}
        scenarios.append(load_scenario(data))
    for s, got in zip(scenarios, run_in_jax(scenarios), strict=True):
        # (a jnp.where by a scalar condition runs in the interpreters; Mosaic GPU does not
        # lower it: GPU_WHERE_BROADCAST)
        d = first_error(check(s))
        assert d is None or d.stage == "gpu-lower", [d.one_line() for d in check(s)]
        assert not isinstance(got, str), got
        sim = simulate(s, check=False)
        assert sim.ok and same_bits(sim.outputs["o"], got["o"], flushed=True), s.name
    d = first_error(check(load_scenario(_scenario("unbound", "a_ref[...] + foo"))))
    assert d is not None and d.code == "UNBOUND_AXIS", d
    assert d.path == "call.programs[0].body[0].value"


def test_where_xlas_cpu_backend_fuses_the_simulator_rounds_each_step():
    """XLA's CPU backend contracts ``a * b + c`` into one fused multiply-add and divides
    by a constant as a multiplication by its reciprocal; the simulator rounds each step
    as the value is written (a product, then a sum; an IEEE division), so on these two
    shapes of value it differs from the CPU interpreter (on a fused ``a * b + c`` after a
    cancellation, by many ulps)."""
    import numpy as np
    from mpmd_lab.memory import host_value

    scenarios = [
        load_scenario(_scenario("fma", "a_ref[...] * b_ref[...] + 1.0")),
        load_scenario(_scenario("recip", "a_ref[...] / 3.0")),
    ]
    for s, got in zip(scenarios, run_in_jax(scenarios), strict=True):
        sim = simulate(s, check=False).outputs["o"]
        a, b = (host_value(s.buffers[n], 1) for n in "ab")
        steps = a * b + np.float32(1.0) if s.name == "fma" else a / np.float32(3.0)
        assert np.array_equal(sim, steps)
        if s.name == "fma":  # one rounding of the exact a * b + 1 (exact in float64)
            fused = (a.astype(np.float64) * b + 1.0).astype(np.float32)
        else:
            fused = a * np.float32(1 / 3)
        assert np.array_equal(got["o"], fused) and not np.array_equal(got["o"], steps)


#: (name, value, output dtype, input dtypes, shapes) the check rejects as JAX does
ERRORS = [
    ("mul-same-rank", "a_ref[...] * b_ref[...]", "float32", ("float32", "float32"),
     ([256], [128])),
    ("sub-ranks", "a_ref[...] - b_ref[...]", "float32", ("float32", "float32"),
     ([256], [2, 128])),
    ("where-shapes", "jnp.where(a_ref[...] > 0.0, a_ref[...], b_ref[...])", "float32",
     ("float32", "float32"), ([256], [128])),
    ("int-floordiv", "a_ref[...] // b_ref[...]", "int32", ("int32", "int32"), ([256], [128])),
    ("store-dtype", "a_ref[...] * 2.0", "int32", ("int32", "int32"), ([256], [256])),
    ("store-shape", "a_ref[...] + 1.0", "float32", ("float32", "float32"), ([128], [128])),
    ("neg-bool", "-(a_ref[...] > 0.0)", "bool", ("float32", "float32"), ([256], [256])),
    ("sub-bool", "(a_ref[...] > 0.0) - (b_ref[...] > 0.0)", "bool", ("float32", "float32"),
     ([256], [256])),
    ("bitcast-bool", "lax.bitcast_convert_type(a_ref[...] > 0.0, jnp.int8)", "int8",
     ("float32", "float32"), ([256], [256])),
    ("bitcast-wider", "lax.bitcast_convert_type(a_ref[...], jnp.float32)", "float32",
     ("int16", "int16"), ([256], [256])),
]  # fmt: skip


def test_value_errors_are_jaxs_own():
    """Each broken value: the check's first error is JAX's (code, type, exact message),
    at the value's field path."""
    from mpmd_lab import probe

    scenarios = [load_scenario(_scenario(n, v, o, d, shapes=sh)) for n, v, o, d, sh in ERRORS]
    results = probe.probe_many(scenarios, ("build", "trace"), timeout=120)
    for s, r in zip(scenarios, results, strict=True):
        d = first_error(check(s))
        assert d is not None and not r.ok, (s.name, r)
        assert d.jax is not None, d.one_line()
        assert (d.code, d.jax.type) == (r.code, r.error_type), (s.name, d.one_line(), r)
        # (JAX lists the dtypes a primitive accepts in no fixed order)
        head = d.jax.message.split(" Accepted dtypes")[0].rstrip()
        assert r.message.startswith(head), (s.name, d.jax.message, r.message)
        assert d.path.startswith("call.programs[0].body[0]"), d.path


@pytest.mark.parametrize(
    "value",
    [
        "a_ref[...] + 1j",  # a complex literal
        "np.sin(a_ref[...])",
        "a_ref[0]",
        "a_ref[...].astype(jnp.complex64)",
        "lax.broadcasted_iota(jnp.int32, (4,), 1)",
        "a_ref[...] if 1 else 2",
        "1 < a_ref[...] < 2",
        "__import__('os')",
    ],
)
def test_values_outside_the_grammar_are_not_a_scenario(value):
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario("bad", value))
    assert "call.programs[0].body[0].value" in str(e.value)


def test_compute_is_exported_drawn_and_raced():
    from mpmd_lab import codegen, graph

    body = [
        {"let": "lo", "ref": "o", "transforms": [{"op": "at", "index": [[0, 128]]}]},
        {"let": "alo", "ref": "a_ref", "transforms": [{"op": "at", "index": [[0, 128]]}]},
        {"op": "compute", "dst": "lo", "value": "jnp.maximum(alo[...], 0.0) * b_ref[...]"},
    ]
    s = load_scenario(_scenario("drawn", "", shapes=([N], [128]), body=body))
    assert check(s) == [] or first_error(check(s)) is None
    src = codegen.generate(s)
    assert "lo[...] = jnp.maximum(alo[...], 0.0) * b_ref[...]" in src
    g = graph.build_graph(s)
    kinds = [k for _, _, k in g.edges(data="kind")]
    assert kinds.count("reads") == 2 and kinds.count("writes") == 1, kinds


def test_a_bitcast_changes_width_as_jax_types_it_and_lowers_only_within_one_width():
    """``lax.bitcast_convert_type``: float32 -> int16 adds a minor dim of 2 (JAX's rule),
    int16 pairs -> float32 drop it; both trace, and Mosaic GPU lowers neither
    (GPU_BITCAST_WIDTH, JAX's message), while float32 -> int32 lowers."""
    from mpmd_lab import probe

    cases = [
        _scenario("wider-to-narrow", "lax.bitcast_convert_type(a_ref[...], jnp.int16)", "int16",
                  ("float32",), shapes=([256],), out_shape=[256, 2]),
        _scenario("pairs-to-wide", "lax.bitcast_convert_type(a_ref[...], jnp.float32)",
                  "float32", ("int16",), shapes=([256, 2],), out_shape=[256]),
        _scenario("same-width", "lax.bitcast_convert_type(a_ref[...], jnp.int32)", "int32",
                  ("float32",), shapes=([256],), out_shape=[256]),
        _scenario("same-width-16", "lax.bitcast_convert_type(a_ref[...], jnp.int16)", "int16",
                  ("bfloat16",), shapes=([8, 128],), out_shape=[8, 128]),
        _scenario("same-width-8", "lax.bitcast_convert_type(a_ref[...], jnp.uint8)", "uint8",
                  ("int8",), shapes=([256],), out_shape=[256]),
    ]  # fmt: skip
    scenarios = [load_scenario(c) for c in cases]
    got = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    for s, r in zip(scenarios, got, strict=True):
        d = first_error(check(s))
        if s.name.startswith("same-width"):
            assert d is None and r.ok, (d, r)
            continue
        assert d is not None and d.code == "GPU_BITCAST_WIDTH" == r.code, (s.name, d, r)
        assert (d.stage, d.jax.type, d.jax.message) == (r.stage, r.error_type, r.message)
