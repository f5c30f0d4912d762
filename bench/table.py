"""The one table ``make bench`` prints (measure, mpmd-lab, baseline, ratio, target) and
its JSON form (``python -m bench --json``): one object per row with stable keys."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The keys of every row in ``--json`` output, always all present (``null`` when a row
#: has no such figure): value and baseline in ``unit``, ratio = value / baseline.
JSON_KEYS = ("section", "measure", "value", "unit", "baseline", "ratio", "target", "ok")


@dataclass
class Row:
    section: str
    measure: str
    ours: str = "n/a"
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    verdict: str = ""  # "ok", "MISSED", or "" (no target)
    value: float | None = None  # the figure behind ``ours``, in ``unit``
    unit: str = ""
    base: float | None = None  # the figure behind ``baseline``, in ``unit``
    ratio_value: float | None = None  # when the ratio is not value / base

    def to_json(self) -> dict[str, Any]:
        """The row with the stable keys ``JSON_KEYS`` (and ``detail``: the table's text)."""
        ratio = self.ratio_value
        if ratio is None and self.value is not None and self.base:
            ratio = self.value / self.base
        if ratio is None:
            ratio = _number(self.ratio)
        return {
            "section": self.section,
            "measure": self.measure,
            "value": _finite(self.value),
            "unit": self.unit,
            "baseline": _finite(self.base),
            "ratio": _finite(None if ratio is None else round(ratio, 4)),
            "target": self.target,
            "ok": {"ok": True, "MISSED": False}.get(self.verdict),
            "detail": {"ours": self.ours, "baseline": self.baseline, "ratio": self.ratio},
        }


def timed(
    section: str,
    measure: str,
    seconds: float | None,
    base_seconds: float | None = None,
    target_s: float | None = None,
    baseline: str | None = None,
    ratio: str | None = None,
) -> Row:
    """A row of times in seconds: text for the table and numbers for ``--json``."""
    from bench.timing import fmt_s

    r = None if seconds is None or not base_seconds else seconds / base_seconds
    ok = None if target_s is None or seconds is None else seconds < target_s
    return Row(
        section,
        measure,
        fmt_s(seconds),
        baseline if baseline is not None else (fmt_s(base_seconds) if base_seconds else ""),
        ratio if ratio is not None else (f"{r:.2f}" if r is not None else ""),
        f"< {fmt_s(target_s)}" if target_s is not None else "",
        "" if ok is None else verdict(ok),
        value=seconds,
        unit="s",
        base=base_seconds,
    )


def _number(text: str) -> float | None:
    try:
        return float(text.rstrip("x"))
    except (ValueError, AttributeError):
        return None


def _finite(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


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
