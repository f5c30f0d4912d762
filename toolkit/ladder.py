"""The one way mpmd-lab asks JAX about a call: stage by stage, as JAX meets it.

``climb(source, stages)`` executes a scenario's generated source (``codegen.generate``)
and takes it up the ladder — ``build`` (the module and the call are made), ``trace``
(``jax.jit(f).trace``), ``gpu-lower`` (``jax.export`` for ``cuda``: the real Mosaic GPU
lowering, which runs on a CPU), ``interpret`` (a CPU interpreter run) or ``gpu-run``
(a real GPU) — stopping at the first stage that raises. The result is plain data.

Every place that asks JAX climbs this ladder: the warm workers behind ``probe`` (the
runtime and ``check --deep``), the knowledge base's recorder (``knowledge.jaxrun``, which
runs it under other JAX installs too), the tests and the benchmarks. So it depends on
nothing but the standard library, JAX and numpy, imported when a stage needs them: a
child process may load this file by path, without mpmd-lab installed.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

#: the stages, in the order JAX gets there
STAGES = ("build", "trace", "gpu-lower", "interpret", "gpu-run")
RUN_STAGES = ("interpret", "gpu-run")


def text_of(e: BaseException) -> str:
    """``str(e)``, or a stand-in when the exception cannot say what it is."""
    try:
        return str(e)
    except Exception as inner:  # noqa: BLE001
        return f"<str() of {type(e).__name__} failed: {type(inner).__name__}>"


def load(source: str, name: str = "mpmd_lab_scenario") -> dict[str, Any]:
    """The generated module's namespace (``build``, ``make_inputs``, ``place``, …).

    The source sets ``XLA_FLAGS`` for its device count before JAX starts; in a process
    where JAX already runs that is moot, so the caller's flags are put back."""
    ns: dict[str, Any] = {"__name__": name, "__builtins__": __builtins__}
    saved = os.environ.get("XLA_FLAGS")
    try:
        exec(compile(source, f"<{name}>", "exec"), ns)
    finally:
        if saved is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = saved
    return ns


def _interpreter_call(fn: str) -> tuple[bool, Any]:
    """``fn()`` of JAX's GPU interpreter, from the module this JAX version keeps it in:
    (found, its result)."""
    for mod in (
        "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
        "jax._src.pallas.mosaic_gpu.interpret.gpu_callbacks",
    ):
        try:
            return True, getattr(__import__(mod, fromlist=[fn]), fn)()
        except Exception:  # noqa: BLE001 - another JAX version: look in the next place
            continue
    return False, None


def races_found() -> bool:
    """Races recorded by the GPU interpreter (jax 0.11.2 records them, 0.12 raises too)."""
    found, races = _interpreter_call("get_races")
    return found and bool(getattr(races, "races_found", False))


def reset_interpreter() -> None:
    """The GPU interpreter's global state is poisoned after an error in it: reset it."""
    _interpreter_call("reset_gpu_interpret_mode_state")


#: calls already built and run, by (source, stages, mode, races): their jitted function and
#: placed inputs, so running an unchanged scenario again costs what the jitted call costs
_CALLS: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
MAX_CACHED_CALLS = 4
#: inputs larger than this (bytes) are not kept for reuse
MAX_CACHED_BYTES = 256 * 2**20


def climb(
    source: str,
    stages: list[str] | tuple[str, ...],
    *,
    mode: str | None = "gpu",
    detect_races: bool = False,
    on_stage: Callable[[str], None] | None = None,
    name: str = "mpmd_lab_scenario",
    reuse: bool = False,
    processes: bool = False,
) -> dict[str, Any]:
    """Take the call of ``source`` up ``stages`` (``build`` always runs first).

    ``mode``: the interpreter of the ``interpret`` stage (``"gpu"``, ``"hlo"``);
    ``on_stage(stage)`` is called as each stage starts. ``reuse``: a call that climbed
    the same stages before without an error is run again as it was built (``cached``
    is then True). Returns ``{"ok", "stage" (where it failed, else None),
    "error_type", "qualname", "message", "traceback", "outputs" (numpy, after a run
    stage), "nan" (unwritten floats per output), "poisoned", "cached"}``.

    ``processes``: this is one of several controller processes (the source's
    ``start_processes`` joins them from the environment; every process takes part in
    fetching the outputs).
    """
    import jax

    wanted = set(stages)
    key = (source, tuple(sorted(wanted)), mode, bool(detect_races))
    hit = _CALLS.get(key) if reuse else None
    if hit is not None:
        return _run_again(hit, wanted, detect_races, on_stage)
    result = _result(cached=False)
    stage = "build"

    def enter(s: str) -> None:
        nonlocal stage
        stage = s
        if on_stage is not None:
            on_stage(s)

    try:
        enter("build")
        ns = load(source, name)
        if processes:
            ns["start_processes"](os.environ)
        fn: Any = None
        args: Any = None
        if wanted & {"build", "trace", "gpu-lower", "gpu-run"}:
            fn, mesh = ns["build"](None)
            args = ns["place"](ns["make_inputs"](), mesh)
        if "trace" in wanted:
            enter("trace")
            fn.trace(*args)
        if "gpu-lower" in wanted:
            enter("gpu-lower")
            jax.export.export(fn, platforms=["cuda"])(*args)
        run_stage = next((s for s in RUN_STAGES if s in wanted), None)
        if run_stage:
            if run_stage == "interpret":
                # built for the interpreter (a build error shows at the build stage); the
                # traced stages' inputs go first, not held while the new ones are made
                fn = args = None
                fn, mesh = ns["build"](mode, bool(detect_races))
                args = ns["place"](ns["make_inputs"](), mesh)
            enter(run_stage)
            names = ns.get("OUTPUT_NAMES")
            _run(result, fn, args, names, run_stage, detect_races, ns.get("fetch"))
            if reuse and _nbytes(args) <= MAX_CACHED_BYTES:
                _CALLS[key] = (fn, args, ns.get("OUTPUT_NAMES"))
                while len(_CALLS) > MAX_CACHED_CALLS:
                    _CALLS.pop(next(iter(_CALLS)))
    except BaseException as e:  # noqa: BLE001 - every failure is data
        if isinstance(e, KeyboardInterrupt):
            raise
        _failed(result, e, stage)
    return result


def _result(cached: bool) -> dict[str, Any]:
    """A climb's answer before anything failed."""
    return {
        "ok": True,
        "stage": None,
        "error_type": None,
        "qualname": None,
        "message": None,
        "traceback": None,
        "outputs": None,
        "nan": {},
        "poisoned": False,
        "cached": cached,
    }


def _run(
    result: dict[str, Any],
    fn: Any,
    args: Any,
    names: Any,
    run_stage: str,
    detect_races: bool,
    fetch: Any = None,
) -> None:
    """The run stage: the outputs (numpy) and their unwritten floats; a race the GPU
    interpreter recorded fails it. ``poisoned`` while an interpreter run is unfinished.
    ``fetch``: the source's own (it gathers a global array over processes)."""
    result["poisoned"] = run_stage == "interpret"
    outputs = _outputs(fn(*args), names, fetch)
    if run_stage == "interpret" and detect_races and races_found():
        raise RuntimeError("RACE DETECTED (recorded by the GPU interpreter's get_races())")
    result.update(outputs=outputs, nan=_nan(outputs), poisoned=False)


def _failed(result: dict[str, Any], e: BaseException, stage: str) -> None:
    """``e``, raised at ``stage``, as data (an interpreter that failed is reset)."""
    t = type(e)
    result.update(
        ok=False,
        stage=stage,
        error_type=t.__name__,
        qualname=f"{t.__module__}.{t.__qualname__}",
        message=text_of(e),
        traceback="".join(traceback.format_exception(e))[-8000:],
        outputs=None,
    )
    if stage == "interpret":
        reset_interpreter()


def _outputs(outs: Any, names: Any, fetch: Any = None) -> dict[str, Any]:
    import jax
    import numpy as np

    keys = names if names is not None else list(outs)
    if fetch is not None:
        return {k: fetch(outs[k]) for k in keys}
    return {k: np.asarray(jax.device_get(outs[k])) for k in keys}


def _nan(outputs: dict[str, Any]) -> dict[str, int]:
    import numpy as np

    return {k: int(np.isnan(v).sum()) if v.dtype.kind == "f" else 0 for k, v in outputs.items()}


def _nbytes(args: Any) -> int:
    import jax

    return sum(int(getattr(a, "nbytes", 0)) for a in jax.tree_util.tree_leaves(args))


def _run_again(hit: Any, wanted: set[str], detect_races: bool, on_stage: Any) -> dict[str, Any]:
    """An unchanged call run again as it was built (its earlier stages passed before)."""
    fn, args, names = hit
    run_stage = next((s for s in RUN_STAGES if s in wanted), None)
    result = _result(cached=True)
    if run_stage is None:
        return result
    if on_stage is not None:
        on_stage(run_stage)
    try:
        _run(result, fn, args, names, run_stage, detect_races)
    except BaseException as e:  # noqa: BLE001 - every failure is data
        if isinstance(e, KeyboardInterrupt):
            raise
        _failed(result, e, run_stage)
    return result


__all__ = ["RUN_STAGES", "STAGES", "climb", "load", "races_found", "reset_interpreter", "text_of"]
