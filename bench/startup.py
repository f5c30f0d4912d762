"""Whole-process start-up: ``mpmd-lab check FILE`` against ``python -c pass`` (the same
interpreter, same run), one process for many files against one per file.

The target is the issue's, as a ratio against its reference in the same run: < 200 ms
where ``python -c pass`` took 22 ms, so ``check`` within 9.1x ``python -c pass`` (the
absolute times are shown too; a loaded or slower machine scales both).

Wall time is what a user waits; CPU time (user + system of the child) is what the
process itself costs, and moves much less with the machine's load. bench/README.md
says where the time goes.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.table import Row, timed, verdict
from bench.timing import fmt_s

#: The issue's target and the ``python -c pass`` it was set against (its machine).
ISSUE_TARGET_S, ISSUE_PASS_S = 0.2, 0.022
#: ``check`` / ``python -c pass`` in the same run, at most.
TARGET_RATIO = round(ISSUE_TARGET_S / ISSUE_PASS_S, 1)
SCENARIO = "ring-shift"


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("mpmd-lab")
    return [str(script)] if script.exists() else [shutil.which("mpmd-lab") or "mpmd-lab"]


def _process(cmd: list[str], repeats: int) -> tuple[float, float]:
    """Median wall and median CPU seconds of running ``cmd`` to its end."""
    walls, cpus = [], []
    # what the command line sets itself, as a user's shell has it: unset
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYDANTIC_DISABLE_PLUGINS", "OPENBLAS_NUM_THREADS")
    }
    for _ in range(repeats):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if p.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-300:]!r}")
    return statistics.median(walls), statistics.median(cpus)


def _bytecode() -> str:
    """Whether the installed packages were compiled to bytecode (``uv sync
    --compile-bytecode``): without it every process compiles pydantic from source."""
    import pydantic

    cache = Path(pydantic.__file__).parent / "__pycache__"
    return "bytecode compiled" if cache.is_dir() and any(cache.iterdir()) else "NO bytecode"


def ratio_row(measure: str, seconds: float, pass_seconds: float) -> Row:
    """The start-up row: its times, judged by their ratio against ``python -c pass``."""
    row = timed("startup", measure, seconds, pass_seconds)
    row.target = (
        f"<= {TARGET_RATIO}x (the issue's < {fmt_s(ISSUE_TARGET_S)} at its "
        f"{fmt_s(ISSUE_PASS_S)} `python -c pass`)"
    )
    row.verdict = verdict(seconds / pass_seconds <= TARGET_RATIO)
    return row


def _compile_own() -> None:
    """Bring mpmd-lab's own bytecode up to date, as its first run on a machine does
    (``make``'s set-up compiles it once; a source edited since, with
    ``PYTHONDONTWRITEBYTECODE`` set as on these machines, was compiled again by every
    process: ~20-40 ms of each start after an edit)."""
    import compileall

    import mpmd_lab

    compileall.compile_dir(Path(mpmd_lab.__file__).parent, quiet=1)


def rows(repeats: int = 9) -> list[Row]:
    from mpmd_lab import gallery

    _compile_own()
    cli = _cli()
    py = [sys.executable, "-c", "pass"]
    # interleave so drift in machine load hits both alike
    base, ours = [], []
    for _ in range(3):
        base.append(_process(py, repeats // 3 or 1))
        ours.append(_process([*cli, "check", SCENARIO], repeats // 3 or 1))
    pw, pc = statistics.median(b[0] for b in base), statistics.median(b[1] for b in base)
    ow, oc = statistics.median(o[0] for o in ours), statistics.median(o[1] for o in ours)
    load = os.getloadavg()[0]
    out = [
        ratio_row(
            f"`mpmd-lab check {SCENARIO}`, whole process, wall ({_bytecode()}; load {load:.1f})"
            " vs `python -c pass`",
            ow,
            pw,
        ),
        timed(
            "startup",
            "  the same, CPU time of the process (user+sys) vs `python -c pass`",
            oc,
            pc,
        ),
    ]
    files = [str(gallery.path_of(n)) for n in gallery.names()]
    one_w, _ = _process([*cli, "check", *files], max(1, repeats // 3))
    each = statistics.median(
        _process([*cli, "check", f], 1)[0] for f in files[: max(3, repeats // 3)]
    )
    out.append(
        timed(
            "startup",
            f"`mpmd-lab check` {len(files)} gallery files in one process vs one process each",
            one_w,
            each * len(files),
            baseline=f"{fmt_s(each * len(files))} ({len(files)} x {fmt_s(each)})",
        )
    )
    gw, _gc = _process([*cli, "gallery"], max(1, repeats // 3))
    out.append(timed("startup", "`mpmd-lab gallery`, whole process (no pydantic)", gw, pw))
    return out
