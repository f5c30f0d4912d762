"""mpmd-lab: build, check, run and draw Pallas mpmd_map kernel calls.

The public API (each name is imported on first use, so ``import mpmd_lab`` is quick)::

    import mpmd_lab

    s = mpmd_lab.load("ring-shift")         # a path, a dict, JSON text or a gallery name
    mpmd_lab.check(s)                        # [Diagnostic]: what JAX would say, statically
    mpmd_lab.simulate(s).outputs             # numpy: what the kernel computes on a GPU
    mpmd_lab.run(s, "auto")                  # the real runtime (GPU, interpreter, simulator)
    print(mpmd_lab.export(s))                # a self-contained JAX script
    mpmd_lab.plot(s)                         # the aliasing graph as a matplotlib Figure
    session = mpmd_lab.Session(s)            # edit, undo, save, run: what the Lab views
    imported = mpmd_lab.from_jax(fn, *args)  # your own JAX kernel call, as a scenario
    mpmd_lab.show(fn, *args)                 # ... opened in the Lab (%load_ext mpmd_lab
                                             #     gives the %%mpmd_lab cell magic)

and ``from mpmd_lab.widgets import Lab`` in a notebook.
"""

from __future__ import annotations

from typing import Any

#: public name -> (module, attribute)
_API = {
    "load": ("mpmd_lab.scenario", "load_scenario"),
    "save": ("mpmd_lab.scenario", "save_scenario"),
    "Scenario": ("mpmd_lab.scenario", "Scenario"),
    "ScenarioError": ("mpmd_lab.scenario", "ScenarioError"),
    "check": ("mpmd_lab.validate", "check"),
    "analyze": ("mpmd_lab.validate", "analyze"),
    "compile": ("mpmd_lab.plan", "compile"),
    "simulate": ("mpmd_lab.simulator", "simulate"),
    "run": ("mpmd_lab.runtime", "run"),
    "export": ("mpmd_lab.codegen", "generate"),
    "plot": ("mpmd_lab.draw", "plot_aliasing"),
    "plot_aliasing": ("mpmd_lab.draw", "plot_aliasing"),
    "Session": ("mpmd_lab.session", "Session"),
    "Diagnostic": ("mpmd_lab.diagnostics", "Diagnostic"),
    "explain": ("mpmd_lab.knowledge", "lookup"),
    "from_jax": ("mpmd_lab.importer.api", "from_jax"),
    "Imported": ("mpmd_lab.importer.api", "Imported"),
    "show": ("mpmd_lab.widgets.notebook", "show"),
    # ``%load_ext mpmd_lab``: the ``%%mpmd_lab`` cell magic
    "load_ipython_extension": ("mpmd_lab.widgets.notebook", "load_ipython_extension"),
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        module, attr = _API[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mpmd_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
