"""Many scenarios through real JAX, up the one ladder (test helper).

``probe_many(scenarios, stages)`` -> list of ``{"stage", "type", "message", "code"}``
(``stage`` None when every requested stage passed). Stages, in JAX's order: build,
trace, gpu-lower, interpret. The warm workers of ``mpmd_lab.probe`` climb
``mpmd_lab.ladder``, as the runtime and ``check --deep`` do.
"""

from __future__ import annotations

from typing import Any

from mpmd_lab import probe
from mpmd_lab.catalogue import classify
from mpmd_lab.scenario import load_scenario


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
