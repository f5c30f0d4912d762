"""Record real JAX's outcome for every regression case: ``python tests/agreement/capture.py``.

Writes ``tests/agreement/cases/NAME.json``: the scenario, the stages asked, and under
``jax`` what JAX did (``ok``, ``stage``, ``type``, ``message`` exactly as ``str(e)`` of the
innermost error, ``code`` as ``mpmd_lab.catalogue.classify`` names it, and ``stable``:
the part of the message that does not change from run to run). Also records whether
today's static check agrees (``check_agrees``), which the test turns into an
``xfail(strict=True)`` mark. Run it again after a JAX upgrade; never edit ``jax`` by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from agreement_support import hold, run_jax  # noqa: E402
from cases import CASES, case_scenarios  # noqa: E402


def main(names: list[str]) -> int:
    scenarios = case_scenarios()
    (HERE / "cases").mkdir(exist_ok=True)
    for name, (_d, stages, detect, expect, note) in CASES.items():
        if names and name not in names:
            continue
        d = scenarios[name]
        record = {
            "case": name,
            "note": note,
            "expect": expect,
            "stages": list(stages),
            "detect_races": detect,
            "scenario": d,
        }
        record["jax"] = run_jax(d, stages, detect) if stages else None
        problems = hold(record)
        record["check_agrees"] = not problems
        record["check_problems"] = problems
        path = HERE / "cases" / f"{name}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        j = record["jax"] or {}
        print(
            f"{name}: JAX {j.get('stage') or 'ok'} {j.get('code') or ''} "
            f"{(j.get('message') or '')[:70]!r}; check {'agrees' if not problems else problems}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
