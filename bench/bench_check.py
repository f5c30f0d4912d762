"""Benchmark: static ``check`` against JAX's trace + GPU lowering of the same scenarios.

Run ``python bench/bench_check.py``. It prints, in one run: the static check time of
each gallery scenario next to the time real JAX takes to trace it and lower it for the
GPU (one warm child process, the scenario's own devices), then the static check time
as the argument count (10 .. 1,000) and the transform-stack depth (1 .. 64) grow, to
show the cost is linear in both.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mpmd_lab import gallery  # noqa: E402
from mpmd_lab.scenario import Scenario, load_scenario  # noqa: E402
from mpmd_lab.validate import check  # noqa: E402

from bench.timing import median_seconds  # noqa: E402


def timed(fn: Any, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` calls (after one warm-up)."""
    return median_seconds(fn, repeats=repeat)


def synthetic(n_args: int, depth: int = 1) -> Scenario:
    """``n_args`` Ref arguments, each viewed through a ``depth``-step stack and copied."""
    bufs = {f"b{i}": {"shape": [8, 128], "dtype": "float32", "as_ref": True} for i in range(n_args)}
    args = [{"buffer": f"b{i}", "param": f"p{i}"} for i in range(n_args)]
    body: list[dict[str, Any]] = []
    for i in range(n_args):
        stack = [{"op": "at", "index": [[0, 8]]} for _ in range(depth)]
        body.append({"let": f"v{i}", "ref": f"p{i}", "transforms": stack})
        body.append({"op": "copy", "src": f"v{i}", "dst": f"o{i}"})
    outputs = {f"o{i}": {"shape": [8, 128], "dtype": "float32"} for i in range(n_args)}
    return load_scenario(
        {
            "name": "synthetic",
            "buffers": bufs,
            "call": {
                "args": args,
                "outputs": outputs,
                "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
            },
        }
    )


def main() -> None:
    from mpmd_lab.probe import probe

    print(f"{'scenario':<28} {'static check':>14} {'JAX trace+lower':>16}")
    for name in gallery.names():
        s = gallery.load(name)
        static = timed(lambda s=s: check(s), 50)
        probe(s, ("build", "trace", "gpu-lower"))  # warm the worker for this device count
        t = time.perf_counter()
        probe(s, ("build", "trace", "gpu-lower"))
        jax_s = time.perf_counter() - t
        print(f"{name:<28} {static * 1e3:>11.3f} ms {jax_s * 1e3:>13.1f} ms")
    print()
    print(f"{'arguments':>10} {'static check':>14} {'per argument':>14}")
    for n in (10, 100, 1000):
        s = synthetic(n)
        t = timed(lambda s=s: check(s), 5)
        print(f"{n:>10} {t * 1e3:>11.2f} ms {t / n * 1e6:>11.1f} us")
    print()
    print(f"{'depth':>10} {'static check':>14} {'per step':>14}")
    for d in (1, 8, 32, 64):
        s = synthetic(20, d)
        t = timed(lambda s=s: check(s), 5)
        print(f"{d:>10} {t * 1e3:>11.2f} ms {t / (20 * d) * 1e6:>11.1f} us")


if __name__ == "__main__":
    main()
