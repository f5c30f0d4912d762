"""Static check time against asking JAX (trace, then trace + GPU lowering), per scenario."""

from __future__ import annotations

import statistics

from bench.jaxcall import module_of, trace, trace_and_lower
from bench.table import Row, verdict
from bench.timing import fmt_s, median_seconds, per_call

TYPICAL_TARGET_S = 1e-3


def rows(repeats: int = 3) -> list[Row]:
    from mpmd_lab import gallery, validate

    out: list[Row] = []
    checks = []
    for name in gallery.names():
        s = gallery.load(name)
        t_check = per_call(lambda s=s: validate.check(s))
        checks.append(t_check)
        ns = module_of(s)
        t_trace = median_seconds(lambda ns=ns: trace(ns), repeats=repeats)
        t_lower = median_seconds(lambda ns=ns: trace_and_lower(ns), repeats=repeats)
        out.append(
            Row(
                "static vs JAX",
                f"{name}: check | JAX trace, trace+lower",
                fmt_s(t_check),
                f"{fmt_s(t_trace)} | {fmt_s(t_lower)}",
                f"{t_trace / t_check:.0f}x | {t_lower / t_check:.0f}x",
                value=t_check,
                unit="s",
                base=t_trace,  # --json: against the trace alone
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
