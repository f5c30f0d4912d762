"""Workers die with their parent: a ``mpmd-lab run`` killed by SIGKILL, SIGTERM or
``timeout`` (or a notebook kernel killed mid-run) leaves no JAX worker running with
ppid 1 and no log file in the temp folder.

The kernel is real and long: a copy over thousands of blocks in JAX's GPU interpreter
(about 10 ms a block), so the worker is busy in the kernel when its parent goes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from mpmd_lab import gallery

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("mpmd-lab")


def _long_copy(tmp_path: Path, blocks: int = 32768) -> Path:
    data = gallery.load("two-block-copy").to_dict()
    data["name"] = "long-copy"
    data["buffers"]["x"]["shape"] = [blocks * 128]
    data["call"]["outputs"]["out"]["shape"] = [blocks * 128]
    data["call"]["programs"][0]["mesh"]["grid"] = {"b": blocks}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(data))
    return path


def _workers(root: psutil.Process) -> list[psutil.Process]:
    try:
        kids = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if any("_probe_child" in part for part in k.cmdline()):
                out.append(k)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def _worker_cpu(procs: list[psutil.Process]) -> float:
    """CPU seconds of the workers among ``procs``: forked ones (children of the zygote)
    and ones started as their own process (``--direct``, as on a GPU)."""
    pids = {p.pid for p in procs}
    total = 0.0
    for p in procs:
        try:
            if p.ppid() in pids or "--direct" in p.cmdline():
                total += sum(p.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _wait_for_busy_worker(
    root: psutil.Process, more_than: float = 1.0, within: float = 240
) -> list[psutil.Process]:
    """The zygote and its worker, once the worker has spent ``more_than`` CPU seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        procs = _workers(root)
        if procs and _worker_cpu(procs) > more_than:
            return procs
        time.sleep(0.1)
    raise AssertionError("the JAX worker never got going")


def _all_gone(procs: list[psutil.Process], within: float = 5.0) -> list[int]:
    """Pids still running after ``within`` seconds (a zombie has ended)."""
    deadline = time.monotonic() + within
    alive = list(procs)
    while alive and time.monotonic() < deadline:
        still = []
        for p in alive:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    still.append(p)
            except psutil.NoSuchProcess:
                pass
        alive = still
        time.sleep(0.05)
    return [p.pid for p in alive]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    tmp.mkdir()
    return {**os.environ, "TMPDIR": str(tmp), "MPLBACKEND": "Agg", **extra}


@pytest.mark.parametrize(
    "sig,fork",
    [(signal.SIGKILL, "1"), (signal.SIGTERM, "1"), (signal.SIGKILL, "0")],
    ids=["SIGKILL", "SIGTERM", "SIGKILL-own-process-worker"],
)
def test_a_killed_cli_run_leaves_no_worker_and_no_temp_file(tmp_path, sig, fork):
    """``fork="0"``: the worker is a process of its own, started the way a GPU worker is."""
    tmp = tmp_path / "tmp"
    proc = subprocess.Popen(
        [str(EXE), "run", str(_long_copy(tmp_path)), "--backend", "interpret", "--timeout", "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(tmp, MPMD_LAB_FORK=fork),
        cwd=ROOT,
    )
    try:
        procs = _wait_for_busy_worker(psutil.Process(proc.pid))
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _all_gone(procs) == [], "a JAX worker outlived the CLI"
        assert sorted(os.listdir(tmp)) == [], "temp files left behind"
    finally:
        proc.kill()


def test_timeout_on_a_cli_run_leaves_no_worker(tmp_path):
    tmp = tmp_path / "tmp"
    long = _long_copy(tmp_path)
    proc = subprocess.Popen(
        [
            "timeout",
            "600",
            str(EXE),
            "run",
            str(long),
            "--backend",
            "interpret",
            "--timeout",
            "600",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(tmp),
        cwd=ROOT,
    )
    try:
        seen = _wait_for_busy_worker(psutil.Process(proc.pid))
        # time runs out now, mid-run: SIGALRM is what `timeout`'s own timer delivers (a
        # fixed 45 s was beaten by a fast machine finishing the run first)
        os.kill(proc.pid, signal.SIGALRM)
        assert proc.wait(timeout=120) == 124  # timeout's "it ran out of time"
        assert _all_gone(seen) == [], "a JAX worker outlived `timeout`"
        assert sorted(os.listdir(tmp)) == []
    finally:
        proc.kill()


KERNEL = r"""
import sys, threading, json
from mpmd_lab import gallery, runtime
from mpmd_lab.scenario import load_scenario

def in_thread(fn):  # how the Lab runs: from a short-lived thread
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start(); t.join()
    return out[0]

first = in_thread(lambda: runtime.run(gallery.load("two-block-copy"), "interpret", timeout=300))
# the thread that started the worker has ended; the worker must still be there, warm
again = runtime.run(gallery.load("two-block-copy"), "interpret", timeout=300)
print(json.dumps([first.status, again.status]), flush=True)
long = load_scenario(sys.argv[1])
threading.Thread(target=lambda: runtime.run(long, "interpret", timeout=600)).start()
"""


def test_a_killed_kernel_that_ran_from_threads_leaves_no_worker(tmp_path):
    tmp = tmp_path / "tmp"
    proc = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(_long_copy(tmp_path))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp),
        cwd=ROOT,
    )
    try:
        line = proc.stdout.readline()
        assert json.loads(line) == ["ok", "ok"], (
            line,
            proc.stderr.read()[-3000:] if not line else "",
        )
        root = psutil.Process(proc.pid)
        warm = _workers(root)
        procs = _wait_for_busy_worker(root, more_than=_worker_cpu(warm) + 2.0)
        assert {p.pid for p in procs} == {p.pid for p in warm}, "the warm worker was replaced"
        proc.kill()
        proc.wait(timeout=30)
        assert _all_gone(procs) == [], "a JAX worker outlived the kernel"
        assert sorted(os.listdir(tmp)) == []
    finally:
        proc.kill()
