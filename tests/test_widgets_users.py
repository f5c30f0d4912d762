"""The Lab as users meet it (issue 15), told through widget traits (no kernel, no
browser): a race that threads cannot hide, Save that goes where the user meant, fixes
that lead somewhere, errors with a "did you mean", the CPU interpreter's limit said
once with a switch, runs that say what their time covers and can be cancelled, and no
stale state. The checks, fixes and runs are the real ones."""

from __future__ import annotations

import html
import json
import os
import threading
import time

import ipywidgets as w
import numpy as np
import pytest
from mpmd_lab import gallery, workers
from mpmd_lab.ops import BY_OP
from mpmd_lab.scenario import load_scenario
from mpmd_lab.widgets import Lab
from mpmd_lab.widgets.testing import find, find_all, text_of, type_into, walk


def errors(lab: Lab) -> list[str]:
    return [d.code for d in lab.state.diagnostics if d.is_error]


# ---------------------------------------------------------------- races and threads


def test_more_writers_never_remove_a_race():
    """Fixed dup-ref with two blocks races on ``out``; two warpgroups per block (four
    writers) still race: the header never turns valid."""
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    type_into(find(lab.meshes, "mpl-axis-size", w.Text), "2")
    assert lab.state.scenario.call.programs[0].mesh.grid == {"b": 2}
    assert errors(lab) == ["RACE"] and "✘" in lab.title.value
    find(lab.meshes, "mpl-threads", w.Checkbox).value = True
    threads = lab.state.scenario.call.programs[0].mesh.threads
    assert (threads.name, threads.count) == ("wg", 2)
    assert errors(lab) == ["RACE"], [d.one_line() for d in lab.state.diagnostics]
    assert "✔ valid" not in lab.title.value and "✘" in lab.title.value
    # the card names the path once, and does not say JAX raises a GPU race
    card = text_of(find(lab.problems, "mpl-diag-RACE"))
    assert "JAX raises it at gpu-run" not in card and "nothing is raised" in card
    (race,) = [d for d in lab.state.diagnostics if d.code == "RACE"]
    assert race.message.count("call.programs[0].body[0].dst") == 1


# ---------------------------------------------------------------- Save


def test_save_goes_where_the_user_meant(tmp_path):
    """Load a file, pick a gallery scenario: Save has no file to go to; naming the first
    file asks before replacing it; unsaved changes are marked."""
    first = tmp_path / "mine.json"
    first.write_text(gallery.path_of("two-block-copy").read_text())
    before = first.read_text()
    lab = Lab(str(first), background=False, graph=False)
    assert "unsaved" not in lab.title.value and "mine.json" in lab.title.value
    find(lab, "mpl-add-output", w.Button).click()
    assert "● unsaved" in lab.title.value
    lab.gallery.value = "ring-shift"  # another scenario: it has no file
    assert lab.path.value == "" and "no file yet" in lab.title.value
    lab.save_button.click()
    assert "no file yet" in lab.message.value and first.read_text() == before
    type_into(lab.path, str(first))  # the user names the first file
    lab.save_button.click()
    assert first.read_text() == before  # not replaced without asking
    assert "confirm to replace" in lab.message.value
    assert lab.replace_button.layout.display != "none"
    lab.replace_button.click()  # the user confirms
    assert load_scenario(first).name == "ring-shift"
    assert "unsaved" not in lab.title.value and lab.replace_button.layout.display == "none"
    find(lab, "mpl-add-output", w.Button).click()
    lab.save_button.click()  # its own file now: no question
    assert "out2" in load_scenario(first).call.outputs


# ---------------------------------------------------------------- fix quality


def test_fixes_that_trade_one_error_for_another_come_last():
    """ring-shift's peer view, then a multicast step: both ways out are offered, the one
    that restores the valid ring first; the other says what it leaves."""
    lab = Lab("ring-shift", background=False, graph=False)
    lab.tabs.selected_index = 2
    find(lab.transforms, "mpl-palette", w.Dropdown).value = "multicast_ref"
    find(lab.transforms, "mpl-add-transform", w.Button).click()
    assert errors(lab) == ["REF_PEER_TO_MULTICAST"]
    best, other = lab.problems.fix_buttons()
    assert "multicast step" in best.tooltip and "peer step" in other.tooltip
    shown = text_of(lab.problems)
    assert "→ valid" in shown and "→ then MULTICAST_PLAIN_STORE" in shown
    best.click()
    assert lab.state.valid and lab.state.scenario == gallery.load("ring-shift")
    lab.undo()
    lab.problems.fix_buttons()[1].click()
    assert errors(lab) == ["MULTICAST_PLAIN_STORE"]  # what it said it would leave


def test_a_fix_is_offered_only_when_it_helps():
    from mpmd_lab import validate
    from mpmd_lab.fixes import apply_fix

    for name in gallery.names():
        s = gallery.load(name)
        diags = validate.check(s)
        for d in diags:
            for fix in d.fixes:
                after = validate.check(apply_fix(s, fix))
                assert sum(x.is_error for x in after) < sum(x.is_error for x in diags) or (
                    not d.is_error
                ), (name, fix.description)
                assert fix.after == [x.code for x in after if x.is_error], name
            assert d.fix == (d.fixes[0] if d.fixes else None)


# ---------------------------------------------------------------- errors that lead somewhere


def test_a_misspelt_axis_says_did_you_mean_and_is_fixed():
    lab = Lab("ring-shift", background=False, graph=False)
    lab.tabs.selected_index = 2
    picker = find(lab.transforms, "mpl-device-picker")
    find(picker, "mpl-device-form", w.ToggleButtons).value = "linear"
    type_into(find(lab.transforms, "mpl-device-index", w.Text), "(devs + 1) % 4")
    assert errors(lab) == ["UNBOUND_AXIS"]
    shown = html.unescape(text_of(lab.problems))
    assert "Found an unbound axis name: devs" in shown  # JAX's words, then the hint
    assert "did you mean 'dev'?" in shown
    (fix,) = lab.problems.fix_buttons()
    fix.click()
    assert lab.state.valid
    assert lab.state.scenario.call.programs[0].body[0].transforms[0].device == "(dev + 1) % 4"


def test_unknown_names_get_suggestions():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    lab.load("dup-reff")
    assert "did you mean" in lab.message.value and "dup-ref" in lab.message.value
    data = json.loads(gallery.path_of("dup-ref").read_text())
    data["call"]["args"][0]["tranforms"] = []
    lab.load(json.dumps(data))
    assert "call.args[0].tranforms" in lab.message.value
    assert "did you mean" in lab.message.value and "transforms" in lab.message.value


# ---------------------------------------------------------------- the interpreter's limit


def test_the_cpu_interpreters_limit_is_said_once_with_a_switch():
    lab = Lab("ring-shift", background=False, graph=True)
    notes = find_all(lab.problems, "mpl-interp")
    assert len(notes) == 1
    said = html.unescape(text_of(notes[0]))
    assert "on this machine: simulate runs it" in said
    assert "JAX's CPU interpreter cannot run remote_ref views" in said
    assert "PeerMemRef" not in said and "object at 0x" not in said
    # not on the view's step, not as a card, not on the graph
    assert "GPU_INTERP" not in text_of(lab.transforms) and "GPU_INTERP" not in text_of(lab.call)
    assert not find_all(lab.problems, "mpl-card")
    assert "GPU_INTERP" not in lab.graph.view.problems and "no problems found" in text_of(
        lab.problems
    )
    find(lab.problems, "mpl-use-simulate", w.Button).click()
    assert lab.runner.backend.value == "simulate"
    lab.runner.run_button.click()
    out = lab.runner.outcome
    assert out.status == "ok" and out.backend == "simulate"
    # device d holds device d-1's input
    np.testing.assert_array_equal(
        np.asarray(out.outputs["out"]), np.roll(np.arange(1024, dtype=np.float32), 256)
    )


def test_auto_runs_ring_shift_on_a_cpu_and_says_why():
    lab = Lab("ring-shift", background=False, graph=False)
    assert lab.runner.backend.value == "auto"
    lab.runner.run_button.click()
    out = lab.runner.outcome
    assert out.status == "ok" and out.backend == "simulate", out
    status = lab.runner.status.value
    assert "✔ ran" in status and "simulate" in status and "auto: no GPU here" in status
    assert "simulated" in status  # what the time covers


# ---------------------------------------------------------------- stale state


def test_a_blank_lab_is_not_valid_it_is_empty():
    lab = Lab(background=False, graph=False)
    assert "✔ valid" not in lab.title.value and "empty" in lab.title.value
    assert "Nothing to check yet" in text_of(lab.problems)


def test_the_description_says_when_it_was_written_for_what_was_opened():
    lab = Lab("dup-ref", background=False, graph=False)
    assert "As opened" not in lab.description.value
    lab.problems.fix_buttons()[0].click()
    assert lab.state.valid and "As opened (changed since" in lab.description.value
    lab.gallery.value = "ring-shift"
    assert "As opened" not in lab.description.value


def test_a_run_that_ends_after_another_scenario_was_opened_is_not_shown_as_current():
    lab = Lab("two-block-copy", background=True, graph=False)
    opened = threading.Event()

    def during(change):  # while JAX runs it: the user opens another scenario
        if not opened.is_set() and change["new"].startswith("running… "):
            opened.set()
            lab.gallery.value = "dup-ref-fixed"

    lab.runner.status.observe(during, names="value")
    lab.runner.run_button.click()
    assert lab.runner.done.wait(300)
    assert opened.is_set() and lab.state.scenario.name == "dup-ref-fixed"
    assert lab.runner.outcome is None and not lab.runner.results.children
    assert "finished after you opened another one" in lab.runner.status.value
    # an edit while a run goes: its outputs are shown greyed, as of the older version
    lab2 = Lab("two-block-copy", background=False, graph=False)
    seen = []

    def edit_during(change):
        if not seen and change["new"].startswith("running… "):
            seen.append(1)
            lab2.state.edit(("replace", "description", "edited while it ran"))

    lab2.runner.status.observe(edit_during, names="value")
    lab2.runner.run_button.click()
    assert lab2.runner.outcome.status == "ok"
    assert "mpl-stale" in lab2.runner.results._dom_classes
    assert "changed since this run" in lab2.runner.status.value


# ---------------------------------------------------------------- run time and Cancel


def test_run_time_says_what_it_covers_and_shows_start_up():
    workers.shutdown()  # a cold start, as the first Run of a session is
    lab = Lab("two-block-copy", background=False, graph=False)
    lab.runner.backend.value = "interpret"
    lab.runner.run_button.click()
    status = lab.runner.status.value
    assert lab.runner.outcome.status == "ok", lab.runner.outcome
    assert "the call" in status and "JAX start-up" in status and "in all" in status
    lab.runner.run_button.click()  # warm: no start-up to show
    assert "JAX start-up" not in lab.runner.status.value


def test_cancel_stops_the_run_and_its_worker():
    """Cancel pressed while JAX runs the call: the observer below runs in the run's own
    thread when a stage starts (the worker is serving the request then), so what it sees
    does not depend on how fast this thread is scheduled."""
    lab = Lab("two-block-copy", background=True, graph=False)
    lab.runner.backend.value = "interpret"
    pids: list[int] = []
    offered: list[bool] = []

    def cancel_when_running(change):
        if not pids and change["new"].startswith("running… ") and workers._BUSY:
            busy = workers._BUSY[:]
            if busy:
                pids.append(busy[0].pid)
                offered.append(lab.runner.cancel_button.layout.display != "none")
                lab.runner.cancel_button.click()

    lab.runner.status.observe(cancel_when_running, names="value")
    lab.runner.run_button.click()
    deadline = time.monotonic() + 300
    while lab.runner._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids, "the run never got to JAX"
    assert offered == [True]  # Cancel was offered while it ran
    assert "cancelled" in lab.runner.status.value and lab.runner.outcome is None
    assert lab.runner.cancel_button.layout.display == "none"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # the worker is gone (killed and reaped)
    lab.runner.status.unobserve(cancel_when_running, names="value")
    lab.runner.run_button.click()  # the next run gets a fresh worker
    assert lab.runner.done.wait(300) and lab.runner.outcome.status == "ok"


# ---------------------------------------------------------------- as you type


def test_fields_commit_as_you_type_and_keep_their_row():
    """Each keystroke a browser sends (continuous_update) commits; the row being typed in
    is kept (its field keeps focus); a burst of typing in one field is one undo step."""
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    box = find(lab.call.buffers, "mpl-buffer-shape", w.Text)
    assert box.continuous_update
    row = next(r for r in find_all(lab.call.buffers, "mpl-row") if box in walk(r))
    for typed in ("2", "25", "256", "2560"):
        type_into(box, typed)
    assert lab.state.scenario.buffers["acc"].shape == [2560]
    assert find(lab.call.buffers, "mpl-buffer-shape", w.Text) is box  # the same widget
    assert any(r is row for r in find_all(lab.call.buffers, "mpl-row"))
    # the problems followed the typing: acc (2560) no longer matches out (256)
    assert errors(lab), "a shape mismatch is reported while typing"
    lab.undo()
    assert lab.state.scenario.buffers["acc"].shape == [256]  # one step back: before typing
    # names commit on Enter (a rename re-points every use)
    assert not find(lab.call.buffers, "mpl-name", w.Text).continuous_update


def test_nested_bodies_are_edited_in_the_call_editor():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    find(lab, "mpl-stmt-kind", w.Dropdown, index=0).value = "loop"
    assert "repeat the body" in text_of(lab.call.body)  # the kind's help, from the model
    find(lab, "mpl-add-stmt", w.Button).click()
    body = lab.state.scenario.call.programs[0].body
    assert body[-1].op == "loop" and body[-1].body == []
    assert body[-1].model_dump(exclude={"body", "op"}) == {
        k: v for k, v in BY_OP["loop"].example(lab.state.fit()).items() if k not in ("op", "body")
    } | {"step": 1, "via": "fori_loop"}
    # the loop's own add row: a statement inside the loop
    nested = find_all(lab.call.body, "mpl-add-nested")
    assert len(nested) == 1
    kind = find(nested[0], "mpl-stmt-kind", w.Dropdown)
    kind.value = "when"
    find(nested[0], "mpl-add-stmt", w.Button).click()
    loop = lab.state.scenario.call.programs[0].body[-1]
    assert [s.op for s in loop.body] == ["when"]
    # its fields are editable as the model declares them: a condition as typed
    cond = find(lab.call.body, "mpl-f-cond", w.Text)
    type_into(cond, "i == 0")
    assert lab.state.scenario.call.programs[0].body[-1].body[0].cond == "i == 0"
    # and a statement inside the condition
    inner = find_all(lab.call.body, "mpl-add-nested")
    assert len(inner) == 2
    find(inner[0], "mpl-stmt-kind", w.Dropdown).value = "copy"
    find(inner[0], "mpl-add-stmt", w.Button).click()
    when = lab.state.scenario.call.programs[0].body[-1].body[0]
    assert [s.op for s in when.body] == ["copy"]
    stop = find(lab.call.body, "mpl-f-stop", w.Text)
    type_into(stop, "axis_size(b)")
    assert lab.state.scenario.call.programs[0].body[-1].stop == "axis_size(b)"


def test_the_title_says_whether_jax_rejects_the_call_or_says_nothing():
    """A race JAX never raises is a problem of the kernel, not a rejection by JAX."""
    assert "JAX would reject this" in Lab("dup-ref", background=False, graph=False).title.value
    race = Lab("cluster-exchange", background=False, graph=False)
    assert [d.code for d in race.state.diagnostics if d.is_error] == ["RACE"]
    assert "JAX would reject this" not in race.title.value
    assert "1 problem(s) JAX does not report" in race.title.value
    assert "✔ valid" in Lab("ring-all-gather", background=False, graph=False).title.value


def test_every_scratch_kind_is_shown_and_edited_in_the_call_editor():
    """Semaphores, barriers and cluster barriers have rows of their own kind (no array
    fields), and a scratch can be made another kind from its row."""
    lab = Lab("ring-all-gather", background=False, graph=False)
    assert "view failed" not in text_of(lab.call)
    kinds = [
        d
        for d in find_all(lab.call, "mpl-kind", w.Dropdown)
        if d.value in ("semaphore", "array", "barrier", "cluster_barrier")
    ]
    sems = [d for d in kinds if d.value == "semaphore"]
    assert sems, [d.value for d in kinds]
    name = next(n for n, s in lab.state.scenario.call.scratch.items() if s.KIND == "semaphore")
    before = len(lab.state.scenario.call.scratch)
    sems[0].value = "barrier"
    sc = lab.state.scenario.call.scratch[name]
    assert sc.KIND == "barrier" and len(lab.state.scenario.call.scratch) == before
    assert "view failed" not in text_of(lab.call)
    # the field of the new kind edits the scenario through the model's own field
    arrivals = find(lab.call, "mpl-f-num_arrivals", w.Text)
    type_into(arrivals, "2")
    assert lab.state.scenario.call.scratch[name].num_arrivals == 2
    lab.undo()
    lab.undo()
    assert lab.state.scenario.call.scratch[name].KIND == "semaphore"


@pytest.mark.parametrize("name", gallery.names())
def test_no_view_of_a_gallery_scenario_fails(name):
    """Every section of the Lab renders every gallery scenario (none says 'view failed')."""
    lab = Lab(name, background=False, graph=False)
    assert "view failed" not in text_of(lab), name
