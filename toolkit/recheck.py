"""A candidate fix's check, by content: the rules' analysis of a scenario's JSON form,
each distinct form validated and checked once (the fixes and the repairs ask it for
every candidate), and kept with the scenario it validated, so that applying a fix whose
candidate was checked reuses that analysis (``scenario_of``, ``known``) rather than
checking the same content again. (A scenario is never changed in place: an edit
validates a new one, ``Session.change``; so a kept scenario stays what its check saw.)"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, Edit
from mpmd_lab.fields import parse_path
from mpmd_lab.plan import Plan, compile
from mpmd_lab.scenario import Scenario, ScenarioError
from mpmd_lab.validate import context
from mpmd_lab.validate.analysis import Analysis, analyze_rules
from pydantic import BaseModel
from pydantic_core import to_json

#: how many candidates' checks ``offer`` keeps (``checked``)
CACHE_SIZE = 512
#: content (canonical JSON) -> the candidate's analysis, None when it is not a scenario
_CHECKED: OrderedDict[str, Analysis | None] = OrderedDict()
#: id(a kept candidate's scenario) -> its analysis (the entry holds the scenario, so the
#: id names it while it is kept)
_BY_ID: dict[int, Analysis] = {}
#: candidates checked in this process (found by content: not counted)
CHECKS = 0
#: where the candidates' checks are timed (``metered``): the timings and their clock
_METER: list[tuple[dict[str, float], Callable[[], float]]] = []
#: the plans the candidates made from a scenario (``made``) reuse (``reusing``)
_LIKE: list[Plan] = []


class reusing:  # noqa: N801 - used as a function: ``with reusing(plan):``
    """While inside, a candidate made from another scenario's parts (``candidate``'s
    ``made``: a fix's, ``edited``) compiles reusing ``plan``'s records (the original
    scenario's plan: ``plan.compile``'s ``like``) where what they are made from is the
    candidate's own; its plan is the one compiled without."""

    __slots__ = ("plan",)

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __enter__(self) -> None:
        _LIKE.append(self.plan)

    def __exit__(self, *exc: object) -> None:
        _LIKE.pop()


class metered:  # noqa: N801 - used as a function: ``with metered(timings, clock):``
    """While inside, the candidates' own checks (not found by content) add their time to
    ``timings["recheck"]``, and their stages' to ``recheck_compile``, ``recheck_rules``
    and ``recheck_sync`` (``validate.analyze`` times the fixes' part this way)."""

    __slots__ = ("meter",)

    def __init__(
        self, timings: dict[str, float], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.meter = (timings, clock)

    def __enter__(self) -> None:
        _METER.append(self.meter)

    def __exit__(self, *exc: object) -> None:
        _METER.pop()


class one_form:  # noqa: N801 - used as a function: ``with one_form(scenario):``
    """While inside, ``form_of(scenario)`` is one JSON form of ``scenario`` (``data``),
    made at the first call and then shared by every caller (``fixes.offer``'s candidates,
    the repairs that read it), which only read it: an edit copies what it changes
    (``with_edits``), and a part a repair takes into a fix's value is shared as it is
    (as it was with the repair's own form: edits' values are never changed)."""

    __slots__ = ("data", "scenario")

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.data: dict[str, Any] | None = None

    def __enter__(self) -> None:
        _FORM.append(self)

    def __exit__(self, *exc: object) -> None:
        _FORM.pop()


#: the scenarios whose JSON form ``form_of`` shares, innermost last (``one_form``)
_FORM: list[one_form] = []


def form_of(s: Scenario) -> dict[str, Any]:
    """The JSON form of ``s`` to read, not to change: while ``one_form(s)`` holds, the one
    it shares (made once), else ``s.to_dict()``."""
    form = _FORM[-1] if _FORM else None
    if form is None or form.scenario is not s:
        return s.to_dict()
    if form.data is None:
        form.data = s.to_dict()
    return form.data


def content_key(data: dict[str, Any]) -> str:
    """What a scenario's JSON form is, as a key: the same content, the same key. Its
    keys stay in their order (the order of buffers, outputs and scratch is the
    scenario's), so it is also a copy of ``data`` (``json.loads``). (Compact JSON,
    ASCII only, written by pydantic-core's encoder in one call.)"""
    return to_json(data, ensure_ascii=True).decode()


def candidate(
    data: dict[str, Any], key: str | None = None, made: Callable[[], Scenario] | None = None
) -> Analysis | None:
    """The rules' analysis of the scenario ``data`` (its JSON form; ``key``: its
    ``content_key`` when known), by content: a candidate checked before (by this call
    or an earlier check of the same or another scenario: the Lab checking again,
    ``check --fix``) is neither validated nor checked again. None when ``data`` is not
    a valid scenario. ``made``: makes the scenario ``data`` validates to, sharing what
    it can with another (``edited``); ``data`` is validated when it raises; its plan
    then reuses the records of the plan ``reusing`` gives. The last ``CACHE_SIZE`` are
    kept."""
    global CHECKS
    key = content_key(data) if key is None else key
    if key in _CHECKED:
        _CHECKED.move_to_end(key)
        return _CHECKED[key]
    CHECKS += 1
    meter = _METER[-1] if _METER else None
    # (a scenario validated whole shares no object with another plan's: nothing to reuse)
    like = _LIKE[-1] if _LIKE and made is not None else None
    if meter is None:
        try:
            got: Analysis | None = analyze_rules(_validated(data, made), like=like)
        except Exception:  # a fix that does not apply is not offered
            got = None
        _keep(key, got)
        return got
    timings, clock = meter
    stages: dict[str, float] = {}
    before = clock()
    try:
        got = analyze_rules(_validated(data, made), like=like, timings=stages, clock=clock)
    except Exception:
        got = None
    timings["recheck"] = timings.get("recheck", 0.0) + clock() - before
    for stage, spent in stages.items():
        part = RECHECK_PARTS.get(stage, "recheck_rules")
        timings[part] = timings.get(part, 0.0) + spent
    _keep(key, got)
    return got


def _validated(data: dict[str, Any], made: Callable[[], Scenario] | None) -> Scenario:
    """``made()`` (the scenario ``data`` is, made sharing another's parts), or ``data``
    validated when there is none or it raises (raises as ``model_validate`` does)."""
    if made is not None:
        try:
            return made()
        except Exception:  # (``data`` decides: validated whole, it says what is wrong)
            pass
    return Scenario.model_validate(data)


#: where a candidate's check stages go in ``metered`` timings, apart from ``recheck``
#: (all of it, validation and keeping too): its plan, its race check, and (any other
#: stage) ``recheck_rules``
RECHECK_PARTS = {"compile": "recheck_compile", "sync": "recheck_sync"}


def _keep(key: str, got: Analysis | None) -> None:
    """Keep a candidate's analysis by its content key (the oldest go past
    ``CACHE_SIZE``)."""
    replaced = _CHECKED.pop(key, None)
    if replaced is not None:  # (the same content kept again, as another scenario)
        del _BY_ID[id(replaced.scenario)]
    _CHECKED[key] = got
    if got is not None:
        _BY_ID[id(got.scenario)] = got
    if len(_CHECKED) > CACHE_SIZE:
        _, old = _CHECKED.popitem(last=False)
        if old is not None:
            del _BY_ID[id(old.scenario)]


def checked(data: dict[str, Any]) -> tuple[Diagnostic, ...] | None:
    """The diagnostics of the scenario ``data`` (its JSON form) checked without fixes
    (``candidate``'s), or None when ``data`` is not a valid scenario."""
    got = candidate(data)
    return None if got is None else got.diagnostics


def scenario_of(data: dict[str, Any], made: Callable[[], Scenario] | None = None) -> Scenario:
    """``data`` validated: the very scenario a candidate's check made of the same content
    when one is kept (its analysis is then ``known``), else validated now (``made``: as
    ``candidate`` takes it; raises as ``Scenario.model_validate`` does)."""
    got = _CHECKED.get(content_key(data))
    return got.scenario if got is not None else _validated(data, made)


def known(s: Scenario) -> Analysis | None:
    """The rules' analysis of ``s`` when ``s`` is a kept candidate's own scenario (what
    ``scenario_of`` returned), else None: it is not checked twice."""
    got = _BY_ID.get(id(s))
    return got if got is not None and got.scenario is s else None


def renamed(source: Scenario, new: Scenario) -> None:
    """``new`` is ``source`` with another name and description (``fixes.retitled``),
    which no rule reads: when ``source`` is a kept candidate's scenario, ``new`` is kept
    with the same diagnostics over its own plan, so applying a fix that also retitles
    is not checked again (tests/test_fixes.py holds that the rules read neither)."""
    got = known(source)
    if got is not None:
        # (a copy sharing the call and buffers, as ``retitled`` makes: the plan too)
        plan = got.plan.of_copy(new) if got.plan.fits(new) else compile(new)
        _keep(content_key(new.to_dict()), Analysis(new, plan, got.diagnostics))


def edited(s: Scenario, edits: Iterable[Edit]) -> Scenario:
    """``s`` with ``edits`` applied (in order), validated as its JSON form with them
    would be (``Scenario.model_validate``), but every part of ``s`` no edit reaches is
    ``s``'s own object, not validated again: only the objects on an edit's path are
    made anew (their validators run over the new parts and the kept ones), so a
    candidate fix keeps its unchanged programs, statements and ops, and what is cached
    on them. Raises as ``model_validate`` does, or where an edit does not apply."""
    return Scenario.model_validate(with_edits(_fields(s), edits))


def with_edits(root: dict[str, Any], edits: Iterable[Edit]) -> dict[str, Any]:
    """A copy of ``root`` (a scenario's JSON form, or its fields: ``edited``) with
    ``edits`` applied in order, as ``diagnostics.apply_edit`` applies them, copying
    only the containers on an edit's path (a model on it: its fields, ``_fields``):
    everything else, and each edit's value, is shared, not copied, so neither
    ``root`` nor an edit is changed (a later edit inside an earlier one's value copies
    it first). Raises ScenarioError where an edit does not apply (its path is not there)."""
    made: dict[int, Any] = {}  # id -> each container made here (held: the ids stay)
    top = made[id(root)] = dict(root)
    for edit in edits:
        try:
            _apply(top, edit, made)
        except (KeyError, IndexError, TypeError, ValueError) as e:  # (a path not there)
            raise ScenarioError(
                "fix", [(edit.path, f"the edit ({edit.op}) does not apply here: {e!r}")]
            ) from e
    return top


def _apply(top: dict[str, Any], edit: Edit, made: dict[int, Any]) -> None:
    """``with_edits``'s one edit, applied to ``top`` (containers on its path copied
    once: ``made``)."""
    parts = parse_path(edit.path)
    parent: Any = top
    for part in parts[:-1]:
        child = parent[part]
        if id(child) not in made:
            child = _fields(child) if isinstance(child, BaseModel) else child.copy()
            made[id(child)] = child
            parent[part] = child
        parent = child
    last = parts[-1]
    if edit.op == "remove":
        del parent[last]
    elif edit.op == "replace" or not isinstance(parent, list):
        parent[last] = edit.value  # (an add to a mapping sets the key)
    else:  # an add to a list inserts
        parent.insert(int(last), edit.value)


def _fields(m: BaseModel) -> dict[str, Any]:
    """A model's fields by the names its JSON form gives them (aliases), values as they
    are: what validates to an equal model, reusing the values."""
    keys = _KEYS.get(type(m))
    if keys is None:
        fields = type(m).model_fields.items()
        keys = _KEYS[type(m)] = tuple((f.alias or name, name) for name, f in fields)
    return {key: getattr(m, name) for key, name in keys}


#: each model class's ``(key in its JSON form, field name)`` pairs (``_fields``)
_KEYS: dict[type[BaseModel], tuple[tuple[str, str], ...]] = {}


def clear_cache() -> None:
    """Forget everything a check keeps by content for the next: every candidate's check
    and the rules' shared diagnostics (``validate.context.clear_cache``). ``make bench``
    and ``bench.icount`` call it to time a first check of a scenario, which finds
    nothing an earlier check of the same content left."""
    _CHECKED.clear()
    _BY_ID.clear()
    context.clear_cache()
