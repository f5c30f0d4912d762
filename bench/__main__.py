"""``python -m bench [--quick] [SECTION ...]``: run the benchmarks, print one table.

Sections: static (check vs JAX trace + GPU lowering), scaling (check vs argument count
and stack depth), run (generated call vs hand-written pl.kernel), widgets (edit-to-
feedback latency), graph (layout and render at 50 and 2,000 nodes), simulate (the
simulator's cost against devices x steps: a ring all-gather on 8 ... 256 devices).
"""

from __future__ import annotations

import os

# simulated CPU devices for device-mesh scenarios: before anything imports jax
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import importlib  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from bench.table import Row, render  # noqa: E402

SECTIONS = {
    "static": "bench.static_vs_jax",
    "scaling": "bench.scaling",
    "run": "bench.run_overhead",
    "widgets": "bench.widget_latency",
    "graph": "bench.graph_section",
    "simulate": "bench.simulate_scaling",
}
QUICK = {
    "static": {"repeats": 1},
    "run": {"repeats": 3},
    "widgets": {"edits": 5},
    "graph": {"repeats": 1},
    "simulate": {"quick": True},
}


def section(name: str, quick: bool) -> list[Row]:
    try:
        mod = importlib.import_module(SECTIONS[name])
        return mod.rows(**(QUICK.get(name, {}) if quick else {}))
    except ImportError as e:
        return [Row(name, f"n/a (module missing: {e.name or e})")]
    except Exception as e:  # a benchmark never takes the others down
        return [Row(name, f"n/a (error: {type(e).__name__}: {str(e)[:120]})")]


def header() -> str:
    try:
        import jax

        devices = f"jax {jax.__version__} on {jax.devices()[0].platform}"
    except Exception as e:  # noqa: BLE001
        devices = f"jax unavailable ({type(e).__name__})"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"mpmd-lab bench: Python {platform.python_version()}, {devices}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at start; "
        "times are medians of several runs"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("sections", nargs="*", choices=[*SECTIONS, []], metavar="SECTION")
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = p.parse_args(argv)
    print(header(), flush=True)
    rows: list[Row] = []
    for name in args.sections or list(SECTIONS):
        t0 = time.perf_counter()
        rows += section(name, args.quick)
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
