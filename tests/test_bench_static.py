"""`make bench`'s static section: each target compares the same question on both sides
(the rules against JAX's trace; the whole check against JAX's race-detecting run, on
the gallery scenarios JAX's GPU interpreter runs on a CPU)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.static_vs_jax import SPEEDUP_TARGET, WHOLE_TARGET, _least

ROOT = Path(__file__).resolve().parents[1]

#: which gallery scenarios the check says JAX's GPU interpreter runs, and whether JAX
#: did answer each (ran it, or its race detector stopped it), in a process of its own
#: with 8 CPU devices (as ``python -m bench`` has)
_PROBE = """
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
from bench.jaxcall import detect_races, module_of
from bench.static_vs_jax import interpreter_runs
from mpmd_lab import gallery
picked = [n for n in gallery.names() if interpreter_runs(gallery.load(n))]
print(json.dumps({n: detect_races(module_of(gallery.load(n))) for n in picked}))
"""


@pytest.mark.slow
def test_jax_answers_the_race_question_wherever_the_bench_asks_it():
    r = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    answered = json.loads(r.stdout.strip().splitlines()[-1])
    # the single-device kernels, with and without a race; no cross-device one
    assert {"two-block-race", "two-block-copy", "dup-ref-fixed"} <= set(answered)
    assert not {"ring-shift", "ring-all-gather", "cluster-exchange"} & set(answered)
    assert all(answered.values()), answered  # JAX ran every one it was asked about


def test_least_speed_up_is_missed_when_a_scenario_has_no_answer():
    ups = [(12.0, "a"), (SPEEDUP_TARGET + 0.5, "b")]
    met = _least(ups, "run / check", SPEEDUP_TARGET).to_json()
    assert met["ok"] is True and met["value"] == SPEEDUP_TARGET + 0.5
    assert "b; 2/2 at" in met["measure"]
    # one of three scenarios without JAX's answer: not met, whatever the other two say
    short = _least(ups, "run / check", SPEEDUP_TARGET, of=3).to_json()
    assert short["ok"] is False and "2/3 at" in short["measure"]
    assert _least([(9.0, "a")], "run / check", SPEEDUP_TARGET).to_json()["ok"] is False
    # the whole check against the trace: its own target
    whole = _least([(1.6, "a"), (1.4, "b")], "trace / whole check", WHOLE_TARGET).to_json()
    assert (
        whole["ok"] is False
        and whole["target"] == ">= 1.5x"
        and "1/2 at >= 1.5x" in whole["measure"]
    )
    nothing = _least([], "x", WHOLE_TARGET)
    assert nothing.value is not None and math.isnan(nothing.value)
