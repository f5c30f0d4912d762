"""The simulator against JAX's CPU interpreters, bit for bit, wherever JAX runs.

All JAX runs happen in one warm child process (``mpmd_lab.probe.probe_many``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from mpmd_lab import gallery
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate
from simulate_support import interpretable_scenarios, run_in_jax, same_bits

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only


def _compare(scenarios, results, skip_errors: bool) -> list[str]:
    """Every disagreement between ``simulate`` and JAX, described."""
    problems = []
    compared = 0
    for s, got in zip(scenarios, results, strict=True):
        if isinstance(got, str):
            if skip_errors:
                continue
            problems.append(f"{s.name}: JAX failed: {got[-300:]}")
            continue
        # JAX's GPU interpreter gives pl.program_id 0 in every block (a GPU gives the
        # block's index, as the simulator does): compare such calls as the interpreter
        # runs them, with program_id="zero"; everything else is the same
        sim = simulate(s, check=False, program_id="zero" if _pid_bug(s) else "grid")
        if not sim.ok:
            problems.append(f"{s.name}: JAX ran, simulate failed: {sim.error}\n{s.to_json()}")
            continue
        # races inside one grid point run concurrently in JAX: any writer may win
        if any(r.first.actor.grid == r.second.actor.grid for r in sim.races):
            continue
        compared += 1
        if set(sim.outputs) != set(got):
            problems.append(f"{s.name}: outputs {sorted(sim.outputs)} vs JAX {sorted(got)}")
            continue
        for name, value in got.items():
            if not same_bits(sim.outputs[name], value, flushed=True):
                problems.append(
                    f"{s.name}: {name} differs\nsimulate: {sim.outputs[name]!r}\n"
                    f"jax:      {value!r}\nscenario: {s.to_json(indent=None)}"
                )
    if compared < max(1, len(scenarios) // 2):
        problems.append(f"only {compared} of {len(scenarios)} scenarios were compared")
    return problems


def _pid_bug(s) -> bool:
    """Whether JAX's GPU interpreter's pl.program_id (0 everywhere) matters here."""
    import math

    blocks = math.prod(s.call.programs[0].mesh.grid.values())
    return s.run.interpret == "gpu" and blocks > 1 and '"pid"' in s.to_json(indent=None)


RUNNABLE = ["two-block-copy", "transpose-view", "dup-ref-fixed", "two-block-race"]


def test_gallery_single_device_matches_jax():
    """Every single-device gallery scenario JAX's interpreter runs (bitcast and reshape
    under the HLO interpreter, which runs those views where the GPU one cannot)."""
    scenarios = []
    for name in gallery.names():
        s = gallery.load(name)
        if s.device_mesh is None:
            data = s.to_dict()
            data["run"]["detect_races"] = False
            if name in ("bitcast-view", "reshape-view"):
                data["run"]["interpret"] = "hlo"
            scenarios.append(load_scenario(data))
    results = run_in_jax(scenarios)
    ran = {s.name for s, r in zip(scenarios, results, strict=True) if not isinstance(r, str)}
    assert set(RUNNABLE) | {"bitcast-view", "reshape-view"} <= ran, results
    assert (
        _compare(
            [s for s in scenarios if s.name in ran],
            [r for r in results if not isinstance(r, str)],
            skip_errors=False,
        )
        == []
    )


def _generated(n: int) -> list:
    """``n`` varied scenarios from the strategy (hypothesis's own example search)."""
    batch: list = []

    @settings(
        max_examples=4 * n,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(interpretable_scenarios())
    def collect(d):
        batch.append(load_scenario({**d, "name": f"gen{len(batch)}"}))

    collect()
    return batch[::4][:n]  # hypothesis's first examples are its simplest: spread out


def test_generated_scenarios_match_jax():
    """Random scenarios (one device, or two local ones) through JAX: bit-identical outputs.

    Not shrunk (one child per batch); a failure prints the scenario's JSON.
    """
    scenarios = _generated(20)
    results = run_in_jax(scenarios)
    pairs = zip(scenarios, results, strict=True)
    failed = [(s.to_json(indent=None), r) for s, r in pairs if isinstance(r, str)]
    # the generator only builds calls JAX runs: a JAX error is a generator bug
    assert not failed, failed[:3]
    assert _compare(scenarios, results, skip_errors=False) == []


def _fills_and_same_names() -> list:
    """Issue 16's wrong answers: fill values past int32 (2**64 - 1, 2**63, 2**40, -2**31 - 1)
    into every dtype width, and an input buffer named like the output it is copied to."""
    out = []
    for value in (2**64 - 1, 2**63, 2**40, -(2**31) - 1, 2**32 + 7):
        outputs = {
            f"o_{dt}": {"shape": [128], "dtype": dt}
            for dt in ("int32", "uint32", "float32", "int8", "uint8", "int16", "bool", "float16")
        }
        body = [{"op": "fill", "dst": name, "value": value} for name in outputs]
        out.append(
            load_scenario(
                {
                    "name": f"fill-{value}",
                    "buffers": {},
                    "call": {"outputs": outputs, "programs": [{"mesh": {}, "body": body}]},
                    "run": {"interpret": "gpu", "detect_races": False},
                }
            )
        )
    out.append(
        load_scenario(
            {
                "name": "same-name",
                "buffers": {"out": {"shape": [256], "dtype": "float32", "init": "iota"}},
                "call": {
                    "args": [{"buffer": "out", "param": "x_ref"}],
                    "outputs": {"out": {"shape": [256], "dtype": "float32"}},
                    "programs": [
                        {"mesh": {}, "body": [{"op": "copy", "src": "x_ref", "dst": "out"}]}
                    ],
                },
                "run": {"interpret": "gpu", "detect_races": False},
            }
        )
    )
    return out


def test_issue_16_wrong_answers_now_match_jax():
    scenarios = _fills_and_same_names()
    results = run_in_jax(scenarios)
    assert _compare(scenarios, results, skip_errors=False) == []


def _subnormal_sum(dtype: str, bits: str) -> dict:
    """zeros + the integers 0..15 read as ``dtype`` (a (2, 8) bitcast: JAX fails a 1-D
    one): subnormal floats, whose sum a GPU keeps and XLA's CPU backend (JAX's
    interpreters) flushes to zero."""
    return {
        "name": f"subnormal-{dtype}",
        "buffers": {
            "z": {"shape": [2, 8], "dtype": dtype, "init": "zeros"},
            "i": {"shape": [2, 8], "dtype": bits, "init": "iota"},
        },
        "call": {
            "args": [{"buffer": "z", "param": "z_ref"}, {"buffer": "i", "param": "i_ref"}],
            "outputs": {"out": {"shape": [2, 8], "dtype": dtype}},
            "programs": [
                {
                    "mesh": {},
                    "body": [
                        {
                            "let": "tiny",
                            "ref": "i_ref",
                            "transforms": [{"op": "bitcast", "dtype": dtype}],
                        },
                        {"op": "add", "dst": "out", "lhs": "z_ref", "rhs": "tiny"},
                    ],
                }
            ],
        },
        "run": {"interpret": "hlo", "detect_races": False},
    }


def test_subnormals_agree_as_the_cpu_flushes_them():
    """The one difference of JAX's CPU interpreters the comparison allows: XLA's CPU
    backend flushes float32 and bfloat16 subnormals to zero (a random scenario of bitcast
    integers met it in about 1% of draws); nothing else is excused."""
    import numpy as np

    scenarios = [load_scenario(_subnormal_sum("float32", "uint32"))]
    scenarios.append(load_scenario(_subnormal_sum("bfloat16", "uint16")))
    results = run_in_jax(scenarios)
    for s, got in zip(scenarios, results, strict=True):
        assert not isinstance(got, str), got
        sim = simulate(s, check=False).outputs["out"]
        assert np.count_nonzero(sim.astype(np.float64)) == 15  # 1 .. 15: subnormals
        assert not np.asarray(got["out"]).astype(np.float64).any()  # flushed
        assert not same_bits(sim, got["out"]) and same_bits(sim, got["out"], flushed=True)
        assert not same_bits(got["out"], sim, flushed=True)  # a zero for a subnormal only
    assert _compare(scenarios, results, skip_errors=False) == []
