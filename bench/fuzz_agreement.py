"""Fuzz: random scenarios, static check against real JAX (build, trace, GPU lowering).

Run ``python bench/fuzz_agreement.py [SEED] [N]`` (default 0, 200). Prints each
disagreement (the static first JAX-visible code, JAX's code, JAX's message and the
scenario) and the agreement count. Slow (about a second per 2-3 scenarios on a CPU),
so it lives outside the test suite; ``tests/test_validate_agreement.py`` runs a sample.

``python -m bench.fuzz_agreement --stacks [SEED] [N]`` (default 0, 500) draws transform
stacks instead (``tests/agreement_stacks.py``: SMEM / TMEM / GMEM scratch, tiling and
swizzle, views in any order) and prints the verdict and first-code agreement rates and
the disagreement classes (static code, JAX code) with a count and one example each.
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


def stacks(seed: int = 0, n: int = 500) -> int:
    """The transform-stack property (issue 18) on ``n`` drawn scenarios: rates and classes."""
    import agreement_stacks as A

    scenarios = A.draw_batch(n, seed)
    tally = A.Tally()
    for i in range(0, len(scenarios), 100):
        A.compare(scenarios[i : i + 100], tally)
    print(tally.summary())
    rules = sum(A.same(A.rules_verdict(d), j) for d, _m, j in tally.rows)
    verdicts = sum((A.rules_verdict(d).code is None) == (j.code is None) for d, _m, j in tally.rows)
    print(
        f"with mpmd_lab.layout_rules on top (an estimate): verdict {verdicts}/{tally.total} "
        f"({100 * verdicts / max(tally.total, 1):.1f} %), first code {rules}/{tally.total} "
        f"({100 * rules / max(tally.total, 1):.1f} %)"
    )
    left: dict = {}
    for d, _m, j in tally.rows:
        r = A.rules_verdict(d)
        if not A.same(r, j):
            left.setdefault((r.code, j.code, (j.message or "")[:60]), []).append(d)
    for (mine, theirs, msg), ds in sorted(left.items(), key=lambda kv: -len(kv[1]))[:25]:
        print(f"   left {len(ds):4d}  rules {mine}  JAX {theirs}: {msg!r}")
    examples = {}
    for d, mine, jax in tally.misses:
        examples.setdefault((mine.code, jax.code), (d, jax))
    for key, count in tally.classes().items():
        d, jax = examples[key]
        said = (jax.message or "")[:110]
        print(f"{count:5d}  check {key[0]}  JAX {key[1]} at {jax.stage}: {said!r}")
        body = d["call"]["programs"][0]["body"]
        print(f"         scratch {json.dumps(d['call']['scratch'])} body {json.dumps(body)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stacks"]:
        sys.exit(stacks(*[int(a) for a in sys.argv[2:4]]))
    args = [int(a) for a in sys.argv[1:3]]
    sys.exit(main(*args))
