"""Block-indexed views (and integer indices) past the end of their ref: JAX never checks
them at trace, the GPU interpreter raises OOB_READ / OOB_WRITE. The static check against
the real interpreter (one child process for all scenarios)."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.fixes import apply_fix
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]


def blocks(n_in: int, n_out: int, grid: int, size: int = 128, pid: bool = False) -> dict[str, Any]:
    """``grid`` blocks copy ``size`` elements each from ``x`` (n_in) to ``out`` (n_out)."""
    entry: dict[str, Any] = {"pid": 0, "size": size} if pid else {"block": "b", "size": size}
    return {
        "name": f"blocks-{n_in}-{n_out}-{grid}{'-pid' if pid else ''}",
        "buffers": {"x": {"shape": [n_in], "dtype": "float32", "init": "iota"}},
        "call": {
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [n_out], "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": grid}},
                    "body": [
                        {
                            "let": "src",
                            "ref": "x_ref",
                            "transforms": [{"op": "at", "index": [entry]}],
                        },
                        {
                            "let": "dst",
                            "ref": "out",
                            "transforms": [{"op": "at", "index": [entry]}],
                        },
                        {"op": "copy", "src": "src", "dst": "dst"},
                    ],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


def two_d() -> dict[str, Any]:
    """A 2-D grid of (8, 128) tiles; the row axis runs one block too many."""
    s = blocks(0, 0, 1)
    s["name"] = "blocks-2d"
    s["buffers"]["x"]["shape"] = [16, 256]
    s["call"]["outputs"]["out"]["shape"] = [24, 256]
    s["call"]["programs"][0]["mesh"]["grid"] = {"r": 3, "c": 2}
    idx = [{"block": "r", "size": 8}, {"block": "c", "size": 128}]
    for st in s["call"]["programs"][0]["body"][:2]:
        st["transforms"][0]["index"] = idx
    return s


CASES = {
    "read": blocks(256, 512, 4),
    "write": blocks(512, 256, 4),
    "partial": blocks(300, 384, 3),
    "fits": blocks(512, 512, 4),
    "pid-gpu-interp": blocks(256, 512, 4, pid=True),  # program_id is 0 in every block
    "two-d": two_d(),
    "knowledge-read": str(ROOT / "toolkit/knowledge/examples/OOB_READ.json"),
    "knowledge-write": str(ROOT / "toolkit/knowledge/examples/OOB_WRITE.json"),
    # integer indices past the end: the same interpreter errors, the same message form
    "int-read": str(ROOT / "tests/scenarios/codes/OOB_READ.json"),
    "int-write": str(ROOT / "tests/scenarios/codes/OOB_WRITE.json"),
    "int-row": str(ROOT / "toolkit/knowledge/examples/OOB_INDEX.json"),
}


@pytest.fixture(scope="module")
def interpreted() -> dict[str, dict]:
    scenarios = [load_scenario(c) for c in CASES.values()]
    res = probe_many(scenarios, stages=("build", "trace", "gpu-lower", "interpret"))
    return dict(zip(CASES, res, strict=True))


def _range(message: str) -> str | None:
    m = re.search(r"\[Access\(range=(.*?), permutation", message)
    return m.group(1) if m else None


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_agrees(name: str, interpreted: dict[str, dict]) -> None:
    r = interpreted[name]
    # what the interpreter raises; a GPU-only finding (gpu-run: pl.program_id, which the
    # GPU interpreter makes 0 in every block) is not the interpreter's to see
    d = first_error([x for x in check(load_scenario(CASES[name])) if x.stage != "gpu-run"])
    if r["stage"] is None:
        assert d is None, d.one_line()
        return
    assert r["stage"] == "interpret", r
    assert d is not None and d.code == r["code"] and d.stage == "interpret", (r, d)
    # JAX's message as the interpreter prints it: the same access range and buffer shape
    assert d.jax is not None
    assert _range(d.jax.message) == _range(r["message"]), (d.jax.message, r["message"])
    shape = re.search(r"buffer has shape (\(.*?\))", r["message"]).group(1)
    assert f"buffer has shape {shape}" in d.jax.message


def test_expected_codes() -> None:
    """The scenarios above do exercise both codes (guards the agreement test)."""
    codes = {
        n: getattr(first_error(check(load_scenario(c))), "code", None) for n, c in CASES.items()
    }
    assert codes["read"] == codes["knowledge-read"] == codes["partial"] == "OOB_READ"
    assert codes["write"] == codes["knowledge-write"] == "OOB_WRITE"
    assert codes["two-d"] == codes["int-read"] == codes["int-row"] == "OOB_READ"
    assert codes["int-write"] == "OOB_WRITE"
    assert codes["fits"] is None
    # program_id is 0 in every block under the GPU interpreter (it runs this fine); on a
    # GPU blocks 2 and 3 read past the end: the check says so, at the gpu-run stage
    d = first_error(check(load_scenario(CASES["pid-gpu-interp"])))
    assert (d.code, d.stage) == ("OOB_INDEX", "gpu-run") and "block b=2" in d.message, d


@pytest.mark.parametrize("name", ["read", "write", "two-d", "knowledge-read"])
def test_fix_sizes_grid_to_data(name: str) -> None:
    s = load_scenario(CASES[name])
    d = first_error(check(s))
    assert d is not None and d.fix is not None
    fixed = apply_fix(s, d.fix)
    assert first_error(check(fixed)) is None, [x.one_line() for x in check(fixed)]


def test_not_interpreted_is_oob_index() -> None:
    """Under the HLO interpreter nothing reports the slice (OOB_INDEX, mpmd-lab's own); a
    pid entry is the real block index there, so the pid case goes out of bounds too."""
    for name in ("read", "pid-gpu-interp"):
        sc = copy.deepcopy(CASES[name])
        sc["run"] = {"interpret": "hlo"}
        d = first_error(check(load_scenario(sc)))
        assert d is not None and d.code == "OOB_INDEX" and d.stage == "interpret", d
