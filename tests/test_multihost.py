"""Multi-controller JAX: a scenario as two local processes x 2 CPU devices each.

Every gallery scenario that ``run`` with the auto backend gives to JAX's CPU interpreter
runs as one process (the reference) and as two processes, through ``run --processes 2``
(``runtime.run(processes=2)``) and through the exported script launched twice with the
``MPMD_LAB_*`` variables: the same outputs, or the same error. No process is left behind
when the run times out, when one of the processes dies, or when the CLI is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from mpmd_lab import codegen, gallery, multihost, runtime, workers
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.validate import analyze

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("mpmd-lab")
CHILD = "_multihost_child"


def _interpreted() -> list[str]:
    """The gallery scenarios ``run --backend auto`` gives to JAX's CPU interpreter here."""
    names = []
    for n in gallery.names():
        s = gallery.load(n)
        if runtime.choose_backend("auto", analyze(s))[0] == "interpret":
            names.append(n)
    return names


@pytest.fixture(scope="module")
def runs():
    """name -> (one process, two processes x 2 CPU devices), both with the auto backend."""
    out = {}
    for n in _interpreted():
        s = gallery.load(n)
        one = runtime.run(s, "auto", timeout=180)
        two = runtime.run(s, "auto", timeout=180, processes=2, local_devices=2)
        out[n] = (one, two)
    return out


def _same(one: runtime.RunResult, two: runtime.RunResult) -> None:
    assert two.status == one.status, (one.summary(), two.summary())
    if one.ok:
        assert list(two.outputs) == list(one.outputs)
        for k, v in one.outputs.items():
            np.testing.assert_array_equal(two.outputs[k], v, err_msg=k)
        assert two.to_json()["outputs"] == one.to_json()["outputs"]
    else:
        assert (two.error.code, two.error.stage) == (one.error.code, one.error.stage)


def test_two_processes_give_the_single_process_answer(runs):
    ran = {
        n
        for n, (_, two) in runs.items()
        if two.error is None or two.error.code != "PROCESSES_UNSUPPORTED"
    }
    for n in ran:
        one, two = runs[n]
        _same(one, two)
        assert two.reason.startswith("2 processes x 2 CPU devices, in JAX's HLO interpreter")
        assert two.devices == one.devices
    # at least one valid multi-device kernel ran across the processes, with its outputs
    assert any(runs[n][1].ok and runs[n][1].devices > 1 for n in ran), sorted(runs)
    # every scenario refused is one a second process has nothing to do for: one device
    for n in set(runs) - ran:
        two = runs[n][1]
        assert gallery.load(n).device_mesh is None, n
        assert "runs on one device" in two.error.message and two.error.stage == "interpret"


def test_what_cannot_run_across_processes_is_refused_before_starting(runs):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    ring = gallery.load("ring-shift")
    r = runtime.run(ring, "auto", processes=2)
    assert r.error.code == "PROCESSES_UNSUPPORTED" and "HLO_INTERP_NO_DISCHARGE" in r.error.message
    assert "simulates it" in r.error.message
    three = runtime.run(gallery.load("peer-then-multicast-fixed"), "auto", processes=3)
    assert "cannot be split evenly over 3 processes" in three.error.message
    assert runtime.run(ring, "simulate", processes=2).error.code == "PROCESSES_UNSUPPORTED"
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_the_cli_runs_two_processes(runs, capsys):
    from mpmd_lab import cli

    name = "peer-then-multicast-fixed"
    assert cli.main(["run", name, "--processes", "2", "--local-devices", "2", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "ok" and j["reason"].startswith("2 processes x 2 CPU devices")
    assert j["outputs"] == runs[name][0].to_json()["outputs"]
    assert cli.main(["run", "two-block-copy", "--processes", "2"]) == 1
    assert "PROCESSES_UNSUPPORTED" in capsys.readouterr().out


def _launch(path: Path, processes: int, *args: str, env: dict[str, str] | None = None):
    """The exported file started once per process, as a cluster launcher starts it."""
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    base.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    base.update(env or {})
    port = multihost.free_port()
    procs = []
    for i in range(processes):
        extra = {}
        if processes > 1:
            extra = {
                "MPMD_LAB_COORDINATOR": f"127.0.0.1:{port}",
                "MPMD_LAB_NUM_PROCESSES": str(processes),
                "MPMD_LAB_PROCESS_ID": str(i),
            }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(path), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**base, **extra},
                cwd=path.parent,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=300)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            p.kill()
    return outs


def test_the_exported_script_runs_as_two_processes(runs, tmp_path):
    from mpmd_lab import cli

    ran = [
        n
        for n, (_, two) in runs.items()
        if two.error is None or two.error.code != "PROCESSES_UNSUPPORTED"
    ]
    for n in ran:
        one = runs[n][0]
        path = tmp_path / f"{n.replace('-', '_')}.py"
        assert cli.main(["export", n, "-o", str(path)]) == 0
        expect = tmp_path / f"{n}.json"
        expect.write_text(json.dumps(one.to_json()))
        (rc0, out0, err0), (rc1, out1, err1) = _launch(path, 2, "--json", "--expect", str(expect))
        if one.ok:
            assert (rc0, rc1) == (0, 0), (n, err0[-2000:], err1[-2000:])
            assert json.loads(out0.strip().splitlines()[-1]) == one.to_json()["outputs"], n
            assert "outputs equal the expected ones" in err0
            assert "{" not in out1  # process 0 prints the outputs; the others nothing
        else:  # the same error as JAX's in one process, from both
            assert rc0 != 0 and rc1 != 0, n
            assert one.error.jax.message.splitlines()[0][:60] in err0, (n, err0[-2000:])


def test_the_exported_script_refuses_on_a_cpu_what_the_interpreter_cannot_run(tmp_path, capsys):
    from mpmd_lab import cli

    path = tmp_path / "ring.py"
    assert cli.main(["export", "ring-shift", "-o", str(path)]) == 0
    note = capsys.readouterr().err
    assert "on a GPU the exported script runs the kernel" in note
    assert "mpmd-lab run ring-shift --backend simulate" in note
    [(rc, out, err)] = _launch(path, 1)
    assert rc == 2 and out == ""
    assert "cannot run this call (GPU_INTERP_UNSUPPORTED_TRANSFORM at call.programs[0]" in err
    assert "--backend simulate" in err and "Traceback" not in err
    # and across processes, where the file runs JAX's HLO interpreter
    codes = [e for _, _, e in _launch(path, 2)]
    assert all("hlo interpreter cannot run this call (HLO_INTERP_NO_DISCHARGE" in e for e in codes)
    # a scenario the interpreter runs exports no limit
    assert "CPU_LIMITS = {'gpu': None, 'hlo': None}" in codegen.generate(
        gallery.load("peer-then-multicast-fixed")
    )


def test_the_gpu_check_runs_across_hosts_as_a_cpu_rehearsal(tmp_path):
    """``python -m mpmd_lab.gpucheck --hosts --cpu`` launched twice, as on two hosts."""
    names = ["peer-then-multicast-fixed", "multicast-then-peer", "two-block-copy"]
    script = tmp_path / "check.py"
    script.write_text("import sys\nfrom mpmd_lab.gpucheck import main\nsys.exit(main())\n")
    (rc0, out0, err0), (rc1, out1, _) = _launch(script, 2, "--hosts", "--cpu", "--json", *names)
    assert (rc0, rc1) == (0, 0), err0[-2000:]
    report = json.loads(out0[out0.index("{") :])
    assert report["hosts"].startswith("2 processes x 2 cpu devices (a rehearsal")
    verdicts = {r["name"]: r["verdict"] for r in report["rows"]}
    assert verdicts == {
        "peer-then-multicast-fixed": "match",
        "multicast-then-peer": "match",
        "two-block-copy": "skipped",
    }
    assert "{" not in out1


# ---------------------------------------------------------------- no process left behind


def _long(stop: int = 2**31 - 1) -> Scenario:
    """Two devices adding their shard into the output ``stop`` x ``stop`` times in two
    nested fori_loops, a call JAX's HLO interpreter runs and never finishes (one loop of
    2**31 - 1 steps finished in 23 s here, so a 25 s timeout was a race)."""
    data = gallery.load("peer-then-multicast-fixed").to_dict()
    data["name"] = "long-multi"
    add = {"op": "add", "dst": "out", "lhs": "out", "rhs": "x_ref"}
    inner = {"op": "loop", "var": "j", "stop": stop, "via": "fori_loop", "body": [add]}
    loop = {"op": "loop", "var": "i", "stop": stop, "via": "fori_loop", "body": [inner]}
    data["call"]["programs"][0]["body"] = [loop]
    return load_scenario(data)


def _controllers(root: psutil.Process) -> list[psutil.Process]:
    out = []
    for k in root.children(recursive=True):
        try:
            if any(CHILD in part for part in k.cmdline()):
                out.append(k)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def _busy(root: psutil.Process, n: int = 2, within: float = 240) -> list[psutil.Process]:
    """The ``n`` controller processes, once each has spent 1.5 CPU seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        procs = _controllers(root)
        try:
            if len(procs) == n and all(sum(p.cpu_times()[:2]) > 1.5 for p in procs):
                return procs
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.1)
    raise AssertionError("the processes never got going")


def _gone(procs: list[psutil.Process], within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    alive = list(procs)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.05)
    return [p.pid for p in alive]


@pytest.fixture(scope="module")
def long_analysis():
    s = _long()
    return s, analyze(s)


def test_a_run_that_times_out_leaves_no_process(long_analysis):
    s, a = long_analysis
    seen: list[psutil.Process] = []
    me = psutil.Process()
    t = threading.Thread(target=lambda: seen.extend(_busy(me)), daemon=True)
    t.start()
    r = runtime.run(s, "auto", processes=2, timeout=25, analysis=a)
    t.join(1)
    assert r.error.code == "RUN_TIMEOUT" and "did not finish within 25 s" in r.error.message
    assert r.error.stage == "interpret"  # where process 0 was
    assert len(seen) == 2 and _gone(seen) == []
    assert _controllers(me) == []


def test_when_one_process_dies_the_others_are_stopped(long_analysis):
    s, a = long_analysis
    me = psutil.Process()
    out: list[runtime.RunResult] = []
    t = threading.Thread(target=lambda: out.append(runtime.run(s, processes=2, analysis=a)))
    t.start()
    procs = _busy(me)
    procs[-1].send_signal(signal.SIGKILL)
    t.join(60)
    [r] = out
    assert r.error.code == "RUN_CRASHED" and "died (signal 9)" in r.error.message
    assert _gone(procs) == [] and _controllers(me) == []


def test_cancel_stops_every_process(long_analysis):
    s, a = long_analysis
    me = psutil.Process()
    out: list[runtime.RunResult] = []
    t = threading.Thread(target=lambda: out.append(runtime.run(s, processes=2, analysis=a)))
    t.start()
    procs = _busy(me)
    assert workers.cancel()
    t.join(60)
    assert out[0].error.code == "RUN_CANCELLED"
    assert _gone(procs) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_cli_run_leaves_no_process_and_no_temp_file(tmp_path, sig):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    path = tmp_path / "long.json"
    path.write_text(_long().to_json())
    proc = subprocess.Popen(
        [str(EXE), "run", str(path), "--processes", "2", "--timeout", "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=ROOT,
    )
    try:
        procs = _busy(psutil.Process(proc.pid))
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _gone(procs) == [], "a controller process outlived the CLI"
        assert sorted(os.listdir(tmp)) == [], "temp files left behind"
    finally:
        proc.kill()
