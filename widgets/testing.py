"""Driving the widgets without a browser: find widgets by the CSS classes the browser tests
use, then click or type into them through their traits (what the front end would do)."""

from __future__ import annotations

from collections.abc import Iterator

import ipywidgets as w


def walk(root: w.Widget) -> Iterator[w.Widget]:
    """Every widget under ``root`` (itself first), depth first, in display order."""
    yield root
    for child in getattr(root, "children", ()) or ():
        yield from walk(child)


def find_all(root: w.Widget, css: str, kind: type | None = None) -> list[w.Widget]:
    """Widgets under ``root`` carrying the CSS class ``css`` (and of type ``kind``)."""
    return [
        x
        for x in walk(root)
        if css in getattr(x, "_dom_classes", ()) and (kind is None or isinstance(x, kind))
    ]


def find(root: w.Widget, css: str, kind: type | None = None, index: int = 0) -> w.Widget:
    """The ``index``-th widget with class ``css``; a clear error when there is none."""
    found = find_all(root, css, kind)
    if len(found) <= index:
        raise LookupError(f"no widget #{index} with class {css!r} (found {len(found)})")
    return found[index]


def text_of(root: w.Widget) -> str:
    """All HTML/Label text under ``root``, joined (for asserting what a user would read)."""
    return "\n".join(
        str(x.value) for x in walk(root) if isinstance(x, w.HTML | w.Label | w.HTMLMath)
    )


def type_into(widget: w.ValueWidget, value: object) -> None:
    """What the browser sends when a user commits a value (Enter / blur / pick)."""
    widget.set_state({"value": value})


def unfold(lab: w.Widget, path: str) -> w.Widget:
    """Click the ▸ of the statement at ``path`` in ``lab``'s Call tab (a statement shows
    as one line until unfolded); its row, now with its editors."""
    row = lab.call.row_of(path)
    if row is None:
        raise LookupError(f"no statement row at {path!r} (inside a folded loop?)")
    find(row, "mpl-expand", w.Button).click()
    return lab.call.row_of(path)
