"""The catalogue classifies what JAX really prints, however it reaches us.

The messages come from ``toolkit/knowledge/recorded.json``: what jax 0.12.0.1 and
0.11.2 printed for each card's example (``python -m toolkit.knowledge.verify --record``);
``tests/test_knowledge.py`` checks the examples against the installed JAX live.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkit import catalogue
from toolkit.knowledge import RECORDED

RECORDS = json.loads(RECORDED.read_text())
#: (code, version, record) for every message JAX raised for an example.
RAISED = [
    (code, version, r)
    for code, by_version in sorted(RECORDS.items())
    for version, r in sorted(by_version.items())
    if r is not None
]
#: Codes whose example JAX rejects with another code, by design of the card.
OTHER_CODE = {
    "OOB_INDEX": "OOB_READ",
    "INTERP_LIMIT": "GPU_INTERP_UNSUPPORTED_TRANSFORM",
}
IDS = [f"{c}@{v}" for c, v, _ in RAISED]


def expected(code: str) -> str:
    return OTHER_CODE.get(code, code)


def wrapped(type_: str, message: str) -> str:
    """A JaxRuntimeError's text around an inner error, as the GPU interpreter prints it."""
    return (
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "/x/site-packages/jax/_src/callback.py", line 829, in _wrapped_callback\n'
        '  File "/x/site-packages/jax/_src/pallas/mosaic_gpu/interpret/gpu_callbacks.py", '
        "line 604, in _validate_transforms\n"
        f"{type_}: {message}"
    )


def traceback_text(type_: str, message: str) -> str:
    """A whole traceback as a user pastes it, JAX's filtered-frames footer included."""
    tail = f"{type_}: {message}" if message else type_
    return (
        "Traceback (most recent call last):\n"
        '  File "/home/me/kernel.py", line 12, in <module>\n'
        "    out = f(x)\n"
        "          ^^^^\n"
        '  File "/home/me/kernel.py", line 7, in body\n'
        f"{tail}\n"
        "--------------------\n"
        "For simplicity, JAX has removed its internal frames from the traceback of the "
        "following exception. Set JAX_TRACEBACK_FILTERING=off to include these.\n"
    )


def test_records_cover_every_jax_code_with_an_example():
    jax_codes = {e.code for e in catalogue.ENTRIES}
    assert jax_codes <= set(RECORDS), sorted(jax_codes - set(RECORDS))
    assert {"0.11.2", "0.12.0.1"} <= {v for by in RECORDS.values() for v in by}


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_recorded_message(code, version, r):
    assert catalogue.classify(r["type"], r["message"]) == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_text_pasted_with_prefix(code, version, r):
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    assert catalogue.classify_text(text) == expected(code)
    assert catalogue.classify_text(f"jax.errors.{text}") == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_inside_jax_runtime_error(code, version, r):
    if not r["message"]:
        pytest.skip("an empty message cannot be told apart inside a wrapper")
    inner = wrapped(r["type"], r["message"])
    assert catalogue.classify("JaxRuntimeError", inner) == expected(code)
    assert catalogue.classify_text(f"jax.errors.JaxRuntimeError: {inner}") == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_whole_traceback(code, version, r):
    assert catalogue.classify_text(traceback_text(r["type"], r["message"])) == expected(code)


def test_unwrap_prefers_the_real_error_over_the_computation_failed_wrapper():
    text = (
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "a.py", line 1, in f\n'
        "RuntimeError: Computation failed on Warpgroup(device_id=0, cluster_id=0, "
        "block_id=0, warpgroup_id=0) with exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in g\n'
        "AttributeError: 'MulticastRef' object has no attribute 'indices'\n"
    )
    assert catalogue.unwrap("JaxRuntimeError", text) == (
        "AttributeError",
        "'MulticastRef' object has no attribute 'indices'",
    )
    assert catalogue.classify("JaxRuntimeError", text) == "GPU_INTERP_MULTICAST"


def test_generic_messages_need_their_exception_type():
    assert catalogue.classify("IndexError", "tuple index out of range") == "TRANSPOSE_BAD_AXIS"
    assert catalogue.classify("IndexError", "list index out of range") == (
        "BITCAST_1D_SAME_WIDTH_BUG"
    )
    assert catalogue.classify("KeyError", "tuple index out of range") is None
    assert catalogue.classify("NotImplementedError", "") == "MPMD_GPU_MESH_NOT_COMBINABLE"
    assert catalogue.classify("ValueError", "") is None
    assert catalogue.classify("", "") is None
    assert catalogue.classify_text("") is None


def test_unknown_messages_are_unknown():
    assert catalogue.classify("ValueError", "something JAX never says") is None
    assert catalogue.classify_text("ZeroDivisionError: division by zero") is None


def test_every_code_is_unique_and_has_a_compiling_pattern():
    codes = [e.code for e in catalogue.ENTRIES]
    assert len(codes) == len(set(codes))
    assert not set(codes) & set(catalogue.OWN)
    for e in (*catalogue.ENTRIES, *catalogue.OWN_PATTERNS):
        re.compile(e.pattern)
        assert e.stage in {"schema", "build", "trace", "gpu-lower", "interpret", "gpu-run"}
    assert {e.code for e in catalogue.OWN_PATTERNS} <= set(catalogue.OWN)


def test_specific_patterns_do_not_match_each_others_records():
    """Each recorded message matches its own entry's pattern and no earlier one."""
    for code, _version, r in RAISED:
        hits = [
            e.code
            for e in catalogue.ENTRIES
            if not e.pattern.startswith("^") and re.search(e.pattern, r["message"])
        ]
        assert hits in ([], [expected(code)]), (code, hits)


@given(st.text(max_size=300))
def test_classify_never_raises(text):
    catalogue.classify_text(text)
    catalogue.classify("JaxRuntimeError", text)
    catalogue.classify("", text)


@given(st.sampled_from(RAISED), st.text(alphabet=" \n\t", max_size=5))
def test_classify_ignores_surrounding_whitespace(item, pad):
    code, _version, r = item
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    assert catalogue.classify_text(pad + text + pad) == expected(code)
