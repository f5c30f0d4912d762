"""``python -m bench [--quick] [--json] [SECTION ...]``: run the benchmarks, print one table.

Sections: static (check vs JAX trace + GPU lowering), scaling (check vs argument count
and stack depth), run (generated call vs hand-written pl.kernel), widgets (edit-to-
feedback latency), graph (the matplotlib picture, and the Lab's fast view in Chromium,
at 50 and 2,000 nodes), startup (`mpmd-lab check FILE` as a whole process), simulate
(the simulator's cost against devices x steps: a ring all-gather on 8 ... 256 devices),
symmetry (ring collectives at 64 ... 1,024 devices and the collective matmul at 132 x 3 x
4, judged by symmetry),
sync (the race/deadlock verdict over every schedule of the gallery's 4-device collectives),
puzzles (a grade of the collectives puzzle track, warm and in a fresh process),
fixes (how many invalid scenarios shipped or tested the best fixes make valid).

``--json``: one JSON document instead of the table: the machine (``header``) and
``rows``, each with the keys section, measure, value, unit, baseline, ratio, target, ok
(and ``detail``, the table's text), so figures can be tracked run to run.
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
import datetime  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
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
    "startup": "bench.startup",
    "simulate": "bench.simulate_scaling",
    "symmetry": "bench.sync_scale",
    "sync": "bench.sync_schedules",
    "puzzles": "bench.puzzle_grades",
    "fixes": "bench.fix_reach",
}
QUICK = {
    "static": {"repeats": 1, "trace_repeats": 3, "rounds": 1},
    "run": {"repeats": 3},
    "widgets": {"edits": 5, "opens": 2},
    "graph": {"repeats": 1},
    "startup": {"repeats": 3},
    "simulate": {"quick": True},
    "symmetry": {"quick": True},
    "sync": {"quick": True},
    "puzzles": {"quick": True},
}


def section(name: str, quick: bool) -> list[Row]:
    try:
        mod = importlib.import_module(SECTIONS[name])
        return mod.rows(**(QUICK.get(name, {}) if quick else {}))
    except ImportError as e:
        return [Row(name, f"n/a (module missing: {e.name or e})")]
    except Exception as e:  # a benchmark never takes the others down
        return [Row(name, f"n/a (error: {type(e).__name__}: {str(e)[:120]})")]


def machine() -> dict[str, object]:
    """What the figures were measured on: date, Python, JAX's platform, CPUs, load."""
    try:
        import jax

        jax_v, platform_ = jax.__version__, jax.devices()[0].platform
    except Exception as e:  # noqa: BLE001
        jax_v, platform_ = None, f"unavailable ({type(e).__name__})"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "jax": jax_v,
        "platform": platform_,
        "cpus": os.cpu_count(),
        "load_at_start": round(load, 2),
    }


def header(m: dict[str, object] | None = None) -> str:
    m = m or machine()
    jax_s = f"jax {m['jax']} on {m['platform']}" if m["jax"] else f"jax {m['platform']}"
    return (
        f"mpmd-lab bench {m['date']}: Python {m['python']}, {jax_s}, "
        f"{m['cpus']} CPUs, load average {m['load_at_start']:.1f} at start; "
        "times are medians of several runs"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("sections", nargs="*", choices=[*SECTIONS, []], metavar="SECTION")
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON rows to FILE")
    args = p.parse_args(argv)
    m = machine()
    if not args.json:
        print(header(m), flush=True)
    rows: list[Row] = []
    for name in args.sections or list(SECTIONS):
        t0 = time.perf_counter()
        rows += section(name, args.quick)
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    m["load_at_end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    doc = {"header": m, "rows": [r.to_json() for r in rows]}
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1) if args.json else render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
