"""Issue 18's regression cases: the static check held to JAX's recorded outcome.

Each ``tests/agreement/cases/NAME.json`` holds a small scenario and what real JAX did
with it (captured by ``tests/agreement/capture.py``, never typed by hand). A case today's
check gets wrong is ``xfail(strict=True)``: it turns into a failure the day the rule is
fixed, and its mark goes (re-run the capture script: it records ``check_agrees``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "agreement"
sys.path.insert(0, str(HERE))
from agreement_support import hold, run_jax  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

CASES = sorted((HERE / "cases").glob("*.json"))
RECORDS = {p.stem: json.loads(p.read_text()) for p in CASES}


def _param(name: str):
    r = RECORDS[name]
    if r["check_agrees"]:
        return pytest.param(name, id=name)
    reason = f"{r['note']}: " + "; ".join(r["check_problems"])
    return pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=reason[:400]))


def test_every_case_is_recorded():
    from cases import CASES as DEFINED  # noqa: PLC0415

    assert sorted(DEFINED) == sorted(RECORDS), "run tests/agreement/capture.py"
    for name, r in RECORDS.items():
        assert r["scenario"]["name"] == name
        assert r["expect"] in ("jax", "race", "schema")


@pytest.mark.parametrize("name", [_param(n) for n in sorted(RECORDS)])
def test_check_says_what_jax_says(name: str) -> None:
    assert hold(RECORDS[name]) == []


def test_records_are_what_jax_does_today() -> None:
    """Every record re-made by real JAX (one warm worker per device count): the same
    stage, exception type, code and message (its run-independent part)."""
    drift = []
    for name, r in RECORDS.items():
        if not r["stages"]:
            continue
        now = run_jax(r["scenario"], r["stages"], r["detect_races"])
        was = r["jax"]
        keys = ("ok", "stage", "type", "code", "stable")
        if {k: now.get(k) for k in keys} != {k: was.get(k) for k in keys}:
            drift.append(
                (name, {k: (was.get(k), now.get(k)) for k in keys if was.get(k) != now.get(k)})
            )
        elif was["ok"] and was.get("outputs") != now.get("outputs"):
            drift.append((name, "outputs"))
    assert not drift, drift
