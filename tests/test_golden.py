"""The golden dump (``bench/golden.py``): every diagnostic, fix and resolved statement
of the gallery, ``tests/scenarios`` and the knowledge base's examples, as committed in
``bench/golden.txt``. A refactoring leaves it identical.

When a change of what the checker says is meant: ``python -m bench.golden --write``,
and say in the commit which scenarios changed and why (``python -m bench.golden --show
NAME`` prints one scenario's whole dump, to diff against main's).
"""

from __future__ import annotations

import pytest

from bench import golden


def test_the_golden_dump_is_unchanged() -> None:
    got = golden.compute()
    assert len(got) > 400  # gallery + tests/scenarios + knowledge examples
    diff = golden.differences(got, golden.GOLDEN.read_text(encoding="utf-8"))
    assert not diff, (
        "the checker's answers changed:\n"
        + "\n".join(diff[:40])
        + "\nIf meant: python -m bench.golden --write (and say why in the commit)"
    )


@pytest.mark.slow
def test_the_dump_sees_a_change() -> None:
    """The comparison is not vacuous: a changed hash and a lost scenario are found."""
    got = golden.compute()
    name = next(iter(got))
    digest, lines, short = got[name]
    committed = golden.render(got)
    assert golden.differences(got, committed) == []
    changed = dict(got)
    changed[name] = ("0" * 16, lines, short)
    assert golden.differences(changed, committed) == [
        f"{name}: dump changed ({digest} -> {'0' * 16})"
    ]
    del changed[name]
    assert golden.differences(changed, committed) == [f"{name}: gone"]
