"""Benchmark: the Lab's edit-to-feedback time on every gallery scenario.

Run ``python bench/bench_widgets.py`` (or ``python -m bench.bench_widgets``). One line per
scenario: median and worst time from an edit to re-validated problems, badges and
editors (target: under 100 ms), and the aliasing graph's redraw time (drawn just after
the feedback, on a timer thread inside a kernel).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpmd_lab import gallery  # noqa: E402
from mpmd_lab.widgets.bench import feedback_ms  # noqa: E402


def main() -> None:
    for name in gallery.names():
        r = feedback_ms(name, repeats=3, with_graph=True)
        print(
            f"widgets {name:28} feedback median {r['median_ms']:6.1f} ms"
            f"  max {r['max_ms']:6.1f} ms  graph {r['graph_median_ms']:7.1f} ms"
        )


if __name__ == "__main__":
    main()
