"""Running the regression cases through JAX and holding the static check to the record."""

from __future__ import annotations

import re
from typing import Any

from mpmd_lab.diagnostics import STAGE_ORDER

RACE_CODES = {"RACE", "RACE_DETECTED"}
#: where a JAX message stops being the same from run to run (IR dumps, SSA names,
#: vector clocks, buffer ids)
_UNSTABLE = [
    re.compile(r"\s+see current operation"),
    re.compile(r" op=\n"),
    re.compile(r"(?<=RACE DETECTED)\n"),
    re.compile(r"(?<=PeerMemRef\(device_id=)"),  # which device's id the interpreter met first
    re.compile(r"\nThe error occurred while tracing"),  # names a file path of this machine
]


def stable_prefix(message: str) -> str:
    """The part of a JAX message every run repeats (all of it, for most)."""
    cut = len(message)
    for rx in _UNSTABLE:
        m = rx.search(message)
        if m:
            cut = min(cut, m.start())
    return message[:cut]


def loadable(d: dict[str, Any]):
    """The scenario as the loader makes it."""
    from mpmd_lab.scenario import load_scenario

    return load_scenario(d)


def run_jax(d: dict[str, Any], stages, detect_races: bool | None) -> dict[str, Any]:
    """Real JAX on one scenario (``mpmd_lab.probe``: a warm worker process), as a record."""
    from mpmd_lab import probe
    from mpmd_lab.catalogue import classify, unwrap

    r = probe.probe(loadable(d), tuple(stages), detect_races=detect_races, timeout=180)
    if r.ok:
        outs = {k: v.tolist() for k, v in (r.outputs or {}).items() if v.size <= 256}
        return {"ok": True, "stage": None, "outputs": outs or None}
    t, m = unwrap(r.error_type or "", r.message or "")
    return {
        "ok": False,
        "stage": r.stage,
        "raised": r.error_type,
        "type": t,
        "message": m[:3000],
        "stable": stable_prefix(m)[:3000],
        "code": classify(r.error_type or "", r.message or "") or "JAX_UNKNOWN",
    }


def _said(d: Any) -> tuple[str, str]:
    """(type, message) a diagnostic says JAX raises."""
    if d.jax is not None:
        return d.jax.type, d.jax.message
    return "", d.message


def says_what_jax_says(d: Any, j: dict[str, Any]) -> list[str]:
    """Problems with diagnostic ``d`` as a prediction of JAX's error ``j``."""
    out = []
    code = j.get("code")
    if code and code != "JAX_UNKNOWN" and d.code != code:
        out.append(f"code {d.code}, JAX's is {code}")
    t, m = _said(d)
    if t != j["type"]:
        out.append(f"type {t!r}, JAX raises {j['type']!r}")
    jm, stable = j["message"], j["stable"]
    # JAX's message where it is the same in every run; past that, anything JAX could say
    if not m.startswith(stable) or (stable == jm and m != jm):
        out.append(f"message {m[:160]!r}, JAX says {stable[:160]!r}")
    return out


def hold(record: dict[str, Any]) -> list[str]:
    """Every way today's static check disagrees with the record (empty: it agrees)."""
    from mpmd_lab.scenario import ScenarioError, load_scenario
    from mpmd_lab.validate import check

    expect = record["expect"]
    try:
        s = load_scenario(record["scenario"])
    except ScenarioError as e:
        if expect == "schema":
            return []
        return [f"the loader refuses it: {e.problems}"]
    if expect == "schema":
        return ["the loader accepts it"]
    diags = check(s)
    errors = [d for d in diags if d.is_error]
    if expect == "race":
        if not any(d.code in RACE_CODES for d in errors):
            found = [(d.severity, d.code) for d in diags if d.code in RACE_CODES]
            return [f"no race reported as an error (found {found or 'none'})"]
        return []
    j = record["jax"]
    stages = ["schema", *record["stages"]]
    if j["ok"]:
        bad = [d for d in errors if d.stage in stages]
        return [f"JAX passes {record['stages']}; the check: {d.code} at {d.stage}" for d in bad]
    at = j["stage"]
    early = [d for d in errors if STAGE_ORDER[d.stage] < STAGE_ORDER[at]]
    if early:
        return [f"the check stops at {early[0].stage} ({early[0].code}); JAX at {at}"]
    if at != "interpret":
        if not errors:
            return [f"the check says valid; JAX raises {j['type']} at {at}"]
        first = errors[0]
        if first.stage != at:
            return [f"the check's first error is at {first.stage}, JAX's at {at}"]
        return says_what_jax_says(first, j)
    # JAX ran the call and its interpreter failed: the check says so at that stage
    here = [d for d in diags if d.stage == "interpret"]
    if not here:
        return [f"nothing at the interpret stage; JAX's interpreter raises {j['type']}"]
    tries = [says_what_jax_says(d, j) for d in here]
    return [] if any(not p for p in tries) else min(tries, key=len)
