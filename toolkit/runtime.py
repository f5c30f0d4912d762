"""Run a scenario on the real Pallas runtime: a GPU, or a CPU interpreter.

``run(scenario, backend)`` builds the scenario's call (``mpmd_lab.codegen``) and runs
it in a warm child process (``mpmd_lab.probe``), so a different device count, a hang
or a crash never touches the caller's JAX. Backends:

- ``gpu``: compile and run on a CUDA GPU;
- ``interpret``: first lower for the GPU (what runs here also compiles for one; a
  lowering error stops the run), then run the scenario's CPU interpreter
  (``run.interpret``, ``run.detect_races``);
- ``auto``: ``gpu`` when a CUDA GPU of compute capability 9.0 or more is present,
  else ``interpret``;
- ``simulate``: ``mpmd_lab.simulate.simulate(scenario)`` (cross-device traffic model).

The result is data (``RunResult``), in the ``run --json`` form of SCENARIO.md.
"""

from __future__ import annotations

import functools
import glob
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from mpmd_lab import probe
from mpmd_lab.callsupport import encode_outputs
from mpmd_lab.catalogue import classify, unwrap
from mpmd_lab.diagnostics import Diagnostic, JaxError
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
    error: dict[str, Any] | None = None  # {"code", "type", "message", "stage"}
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    #: the backend's own result where it has more to say (``simulate``: its SimResult)
    detail: Any = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """The ``run --json`` object of SCENARIO.md (a JSON-ready dict)."""
        return {
            "status": self.status,
            "backend": self.backend,
            "devices": self.devices,
            "error": dict(self.error) if self.error else None,
            "outputs": encode_outputs(self.outputs),
            "seconds": round(self.seconds, 4),
            **self._extra(),
        }

    def _extra(self) -> dict[str, Any]:
        """Fields a backend adds to the contract (``simulate``: ``note``, ``races``)."""
        to_json = getattr(self.detail, "to_json", None)
        if to_json is None:
            return {}
        data = to_json()
        return {k: v for k, v in data.items() if k in ("note", "races")}

    def diagnostic(self) -> Diagnostic | None:
        """The error as a Diagnostic (None when the run succeeded)."""
        if not self.error:
            return None
        e = self.error
        stage = e.get("stage") or "interpret"
        return Diagnostic(
            code=e.get("code") or "JAX_UNKNOWN",
            severity="error",
            stage=stage if stage in _STAGES else "interpret",
            message=_short(e.get("type"), e.get("message")),
            jax=JaxError(type=e.get("type") or "", message=e.get("message") or ""),
        )

    def summary(self) -> str:
        """A few lines for a terminal or a notebook."""
        where = f"{self.backend}, {self.devices} device{'s' if self.devices != 1 else ''}"
        if self.ok:
            lines = [f"{self.scenario}: ok ({where}) in {self.seconds:.2f} s"]
            with np.printoptions(threshold=8, edgeitems=3, precision=4):
                for name, value in self.outputs.items():
                    lines.append(f"  {name}: shape={value.shape} dtype={value.dtype}")
                    lines.append("    " + np.array2string(value).replace("\n", "\n    "))
            return "\n".join(lines)
        e = self.error or {}
        return "\n".join(
            [
                f"{self.scenario}: error {e.get('code')} at stage {e.get('stage')} ({where})",
                "  " + _short(e.get("type"), e.get("message")).replace("\n", "\n  "),
            ]
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.summary())


_STAGES = ("build", "trace", "gpu-lower", "interpret", "gpu-run")


def _short(type_name: str | None, message: str | None) -> str:
    """``Type: message``; a JaxRuntimeError shows the innermost error it carries."""
    t, m = type_name or "", message or ""
    if t.endswith("JaxRuntimeError"):
        heads = list(re.finditer(r"^\s*([\w.]*(?:Error|Exception)): ", m, re.M))
        if heads:
            last = heads[-1]
            rest = m[last.end() :].strip()
            return f"{last.group(1)}: {rest[:800]}"
    t, m = unwrap(t, m)
    return f"{t}: {m}" if t else m


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


def choose_backend(backend: str) -> str:
    """``auto`` resolved to ``gpu`` or ``interpret``; others unchanged."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; backends are {', '.join(BACKENDS)}")
    if backend == "auto":
        return "gpu" if has_gpu() else "interpret"
    return backend


# ---------------------------------------------------------------- running


def _schema_error(scenario: Scenario) -> Diagnostic | None:
    """The first schema-stage error of the static rules (None if none, or no rules)."""
    try:
        from mpmd_lab import validate

        diags = validate.check(scenario)
    except Exception:  # noqa: BLE001 - the rules are an optional refinement here
        return None
    return next((d for d in diags if d.is_error and d.stage == "schema"), None)


def _from_probe(scenario: Scenario, backend: str, r: probe.ProbeResult) -> RunResult:
    error = r.error()
    if probe.not_from_jax(r):
        # the scenario itself is broken (an unknown name...): JAX never saw the call
        d = _schema_error(scenario)
        if d is not None:
            error = {
                "code": d.code,
                "type": r.error_type,
                "message": f"{d.path}: {d.message}" if d.path else d.message,
                "stage": d.stage,
            }
    return RunResult(
        scenario=scenario.name,
        status="ok" if r.ok else "error",
        backend=backend,
        devices=r.devices,
        error=error,
        outputs=dict(r.outputs or {}),
        seconds=r.seconds,
    )


def _error(scenario: Scenario, backend: str, code: str, type_: str, msg: str, stage: str):
    return RunResult(
        scenario=scenario.name,
        status="error",
        backend=backend,
        devices=probe.devices_of(scenario),
        error={"code": code, "type": type_, "message": msg, "stage": stage},
    )


def _simulate(scenario: Scenario) -> RunResult:
    t0 = time.perf_counter()
    try:
        from mpmd_lab import simulate as sim
    except ImportError as e:
        return _error(
            scenario,
            "simulate",
            "SIMULATE_UNAVAILABLE",
            "ImportError",
            f"the simulate backend is not available: {e}",
            "interpret",
        )
    try:
        res = sim.simulate(scenario)
    except Exception as e:  # noqa: BLE001 - errors are data
        code = classify(type(e).__name__, str(e)) or "JAX_UNKNOWN"
        out = _error(scenario, "simulate", code, type(e).__name__, str(e), "interpret")
        out.seconds = time.perf_counter() - t0
        return out
    if isinstance(res, RunResult):
        return res
    error = getattr(res, "error", None)
    return RunResult(
        scenario=scenario.name,
        status="ok" if getattr(res, "status", "ok") == "ok" else "error",
        backend="simulate",
        devices=getattr(res, "devices", probe.devices_of(scenario)),
        error={k: error.get(k) for k in ("code", "type", "message", "stage")} if error else None,
        outputs={k: np.asarray(v) for k, v in dict(getattr(res, "outputs", {}) or {}).items()},
        seconds=getattr(res, "seconds", time.perf_counter() - t0),
        detail=res,
    )


def run(
    scenario: Scenario,
    backend: Backend | str = "auto",
    timeout: float = 120.0,
    on_progress: ProgressFn | None = None,
) -> RunResult:
    """Run the scenario's call on ``backend``; every JAX failure comes back as data.

    ``timeout`` seconds bound the run (not the one-off start of a JAX worker); a hang
    is stopped and reported as ``RUN_TIMEOUT``, a dead child as ``RUN_CRASHED``.
    ``on_progress(stage, fraction)`` is called as the run goes through its stages.
    """
    chosen = choose_backend(backend)
    if chosen == "simulate":
        if on_progress:
            on_progress("simulate", 0.0)
        res = _simulate(scenario)
        if on_progress:
            on_progress("done", 1.0)
        return res
    if chosen == "gpu":
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
            scenario, GPU_STAGES, timeout=timeout, platform="default", on_progress=on_progress
        )
        return _from_probe(scenario, "gpu", r)
    r = probe.probe(scenario, INTERPRET_STAGES, timeout=timeout, on_progress=on_progress)
    return _from_probe(scenario, "interpret", r)


__all__ = ["BACKENDS", "RunResult", "choose_backend", "gpu_info", "has_gpu", "run"]
