"""The README's "Measured" table from a real run: ``python -m bench.readme_table RUN.json``
(``RUN.json`` from ``python -m bench --json -o RUN.json``) prints the Markdown.

One line per row that has a target, plus the rows named in ``ALSO``; the heading says
when the run was and at what load, so a figure never outlives its context.
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: Rows without a target worth showing too (by the start of their measure).
ALSO = (
    "least speed-up over",
    "`mpmd-lab check` 13 gallery files",
    "  the same, CPU time",
    "run overhead",
    "~2000 nodes (",
    "~50 nodes, matplotlib PNG",
)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.0f} µs"
        if value < 1:
            return f"{value * 1e3:.1f} ms"
        return f"{value:.2f} s"
    if unit == "exponent":
        return f"k = {value:.2f}"
    if unit == "x":
        return f"{value:.1f}x"
    return f"{value:.2f}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a ``|`` of the text would end the cell)."""
    return text.replace("|", "\\|")


def table(doc: dict[str, Any]) -> str:
    h = doc["header"]
    lines = [
        f"Measured {h['date']} with `python -m bench --json` (Python {h['python']}, "
        f"jax {h['jax']} on {h['platform']}, {h['cpus']} CPUs, load average "
        f"{h['load_at_start']} at start, {h.get('load_at_end', '?')} at the end; "
        "medians; ratio = mpmd-lab / baseline):",
        "",
        "| section | what | mpmd-lab | baseline | ratio | target | |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in doc["rows"]:
        keep = r["target"] or any(r["measure"].startswith(a) or r["section"] == a for a in ALSO)
        if not keep or r["value"] is None:
            continue
        ok = {True: "ok", False: "**missed**", None: ""}[r["ok"]]
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.3g}"
        lines.append(
            f"| {r['section']} | {_cell(r['measure'].strip())} | {_fmt(r['value'], r['unit'])} | "
            f"{_cell(r['detail']['baseline'] or '')} | {ratio} | {r['target']} | {ok} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        print(table(json.load(f)))
