"""Static check time against asking JAX (trace, then trace + GPU lowering), per scenario."""

from __future__ import annotations

import statistics

from bench.jaxcall import module_of, trace, trace_and_lower
from bench.table import Row, verdict
from bench.timing import fmt_s, median_seconds, per_call

TYPICAL_TARGET_S = 1e-3
#: the static check at least this many times faster than JAX's trace, every scenario
SPEEDUP_TARGET = 10


def rows(repeats: int = 3) -> list[Row]:
    from mpmd_lab import gallery, validate

    out: list[Row] = []
    checks = []
    speedups: list[tuple[float, str]] = []
    for name in gallery.names():
        s = gallery.load(name)
        t_check = per_call(lambda s=s: validate.check(s))
        checks.append(t_check)
        ns = module_of(s)
        t_trace = median_seconds(lambda ns=ns: trace(ns), repeats=repeats)
        t_lower = median_seconds(lambda ns=ns: trace_and_lower(ns), repeats=repeats)
        speedups.append((t_trace / t_check, name))
        out.append(
            Row(
                "static vs JAX",
                f"{name}: check | JAX trace, trace+lower",
                fmt_s(t_check),
                f"{fmt_s(t_trace)} | {fmt_s(t_lower)}",
                f"{t_trace / t_check:.0f}x | {t_lower / t_check:.0f}x",
                f"trace >= {SPEEDUP_TARGET}x check",
                verdict(t_trace / t_check >= SPEEDUP_TARGET),
                value=t_check,
                unit="s",
                base=t_trace,  # --json: against the trace alone
            )
        )
    worst, worst_name = min(speedups)
    out.append(
        Row(
            "static vs JAX",
            f"least speed-up over {len(speedups)} gallery scenarios (JAX trace / check): "
            f"{worst_name}",
            f"{worst:.1f}x",
            target=f">= {SPEEDUP_TARGET}x",
            verdict=verdict(worst >= SPEEDUP_TARGET),
            value=worst,
            unit="x",
        )
    )
    typical = statistics.median(checks)
    out.append(
        Row(
            "static vs JAX",
            f"median check over {len(checks)} gallery scenarios",
            fmt_s(typical),
            target=f"< {fmt_s(TYPICAL_TARGET_S)}",
            verdict=verdict(typical < TYPICAL_TARGET_S),
            value=typical,
            unit="s",
        )
    )
    return out
