"""Ask real JAX about a scenario, stage by stage, in a child process.

``probe(scenario)`` runs the scenario's generated code (``mpmd_lab.codegen.generate``,
the same source ``mpmd-lab export`` writes) in a warm worker process and goes
through the stages in JAX's order:

- ``build``: ``build(None)`` constructs the meshes, scratch types and kernel, jits;
- ``trace``: ``fn.trace(*place(make_inputs(), mesh))``;
- ``gpu-lower``: ``jax.export.export(fn, platforms=["cuda"])(*args)``, the real
  Mosaic GPU lowering, which runs on a CPU-only machine too;
- ``interpret``: ``build(mode)`` and call it on the CPU interpreter, fetch outputs;
- ``gpu-run``: call the compiled kernel on a real GPU (a GPU worker only).

The first failure stops it and comes back as data (``ProbeResult``): the stage, the
exception's type name, its exact message and its code (``catalogue.classify``).
A hang is killed at the timeout (``RUN_TIMEOUT``), a dead child is ``RUN_CRASHED``;
either way the next probe gets a fresh worker. Workers are kept warm, one per
(device count, platform), so JAX is imported once per worker, not once per probe.
"""

from __future__ import annotations

import atexit
import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mpmd_lab.catalogue import classify
from mpmd_lab.scenario import Scenario

STAGES = ("build", "trace", "gpu-lower", "interpret", "gpu-run")
DEFAULT_STAGES = ("build", "trace", "gpu-lower")
#: Code of a scenario the code generator cannot write as a JAX call.
CODEGEN_CODE = "CODEGEN"
#: Seconds a fresh worker may take to import JAX (not counted in a probe's timeout).
STARTUP_TIMEOUT = 180.0
#: Workers kept warm at once (forked from the zygote: they share most memory).
MAX_WORKERS = 3
#: Requests one worker serves before it is replaced (bounds JAX's caches).
MAX_REQUESTS = 200

_CHILD = Path(__file__).with_name("_probe_child.py")

ProgressFn = Callable[[str, float], None]


@dataclass
class ProbeResult:
    """What JAX did with a scenario: ok, or where and how it failed."""

    ok: bool
    stage: str | None = None  # the stage that failed (None when ok)
    error_type: str | None = None
    message: str | None = None  # exact str(exception)
    code: str | None = None
    outputs: dict[str, np.ndarray] | None = None
    seconds: float = 0.0
    timed_out: bool = False
    crashed: bool = False
    stages: tuple[str, ...] = ()
    devices: int = 1
    platform: str = "cpu"
    path: str = ""  # a field path, for codegen failures
    traceback: str | None = field(default=None, repr=False)

    def error(self) -> dict[str, Any] | None:
        """``{"code", "type", "message", "stage"}`` (the ``run --json`` error) or None."""
        if self.ok:
            return None
        return {
            "code": self.code,
            "type": self.error_type,
            "message": self.message,
            "stage": self.stage,
        }


# ---------------------------------------------------------------- wire format


class _Timeout(Exception):
    pass


class _Dead(Exception):
    pass


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Timeout
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise _Dead
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int, deadline: float) -> Any:
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


# ---------------------------------------------------------------- workers


def _env(platform: str) -> dict[str, str]:
    env = dict(os.environ)
    # the device count is set per worker; a count inherited from the caller would clash
    env["XLA_FLAGS"] = re.sub(
        r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", "")
    ).strip()
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Zygote:
    """A child that has imported JAX (no backend) and forks workers on request."""

    def __init__(self, platform: str):
        self.platform = platform
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._log = tempfile.NamedTemporaryFile(prefix="mpmd-lab-zygote-", suffix=".log")
        self.proc = subprocess.Popen(
            [sys.executable, str(_CHILD), str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=_env(platform),
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        self.sock = ours
        try:
            self._reply(time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Dead) as e:
            self.close()
            raise RuntimeError(f"the JAX worker did not start: {self.log_tail()}") from e

    def _reply(self, deadline: float) -> dict[str, Any]:
        return _recv(self.sock.fileno(), deadline)

    def _ask(self, msg: dict[str, Any], fds: Sequence[int] = (), timeout: float = 60.0):
        data = pickle.dumps(msg)
        frame = struct.pack("<Q", len(data)) + data
        try:
            if fds:
                socket.send_fds(self.sock, [frame], list(fds))
            else:
                self.sock.sendall(frame)
            return self._reply(time.monotonic() + timeout)
        except OSError as e:
            raise _Dead from e

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 2000) -> str:
        return _tail(self._log.name, limit)

    def spawn(self, devices: int, log_path: str) -> tuple[int, socket.socket]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            spec = {"devices": devices, "platform": self.platform, "stderr": log_path}
            reply = self._ask({"spawn": spec}, [theirs.fileno()])
        finally:
            theirs.close()
        return reply["pid"], ours

    def wait(self, pid: int) -> int | None:
        """Reap a worker (the zygote is its parent): its ``waitpid`` status."""
        try:
            return self._ask({"wait": pid}, timeout=30.0).get("status")
        except (_Timeout, _Dead):
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        self._log.close()


def _tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


_ZYGOTES: dict[str, _Zygote] = {}


def _zygote(platform: str) -> _Zygote:
    z = _ZYGOTES.get(platform)
    if z is None or not z.alive():
        if z is not None:
            z.close()
        z = _ZYGOTES[platform] = _Zygote(platform)
    return z


def _use_zygote(platform: str) -> bool:
    """Fork workers from a zygote (CPU), or start each as a process (a GPU platform,
    or ``MPMD_LAB_FORK=0``, or not Linux): a process that may touch CUDA is never forked."""
    fork_ok = sys.platform.startswith("linux") and os.environ.get("MPMD_LAB_FORK", "1") != "0"
    return platform == "cpu" and fork_ok


class Worker:
    """One JAX process for one (device count, platform): forked from the zygote on
    the CPU, a process of its own otherwise."""

    def __init__(self, devices: int, platform: str = "cpu"):
        self.devices = devices
        self.platform = platform
        self.requests = 0
        self.last_stage: str | None = None
        self.status: int | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="mpmd-lab-worker-", suffix=".log")
        self.zygote: _Zygote | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if _use_zygote(platform):
            self.zygote = _zygote(platform)
            try:
                self.pid, self.sock = self.zygote.spawn(devices, self._log.name)
            except (_Timeout, _Dead) as e:
                self.zygote.close()
                raise RuntimeError(f"the JAX worker did not start: {self.zygote.log_tail()}") from e
        else:
            self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            fd = theirs.fileno()
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(_CHILD),
                    "--direct",
                    str(fd),
                    str(devices),
                    platform,
                    self._log.name,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_env(platform),
                pass_fds=(fd,),
                start_new_session=True,
            )
            theirs.close()
            self.pid = self.proc.pid
        self._dead = False
        try:
            msg = _recv(self.sock.fileno(), time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Dead) as e:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"the JAX worker did not start: {tail or type(e).__name__}") from e
        self.info: dict[str, Any] = msg.get("ready", {})

    def alive(self) -> bool:
        return not self._dead

    def stderr_tail(self, limit: int = 2000) -> str:
        return _tail(self._log.name, limit)

    def request(
        self, req: dict[str, Any], timeout: float, on_stage: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send one request; the child's result dict. Raises _Timeout or _Dead."""
        self.requests += 1
        data = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.sendall(struct.pack("<Q", len(data)) + data)
        except OSError as e:
            raise _Dead from e
        deadline = time.monotonic() + timeout
        fd = self.sock.fileno()
        while True:
            try:
                msg = _recv(fd, deadline)
            except (EOFError, pickle.UnpicklingError, struct.error) as e:
                raise _Dead from e
            if "progress" in msg:
                self.last_stage = msg["progress"]
                if on_stage:
                    on_stage(msg["progress"])
                continue
            return msg["result"]

    def close(self) -> None:
        """Kill the worker (its whole process group) and reap it."""
        if not self._dead:
            self._dead = True
            _kill_group(self.pid)
            if self.zygote is not None:
                self.status = self.zygote.wait(self.pid)
            elif self.proc is not None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                rc = self.proc.returncode
                # a Popen return code as a waitpid status, for exit_reason
                self.status = None if rc is None else (-rc if rc < 0 else rc << 8)
        self.sock.close()
        self._log.close()

    def exit_reason(self) -> str:
        """How a dead worker ended (after ``close``), e.g. ``signal SIGSEGV``."""
        st = self.status
        if st is None:
            return "unknown cause"
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            try:
                return f"signal {signal.Signals(sig).name}"
            except ValueError:
                return f"signal {sig}"
        return f"exit status {os.WEXITSTATUS(st)}"


_LOCK = threading.RLock()
_POOL: dict[tuple[int, str], Worker] = {}


def _worker(devices: int, platform: str) -> Worker:
    key = (devices, platform)
    w = _POOL.pop(key, None)
    if w is not None and (not w.alive() or w.requests >= MAX_REQUESTS):
        w.close()
        w = None
    if w is None:
        while len(_POOL) >= MAX_WORKERS:
            _POOL.pop(next(iter(_POOL))).close()
        w = Worker(devices, platform)
    _POOL[key] = w  # most recently used last
    return w


def _discard(w: Worker) -> None:
    if _POOL.get((w.devices, w.platform)) is w:
        del _POOL[(w.devices, w.platform)]
    w.close()


def shutdown() -> None:
    """Stop every warm worker and the zygotes."""
    with _LOCK:
        while _POOL:
            _POOL.popitem()[1].close()
        while _ZYGOTES:
            _ZYGOTES.popitem()[1].close()


atexit.register(shutdown)


def worker_info(devices: int = 1, platform: str = "cpu") -> dict[str, Any]:
    """What a worker found at start: ``platform``, ``devices``, ``compute_capability``, ``jax``."""
    with _LOCK:
        return dict(_worker(devices, platform).info)


# ---------------------------------------------------------------- probing


def devices_of(scenario: Scenario) -> int:
    """Devices the scenario's call needs (1 without a device mesh)."""
    return scenario.num_devices if scenario.device_mesh is not None else 1


def _norm_stages(stages: Iterable[str]) -> tuple[str, ...]:
    wanted = set(stages)
    unknown = wanted - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; stages are {STAGES}")
    return tuple(s for s in STAGES if s in wanted)


#: Python errors of the generated code itself (a name the scenario never defines...).
_SOURCE_ERRORS = frozenset({"SyntaxError", "NameError", "UnboundLocalError", "CodegenError"})


def not_from_jax(r: ProbeResult) -> bool:
    """Whether a failure is the scenario's own (codegen or Python), not JAX's verdict.

    Then ``mpmd_lab.validate``'s schema-stage rules (unknown names, duplicates) say
    more than JAX could: the call never reached it.
    """
    return not r.ok and r.code in (CODEGEN_CODE, "JAX_UNKNOWN") and r.error_type in _SOURCE_ERRORS


def _code(error_type: str, message: str) -> str:
    return classify(error_type, message) or "JAX_UNKNOWN"


#: Simulated CPU devices a worker may start with (each holds its own copy of the data).
MAX_SIMULATED_DEVICES = 64


def host_bytes(scenario: Scenario) -> int:
    """Host memory a probe needs, roughly: inputs (host value + placed copy) and outputs."""
    from mpmd_lab.dtypes import nbytes

    ndev = devices_of(scenario)
    inputs = sum(nbytes(b.shape, b.dtype) for b in scenario.buffers.values())
    outputs = sum(nbytes(o.shape, o.dtype) for o in scenario.call.outputs.values())
    return ndev * (2 * inputs + outputs)


def beyond_this_machine(scenario: Scenario, platform: str = "cpu") -> str | None:
    """Why a worker must not even try this scenario here (memory, simulated devices), or None.

    A buffer of a few GiB is a scenario (a GPU holds it), but building its inputs on a
    host without the memory would take the machine down instead of failing.
    """
    ndev = devices_of(scenario)
    if platform == "cpu" and ndev > MAX_SIMULATED_DEVICES:
        return (
            f"{ndev} devices: more than the {MAX_SIMULATED_DEVICES} this machine can simulate "
            "on its CPU"
        )
    need = host_bytes(scenario)
    try:
        import psutil

        free = psutil.virtual_memory().available
    except Exception:  # noqa: BLE001 - no psutil: assume a small machine
        free = 8 * 2**30
    if need > free // 2:
        return (
            f"the call's inputs and outputs need about {need / 2**30:.1f} GiB of host memory; "
            f"this machine has {free / 2**30:.1f} GiB free"
        )
    return None


def probe(
    scenario: Scenario,
    stages: Sequence[str] = DEFAULT_STAGES,
    *,
    timeout: float = 60.0,
    interpret: str | None = None,
    detect_races: bool | None = None,
    platform: str = "cpu",
    on_progress: ProgressFn | None = None,
) -> ProbeResult:
    """Run the scenario through ``stages`` with real JAX in a warm child process.

    ``interpret`` / ``detect_races`` override the scenario's ``run`` settings for the
    interpret stage; ``platform="default"`` lets the child use a GPU (for ``gpu-run``).
    Never raises for anything JAX or the child does.
    """
    from mpmd_lab.codegen import CodegenError, generate

    stages = _norm_stages(stages)
    mode = interpret if interpret is not None else scenario.run.interpret
    races = scenario.run.detect_races if detect_races is None else detect_races
    ndev = devices_of(scenario)
    base = {"stages": stages, "devices": ndev, "platform": platform}
    t0 = time.perf_counter()
    try:
        source = generate(scenario, interpret=mode, detect_races=races)
    except CodegenError as e:
        return ProbeResult(
            ok=False,
            stage="build",
            error_type="CodegenError",
            message=str(e),
            code=CODEGEN_CODE,
            path=e.path,
            seconds=time.perf_counter() - t0,
            **base,
        )
    too_big = beyond_this_machine(scenario, platform)
    if too_big:
        return ProbeResult(
            ok=False,
            stage=stages[0],
            error_type="MemoryError",
            message=too_big,
            code="INTERP_LIMIT",
            seconds=time.perf_counter() - t0,
            **base,
        )
    req = {"source": source, "stages": stages, "mode": mode, "detect_races": bool(races)}
    steps = len(stages) + 1

    def on_stage(stage: str) -> None:
        if on_progress is not None and stage in stages:
            on_progress(stage, (stages.index(stage) + 1) / steps)

    with _LOCK:
        if on_progress is not None:
            on_progress("start", 0.0)
        try:
            w = _worker(ndev, platform)
        except RuntimeError as e:
            return ProbeResult(
                ok=False,
                stage=stages[0],
                error_type="RuntimeError",
                message=str(e),
                code="RUN_CRASHED",
                crashed=True,
                seconds=time.perf_counter() - t0,
                **base,
            )
        base["platform"] = w.info.get("platform", platform)
        w.last_stage = stages[0]
        try:
            res = w.request(req, timeout, on_stage)
        except _Timeout:
            stage = w.last_stage
            _discard(w)
            return ProbeResult(
                ok=False,
                stage=stage,
                error_type="TimeoutError",
                message=f"no answer from JAX after {timeout:g} s (at stage {stage}); "
                "the child process was stopped",
                code="RUN_TIMEOUT",
                timed_out=True,
                seconds=time.perf_counter() - t0,
                **base,
            )
        except _Dead:
            stage = w.last_stage
            tail = w.stderr_tail(1500)
            _discard(w)
            how = w.exit_reason()
            msg = f"the child process running JAX died ({how}) at stage {stage}"
            return ProbeResult(
                ok=False,
                stage=stage,
                error_type="ChildProcessError",
                message=msg + (f"; its last output:\n{tail}" if tail else ""),
                code="RUN_CRASHED",
                crashed=True,
                seconds=time.perf_counter() - t0,
                **base,
            )
        except BaseException:
            # interrupted (Ctrl-C in a notebook, an on_progress that raised): the worker
            # is mid-request and its answer would reach the next caller, so it goes
            _discard(w)
            raise
        if res.get("poisoned"):
            _discard(w)
    if on_progress is not None:
        on_progress("done", 1.0)
    if res["ok"]:
        return ProbeResult(ok=True, outputs=res["outputs"], seconds=res["seconds"], **base)
    return ProbeResult(
        ok=False,
        stage=res["stage"],
        error_type=res["error_type"],
        message=res["message"],
        code=_code(res["error_type"], res["message"]),
        seconds=res["seconds"],
        traceback=res.get("traceback"),
        **base,
    )


def probe_many(
    scenarios: Sequence[Scenario],
    stages: Sequence[str] = DEFAULT_STAGES,
    *,
    timeout: float = 60.0,
    interpret: str | None = None,
    detect_races: bool | None = None,
    platform: str = "cpu",
) -> list[ProbeResult]:
    """``probe`` each scenario (results in input order), grouped by device count so
    each warm worker serves a run of scenarios."""
    order = sorted(range(len(scenarios)), key=lambda i: devices_of(scenarios[i]))
    results: list[ProbeResult | None] = [None] * len(scenarios)
    for i in order:
        results[i] = probe(
            scenarios[i],
            stages,
            timeout=timeout,
            interpret=interpret,
            detect_races=detect_races,
            platform=platform,
        )
    return results  # type: ignore[return-value]


__all__ = [
    "CODEGEN_CODE",
    "DEFAULT_STAGES",
    "STAGES",
    "ProbeResult",
    "Worker",
    "devices_of",
    "not_from_jax",
    "probe",
    "probe_many",
    "shutdown",
    "worker_info",
]
