"""The Lab's editors driven through their traits (no kernel, no browser): edits land in
the scenario, bad values show beside their field and lose nothing, undo/redo, load/save."""

from __future__ import annotations

import json

import ipywidgets as w
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpmd_lab import gallery
from mpmd_lab.fixes import parse_path
from mpmd_lab.scenario import load_scenario
from mpmd_lab.session import Session
from mpmd_lab.widgets import Lab
from mpmd_lab.widgets.mesh_editor import blocks_svg, devices_svg
from mpmd_lab.widgets.testing import find, find_all, text_of, type_into, unfold, walk


@pytest.fixture
def lab() -> Lab:
    return Lab("dup-ref-fixed", background=False, graph=False)


def test_lab_opens_blank_gallery_and_file(tmp_path):
    assert Lab(background=False, graph=False).state.scenario.name == "untitled"
    assert Lab("ring-shift", background=False, graph=False).state.scenario.device_mesh == {"dev": 4}
    path = tmp_path / "mine.json"
    path.write_text(gallery.path_of("two-block-copy").read_text())
    lab = Lab(str(path), background=False, graph=False)
    assert lab.state.scenario == gallery.load("two-block-copy")
    assert lab.path.value == str(path)


def test_adding_an_argument_by_click_edits_the_scenario(lab):
    find(lab, "mpl-add-arg", w.Button).click()
    args = lab.state.scenario.call.args
    assert [(a.buffer, a.param) for a in args] == [("acc", "a_ref"), ("acc", "acc_ref")]
    # the new row is on screen with the new parameter name
    assert [x.value for x in find_all(lab, "mpl-param", w.Text)] == ["a_ref", "acc_ref"]


def test_bad_shape_shows_beside_the_field_and_keeps_the_work(lab):
    before = lab.state.scenario
    box = find(lab, "mpl-buffer-shape", w.Text)
    type_into(box, "256, lots")
    assert lab.state.scenario == before
    assert box.value == "256, lots"  # what the user typed stays
    row_errors = text_of(lab.call.buffers)
    assert "a shape is whole numbers" in row_errors
    type_into(box, "-3")  # parses, but is not a scenario: pydantic's message with the path
    assert lab.state.scenario == before
    assert "buffers.acc.shape[0]" in text_of(lab.call.buffers)
    type_into(box, "64")
    assert lab.state.scenario.buffers["acc"].shape == [64]


def test_a_keyword_parameter_name_is_refused_with_its_path(lab):
    type_into(find(lab, "mpl-param", w.Text), "class")
    assert lab.state.scenario.call.args[0].param == "a_ref"
    assert "call.args[0].param" in text_of(lab.call.args)
    assert "keyword" in text_of(lab.call.args)


def test_undo_and_redo_walk_the_history(lab):
    st = lab.state
    original = st.scenario
    find(lab, "mpl-add-output", w.Button).click()
    type_into(find(lab, "mpl-output-shape", w.Text, index=1), "8, 8")
    changed = st.scenario
    assert changed.call.outputs["out2"].shape == [8, 8]
    assert lab.redo_button.disabled  # nothing to redo yet
    lab.undo_button.click()
    assert "out2" in st.scenario.call.outputs and st.scenario.call.outputs["out2"].shape == [256]
    lab.undo_button.click()
    assert st.scenario == original and lab.undo_button.disabled
    lab.redo_button.click()
    lab.redo_button.click()
    assert st.scenario == changed and lab.redo_button.disabled


def test_rename_keeps_order_and_a_clash_is_refused():
    lab = Lab("two-block-copy", background=False, graph=False)
    first, *rest = list(lab.state.scenario.buffers) or ["?"]
    names = find_all(lab.call.buffers, "mpl-name", w.Text)
    type_into(names[0], "renamed")
    assert list(lab.state.scenario.buffers) == ["renamed", *rest]
    if rest:
        type_into(find_all(lab.call.buffers, "mpl-name", w.Text)[0], rest[0])
        assert list(lab.state.scenario.buffers)[0] == "renamed"
        assert "already used" in text_of(lab.call.buffers)


def test_mesh_axes_added_renamed_resized_removed_and_drawn():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    st = lab.state
    find(lab.meshes, "mpl-add-grid", w.Button).click()
    find(lab.meshes, "mpl-add-cluster", w.Button).click()
    mesh = st.scenario.call.programs[0].mesh
    assert mesh.grid == {"b": 1, "b2": 2} and mesh.cluster == {"c": 2}
    type_into(find_all(lab.meshes, "mpl-axis-name", w.Text)[1], "rows")
    type_into(find_all(lab.meshes, "mpl-axis-size", w.Text)[1], "3")
    assert st.scenario.call.programs[0].mesh.grid == {"b": 1, "rows": 3}
    type_into(find_all(lab.meshes, "mpl-axis-size", w.Text)[1], "three")
    assert "not a whole number" in text_of(lab.meshes)
    assert "3 blocks" in text_of(lab.meshes) or text_of(lab.meshes).count("<rect") >= 3
    # the device mesh: add an axis, the devices are drawn
    find(lab.meshes, "mpl-add-device", w.Button).click()
    assert st.scenario.device_mesh == {"dev": 2}
    assert "dev 1" in text_of(lab.meshes.devices)
    lab.undo()
    assert st.scenario.device_mesh is None


def test_block_and_device_drawings_count_what_they_draw():
    svg = blocks_svg({"x": 2, "y": 3}, {}, None)
    assert svg.count("<rect") == 6
    assert "4 blocks per cluster" in blocks_svg({"b": 2}, {"c": 4}, None)
    big = blocks_svg({"b": 1000}, {}, None)
    assert "1000 blocks" in big and big.count("<rect") == 16
    dev = devices_svg({"x": 2, "y": 2})
    assert dev.count("<rect") == 4 and "x=1,y=1" in dev


def test_transform_stack_palette_fields_reorder_delete():
    lab = Lab("peer-then-multicast-fixed", background=False, graph=False)
    st = lab.state
    lab.tabs.selected_index = 2  # the Views tab
    ed = lab.transforms
    assert ed.target == "call.programs[0].body[0]"
    palette = find(ed, "mpl-palette", w.Dropdown)
    palette.value = "remote_ref"
    find(ed, "mpl-add-transform", w.Button).click()
    stack = st.scenario.call.programs[0].body[0].transforms
    assert [t.op for t in stack] == ["multicast_ref", "remote_ref"]
    # move the peer step first: the gallery's broken order
    up = [b for b in find_all(ed, "mpl-step-1")[0].children if getattr(b, "description", "") == "↑"]
    up[0].click()
    assert [t.op for t in st.scenario.call.programs[0].body[0].transforms] == [
        "remote_ref",
        "multicast_ref",
    ]
    # the peer's device is picked: per axis, own + k, an index or an expression
    picker = find(ed, "mpl-device-picker")
    assert "own + 1" in text_of(picker)
    find(picker, "mpl-device-mode", w.Dropdown).value = "index"
    assert st.scenario.call.programs[0].body[0].transforms[0].device == {"dev": 0}
    box = find(ed, "mpl-device-value", w.Text)
    type_into(box, "(dev +")  # not an expression: shown beside it, nothing lost
    assert st.scenario.call.programs[0].body[0].transforms[0].device == {"dev": 0}
    assert box.value == "(dev +" and "mpl-field-error" in text_of(ed)
    type_into(box, "1 - dev")
    assert st.scenario.call.programs[0].body[0].transforms[0].device == {"dev": "1 - dev"}
    quick = find(ed, "mpl-device-quick", w.Dropdown)
    quick.value = next(v for label, v in quick.options if label.startswith("device 1"))
    assert st.scenario.call.programs[0].body[0].transforms[0].device == {"dev": 1}
    find(ed, "mpl-device-form", w.ToggleButtons).value = "linear"
    assert st.scenario.call.programs[0].body[0].transforms[0].device == 1
    # a JSON field: bad JSON stays in the box with the error beside it
    ed.add_transform("at")
    index = find_all(ed, "mpl-tf-index", w.Text)[-1]
    type_into(index, '[{"ds": ')
    assert "not an index" in text_of(ed) and index.value == '[{"ds": '
    find_all(ed, "mpl-del-transform", w.Button)[-1].click()
    find(ed, "mpl-del-transform", w.Button).click()
    assert [t.op for t in st.scenario.call.programs[0].body[0].transforms] == ["multicast_ref"]


def test_save_then_load_round_trips(tmp_path, lab):
    target = tmp_path / "saved.json"
    lab.path.value = str(target)
    lab.save_button.click()
    assert load_scenario(target) == lab.state.scenario
    find(lab, "mpl-add-arg", w.Button).click()
    lab.load_button.click()
    assert load_scenario(target) == lab.state.scenario
    lab.undo()  # loading is undoable
    assert len(lab.state.scenario.call.args) == 2


def test_loading_a_broken_file_reports_and_keeps_the_scenario(tmp_path, lab):
    bad = tmp_path / "bad.json"
    data = json.loads(gallery.path_of("ring-shift").read_text())
    data["call"]["args"][0]["param"] = "not a name"
    bad.write_text(json.dumps(data))
    before = lab.state.scenario
    lab.load(str(bad))
    assert lab.state.scenario == before
    assert "call.args[0].param" in lab.message.value
    lab.load(str(tmp_path / "missing.json"))
    assert "no such file" in lab.message.value


def test_gallery_dropdown_opens_a_scenario(lab):
    lab.gallery.value = "ring-shift"
    assert lab.state.scenario.name == "ring-shift"
    assert lab.gallery.value == "(gallery)"


def test_body_statements_added_changed_and_their_names_offered():
    lab = Lab("dup-ref-fixed", background=False, graph=False)
    st = lab.state
    find(lab, "mpl-stmt-kind", w.Dropdown).value = "copy"
    find(lab, "mpl-add-stmt", w.Button).click()
    body = st.scenario.call.programs[0].body
    assert body[-1].op == "copy"
    src = find_all(lab, "mpl-src", w.Combobox)[-1]
    assert set(src.options) >= {"a_ref", "out"}
    type_into(src, "out")
    assert st.scenario.call.programs[0].body[-1].src == "out"
    # a new argument's name is offered at once to existing statements
    find(lab, "mpl-add-arg", w.Button).click()
    assert "acc_ref" in find_all(lab, "mpl-src", w.Combobox)[-1].options


def test_parse_path():
    assert parse_path("call.programs[0].body[12].transforms[1].device") == (
        "call",
        "programs",
        0,
        "body",
        12,
        "transforms",
        1,
        "device",
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=30))
def test_nothing_typed_crashes_or_loses_work(typed):
    """Any text in any field: a scenario is committed or nothing changes, and undo gets
    back to where the user started."""
    from mpmd_lab.widgets.call_editor import CallEditor
    from mpmd_lab.widgets.mesh_editor import MeshEditor
    from mpmd_lab.widgets.testing import walk
    from mpmd_lab.widgets.transform_editor import TransformStackEditor

    state = Session("peer-then-multicast-fixed")
    original = state.scenario
    views = [CallEditor(state), MeshEditor(state), TransformStackEditor(state)]
    for view in views:
        boxes = [x for x in walk(view) if isinstance(x, w.Text | w.Combobox)]
        for i in range(min(len(boxes), 10)):
            current = [x for x in walk(view) if isinstance(x, w.Text | w.Combobox)]
            if i < len(current):
                type_into(current[i], typed)  # must not raise
            assert load_scenario(state.scenario.to_json()) == state.scenario
    while state.undo():
        pass
    assert state.scenario == original


def test_run_options_edit_the_scenario_and_follow_undo():
    lab = Lab("two-block-race", background=False, graph=False)
    assert lab.state.scenario.run.detect_races and lab.runner.races.value
    lab.runner.races.value = False
    lab.runner.interpret.value = "hlo"
    assert (lab.state.scenario.run.interpret, lab.state.scenario.run.detect_races) == ("hlo", False)
    lab.undo()
    lab.undo()
    assert lab.runner.races.value and lab.runner.interpret.value == "gpu"
    assert not lab.state.can_undo  # syncing the boxes back committed nothing


def test_show_jax_code_is_the_generated_source_and_follows_edits():
    from mpmd_lab import codegen

    lab = Lab("dup-ref-fixed", background=False, graph=False)
    find(lab, "mpl-show-code", w.Button).click()
    code = lab.runner.code
    # the kernel first (build: meshes, bodies, the call), then the whole script folded
    assert code.kernel.startswith("def build(") and "def program0(" in code.kernel
    assert "host_array" not in code.kernel  # the support code is not in the way
    assert code.html.index("def</span>") < code.html.index("<details>")  # highlighted
    assert "acc_ref" not in code.text
    find(lab, "mpl-add-arg", w.Button).click()
    assert "acc_ref" in code.kernel
    assert code.text == codegen.generate(lab.state.scenario)  # exactly what export writes
    assert code.html.count("data-copy=") == 2
    find(lab, "mpl-show-code", w.Button).click()
    assert code.text == "" and code.html == ""


def test_edit_view_in_the_body_opens_it_in_the_views_tab():
    lab = Lab("multicast-then-peer", background=False, graph=False)
    lab.tabs.selected_index = 0
    assert not find_all(lab.call, "mpl-edit-view", w.Button)  # statements open folded
    lets = [i for i, s in enumerate(lab.state.scenario.call.programs[0].body) if hasattr(s, "let")]
    assert lets, "the gallery scenario has a view in its body"
    path = f"call.programs[0].body[{lets[-1]}]"
    buttons = find_all(unfold(lab, path), "mpl-edit-view", w.Button)
    assert len(buttons) == 1 and len(find_all(lab.call, "mpl-edit-view", w.Button)) == 1
    buttons[0].click()
    assert lab.tabs.selected_index == 2
    assert lab.transforms.target == path


def test_an_index_field_takes_what_a_pallas_user_types():
    """``0:64``, ``pl.ds(0, 64)``, ``i * 64`` and JSON land as the scenario's entries; a
    refused value stays in the box, the field is marked and the status line says it was
    not set (not the last "set")."""
    lab = Lab("ring-shift", background=False, graph=False)
    lab.tabs.selected_index = 2  # the Views tab
    st, ed = lab.state, lab.transforms
    target = ed.target
    ed.add_transform("at")
    path = f"{target}.transforms[{len(st.get(target + '.transforms')) - 1}].index"
    typed = {
        "0:64": [[0, 64]],
        "pl.ds(0, 64)": [{"ds": [0, 64]}],
        "i * 64": ["i * 64"],
        ":, pl.ds(dev * 8, 8)": [None, {"ds": ["dev * 8", 8]}],
        "[[0, 32]]": [[0, 32]],
    }
    for text, entries in typed.items():
        type_into(find_all(ed, "mpl-tf-index", w.Text)[-1], text)
        assert st.get(path) == entries, text
    before = st.scenario
    box = find_all(ed, "mpl-tf-index", w.Text)[-1]
    type_into(box, "0:64:2")
    assert st.scenario == before and box.value == "0:64:2"
    assert "mpl-refused" in box._dom_classes
    assert "a step is not supported" in text_of(ed)
    assert lab.message.value.count("not set") == 1 and "set call" not in lab.message.value
    type_into(box, "0:16")
    assert st.get(path) == [[0, 16]] and "mpl-refused" not in box._dom_classes


def test_a_change_shows_busy_and_holds_run_save_and_export():
    """While a change runs, the Lab says what it is doing and Run, Save, Load and Show
    JAX code are disabled; a Run pressed then runs the scenario shown afterwards."""
    lab = Lab(background=False, graph=False)
    seen: list[tuple[str, bool, bool, bool, str]] = []

    def watch(st: Session) -> None:
        seen.append(
            (
                st.busy,
                lab.runner.run_button.disabled,
                lab.save_button.disabled,
                lab.runner.code_button.disabled,
                lab.busy.value,
            )
        )
        if st.busy:
            lab.runner.run()  # pressed during the load: queued, not run on "untitled"

    lab.state.subscribe_busy(watch)
    lab.runner.backend.value = "simulate"
    assert lab.state.load("ring-shift").ok
    busy, idle = seen[0], seen[-1]
    assert busy[0] == "opening" and busy[1] and busy[2] and busy[3] and "opening" in busy[4]
    assert idle == ("", False, False, False, "")
    outcome = lab.runner.outcome
    assert outcome is not None and outcome.name == "ring-shift"
    assert outcome.version == lab.state.version and lab.state.run_is_current


def test_undo_of_opening_a_big_scenario_reuses_its_rows():
    """Undo and redo of a gallery load find the rows built for it (cached by content):
    the same widgets come back, none are built again."""
    lab = Lab("ring-shift", background=False, graph=False)
    lab.state.load("collective-matmul")
    rows = list(lab.call.body.children)
    lab.state.undo()
    assert lab.state.scenario.name == "ring-shift"
    lab.state.redo()
    again = list(lab.call.body.children)
    top = len(lab.state.scenario.call.programs[0].body)  # each shown as its line
    assert len(again) == len(rows) > top > 15
    assert sum(a is b for a, b in zip(rows, again, strict=True)) >= len(rows) - 2
    assert all(x.comm is not None for x in again)  # none closed


def test_clicking_a_graph_box_brings_its_editor_into_view():
    """A statement's box: the Call tab, its program, its row marked with the class the
    graph's browser side scrolls into view; a view's box: its stack in the Views tab."""
    lab = Lab("collective-matmul", background=False, graph=True)
    view = lab.graph.view
    assert view is not None
    path = "call.programs[0].body[15].body[5].body[4]"  # the loop's semaphore_signal
    view.set_state({"selected": path})
    assert lab.tabs.selected_index == 0  # Call
    row = lab.call.row_of(path)
    assert row is not None and view.focus and view.focus in row._dom_classes
    assert any(getattr(x, "value", None) == "semaphore_signal" for x in walk(row))
    first = view.focus
    view.set_state({"selected": "call.programs[0].body[0]"})  # a let: its view stack
    assert lab.tabs.selected_index == 2 and view.focus != first
    assert view.focus in lab.transforms._dom_classes and first not in row._dom_classes


def _at_indices(node):
    if isinstance(node, dict):
        if node.get("op") == "at" and "index" in node:
            yield node["index"]
        for v in node.values():
            yield from _at_indices(v)
    elif isinstance(node, list):
        for v in node:
            yield from _at_indices(v)


def test_an_index_field_shows_what_a_pallas_user_writes():
    """The index of every ``at`` in the gallery and the test scenarios is shown as Pallas
    writes it (``0:64``, ``pl.ds(start, size)``), and that text reads back as the same
    index; the forms Pallas has no text for (``{"block": ...}``) stay JSON."""
    from pathlib import Path

    from mpmd_lab.expr import format_index, parse_index
    from mpmd_lab.ops.views import At

    files = [gallery.path_of(n) for n in gallery.names()]
    files += sorted(Path(__file__).parent.joinpath("scenarios").rglob("*.json"))
    shown = json_kept = 0
    for f in files:
        try:
            data = json.loads(f.read_text())
        except ValueError:
            continue
        for index in _at_indices(data):
            text = format_index(index)
            if text is None:
                assert any(isinstance(e, dict) and "ds" not in e for e in index), (f, index)
                json_kept += 1
                continue
            assert not text.startswith(("[", "{")), text
            label = At.model_validate({"op": "at", "index": index}).label()
            again = At.model_validate({"op": "at", "index": parse_index(text)}).label()
            assert again == label, (f, index, text)
            shown += 1
    assert shown > 100 and json_kept > 0
    assert format_index(["true"]) is None  # a name that reads as JSON true stays JSON
    lab = Lab("collective-matmul", background=False, graph=False)
    lab.edit_view("call.programs[0].body[7]")
    box = find_all(lab.transforms, "mpl-tf-index", w.Text)[0]
    assert box.value == format_index(lab.state.get("call.programs[0].body[7].transforms[0].index"))
    assert box.value.startswith(("pl.ds(", ":", "0")), box.value


def test_no_editor_field_of_a_gallery_scenario_cuts_its_label_or_value():
    """Every sized text box and pick list of every gallery scenario's editors (each
    program, each view's stack) is wide enough for its label and its value, or its hint
    when empty (no "semaphore_s", no "(dev + axis_size(dev) -", no "P(...) defa")."""
    from mpmd_lab.widgets.common import text_px

    cut = []
    for name in gallery.names():
        lab = Lab(name, background=False, graph=False)
        for program in range(len(lab.state.scenario.call.programs)):
            lab.state.select_program(program)
            lab.call.expand_all()  # every statement's editors
            for _label, target in lab.transforms.targets() or [("", "")]:
                if target:
                    lab.edit_view(target)
                for x in walk(lab):
                    width = x.layout.width or "" if isinstance(x, w.Text | w.Dropdown) else ""
                    if not width.endswith("px") or x.layout.display == "none":
                        continue
                    value = x.value if isinstance(x, w.Text) else f"{x.label or ''}  ▾"
                    value = value or getattr(x, "placeholder", "")  # an empty box's hint
                    label = x.description or ""
                    need = text_px(value) + (text_px(label) - 14 if label else 0)
                    if need > float(width[:-2]):
                        cut.append((name, program, label, value, width))
    assert not cut, cut
