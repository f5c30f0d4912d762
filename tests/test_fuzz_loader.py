"""Fuzz the loader and the static check with hypothesis (``-m fuzz``; long: ``make fuzz``).

- any bytes, any JSON value: ``load_scenario`` returns a Scenario or raises
  ``ScenarioError``, nothing else;
- a valid scenario with one value replaced, or one field removed or added: it loads,
  or every problem names a field on the way to (or inside) what was changed;
- any loadable scenario: ``validate.check`` returns diagnostics (never raises), each
  with a code, a known stage and a field path, and the same ones each time.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from mpmd_lab import validate
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import Scenario, ScenarioError, format_path, load_scenario
from scenario_strategies import json_values, paths_of, scenarios

pytestmark = pytest.mark.fuzz
STAGES = {"schema", "build", "trace", "gpu-lower", "interpret", "gpu-run"}


def load_or_problems(source: Any) -> Scenario | list[tuple[str, str]]:
    try:
        return load_scenario(source)
    except ScenarioError as e:
        assert e.problems, "a ScenarioError with no problem listed"
        for path, msg in e.problems:
            assert isinstance(path, str) and msg, (path, msg)
        return e.problems


@given(st.binary(max_size=200))
def test_any_bytes_load_or_scenario_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("b") / "f.json"
    path.write_bytes(data)
    load_or_problems(path)


@given(json_values)
def test_any_json_value_loads_or_scenario_error(value):
    load_or_problems(json.dumps(value))
    if isinstance(value, dict):
        load_or_problems(value)


def _related(a: str, b: str) -> bool:
    """One field path is on the way to the other (``call.args`` and ``call.args[0].param``)."""
    a, b = a or "", b or ""
    return a.startswith(b) or b.startswith(a)


def _set(data: dict, loc: tuple, value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    data[loc[-1]] = value


@given(scenarios(), st.data())
def test_one_changed_value_is_named(data, draw):
    loc = draw.draw(st.sampled_from([p for p in paths_of(data) if p]))
    changed = copy.deepcopy(data)
    _set(changed, loc, draw.draw(json_values))
    got = load_or_problems(changed)
    if isinstance(got, list):
        where = format_path(loc)
        assert any(_related(p, where) for p, _ in got), (where, got)


@given(scenarios(), st.data())
def test_one_removed_or_added_field_is_named(data, draw):
    objects = [p for p in paths_of(data) if isinstance(_get(data, p), dict)]
    loc = draw.draw(st.sampled_from(objects))
    changed = copy.deepcopy(data)
    target = _get(changed, loc)
    if target and draw.draw(st.booleans()):
        key = draw.draw(st.sampled_from(sorted(target)))
        del target[key]
    else:
        key = draw.draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        assume(key not in target)
        target[key] = draw.draw(json_values)
    got = load_or_problems(changed)
    if isinstance(got, list):
        where = format_path((*loc, key))
        assert any(_related(p, where) for p, _ in got), (where, got)


def _get(data: Any, loc: tuple) -> Any:
    for part in loc:
        data = data[part]
    return data


@given(scenarios(max_statements=8))
def test_static_check_reports_never_raises(data):
    s = load_scenario(data)
    diags = validate.check(s)
    assert all(isinstance(d, Diagnostic) for d in diags)
    for d in diags:
        assert d.code and d.stage in STAGES, d
        assert d.message or d.explanation, d  # JAX's own message may be empty
        json.dumps(d.to_json())
    again = validate.check(load_scenario(s.to_dict()))
    assert [d.to_json() for d in again] == [d.to_json() for d in diags]


@given(scenarios(max_statements=8))
def test_graph_model_and_text_never_raise(data):
    from mpmd_lab import graph

    s = load_scenario(data)
    g = graph.build_graph(s, diagnostics=validate.check(s))
    assert isinstance(graph.to_text(g), str)
