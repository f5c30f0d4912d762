"""Run generated scenario sources through real JAX, up the one ladder
(:mod:`mpmd_lab.ladder`), in plain child processes.

The child script (``CHILD``) loads the ladder by path and needs only jax and numpy, so
the same sources can be checked under another JAX install
(``python=/tmp/jax0112/bin/python``). One child per device count (simulated CPU devices
must be requested before jax starts); each item stops at its first failing stage. If a
child dies, a fresh one takes the remaining items. The knowledge base uses this to
record what JAX says under each JAX version and to test each card's example; the
runtime's warm workers (``mpmd_lab.probe``) climb the same ladder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpmd_lab import codegen
from mpmd_lab.scenario import Scenario

STAGES = ("build", "trace", "gpu-lower", "interpret")
LADDER = Path(__file__).resolve().parents[1] / "ladder.py"

CHILD = r"""
import importlib.util, json, os, sys
ndev = int(sys.argv[1])
if ndev > 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={ndev}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
spec = importlib.util.spec_from_file_location("mpmd_lab_ladder", sys.argv[2])
ladder = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ladder)

items = json.load(sys.stdin)
for item in items:
    name = "scenario_" + item["id"].replace("-", "_").replace(".", "_")
    r = ladder.climb(item["source"], ["build", "trace", *item["stages"]],
                     mode=item["interpret"], detect_races=item["detect_races"], name=name)
    out = {"id": item["id"], "ok": r["ok"], "stage": r["stage"], "nan": r["nan"]}
    if not r["ok"]:
        out.update(type=r["error_type"], qualname=r["qualname"], message=r["message"],
                   traceback=r["traceback"][-6000:])
    print(json.dumps(out), flush=True)
"""


@dataclass
class Outcome:
    """What real JAX did with one scenario: ``ok``, or the first stage that raised.

    ``nan``: NaN elements per output after an interpreter run (unwritten output).
    """

    id: str
    ok: bool
    stage: str | None = None
    type: str = ""
    qualname: str = ""
    message: str = ""
    traceback: str = ""
    nan: dict[str, int] = field(default_factory=dict)

    def code(self) -> str | None:
        """The catalogue code of the error (None when it ran or no code matches)."""
        from mpmd_lab import catalogue

        return None if self.ok else catalogue.classify(self.type, self.message)


def run_many(
    scenarios: dict[str, Scenario],
    *,
    stages: dict[str, tuple[str, ...]] | None = None,
    python: str | None = None,
    timeout: float = 600,
) -> dict[str, Outcome]:
    """Each scenario (by id) through the stages named for it in ``stages`` (default:
    build, trace, gpu-lower; build and trace always run)."""
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    out: dict[str, Outcome] = {}
    for key, s in scenarios.items():
        try:
            source = codegen.generate(s)
        except codegen.CodegenError as e:  # no JAX call can be written
            out[key] = Outcome(key, False, "codegen", "CodegenError", "", str(e))
            continue
        groups[s.num_devices].append(
            {
                "id": key,
                "source": source,
                "stages": list((stages or {}).get(key, STAGES[:3])),
                "interpret": s.run.interpret,
                "detect_races": s.run.detect_races,
            }
        )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    for ndev, items in sorted(groups.items()):
        items.sort(key=lambda it: "interpret" in it["stages"])  # the riskiest runs last
        while items:
            proc = subprocess.run(
                [python or sys.executable, "-c", CHILD, str(ndev), str(LADDER)],
                input=json.dumps(items),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
            )
            done = 0
            for line in proc.stdout.splitlines():
                if line.startswith("{"):
                    d = json.loads(line)
                    out[d["id"]] = Outcome(**d)
                    done += 1
            if done == 0:  # the child died on the first item
                first = items[0]["id"]
                out[first] = Outcome(first, False, "crash", "RUN_CRASHED", "", proc.stderr[-2000:])
                done = 1
            items = items[done:]
    return out
