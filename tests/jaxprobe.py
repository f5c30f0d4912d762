"""Run many scenarios through real JAX in ONE child process (test helper).

``probe_many(scenarios, stages)`` -> list of ``{"stage", "type", "message", "code"}``
(``stage`` None when every requested stage passed). Stages, in JAX's order: build,
trace, gpu-lower, interpret. The child sets 16 simulated CPU devices before jax starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import os, sys, json, traceback
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=16"
)
import jax
jax.devices()  # start the backend now, with 16 devices
from mpmd_lab import codegen
from mpmd_lab.scenario import load_scenario
from mpmd_lab.catalogue import classify

def one(sc, stages):
    src = codegen.generate(sc, interpret="gpu")
    ns = {"__name__": "probe_mod"}
    stage = "build"
    try:
        exec(compile(src, "<scenario>", "exec"), ns)
        fn, mesh = ns["build"](None, False)
        args = ns["place"](ns["make_inputs"](), mesh)
        if "trace" in stages or "gpu-lower" in stages:
            stage = "trace"
            fn.trace(*args)
        if "gpu-lower" in stages:
            stage = "gpu-lower"
            jax.export.export(fn, platforms=["cuda"])(*args)
        if "interpret" in stages:
            stage = "interpret"
            fn2, mesh = ns["build"](sc.run.interpret, sc.run.detect_races)
            out = fn2(*args)
            jax.block_until_ready(out)
        return {"stage": None}
    except BaseException as e:
        t = type(e).__name__
        m = str(e)
        return {"stage": stage, "type": t, "message": m[:4000], "code": classify(t, m)}

req = json.loads(sys.stdin.read())
res = []
for item in req["scenarios"]:
    try:
        sc = load_scenario(item)
        res.append(one(sc, req["stages"]))
    except Exception as e:
        res.append({"stage": "probe", "type": type(e).__name__, "message": str(e)})
print("@@RESULT@@" + json.dumps(res))
"""


def probe_many(scenarios, stages=("build", "trace", "gpu-lower"), timeout=600):
    payload = json.dumps(
        {
            "scenarios": [s.to_dict() if hasattr(s, "to_dict") else s for s in scenarios],
            "stages": list(stages),
        }
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    p = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=payload,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    out = p.stdout
    if "@@RESULT@@" not in out:
        raise RuntimeError(f"probe child failed: {p.stderr[-3000:]}")
    return json.loads(out.split("@@RESULT@@", 1)[1])
