"""Random transform stacks: the static check's verdict and first code against real JAX.

Hypothesis draws scenarios whose body views one ref (SMEM / TMEM / GMEM scratch with
tiling and swizzle in either order, a GMEM argument, an output) through a stack of
``at`` / ``reshape`` / ``transpose`` (method and ``transpose_ref``) / ``bitcast`` steps
and uses it once (``tests/agreement_stacks.py``); one warm JAX worker traces and
GPU-lowers the exported call of the whole batch. A fixed seed set runs in ``make
test``; ``make fuzz`` (``HYPOTHESIS_PROFILE=long``) draws many more. Both print the
agreement rate at the end of the session. Each disagreement class found becomes a
regression case in ``tests/agreement/cases``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import agreement_stacks as A  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

FIXED_SEED = 18
FIXED_N = 60
#: verdict and first-code agreement on the fixed set, once issue 18's rules were in
#: (55 and 52 of 60 before them, at 513e66d); the rate must never fall below it
BASELINE_VERDICT = 60
BASELINE_CODE = 60


@pytest.fixture(scope="module")
def fixed() -> A.Tally:
    scenarios = A.draw_batch(FIXED_N, FIXED_SEED)
    assert len(scenarios) == FIXED_N
    tally = A.compare(scenarios)
    A.SUMMARY.append(f"[fixed seed set {FIXED_SEED}] " + tally.summary())
    return tally


def test_fixed_set_not_below_baseline(fixed: A.Tally) -> None:
    assert fixed.total == FIXED_N
    assert fixed.verdict >= BASELINE_VERDICT, fixed.classes()
    assert fixed.code >= BASELINE_CODE, fixed.classes()


def test_fixed_set_agrees_fully(fixed: A.Tally) -> None:
    misses = [(d["name"], m.code, j.code, (j.message or "")[:100]) for d, m, j in fixed.misses]
    assert not misses, misses


def test_layout_rules_close_the_fixed_set(fixed: A.Tally) -> None:
    """With ``mpmd_lab.layout_rules`` where they speak (``agreement_stacks.rules_verdict``,
    the estimate of the check issue 18 asks for), every fixed scenario agrees with JAX:
    the rules the lead's op classes will call are enough for this set."""
    left = [
        (d["name"], r.code, j.code, (j.message or "")[:100])
        for d, _m, j in fixed.rows
        if not A.same(r := A.rules_verdict(d), j)
    ]
    assert not left, left


def test_drawn_scenarios_are_scenarios() -> None:
    """The strategy draws what the loader accepts, and the check never raises on it."""
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.validate import check

    for d in A.draw_batch(60, 7):
        check(load_scenario(d))


@pytest.mark.fuzz
def test_fuzz_agreement() -> None:
    """Many more stacks (``make fuzz``: the long profile's max_examples), a fresh seed
    each run; the rate is printed, every miss written to test-artifacts/ (each class of
    them is a regression case to add)."""
    from hypothesis import settings

    long = os.environ.get("HYPOTHESIS_PROFILE") == "long"
    n = settings().max_examples if long else 8
    seed = int(os.environ.get("AGREEMENT_SEED", random.randrange(2**31)))
    tally = A.Tally()
    scenarios = A.draw_batch(n, seed)
    for i in range(0, len(scenarios), 100):
        A.compare(scenarios[i : i + 100], tally)
    A.SUMMARY.append(f"[fuzz seed {seed}] " + tally.summary())
    for (mine, jax), count in list(tally.classes().items())[:15]:
        A.SUMMARY.append(f"    {count:4d}  check {mine}  JAX {jax}")
    out = Path(__file__).resolve().parents[1] / "test-artifacts"
    out.mkdir(exist_ok=True)
    misses = [{"scenario": d, "check": m.__dict__, "jax": j.__dict__} for d, m, j in tally.misses]
    (out / "agreement-misses.json").write_text(json.dumps(misses, indent=1))
    assert tally.total == len(scenarios)
