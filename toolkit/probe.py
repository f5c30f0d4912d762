"""Ask real JAX about a scenario, stage by stage, in a child process.

``probe(scenario)`` runs the scenario's generated code (``toolkit.codegen.generate``,
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

from toolkit.catalogue import classify
from toolkit.scenario import Scenario

STAGES = ("build", "trace", "gpu-lower", "interpret", "gpu-run")
DEFAULT_STAGES = ("build", "trace", "gpu-lower")
#: Code of a scenario the code generator cannot write as a JAX call.
CODEGEN_CODE = "CODEGEN"
#: Seconds a fresh worker may take to import JAX (not counted in a probe's timeout).
STARTUP_TIMEOUT = 180.0
#: Workers kept warm at once (each holds a JAX process, ~300 MB).
MAX_WORKERS = 2
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


def _send(stream, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


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


def _xla_flags(ndev: int) -> str:
    flags = re.sub(
        r"--xla_force_host_platform_device_count=\S*", "", os.environ.get("XLA_FLAGS", "")
    ).strip()
    if ndev > 1:
        flags = f"{flags} --xla_force_host_platform_device_count={ndev}".strip()
    return flags


class Worker:
    """One child JAX process for one (device count, platform)."""

    def __init__(self, devices: int, platform: str = "cpu"):
        self.devices = devices
        self.platform = platform
        self.requests = 0
        self.info: dict[str, Any] = {}
        env = dict(os.environ)
        env["XLA_FLAGS"] = _xla_flags(devices)
        if platform == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, str(_CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        try:
            msg = _recv(self.proc.stdout.fileno(), time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Dead, EOFError, pickle.UnpicklingError) as e:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"the JAX worker did not start: {tail or type(e).__name__}") from e
        self.info = msg.get("ready", {})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def request(
        self, req: dict[str, Any], timeout: float, on_stage: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send one request; the child's result dict. Raises _Timeout or _Dead."""
        self.requests += 1
        try:
            _send(self.proc.stdin, req)
        except (BrokenPipeError, OSError) as e:
            raise _Dead from e
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
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

    last_stage: str | None = None

    def close(self) -> None:
        """Kill the child (its whole process group) and wait for it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except OSError:
                pass
        try:
            self._stderr.close()
        except OSError:
            pass


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
    _POOL.pop((w.devices, w.platform), None)
    w.close()


def shutdown() -> None:
    """Stop every warm worker."""
    with _LOCK:
        while _POOL:
            _POOL.popitem()[1].close()


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


def _code(error_type: str, message: str) -> str:
    return classify(error_type, message) or "JAX_UNKNOWN"


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
    from toolkit.codegen import CodegenError, generate

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
            w.proc.poll()
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            rc = w.proc.returncode
            how = (
                f"signal {signal.Signals(-rc).name}"
                if rc is not None and rc < 0 and -rc in signal.Signals._value2member_map_
                else f"exit status {rc}"
            )
            tail = w.stderr_tail(1500)
            _discard(w)
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
    "probe",
    "probe_many",
    "shutdown",
    "worker_info",
]
