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

The workers themselves (start, reuse, replace, die with their parent) are
``mpmd_lab.workers``; the stages are ``mpmd_lab.ladder``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from mpmd_lab import workers
from mpmd_lab.catalogue import classify
from mpmd_lab.scenario import Scenario

if TYPE_CHECKING:
    from mpmd_lab.codegen import CodegenError

from mpmd_lab.workers import (
    _LOCK,
    Worker,
    _Dead,
    _discard,
    _Timeout,
    _worker,
    shutdown,
    worker_info,
)

STAGES = ("build", "trace", "gpu-lower", "interpret", "gpu-run")
DEFAULT_STAGES = ("build", "trace", "gpu-lower")
#: Code of a scenario the code generator cannot write as a JAX call.
CODEGEN_CODE = "CODEGEN"

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
    cached: bool = False  # the worker ran the call it had built for this source before
    #: seconds spent starting a JAX worker for this probe (0 when a warm one served it)
    startup: float = 0.0
    #: seconds from the call to its answer, all in (``seconds`` is JAX's part)
    wall: float = 0.0
    cancelled: bool = False  # ``workers.cancel`` stopped it

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

    @classmethod
    def answered(cls, res: dict[str, Any], **base: Any) -> ProbeResult:
        """The result of a child's answer ``res`` (``ok``, ``outputs`` or the failing
        ``stage``, ``error_type``, ``message``, ``traceback``; ``seconds``)."""
        if res["ok"]:
            return cls(
                ok=True,
                outputs=res["outputs"],
                seconds=res["seconds"],
                cached=bool(res.get("cached")),
                **base,
            )
        return cls(
            ok=False,
            stage=res["stage"],
            error_type=res["error_type"],
            message=res["message"],
            code=_code(res["error_type"], res["message"]),
            seconds=res["seconds"],
            traceback=res.get("traceback"),
            **base,
        )

    @classmethod
    def codegen_failed(cls, e: CodegenError, **base: Any) -> ProbeResult:
        """The scenario could not be written as JAX code (``base``: stages, devices,
        platform, seconds): failed at ``build`` with the codegen error's path."""
        return cls(
            ok=False,
            stage="build",
            error_type="CodegenError",
            message=str(e),
            code=CODEGEN_CODE,
            path=e.path,
            **base,
        )


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


#: Host bytes a run holds per byte of input / output, at its peak (measured with JAX's
#: GPU interpreter on the CPU, jax 0.12: tests/test_memory_estimate.py checks it against
#: a real run): the host value, the placed copy and the interpreter's own copy of each
#: input, and the inputs a warm worker keeps to run the same call again (ladder's reuse);
#: for each output the interpreter's buffer and its initial value, the result, its
#: fetched copy and its pickle for the parent.
INPUT_FACTOR = 4
#: and what a run holds whatever its data (the interpreter's own working memory, measured)
RUN_OVERHEAD = 16 * 2**20
OUTPUT_FACTOR = 5
#: ... and in the process that asked: the received message and the unpickled arrays.
PARENT_OUTPUT_FACTOR = 2


def _init_temp_bytes(shape: list[int], dtype: str, init: Any, ndev: int) -> int:
    """Host bytes ``callsupport.host_array`` holds at once while it makes one buffer:
    ``iota`` is an int64 ``arange`` then its cast, ``random`` a float64 draw then its
    cast (8 + itemsize bytes an element, 3x a float32 buffer); zeros/ones just the array."""
    from mpmd_lab.dtypes import nbytes

    size = nbytes(shape, dtype) * ndev
    if init in ("iota", "random"):
        return 8 * math.prod(shape) * ndev + size
    if isinstance(init, list):
        return 2 * size  # the nested list as an array, then each device's copy
    return size


def host_bytes(scenario: Scenario) -> int:
    """Host memory a run of the scenario needs at its peak, roughly (every device's copy):
    inputs and outputs times what the interpreter holds of each, or, while the inputs
    are made, the numpy temporaries of the largest ``iota``/``random`` buffer on top of
    the inputs made so far, whichever is more; plus the outputs in the caller."""
    from mpmd_lab.dtypes import nbytes

    ndev = devices_of(scenario)
    ins = list(scenario.buffers.values())
    inputs = ndev * sum(nbytes(b.shape, b.dtype) for b in ins)
    outputs = ndev * sum(nbytes(o.shape, o.dtype) for o in scenario.call.outputs.values())
    outputs += ndev * sum(nbytes(b.shape, b.dtype) for b in ins if b.as_ref)  # final values
    running = INPUT_FACTOR * inputs + OUTPUT_FACTOR * outputs
    temp = max((_init_temp_bytes(b.shape, b.dtype, b.init, ndev) for b in ins), default=0)
    making = inputs + temp
    return max(running, making) + PARENT_OUTPUT_FACTOR * outputs + RUN_OVERHEAD


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


#: statements a second JAX's trace gets through (a Python loop unrolled around a copy and
#: a remote copy: 4,000 statements in 0.9 s on the project's 2-core machine)
TRACE_RATE = 4_000


def beyond_the_trace(scenario: Scenario, timeout: float) -> tuple[str, str] | None:
    """``(field path, message)`` when JAX's trace of the call would meet so many
    statements (Python loops unroll at trace time) that it could not answer within ten
    times ``timeout``; None otherwise (a loop of 2**31 steps traced until the timeout)."""
    from types import SimpleNamespace

    from mpmd_lab.ops.control import statements_run

    ctx = SimpleNamespace(s=scenario)  # static_value reads the meshes' sizes from it
    loops: list[tuple[int, str]] = []
    total = sum(
        statements_run(p.body, ctx, True, loops, f"call.programs[{i}].body")
        for i, p in enumerate(scenario.call.programs)
    )
    if total <= TRACE_RATE * timeout * 10:
        return None
    here, path = max(loops, default=(total, "call.programs"))
    hours = total / TRACE_RATE / 3600
    took = f"{hours:,.0f} hours" if hours >= 2 else f"{hours * 60:,.0f} minutes"
    return path, (
        f"not started: JAX's trace would meet {total:,} statements (the Python loop at "
        f"{path} unrolls into {here:,}), about {took} at the {TRACE_RATE:,} a second it "
        f"traces, against a timeout of {timeout:g} s; write the loop as a fori_loop "
        "(via: fori_loop), whose body JAX traces once, or check it with smaller bounds"
    )


def probe(
    scenario: Scenario,
    stages: Sequence[str] = DEFAULT_STAGES,
    *,
    timeout: float = 60.0,
    interpret: str | None = None,
    detect_races: bool | None = None,
    platform: str = "cpu",
    on_progress: ProgressFn | None = None,
    reuse: bool = False,
) -> ProbeResult:
    """Run the scenario through ``stages`` with real JAX in a warm child process.

    ``interpret`` / ``detect_races`` override the scenario's ``run`` settings for the
    interpret stage; ``platform="default"`` lets the child use a GPU (for ``gpu-run``).
    ``reuse``: the worker may run a call it built for the same source before (a second
    Run of an unchanged scenario costs about what the jitted call costs).
    Never raises for anything JAX or the child does.
    """
    from mpmd_lab.codegen import CodegenError, generate

    stages = _norm_stages(stages)
    mode = interpret if interpret is not None else scenario.run.interpret
    races = scenario.run.detect_races if detect_races is None else detect_races
    ndev = devices_of(scenario)
    base: dict[str, Any] = {"stages": stages, "devices": ndev, "platform": platform}
    t0 = time.perf_counter()
    try:
        source = generate(scenario, interpret=mode, detect_races=races, cpu_limits=False)
    except CodegenError as e:
        return ProbeResult.codegen_failed(e, seconds=time.perf_counter() - t0, **base)
    unrolled = beyond_the_trace(scenario, timeout)
    if unrolled is not None:
        path, message = unrolled
        return ProbeResult(
            ok=False,
            stage="trace",
            error_type="TimeoutError",
            message=message,
            code="RUN_TIMEOUT",
            path=path,
            timed_out=True,
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
    req = {
        "source": source,
        "stages": stages,
        "mode": mode,
        "detect_races": bool(races),
        "reuse": reuse,
    }
    steps = len(stages) + 1

    def on_stage(stage: str) -> None:
        if on_progress is not None and stage in stages:
            on_progress(stage, (stages.index(stage) + 1) / steps)

    with _LOCK:
        workers.CANCELLED.clear()
        if on_progress is not None:
            on_progress("start", 0.0)
        t_start = time.perf_counter()
        try:
            w = _worker(ndev, platform)
        except RuntimeError as e:
            if workers.CANCELLED.is_set():
                return _cancelled(base, "start", t0)
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
        startup = time.perf_counter() - t_start if w.requests == 0 else 0.0
        base["platform"] = w.info.get("platform", platform)
        if workers.CANCELLED.is_set():  # cancelled while the worker started: it stays warm
            return _cancelled(base, "start", t0, startup)
        w.last_stage = stages[0]
        workers.busy(w)
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
            if w.cancelled:
                _discard(w)
                return _cancelled(base, stage or stages[0], t0, startup)
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
        finally:
            workers.busy(None)
        if res.get("poisoned") or w.cancelled:  # (cancelled as its answer came: killed)
            _discard(w)
    wall = time.perf_counter() - t0
    if on_progress is not None:
        on_progress("done", 1.0)
    return ProbeResult.answered(res, startup=startup, wall=wall, **base)


def _cancelled(base: dict[str, Any], stage: str, t0: float, startup: float = 0.0) -> ProbeResult:
    return ProbeResult(
        ok=False,
        stage=stage,
        error_type="Cancelled",
        message=f"the run was cancelled at stage {stage}; its JAX worker was stopped",
        code="RUN_CANCELLED",
        cancelled=True,
        seconds=time.perf_counter() - t0,
        startup=startup,
        wall=time.perf_counter() - t0,
        **base,
    )


def cancel() -> bool:
    """Stop the probe or run in progress (``workers.cancel``)."""
    return workers.cancel()


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
    "TRACE_RATE",
    "ProbeResult",
    "Worker",
    "beyond_the_trace",
    "devices_of",
    "not_from_jax",
    "probe",
    "probe_many",
    "shutdown",
    "worker_info",
]
