"""A deterministic cost of the check: bytecode instructions per gallery scenario.

Times on a shared machine move by tens of percent with its load; the number of Python
bytecode instructions a check executes does not (Python 3.12's ``sys.monitoring``
INSTRUCTION events, counted while the check runs; the scenario's load is not counted).
Each scenario is checked once first, so what a process does once (imports, the
catalogue, compiled patterns) is not counted, then a freshly loaded copy is checked
with ``validate.analyze(timings=..., clock=count)``: the instructions of each stage.

A row holds ``rules`` (resolve, build, trace, lower, runtime and interp: what JAX's
trace and lowering answer), ``sync`` (the race check), ``fixes`` (each proposed fix
checked again) and ``whole`` (all of it), each of a first check (no candidate fix
checked before: ``fixes.clear_cache()``); ``fixes_again`` is the fixes' part when the
same scenario is checked again (its candidates' checks are kept by content), not
guarded. ``bench/icount.json`` keeps the committed
figures; ``tests/test_icount.py`` fails when a scenario's rules or whole check grows
more than ``TOLERANCE`` over them.

    python -m bench.icount            # print the counts against bench/icount.json
    python -m bench.icount --write    # commit new figures (after an intended change)
    python -m bench.icount --phases   # where each whole check goes (not guarded)

``--phases`` splits a first check finer: ``compile`` (the plan), ``rules`` (the other
rule stages), ``sync`` (the race check), ``offer`` (the fixes' own work: proposing,
applying and judging candidates) and ``recheck`` (the candidates' checks, ``checks`` of
them: each distinct candidate's rules and race check); then ``apply``: applying the
first offered fix as the Lab does (``Session.apply_fix``: the fix applied, the new
scenario checked with its own fixes), right after that check.

What runs in C is not counted: pydantic-core's validation (``apply_fix`` validates
each candidate), ``json``, the builtins; a change that moves work from bytecode into
such a call is not made cheaper by this count alone, and ``make bench`` times it.

Counts are taken with ``PYTHONHASHSEED=0`` (a child process when the seed differs), so
set and dict orders, and with them the counts, are the same every run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

FIGURES = Path(__file__).resolve().parent / "icount.json"
#: how much a count may grow over the committed figure before the guard fails
TOLERANCE = 0.15
RULES = ("compile", "build", "trace", "lower", "runtime", "interp")


class Counter:
    """Counts the bytecode instructions executed while enabled (``sys.monitoring``)."""

    def __init__(self) -> None:
        self.n = 0
        self.tool = sys.monitoring.PROFILER_ID

    def _tick(self, code: object, offset: int) -> None:
        self.n += 1

    def __call__(self) -> float:
        return float(self.n)

    def __enter__(self) -> Counter:
        mon = sys.monitoring
        mon.use_tool_id(self.tool, "mpmd-lab icount")
        mon.register_callback(self.tool, mon.events.INSTRUCTION, self._tick)
        mon.set_events(self.tool, mon.events.INSTRUCTION)
        return self

    def __exit__(self, *exc: object) -> None:
        mon = sys.monitoring
        mon.set_events(self.tool, 0)
        mon.register_callback(self.tool, mon.events.INSTRUCTION, None)
        mon.free_tool_id(self.tool)


def count(name: str) -> dict[str, int]:
    """One gallery scenario's instructions per part of a whole check."""
    from mpmd_lab import fixes, gallery
    from mpmd_lab.validate import analyze

    analyze(gallery.load(name))  # once per process: imports, the catalogue, patterns
    fixes.clear_cache()  # (a first check: no candidate checked before)
    stages: dict[str, float] = {}
    with Counter() as clock:
        analyze(gallery.load(name), timings=stages, clock=clock)
    row = {k: int(v) for k, v in stages.items()}
    out = {
        "rules": sum(row.get(k, 0) for k in RULES),
        "sync": row.get("sync", 0),
        "fixes": row.get("fixes", 0),
    }
    out["whole"] = out["rules"] + out["sync"] + out["fixes"]
    again: dict[str, float] = {}  # the same content checked again (the Lab, check --fix)
    with Counter() as clock:
        analyze(gallery.load(name), timings=again, clock=clock)
    out["fixes_again"] = int(again.get("fixes", 0))
    return out


#: the columns of ``--phases``, in order
PHASES = ("compile", "rules", "sync", "offer", "recheck", "checks", "whole", "apply")
#: what ``--phases`` splits ``recheck`` into (the candidates' plans, other rules and race
#: checks; the rest of ``recheck`` is validating and keeping them)
RECHECK = ("recheck_compile", "recheck_rules", "recheck_sync")


def phases(name: str) -> dict[str, int]:
    """One gallery scenario's instructions per phase of a first whole check, and of
    applying its first offered fix right after (``PHASES``; ``apply`` -1 when nothing
    has a fix)."""
    from mpmd_lab import fixes, gallery, recheck
    from mpmd_lab.session import Session
    from mpmd_lab.validate import analyze

    analyze(gallery.load(name))  # once per process: imports, the catalogue, patterns
    fixes.clear_cache()
    stages: dict[str, float] = {}
    s = gallery.load(name)
    checks = recheck.CHECKS
    with Counter() as clock:
        found = analyze(s, timings=stages, clock=clock)
    row = {k: int(v) for k, v in stages.items()}
    out = {
        "compile": row.get("compile", 0),
        "rules": sum(
            v for k, v in row.items() if k not in ("compile", "sync", "fixes", "recheck", *RECHECK)
        ),
        "sync": row.get("sync", 0),
        "offer": row.get("fixes", 0) - row.get("recheck", 0),
        "recheck": row.get("recheck", 0),
        "checks": recheck.CHECKS - checks,
        **{k: row.get(k, 0) for k in RECHECK},
    }
    out["whole"] = sum(out[k] for k in ("compile", "rules", "sync", "offer", "recheck"))
    fix = next((d.fix for d in found.diagnostics if d.fix is not None), None)
    out["apply"] = -1
    if fix is not None:
        lab = Session(s)
        with Counter() as clock:
            lab.apply_fix(fix)
        out["apply"] = clock.n
    return out


def measure_phases() -> dict[str, dict[str, int]]:
    """Every gallery scenario's ``phases``, with ``PYTHONHASHSEED=0``."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        return _child("--phases")
    from mpmd_lab import gallery

    return {name: phases(name) for name in gallery.names()}


def phases_table(got: dict[str, dict[str, int]]) -> str:
    """``--phases`` as text: a row per scenario, and each phase's share of the whole
    checks together."""
    lines = [f"{'scenario':28}" + "".join(f" {k:>9}" for k in PHASES)]
    for name, row in got.items():
        lines.append(f"{name:28}" + "".join(f" {row[k]:>9,}" for k in PHASES))
    total = sum(row["whole"] for row in got.values())
    shares = ", ".join(
        f"{k} {sum(row[k] for row in got.values()) / total:.0%}"
        for k in ("compile", "rules", "sync", "offer", "recheck")
    )
    lines.append(f"of all {total:,} instructions: {shares}")
    again = sum(row["recheck"] for row in got.values())
    if again:
        split = ", ".join(
            f"{k.removeprefix('recheck_')} {sum(row.get(k, 0) for row in got.values()) / again:.0%}"
            for k in RECHECK
        )
        lines.append(f"of the candidates' checks ({again:,}): {split}")
    return "\n".join(lines)


def _child(flag: str) -> dict[str, dict[str, int]]:
    """This module's ``--json`` output (with ``flag``) from a child with
    ``PYTHONHASHSEED=0``."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "bench.icount", "--json", *([flag] if flag else [])],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, dict[str, int]] = json.loads(done.stdout)
    return result


def measure() -> dict[str, dict[str, int]]:
    """Every gallery scenario's counts, with ``PYTHONHASHSEED=0``."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        return _child("")
    from mpmd_lab import gallery

    return {name: count(name) for name in gallery.names()}


def grown(got: dict[str, dict[str, int]], committed: dict[str, dict[str, int]]) -> list[str]:
    """Each scenario whose rules or whole check grew more than ``TOLERANCE`` (or that
    has no committed figure)."""
    out = []
    for name, row in got.items():
        want = committed.get(name)
        if want is None:
            out.append(f"{name}: no committed figure")
            continue
        for part in ("rules", "whole"):
            if row[part] > want[part] * (1 + TOLERANCE):
                out.append(
                    f"{name} {part}: {row[part]:,} instructions, "
                    f"{row[part] / want[part] - 1:+.0%} over {want[part]:,}"
                )
    return out


def table(got: dict[str, dict[str, int]], committed: dict[str, dict[str, int]]) -> str:
    lines = [
        f"{'scenario':28} {'rules':>9} {'sync':>9} {'fixes':>9} {'whole':>10} {'again':>7}"
        "  vs committed"
    ]
    for name, row in got.items():
        want = committed.get(name)
        rel = "new"
        if want:
            rules, whole = row["rules"] / want["rules"] - 1, row["whole"] / want["whole"] - 1
            rel = f"rules {rules:+.1%}, whole {whole:+.1%}"
        lines.append(
            f"{name:28} {row['rules']:>9,} {row['sync']:>9,} {row['fixes']:>9,} "
            f"{row['whole']:>10,} {row.get('fixes_again', 0):>7,}  {rel}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.icount", description=__doc__)
    ap.add_argument("--write", action="store_true", help="commit the counts to icount.json")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument(
        "--phases", action="store_true", help="where each whole check goes (not guarded)"
    )
    args = ap.parse_args(argv)
    if args.phases:
        by_phase = measure_phases()
        print(json.dumps(by_phase, indent=1) if args.json else phases_table(by_phase))
        return 0
    got = measure()
    if args.json:
        print(json.dumps(got, indent=1))
        return 0
    if args.write:
        FIGURES.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FIGURES}")
    committed = json.loads(FIGURES.read_text(encoding="utf-8")) if FIGURES.exists() else {}
    print(table(got, committed))
    bad = grown(got, committed)
    if bad:
        print("\n".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
