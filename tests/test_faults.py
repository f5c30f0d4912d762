"""Faults: a hung run is killed at its timeout, a crashed child is reported, the run
after either works, the Lab keeps its scenario through all of them, and saving is
atomic (a failed write leaves the old file whole and no temp file behind).

Hangs and crashes are real: the JAX worker process is stopped (SIGSTOP: a deadlock as
the OS sees it) or killed (SIGSEGV / SIGKILL) while it runs the kernel. Failed writes
are real too: a child process with a file-size limit (RLIMIT_FSIZE) gets EFBIG.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from mpmd_lab import gallery, runtime, workers
from mpmd_lab.scenario import load_scenario, save_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
GOOD = "two-block-copy"  # 1 device, interprets in well under a second once warm
IOTA256 = np.arange(256, dtype=np.float32)


def _stop_warm_worker() -> object:
    """The warm worker, stopped (SIGSTOP: a deadlock as the OS sees it). A request sent
    to it now gets no answer, however little the call costs: a warm worker answers a
    call it built before in ~10 ms, which a signal sent once the kernel starts can miss
    on a loaded machine (the run then ends ok, and the worker dies idle)."""
    w = workers._POOL[(1, "cpu")]
    assert w.alive()
    os.kill(_pid(w), signal.SIGSTOP)
    return w


def _kill_in_flight(w: object, sig: int) -> threading.Thread:
    """Once a request is in flight to the stopped worker ``w``, ``sig`` kills it (then
    SIGCONT delivers the signal): it dies holding the request, whatever the call costs."""
    n = w.requests

    def kill() -> None:
        deadline = time.monotonic() + 120
        while w.requests == n and time.monotonic() < deadline:
            time.sleep(0.005)
        for s in (sig, signal.SIGCONT):
            try:
                os.kill(_pid(w), s)
            except ProcessLookupError:
                pass

    t = threading.Thread(target=kill, name="test-kill-in-flight", daemon=True)
    t.start()
    return t


def _pid(worker: object) -> int:
    """The JAX worker's process id (a forked worker has ``pid``; a spawned one ``proc``)."""
    pid = getattr(worker, "pid", None)
    return pid if isinstance(pid, int) else worker.proc.pid


def _gone(pid: int, within: float = 10) -> bool:
    try:
        p = psutil.Process(pid)
        p.wait(timeout=within)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return p.status() == psutil.STATUS_ZOMBIE
    return True


def test_hang_is_killed_at_its_timeout_then_a_crash_is_reported_then_runs_work():
    good = gallery.load(GOOD)
    first = runtime.run(good, "interpret", timeout=300)  # warm: JAX imported in the worker
    assert first.ok, first.summary()

    # a hang: the worker stops answering with the request in flight; the run must end
    # at its timeout
    stopped = _stop_warm_worker()
    t0 = time.perf_counter()
    hung = runtime.run(good, "interpret", timeout=3)
    took = time.perf_counter() - t0
    assert stopped.requests > 0 and stopped.last_stage is not None  # it had served runs
    assert hung.status == "error" and hung.error.code == "RUN_TIMEOUT", hung.to_json()
    assert 3 <= took < 3 + 20, f"killed after {took:.1f} s, the timeout was 3 s"
    assert _gone(_pid(stopped)), "the hung worker is still alive"

    after_hang = runtime.run(good, "interpret", timeout=300)
    assert after_hang.ok, after_hang.summary()
    np.testing.assert_array_equal(after_hang.outputs["out"], first.outputs["out"])

    # a crash: the worker segfaults holding the request
    crashing = _stop_warm_worker()
    killer = _kill_in_flight(crashing, signal.SIGSEGV)
    crashed = runtime.run(good, "interpret", timeout=300)
    killer.join(10)
    assert crashed.status == "error" and crashed.error.code == "RUN_CRASHED", crashed.to_json()
    assert "SIGSEGV" in crashed.error.error_json()["message"], crashed.error
    assert "Traceback" not in crashed.summary()
    assert _gone(_pid(crashing))

    after_crash = runtime.run(good, "interpret", timeout=300)
    assert after_crash.ok, after_crash.summary()
    np.testing.assert_array_equal(after_crash.outputs["out"], first.outputs["out"])
    np.testing.assert_array_equal(first.outputs["out"], IOTA256)


def _descendants(proc: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_cli_run_reports_a_killed_worker_and_leaves_no_process(tmp_path):
    """``mpmd-lab run`` as a user runs it; its JAX worker is killed from outside."""
    exe = Path(sys.executable).with_name("mpmd-lab")
    proc = subprocess.Popen(
        [str(exe), "run", GOOD, "--backend", "interpret", "--json", "--timeout", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        kids = [p for p in _descendants(proc) if "_probe_child" in " ".join(p.cmdline())]
        if kids:
            for k in kids:
                seen.add(k.pid)
                k.kill()
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    assert seen, "the worker never started"
    assert "Traceback" not in err, err
    assert proc.returncode == 1, (proc.returncode, out, err)
    result = json.loads(out)
    assert result["status"] == "error" and result["error"]["code"] == "RUN_CRASHED", result
    assert all(_gone(pid) for pid in seen)


# ---------------------------------------------------------------- atomic saves

LIMITED_SAVE = r"""
import resource, signal, sys, json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not death
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from mpmd_lab import gallery
from mpmd_lab.scenario import save_scenario
s = gallery.load("ring-shift")
s = s.model_copy(update={"description": "x" * 100_000})
try:
    save_scenario(s, sys.argv[1])
except OSError as e:
    print(json.dumps({"raised": type(e).__name__, "errno": e.errno}))
else:
    print(json.dumps({"raised": None}))
"""


def _limit_file_size(limit: int):
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited across exec
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


def test_save_scenario_that_fails_mid_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "s.json"
    save_scenario(gallery.load("dup-ref"), target)
    before = target.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-c", LIMITED_SAVE, str(target), "20000"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["raised"] is not None, "the write did not fail"
    assert target.read_bytes() == before
    assert load_scenario(target).name == "dup-ref"
    assert _leftovers(tmp_path, {"s.json"}) == []


def test_save_scenario_that_cannot_serialise_keeps_the_old_file(tmp_path):
    target = tmp_path / "s.json"
    save_scenario(gallery.load("dup-ref"), target)
    before = target.read_bytes()
    broken = gallery.load("ring-shift").model_copy(update={"description": object()})
    with pytest.raises(Exception):  # noqa: B017 - whatever pydantic raises for it
        save_scenario(broken, target)
    assert target.read_bytes() == before
    assert _leftovers(tmp_path, {"s.json"}) == []


@pytest.mark.parametrize(
    "argv,name",
    [
        (["export", "ring-shift", "-o", "{out}"], "out.py"),
        (["check", "dup-ref", "--fix", "-o", "{out}"], "out.json"),
        (["graph", "ring-shift", "-o", "{out}"], "out.png"),
    ],
)
def test_cli_writes_that_fail_keep_the_old_file(tmp_path, argv, name):
    out = tmp_path / name
    out.write_bytes(b"old contents\n")
    exe = Path(sys.executable).with_name("mpmd-lab")
    proc = subprocess.run(
        [str(exe), *[a.format(out=out) for a in argv]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        preexec_fn=_limit_file_size(600),  # any real output is bigger than this
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert str(out) in proc.stderr or "File too large" in proc.stderr, proc.stderr
    assert out.read_bytes() == b"old contents\n"
    assert _leftovers(tmp_path, {name}) == []


# ---------------------------------------------------------------- the Lab


def test_lab_keeps_its_scenario_through_hang_crash_bad_load_and_failed_save(tmp_path):
    from mpmd_lab import widgets

    lab = widgets.Lab(GOOD, background=True, graph=False)
    lab.runner.backend.value = "interpret"
    saved = tmp_path / "mine.json"
    assert lab.state.save(saved).ok
    assert lab.state.edit(("replace", "description", "my edits")).ok
    mine = lab.state.scenario.to_dict()

    def run_with(sig: int | None, timeout: int = 300) -> object:
        """A Run from the panel; ``sig``: its worker stops answering (SIGSTOP) or dies
        (SIGKILL) with the request in flight."""
        lab.runner.timeout.value = timeout
        killer = None
        if sig is not None:
            w = workers._POOL.get((1, "cpu"))
            if w is None or not w.alive():  # a warm worker to stop (earlier tests kill them)
                assert runtime.run(gallery.load(GOOD), "interpret").ok
            w = _stop_warm_worker()
            if sig != signal.SIGSTOP:
                killer = _kill_in_flight(w, sig)
        lab.runner.run()
        assert lab.runner.done.wait(300), "the run panel is stuck"
        if killer is not None:
            killer.join(10)
        return lab.runner.outcome

    hung = run_with(signal.SIGSTOP, timeout=5)
    assert hung.status == "error" and hung.error.code == "RUN_TIMEOUT", hung
    assert lab.state.scenario.to_dict() == mine
    crashed = run_with(signal.SIGKILL)
    assert crashed.status == "error" and crashed.error.code == "RUN_CRASHED", crashed
    assert lab.state.scenario.to_dict() == mine

    assert not lab.state.load(str(ROOT / "tests/corpus/bad/truncated.json")).ok
    assert not lab.state.save(tmp_path / "no" / "such" / "dir.json").ok
    assert not lab.state.save(tmp_path).ok  # a directory
    assert lab.state.scenario.to_dict() == mine
    assert load_scenario(saved).description != "my edits"  # the file is still the old one

    ok = run_with(None)
    assert ok.status == "ok", ok
    np.testing.assert_array_equal(np.asarray(ok.outputs["out"]), IOTA256)
    assert lab.state.can_undo and lab.state.undo()
    assert lab.state.scenario.description != "my edits"


def test_threads_left_behind_are_none():
    """No run leaves a thread of ours running (the panel's worker threads end)."""

    def ours() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("mpmd-lab")]

    deadline = time.monotonic() + 30
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ours() == []


def test_a_scenario_too_big_for_this_machine_is_refused_not_attempted(tmp_path):
    """8 GiB a device on 8 devices is a scenario (a GPU holds it, JAX lowers it), but no
    CPU run may try to build it: run and check --deep report their limit at once, no
    memory blow-up."""
    data = gallery.load("ring-shift").to_dict()
    data["device_mesh"] = {"dev": 8}
    data["buffers"]["x"]["shape"] = [2**29, 4]
    data["call"]["outputs"]["out"]["shape"] = [2**29, 4]
    big = tmp_path / "big.json"
    big.write_text(json.dumps(data))
    exe = Path(sys.executable).with_name("mpmd-lab")
    for argv in (["run", str(big), "--json"], ["check", str(big), "--deep", "--json"]):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(exe), *argv], capture_output=True, text=True, timeout=300, cwd=ROOT
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == 1, (argv, proc.returncode, proc.stderr[-2000:])
        # run (auto: no CPU interpreter runs remote_ref, so the simulator is asked) and
        # check --deep each refuse it with their own limit's code
        assert "INTERP_LIMIT" in proc.stdout or "SIM_TOO_LARGE" in proc.stdout, proc.stdout[-2000:]
        assert time.perf_counter() - t0 < 120
    many = gallery.load("ring-shift").to_dict()
    many["device_mesh"] = {"dev": 4096}
    r = runtime.run(load_scenario(many), "interpret", timeout=60)
    assert r.status == "error" and r.error.code == "INTERP_LIMIT", r.to_json()
