"""The simulate backend where a run belongs: a child process, with the timeout, memory
bound and cancel of the JAX backends (:mod:`mpmd_lab.probe`).

``simulate_in_child(scenario, timeout=...)`` sends the scenario to a warm worker (``python
-m mpmd_lab.engine.child``; started once, reused) and waits for its ``SimResult`` at most
``timeout`` seconds: past it, or when the caller is interrupted (Ctrl-C, a cancelled
thread), the worker is killed (its whole process group) and the next run starts a fresh
one. The worker's address space is bounded (``RLIMIT_AS``: what it holds at rest plus
the simulator's memory limit), so a run that outgrows its estimate ends as
``SIM_TOO_LARGE``, not as the machine's OOM killer. The worker dies with its parent
(a parent-death signal and a watch on the parent's socket): a killed notebook kernel or
CLI leaves nothing running.

The wire format and the process lifecycle are the JAX workers' (:mod:`mpmd_lab.workers`,
:mod:`mpmd_lab._probe_child`): length-prefixed pickles on a Unix socket, a child started
from a long-lived thread, killed with its process group.
"""

from __future__ import annotations

import atexit
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

#: Seconds a fresh worker may take to start (import numpy and mpmd_lab).
STARTUP_TIMEOUT = 60.0
#: Runs one worker serves before it is replaced (bounds what it caches).
MAX_RUNS = 100

_LOCK = threading.RLock()
_WORKER: _Worker | None = None


class _Worker:
    def __init__(self) -> None:
        from mpmd_lab import workers

        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.fileno()
        env = dict(os.environ)
        self.proc = workers._spawn(
            [sys.executable, "-m", "mpmd_lab.engine.child", str(fd), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            pass_fds=(fd,),
            start_new_session=True,
        )
        theirs.close()
        self.runs = 0
        try:
            workers._recv(self.sock.fileno(), time.monotonic() + STARTUP_TIMEOUT)
        except (workers._Timeout, workers._Dead) as e:
            self.close()
            raise RuntimeError("the simulate worker did not start") from e

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        from mpmd_lab import workers

        self.runs += 1
        data = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.sendall(struct.pack("<Q", len(data)) + data)
        except OSError as e:
            raise workers._Dead from e
        return workers._recv(self.sock.fileno(), time.monotonic() + timeout)

    def close(self) -> None:
        from mpmd_lab import workers

        if self.proc.poll() is None:
            workers._kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()


def shutdown() -> None:
    """Stop the warm worker."""
    global _WORKER
    with _LOCK:
        if _WORKER is not None:
            _WORKER.close()
            _WORKER = None


atexit.register(shutdown)


def _error(scenario: Any, code: str, message: str, seconds: float) -> Any:
    from mpmd_lab.diagnostics import Diagnostic
    from mpmd_lab.simulator import SimResult

    d = Diagnostic(code=code, stage="simulate", path="", message=message)
    return SimResult("error", scenario.num_devices, error=d, seconds=seconds)


def simulate_in_child(
    scenario: Any,
    *,
    diagnostics: Any = None,
    timeout: float = 120.0,
    program_id: str = "grid",
    past_lowering: bool = False,
) -> Any:
    """``mpmd_lab.simulator.simulate`` in a warm child process, bounded by ``timeout``
    seconds (``RUN_TIMEOUT``) and the simulator's memory limit; a dead child is
    ``RUN_CRASHED``. Never raises for what the run does; an interrupt kills the child.
    ``past_lowering``: as ``simulate``'s (a GPU-lowering error kept, not stopping it)."""
    from mpmd_lab import workers

    global _WORKER
    start = time.perf_counter()
    req = {
        "scenario": scenario.to_dict(),
        "diagnostics": None if diagnostics is None else [d.model_dump() for d in diagnostics],
        "timeout": float(timeout),
        "program_id": program_id,
        "past_lowering": bool(past_lowering),
    }
    with _LOCK:
        try:
            if _WORKER is None or not _WORKER.alive() or _WORKER.runs >= MAX_RUNS:
                if _WORKER is not None:
                    _WORKER.close()
                _WORKER = _Worker()
            w = _WORKER
            startup = time.perf_counter() - start  # the one-off start, not the run's
        except RuntimeError as e:
            _WORKER = None
            return _error(scenario, "RUN_CRASHED", str(e), time.perf_counter() - start)
        try:
            reply = w.request(req, timeout + 5.0)
        except workers._Timeout:
            w.close()
            _WORKER = None
            return _error(
                scenario,
                "RUN_TIMEOUT",
                f"the simulation did not finish in {timeout:g} s; the child process was stopped",
                time.perf_counter() - start,
            )
        except (workers._Dead, EOFError, pickle.UnpicklingError, struct.error):
            try:
                rc = w.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                rc = None
            w.close()
            _WORKER = None
            how = (
                "it closed its pipe"
                if rc is None
                else f"exit status {rc}"
                if rc >= 0
                else f"signal {-rc}"
            )
            return _error(
                scenario,
                "RUN_CRASHED",
                f"the child process running the simulation died ({how})",
                time.perf_counter() - start,
            )
        except BaseException:
            # interrupted (Ctrl-C, a cancelled run): the child is mid-run and its answer
            # would reach the next caller, so it goes
            w.close()
            _WORKER = None
            raise
    result = reply["result"]
    result.seconds = time.perf_counter() - start - startup
    result.startup = startup
    return result


# ---------------------------------------------------------------- the child


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _bound_memory() -> None:
    """The address space this process may grow to: what it holds now plus the
    simulator's memory limit (a MemoryError past it, reported as SIM_TOO_LARGE)."""
    try:
        import resource

        from mpmd_lab.simulator import memory_limit

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = _vm_size() + memory_limit() + (1 << 30)
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ImportError, ValueError, OSError):
        pass


def _send(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("<Q", len(data)))
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def serve(fd: int, parent: int) -> None:
    """The worker: import the simulator once, then run each request it is sent."""
    from mpmd_lab._probe_child import die_with_parent, watch_parent

    die_with_parent(parent)
    sock = socket.socket(fileno=fd)
    watch_parent(sock)
    from mpmd_lab.diagnostics import Diagnostic
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.simulator import simulate

    _bound_memory()
    _send(sock, {"ready": os.getpid()})
    while True:
        head = _recv_exact(sock, 8)
        if head is None:
            return
        body = _recv_exact(sock, struct.unpack("<Q", head)[0])
        if body is None:
            return
        req = pickle.loads(body)
        s = load_scenario(req["scenario"])
        diags = req["diagnostics"]
        if diags is not None:
            diags = [Diagnostic.model_validate(d) for d in diags]
        timeout = req["timeout"]
        # the engine stops early enough for the answer (its access log) to be sent back
        # within the caller's timeout
        bound = max(0.05, timeout - min(3.0, 0.2 * timeout))
        try:
            res = simulate(
                s,
                diagnostics=diags,
                program_id=req["program_id"],
                max_seconds=bound,
                past_lowering=req.get("past_lowering", False),
            )
            if res.error is not None and res.error.code == "RUN_TIMEOUT":
                said = res.error.message.replace(
                    f"did not finish in {bound:g} s", f"did not finish in {timeout:g} s"
                )
                res.error = res.error.model_copy(update={"message": said})
        except MemoryError:
            res = None
        if res is None:
            from mpmd_lab.simulator import SimResult

            d = Diagnostic(
                code="SIM_TOO_LARGE",
                stage="simulate",
                path="buffers",
                message="the simulation ran out of the memory it may use (MemoryError)",
            )
            res = SimResult("error", s.num_devices, error=d)
        res.memory = {}  # the per-buffer storage stays here: outputs and log go back
        try:
            _send(sock, {"result": res})
        except MemoryError:
            res.log = type(res.log)(0)
            _send(sock, {"result": res})


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)
