"""The Lab's state machine (issue 30), widget level, no browser: what a user presses while
the scenario changes (an open, an undo, a redo) acts on the scenario shown once the change
is done, never on the one before it: Run and Show JAX code and Save wait for it, and a fix
pressed on the problems of the scenario before applies nothing."""

from __future__ import annotations

import json
import threading

import ipywidgets as w
from mpmd_lab import codegen
from mpmd_lab.session import Session
from mpmd_lab.widgets import Lab
from mpmd_lab.widgets.testing import find, find_all, text_of


def press_during_changes(lab: Lab, press) -> list[str]:
    """Call ``press()`` once each time a change starts; returns what each change was."""
    seen: list[str] = []

    def watch(st: Session) -> None:
        if st.busy:
            seen.append(st.busy)
            press()

    lab.state.subscribe_busy(watch)
    return seen


def test_run_pressed_during_undo_and_redo_runs_the_scenario_shown_after():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    lab.runner.backend.value = "simulate"
    assert lab.state.load("ring-shift").ok
    seen = press_during_changes(lab, lambda: find(lab, "mpl-run", w.Button).click())
    for step, shown in ((lab.undo, "dup-ref-fixed"), (lab.redo, "ring-shift")):
        step()
        outcome = lab.runner.outcome
        assert lab.state.scenario.name == shown
        assert outcome is not None and outcome.status == "ok", outcome
        assert outcome.name == shown and outcome.version == lab.state.version
        assert lab.state.run_is_current
    assert seen == ["undoing", "redoing"]
    alone = Session("ring-shift").run("simulate").outputs  # the same values, run on its own
    got = lab.runner.outcome.outputs
    assert got.keys() == alone.keys() and all((got[k] == alone[k]).all() for k in got)


def test_run_pressed_from_another_thread_during_an_open_runs_what_was_opened():
    """The open runs on one thread, Run is pressed on another while it is under way (the
    panel's worker runs it in the background): the run is of the scenario opened."""
    lab = Lab("dup-ref-fixed", background=True, graph=False)
    lab.runner.backend.value = "simulate"
    started, pressed = threading.Event(), threading.Event()

    def hold(st: Session) -> None:
        if st.busy == "opening":
            started.set()
            assert pressed.wait(30)

    lab.state.subscribe_busy(hold)
    opener = threading.Thread(target=lambda: lab.state.load("ring-shift"))
    opener.start()
    assert started.wait(30)
    assert lab.runner.run_button.disabled and lab.save_button.disabled
    lab.runner.run()  # what the button does
    assert "queued" in lab.runner.status.value
    pressed.set()
    opener.join(60)
    assert lab.runner.done.wait(120)
    outcome = lab.runner.outcome
    assert outcome is not None and outcome.name == "ring-shift", outcome
    assert outcome.version == lab.state.version and outcome.status == "ok"


def test_save_pressed_during_an_open_saves_the_scenario_opened(tmp_path):
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    target = tmp_path / "mine.json"
    lab.path.value = str(target)
    press_during_changes(lab, lab.save)  # what the Save button does
    assert lab.state.load("ring-shift").ok
    assert json.loads(target.read_text())["name"] == "ring-shift"
    assert lab.state.path == target and not lab.state.dirty
    assert "saved to" in lab.message.value or "saved to" in lab.state.message


def test_show_jax_code_pressed_during_an_open_shows_the_code_opened():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    press_during_changes(lab, find(lab, "mpl-show-code", w.Button).click)
    assert lab.state.load("ring-shift").ok
    assert lab.runner.code_shown
    assert lab.runner.code.text == codegen.generate(lab.state.scenario)
    assert lab.state.undo()  # pressed again during the undo: hidden once it is done
    assert not lab.runner.code_shown and lab.runner.code.text == ""


def test_a_fix_pressed_on_the_problems_before_an_open_applies_nothing():
    """The cards on screen were dup-ref's when pressed; by the time the press is handled
    ring-shift is open: neither its fix nor Fix all touches ring-shift."""
    lab = Lab("dup-ref", background=False, graph=False)
    fix_button = lab.problems.fix_buttons()[0]
    fix_all = find(lab.problems, "mpl-fix-all", w.Button)
    held: list[bool] = []
    press_during_changes(lab, lambda: held.append(fix_button.disabled and fix_all.disabled))
    assert lab.state.load("ring-shift").ok
    assert held == [True]  # shown disabled while the open ran
    before = lab.state.scenario
    for pressed in (fix_button, fix_all):
        pressed.click()
        assert lab.state.scenario == before and lab.state.scenario.name == "ring-shift"
        assert "not applied: the scenario changed" in lab.problems.error.value
    assert lab.state.undo()  # dup-ref again: its fixes can be pressed
    buttons = lab.problems.fix_buttons(all_fixes=True)
    assert len(buttons) >= 2 and not any(b.disabled for b in buttons)


def test_fix_all_reaches_a_valid_scenario_in_one_undo_step():
    lab = Lab("dup-ref", background=False, graph=False)
    assert not lab.state.valid
    find(lab.problems, "mpl-fix-all", w.Button).click()
    assert lab.state.valid, [d.code for d in lab.state.diagnostics]
    steps = lab.problems.error.value
    assert "mpl-fix-all-steps" in steps and "MPMD_DUP_REF" in steps
    assert "valid" in lab.title.value and "no problems found" in text_of(lab.problems)
    lab.undo()
    assert not lab.state.valid and lab.state.scenario.name == "dup-ref"


def test_the_graph_says_which_scenario_it_shows_so_a_new_one_starts_from_its_first_view():
    """The browser keeps the user's pan and zoom while the picture is of the same
    scenario (edits), and starts from the first view when it is of another (an open, an
    undo of it): ``subject`` tells it which."""
    lab = Lab("ring-shift", background=False, graph=True)
    view = lab.graph.view
    assert view is not None
    first = view.subject
    assert lab.state.edit(("replace", "buffers.x.shape", [256])).ok
    lab.graph.redraw()
    assert view.subject == first
    assert lab.state.load("dup-ref").ok
    lab.graph.redraw()
    opened = view.subject
    assert opened not in ("", first)
    lab.problems.fix_all()  # dup-ref becomes dup-ref-fixed: another picture
    lab.graph.redraw()
    assert view.subject not in (opened, first) and lab.state.valid


def test_shapes_say_they_are_per_device_and_a_run_says_it_shows_every_device():
    """On a device mesh the editors' shapes are one device's and a run's outputs hold
    every device's part: each says so (issue 30: "global vs per-device shapes")."""
    lab = Lab("ring-shift", background=False, graph=False)
    for section in (lab.call.buffers, lab.call.outputs):
        assert "shapes are per device (4 devices)" in text_of(section)
    lab.runner.backend.value = "simulate"
    lab.runner.run()
    shown = text_of(lab.runner.results)
    local = list(lab.state.scenario.call.outputs["out"].shape)
    assert local == [256] and "[1024] float32 · all 4 devices (per device: [256])" in shown
    assert lab.state.edit(("replace", "device_mesh", None)).ok  # one device: nothing to say
    assert "per device" not in text_of(lab.call.buffers) + text_of(lab.call.outputs)


def test_a_device_mesh_added_shows_the_spec_fields_at_once():
    """The argument and output rows are shown under the device mesh: adding one brings
    their partition-spec fields and the per-device words without any other edit."""
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    specs = ("mpl-arg-spec", "mpl-output-spec")
    assert not lab.state.scenario.device_mesh
    assert [len(find_all(lab.call, css, w.Text)) for css in specs] == [0, 0]
    assert lab.state.edit(("replace", "device_mesh", {"dev": 2})).ok
    assert [len(find_all(lab.call, css, w.Text)) for css in specs] == [1, 1]
    assert "shapes are per device (2 devices)" in text_of(lab.call.outputs)
    assert lab.state.undo()
    assert [len(find_all(lab.call, css, w.Text)) for css in specs] == [0, 0]
