"""PuzzleBoard: the collectives puzzle track in a notebook.

A puzzle picker, the puzzle's goal, the Lab over its starting point (the editors, the
problems, the graph), and Check / Hint / Start over. The grading is the library's
(:func:`mpmd_lab.puzzles.grade`); the board only shows what it says.
"""

from __future__ import annotations

import html

import ipywidgets as w
from mpmd_lab import puzzles
from mpmd_lab.exercises import Verdict
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets.lab import Lab


class PuzzleBoard(w.VBox):
    """One puzzle at a time, edited in a :class:`Lab` and graded on demand.

    ``PuzzleBoard()`` opens the first puzzle, ``PuzzleBoard("double-buffer")`` that one.
    """

    def __init__(self, name: str | None = None, background: bool | None = None, graph: bool = True):
        super().__init__()
        self.add_class("mpl-puzzles")
        self.name = name or puzzles.names()[0]
        self.hints_shown = 0
        self.last: Verdict | None = None
        self.picker = c.make(
            w.Dropdown,
            options=[
                (f"{puzzles.get(n).level}. {puzzles.get(n).title}", n) for n in puzzles.names()
            ],
            value=self.name,
            description="Puzzle",
            width="420px",
        )
        self.picker.add_class("mpl-puzzle-picker")
        self.goal = w.HTML()
        self.goal.add_class("mpl-puzzle-goal")
        self.check_button = w.Button(description="Check", button_style="primary", icon="check")
        self.check_button.add_class("mpl-puzzle-check")
        self.hint_button = w.Button(description="Hint", icon="lightbulb-o")
        self.hint_button.add_class("mpl-puzzle-hint")
        self.reset_button = w.Button(description="Start over", icon="undo")
        self.reset_button.add_class("mpl-puzzle-reset")
        self.verdict = w.HTML()
        self.verdict.add_class("mpl-puzzle-verdict")
        self.hints = w.HTML()
        self.hints.add_class("mpl-puzzle-hints")
        self.lab = Lab(puzzles.start(self.name), background=background, graph=graph)

        self.picker.observe(lambda ch: self.choose(ch["new"]), names="value")
        self.check_button.on_click(lambda _: self.check())
        self.hint_button.on_click(lambda _: self.next_hint())
        self.reset_button.on_click(lambda _: self.start_over())
        buttons = w.HBox([self.check_button, self.hint_button, self.reset_button])
        self.children = [  # (the Lab brings the stylesheet)
            self.picker,
            self.goal,
            buttons,
            self.verdict,
            self.hints,
            self.lab,
        ]
        self._show_puzzle()

    # ------------------------------------------------------------ actions

    def choose(self, name: str) -> None:
        """Show puzzle ``name`` from its starting point (one undoable step in the Lab)."""
        self.name = name
        if self.picker.value != name:
            self.picker.value = name  # observed: comes back here once, with the same name
            return
        self.lab.state.replace(puzzles.start(name), f"puzzle {name}")
        self._show_puzzle()

    def check(self) -> Verdict:
        """Grade the scenario on screen and show the verdict."""
        self.last = puzzles.grade(self.name, self.lab.state.scenario)
        self.verdict.value = self.last._repr_html_()
        return self.last

    def next_hint(self) -> None:
        """Show one more hint (the last one gives the answer away)."""
        total = len(puzzles.get(self.name).hints)
        self.hints_shown = min(self.hints_shown + 1, total)
        self._show_hints()

    def start_over(self) -> None:
        """Put the starting point back (undoable in the Lab)."""
        self.lab.state.replace(puzzles.start(self.name), f"start over: {self.name}")
        self.verdict.value = ""

    # ------------------------------------------------------------ views

    def _show_puzzle(self) -> None:
        self.goal.value = puzzles.get(self.name)._repr_html_()
        self.verdict.value = ""
        self.hints_shown = 0
        self._show_hints()

    def _show_hints(self) -> None:
        hints = puzzles.get(self.name).hints
        shown = "".join(f"<li>{html.escape(h)}</li>" for h in hints[: self.hints_shown])
        left = len(hints) - self.hints_shown
        self.hints.value = (f"<ol>{shown}</ol>" if shown else "") + (
            f"<small>{left} hint(s) left</small>" if left else "<small>no hints left</small>"
        )
        self.hint_button.disabled = not left
