"""The knowledge base: a complete card for every code, found by code or by JAX's own
words, and every card's example checked against the installed JAX."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpmd_lab import catalogue, knowledge
from mpmd_lab.knowledge import verify
from mpmd_lab.scenario import load_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ALL_CODES = sorted({e.code for e in catalogue.ENTRIES} | set(catalogue.OWN))
#: Codes with nothing to trigger: input that is not a scenario, or run-time events.
NO_EXAMPLE = {"SCHEMA", "XREF_UNKNOWN_BUFFER", "RULES_DISAGREE", "RUN_TIMEOUT", "RUN_CRASHED"}
NO_EXAMPLE |= {"RUN_CANCELLED"}
NO_EXAMPLE |= {
    "JAX_UNKNOWN",
    "SCRATCH_TRANSFORM",
    "SCRATCH_ONLY_TRANSFORM",
    "XREF_DUPLICATE_NAME",
    "XREF_UNKNOWN_NAME",
    "CODEGEN",
}
#: Run-time events of mpmd-lab itself (no GPU, no simulator, a failed run) and the
#: traffic simulator's own stops: JAX is never asked, so no example scenario.
NO_EXAMPLE |= {"GPU_UNAVAILABLE", "SIMULATE_UNAVAILABLE", "RUN_ERROR", "PROCESSES_UNSUPPORTED"}
NO_EXAMPLE |= {"SIM_DTYPE_MISMATCH", "SIM_SHAPE_MISMATCH", "SIM_TOO_LARGE", "SIM_UNSUPPORTED"}
#: the importer's own stop: a user's function traced too long (tests/test_importer.py)
NO_EXAMPLE |= {"IMPORT_TIMEOUT"}
#: JAX's lowering segfaults: no error to record, and the example would kill the child
#: that runs the others (tests/scenarios/codes/ holds it against JAX: test_validate_codes)
NO_EXAMPLE |= {"TRANSPOSE_0D_CRASH"}
#: JAX's lowering raises one of several errors, by the statement, none with a code of its
#: own to record (tests/test_hostile_round7.py holds each against JAX)
NO_EXAMPLE |= {"GPU_ZERO_SIZE_ACCESS"}
RECORDS = json.loads(knowledge.RECORDED.read_text())


def test_every_code_has_a_card():
    assert knowledge.codes() == ALL_CODES


@pytest.mark.parametrize("code", ALL_CODES)
def test_card_is_complete(code):
    c = knowledge.card(code)
    for name in ("title", "message", "meaning", "trigger", "prevention", "before", "after"):
        assert getattr(c, name).strip(), name
    assert c.situations and all(s.strip() for s in c.situations)
    assert c.solutions and all(s.strip() for s in c.solutions)
    assert set(c.versions) <= set(knowledge.VERSIONS) and c.versions
    assert c.related and code not in c.related
    assert set(c.related) <= set(ALL_CODES), set(c.related) - set(ALL_CODES)
    if c.kind == "jax":
        entry = catalogue.BY_CODE[code]
        assert (c.type, c.stage, c.title) == (entry.type, entry.stage, entry.title)


@pytest.mark.parametrize("code", ALL_CODES)
def test_card_has_an_example_where_there_is_a_trigger(code):
    ex = knowledge.card(code).example
    if code in NO_EXAMPLE:
        assert ex is None
        return
    assert ex is not None
    assert ex.stage in {"build", "trace", "gpu-lower", "interpret"}
    for path in (ex.scenario, ex.fixed):
        if path:
            load_scenario(knowledge.HERE.parents[1] / path)


def test_version_differences_are_in_the_cards():
    """Where 0.11.2 and 0.12 disagree on an example, the card says so."""
    for code, by_version in RECORDS.items():
        a, b = by_version.get("0.11.2"), by_version.get("0.12.0.1")
        if (a is None) != (b is None) or (
            a and b and (a["type"], a["stage"]) != (b["type"], b["stage"])
        ):
            c = knowledge.card(code)
            assert c.version_notes, code
            assert "0.11.2" in c.version_notes, code


def test_render_shows_the_whole_card():
    c = knowledge.card("MPMD_DUP_REF")
    text = c.render()
    for part in (
        "MPMD_DUP_REF",
        c.title,
        "Cannot pass the same ref into a mpmd map multiple times",
        "What it means",
        "How to fix it",
        "kernel(acc, acc)",
        "How to prevent it",
        "Related: MPMD_CLOSED_REF_ALIAS",
        "examples/MPMD_DUP_REF.json",
    ):
        assert part in text, part
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("      "))


def test_render_lists_what_each_jax_version_did():
    text = knowledge.card("RACE_DETECTED").render()
    assert "jax 0.11.2: runs the example without an error" in text
    assert "jax 0.12.0.1: RuntimeError (inside JaxRuntimeError) at interpret" in text


def test_json_round_trips():
    for code in ALL_CODES:
        d = json.loads(knowledge.card(code).to_json())
        assert d["code"] == code
        assert d["solutions"] == knowledge.card(code).solutions


def test_html_escapes_and_holds_the_examples():
    c = knowledge.card("HLO_INTERP_NO_DISCHARGE")
    h = c.to_html()
    assert h.startswith('<div class="mpmd-card" data-code="HLO_INTERP_NO_DISCHARGE">')
    assert "&lt;class" in h and "<class" not in h
    assert "<pre><code>" in h and "InterpretGPUParams" in h
    assert c._repr_html_() == h


@pytest.mark.parametrize(
    "query", ["MPMD_DUP_REF", "mpmd_dup_ref", "mpmd-dup-ref", "  MPMD_DUP_REF\n"]
)
def test_lookup_by_code(query):
    assert knowledge.lookup(query).code == "MPMD_DUP_REF"


@pytest.mark.parametrize("code", sorted(RECORDS))
def test_lookup_by_raw_message(code):
    r = RECORDS[code].get("0.12.0.1") or RECORDS[code].get("0.11.2")
    if r is None:
        pytest.skip("JAX accepts this example (an mpmd-lab finding)")
    want = {"OOB_INDEX": "OOB_READ", "INTERP_LIMIT": "GPU_INTERP_UNSUPPORTED_TRANSFORM"}
    want = want.get(code, code)
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    assert knowledge.lookup(text).code == want
    if r["message"]:
        assert knowledge.lookup(r["message"]).code == want
        dump = (
            "jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: "
            "Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\n'
            f"{r['type']}: {r['message']}\n"
        )
        assert knowledge.lookup(dump).code == want


def test_lookup_unknown():
    assert knowledge.lookup("") is None
    assert knowledge.lookup("NOT_A_CODE") is None
    assert knowledge.lookup("ValueError: nothing JAX says") is None


@given(st.text(max_size=200))
def test_lookup_never_raises(text):
    c = knowledge.lookup(text)
    assert c is None or c.code in ALL_CODES


def test_cli_explain(cli):
    r = cli("explain", "at_oob_slice")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("AT_OOB_SLICE: ")
    r = cli(
        "explain",
        "--json",
        "ValueError: Out of bound slice: start=192, size=128, stride=1, dim=256.",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["code"] == "AT_OOB_SLICE"
    r = cli("explain", "no such thing")  # nothing near: how many codes there are
    assert r.returncode == 1
    assert f"{len(knowledge.codes())} codes have cards" in r.stderr
    r = cli("explain", "MPMD_DUP_RFE")  # a misspelt code: did you mean
    assert r.returncode == 1
    assert "did you mean" in r.stderr and "MPMD_DUP_REF" in r.stderr


# ------------------------------------------------------------ examples in real JAX


@pytest.fixture(scope="module")
def outcomes():
    """Every example through real JAX (one child per device count)."""
    return verify.run_examples()


def test_every_example_does_what_its_card_says(outcomes):
    assert verify.problems(outcomes) == []


@pytest.mark.parametrize("code", [c for c in ALL_CODES if c not in NO_EXAMPLE])
def test_example_triggers_its_code(outcomes, code):
    ex = knowledge.card(code).example
    o = outcomes[code]
    if ex.jax == "accepted":
        assert o.ok, o.message
    else:
        assert (o.stage, o.code()) == (ex.stage, ex.jax), o.message[:500]
    if ex.fixed:
        fixed = outcomes[f"{code}.fixed"]
        assert fixed.ok, fixed.message[:500]


def test_program_id_example_leaves_output_unwritten(outcomes):
    """The GPU interpreter runs both blocks on tile 0: half the output stays NaN."""
    assert outcomes["PROGRAM_ID_GPU_INTERP"].nan == {"out": 128}
    assert outcomes["PROGRAM_ID_GPU_INTERP.fixed"].nan == {"out": 0}
