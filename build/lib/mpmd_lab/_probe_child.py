"""The warm workers behind ``mpmd_lab.probe``: JAX imported once, many scenarios.

Started by the parent as ``python _probe_child.py FD`` (by path, so it imports
nothing from ``toolkit``): a *zygote* that imports JAX and Pallas without starting
a backend, then forks one worker per (device count) on request. A forked worker
sets its CPU device count, starts JAX's backend (a fraction of a second, against
many seconds for a fresh import) and serves requests on its own socket; both
directions are length-prefixed pickles. Anything the scenario prints goes to a log.

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


def _text(e: BaseException) -> str:
    """``str(e)``, or a stand-in when the exception cannot say what it is."""
    try:
        return str(e)
    except Exception as inner:  # noqa: BLE001
        return f"<str() of {type(e).__name__} failed: {type(inner).__name__}>"


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
            message=_text(e),
            traceback="".join(traceback.format_exception(e))[-8000:],
            outputs=None,
        )
        if stage == "interpret":
            _reset_interpret_state()
    return result


#: Modules a worker needs, imported once in the zygote so forked workers start warm.
_WARM = (
    "jax",
    "jax.export",
    "jax.numpy",
    "numpy",
    "jax.experimental.pallas",
    "jax.experimental.pallas.mosaic_gpu",
    "jax._src.pallas.mosaic_gpu.lowering",
    "jax._src.pallas.mosaic_gpu.pallas_call_registration",
    "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
    "jax._src.pallas.mosaic.interpret.interpret_pallas_call",
    "jax.experimental.mosaic.gpu",
)


def _serve(sock, devices: int, platform: str, stderr_path: str) -> None:
    """A forked worker: set the device count, start JAX's backend, serve requests."""
    try:
        os.setsid()
    except OSError:  # already a session leader (started directly)
        pass
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.dup2(fd, 1)  # stray prints (and JAX's) go to the log
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    stream = sock.makefile("rwb")
    t0 = time.perf_counter()
    import jax

    if devices > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}"
        try:
            jax.config.update("jax_num_cpu_devices", devices)
        except Exception:
            pass
    info = {"platform": jax.default_backend(), "devices": jax.device_count()}
    try:
        info["compute_capability"] = getattr(jax.devices()[0], "compute_capability", None)
    except Exception:
        info["compute_capability"] = None
    info["cpu_devices"] = len(jax.devices("cpu")) if info["platform"] != "cpu" else info["devices"]
    info["jax"] = jax.__version__
    info["startup"] = time.perf_counter() - t0
    _send(stream, {"ready": info})
    while True:
        req = _recv(stream)
        if req is None:
            break
        t = time.perf_counter()
        res = _handle(req, stream)
        res["seconds"] = time.perf_counter() - t
        _send(stream, {"result": res})


def zygote(control_fd: int) -> None:
    """Import JAX once (no backend), then fork a worker per ``spawn`` request.

    Control messages (length-prefixed pickles on a Unix socket): ``{"spawn":
    {"devices", "platform", "stderr"}}`` with the worker's socket passed as a file
    descriptor, answered ``{"pid"}``; ``{"wait": pid}``, answered ``{"status"}``
    (``os.waitpid``'s status, or None).
    """
    import socket

    ctrl = socket.socket(fileno=control_fd)
    for mod in _WARM:
        try:
            __import__(mod)
        except Exception:
            pass
    stream = ctrl.makefile("rwb")
    _send(stream, {"ready": {"pid": os.getpid()}})
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 1 << 16, 4)
        except OSError:
            break
        if not msg:
            break
        (n,) = struct.unpack("<Q", msg[:8])
        body = msg[8:]
        while len(body) < n:
            more = ctrl.recv(n - len(body))
            if not more:
                return
            body += more
        req = pickle.loads(body)
        if "spawn" in req:
            spec = req["spawn"]
            pid = os.fork()
            if pid == 0:
                try:
                    ctrl.close()
                    wsock = socket.socket(fileno=fds[0])
                    _serve(wsock, spec["devices"], spec["platform"], spec["stderr"])
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            _send(stream, {"pid": pid})
        elif "wait" in req:
            try:
                _, status = os.waitpid(req["wait"], 0)
            except ChildProcessError:
                status = None
            _send(stream, {"status": status})


def direct(sock_fd: int, devices: int, platform: str, stderr_path: str) -> None:
    """A worker started as its own process (no zygote): for GPU platforms, where a
    CUDA process must never be forked."""
    import socket

    _serve(socket.socket(fileno=sock_fd), devices, platform, stderr_path)


if __name__ == "__main__":
    if sys.argv[1] == "--direct":
        direct(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        zygote(int(sys.argv[1]))
