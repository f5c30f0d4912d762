"""Many scenarios through real JAX, up the one ladder (test helper).

``probe_many(scenarios, stages)`` -> list of ``{"stage", "type", "message", "code"}``
(``stage`` None when every requested stage passed). Stages, in JAX's order: build,
trace, gpu-lower, interpret. The warm workers of ``mpmd_lab.probe`` climb
``mpmd_lab.ladder``, as the runtime and ``check --deep`` do.
"""

from __future__ import annotations

import copy
from typing import Any

from mpmd_lab import probe
from mpmd_lab.catalogue import classify
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error


def probe_many(
    scenarios: list[Any], stages: tuple[str, ...] = ("build", "trace", "gpu-lower"), timeout=600
) -> list[dict[str, Any]]:
    loaded = [load_scenario(s) for s in scenarios]
    out: list[dict[str, Any]] = []
    for r in probe.probe_many(loaded, stages, timeout=min(timeout, 300)):
        if r.ok:
            out.append({"stage": None})
            continue
        message = (r.message or "")[:4000]
        out.append(
            {
                "stage": r.stage,
                "type": r.error_type,
                "message": message,
                "code": classify(r.error_type or "", r.message or ""),
            }
        )
    return out


def answers(
    cases: dict[str, Any], stages: tuple[str, ...] = ("build", "trace", "gpu-lower")
) -> dict[str, dict[str, Any]]:
    """JAX's answer (``probe_many``) for each named scenario, by name (one batch)."""
    got = probe_many([copy.deepcopy(s) for s in cases.values()], stages)
    return dict(zip(cases, got, strict=True))


def assert_agrees(scenario: Any, jax: dict[str, Any]) -> None:
    """The check's first error is JAX's: its code, its stage, and JAX's exact message
    where the check claims one; none at a JAX stage where JAX ran the scenario."""
    d = first_error(check(load_scenario(copy.deepcopy(scenario))))
    if jax["stage"] is None:
        assert d is None or d.stage not in ("build", "trace", "gpu-lower"), d
        return
    assert d is not None and (d.code, d.stage) == (jax["code"], jax["stage"]), (d, jax)
    if d.jax is not None:  # (JAX's message names the generated file where it says "at")
        assert d.jax.message.split(" at <")[0] in jax["message"], (d.jax.message, jax)
