"""The one table ``make bench`` prints: measure, mpmd-lab, baseline, ratio, target."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Row:
    section: str
    measure: str
    ours: str = "n/a"
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    verdict: str = ""  # "ok", "MISSED", or "" (no target)


HEAD = ("section", "measure", "mpmd-lab", "baseline", "ratio", "target", "")


def render(rows: list[Row]) -> str:
    cells = [HEAD] + [
        (r.section, r.measure, r.ours, r.baseline, r.ratio, r.target, r.verdict) for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEAD))]
    lines = []
    for j, c in enumerate(cells):
        lines.append("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"
