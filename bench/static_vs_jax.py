"""Static check time against asking JAX (trace, then trace + GPU lowering), per scenario.

The check is three parts, timed apart (``validate.analyze(timings=...)``):

- the *rules*: resolve, build, trace, lower, runtime and interpreter rules, what JAX's
  own trace and lowering answer (the error JAX would raise, at its field);
- the *race check*: every actor run data-free with happens-before (races, deadlocks,
  semaphore balance, out-of-bounds indices), which JAX's trace does not judge at all;
- the *fixes*: each proposed fix checked again (rules and race check) and kept only if
  it leaves fewer errors.

Each target compares the same question on both sides. The rules answer what JAX's trace
answers: at least 10x faster than the trace, on every scenario (the issue's measure: its
"static check" was the rules alone then). The whole check also answers what only a run
answers (races, deadlocks, out-of-bounds) and checks its fixes; JAX answers the race
question with its GPU interpreter's race detector, which runs a call on a CPU only where it
reaches no other device: there, the whole check at least 10x faster than that run. Its
speed-up over the trace alone is shown with no target (the trace answers neither).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from bench.jaxcall import detect_races, module_of, trace, trace_and_lower
from bench.table import Row, verdict
from bench.timing import fmt_s, median_fresh, median_seconds

if TYPE_CHECKING:
    from mpmd_lab.scenario import Scenario

TYPICAL_TARGET_S = 1e-3
#: the static check at least this many times faster than JAX's trace, every scenario
SPEEDUP_TARGET = 10
#: the whole check (rules, race check and verified fixes) at least this many times
#: faster than JAX's trace, every scenario (issue 27: what the whole check was before
#: the race check explored schedules and every fix was verified by a full check)
WHOLE_TARGET = 1.5
#: what ``analyze(timings=...)`` reports, by part
RULES = ("compile", "build", "trace", "lower", "runtime", "interp")


def fresh(text: str) -> Any:
    """The scenario loaded again, as a first check sees it: nothing an earlier check
    kept by content (``fixes.clear_cache``: the candidates' checks, the rules' shared
    diagnostics), which a repetition of the same scenario would find."""
    from mpmd_lab import fixes
    from mpmd_lab.scenario import load_scenario

    fixes.clear_cache()
    return load_scenario(text)


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
        s = fresh(text)
        validate.analyze(s, timings=t)
        rules.append(sum(t.get(k, 0.0) for k in RULES))
        sync.append(t.get("sync", 0.0))
        fixes.append(t.get("fixes", 0.0))
    return statistics.median(rules), statistics.median(sync), statistics.median(fixes)


def rows(repeats: int = 3, trace_repeats: int = 9, rounds: int = 3) -> list[Row]:
    """One row per gallery scenario and the summaries; JAX's trace (a few ms, and the
    reference of the target) is timed ``trace_repeats`` times, its lowering (up to
    ~300 ms) ``repeats`` times.

    The rules and the trace are timed in ``rounds`` alternating rounds (the rules' median
    of 9 checks, then the trace's of ``trace_repeats``), and the speed-up is the median of
    the rounds' ratios: a burst of load on this shared machine lands in one round, where
    timing each side once, one after the other, let it land on one side only."""
    from mpmd_lab import gallery, validate

    out: list[Row] = []
    checks = []
    whole_ups: list[tuple[float, str]] = []
    rules_ups: list[tuple[float, str]] = []
    detector: list[tuple[str, float, float | None]] = []  # name, whole check, JAX's run
    for name in gallery.names():
        s = gallery.load(name)
        text = gallery.path_of(name).read_text()
        t_check = median_fresh(lambda text=text: fresh(text), validate.check, repeats=9)
        checks.append(t_check)
        ns = module_of(s)
        timed: list[tuple[float, float, float, float]] = []  # rules, sync, fixes, trace
        for _ in range(rounds):
            timed.append(
                (*parts(text), median_seconds(lambda ns=ns: trace(ns), repeats=trace_repeats))
            )
        t_rules, t_sync, t_fixes, t_trace = (statistics.median(x) for x in zip(*timed, strict=True))
        up_rules = statistics.median(tr / r for r, _, _, tr in timed)
        t_lower = median_seconds(lambda ns=ns: trace_and_lower(ns), repeats=repeats)
        if interpreter_runs(s):
            answered: list[bool] = []  # (JAX's answer in every timed run)
            t_detect = median_seconds(
                lambda ns=ns, answered=answered: answered.append(detect_races(ns)),
                repeats=repeats,
            )
            detector.append((name, t_check, t_detect if all(answered) else None))
        whole_ups.append((t_trace / t_check, name))
        rules_ups.append((up_rules, name))
        out.append(
            Row(
                "static vs JAX",
                f"{name}: rules, a first check of a fresh load (the whole check "
                f"{fmt_s(t_check)}: + race check "
                f"{fmt_s(t_sync)} + fixes {fmt_s(t_fixes)}) | JAX trace, + lower",
                fmt_s(t_rules),
                f"{fmt_s(t_trace)} | {fmt_s(t_lower)}",
                f"rules {up_rules:.1f}x, check {t_trace / t_check:.1f}x",
                f"trace >= {SPEEDUP_TARGET}x rules",
                verdict(up_rules >= SPEEDUP_TARGET),
                value=t_rules,
                unit="s",
                base=t_trace,  # --json: the rules against the trace alone
                ratio_value=1 / up_rules,  # (the median of the rounds' ratios)
            )
        )
    out.append(_least(rules_ups, "trace / rules", SPEEDUP_TARGET))
    out.append(_least(whole_ups, "trace / whole check, which also judges races", WHOLE_TARGET))
    detect_ups: list[tuple[float, str]] = []
    for name, t_check, t_detect in detector:
        up = None if t_detect is None else t_detect / t_check
        if up is not None:
            detect_ups.append((up, name))
        out.append(
            Row(
                "static vs JAX",
                f"{name}: the whole check | JAX's GPU interpreter with its race detector "
                "(build, trace, run)",
                fmt_s(t_check),
                "no answer" if t_detect is None else fmt_s(t_detect),
                "" if up is None else f"check {up:.0f}x",
                f"run >= {SPEEDUP_TARGET}x check",
                verdict(up is not None and up >= SPEEDUP_TARGET),
                value=t_check,
                unit="s",
                base=t_detect,
            )
        )
    if detector:
        out.append(
            _least(
                detect_ups,
                "JAX's race-detecting run / whole check, where its GPU interpreter runs "
                "the call on a CPU",
                SPEEDUP_TARGET,
                of=len(detector),
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


def interpreter_runs(scenario: Scenario) -> bool:
    """Whether JAX's GPU interpreter can run the call here, by the check: no code that
    says it cannot (``INTERP_CANNOT``: a cross-device ref, an interpreter limit) and no
    error before the run (schema, build, trace). A Mosaic GPU lowering error does not
    stop the interpreter, which does not lower."""
    from mpmd_lab.diagnostics import INTERP_CANNOT
    from mpmd_lab.validate import check

    return not any(
        d.code in INTERP_CANNOT or (d.is_error and d.stage in ("schema", "build", "trace"))
        for d in check(scenario)
    )


def _least(ups: list[tuple[float, str]], label: str, goal: float, of: int = 0) -> Row:
    """The least speed-up of ``ups`` and how many reach ``goal`` (``of``: out of how
    many scenarios, when some had no answer)."""
    n = of or len(ups)
    worst, worst_name = min(ups) if ups else (float("nan"), "none")
    met = sum(1 for r, _ in ups if r >= goal)
    return Row(
        "static vs JAX",
        f"least speed-up over {n} gallery scenarios ({label}): {worst_name}; "
        f"{met}/{n} at >= {goal:g}x",
        f"{worst:.1f}x",
        target=f">= {goal:g}x",
        verdict=verdict(met == n and worst >= goal),
        value=worst,
        unit="x",
    )
