"""Field paths: tuples in the plan, text only where a diagnostic is reported.

The plan keeps every path as a tuple (``fields.Path``); ``format_path`` makes the text a
diagnostic, a fix's edit or the graph shows. A path written by string arithmetic on a
tuple (``f"{st.path}.src"``) gives text such as ``('call', 'programs', 0).src``: the
last test reads every diagnostic and edit of the shipped and tested scenarios back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.fields import format_path, get_path, parse_path, sub_path
from mpmd_lab.plan import compile
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import analyze

ROOT = Path(__file__).resolve().parents[1]
CODES = sorted((ROOT / "tests" / "scenarios" / "codes").glob("*.json"))


def test_format_parse_and_sub_path():
    p = ("call", "programs", 0, "body", 12, "transforms", 1, "device")
    text = "call.programs[0].body[12].transforms[1].device"
    assert format_path(p) == text
    assert parse_path(text) == p
    assert isinstance(parse_path(text), tuple)
    assert sub_path(p[:5], "transforms", 1, "device") == p
    # a sub-field as text (``StepError.field``, an op's ``exprs``) is read as a path
    assert sub_path(("call",), "index[1].ds[0]") == ("call", "index", 1, "ds", 0)
    assert sub_path(("call",), "") == ("call",)
    # a key that is no identifier is quoted, as the loader reports a user's key
    assert format_path(("buffers", "a b", "shape", 0)) == "buffers['a b'].shape[0]"
    with pytest.raises(ValueError):
        parse_path("call.(bad)")


@pytest.mark.parametrize("name", gallery.names())
def test_plan_paths_are_tuples_that_name_their_node(name):
    s = gallery.load(name)
    plan = compile(s)
    for arg in plan.args:
        assert type(arg.path) is tuple
        assert get_path(s, arg.path) is s.call.args[arg.index]
    for b in [*plan.params.values(), *plan.captures.values()]:
        assert type(b.path) is tuple
        for path, t in b.stack:
            assert type(path) is tuple and get_path(s, path) is t
    for prog in plan.programs:
        assert get_path(s, prog.path) is s.call.programs[prog.index]
        for st in prog.stmts:
            assert type(st.path) is tuple
            assert get_path(s, st.path) is st.node
            assert parse_path(format_path(st.path)) == st.path
            assert [get_path(s, x.path) for x in st.scope] == [x.node for x in st.scope]


@pytest.mark.parametrize(
    "source",
    [*(gallery.path_of(n) for n in gallery.names()), *CODES],
    ids=lambda p: Path(p).stem,
)
def test_reported_paths_are_text_that_parses(source):
    a = analyze(load_scenario(source))
    if source in CODES:  # (each shows its code; a clean gallery scenario shows none)
        assert a.diagnostics
    for d in a.diagnostics:
        assert isinstance(d.path, str) and "(" not in d.path, d.path
        if d.path:
            parse_path(d.path)
        for fix in d.fixes:
            for e in fix.edits:
                assert isinstance(e.path, str) and "(" not in e.path, e.path
                parse_path(e.path)
