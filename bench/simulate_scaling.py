"""How the simulator's cost grows with devices x steps: the ring all-gather on D devices
(D - 1 loop steps each, a semaphore handshake per step: D x (D - 1) remote copies)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from bench.table import Row, timed, verdict
from bench.timing import fmt_s

DEVICES = (8, 16, 32, 64, 128, 256)
QUICK_DEVICES = (8, 16, 32, 64)
FIXTURE = (
    Path(__file__).resolve().parents[1] / "tests" / "scenarios" / "sync" / "ring_all_gather.json"
)


def ring(n: int, s: int = 128) -> dict[str, Any]:
    """The ring all-gather (research corpus ring_all_gather.py) on ``n`` devices."""
    d = copy.deepcopy(json.loads(FIXTURE.read_text()))
    d["device_mesh"] = {"dev": n}
    d["buffers"]["x"]["shape"] = [s]
    d["call"]["outputs"]["out"]["shape"] = [n * s]
    d["call"]["scratch"]["sems"]["shape"] = [n - 1]
    body = d["call"]["programs"][0]["body"]
    body[0]["transforms"][0]["index"] = [{"ds": [f"dev * {s}", s]}]
    body[2]["transforms"][0]["device"] = f"(dev + 1) % {n}"
    body[3]["stop"] = n - 1
    for st in body[3]["body"]:
        if st.get("let") in ("dst", "src"):
            st["transforms"][0]["index"] = [{"ds": [f"((dev + {n} - s) % {n}) * {s}", s]}]
        if st.get("op") == "semaphore_signal":
            st["device"] = f"(dev + 1) % {n}"
    return d


def rows(quick: bool = False) -> list[Row]:
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.simulator import simulate

    out = []
    per = {}
    for n in QUICK_DEVICES if quick else DEVICES:
        s = load_scenario(ring(n))
        t0 = time.perf_counter()
        r = simulate(s, check=False)
        dt = time.perf_counter() - t0
        if not r.ok or r.races:
            out.append(Row("simulate", f"ring all-gather, {n} devices", "n/a (failed)"))
            continue
        device_steps = n * (n - 1)
        per[n] = dt / device_steps
        out.append(
            timed(
                "simulate",
                f"ring all-gather, {n} devices ({device_steps} device-steps, {r.steps} statements)",
                dt,
                ratio=f"{per[n] * 1e6:.0f} µs per device-step",
            )
        )
    if len(per) >= 2:
        lo, hi = min(per), max(per)
        growth = per[hi] / per[lo]
        out.append(
            Row(
                "simulate",
                f"  cost per device-step, {hi} vs {lo} devices",
                f"{growth:.2f}x",
                fmt_s(per[lo]),
                target="linear in devices x steps (< 2x)",
                verdict=verdict(growth < 2),
                value=per[hi],
                unit="s",
                base=per[lo],
            )
        )
    if 256 in per:
        out.append(
            timed("simulate", "ring all-gather, 256 devices", per[256] * 256 * 255, target_s=60.0)
        )
    return out
