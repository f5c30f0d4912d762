"""Fuzz: random scenarios, static check against real JAX (build, trace, GPU lowering).

Run ``python bench/fuzz_agreement.py [SEED] [N]`` (default 0, 200). Prints each
disagreement (the static first JAX-visible code, JAX's code, JAX's message and the
scenario) and the agreement count. Slow (about a second per 2-3 scenarios on a CPU),
so it lives outside the test suite; ``tests/test_validate_agreement.py`` runs a sample.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from jaxprobe import probe_many  # noqa: E402
from mpmd_lab.catalogue import BY_CODE  # noqa: E402
from mpmd_lab.scenario import ScenarioError, load_scenario  # noqa: E402
from mpmd_lab.validate import check  # noqa: E402
from scenario_gen import gen  # noqa: E402


def main(seed: int = 0, n: int = 200) -> int:
    rng = random.Random(seed)
    scenarios = []
    while len(scenarios) < n:
        d = gen(rng, len(scenarios))
        try:
            load_scenario(d)
        except ScenarioError:
            continue
        scenarios.append(d)
    results = probe_many(scenarios, stages=("build", "trace", "gpu-lower"))
    agree = 0
    for d, r in zip(scenarios, results, strict=True):
        diags = check(load_scenario(d))
        first = next(
            (
                x.code
                for x in diags
                if x.is_error
                and x.stage in ("schema", "build", "trace", "gpu-lower")
                and (x.code in BY_CODE or x.code == "CODEGEN")
            ),
            None,
        )
        if r.get("stage") == "probe":
            theirs = "CODEGEN"
        elif r.get("stage"):
            theirs = r.get("code") or f"unknown {r.get('type')}"
        else:
            theirs = None
        if first == theirs:
            agree += 1
            continue
        print(f"{d['name']}: static {first}, JAX {theirs}: {(r.get('message') or '')[:160]}")
        print("   ", json.dumps(d))
    print(f"agree {agree} of {n}")
    return 0 if agree == n else 1


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    sys.exit(main(*args))
