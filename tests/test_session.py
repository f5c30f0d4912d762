"""The headless Session: one analysis per version, undo bounded by size, saves that go
where the user meant and never replace a file the session did not load or create."""

from __future__ import annotations

import json

import pytest
from mpmd_lab import gallery, plan, recheck, validate
from mpmd_lab.scenario import load_scenario
from mpmd_lab.session import Session


def test_a_session_is_driven_without_widgets():
    s = Session("dup-ref")
    assert [d.code for d in s.diagnostics] == ["MPMD_DUP_REF"] and not s.valid
    assert s.apply_fix(s.diagnostics[0].fix).ok and s.valid
    assert s.can_undo and s.undo() and not s.valid
    assert s.redo() and s.valid
    r = s.run("simulate")
    assert r.ok and s.run_is_current
    assert s.edit(("replace", "description", "changed")).ok
    assert not s.run_is_current  # the run belongs to the version before the edit


def test_each_version_is_checked_once():
    s = Session("ring-shift")
    before = validate.RUNS
    for k in range(3):
        assert s.edit(("replace", "description", f"edit {k}")).ok
        _ = (s.diagnostics, s.valid, s.graph(), s.plan)  # every reader
    assert validate.RUNS - before == 3


@pytest.mark.parametrize("name", ["ring-shift", "two-block-copy", "bitcast-view"])
def test_a_session_compiles_once_per_version(name):
    """Open, edit, undo, check, graph and export: one plan per scenario version, and one
    per candidate fix checked (bitcast-view offers one; each edit is a new candidate)."""
    before, candidates = plan.COMPILED, recheck.CHECKS
    s = Session(name)
    opened = s.version
    assert s.edit(("replace", "description", "an edit")).ok
    assert s.edit(("replace", "description", "another")).ok
    assert s.undo()
    for _ in range(2):  # every reader, twice
        _ = (s.diagnostics, s.valid, s.plan, s.graph(), s.export())
    versions = s.version - opened + 1  # (the opened one, then each change)
    assert versions == 4
    assert plan.COMPILED - before == versions + (recheck.CHECKS - candidates)


def test_save_goes_where_the_user_meant(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(gallery.path_of("ring-shift").read_text())
    other = tmp_path / "other.json"
    other.write_text(gallery.path_of("dup-ref").read_text())
    s = Session(str(mine))
    assert s.path == mine and not s.dirty
    assert s.edit(("replace", "description", "my edit")).ok and s.dirty
    assert s.save().ok and not s.dirty
    assert load_scenario(mine).description == "my edit"
    # a gallery pick has no file: Save asks for one instead of overwriting mine.json
    assert s.load("two-block-copy").ok and s.path is None
    assert not s.save().ok
    assert load_scenario(mine).description == "my edit"
    # a file the session did not load or create is replaced only when confirmed
    result = s.save(other)
    assert not result.ok and "confirm" in result.message()
    assert load_scenario(other).name == "dup-ref"
    assert s.save(other, overwrite=True).ok and load_scenario(other).name == "two-block-copy"
    assert s.path == other
    # a new file is just written
    new = tmp_path / "new.json"
    assert s.save(new).ok and json.loads(new.read_text())["name"] == "two-block-copy"


def test_undo_history_is_bounded_by_size():
    s = Session("ring-shift", history_bytes=20_000)
    for k in range(200):
        assert s.edit(("replace", "description", "x" * 500 + str(k))).ok
    assert s._undo.size <= 20_000
    steps = 0
    while s.undo():
        steps += 1
    assert 0 < steps < 200
