"""Run a scenario as several JAX controller processes on this machine.

``probe(scenario, stages, processes=N)`` runs the call the way a cluster runs it (one
JAX process per host, ``jax.distributed``): N local processes, each with its share of
simulated CPU devices, talking through JAX's CPU collectives (gloo) and a coordinator
on a free loopback port. Each runs the very source ``mpmd-lab export`` writes
(``start_processes``, ``mesh_devices``, ``shard``, ``fetch``) up the same ladder as a
single-process run; process 0's outputs are the gathered global ones.

The processes run JAX's HLO interpreter (``interpret=True``): its GPU interpreter
(``InterpretGPUParams``) hung across two processes until killed (jax 0.12, 120 s), so
only what the HLO interpreter runs can run here (``refusal`` says what cannot).

Bounded, cancellable and cleaned up as ``probe`` is: one run at a time (the workers'
lock), each process in a session of its own and armed to die with this one, killed
at the timeout, when one of them dies (the others would wait for it in a collective)
or on ``workers.cancel``; logs and results are unnamed temp files.
"""

from __future__ import annotations

import os
import pickle
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mpmd_lab import workers
from mpmd_lab.probe import ProbeResult, beyond_this_machine, devices_of
from mpmd_lab.scenario import Scenario

_CHILD = Path(__file__).with_name("_multihost_child.py")
#: local processes a run may start (each is a JAX process of its own)
MAX_PROCESSES = 8
#: the interpreter the processes run, and why (the result's ``reason`` says it)
MODE = "hlo"
WHY_HLO = (
    "JAX's HLO interpreter (interpret=True): its GPU interpreter hung across processes "
    "here (jax 0.12)"
)
_STAGE = re.compile(r"\[mpmd-lab\] stage (\S+)")

ProgressFn = Callable[[str, float], None]


def free_port() -> int:
    """A TCP port free on the loopback now (the coordinator binds it on 127.0.0.1 only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def refusal(
    scenario: Scenario, processes: int, local_devices: int | None, analysis: Any = None
) -> str | None:
    """Why the call cannot run as ``processes`` local processes, or None."""
    from mpmd_lab.codegen import cpu_limit_of

    ndev = devices_of(scenario)
    if not 2 <= processes <= MAX_PROCESSES:
        return f"give between 2 and {MAX_PROCESSES} processes (1 is a plain run)"
    if scenario.device_mesh is None or ndev == 1:
        return (
            "the call runs on one device (no device mesh): there is nothing to split over "
            f"{processes} processes; run it as one process"
        )
    per, rest = divmod(ndev, processes)
    if rest or not per:
        return f"the call's {ndev} devices cannot be split evenly over {processes} processes"
    if local_devices is not None and local_devices < per:
        return f"each process needs {per} of the call's {ndev} devices; {local_devices} given"
    too_big = beyond_this_machine(scenario, "cpu")
    if too_big is not None:  # every process makes the inputs' host values
        return too_big
    limit = cpu_limit_of(scenario, MODE, analysis if scenario.run.interpret == MODE else None)
    if limit is not None:
        code, path = limit
        return (
            f"JAX's HLO interpreter cannot run this call ({code} at {path}), and the "
            "processes run it (JAX's GPU interpreter hung across processes here, jax 0.12); "
            "run it as one process (`--backend auto` simulates it)"
        )
    return None


class Controllers:
    """The N processes of one run: started together, killed together."""

    def __init__(self, source: str, stages: Sequence[str], processes: int, local: int):
        self.cancelled = False  # ``workers.cancel`` killed them
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = [tempfile.TemporaryFile(prefix="mpmd-lab-mh-") for _ in range(processes)]
        self.results = [tempfile.TemporaryFile(prefix="mpmd-lab-mh-") for _ in range(processes)]
        request = pickle.dumps({"source": source, "stages": list(stages), "mode": MODE})
        env = workers._env("cpu")
        env["XLA_FLAGS"] += f" --xla_force_host_platform_device_count={local}"
        env["MPMD_LAB_COORDINATOR"] = f"127.0.0.1:{free_port()}"
        env["MPMD_LAB_NUM_PROCESSES"] = str(processes)
        for var in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):  # this run is ours, not theirs
            env.pop(var, None)
        try:
            for i in range(processes):
                fd = self.results[i].fileno()
                p = workers._spawn(
                    [sys.executable, str(_CHILD), str(fd), str(os.getpid())],
                    stdin=subprocess.PIPE,
                    stdout=self.logs[i],
                    stderr=self.logs[i],
                    env={**env, "MPMD_LAB_PROCESS_ID": str(i)},
                    pass_fds=(fd,),
                    start_new_session=True,
                )
                self.procs.append(p)
                assert p.stdin is not None
                p.stdin.write(request)
                p.stdin.close()
        except BaseException:
            self.close()
            raise

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                workers._kill_group(p.pid)

    def close(self) -> None:
        """Kill every process (its whole group), reap it, drop the temp files."""
        self.kill()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for f in self.logs + self.results:
            f.close()

    def wait(self, deadline: float) -> str:
        """``"done"`` (every process exited 0), ``"died"`` (one did not), ``"timeout"``
        or ``"cancelled"``; a process that dies ends the run at once."""
        while time.monotonic() < deadline:
            codes = [p.poll() for p in self.procs]
            if self.cancelled or workers.CANCELLED.is_set():
                return "cancelled"
            if any(c not in (None, 0) for c in codes):
                return "died"
            if all(c == 0 for c in codes):
                return "done"
            time.sleep(0.05)
        return "timeout"

    def result(self, i: int) -> dict[str, Any] | None:
        f = self.results[i]
        f.seek(0)
        data = f.read()
        return pickle.loads(data) if data else None

    def log(self, i: int, limit: int = 1500) -> str:
        return workers._tail(self.logs[i], limit)

    def stage(self) -> str | None:
        """The last stage process 0 entered (from its log)."""
        found = _STAGE.findall(self.log(0, 20_000))
        return found[-1] if found else None

    def died(self) -> tuple[int, str]:
        """The first process that exited with an error, and how."""
        for i, p in enumerate(self.procs):
            rc = p.poll()
            if rc not in (None, 0):
                how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                return i, how
        return 0, "unknown cause"


def probe(
    scenario: Scenario,
    stages: Sequence[str],
    *,
    processes: int,
    local_devices: int | None = None,
    timeout: float = 120.0,
    on_progress: ProgressFn | None = None,
) -> ProbeResult:
    """Run the scenario's call through ``stages`` as ``processes`` JAX processes here,
    each with ``local_devices`` CPU devices (default: its share of the call's).
    Never raises for anything JAX or the processes do; call ``refusal`` first."""
    from mpmd_lab.codegen import CodegenError, generate

    ndev = devices_of(scenario)
    local = local_devices or ndev // processes
    base: dict[str, Any] = {"stages": tuple(stages), "devices": ndev, "platform": "cpu"}
    t0 = time.perf_counter()
    try:
        source = generate(scenario, interpret=MODE, detect_races=False, cpu_limits=False)
    except CodegenError as e:
        return ProbeResult.codegen_failed(e, **base)

    def failed(stage: str | None, type_: str, code: str, message: str, **kw: Any) -> ProbeResult:
        wall = time.perf_counter() - t0
        return ProbeResult(
            ok=False,
            stage=stage or stages[0],
            error_type=type_,
            message=message,
            code=code,
            seconds=wall,
            wall=wall,
            **base,
            **kw,
        )

    with workers._LOCK:  # one run at a time, as the warm workers serve them
        workers.CANCELLED.clear()
        if on_progress is not None:
            on_progress("start", 0.0)
        group = Controllers(source, stages, processes, local)
        workers.busy(group)
        try:
            how = group.wait(time.monotonic() + timeout)
            stage = group.stage()
            if how == "cancelled":
                return failed(
                    stage,
                    "Cancelled",
                    "RUN_CANCELLED",
                    f"the run was cancelled at stage {stage}; its {processes} processes "
                    "were stopped",
                    cancelled=True,
                )
            if how == "timeout":
                return failed(
                    stage,
                    "TimeoutError",
                    "RUN_TIMEOUT",
                    f"the {processes} processes did not finish within {timeout:g} s (at stage "
                    f"{stage}); every one was stopped",
                    timed_out=True,
                )
            if how == "died":
                i, cause = group.died()
                tail = group.log(i)
                return failed(
                    stage,
                    "ChildProcessError",
                    "RUN_CRASHED",
                    f"process {i} of {processes} died ({cause}) at stage {stage}; the others "
                    "were stopped" + (f"; its last output:\n{tail}" if tail else ""),
                    crashed=True,
                )
            results = [group.result(i) for i in range(processes)]
        finally:
            workers.busy(None)
            group.close()
    if on_progress is not None:
        on_progress("done", 1.0)
    wall = time.perf_counter() - t0
    first = results[0]
    if first is None:
        return failed(None, "ChildProcessError", "RUN_CRASHED", "process 0 left no result")
    bad = next((r for r in results if r is not None and not r["ok"]), None)
    res = bad if first["ok"] and bad is not None else first
    return ProbeResult.answered(res, wall=wall, **base)


__all__ = ["MAX_PROCESSES", "MODE", "WHY_HLO", "free_port", "probe", "refusal"]
