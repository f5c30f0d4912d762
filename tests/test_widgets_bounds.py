"""The Lab's mesh editor is bounded by what it draws, not by the grid: a 400-byte scenario
with ``grid {"b": 2147483647}`` used to build an object per block (24 GB, the kernel
OOM-killed); now a window of blocks is drawn, each cell's coordinates computed from its
index, with a note that says how many of how many are shown."""

from __future__ import annotations

import time
import tracemalloc

import ipywidgets as w
import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import MAX_BLOCKS, load_scenario
from mpmd_lab.session import Session
from mpmd_lab.widgets.mesh_editor import MeshEditor, blocks_svg, devices_svg
from mpmd_lab.widgets.testing import find, find_all, text_of, type_into

pytestmark = pytest.mark.serial  # timing bounds (< 1 s): run with the machine to itself


def _with_grid(grid: dict[str, int]):
    data = gallery.load("two-block-copy").to_dict()
    data["call"]["programs"][0]["mesh"]["grid"] = grid
    return load_scenario(data)


def _open(state: Session) -> tuple[MeshEditor, float, int]:
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        editor = MeshEditor(state)
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return editor, took, peak


def test_a_grid_of_2_31_blocks_opens_at_once_and_says_what_it_shows():
    state = Session(_with_grid({"b": MAX_BLOCKS}))
    editor, took, peak = _open(state)
    assert took < 1.0, f"{took:.2f} s"
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB"
    text = text_of(editor)
    assert "showing 16 of 2,147,483,647 blocks" in text
    assert "block 15: b=15" in text and "block 16:" not in text


def test_a_many_axis_grid_draws_a_window_with_the_right_coordinates():
    svg = blocks_svg({"x": 65536, "y": 32768, "z": 3}, {}, None)
    assert svg.count("<rect") == 8 * 3  # 8 rows of the 3 columns there are
    assert "block 3: x=0, y=1, z=0" in svg  # row 1, column 0
    assert "block 21: x=0, y=7, z=0" in svg
    assert f"showing 24 of {65536 * 32768 * 3:,} blocks" in svg
    dev = devices_svg({"x": 64, "y": 64})
    assert dev.count("<rect") == 128 and "showing 128 of 4,096 devices" in dev
    assert "x=7,y=15" in dev and "x=8," not in dev


def test_resizing_a_grid_axis_to_the_limit_in_the_editor_stays_fast():
    state = Session(gallery.load("two-block-copy"))
    editor = MeshEditor(state)
    size = find(editor, "mpl-axis-size", w.Text)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        type_into(size, str(MAX_BLOCKS))
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert state.scenario.call.programs[0].mesh.grid == {"b": MAX_BLOCKS}
    assert "showing 16 of 2,147,483,647 blocks" in text_of(editor)
    assert took < 5.0 and peak < 64 * 2**20, (took, peak / 2**20)


def _crowded(outputs: int = 0, statements: int = 0, buffers: int = 0):
    data = gallery.load("two-block-copy").to_dict()
    data["call"]["outputs"].update(
        {f"o{i}": {"shape": [2**20], "dtype": "float32"} for i in range(outputs)}
    )
    body = data["call"]["programs"][0]["body"]
    body[-1:] = [{"op": "loop", "var": "i", "stop": 2, "body": [body[-1]]}]
    body += [{"op": "fill", "dst": "out", "value": 1.0}] * statements
    data["buffers"].update({f"b{i}": {"shape": [4], "dtype": "float32"} for i in range(buffers)})
    data["call"]["args"] += [{"buffer": f"b{i}", "param": f"p{i}"} for i in range(buffers)]
    return load_scenario(data)


def test_the_call_editor_draws_a_window_of_rows_and_says_how_many_there_are():
    """2,000 outputs (or 10,000 statements, or 5,000 buffers each a dropdown of every
    buffer) built a row each: a minute to open. The editor draws the first MAX_ROWS of
    each list (statements counted through nested bodies), pickers list MAX_OPTIONS names."""
    from mpmd_lab.widgets import common
    from mpmd_lab.widgets.call_editor import CallEditor

    for kw, what, total in [
        ({"outputs": 2000}, "outputs", 2001),
        ({"statements": 5000}, "statements", 5004),
        ({"buffers": 3000}, "buffers", 3001),
    ]:
        state = Session(_crowded(**kw))
        t0 = time.perf_counter()
        editor = CallEditor(state)
        took = time.perf_counter() - t0
        assert took < 15.0, (what, took)
        text = text_of(editor)
        assert f"showing the first {common.MAX_ROWS:,} of {total:,} {what}" in text, what
        pickers = [x for x in find_all(editor, "mpl-arg-buffer", w.Dropdown)]
        assert len(pickers) <= common.MAX_ROWS
        assert all(len(x.options) <= common.MAX_OPTIONS + 1 for x in pickers)
    small = CallEditor(Session(_crowded(outputs=3)))
    assert "showing the first" not in text_of(small)  # nothing said when all are shown
