"""A big body opens as lines of source: each statement one line (as the kernel's
source writes it), its editors built when it is unfolded (▸), a loop's or a
condition's body folded in it; a folded row still shows the codes of the problems in
it. Fewer widgets is what makes a big scenario open fast in the browser (issue 30)."""

from __future__ import annotations

import ipywidgets as w
from mpmd_lab import codegen, gallery
from mpmd_lab.widgets import Lab
from mpmd_lab.widgets.testing import find, find_all, text_of, type_into, unfold, walk

BIG = "collective-matmul"


def _statements(sc, body, base, loops):
    """(path, statement, loop variables in scope) of every statement, nested too."""
    for i, s in enumerate(body):
        path = f"{base}[{i}]"
        yield path, s, loops
        if getattr(s, "BODY", False):
            inner = [*loops, s.var] if getattr(s, "var", None) else loops
            yield from _statements(sc, s.body, f"{path}.body", inner)


def test_a_statement_line_is_what_the_exported_source_writes():
    """Over the gallery: a one-line statement's line is a line of the generated script,
    a block's head begins one, a longer one says its kind and label."""
    checked = 0
    for name in gallery.names():
        sc = gallery.load(name)
        script = {x.strip() for x in codegen.generate(sc).splitlines()}
        for k, program in enumerate(sc.call.programs):
            for path, s, loops in _statements(sc, program.body, f"call.programs[{k}].body", []):
                line = codegen.statement_line(sc, s, path, loops)
                if line.startswith(f"{s.kind}: "):
                    assert line == f"{s.kind}: {s.label()}"
                    continue
                assert line.split(" def ")[0] in script, (name, path, line)
                checked += 1
    assert checked > 100


def test_a_big_body_opens_folded_as_lines_of_source():
    lab = Lab(BIG, background=False, graph=False)
    st = lab.state
    body = st.scenario.call.programs[0].body
    lines = find_all(lab.call.body, "mpl-stmt-line", w.Button)
    assert len(lines) == len(body)  # the top-level statements; the loop's body folded
    for i, s in enumerate(body):
        line = codegen.statement_line(st.scenario, s, f"call.programs[0].body[{i}]")
        inside = "   … 12 statement(s) inside" if i == 15 else ""  # the loop
        assert lines[i].description == f"▸ {i}  {line}{inside}"
    # no statement editor is built: only the programs picker and the add row's palette
    assert not find_all(lab.call.body, "mpl-src") and not find_all(lab.call.body, "mpl-f-inc")
    assert len(find_all(lab.call.body, "mpl-expand", w.Button)) == len(body)
    assert len(list(walk(lab.call.body))) < 90


def test_a_folded_row_shows_the_problems_inside_it():
    lab = Lab(BIG, background=False, graph=False)
    inner = "call.programs[0].body[15].body[5].body[4]"  # the loop's semaphore_signal
    assert lab.state.edit(("replace", f"{inner}.sem", "nope")).ok
    codes = {d.code for d in lab.state.diagnostics if d.path.startswith(inner)}
    assert codes
    loop = lab.call.row_of("call.programs[0].body[15]")
    assert loop is not None and all(code in text_of(loop) for code in codes)
    assert lab.call.row_of(inner) is None  # folded inside the loop
    assert lab.call.expand(inner + ".sem") == inner  # as a graph click does
    row = lab.call.row_of(inner)
    assert row is not None and find(row, "mpl-sem", w.Combobox).value == "nope"


def test_unfold_edit_and_fold_a_statement():
    lab = Lab(BIG, background=False, graph=False)
    path = "call.programs[0].body[13]"  # semaphore_signal
    row = unfold(lab, path)
    assert "mpl-stmt-open" in row._dom_classes
    inc = find(row, "mpl-f-inc", w.Text)
    type_into(inc, "2")
    assert lab.state.scenario.call.programs[0].body[13].inc == 2
    row = lab.call.row_of(path)
    assert row is not None and "mpl-stmt-open" in row._dom_classes  # still unfolded
    want = codegen.statement_line(lab.state.scenario, lab.state.scenario.call.programs[0].body[13])
    assert "2" in want and find(row, "mpl-stmt-line").description == f"▾ 13  {want}"
    find(row, "mpl-fold", w.Button).click()
    row = lab.call.row_of(path)
    assert row is not None and not find_all(row, "mpl-f-inc")
    lab.state.undo()  # the edit undone: the line says so
    assert "received, device_id" in find(lab.call.row_of(path), "mpl-stmt-line").description


def test_opening_the_biggest_scenario_builds_a_few_hundred_widgets():
    """Opening it over a small one builds well under half the widgets it did with every
    statement's editors (490 then; folded, its loop's 13 statements are not drawn)."""
    opened, built = w.Widget.open, [0]

    def counting(widget: w.Widget) -> None:
        built[0] += 1
        opened(widget)

    lab = Lab("ring-shift", background=False, graph=True)
    w.Widget.open = counting  # type: ignore[method-assign]
    try:
        lab.gallery.set_trait("value", BIG)
    finally:
        w.Widget.open = opened  # type: ignore[method-assign]
    assert lab.state.scenario.name == BIG
    assert built[0] < 260


def test_a_refused_value_is_said_beside_its_field_in_its_row():
    """A row's fields are not wrapped one box each: the reason a value is refused goes
    just after the field in its row, and is cleared when a value is taken."""
    lab = Lab("ring-shift", background=False, graph=False)
    row = lab.call.buffers.row(("buffer", "x"))
    assert row is not None
    shape = find(row, "mpl-buffer-shape", w.Text)
    assert shape in row.children  # the field itself, in its row
    type_into(shape, "12, x")
    assert "mpl-refused" in shape._dom_classes
    after = row.children[list(row.children).index(shape) + 1]
    assert "mpl-error" in after._dom_classes and after.value
    assert lab.state.scenario.buffers["x"].shape == [256]  # not taken
    type_into(shape, "128")
    assert lab.state.scenario.buffers["x"].shape == [128]
    kept = lab.call.buffers.row(("buffer", "x"))
    assert kept is not None and "mpl-refused" not in find(kept, "mpl-buffer-shape")._dom_classes
    assert all(not getattr(x, "value", "") for x in find_all(kept, "mpl-error"))


def test_unfolded_statements_follow_a_removal_and_a_move():
    lab = Lab(BIG, background=False, graph=False)
    body = "call.programs[0].body"
    unfold(lab, f"{body}[13]")  # semaphore_signal
    unfold(lab, f"{body}[15]")  # the loop
    find(lab.call.row_of(f"{body}[3]"), "mpl-expand").click()
    find(lab.call.row_of(f"{body}[3]"), "mpl-remove-stmt").click()  # ✕ on statement 3
    assert lab.call.expanded == {f"{body}[12]", f"{body}[14]"}
    assert lab.state.scenario.call.programs[0].body[12].op == "semaphore_signal"
    find(lab.call.row_of(f"{body}[12]"), "mpl-move-up").click()
    assert lab.call.expanded == {f"{body}[11]", f"{body}[14]"}
    assert lab.state.scenario.call.programs[0].body[11].op == "semaphore_signal"
    assert find_all(lab.call.row_of(f"{body}[11]"), "mpl-f-inc")  # still unfolded
    lab.state.undo()
    lab.state.undo()
    assert len(lab.state.scenario.call.programs[0].body) == 16


def test_unfold_all_and_fold_all():
    lab = Lab(BIG, background=False, graph=False)
    find(lab.call.body, "mpl-unfold-all", w.Button).click()
    assert len(find_all(lab.call.body, "mpl-stmt-open")) == 28  # nested ones too
    assert find_all(lab.call.body, "mpl-f-inc")
    find(lab.call.body, "mpl-fold-all", w.Button).click()
    assert not find_all(lab.call.body, "mpl-stmt-open") and not lab.call.expanded
    assert find_all(lab.call.body, "mpl-unfold-all", w.Button)
