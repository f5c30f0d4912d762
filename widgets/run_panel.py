"""RunPanel: choose a backend, Run (``mpmd_lab.runtime.run``), watch progress, then see the
outputs as tables and small plots, or the JAX error as an explanation card with its fix."""

from __future__ import annotations

import io
import threading
import time
from functools import partial
from typing import Any

import ipywidgets as w
import numpy as np
from mpmd_lab.diagnostics import INTERP_CANNOT, Diagnostic
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services

MAX_ROWS, MAX_COLS = 8, 16


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
    table = f"<table class='mpl-table'>{''.join(rows)}</table>"
    return f"<div>{head}<div class='mpl-table-scroll'>{table}</div></div>"


def whole_note(scenario: Any, name: str, a: Any) -> str:
    """On a device mesh, that an output (or a Ref after the call) holds every device's
    part, and one device's shape (the editors'); "" where the shapes say nothing."""
    if a is None or not scenario.device_mesh:
        return ""
    outputs = scenario.call.outputs
    if name in outputs:
        local, whole = list(outputs[name].shape), scenario.output_global_shape(name)
    elif name in scenario.buffers:
        local, whole = list(scenario.buffers[name].shape), scenario.global_shape(name)
    else:
        return ""
    if list(np.shape(a)) != whole or whole == local:
        return ""
    return f" · all {scenario.num_devices} devices (per device: {local})"


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


def run_error_html(d: Diagnostic) -> str:
    """A run's error as a card: its code and title, JAX's words in short, the whole of
    what JAX printed folded away (a traceback never runs off the panel)."""
    title = services.title_of(d.code, d.message)
    short = d.message
    parts = [
        f"<div class='mpl-card error' data-code='{c.esc(d.code)}'>",
        f"<span class='mpl-code'>{c.esc(d.code)}</span>",
        f" <b>{c.esc(title)}</b>" if title else "",
        f" <span class='mpl-hint'>({c.esc(services.where_raised(d))})</span>",
        f"<div class='mpl-jax'>{c.esc(short)}</div>",
    ]
    if d.path:
        parts.insert(4, f"<div class='mpl-path'>at {c.esc(d.path)}</div>")
    full = d.jax.message if d.jax is not None else ""
    if full and full.strip() != short.strip():
        parts.append(
            "<details class='mpl-more'><summary>everything JAX printed</summary>"
            f"<pre class='mpl-source mpl-jax-full'>{c.esc(full)}</pre></details>"
        )
    card = services.card_html(d.code)
    if card:
        parts.append(
            "<details class='mpl-more'><summary>More: what it means, how to fix it</summary>"
            f"{card}</details>"
        )
    parts.append("</div>")
    return "".join(parts)


class RunPanel(w.VBox):
    """Run the scenario on a backend; show outputs, or the error and its fix."""

    def __init__(self, state: Session, background: bool | None = None, timeout: float = 180):
        super().__init__()
        self.state = state
        self.background = c.in_kernel() if background is None else background
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
        self.cancel_button = c.button(
            "■ Cancel", self.cancel, "stop this run (its JAX worker is stopped)", css="mpl-cancel"
        )
        self.cancel_button.layout = w.Layout(width="90px", display="none")
        self._token = 0  # which run the panel waits for (a cancelled one is ignored)
        self._queued = False  # Run pressed while the scenario was changing
        self._queued_past_lowering = False
        self._queued_code = False  # Show JAX code pressed while the scenario was changing
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
        from mpmd_lab.widgets.code_view import CodeView

        self.code = CodeView()
        self.code.add_class("mpl-code-view")
        self.code_error = w.HTML()
        self.children = [
            w.HTML(
                "<div class='mpl-h'>Run <span class='mpl-hint'>the real JAX call (auto: the GPU "
                "if there is one, else JAX's CPU interpreter where it can run the call, else "
                "mpmd-lab's simulator)</span></div>"
            ),
            w.HBox(
                [self.backend, self.timeout],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.run_options,
            w.HBox(
                [self.run_button, self.cancel_button, self.progress, self.status],
                layout=w.Layout(align_items="center", flex_flow="row wrap"),
            ),
            self.results,
            self.code_button,
            self.code_error,
            self.code,
        ]
        state.subscribe(self._on_change)
        state.subscribe_busy(self._on_busy)

    def _on_busy(self, state: Session) -> None:
        """While the scenario changes, Run and Show JAX code wait (disabled): they act
        on the scenario on screen, and the one on screen is not yet the session's."""
        self.run_button.disabled = bool(state.busy) or self.running
        self.code_button.disabled = bool(state.busy)
        if not state.busy and self._queued_code:  # Show/Hide JAX code pressed during it
            self._queued_code = False
            self.toggle_code()
        if not state.busy and self._queued:  # a Run pressed during the change: now
            self._queued = False
            self.run(past_lowering=self._queued_past_lowering)

    # ------------------------------------------------------------ export

    @property
    def code_shown(self) -> bool:
        return self.code_button.description == "Hide JAX code"

    def toggle_code(self) -> None:
        """Show (or hide) the generated JAX source of the current scenario: the kernel
        first, highlighted, with copy buttons; pressed while the scenario changes, once
        the change is done (the code of the scenario then shown)."""
        if self.state.busy:  # of the scenario shown once the change is done
            self._queued_code = True
            return
        if self.code_shown:
            self.code.clear()
            self.code_error.value = ""
            self.code_button.description = "Show JAX code"
            return
        self._show_code()

    def _show_code(self) -> None:
        try:
            self.code.show(services.jax_source(self.state))
            self.code_error.value = ""
        except services.Unavailable as e:
            self.code.clear()
            self.code_error.value = c.problems_html([("", str(e))])
        self.code_button.description = "Hide JAX code"

    def _on_change(self, state: Session, why: str) -> None:
        run = state.scenario.run
        if (self.interpret.value, self.races.value) != (run.interpret, run.detect_races):
            self._sync_options(run)
        if self.code_shown:
            self._show_code()
        if self.outcome is None or why in ("saved", "program selected", "refused"):
            return
        if why.startswith("loaded"):  # another scenario: its old outputs would mislead
            self.outcome = None
            old, self.results.children = self.results.children, ()
            for kid in old:
                c.close_tree(kid)
            if self.cancel_button.layout.display == "none":
                self.progress.value, self.progress.bar_style = 0, ""
                self.status.value = "<span class='mpl-hint'>not run yet</span>"
            return
        if "mpl-stale" not in self.results._dom_classes:
            self._mark_stale()

    def _sync_options(self, run: Any) -> None:
        """Show the scenario's run options (after undo, load, a fix); setting them back
        commits nothing (an edit to the same value is not a change)."""
        self.interpret.value, self.races.value = run.interpret, run.detect_races

    # ------------------------------------------------------------ running

    def use_backend(self, name: str) -> None:
        """Choose the backend the next Run uses (the problems' one-click switch)."""
        self.backend.value = name
        if not self.running:
            self.status.value = (
                f"<span class='mpl-hint'>backend {c.esc(name)} chosen: press ▶ Run</span>"
            )

    @property
    def running(self) -> bool:
        """A run is going (its Cancel button shows)."""
        return self.cancel_button.layout.display != "none"

    def run(self, past_lowering: bool = False) -> None:
        """Start a run (in a thread inside a kernel, so the UI stays live); pressed while
        the scenario changes, it runs once the change is done (on the scenario then
        shown, never the one before). ``past_lowering``: simulate past a GPU-lowering
        error."""
        if self.running:
            return
        if self.state.busy:
            self._queued = True
            self._queued_past_lowering = past_lowering
            self.status.value = (
                "<span class='mpl-hint'>queued: runs once the change is done…</span>"
            )
            return
        self._token += 1
        token = self._token
        self.done.clear()
        self.run_button.disabled = True
        self.cancel_button.layout.display = None
        self.progress.value, self.progress.bar_style = 0.05, "info"
        self.status.value = "running…"
        self._started = time.perf_counter()
        backend, timeout = self.backend.value, self.timeout.value
        if past_lowering:
            backend = "simulate"
        if self.background:
            self._thread = threading.Thread(
                target=self._work,
                args=(backend, timeout, token, past_lowering),
                daemon=True,
                name="mpmd-lab-run",
            )
            self._thread.start()
        else:
            self._work(backend, timeout, token, past_lowering)

    def cancel(self) -> None:
        """Stop the run in progress: its JAX worker is killed (the next run starts a
        fresh one); a simulation's result is dropped when it comes."""
        if self.cancel_button.layout.display == "none":
            return
        from mpmd_lab import probe

        probe.cancel()
        self._token += 1  # the cancelled run's outcome, when it comes, is not shown
        secs = time.perf_counter() - self._started
        self._idle()
        self.progress.value, self.progress.bar_style = 1.0, "warning"
        self.status.value = (
            f"<b style='color:#b26a00'>■ cancelled</b> after {secs:.1f} s "
            "<span class='mpl-hint'>(its JAX worker was stopped)</span>"
        )
        self.done.set()

    def _idle(self) -> None:
        self.run_button.disabled = bool(self.state.busy)
        self.cancel_button.layout.display = "none"

    def _on_progress(self, *args: Any, **kwargs: Any) -> None:
        if self.cancel_button.layout.display == "none":
            return  # cancelled: the old run's progress is not this panel's any more
        fracs = [a for a in args if isinstance(a, float) and 0 <= a <= 1]
        words = [str(a) for a in args if not isinstance(a, float)] + [
            f"{k}={v}" for k, v in kwargs.items()
        ]
        if fracs:
            self.progress.value = max(self.progress.value, fracs[0])
        else:
            self.progress.value = min(0.9, self.progress.value + 0.15)
        secs = time.perf_counter() - self._started
        stage = " ".join(words)
        what = "starting JAX…" if stage == "start" else f"running… {stage}"
        self.status.value = f"{c.esc(what)} ({secs:.1f} s)"

    def _work(
        self, backend: str, timeout: float, token: int = 0, past_lowering: bool = False
    ) -> None:
        try:
            outcome = services.run(
                self.state, backend, timeout, self._on_progress, past_lowering=past_lowering
            )
        except Exception as e:  # never leave the panel stuck in "running"
            outcome = services.RunOutcome("error", backend, error=services.run_error(e))
        if token and token != self._token:
            return  # cancelled meanwhile: the panel already says so
        try:
            self.show(outcome)
        finally:
            self._idle()
            self.done.set()

    # ------------------------------------------------------------ results

    def show(self, outcome: services.RunOutcome) -> None:
        """Show a run's outcome; one of another version says so (greyed), one of a
        scenario closed since is not shown at all."""
        st = self.state
        self.progress.value = 1.0
        old = self.results.children
        if 0 <= outcome.version < st.opened_version:  # another scenario was opened since
            self.outcome = None
            self.results.children = ()
            for kid in old:
                c.close_tree(kid)
            self.progress.bar_style = ""
            self.status.value = (
                f"<span class='mpl-hint'>a run of {c.esc(outcome.name or 'the scenario')} "
                "finished after you opened another one: not shown. Run this one.</span>"
            )
            return
        self.outcome = outcome
        timing = f" <span class='mpl-hint'>{c.esc(outcome.timing)}</span>" if outcome.timing else ""
        reason = (
            f"<div class='mpl-hint mpl-run-reason'>{c.esc(outcome.reason)}</div>"
            if outcome.reason
            else ""
        )
        if outcome.status == "ok":
            self.progress.bar_style = "success"
            self.status.value = (
                f"<b style='color:#2e7d32'>✔ ran</b> on {c.esc(outcome.backend)}:{timing}{reason}"
            )
            self.results.children = self._lowering(outcome) + self._outputs(outcome)
        else:
            self.progress.bar_style = "danger"
            who = "error" if outcome.backend == "simulate" else "JAX error"
            self.status.value = (
                f"<b style='color:#b00020'>✘ {who}</b> on {c.esc(outcome.backend)}:{timing}{reason}"
            )
            self.results.children = self._error(outcome)
        for kid in old:
            c.close_tree(kid)
        if 0 <= outcome.version != st.version:  # edited while it ran
            self._mark_stale()
        else:
            self.results.remove_class("mpl-stale")

    def _mark_stale(self) -> None:
        self.results.add_class("mpl-stale")
        self.status.value += (
            "<div class='mpl-hint mpl-run-stale'>the scenario changed since this run "
            "(outputs greyed): run again</div>"
        )

    def _outputs(self, outcome: services.RunOutcome) -> list[w.Widget]:
        cells: list[w.Widget] = []
        for name, a in outcome.outputs.items():
            note = " (the Ref after the call)" if name in self.state.scenario.buffers else ""
            note += whole_note(self.state.scenario, name, a)
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
        if outcome.races:
            lines = "".join(f"<div>{c.esc(x)}</div>" for x in outcome.races)
            races = w.HTML(f"<div class='mpl-card warning mpl-run-races'>{lines}</div>")
            cells.append(races)
        if outcome.note:
            cells.append(w.HTML(f"<div class='mpl-hint mpl-run-note'>{c.esc(outcome.note)}</div>"))
        return cells or [w.HTML("<i>the call has no outputs</i>")]

    def _lowering(self, outcome: services.RunOutcome) -> list[w.Widget]:
        """The GPU-lowering error a simulation ran past: first, above the outputs."""
        if outcome.lowering is None:
            return []
        note = w.HTML(
            "<span class='mpl-hint'>a GPU compile stops at this error; simulated past it, "
            "as JAX's interpreters run the call:</span>"
        )
        box = w.VBox([note, w.HTML(run_error_html(outcome.lowering))])
        box.add_class("mpl-run-lowering")
        return [box]

    def _error(self, outcome: services.RunOutcome) -> list[w.Widget]:
        d = outcome.error or Diagnostic(
            code="RUN_ERROR", stage="interpret", message="the run failed"
        )
        code = d.code
        kids: list[w.Widget] = [*self._lowering(outcome), w.HTML(run_error_html(d))]
        if d.stage == "gpu-lower" and outcome.lowering is None:
            b = c.button(
                "▶ Simulate past it",
                lambda: self.run(past_lowering=True),
                "simulate the call as JAX's interpreters run it (they never lower for the GPU)",
                css="mpl-past-lowering",
            )
            kids.append(
                w.HBox(
                    [
                        w.HTML(
                            "<span class='mpl-hint'>JAX's interpreters never lower for the "
                            "GPU: the simulator runs the call past this error:</span>"
                        ),
                        b,
                    ],
                    layout=c.lay(align_items="center", flex_flow="row wrap"),
                )
            )
        # JAX's CPU interpreter cannot run the call; ``simulate`` can
        if code in INTERP_CANNOT and outcome.backend != "simulate":
            b = c.use_simulate_button(lambda: self.use_backend("simulate"))
            kids.append(
                w.HBox(
                    [
                        w.HTML(
                            "<span class='mpl-hint'>JAX's CPU interpreter cannot run this "
                            "call; the simulator can:</span>"
                        ),
                        b,
                    ],
                    layout=c.lay(align_items="center", flex_flow="row wrap"),
                )
            )
            return kids
        same = next((x for x in self.state.diagnostics if x.code == code and x.fixes), None)
        for i, fix in enumerate(same.fixes if same is not None else []):
            kids.append(c.fix_row(fix, i, partial(self._apply, fix)))
        if same is None and code:
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
