"""Shipped fixes: after each, check passes and real JAX agrees (traces and lowers)."""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit import gallery
from toolkit.diagnostics import Edit
from toolkit.fixes import apply_all, apply_edit, parse_path
from toolkit.scenario import load_scenario
from toolkit.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

CODES = Path(__file__).parent / "scenarios" / "codes"
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
    fixed = []
    for s in FIXABLE:
        before = first_error(check(s))
        assert before is not None and before.fix is not None, s.name
        after, applied = apply_all(s)
        assert applied, s.name
        assert first_error(check(after)) is None, (s.name, [d.one_line() for d in check(after)])
        fixed.append(after)
    results = probe_many(fixed, stages=("build", "trace", "gpu-lower"))
    for s, r in zip(fixed, results, strict=True):
        assert r["stage"] is None, (s.name, r)


def test_dup_ref_fix_rebinds_parameter() -> None:
    s = gallery.load("dup-ref")
    after, _ = apply_all(s)
    assert [a.param for a in after.call.args] == ["a_ref"]
    body = after.call.programs[0].body[0]
    assert (body.lhs, body.rhs) == ("a_ref", "a_ref")
