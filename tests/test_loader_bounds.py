"""The loader is bounded by its input: duplicate keys are named, pseudo-files and other
things that block are refused before they are opened, and rejecting an oversized file
costs about what reading and parsing it once costs (unknown fields are never walked)."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import ScenarioError, load_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
BASE = gallery.load("ring-shift").to_dict()


def _problems(source) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(source)
    return info.value.problems


def test_duplicate_keys_are_refused_with_their_field_path():
    text = json.dumps(BASE)
    twice = text.replace('"shape": [256], "dtype": "float32", "init": "iota"', "X", 1)
    assert twice != text
    twice = twice.replace(
        "X", '"shape": [256], "dtype": "float32", "shape": [8], "init": "iota", "init": "ones"'
    )
    body = '"call": {'
    twice = twice.replace(body, '"name": "again", ' + body, 1)
    paths = {p: m for p, m in _problems(twice)}
    assert {"buffers.x.shape", "buffers.x.init", "name"} <= set(paths), paths
    assert "twice" in paths["buffers.x.shape"]
    in_body = json.dumps(BASE).replace('"op": "copy"', '"op": "copy", "op": "copy"')
    assert [p for p, _ in _problems(in_body)] == ["call.programs[0].body[1].op"]


def test_unknown_fields_and_other_problems_are_reported_together():
    data = copy.deepcopy(BASE)
    data["junk"] = [1, 2, 3]
    data["call"]["programs"][0]["bogus"] = {"deep": [[1]] * 5}
    data["buffers"]["x"]["shape"] = [-1]
    before = copy.deepcopy(data)
    problems = dict(_problems(data))
    assert problems["junk"] == "unknown field"
    assert problems["call.programs[0].bogus"] == "unknown field"
    assert "buffers.x.shape[0]" in problems
    assert data == before  # the caller's dict is not pruned in place


@pytest.mark.parametrize(
    "path",
    ["/proc/kmsg", "/proc/self/status", "/proc/self/mem", *sorted(glob.glob("/sys/kernel/*"))[:1]],
)
def test_pseudo_files_are_refused_before_they_are_opened(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    t0 = time.perf_counter()
    problems = _problems(path)
    assert time.perf_counter() - t0 < 2
    path_named, why = problems[0]
    assert path_named == "" and ("regular file" in why or "pseudo-file" in why), why


def test_check_on_proc_kmsg_and_a_fifo_never_hangs(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    exe = Path(sys.executable).with_name("mpmd-lab")
    for path in ("/proc/kmsg", str(fifo)):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(exe), "check", path], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert proc.returncode == 2 and path in proc.stderr, proc.stderr
        assert time.perf_counter() - t0 < 60


def _junk(n_lists: int) -> list:
    return [[[1, 2, 3, 4, 5, 6, 7, 8]] * 1000] * n_lists  # each list short: under MAX_ITEMS


@pytest.mark.parametrize("where", ["top", "nested"])
def test_an_oversized_file_is_rejected_in_about_one_parse(tmp_path, where):
    data = copy.deepcopy(BASE)
    if where == "top":
        data["junk"] = _junk(1500)
    else:
        data["call"]["programs"][0]["mesh"]["junk"] = _junk(1500)
    path = tmp_path / "big.json"
    text = json.dumps(data, separators=(",", ":"))
    path.write_text(text)
    assert len(text) > 25 * 2**20
    t0 = time.perf_counter()
    json.loads(path.read_text())
    once = time.perf_counter() - t0
    t0 = time.perf_counter()
    problems = _problems(path)
    took = time.perf_counter() - t0
    field = "junk" if where == "top" else "call.programs[0].mesh.junk"
    assert problems == [(field, "unknown field")]
    # before: every one of the 12 M numbers was walked and handed to pydantic (4x a parse)
    assert took < 2 * once + 2, f"rejected in {took:.1f} s; one parse takes {once:.1f} s"
