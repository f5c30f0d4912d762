"""mpmd_lab.probe against real JAX: stages, codes, outputs, and worker recovery."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpmd_lab import gallery, probe, workers
from mpmd_lab.scenario import load_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only


@pytest.fixture(scope="module")
def gallery_results():
    names = ["dup-ref", "peer-then-multicast", "two-block-copy", "dup-ref-fixed"]
    scenarios = [gallery.load(n) for n in names]
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower", "interpret"), timeout=120)
    return dict(zip(names, results, strict=True))


def test_dup_ref_fails_at_trace(gallery_results):
    r = gallery_results["dup-ref"]
    assert not r.ok and r.stage == "trace"
    assert r.code == "MPMD_DUP_REF"
    assert r.error_type == "NotImplementedError"
    assert r.message.startswith("Cannot pass the same ref into a mpmd map multiple times")
    assert r.outputs is None


def test_peer_then_multicast_fails_at_trace(gallery_results):
    r = gallery_results["peer-then-multicast"]
    assert (r.ok, r.stage, r.code) == (False, "trace", "REF_PEER_TO_MULTICAST")
    assert r.message == "Can't make a peer reference into a multicast reference."
    assert r.devices == 2


def test_two_block_copy_outputs_equal_numpy(gallery_results):
    r = gallery_results["two-block-copy"]
    assert r.ok and r.stage is None and r.code is None
    x = np.arange(256, dtype=np.float32)
    assert list(r.outputs) == ["out"]
    np.testing.assert_array_equal(r.outputs["out"], x)


def test_as_ref_outputs_in_declared_order(gallery_results):
    r = gallery_results["dup-ref-fixed"]
    assert r.ok
    acc = np.arange(256, dtype=np.float32)
    assert list(r.outputs) == ["out", "acc"]  # outputs first, then the Ref's final value
    np.testing.assert_array_equal(r.outputs["out"], 2 * acc)
    np.testing.assert_array_equal(r.outputs["acc"], acc)


def test_stage_selection_stops_early():
    # peer-then-multicast fails at trace; a build-only probe passes
    r = probe.probe(gallery.load("peer-then-multicast"), ("build",))
    assert r.ok and r.outputs is None and r.stages == ("build",)
    with pytest.raises(ValueError, match="unknown stages"):
        probe.probe(gallery.load("dup-ref"), ("compile",))


def test_codegen_failure_is_a_result_not_an_exception():
    data = json.loads(gallery.path_of("two-block-copy").read_text())
    body = data["call"]["programs"][0]["body"]
    body[0]["transforms"].append({"op": "tiling", "tile": [8]})
    s = load_scenario(data)
    r = probe.probe(s)
    assert not r.ok and r.code == probe.CODEGEN_CODE and r.error_type == "CodegenError"
    assert "scratch-only" in r.message and r.path.startswith("call.programs[0].body[0]")


def test_timeout_then_next_probe_works():
    # no scenario finishes tracing+interpreting in 0.1 ms (10 ms was too close on a fast
    # machine): killed, reported
    s = gallery.load("peer-then-multicast-fixed")
    r = probe.probe(s, ("build", "trace", "interpret"), timeout=1e-4)
    assert not r.ok and r.timed_out and r.code == "RUN_TIMEOUT"
    assert r.stage in ("build", "trace", "interpret")
    again = probe.probe(s, ("build", "trace", "interpret"), timeout=120)
    assert again.ok, again.message
    np.testing.assert_array_equal(again.outputs["out"], np.arange(256, dtype=np.float32))


def test_direct_workers_without_the_zygote(monkeypatch):
    # the mode GPU workers use: each worker its own process, never forked
    import os
    import signal

    monkeypatch.setenv("MPMD_LAB_FORK", "0")
    with workers._LOCK:
        old = workers._POOL.pop((1, "cpu"), None)
        if old is not None:
            old.close()
    s = gallery.load("two-block-copy")
    try:
        r = probe.probe(s, ("build", "interpret"), timeout=120)
        assert r.ok, r.message
        w = workers._POOL[(1, "cpu")]
        assert w.zygote is None and w.proc is not None
        np.testing.assert_array_equal(r.outputs["out"], np.arange(256, dtype=np.float32))

        def kill(stage, fraction):
            if stage == "interpret":
                os.kill(w.pid, signal.SIGKILL)

        dead = probe.probe(s, ("build", "interpret"), on_progress=kill)
        assert dead.crashed and dead.code == "RUN_CRASHED" and "SIGKILL" in dead.message
    finally:
        with workers._LOCK:
            w = workers._POOL.pop((1, "cpu"), None)
            if w is not None:
                w.close()


def test_interrupted_probe_does_not_leak_its_answer_to_the_next():
    class Stop(Exception):
        pass

    def stop_at_trace(stage, fraction):
        if stage == "trace":
            raise Stop  # as a Ctrl-C in a notebook would, mid-request

    with pytest.raises(Stop):
        probe.probe(gallery.load("dup-ref"), on_progress=stop_at_trace)
    # the next probe gets its own answer, not the interrupted one's MPMD_DUP_REF
    r = probe.probe(gallery.load("two-block-copy"), ("build", "trace", "interpret"))
    assert r.ok, r.message
    np.testing.assert_array_equal(r.outputs["out"], np.arange(256, dtype=np.float32))
