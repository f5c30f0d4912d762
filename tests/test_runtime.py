"""mpmd_lab.runtime against real JAX: the gallery, numpy references, recovery, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpmd_lab import gallery, probe, runtime, workers
from mpmd_lab.codegen import generate
from mpmd_lab.scenario import load_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

IOTA256 = np.arange(256, dtype=np.float32)

#: Gallery scenario -> the code JAX 0.12 fails with, and at which stage.
EXPECTED_ERRORS = {
    "bitcast-view": ("GPU_WG_TRANSFORMS", "gpu-lower"),
    # lowers for the GPU; the CPU interpreter cannot run a cluster view
    "cluster-exchange": ("GPU_INTERP_UNSUPPORTED_TRANSFORM", "interpret"),
    "dup-ref": ("MPMD_DUP_REF", "trace"),
    "multicast-2d": ("GPU_INTERP_MULTICAST", "interpret"),
    "multicast-then-peer": ("REF_MULTICAST_TO_PEER", "trace"),
    "peer-then-multicast": ("REF_PEER_TO_MULTICAST", "trace"),
    "reshape-view": ("GPU_INTERP_UNSUPPORTED_TRANSFORM", "interpret"),
    "ring-shift": ("GPU_INTERP_UNSUPPORTED_TRANSFORM", "interpret"),
    "transpose-view": ("GPU_VERIFICATION", "gpu-lower"),
    "two-block-race": ("RACE_DETECTED", "interpret"),
}

#: Gallery scenario -> its outputs, computed here with numpy.
EXPECTED_OUTPUTS = {
    "two-block-copy": {"out": IOTA256},
    "dup-ref-fixed": {"out": 2 * IOTA256, "acc": IOTA256},
    # two devices, 128 elements each: each device copies its own shard
    "peer-then-multicast-fixed": {"out": IOTA256},
}


@pytest.fixture(scope="module")
def gallery_runs():
    return {n: runtime.run(gallery.load(n), "interpret", timeout=180) for n in gallery.names()}


def test_gallery_errors_have_expected_codes(gallery_runs):
    for name, (code, stage) in EXPECTED_ERRORS.items():
        r = gallery_runs[name]
        assert r.status == "error", name
        assert (r.error.code, r.error.stage) == (code, stage), (name, r.error)
        assert r.outputs == {}
        j = r.to_json()
        assert j["error"]["type"] and j["error"]["message"] and j["outputs"] == {}


def test_summary_shows_the_error_inside_a_jax_runtime_error(gallery_runs):
    r = gallery_runs["ring-shift"]
    assert r.error.error_json()["type"] == "JaxRuntimeError"  # the exact type and message are kept
    assert "Traceback" in r.error.error_json()["message"]
    # the summary and the diagnostic show the error the interpreter raised inside it
    assert "ValueError: Unsupported transform: PeerMemRef" in r.summary()
    assert r.diagnostic().message.startswith("ValueError: Unsupported transform: PeerMemRef")
    assert r.diagnostic().jax.message == r.error.error_json()["message"]


def test_gallery_outputs_match_numpy(gallery_runs):
    for name, expected in EXPECTED_OUTPUTS.items():
        r = gallery_runs[name]
        assert r.status == "ok", (name, r.error)
        assert list(r.outputs) == list(expected), name  # declared order
        for k, v in expected.items():
            np.testing.assert_array_equal(r.outputs[k], v, err_msg=f"{name}.{k}")


def test_every_gallery_scenario_gives_a_known_answer(gallery_runs):
    for name, r in gallery_runs.items():
        assert r.backend == "interpret"
        assert r.devices == probe.devices_of(gallery.load(name))
        if r.status == "error":
            assert r.error.code not in ("JAX_UNKNOWN", "RUN_CRASHED", "RUN_TIMEOUT"), name
            assert r.diagnostic().code == r.error.code
        json.dumps(r.to_json())  # JSON-ready
        assert name in r.summary()


def test_contract_shape(gallery_runs):
    j = gallery_runs["two-block-copy"].to_json()
    assert set(j) == {
        "status",
        "backend",
        "reason",
        "devices",
        "error",
        "outputs",
        "seconds",
        "startup_seconds",
        "wall_seconds",
        "cached",
        "check_seconds",
    }  # docs/SCENARIO.md, run --json
    assert j["status"] == "ok" and j["error"] is None and j["devices"] == 1
    assert j["outputs"]["out"] == {
        "shape": [256],
        "dtype": "float32",
        "values": [float(v) for v in IOTA256],
    }


def test_transpose_view_interprets_to_x_transposed():
    # the GPU lowering rejects it (above), but the interpreter computes x.T
    x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    r = probe.probe(gallery.load("transpose-view"), ("build", "trace", "interpret"))
    assert r.ok, r.message
    np.testing.assert_array_equal(r.outputs["out"], x.T)


def test_race_without_detection_leaves_one_writer_and_nan_fill():
    r = probe.probe(gallery.load("two-block-race"), ("build", "interpret"), detect_races=False)
    assert r.ok, r.message
    out = r.outputs["out"]
    assert any(np.array_equal(out[:128], IOTA256[h : h + 128]) for h in (0, 128))
    assert np.isnan(out[128:]).all()  # nobody wrote the second half


def test_failed_timed_out_and_crashed_runs_leave_the_next_run_working():
    good = gallery.load("two-block-copy")
    # a failure inside the GPU interpreter (its state is reset with a fresh worker)
    bad = runtime.run(gallery.load("two-block-race"), "interpret")
    assert bad.error.code == "RACE_DETECTED"
    assert runtime.run(good, "interpret").ok
    # a timeout
    # (0.1 ms: less than the GPU interpreter takes to run even a cached call, on any
    # machine; 10 ms was not, on a fast one)
    slow = runtime.run(good, "interpret", timeout=1e-4)
    assert slow.status == "error" and slow.error.code == "RUN_TIMEOUT"
    assert runtime.run(good, "interpret").ok

    # a crash: the worker dies (SIGKILL, as a segfaulting JAX would) mid-run
    def kill_at_interpret(stage, fraction):
        if stage == "interpret":
            os.kill(workers._POOL[(1, "cpu")].pid, signal.SIGKILL)

    for _ in range(5):
        stages: list = []
        crashed = runtime.run(
            good,
            "interpret",
            on_progress=lambda s, f, seen=stages: (seen.append((s, f)), kill_at_interpret(s, f)),
        )
        if crashed.status == "error":
            break
        # the cached call ran to its end before the kill landed (a fast or loaded machine:
        # the worker died idle): once its death shows (its socket hung up; a loaded machine
        # may deliver the signal late, and a run handed to it then crashes, as it should),
        # the next run starts a fresh worker, and the call is built in it again before the
        # next try
        sent = any(s == "interpret" for s, _ in stages)
        killed = workers._POOL.get((1, "cpu")) if sent else None
        deadline = time.monotonic() + 30
        while killed is not None and killed.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runtime.run(good, "interpret").ok
    assert crashed.status == "error" and crashed.error.code == "RUN_CRASHED"
    assert "SIGKILL" in crashed.error.error_json()["message"] and crashed.error.stage == "interpret"
    # the call was built and run before in this worker: the crashed run reuses it, so it
    # goes from start straight to the interpreter (no build, trace or lowering again)
    assert [s for s, _ in stages][:2] == ["start", "interpret"]
    again = runtime.run(good, "interpret")
    assert again.ok
    np.testing.assert_array_equal(again.outputs["out"], IOTA256)


def test_progress_reaches_one():
    # a call this worker has not built (its name is new): every stage, in order
    s = gallery.load("two-block-copy").model_copy(update={"name": "progress-of-a-new-call"})
    for first_time in (True, False):
        seen = []
        r = runtime.run(s, "interpret", on_progress=lambda st, f, seen=seen: seen.append((st, f)))
        assert r.ok and r.cached is not first_time
        fractions = [f for _, f in seen]
        assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
        stages = ["start", "build", "trace", "gpu-lower", "interpret", "done"]
        # run again, the built call is reused: no build, trace or lowering
        assert [st for st, _ in seen] == (stages if first_time else ["start", "interpret", "done"])


def test_backends():
    s = gallery.load("two-block-copy")
    assert runtime.choose_backend("interpret") == ("interpret", "")
    with pytest.raises(ValueError):
        runtime.choose_backend("tpu")
    if not runtime.has_gpu():
        assert runtime.choose_backend("auto")[0] == "interpret"
        r = runtime.run(s, "gpu")
        assert r.status == "error" and r.error.code == "GPU_UNAVAILABLE"
    r = runtime.run(s, "simulate")
    assert r.backend == "simulate"
    assert r.ok, r.error
    np.testing.assert_array_equal(r.outputs["out"], IOTA256)
    assert "note" in r.to_json()


def test_cli_run_json_as_a_user_runs_it(cli):
    ok = cli("run", "two-block-copy", "--json", "--backend", "interpret")
    assert ok.returncode == 0, ok.stderr
    j = json.loads(ok.stdout)
    assert j["status"] == "ok" and j["backend"] == "interpret" and j["error"] is None
    assert j["outputs"]["out"]["values"] == [float(v) for v in IOTA256]


def test_cli_run_exit_codes(capsys, tmp_path):
    from mpmd_lab import cli as cli_main  # in-process: reuses this process's warm workers

    assert cli_main.main(["run", "dup-ref", "--json", "--backend", "interpret"]) == 1
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "error" and j["error"]["code"] == "MPMD_DUP_REF"
    assert j["error"]["stage"] == "trace" and j["outputs"] == {}
    assert cli_main.main(["run", "dup-ref-fixed", "--backend", "interpret"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("dup-ref-fixed: ok (interpret, 1 device)") and "acc:" in text
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert cli_main.main(["run", str(broken), "--json"]) == 2
    assert cli_main.main(["run", str(tmp_path / "missing.json")]) == 2


def test_exported_files_match_run(gallery_runs, tmp_path):
    from mpmd_lab import cli as cli_main

    runnable = [n for n, r in gallery_runs.items() if r.ok]
    assert set(EXPECTED_OUTPUTS) <= set(runnable)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = {}
    for name in runnable:  # one process per file, all at once
        path = tmp_path / f"{name.replace('-', '_')}.py"
        assert cli_main.main(["export", name, "-o", str(path)]) == 0  # mpmd-lab export
        assert path.read_text() == generate(load_scenario(gallery.path_of(name)))
        procs[name] = subprocess.Popen(
            [sys.executable, str(path), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
    for name, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, (name, err[-2000:])
        exported = json.loads(out.strip().splitlines()[-1])
        expected = json.loads(json.dumps(gallery_runs[name].to_json()["outputs"]))
        assert list(exported) == list(expected), name
        assert exported == expected, name


def test_broken_scenario_gets_the_rules_code_not_a_python_error():
    data = json.loads(gallery.path_of("two-block-copy").read_text())
    data["call"]["programs"][0]["body"][2]["src"] = "nowhere"  # a name never defined
    r = runtime.run(load_scenario(data), "interpret")
    assert r.status == "error"
    assert r.error.code == "XREF_UNKNOWN_NAME" and r.error.stage == "schema"
    # what refused it: the code generator, or Python running the call
    assert r.error.error_json()["type"] in ("CodegenError", "NameError")


@st.composite
def block_kernels(draw):
    """A grid kernel: each of k blocks reads its slice of x (and y), writes out's slice."""
    k = draw(st.sampled_from([1, 2, 4]))
    # per block a multiple of 128 elements: fewer fails the GPU layout inference
    n = draw(st.sampled_from([128, 256]))
    dtype = draw(st.sampled_from(["float32", "int32"]))
    init = draw(st.sampled_from(["iota", "random", "ones"]))
    op = draw(st.sampled_from(["copy", "add"]))
    seed = draw(st.integers(0, 5))
    view = {"op": "at", "index": [{"block": "b", "size": n}]}
    body = [
        {"let": "xs", "ref": "x_ref", "transforms": [view]},
        {"let": "ys", "ref": "y_ref", "transforms": [view]},
        {"let": "os", "ref": "out", "transforms": [view]},
    ]
    if op == "copy":
        body.append({"op": "copy", "src": "xs", "dst": "os"})
    else:
        body.append({"op": "add", "dst": "os", "lhs": "xs", "rhs": "ys"})
    data = {
        "schema": "mpmd-lab/scenario@1",
        "name": "hyp",
        "buffers": {
            "x": {"shape": [n * k], "dtype": dtype, "init": init, "seed": seed},
            "y": {"shape": [n * k], "dtype": dtype, "init": "iota"},
        },
        "call": {
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "y", "param": "y_ref"}],
            "outputs": {"out": {"shape": [n * k], "dtype": dtype}},
            "programs": [
                {"mesh": {"grid": {"b": k}, "cluster": {}, "threads": None}, "body": body}
            ],
        },
    }
    # the expected output, with numpy alone
    size = n * k
    if init == "iota":
        x = np.arange(size).astype(dtype)
    elif init == "ones":
        x = np.ones(size, dtype)
    else:
        x = np.random.default_rng(seed).standard_normal(size).astype(dtype)
    y = np.arange(size).astype(dtype)
    return data, (x if op == "copy" else x + y)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_kernels())
def test_generated_block_kernels_match_numpy(case):
    data, expected = case
    r = runtime.run(load_scenario(data), "interpret", timeout=120)
    assert r.ok, r.error
    np.testing.assert_array_equal(r.outputs["out"], expected)


def test_a_second_run_of_an_unchanged_scenario_reuses_the_built_call():
    s = gallery.load("two-block-copy")
    first = runtime.run(s, "interpret")
    again = runtime.run(s, "interpret")
    assert first.ok and again.ok and again.cached
    np.testing.assert_array_equal(again.outputs["out"], first.outputs["out"])
    changed = s.to_dict()
    changed["buffers"]["x"]["init"] = "ones"  # another source: built afresh
    other = runtime.run(load_scenario(changed), "interpret")
    assert other.ok and not other.cached
    np.testing.assert_array_equal(other.outputs["out"], np.ones(256, np.float32))
