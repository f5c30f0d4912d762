"""The deterministic performance guard (``bench/icount.py``): the bytecode instructions
of a check of each gallery scenario, against the committed ``bench/icount.json``.

When a scenario's rules or whole check grows more than ``bench.icount.TOLERANCE``
over its figure, this fails. A growth that buys something (a new rule) is committed
with new figures: ``python -m bench.icount --write``, and the commit says what grew and
why. A shrink is committed the same way, so the guard holds the new level.
"""

from __future__ import annotations

import json

from bench import icount


def test_no_gallery_check_grew_over_its_committed_count() -> None:
    committed = json.loads(icount.FIGURES.read_text(encoding="utf-8"))
    got = icount.measure()
    assert set(got) == set(committed), "gallery changed: python -m bench.icount --write"
    bad = icount.grown(got, committed)
    assert not bad, (
        "instruction counts grew:\n"
        + "\n".join(bad)
        + "\nIf meant: python -m bench.icount --write (and say why in the commit)"
    )


def test_the_counter_counts_work_and_the_guard_sees_growth() -> None:
    """More work is more instructions, and a count over the tolerance is reported."""

    def work(n: int) -> int:
        total = 0
        for i in range(n):
            total += i
        return total

    with icount.Counter() as small:
        work(100)
    with icount.Counter() as large:
        work(1000)
    assert 0 < small.n < large.n
    assert 9 * small.n < large.n < 11 * small.n
    row = {"rules": 100, "sync": 0, "fixes": 0, "whole": 100}
    assert icount.grown({"x": row}, {"x": row}) == []
    more = {**row, "rules": int(100 * (1 + icount.TOLERANCE)) + 1}
    assert icount.grown({"x": more}, {"x": row}) == [
        f"x rules: {more['rules']:,} instructions, +{more['rules'] - 100}% over 100"
    ]


def test_phases_add_up_to_the_whole_check() -> None:
    """``--phases`` splits a first check: its parts add up to the whole, the candidates'
    checks are counted where a candidate was checked, and a scenario with an offered
    fix has the cost of applying it."""
    row = icount.phases("dup-ref")
    assert set(row) == {*icount.PHASES, *icount.RECHECK}
    parts = ("compile", "rules", "sync", "offer", "recheck")
    assert row["whole"] == sum(row[k] for k in parts)
    assert row["checks"] >= 1 and row["recheck"] > 0 and row["apply"] > 0
    # the candidates' checks split into their plans, other rules and race checks, which
    # leave out only validating and keeping them
    assert all(row[k] > 0 for k in icount.RECHECK)
    assert sum(row[k] for k in icount.RECHECK) < row["recheck"]
    clean = icount.phases("dup-ref-fixed")
    assert clean["checks"] == 0 and clean["recheck"] == 0 and clean["apply"] == -1
    assert all(clean[k] == 0 for k in icount.RECHECK)
    table = icount.phases_table({"dup-ref": row})
    assert "of all" in table and "of the candidates' checks" in table
