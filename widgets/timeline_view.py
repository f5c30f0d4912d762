"""WitnessTimeline: a race's or deadlock's witness drawn as a timeline in a problem's
card (``mpmd_lab.timeline``'s PNG), drawn when asked: the drawing is the library's."""

from __future__ import annotations

from typing import Any

import ipywidgets as w
from mpmd_lab.widgets import common as c


class WitnessTimeline(w.VBox):
    """A "Show the witness timeline" toggle over ``witness`` (``Diagnostic.witness``):
    the first click draws it (``mpmd_lab.timeline.witness_png``), the next ones hide or
    show it again; a drawing that fails says why and leaves the card as it was."""

    def __init__(self, witness: dict[str, Any]) -> None:
        super().__init__()
        self.witness = witness
        self.add_class("mpl-witness")
        what = "race" if witness.get("kind") == "race" else "deadlock"
        self.toggle = w.ToggleButton(
            value=False,
            description="Show the witness timeline",
            tooltip=f"the schedule that shows this {what}, one row per actor",
            layout=c.lay(width="auto"),
        )
        self.toggle.add_class("mpl-witness-toggle")
        self.image = w.Image(format="png", layout=c.lay(max_width="100%"))
        self.image.add_class("mpl-witness-timeline")
        self.error = w.HTML("")
        self.toggle.observe(self._shown, names="value")
        self.children = [self.toggle]

    def _shown(self, change: dict[str, Any]) -> None:
        if not change["new"]:
            self.children = [self.toggle]
            return
        if not self.image.value:
            from mpmd_lab.timeline import witness_png

            try:
                self.image.value = witness_png(self.witness)
            except Exception as e:  # noqa: BLE001 - a drawing never hides the diagnostic
                self.error.value = (
                    f"<div class='mpl-note'>The timeline could not be drawn: "
                    f"{c.esc(f'{type(e).__name__}: {e}')}</div>"
                )
                self.children = [self.toggle, self.error]
                return
        self.children = [self.toggle, self.image]


__all__ = ["WitnessTimeline"]
