"""Run generated scenario sources through real JAX, stage by stage, in child processes.

The child script (``CHILD``) needs only jax and numpy, so the same sources can be
checked under another JAX install (``python=/tmp/jax0112/bin/python``). One child
per device count (simulated CPU devices must be requested before jax starts); each
item stops at its first failing stage: ``build``, ``trace``, then ``gpu-lower`` or
``interpret`` or both, as asked. After an interpreter error the child resets the GPU
interpreter's global state (left poisoned otherwise); if a child dies, a fresh one
takes the remaining items. The knowledge base uses this
to record what JAX says and to test each card's example; ``mpmd_lab.probe`` is the
runtime's fuller version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab import codegen
from mpmd_lab.scenario import Scenario

STAGES = ("build", "trace", "gpu-lower", "interpret")

CHILD = r"""
import json, os, sys, traceback, types
ndev = int(sys.argv[1])
if ndev > 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={ndev}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import numpy as np

def one(item):
    mod = types.ModuleType("scenario_" + item["id"].replace("-", "_").replace(".", "_"))
    stage = "build"
    nan = {}
    try:
        exec(compile(item["source"], mod.__name__, "exec"), mod.__dict__)
        fn, mesh = mod.build(None)
        args = mod.place(mod.make_inputs(), mesh)
        stage = "trace"
        fn.trace(*args)
        if "gpu-lower" in item["stages"]:
            stage = "gpu-lower"
            jax.export.export(fn, platforms=["cuda"])(*args)
        if "interpret" in item["stages"]:
            stage = "interpret"
            fn, mesh = mod.build(item["interpret"], item["detect_races"])
            out = jax.device_get(fn(*mod.place(mod.make_inputs(), mesh)))
            for k, v in out.items():
                v = np.asarray(v)
                nan[k] = int(np.isnan(v).sum()) if v.dtype.kind == "f" else 0
        return {"id": item["id"], "ok": True, "stage": None, "nan": nan}
    except BaseException as e:
        t = type(e)
        return {
            "id": item["id"], "ok": False, "stage": stage,
            "type": t.__name__, "qualname": t.__module__ + "." + t.__qualname__,
            "message": str(e),
            "traceback": "".join(traceback.format_exception(e))[-6000:],
        }

items = json.load(sys.stdin)
for item in items:
    r = one(item)
    print(json.dumps(r), flush=True)
    if r["stage"] == "interpret":  # the interpreter's global state is left poisoned
        from jax._src.pallas.mosaic_gpu.interpret import interpret_pallas_call
        interpret_pallas_call.reset_gpu_interpret_mode_state()
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
                [python or sys.executable, "-c", CHILD, str(ndev)],
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
