"""Check every card's example against real JAX, and record what JAX printed.

``run_examples()`` runs each ``examples/<CODE>.json`` (and ``.fixed.json``) through the
stages its card names, in a few child processes; ``problems()`` lists where JAX does not
do what the card says. ``python -m mpmd_lab.knowledge.verify [--record PY ...]`` prints
the problems, and with ``--record`` rewrites ``recorded.json`` from each interpreter
given (``--record .venv/bin/python /tmp/jax0112/bin/python``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

from mpmd_lab import catalogue
from mpmd_lab.knowledge import RECORDED, card, codes
from mpmd_lab.knowledge.jaxrun import Outcome, run_many
from mpmd_lab.scenario import Scenario, load_scenario

BUILD_TRACE_LOWER = ("build", "trace", "gpu-lower")
BUILD_TRACE_INTERPRET = ("build", "trace", "interpret")


def example_scenarios() -> tuple[dict[str, Scenario], dict[str, tuple[str, ...]]]:
    """Every example scenario by key (``CODE`` and ``CODE.fixed``), and its stages."""
    scenarios: dict[str, Scenario] = {}
    stages: dict[str, tuple[str, ...]] = {}
    for code in codes():
        ex = card(code).example
        if ex is None:
            continue
        st = BUILD_TRACE_INTERPRET if ex.stage == "interpret" else BUILD_TRACE_LOWER
        for key, path in ((code, ex.scenario), (f"{code}.fixed", ex.fixed)):
            if path:
                scenarios[key] = load_scenario(_root() / path)
                stages[key] = st
    return scenarios, stages


def _root():
    from mpmd_lab.knowledge import HERE

    return HERE.parents[1]


def run_examples(python: str | None = None, timeout: float = 900) -> dict[str, Outcome]:
    """What real JAX does with every example (``python``: another interpreter)."""
    scenarios, stages = example_scenarios()
    return run_many(scenarios, stages=stages, python=python, timeout=timeout)


def _said(o: Outcome) -> str:
    return "accepted" if o.ok else f"{o.code()} ({o.type}) at {o.stage}: {o.message[:200]}"


def problems(
    outcomes: dict[str, Outcome], accept_missing: frozenset[str] = frozenset()
) -> list[str]:
    """Where JAX disagrees with the cards (empty: every example does what its card says).

    ``accept_missing``: codes whose "before" example this JAX version accepts (as the
    card's version notes say); those are checked to be accepted instead.
    """
    out = []
    for code in codes():
        ex = card(code).example
        if ex is None:
            continue
        o = outcomes[code]
        if ex.jax == "accepted" or code in accept_missing:
            if not o.ok:
                out.append(f"{code}: expected JAX to accept it, got {_said(o)}")
        elif o.ok or (o.stage, o.code()) != (ex.stage, ex.jax):
            out.append(f"{code}: expected {ex.jax} at {ex.stage}, got {_said(o)}")
        fixed = outcomes.get(f"{code}.fixed")
        if fixed is not None and not fixed.ok:
            out.append(f"{code}.fixed: expected JAX to accept it, got {_said(fixed)}")
    return out


def jax_version(python: str | None) -> str:
    cmd = [python or sys.executable, "-c", "import jax; print(jax.__version__)"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def record(pythons: list[str | None]) -> dict[str, dict[str, object]]:
    """``{code: {jax_version: {stage, type, message[, wrapped_in]} | None}}`` for every
    card example, one entry per interpreter (None: JAX accepted it)."""
    data: dict[str, dict[str, object]] = {}
    for py in pythons:
        version = jax_version(py)
        for key, o in sorted(run_examples(py).items()):
            if "." in key:
                continue
            entry = data.setdefault(key, {})
            if o.ok:
                entry[version] = None
                continue
            t, m = catalogue.unwrap(o.type, o.message)
            m = re.sub(r"/\S*/site-packages/", "<site-packages>/", m)
            m = re.sub(r" at 0x[0-9a-f]+", "", m)
            r: dict[str, str] = {"stage": o.stage or "", "type": t, "message": m}
            if t != o.type:
                r["wrapped_in"] = o.type
            entry[version] = r
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--record", nargs="+", metavar="PYTHON", help="rewrite recorded.json")
    args = p.parse_args(argv)
    if args.record:
        data = record(args.record)
        RECORDED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(data)} examples -> {RECORDED}")
        return 0
    found = problems(run_examples())
    print("\n".join(found) or "every example does what its card says")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
