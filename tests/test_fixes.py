"""Shipped fixes: after each, check passes and real JAX agrees (traces and lowers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Edit
from mpmd_lab.fixes import apply_all, apply_edit, parse_path
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

CODES = Path(__file__).parent / "scenarios" / "codes"
JAX_STAGES = ("build", "trace", "gpu-lower")
FIXABLE = [
    gallery.load("dup-ref"),
    gallery.load("peer-then-multicast"),
    gallery.load("multicast-then-peer"),
    *(
        load_scenario(CODES / f"{c}.json")
        for c in [
            "MPMD_DUP_REF",
            "REF_PEER_TO_MULTICAST",
            "REF_MULTICAST_TO_PEER",
            "TRANSPOSE_RANK",
            "AT_OOB_SLICE",
            "MPMD_GPU_SCRATCH",
            "GPU_TOO_MANY_BARRIERS",
            "MPMD_RETURNS_VALUE",
            "MPMD_CAPTURED_ARRAY",
            "MPMD_GPU_MESH_NOT_COMBINABLE",
            "COLLECTIVE_AXES_NOT_ALL",
            "MESH_CLUSTER_RANK",
            "MESH_THREADS_PAIR",
            "MESH_TOO_MANY_THREADS",
            "TMEM_DTYPE_PACKED",
            "TMEM_ONLY_ARGS",
            "TMEM_NO_TRANSFORMS",
            "TRANSPOSE_REF_RAW_BUG",
            "TRANSPOSE_NEGATIVE_PERM_GPU",
            "AT_TOO_MANY_INDICES",
            "ARG_TRANSFORM_ON_ARRAY",
            "JAX_ASSERTION",
            "MPMD_NOT_MANUAL",
            "MPMD_CLOSED_REF_ALIAS",
        ]
    ),
]


def test_paths() -> None:
    assert parse_path("call.args[1].param") == ["call", "args", 1, "param"]
    data = {"a": [1, 2, 3]}
    apply_edit(data, Edit(op="remove", path="a[1]"))
    apply_edit(data, Edit(op="add", path="a[0]", value=9))
    assert data == {"a": [9, 1, 3]}


def test_fixes_make_check_pass_and_jax_agree() -> None:
    """Each fix removes its error; the fixed scenario is valid (or shows the next, different
    problem) and real JAX agrees with the static verdict and first code."""
    fixed = []
    for s in FIXABLE:
        before = first_error(check(s))
        assert before is not None and before.fix is not None, s.name
        after, applied = apply_all(s)
        assert applied, s.name
        assert before.code not in {d.code for d in check(after) if d.is_error}, s.name
        fixed.append(after)
    valid = sum(first_error(check(s)) is None for s in fixed)
    assert valid >= len(fixed) // 2
    results = probe_many(fixed, stages=("build", "trace", "gpu-lower"))
    for s, r in zip(fixed, results, strict=True):
        # JAX is asked to build, trace and lower: what only a GPU run shows (a race, a
        # deadlock) is not its to say
        mine = first_error([d for d in check(s) if d.stage in ("schema", *JAX_STAGES)])
        theirs = r.get("code") if r["stage"] else None
        assert (mine.code if mine else None) == theirs, (s.name, r, mine)


def test_dup_ref_fix_rebinds_parameter() -> None:
    s = gallery.load("dup-ref")
    after, _ = apply_all(s)
    assert [a.param for a in after.call.args] == ["a_ref"]
    body = after.call.programs[0].body[0]
    assert (body.lhs, body.rhs) == ("a_ref", "a_ref")


def test_a_candidate_is_checked_once_by_content() -> None:
    """``fixes.checked`` keeps each candidate's check by content: checking a scenario
    again offers the same fixes without checking its candidates again, and the fixed
    scenario's own check (what applying the fix gives) is the candidate's."""
    from mpmd_lab import fixes, validate

    fixes.clear_cache()
    first = check(gallery.load("dup-ref"))
    (fix,) = first[0].fixes
    assert len(fixes._CHECKED) == 1
    data = fixes._fixed_data(gallery.load("dup-ref"), fix)
    kept = fixes.checked(data)
    assert kept is not None
    again = check(gallery.load("dup-ref"))
    assert again == first and len(fixes._CHECKED) == 1
    # the fixes' part of a check, in bytecode instructions: checking a candidate again
    # (its rules and race check) costs several times what finding it kept does
    from bench.icount import Counter

    parts: list[dict[str, float]] = []
    for clear in (True, False):
        if clear:
            fixes.clear_cache()
        parts.append({})
        with Counter() as clock:
            validate.analyze(gallery.load("dup-ref"), timings=parts[-1], clock=clock)
    assert parts[1]["fixes"] * 3 < parts[0]["fixes"]
    fixed = fixes.apply_fix(gallery.load("dup-ref"), fix)
    assert tuple(validate.analyze(fixed, fixes=False).diagnostics) == kept
    fixes.clear_cache()
    assert check(gallery.load("dup-ref")) == first  # (the same answer, checked afresh)
    assert fixes.checked({"not": "a scenario"}) is None
