"""Run a scenario on the real Pallas runtime: a GPU, or a CPU interpreter.

``run(scenario, backend)`` builds the scenario's call (``mpmd_lab.codegen``) and runs
it in a warm child process (``mpmd_lab.probe``), so a different device count, a hang
or a crash never touches the caller's JAX. Backends:

- ``gpu``: compile and run on a CUDA GPU;
- ``interpret``: first lower for the GPU (what runs here also compiles for one; a
  lowering error stops the run), then run the scenario's CPU interpreter
  (``run.interpret``, ``run.detect_races``);
- ``auto``: ``gpu`` when a CUDA GPU of compute capability 9.0 or more is present;
  else ``interpret`` where JAX's CPU interpreter can run the call; else ``simulate``
  (the static check knows what the interpreters cannot run: remote and multicast
  refs, several devices' traffic). The result says which ran and why (``reason``);
- ``simulate``: ``mpmd_lab.simulator.simulate(scenario)`` (cross-device traffic model), in
  a child process with the same timeout and cancel as the JAX backends.

The result is data (``RunResult``), in the ``run --json`` form of docs/SCENARIO.md; its
error is a :class:`~mpmd_lab.diagnostics.Diagnostic`.
"""

from __future__ import annotations

import functools
import glob
import math
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from mpmd_lab import probe
from mpmd_lab.callsupport import encode_outputs
from mpmd_lab.catalogue import unwrap
from mpmd_lab.diagnostics import STAGES, Diagnostic, JaxError, interpreter_limit
from mpmd_lab.scenario import Scenario

Backend = Literal["auto", "gpu", "interpret", "simulate"]
BACKENDS = ("auto", "gpu", "interpret", "simulate")
#: Oldest GPU ``auto`` runs on (Hopper: what Mosaic GPU targets).
MIN_COMPUTE_CAPABILITY = 9.0
INTERPRET_STAGES = ("build", "trace", "gpu-lower", "interpret")
GPU_STAGES = ("build", "trace", "gpu-run")

ProgressFn = Callable[[str, float], None]


@dataclass
class RunResult:
    """The outcome of one run: status, backend, error (or None) and numpy outputs."""

    scenario: str
    status: Literal["ok", "error"]
    backend: str
    devices: int
    error: Diagnostic | None = None
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    #: the backend's own result where it has more to say (``simulate``: its SimResult)
    detail: Any = field(default=None, repr=False)
    #: why this backend ran (``auto`` chose it), "" when asked for by name
    reason: str = ""
    #: the warm worker ran the call it had built for this very scenario before
    cached: bool = False
    #: seconds spent starting JAX for this run (0 when a warm worker served it)
    startup_seconds: float = 0.0
    #: seconds from asking to the answer, all in (``seconds``: the call itself)
    wall_seconds: float = 0.0
    #: seconds of the static check ``run`` made first (0 when the caller gave its analysis)
    check_seconds: float = 0.0
    #: the GPU-lowering error a simulation ran past (``run(..., past_lowering=True)``)
    lowering: Diagnostic | None = None

    def timing(self) -> str:
        """What the time covers: ``"the call 1.29 s · JAX start-up 5.10 s · 8.00 s in all"``."""
        what = "simulated" if self.backend == "simulate" else "the call"
        parts = [f"{what} {_secs(self.seconds)}"]
        if self.cached:
            parts[0] += " (built before)"
        if self.startup_seconds >= 0.005 and self.backend == "simulate":
            parts.append(f"simulator start-up {_secs(self.startup_seconds)} (once)")
        elif self.startup_seconds >= 0.005:
            parts.append(f"JAX start-up {_secs(self.startup_seconds)} (once per device count)")
        if self.check_seconds >= 0.005:
            parts.append(f"static check {_secs(self.check_seconds)}")
        if self.wall_seconds > self.seconds + 0.005:
            parts.append(f"{_secs(self.wall_seconds)} in all (building and tracing included)")
        return " · ".join(parts)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """The ``run --json`` object of docs/SCENARIO.md (a JSON-ready dict)."""
        out = {
            "status": self.status,
            "backend": self.backend,
            "reason": self.reason,
            "devices": self.devices,
            "error": self.error.error_json() if self.error else None,
            "outputs": encode_outputs(self.outputs),
            "seconds": round(self.seconds, 4),
            "startup_seconds": round(self.startup_seconds, 4),
            "wall_seconds": round(self.wall_seconds, 4),
            "check_seconds": round(self.check_seconds, 4),
            "cached": self.cached,
        }
        to_json = getattr(self.detail, "to_json", None)
        if to_json is not None:  # simulate adds ``note`` and ``races``
            out.update({k: v for k, v in to_json().items() if k in ("note", "races")})
        if self.lowering is not None:
            out["lowering_error"] = self.lowering.error_json()
        return out

    def races(self) -> list[dict[str, Any]]:
        """The races the simulator saw (``run --json``'s ``races``), [] for other backends."""
        to_json = getattr(self.detail, "to_json", None)
        return list((to_json() if to_json is not None else {}).get("races") or [])

    def race_lines(self, limit: int = 3) -> list[str]:
        """The races in a few lines: how many of each kind on each buffer, and one each."""
        return race_summary(self.races(), limit)

    def diagnostic(self) -> Diagnostic | None:
        """The error as a Diagnostic whose message is ``Type: message`` (None when ok)."""
        if self.error is None:
            return None
        e = self.error
        if e.jax is None:
            return e
        return e.model_copy(update={"message": _short(e.jax.type, e.jax.message)})

    def summary(self) -> str:
        """A few lines for a terminal or a notebook."""
        where = f"{self.backend}, {self.devices} device{'s' if self.devices != 1 else ''}"
        top = []
        low = self.lowering
        if low is not None:  # first: a GPU compile stops there
            top.append(
                f"{self.scenario}: GPU lowering error {low.code} at {low.path or '<scenario>'} "
                "(a GPU compile stops there; simulated past it, as JAX's interpreter runs it)"
            )
            top.append("  " + low.message.replace("\n", "\n  "))
        if self.ok:
            lines = [*top, f"{self.scenario}: ok ({where}): {self.timing()}"]
            if self.reason:
                lines.append(f"  ({self.reason})")
            with np.printoptions(threshold=8, edgeitems=3, precision=4):
                for name, value in self.outputs.items():
                    lines.append(f"  {name}: shape={value.shape} dtype={value.dtype}")
                    lines.append("    " + np.array2string(value).replace("\n", "\n    "))
            lines += ["  " + x for x in self.race_lines()]
            return "\n".join(lines)
        e = self.error
        assert e is not None
        head = _short(e.jax.type, e.jax.message) if e.jax else e.message
        lines = [
            *top,
            f"{self.scenario}: error {e.code} at stage {e.stage} ({where}): {self.timing()}",
        ]
        if self.reason:
            lines.append(f"  ({self.reason})")
        lines.append("  " + head.replace("\n", "\n  "))
        if e.stage == "gpu-lower" and self.backend in ("simulate", "interpret"):
            lines.append(
                "  (JAX's interpreters never lower for the GPU: `run --backend simulate "
                "--past-lowering` simulates the call past this error)"
            )
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.summary())


def _secs(t: float) -> str:
    """``1.29 s``, or ``14 ms`` under a tenth of a second."""
    return f"{t * 1000:.0f} ms" if t < 0.1 else f"{t:.2f} s"


def _short(type_name: str | None, message: str | None) -> str:
    """``Type: message``; a JaxRuntimeError shows the innermost error it carries."""
    t, m = type_name or "", message or ""
    if t.endswith("JaxRuntimeError"):
        heads = list(re.finditer(r"^\s*([\w.]*(?:Error|Exception)): ", m, re.M))
        if heads:
            last = heads[-1]
            rest = summarised(m[last.end() :].strip())
            return f"{last.group(1)}: {rest[:800]}"
    t, m = unwrap(t, m)
    m = summarised(m)
    return f"{t}: {m}" if t else m


def race_summary(races: list[dict[str, Any]], limit: int = 3) -> list[str]:
    """``races`` (the simulator's) summarised: one line per (kind, buffer) with how many
    and where, then its first race's own words; at most ``limit`` groups."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in races:
        loc = r.get("location") or {}
        groups.setdefault((str(r.get("kind", "race")), str(loc.get("buffer", "?"))), []).append(r)
    out = []
    for (kind, buffer), rs in list(groups.items())[:limit]:
        devices = sorted(
            {d for r in rs if (d := (r.get("location") or {}).get("device")) is not None}
        )
        where = f" on devices {devices[0]}-{devices[-1]}" if len(devices) > 1 else ""
        n = len(rs)
        out.append(f"{n} {kind} race{'s' if n != 1 else ''} on {buffer}{where}, e.g.")
        out.append("  " + str(rs[0].get("message", "")))
    if len(groups) > limit:
        out.append(f"… and {len(groups) - limit} more kinds of race")
    return out


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_ALLOCATION = re.compile(r"HostAllocationKey\([^)]*buffer_id=(\d+)\)")
_WARPGROUP = re.compile(
    r"Warpgroup\(device_id=(\d+), cluster_id=\d+, block_id=(\d+), warpgroup_id=(\d+)\)"
)


def summarised(message: str, limit: int = 4) -> str:
    """JAX's words without its internals: object addresses and vector clocks dropped,
    allocation keys and warpgroups named, repeated lines counted, at most ``limit``
    distinct detail lines (``… and N more``)."""
    if "clock:" not in message and " at 0x" not in message:
        return message
    lines: list[str] = []
    counts: dict[str, int] = {}
    for raw in message.splitlines():
        line = raw.strip()
        if not line or line.startswith("clock:"):
            continue
        line = _ADDRESS.sub("", line)
        line = _ALLOCATION.sub(r"buffer #\1", line)
        line = _WARPGROUP.sub(r"device \1 block \2 warpgroup \3", line)
        if line not in counts:
            lines.append(line)
        counts[line] = counts.get(line, 0) + 1
    out = []
    for line in lines[: limit + 1]:
        n = counts[line]
        out.append(f"{line} (×{n})" if n > 1 else line)
    if len(lines) > limit + 1:
        out = out[: limit + 1] + [f"… and {len(lines) - limit - 1} more"]
    return "\n  ".join(out)


# ---------------------------------------------------------------- GPU detection


@functools.cache
def gpu_info() -> dict[str, Any] | None:
    """The CUDA GPU a child JAX sees (``platform``, ``compute_capability``), or None."""
    if not (glob.glob("/dev/nvidia[0-9]*") or shutil.which("nvidia-smi")):
        return None  # no driver: do not start a JAX process to find out
    try:
        info = probe.worker_info(1, "default")
    except RuntimeError:
        return None
    return info if info.get("platform") in ("gpu", "cuda") else None


def has_gpu(min_cc: float = MIN_COMPUTE_CAPABILITY) -> bool:
    """Whether a CUDA GPU of compute capability ``min_cc`` or more is present."""
    info = gpu_info()
    if info is None:
        return False
    try:
        return float(info.get("compute_capability") or 0) >= min_cc
    except ValueError:
        return False


def choose_backend(backend: str, analysis: Any = None) -> tuple[str, str]:
    """The backend to run and why: ``auto`` becomes ``gpu`` where there is one, else
    ``interpret`` where JAX's CPU interpreter can run the call, else ``simulate``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; backends are {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend, ""
    if has_gpu():
        return "gpu", "auto: a CUDA GPU is present"
    cannot = next(
        (d for d in (analysis.diagnostics if analysis else ()) if interpreter_limit(d)),
        None,
    )
    if cannot is not None:
        return "simulate", (
            f"auto: no GPU here, and JAX's CPU interpreter cannot run this call "
            f"({cannot.code} at {cannot.path}); mpmd-lab's simulator can"
        )
    return "interpret", "auto: no GPU here; JAX's CPU interpreter runs this call"


# ---------------------------------------------------------------- running


def _error(scenario: Scenario, backend: str, code: str, type_: str, msg: str, stage: str):
    return RunResult(
        scenario=scenario.name,
        status="error",
        backend=backend,
        devices=probe.devices_of(scenario),
        error=Diagnostic(
            code=code, stage=stage, message=msg, jax=JaxError(type=type_, message=msg)
        ),
    )


def _from_probe(scenario: Scenario, backend: str, r: probe.ProbeResult, analysis: Any) -> RunResult:
    error = None
    if not r.ok:
        e = r.error() or {}
        stage = e.get("stage") if e.get("stage") in STAGES else "interpret"
        error = Diagnostic(
            code=e.get("code") or "JAX_UNKNOWN",
            stage=stage,
            message=_short(e.get("type"), e.get("message")),
            jax=JaxError(type=e.get("type") or "", message=e.get("message") or ""),
        )
        if probe.not_from_jax(r):
            # the scenario itself is broken (an unknown name...): JAX never saw the call
            d = next((d for d in analysis.diagnostics if d.is_error and d.stage == "schema"), None)
            if d is not None:
                error = d.model_copy(update={"jax": JaxError(type=r.error_type, message=d.message)})
    return RunResult(
        scenario=scenario.name,
        status="ok" if r.ok else "error",
        backend=backend,
        devices=r.devices,
        error=error,
        outputs=dict(r.outputs or {}),
        seconds=r.seconds,
        cached=r.cached,
        startup_seconds=r.startup,
        wall_seconds=r.wall or r.seconds,
    )


def _simulate(
    scenario: Scenario, analysis: Any, timeout: float, past_lowering: bool = False
) -> RunResult:
    """The simulator in a child process (:mod:`mpmd_lab.engine.child`): the same timeout,
    memory bound and cancel as the JAX backends; this process never holds the run."""
    from mpmd_lab.engine.child import simulate_in_child

    t0 = time.perf_counter()
    res = simulate_in_child(
        scenario,
        diagnostics=analysis.diagnostics,
        timeout=timeout,
        past_lowering=past_lowering,
    )
    wall = time.perf_counter() - t0
    return RunResult(
        scenario=scenario.name,
        status="ok" if res.ok else "error",
        backend="simulate",
        devices=res.devices,
        error=res.error,
        outputs={k: np.asarray(v) for k, v in res.outputs.items()},
        seconds=res.seconds,
        startup_seconds=res.startup,
        wall_seconds=wall,
        detail=res,
        lowering=res.lowering,
    )


def _run_processes(
    scenario: Scenario,
    backend: str,
    processes: int,
    local_devices: int | None,
    timeout: float,
    on_progress: ProgressFn | None,
    analysis: Any,
) -> RunResult:
    """``run`` as several local controller processes (``mpmd_lab.multihost``)."""
    from mpmd_lab import multihost

    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; backends are {', '.join(BACKENDS)}")
    why = {
        "gpu": "a GPU run across processes is the exported file's: launch it once per host "
        "(docs/CLUSTER.md)",
        "simulate": "the simulator runs as one process",
    }.get(backend) or multihost.refusal(scenario, processes, local_devices, analysis)
    if why is not None:
        msg = f"cannot run as {processes} processes: {why}"
        res = _error(scenario, backend, "PROCESSES_UNSUPPORTED", "ValueError", msg, "interpret")
        res.reason = f"{processes} processes asked for"
        return res
    r = multihost.probe(
        scenario,
        INTERPRET_STAGES,
        processes=processes,
        local_devices=local_devices,
        timeout=timeout,
        on_progress=on_progress,
    )
    res = _from_probe(scenario, "interpret", r, analysis)
    local = local_devices or probe.devices_of(scenario) // processes
    res.reason = f"{processes} processes x {local} CPU devices, in {multihost.WHY_HLO}"
    return res


def run(
    scenario: Scenario,
    backend: Backend | str = "auto",
    timeout: float = 120.0,
    on_progress: ProgressFn | None = None,
    analysis: Any = None,
    processes: int = 1,
    local_devices: int | None = None,
    past_lowering: bool = False,
) -> RunResult:
    """Run the scenario's call on ``backend``; every JAX failure comes back as data.

    ``timeout`` seconds bound the run, the static check it makes first included (not
    the one-off start of a JAX worker); a hang is stopped and reported as
    ``RUN_TIMEOUT``, a dead child as ``RUN_CRASHED``. ``on_progress(stage, fraction)`` is
    called as the run goes through its stages. ``analysis``: the scenario's
    ``validate.analyze`` result when the caller has it.
    ``processes``: run it as that many JAX controller processes on this machine
    (``mpmd_lab.multihost``; each with ``local_devices`` CPU devices, by default its
    share of the call's), as a cluster runs one process per host.
    ``past_lowering``: simulate a call the Mosaic GPU lowering refuses (as JAX's
    interpreters run it, never lowering for the GPU), the lowering error kept as
    ``RunResult.lowering`` and first in the summary; ``auto`` then means ``simulate``
    where there is no GPU. Only the simulator runs past it.
    """
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout={timeout!r}: give a positive, finite number of seconds")
    t0 = time.perf_counter()
    if analysis is None:
        from mpmd_lab.validate import analyze

        analysis = analyze(scenario)
    checked = time.perf_counter() - t0
    left = round(timeout - checked, 2)  # (the messages name it)
    if processes != 1:
        return _run_processes(
            scenario, backend, processes, local_devices, left, on_progress, analysis
        )
    res = _run_checked(scenario, backend, left, on_progress, analysis, past_lowering)
    res.check_seconds = checked
    res.wall_seconds = max(res.wall_seconds, res.seconds) + checked
    return res


def _run_checked(
    scenario: Scenario,
    backend: Backend | str,
    timeout: float,
    on_progress: ProgressFn | None,
    analysis: Any,
    past_lowering: bool = False,
) -> RunResult:
    """``run`` once the scenario is checked: ``timeout``, what is left of the caller's."""
    if timeout <= 0:
        return _error(
            scenario,
            str(backend),
            "RUN_TIMEOUT",
            "TimeoutError",
            "the static check took the whole timeout: nothing was run (give a longer --timeout)",
            "simulate" if backend == "simulate" else "interpret",
        )
    chosen, reason = choose_backend(backend, analysis)
    lowering = next(
        (d for d in analysis.diagnostics if d.is_error and d.stage == "gpu-lower"), None
    )
    if past_lowering and backend == "auto" and chosen == "interpret" and lowering is not None:
        chosen, reason = (
            "simulate",
            (
                f"auto: no GPU here, and the call has a GPU-lowering error ({lowering.code}) "
                "the interpret backend stops at; asked to run past it, the simulator does"
            ),
        )
    partial = next((d for d in analysis.diagnostics if d.code == "IMPORT_UNSUPPORTED"), None)
    if partial is not None:  # a partial import: no backend runs what the kernel is
        return RunResult(
            scenario=scenario.name,
            status="error",
            backend=chosen,
            devices=probe.devices_of(scenario),
            error=partial,
            reason=reason,
        )
    if chosen == "simulate":
        if on_progress:
            on_progress("simulate", 0.0)
        res = _simulate(scenario, analysis, timeout, past_lowering)
        if on_progress:
            on_progress("done", 1.0)
    elif chosen == "gpu":
        if not has_gpu(0.0):
            return _error(
                scenario,
                "gpu",
                "GPU_UNAVAILABLE",
                "RuntimeError",
                "no CUDA GPU is visible to JAX on this machine (use --backend interpret)",
                "gpu-run",
            )
        r = probe.probe(
            scenario,
            GPU_STAGES,
            timeout=timeout,
            platform="default",
            on_progress=on_progress,
            reuse=True,
        )
        res = _from_probe(scenario, "gpu", r, analysis)
    else:
        r = probe.probe(
            scenario, INTERPRET_STAGES, timeout=timeout, on_progress=on_progress, reuse=True
        )
        res = _from_probe(scenario, "interpret", r, analysis)
    res.reason = reason
    return res


__all__ = [
    "BACKENDS",
    "RunResult",
    "choose_backend",
    "gpu_info",
    "has_gpu",
    "interpreter_limit",
    "run",
]
