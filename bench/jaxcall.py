"""A scenario's generated JAX call, built in this process, for timing (the stages are
``mpmd_lab.ladder``'s, as everywhere else; here they run in-process, JAX warm)."""

from __future__ import annotations

from typing import Any

from mpmd_lab import ladder
from mpmd_lab.codegen import generate
from mpmd_lab.scenario import Scenario


def module_of(scenario: Scenario, interpret: str | None = "gpu") -> dict[str, Any]:
    """The generated module's namespace (``build``, ``make_inputs``, ``place``)."""
    name = f"bench_{scenario.name.replace('-', '_')}"
    return ladder.load(generate(scenario, interpret=interpret), name)


def build_and_args(
    ns: dict[str, Any], interpret: str | None, detect_races: bool = False
) -> tuple[Any, list[Any]]:
    fn, mesh = ns["build"](interpret, detect_races)
    return fn, ns["place"](ns["make_inputs"](), mesh)


def trace(ns: dict[str, Any]) -> None:
    """Build (GPU compile mode) and trace, as ``check --deep`` asks JAX; JAX errors count."""
    try:
        fn, args = build_and_args(ns, None)
        fn.trace(*args)
    except Exception:
        pass


def trace_and_lower(ns: dict[str, Any]) -> None:
    """Build, trace and run the real Mosaic GPU lowering (works on a CPU-only machine)."""
    import jax

    try:
        fn, args = build_and_args(ns, None)
        jax.export.export(fn, platforms=["cuda"])(*args)
    except Exception:
        pass


def detect_races(ns: dict[str, Any]) -> bool:
    """Build for JAX's GPU interpreter with its race detector on (``detect_races=True``),
    run the call on its inputs and wait: what JAX takes to answer the race check's
    question. True when JAX answered (the call ran, with or without races found); False
    where it cannot run the call on a CPU (a cross-device ref, an interpreter limit, an
    error before the run)."""
    import jax

    try:
        fn, args = build_and_args(ns, "gpu", detect_races=True)
        jax.block_until_ready(fn(*args))
        return True
    except Exception as e:  # its detector stopped the run: an answer; anything else not
        return ladder.races_found() or "RACE DETECTED" in ladder.text_of(e)
    finally:
        ladder.reset_interpreter()
