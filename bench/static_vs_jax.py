"""Static check time against asking JAX (trace, then trace + GPU lowering), per scenario.

The check is three parts, timed apart (``validate.analyze(timings=...)``):

- the *rules*: resolve, build, trace, lower, runtime and interpreter rules, what JAX's
  own trace and lowering answer (the error JAX would raise, at its field);
- the *race check*: every actor run data-free with happens-before (races, deadlocks,
  semaphore balance, out-of-bounds indices), which JAX's trace does not judge at all;
- the *fixes*: each proposed fix checked again (rules and race check) and kept only if
  it leaves fewer errors.

The >= 10x target is held against the rules, JAX's trace answering the same question;
the whole check (all three) gets its own least-speed-up row and verdict.
"""

from __future__ import annotations

import statistics

from bench.jaxcall import module_of, trace, trace_and_lower
from bench.table import Row, verdict
from bench.timing import fmt_s, median_fresh, median_seconds

TYPICAL_TARGET_S = 1e-3
#: the static check at least this many times faster than JAX's trace, every scenario
SPEEDUP_TARGET = 10
#: what ``analyze(timings=...)`` reports, by part
RULES = ("resolve", "build", "trace", "lower", "runtime", "interp")


def parts(text: str, repeats: int = 9) -> tuple[float, float, float]:
    """Median seconds of (rules, race check, fixes) over ``repeats`` checks, each the
    first check of a scenario freshly loaded from ``text`` (the loading untimed): what an
    op object keeps of one check (``At``'s resolved entries) does not speed up the next."""
    from mpmd_lab import validate
    from mpmd_lab.scenario import load_scenario

    validate.analyze(load_scenario(text))
    rules, sync, fixes = [], [], []
    for _ in range(repeats):
        t: dict[str, float] = {}
        validate.analyze(load_scenario(text), timings=t)
        rules.append(sum(t.get(k, 0.0) for k in RULES))
        sync.append(t.get("sync", 0.0))
        fixes.append(t.get("fixes", 0.0))
    return statistics.median(rules), statistics.median(sync), statistics.median(fixes)


def rows(repeats: int = 3, trace_repeats: int = 9) -> list[Row]:
    """One row per gallery scenario and the summaries; JAX's trace (a few ms, and the
    reference of the target) is timed ``trace_repeats`` times, its lowering (up to
    ~300 ms) ``repeats`` times."""
    from mpmd_lab import gallery, validate
    from mpmd_lab.scenario import load_scenario

    out: list[Row] = []
    checks = []
    whole_ups: list[tuple[float, str]] = []
    rules_ups: list[tuple[float, str]] = []
    for name in gallery.names():
        s = gallery.load(name)
        text = gallery.path_of(name).read_text()
        t_check = median_fresh(lambda text=text: load_scenario(text), validate.check, repeats=9)
        t_rules, t_sync, t_fixes = parts(text)
        checks.append(t_check)
        ns = module_of(s)
        t_trace = median_seconds(lambda ns=ns: trace(ns), repeats=trace_repeats)
        t_lower = median_seconds(lambda ns=ns: trace_and_lower(ns), repeats=repeats)
        whole_ups.append((t_trace / t_check, name))
        rules_ups.append((t_trace / t_rules, name))
        out.append(
            Row(
                "static vs JAX",
                f"{name}: rules, a first check of a fresh load (the whole check "
                f"{fmt_s(t_check)}: + race check "
                f"{fmt_s(t_sync)} + fixes {fmt_s(t_fixes)}) | JAX trace, + lower",
                fmt_s(t_rules),
                f"{fmt_s(t_trace)} | {fmt_s(t_lower)}",
                f"rules {t_trace / t_rules:.0f}x, check {t_trace / t_check:.1f}x",
                f"trace >= {SPEEDUP_TARGET}x rules",
                verdict(t_trace / t_rules >= SPEEDUP_TARGET),
                value=t_rules,
                unit="s",
                base=t_trace,  # --json: the rules against the trace alone
            )
        )
    for label, ups in (
        ("rules", rules_ups),
        ("whole check", whole_ups),
    ):
        worst, worst_name = min(ups)
        met = sum(1 for r, _ in ups if r >= SPEEDUP_TARGET)
        out.append(
            Row(
                "static vs JAX",
                f"least speed-up over {len(ups)} gallery scenarios (trace / {label}): "
                f"{worst_name}; {met}/{len(ups)} at >= {SPEEDUP_TARGET}x",
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
