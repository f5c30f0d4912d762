"""The warm worker behind ``toolkit.probe``: one JAX process, many scenarios.

Started by the parent as ``python _probe_child.py`` (by path, so it imports nothing
from ``toolkit``) with ``XLA_FLAGS`` already set for its device count. It imports
JAX once, then reads requests from stdin and answers on the original stdout; both
directions are length-prefixed pickles. Anything the scenario prints goes to stderr.

Request: ``{"source", "stages", "mode", "detect_races"}``. While it works the child
sends ``{"progress": stage}``; at the end ``{"result": {...}}`` with ``ok``,
``stage`` (where it failed), ``error_type``, ``message`` (exact ``str(exc)``),
``outputs`` (numpy, declared order) and ``poisoned`` (GPU-interpret state may be
unusable: the parent restarts this worker).
"""

import os
import pickle
import struct
import sys
import time
import traceback


def _send(out, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def _recv(inp):
    head = inp.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(inp.read(n))


def _races_found() -> bool:
    """Races recorded by the GPU interpreter (jax 0.11.2 records, 0.12 raises too)."""
    for mod in (
        "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
        "jax._src.pallas.mosaic_gpu.interpret.gpu_callbacks",
    ):
        try:
            m = __import__(mod, fromlist=["get_races"])
            races = m.get_races()
        except Exception:
            continue
        return bool(getattr(races, "races_found", False))
    return False


def _reset_interpret_state() -> None:
    for mod in (
        "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
        "jax._src.pallas.mosaic_gpu.interpret.gpu_callbacks",
    ):
        try:
            m = __import__(mod, fromlist=["reset_gpu_interpret_mode_state"])
            m.reset_gpu_interpret_mode_state()
            return
        except Exception:
            continue


def _handle(req, out):
    import jax
    import numpy as np

    stages = list(req["stages"])
    ns = {"__name__": "mpmd_lab_scenario", "__builtins__": __builtins__}
    result = {"ok": True, "stage": None, "error_type": None, "message": None, "outputs": None}
    result["poisoned"] = False
    stage = "build"

    def enter(s):
        nonlocal stage
        stage = s
        _send(out, {"progress": s})

    saved_flags = os.environ.get("XLA_FLAGS")
    try:
        enter("build")
        try:
            exec(compile(req["source"], "<mpmd-lab scenario>", "exec"), ns)
        finally:
            if saved_flags is None:
                os.environ.pop("XLA_FLAGS", None)
            else:
                os.environ["XLA_FLAGS"] = saved_flags
        names = ns.get("OUTPUT_NAMES")
        args = None
        fn = None
        if {"build", "trace", "gpu-lower", "gpu-run"} & set(stages):
            fn, mesh = ns["build"](None)
            args = ns["place"](ns["make_inputs"](), mesh)
        if "trace" in stages:
            enter("trace")
            fn.trace(*args)
        if "gpu-lower" in stages:
            enter("gpu-lower")
            jax.export.export(fn, platforms=["cuda"])(*args)
        run_stage = next((s for s in ("interpret", "gpu-run") if s in stages), None)
        if run_stage:
            if run_stage == "interpret":
                # build for the interpreter (a build error shows at the build stage)
                fn, mesh = ns["build"](req["mode"], bool(req["detect_races"]))
                args = ns["place"](ns["make_inputs"](), mesh)
            enter(run_stage)
            result["poisoned"] = run_stage == "interpret"
            outs = fn(*args)
            keys = names if names is not None else list(outs)
            result["outputs"] = {k: np.asarray(jax.device_get(outs[k])) for k in keys}
            if run_stage == "interpret" and req["detect_races"] and _races_found():
                raise RuntimeError("RACE DETECTED (recorded by the GPU interpreter's get_races())")
            result["poisoned"] = False
    except BaseException as e:  # noqa: BLE001 - every failure is data
        if isinstance(e, KeyboardInterrupt):
            raise
        result.update(
            ok=False,
            stage=stage,
            error_type=type(e).__name__,
            message=str(e),
            traceback="".join(traceback.format_exception(e))[-8000:],
            outputs=None,
        )
        if stage == "interpret":
            _reset_interpret_state()
    return result


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (and JAX's) go to stderr
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    t0 = time.perf_counter()
    import jax
    import numpy  # noqa: F401

    info = {"platform": jax.default_backend(), "devices": jax.device_count()}
    try:
        info["compute_capability"] = getattr(jax.devices()[0], "compute_capability", None)
    except Exception:
        info["compute_capability"] = None
    info["jax"] = jax.__version__
    info["startup"] = time.perf_counter() - t0
    _send(out, {"ready": info})
    while True:
        req = _recv(inp)
        if req is None:
            break
        t = time.perf_counter()
        res = _handle(req, out)
        res["seconds"] = time.perf_counter() - t
        _send(out, {"result": res})


if __name__ == "__main__":
    main()
