"""Every code has a scenario (tests/scenarios/codes/CODE.json) that triggers it: the static
check gives that code first, and real JAX (one child process for all of them) agrees."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mpmd_lab.catalogue import BY_CODE, OWN
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

CODES_DIR = Path(__file__).parent / "scenarios" / "codes"
FILES = sorted(CODES_DIR.glob("*.json"))
#: codes JAX itself does not raise before a run (mpmd-lab's own findings)
JAX_SILENT = {"REMOTE_DEVICE_OOB", "RACE", "OOB_INDEX"} | {c for c in OWN if c.startswith("XREF")}
#: raised only by the interpreter
INTERPRET = {"RACE_DETECTED", "OOB_READ", "OOB_WRITE"}
#: not reproducible by the generated code (no scenario builds it), or a pl.kernel quirk
UNPROBED = {"MPMD_NO_PROGRAMS"}
#: where JAX raises nothing: the process running it dies (a segfault) at this stage
JAX_CRASHES = {"TRANSPOSE_0D_CRASH": "gpu-lower"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_static_first_code(path: Path) -> None:
    diags = check(load_scenario(path))
    first = first_error(diags)
    assert first is not None and first.code == path.stem, [d.one_line() for d in diags]
    assert first.path, "every diagnostic names a field path"


def test_every_catalogued_code_has_a_scenario() -> None:
    have = {p.stem for p in FILES}
    missing = [
        c
        for c in BY_CODE
        if c not in have
        and c
        not in {
            "GET_SHAPE_MISMATCH",
            "HLO_INTERP_NO_DISCHARGE",
            "GPU_INTERP_UNSUPPORTED_TRANSFORM",
            "GPU_INTERP_MULTICAST",
            "GPU_INTERP_NOT_A_REF",
        }
    ]
    assert not missing, missing


@pytest.fixture(scope="module")
def jax_results() -> dict[str, dict]:
    probed = [p for p in FILES if p.stem not in UNPROBED]
    res = probe_many(
        [json.loads(p.read_text()) for p in probed], stages=("build", "trace", "gpu-lower")
    )
    return {p.stem: r for p, r in zip(probed, res, strict=True)}


@pytest.mark.slow
@pytest.mark.parametrize(
    "code", [p.stem for p in FILES if p.stem not in UNPROBED and not p.stem.startswith("XREF")]
)
def test_jax_agrees(code: str, jax_results: dict[str, dict]) -> None:
    r = jax_results[code]
    if code in JAX_CRASHES:
        assert r["type"] == "ChildProcessError" and "SIGSEGV" in r["message"], r
        assert r["stage"] == JAX_CRASHES[code], r
        return
    if code in JAX_SILENT or code in INTERPRET:
        assert r["stage"] is None, r  # JAX accepts it before running
        return
    assert r.get("code") == code, r
    d = first_error(check(load_scenario(CODES_DIR / f"{code}.json")))
    assert d.stage == r["stage"]
    assert d.jax is not None and d.jax.type == r["type"]


@pytest.mark.slow
def test_interpreter_agrees() -> None:
    """Interpret-stage codes (errors) and interpreter limits (warnings) against the
    real GPU interpreter, single device, one child process."""
    from mpmd_lab import gallery

    scenarios = [load_scenario(CODES_DIR / f"{c}.json") for c in sorted(INTERPRET)]
    scenarios += [gallery.load("reshape-view"), gallery.load("two-block-copy")]
    results = probe_many(scenarios, stages=("interpret",))
    for s, r in zip(scenarios, results, strict=True):
        diags = [d for d in check(s) if d.stage == "interpret"]
        if r["stage"] is None:
            assert not diags, (s.name, [d.one_line() for d in diags])
            continue
        assert diags, (s.name, r)
        assert diags[0].code == r["code"], (s.name, r, diags[0].one_line())
