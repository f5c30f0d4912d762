"""mpmd_lab.deep: real JAX held against static findings; JAX wins, gaps are reported."""

from __future__ import annotations

import pytest
from mpmd_lab import deep, gallery, probe
from mpmd_lab.diagnostics import Diagnostic, Edit, Fix

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only


@pytest.fixture(scope="module")
def probed():
    names = ["dup-ref", "two-block-copy", "transpose-view"]
    rs = probe.probe_many([gallery.load(n) for n in names], deep.JAX_STAGES, timeout=120)
    return dict(zip(names, rs, strict=True))


def codes(diags):
    return [(d.code, d.severity, d.stage) for d in diags]


def test_jax_error_when_rules_agree(probed):
    fix = Fix(description="drop the duplicate", edits=[Edit(op="remove", path="call.args[1]")])
    static = [
        Diagnostic(
            code="MPMD_DUP_REF",
            stage="trace",
            path="call.args[1]",
            message="predicted",
            explanation="why",
            fix=fix,
        )
    ]
    out = deep.reconcile(static, probed["dup-ref"])
    assert codes(out) == [("MPMD_DUP_REF", "error", "trace")]
    d = out[0]
    assert d.jax.type == "NotImplementedError"
    assert d.message == d.jax.message == probed["dup-ref"].message
    assert d.message.startswith("Cannot pass the same ref into a mpmd map multiple times")
    assert (d.path, d.explanation, d.fix) == ("call.args[1]", "why", fix)


def test_jax_error_the_rules_missed(probed):
    out = deep.reconcile([], probed["dup-ref"])
    assert codes(out) == [
        ("MPMD_DUP_REF", "error", "trace"),
        ("RULES_DISAGREE", "warning", "trace"),
    ]
    assert "found nothing" in out[1].message and "MPMD_DUP_REF" in out[1].message


def test_jax_error_differs_from_the_rules_first(probed):
    static = [
        Diagnostic(code="MESH_CLUSTER_RANK", stage="build", message="wrong"),
        Diagnostic(code="AT_OOB_SLICE", stage="trace", path="p", message="maybe"),
        Diagnostic(
            code="PROGRAM_ID_GPU_INTERP", severity="warning", stage="interpret", message="w"
        ),
    ]
    out = deep.reconcile(static, probed["dup-ref"])
    # JAX's error first; the refuted build error is dropped; the later ones stay
    assert out[0].code == "MPMD_DUP_REF" and out[0].jax is not None
    got = [d.code for d in out]
    assert "MESH_CLUSTER_RANK" not in got
    assert "AT_OOB_SLICE" in got and "PROGRAM_ID_GPU_INTERP" in got
    disagree = [d for d in out if d.code == "RULES_DISAGREE"]
    assert len(disagree) == 1 and "MESH_CLUSTER_RANK" in disagree[0].message


def test_jax_passes_where_rules_predicted_an_error(probed):
    static = [
        Diagnostic(code="AT_OOB_SLICE", stage="trace", path="x", message="bad slice"),
        Diagnostic(
            code="PROGRAM_ID_GPU_INTERP", severity="warning", stage="interpret", message="w"
        ),
    ]
    out = deep.reconcile(static, probed["two-block-copy"])
    assert not any(d.is_error for d in out)  # JAX's verdict: valid
    assert [d.code for d in out] == ["RULES_DISAGREE", "PROGRAM_ID_GPU_INTERP"]
    assert "AT_OOB_SLICE" in out[0].message


def test_interpreter_findings_are_not_disagreements(probed):
    static = [
        Diagnostic(code="INTERP_LIMIT", severity="warning", stage="interpret", message="w"),
        Diagnostic(code="RACE", stage="gpu-run", message="r"),  # JAX cannot check this here
    ]
    assert [d.code for d in deep.reconcile(static, probed["two-block-copy"])] == [
        "RACE",
        "INTERP_LIMIT",
    ]
    assert deep.reconcile([], probed["two-block-copy"]) == []


def test_gpu_lower_error_is_reported_at_its_stage(probed):
    r = probed["transpose-view"]
    out = deep.reconcile([Diagnostic(code="GPU_VERIFICATION", stage="gpu-lower", message="m")], r)
    assert codes(out) == [("GPU_VERIFICATION", "error", "gpu-lower")]
    assert out[0].jax.type == "VerificationError"


def test_no_verdict_from_jax_keeps_the_static_findings():
    s = gallery.load("two-block-copy")
    static = [Diagnostic(code="AT_OOB_SLICE", stage="trace", message="m")]
    # (0.1 ms: less than JAX's trace alone takes, on any machine; 10 ms was not, on a
    # fast one)
    out = deep.deep_check(s, timeout=1e-4, static=static)
    assert [d.code for d in out] == ["AT_OOB_SLICE", "RUN_TIMEOUT"]
    assert out[1].severity == "warning"
    assert deep.deep_check(s, timeout=120, static=[]) == []  # the next check works


def test_deep_check_with_the_static_rules():
    out = deep.deep_check(gallery.load("dup-ref"))
    assert out[0].code == "MPMD_DUP_REF" and out[0].jax is not None


def test_broken_scenario_is_not_a_disagreement():
    import json

    from mpmd_lab.scenario import load_scenario

    data = json.loads(gallery.path_of("two-block-copy").read_text())
    data["call"]["programs"][0]["body"][2]["src"] = "nowhere"
    out = deep.deep_check(load_scenario(data))
    assert [d.code for d in out] == ["XREF_UNKNOWN_NAME"]


def _ring_in_a_loop(stop, via):
    from mpmd_lab.scenario import load_scenario

    data = gallery.load("ring-shift").to_dict()
    prog = data["call"]["programs"][0]
    prog["body"] = [{"op": "loop", "var": "i", "stop": stop, "via": via, "body": prog["body"]}]
    return load_scenario(data)


def test_a_python_loop_of_2_31_steps_is_not_traced_until_the_timeout():
    """A Python loop unrolls at trace time: 2**31 steps kept JAX tracing until the deep
    check's 120 s timeout, which was all it said. It is counted first and not started,
    at the loop, with the rewrite that traces it."""
    import time

    s = _ring_in_a_loop(2**31 - 1, "python")
    t0 = time.perf_counter()
    out = deep.deep_check(s, timeout=120)
    assert time.perf_counter() - t0 < 30
    (d,) = [d for d in out if d.code == "RUN_TIMEOUT"]
    assert (d.severity, d.stage, d.path) == ("warning", "trace", "call.programs[0].body[0]")
    assert "4,294,967,295 statements" in d.message and "fori_loop" in d.message
    assert not any(d.is_error for d in out)  # the static findings stand


def test_what_jax_traces_once_or_quickly_is_still_asked():
    """A fori_loop body is traced once, whatever its trip count; a shorter Python loop is
    traced in full: both go to JAX (the 2,000-step loop traces in about a second; the
    count is a lower bound of the time: lowering grows faster than the statements)."""
    assert probe.beyond_the_trace(_ring_in_a_loop(2**31 - 1, "fori_loop"), 120) is None
    assert probe.beyond_the_trace(_ring_in_a_loop(2**31 - 1, "pl.loop"), 120) is None
    short = _ring_in_a_loop(2000, "python")
    assert probe.beyond_the_trace(short, 120) is None
    r = probe.probe(short, ("build", "trace"), timeout=120)
    assert r.ok, r.message
    # the bound scales with the timeout: the same loop is refused for a 1 ms one
    assert probe.beyond_the_trace(_ring_in_a_loop(2000, "python"), 0.001) is not None
