"""The warm workers behind ``mpmd_lab.probe``: JAX imported once, many scenarios.

Started by the parent as ``python _probe_child.py FD`` (by path, so it imports
nothing from ``toolkit``): a *zygote* that imports JAX and Pallas without starting
a backend, then forks one worker per (device count) on request. A forked worker
sets its CPU device count, starts JAX's backend (a fraction of a second, against
many seconds for a fresh import) and serves requests on its own socket; both
directions are length-prefixed pickles. Anything the scenario prints goes to a log
(an unnamed temp file the parent passes as a file descriptor: nothing to leave behind).

Every process here dies with its parent: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on
Linux (the zygote's parent is the caller, a worker's the zygote), and a watchdog on
the parent's socket (a hang-up means the parent is gone) in each worker, so a killed
CLI or notebook kernel never leaves a worker running a kernel with ppid 1.

Request: ``{"source", "stages", "mode", "detect_races"}``. While it works the child
sends ``{"progress": stage}``; at the end ``{"result": {...}}`` with ``ok``,
``stage`` (where it failed), ``error_type``, ``message`` (exact ``str(exc)``),
``outputs`` (numpy, declared order) and ``poisoned`` (GPU-interpret state may be
unusable: the parent restarts this worker).
"""

import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Get SIGKILL when the parent ends (Linux); end now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(0)


def watch_parent(sock) -> None:
    """A daemon thread that ends this process when the parent's end of ``sock`` hangs
    up (the parent exited or was killed), even while a kernel keeps the main thread busy."""
    mask = select.POLLHUP | select.POLLERR | select.POLLNVAL | getattr(select, "POLLRDHUP", 0)

    def watch() -> None:
        poller = select.poll()
        poller.register(sock.fileno(), mask & ~(select.POLLHUP | select.POLLERR))
        while True:
            for _, events in poller.poll():
                if events & mask:
                    os._exit(0)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _send(out, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)))  # apart: no second copy of a large result
    out.write(data)
    out.flush()


def _recv(inp):
    head = inp.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(inp.read(n))


def _ladder():
    """``mpmd_lab.ladder``, loaded by path (this child imports nothing of the package)."""
    mod = sys.modules.get("mpmd_lab_ladder")
    if mod is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ladder.py")
        spec = importlib.util.spec_from_file_location("mpmd_lab_ladder", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["mpmd_lab_ladder"] = mod
        spec.loader.exec_module(mod)
    return mod


def _handle(req, out):
    """One request up the ladder; progress is sent as each stage starts."""
    return _ladder().climb(
        req["source"],
        list(req["stages"]),
        mode=req["mode"],
        detect_races=bool(req["detect_races"]),
        on_stage=lambda s: _send(out, {"progress": s}),
        reuse=bool(req.get("reuse")),
    )


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


def _serve(sock, devices: int, platform: str, log_fd: int) -> None:
    """A worker: set the device count, start JAX's backend, serve requests until the
    parent closes the socket (or goes: ``watch_parent``)."""
    try:
        os.setsid()
    except OSError:  # already a session leader (started directly)
        pass
    os.dup2(log_fd, 2)
    os.dup2(log_fd, 1)  # stray prints (and JAX's) go to the log
    os.close(log_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    watch_parent(sock)
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


def zygote(control_fd: int, parent: int) -> None:
    """Import JAX once (no backend), then fork a worker per ``spawn`` request; end when
    the parent closes the control socket (or dies: the death signal).

    Control messages (length-prefixed pickles on a Unix socket): ``{"spawn":
    {"devices", "platform"}}`` with the worker's socket and its log passed as file
    descriptors, answered ``{"pid"}``; ``{"wait": pid}``, answered ``{"status"}``
    (``os.waitpid``'s status, or None).
    """
    import socket

    die_with_parent(parent)
    me = os.getpid()
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
                    die_with_parent(me)
                    ctrl.close()
                    wsock = socket.socket(fileno=fds[0])
                    _serve(wsock, spec["devices"], spec["platform"], fds[1])
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


def direct(sock_fd: int, devices: int, platform: str, log_fd: int, parent: int) -> None:
    """A worker started as its own process (no zygote): for GPU platforms, where a
    CUDA process must never be forked."""
    import socket

    die_with_parent(parent)
    _serve(socket.socket(fileno=sock_fd), devices, platform, log_fd)


if __name__ == "__main__":
    # python _probe_child.py CONTROL_FD PARENT_PID
    # python _probe_child.py --direct SOCK_FD DEVICES PLATFORM LOG_FD PARENT_PID
    argv = sys.argv[1:]
    try:
        if argv[0] == "--direct":
            direct(int(argv[1]), int(argv[2]), argv[3], int(argv[4]), int(argv[5]))
        else:
            zygote(int(argv[0]), int(argv[1]))
    except BaseException:  # noqa: BLE001 - into the log, for the parent's message
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)  # no interpreter shutdown (JAX's atexit hooks) once the parent is gone
