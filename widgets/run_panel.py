"""RunPanel: choose a backend, Run (``mpmd_lab.runtime.run``), watch progress, then see the
outputs as tables and small plots, or the JAX error as an explanation card with its fix."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import ipywidgets as w
import numpy as np
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services

MAX_ROWS, MAX_COLS = 8, 16


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and getattr(ip, "kernel", None) is not None
    except ImportError:
        return False


def table_html(name: str, a: np.ndarray | None, note: str = "") -> str:
    """An output as a small table: its shape and dtype, then the first rows and columns."""
    if a is None:
        return f"<div><b>{c.esc(name)}</b>: too large to show (sha256 only)</div>"
    a = np.asarray(a)
    head = (
        f"<b>{c.esc(name)}</b> <span class='mpl-hint'>{list(a.shape)} {a.dtype}{c.esc(note)}</span>"
    )
    m = a.reshape(1, -1) if a.ndim <= 1 else a.reshape(-1, a.shape[-1])
    rows = []
    for r in m[:MAX_ROWS]:
        cells = "".join(f"<td>{_num(v)}</td>" for v in r[:MAX_COLS])
        rows.append(f"<tr>{cells}{'<td>…</td>' if len(r) > MAX_COLS else ''}</tr>")
    if len(m) > MAX_ROWS:
        rows.append("<tr><td>⋮</td></tr>")
    return f"<div>{head}<table class='mpl-table'>{''.join(rows)}</table></div>"


def _num(v: Any) -> str:
    if isinstance(v, np.floating | float):
        return f"{float(v):.4g}"
    return c.esc(v)


def plot_png(name: str, a: np.ndarray) -> bytes:
    """A small picture of an output: a line over the flattened values, or an image for 2-D."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    a = np.asarray(a, dtype=float)
    fig = Figure(figsize=(3.2, 1.5), dpi=80)
    ax = fig.add_subplot()
    if a.ndim == 2 and min(a.shape) > 1:
        im = ax.imshow(a, aspect="auto", cmap="viridis")
        fig.colorbar(im, ax=ax)
    else:
        ax.plot(a.ravel(), lw=1)
        ax.set_xlabel("flat index", fontsize=7)
    ax.set_title(name, fontsize=8)
    ax.tick_params(labelsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class RunPanel(w.VBox):
    """Run the scenario on a backend; show outputs, or the error and its fix."""

    def __init__(self, state: Session, background: bool | None = None, timeout: float = 180):
        super().__init__()
        self.state = state
        self.background = _in_kernel() if background is None else background
        self.add_class("mpl-run-panel")
        self.backend = w.Dropdown(
            options=services.backends(),
            value="auto",
            description="backend",
            layout=w.Layout(width="200px"),
        )
        self.timeout = w.BoundedIntText(
            value=int(timeout),
            min=5,
            max=3600,
            description="timeout s",
            layout=w.Layout(width="160px"),
        )
        self.run_button = c.button(
            "▶ Run", self.run, "build the real JAX call and run it", css="mpl-run"
        )
        self.progress = w.FloatProgress(value=0, min=0, max=1, layout=w.Layout(width="160px"))
        self.status = w.HTML("<span class='mpl-hint'>not run yet</span>")
        self.status.add_class("mpl-run-status")
        self.results = w.VBox()
        self.results.add_class("mpl-run-results")
        self.outcome: services.RunOutcome | None = None
        self.done = threading.Event()
        self._thread: threading.Thread | None = None
        run = state.scenario.run
        self.interpret = w.Dropdown(
            options=[("GPU interpreter", "gpu"), ("HLO interpreter", "hlo")],
            value=run.interpret,
            description="on CPU",
            layout=w.Layout(width="220px"),
        )
        self.interpret.add_class("mpl-interpret")
        self.races = w.Checkbox(
            value=run.detect_races,
            description="detect races",
            indent=False,
            layout=w.Layout(width="120px"),
        )
        self.races.add_class("mpl-detect-races")
        self.run_options = w.HBox(
            [
                c.field(
                    self.interpret,
                    lambda v: state.edit(("replace", "run.interpret", v), label="interpreter"),
                ),
                c.field(
                    self.races,
                    lambda v: state.edit(("replace", "run.detect_races", v), label="detect races"),
                ),
            ],
            layout=w.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.code_button = c.button(
            "Show JAX code",
            self.toggle_code,
            "the plain JAX program this scenario stands for",
            css="mpl-show-code",
        )
        self.code = w.HTML()
        self.code.add_class("mpl-code-view")
        self.children = [
            w.HTML(
                "<div class='mpl-h'>Run <span class='mpl-hint'>the real JAX call (auto: the GPU "
                "if there is one, else interpret mode on the CPU)</span></div>"
            ),
            w.HBox(
                [self.backend, self.timeout],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.run_options,
            w.HBox(
                [self.run_button, self.progress, self.status],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.results,
            self.code_button,
            self.code,
        ]
        state.subscribe(self._on_change)

    # ------------------------------------------------------------ export

    def toggle_code(self) -> None:
        """Show (or hide) the generated JAX source of the current scenario."""
        if self.code.value:
            self.code.value, self.code_button.description = "", "Show JAX code"
            return
        self._show_code()

    def _show_code(self) -> None:
        try:
            src = services.jax_source(self.state)
            self.code.value = f"<pre class='mpl-source'>{c.esc(src)}</pre>"
        except services.Unavailable as e:
            self.code.value = c.problems_html([("", str(e))])
        self.code_button.description = "Hide JAX code"

    def _on_change(self, state: Session, why: str) -> None:
        run = state.scenario.run
        if (self.interpret.value, self.races.value) != (run.interpret, run.detect_races):
            self._sync_options(run)
        if self.code.value:
            self._show_code()
        if self.outcome is None or why in ("saved", "program selected"):
            return
        if why.startswith("loaded"):  # another scenario: its old outputs would mislead
            self.outcome = None
            old, self.results.children = self.results.children, ()
            for kid in old:
                c.close_tree(kid)
            self.progress.value, self.progress.bar_style = 0, ""
            self.status.value = "<span class='mpl-hint'>not run yet</span>"
            return
        self.results.add_class("mpl-stale")
        self.status.value = (
            "<span class='mpl-hint'>the scenario changed since this run (outputs greyed): "
            "run again</span>"
        )

    def _sync_options(self, run: Any) -> None:
        """Show the scenario's run options (after undo, load, a fix); setting them back
        commits nothing (an edit to the same value is not a change)."""
        self.interpret.value, self.races.value = run.interpret, run.detect_races

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """Start a run (in a thread inside a kernel, so the UI stays live)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self.done.clear()
        self.run_button.disabled = True
        self.progress.value, self.progress.bar_style = 0.05, "info"
        self.status.value = "running…"
        self._started = time.perf_counter()
        backend, timeout = self.backend.value, self.timeout.value
        if self.background:
            self._thread = threading.Thread(
                target=self._work,
                args=(backend, timeout),
                daemon=True,
                name="mpmd-lab-run",
            )
            self._thread.start()
        else:
            self._work(backend, timeout)

    def _on_progress(self, *args: Any, **kwargs: Any) -> None:
        fracs = [a for a in args if isinstance(a, float) and 0 <= a <= 1]
        words = [str(a) for a in args if not isinstance(a, float)] + [
            f"{k}={v}" for k, v in kwargs.items()
        ]
        if fracs:
            self.progress.value = max(self.progress.value, fracs[0])
        else:
            self.progress.value = min(0.9, self.progress.value + 0.15)
        secs = time.perf_counter() - self._started
        self.status.value = f"running… {c.esc(' '.join(words))} ({secs:.1f} s)"

    def _work(self, backend: str, timeout: float) -> None:
        try:
            outcome = services.run(self.state, backend, timeout, self._on_progress)
            self.show(outcome)
        except Exception as e:  # never leave the panel stuck in "running"
            self.show(services.RunOutcome("error", backend, error=services.run_error(e)))
        finally:
            self.run_button.disabled = False
            self.done.set()

    # ------------------------------------------------------------ results

    def show(self, outcome: services.RunOutcome) -> None:
        self.outcome = outcome
        self.results.remove_class("mpl-stale")
        self.progress.value = 1.0
        secs = f" in {outcome.seconds:.1f} s" if outcome.seconds else ""
        old = self.results.children
        if outcome.status == "ok":
            self.progress.bar_style = "success"
            self.status.value = (
                f"<b style='color:#2e7d32'>✔ ran</b> on {c.esc(outcome.backend)}{secs}"
            )
            self.results.children = self._outputs(outcome)
        else:
            self.progress.bar_style = "danger"
            self.status.value = f"<b style='color:#b00020'>✘ JAX error</b>{secs}"
            self.results.children = self._error(outcome)
        for kid in old:
            c.close_tree(kid)

    def _outputs(self, outcome: services.RunOutcome) -> list[w.Widget]:
        cells: list[w.Widget] = []
        for name, a in outcome.outputs.items():
            note = " (the Ref after the call)" if name in self.state.scenario.buffers else ""
            kids: list[w.Widget] = [w.HTML(table_html(name, a, note))]
            if a is not None and np.asarray(a).size > 1:
                try:
                    kids.append(
                        w.Image(
                            value=plot_png(name, a), format="png", layout=w.Layout(width="260px")
                        )
                    )
                except Exception as e:  # a plotting problem never hides the values
                    kids.append(w.HTML(c.problems_html([("", f"plot failed: {e}")])))
            box = w.HBox(
                kids,
                layout=w.Layout(align_items="flex-start", margin="2px 0", flex_flow="row wrap"),
            )
            box.add_class(f"mpl-output-{name}")
            cells.append(box)
        return cells or [w.HTML("<i>the call has no outputs</i>")]

    def _error(self, outcome: services.RunOutcome) -> list[w.Widget]:
        d = outcome.error or Diagnostic(
            code="RUN_ERROR", stage="interpret", message="the run failed"
        )
        code = d.code
        kids: list[w.Widget] = [w.HTML(c.diagnostic_html(d))]
        fix = next((x.fix for x in self.state.diagnostics if x.code == code and x.fix), None)
        if fix is not None:
            b = c.button(
                "✔ Apply fix",
                lambda: self._apply(fix),
                fix.description,
                css="mpl-fix",
            )
            b.layout = c.lay(width="140px")
            kids.append(b)
        elif code:
            kids.append(
                w.HTML(
                    "<span class='mpl-hint'>no automatic fix for this one; the card "
                    "says what to change</span>"
                )
            )
        return kids

    def _apply(self, fix: Any) -> None:
        result = self.state.apply_fix(fix)
        if not result.ok:
            self.results.children = [
                *self.results.children,
                w.HTML(c.problems_html(result.problems)),
            ]
