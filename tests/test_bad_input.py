"""Malformed input: every FILE-taking command exits 2 naming the file and the field.

Never a traceback, a hang or a memory blow-up. The corpus is ``tests/corpus/bad``
(regenerate with ``tests/corpus/make_bad.py``); generated cases (a million-step
transform stack, a file past the size limit, a directory, a FIFO, a missing file)
are made here. The whole corpus runs through ``mpmd_lab.cli.main`` in one child
process per command (``tests/cli_driver.py``); the file-system cases also run
through the installed ``mpmd-lab`` executable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mpmd_lab.scenario import MAX_FILE_BYTES, ScenarioError, load_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "bad"
EXPECTED = dict(
    line.split("\t") for line in (CORPUS / "expected.tsv").read_text("utf-8").splitlines()
)
BASE = json.loads((ROOT / "toolkit" / "gallery" / "ring-shift.json").read_text())

#: every command that takes FILE, as the argv after the file (``{out}``: an output path)
COMMANDS = {
    "check": ["check", "{file}"],
    "check-json": ["check", "{file}", "--json"],
    "check-deep": ["check", "{file}", "--deep", "--timeout", "30"],
    "run": ["run", "{file}", "--timeout", "30"],
    "run-json": ["run", "{file}", "--json", "--timeout", "30"],
    "graph": ["graph", "{file}", "-o", "{out}/g.png"],
    "graph-text": ["graph", "{file}", "--text"],
    "export": ["export", "{file}"],
    "export-o": ["export", "{file}", "-o", "{out}/x.py"],
}


def argv_for(command: str, file: str | Path, out: Path) -> list[str]:
    return [a.format(file=file, out=out) for a in COMMANDS[command]]


def assert_bad_input(rc: object, stderr: str, file: str | Path, field: str | None) -> None:
    """Exit 2, no traceback, and a message that names the file (and the field)."""
    assert "Traceback" not in stderr, stderr
    assert rc == 2, f"exit {rc}, stderr: {stderr[-2000:]}"
    assert str(file) in stderr, stderr
    if field is not None:
        shown = {line.split(": ")[1] for line in stderr.splitlines() if ": " in line}
        assert field in shown, f"{field!r} not among the fields named: {sorted(shown)}"


def drive(argvs: list[list[str]], timeout: float = 240) -> list[dict]:
    """Run command lines through ``mpmd_lab.cli.main`` in one child process."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "cli_driver.py")],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def mpmd_lab(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mpmd-lab")
    return subprocess.run(
        [str(exe), *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


# ---------------------------------------------------------------- the corpus


def test_corpus_is_listed_and_regenerable():
    files = {p.name for p in CORPUS.glob("*.json")}
    assert files == set(EXPECTED), "run tests/corpus/make_bad.py and commit its output"
    assert len(files) >= 80


def test_corpus_each_file_is_not_a_scenario_and_names_its_field():
    for name, field in EXPECTED.items():
        with pytest.raises(ScenarioError) as info:
            load_scenario(CORPUS / name)
        paths = [p or "<top>" for p, _ in info.value.problems]
        assert field in paths, (name, info.value.problems)


@pytest.fixture(scope="module")
def corpus_results(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    """The whole corpus through every command, in one child process."""
    out = tmp_path_factory.mktemp("out")
    files = sorted(EXPECTED)
    argvs = [argv_for(c, CORPUS / f, out) for c in COMMANDS for f in files]
    results = drive(argvs)
    assert len(results) == len(argvs)
    n = len(files)
    return out, {c: results[i * n : (i + 1) * n] for i, c in enumerate(COMMANDS)}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_corpus_through_every_command(command, corpus_results):
    out, by_command = corpus_results
    files = sorted(EXPECTED)
    for f, r in zip(files, by_command[command], strict=True):
        assert r["escaped"] is None, f"{f}: {r['escaped']}"
        assert r["seconds"] < 30, f"{f}: {r['seconds']:.1f} s"
        assert_bad_input(r["rc"], r["stderr"], CORPUS / f, EXPECTED[f])
        assert r["stdout_head"] == "", f"{f}: wrote to stdout: {r['stdout_head'][:200]}"
    assert not any(out.iterdir()), "a bad input left an output file behind"


# ---------------------------------------------------------------- generated cases


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Cases too big or too odd to commit: name -> (path, field named)."""
    d = tmp_path_factory.mktemp("generated")
    cases: dict[str, tuple[Path, str]] = {}

    million = json.loads(json.dumps(BASE))
    million["call"]["programs"][0]["body"][0]["transforms"] = [{"op": "at", "index": []}] * 10**6
    (d / "million.json").write_text(json.dumps(million, separators=(",", ":")))
    cases["million-step-stack"] = (d / "million.json", "call.programs[0].body[0].transforms")

    huge = d / "huge.json"
    with huge.open("wb") as f:  # sparse: past the size limit without using the disk
        f.write(b"{")
        f.truncate(MAX_FILE_BYTES + 1)
    cases["over-size-limit"] = (huge, "<top>")

    wide = json.loads(json.dumps(BASE))
    wide["call"]["args"] = [
        {"buffer": "x", "param": f"p{i}", "transforms": [{}]} for i in range(9999)
    ]
    (d / "many-problems.json").write_text(json.dumps(wide))
    cases["thousands-of-problems"] = (d / "many-problems.json", "call.args[0].transforms[0]")

    init = json.loads(json.dumps(BASE))
    init["buffers"]["x"].update(shape=[4_000_000], init=[0] * 4_000_000)
    (d / "init.json").write_text(json.dumps(init, separators=(",", ":")))
    cases["explicit-init-of-4M-values"] = (d / "init.json", "buffers.x.init")

    (d / "a-directory.json").mkdir()
    cases["directory"] = (d / "a-directory.json", "<top>")
    cases["missing"] = (d / "no-such-file.json", "<top>")
    cases["missing-dir"] = (d / "no" / "such" / "dir.json", "<top>")
    os.mkfifo(d / "fifo.json")  # opening it for reading would block forever
    cases["fifo"] = (d / "fifo.json", "<top>")
    (d / "loop.json").symlink_to(d / "loop.json")
    cases["symlink-loop"] = (d / "loop.json", "<top>")
    cases["dev-zero"] = (Path("/dev/zero"), "<top>")
    (d / "{brace}.json").write_text("[]")  # a file whose name looks like JSON text
    cases["json-looking-name"] = (d / "{brace}.json", "<top>")
    return cases


def test_generated_cases_through_every_command(generated, tmp_path):
    slow = {"million-step-stack"}  # a 24 MB file: parsing alone takes seconds
    keys = [(c, g) for c in COMMANDS for g in generated if g not in slow or c == "export"]
    results = drive([argv_for(c, generated[g][0], tmp_path) for c, g in keys])
    for (c, g), r in zip(keys, results, strict=True):
        path, field = generated[g]
        assert r["escaped"] is None, f"{c} {g}: {r['escaped']}"
        assert r["seconds"] < 30, f"{c} {g}: {r['seconds']:.1f} s"
        assert_bad_input(r["rc"], r["stderr"], path, field)
        assert len(r["stderr"].splitlines()) <= 60, f"{c} {g}: {len(r['stderr'])} chars"


def test_installed_command_on_odd_files(generated, tmp_path):
    """The real executable (no in-process shortcut): each command on a different oddity."""
    corpus = {f: (CORPUS / f, EXPECTED[f]) for f in ["truncated.json", "inject-param.json"]}
    cases = {**generated, **corpus}
    pairs = [
        ("check", "fifo"),
        ("check-json", "truncated.json"),
        ("check-deep", "directory"),
        ("run", "million-step-stack"),
        ("run-json", "over-size-limit"),
        ("graph", "missing"),
        ("graph-text", "symlink-loop"),
        ("export", "inject-param.json"),
        ("export-o", "dev-zero"),
    ]
    assert {c for c, _ in pairs} == set(COMMANDS)
    jobs = [(argv_for(c, cases[g][0], tmp_path), *cases[g]) for c, g in pairs]
    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = list(pool.map(lambda job: mpmd_lab(job[0], timeout=120), jobs))
    for (argv, path, field), proc in zip(jobs, procs, strict=True):
        assert proc.stdout == "", (argv, proc.stdout[:300])
        assert_bad_input(proc.returncode, proc.stderr, path, field)


def test_odd_keys_are_quoted_in_field_paths():
    data = json.loads(json.dumps(BASE))
    data["buffers"]["\x1b[2J\nx"] = {"shape": [-1], "dtype": "float32"}
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    text = str(info.value)
    assert "\x1b" not in text and "\nx" not in text
    assert [p for p, _ in info.value.problems] == ["buffers['\\x1b[2J\\nx'].shape[0]"]


def test_a_bom_and_a_json_looking_file_name_still_load(tmp_path):
    text = json.dumps(BASE)
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_scenario(tmp_path / "bom.json").name == "ring-shift"
    (tmp_path / "{x}.json").write_text(text)
    assert load_scenario(str(tmp_path / "{x}.json")).name == "ring-shift"


def test_timeouts_that_would_hang_are_usage_errors(tmp_path):
    argvs = [
        [*cmd, "--timeout", t]
        for cmd in (["check", "dup-ref", "--deep"], ["run", "dup-ref"])
        for t in ("inf", "nan", "-1", "0", "soon")
    ]
    for argv, r in zip(argvs, drive(argvs), strict=True):
        assert r["escaped"] is None, (argv, r["escaped"])
        assert r["rc"] == 2 and "--timeout" in r["stderr"], (argv, r)
