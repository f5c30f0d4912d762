"""The simulator on cross-device and cluster scenarios no CPU interpreter runs: each
expected value is worked out here with plain numpy, independently of the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import graph_strategies
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from mpmd_lab import gallery
from mpmd_lab.accesslog import from_runs, runs
from mpmd_lab.dtypes import np_dtype
from mpmd_lab.memory import bitcast_offsets, host_value
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate

SYNC = Path(__file__).parent / "scenarios" / "sync"


def _iota(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# ---------------------------------------------------------------- cross-device


def test_ring_shift_each_device_holds_its_left_neighbours_input():
    r = simulate(gallery.load("ring-shift"))
    assert r.ok and r.backend == "simulate" and r.devices == 4
    x = _iota(4 * 256).reshape(4, 256)  # device d's input is row d
    expected = np.stack([x[(d - 1) % 4] for d in range(4)]).reshape(-1)
    np.testing.assert_array_equal(r.outputs["out"], expected)
    assert r.races == []
    writes = r.log.writes()
    assert sorted((w.actor.device, w.location.device) for w in writes) == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 0),
    ]


def test_multicast_2d_reaches_every_device_and_reports_the_overlapping_writers():
    r = simulate(gallery.load("multicast-2d"))
    assert r.ok and r.devices == 4
    np.testing.assert_array_equal(r.outputs["out"], np.ones(4 * 128, np.float32))
    # all four devices write all 128 elements of out on every device
    writes = [w for w in r.log.writes() if w.location.buffer == "out"]
    assert sorted({(w.actor.device, w.location.device) for w in writes}) == [
        (a, b) for a in range(4) for b in range(4)
    ]
    assert r.races and all(x.kind == "write-write" for x in r.races)
    assert {x.location.device for x in r.races} == {0, 1, 2, 3}
    for race in r.races:
        assert race.first.actor.device != race.second.actor.device
        assert runs(race.elements) == [[0, 128]]


def _all_gather(axes, op: str) -> dict:
    """Each device of a 2x2 mesh stores its x into its own slot of out, fanned out over
    ``axes``: slot = 2 * x_coord + y_coord, 128 elements each."""
    slot = [
        {"op": "at", "index": [{"block": "x", "size": 256, "stride": 256}]},
        {"op": "at", "index": [{"block": "y", "size": 128}]},
    ]
    if op == "tma_store":
        body = [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            {"let": "mine", "ref": "out", "transforms": slot},
            {
                "let": "everyone",
                "ref": "mine",
                "transforms": [{"op": "multicast_ref", "axes": axes}],
            },
            {"op": "tma_store", "src": "smem", "dst": "everyone"},
        ]
    else:
        body = [
            {"let": "mine", "ref": "out", "transforms": slot},
            {"op": "multimem_store", "src": "x_ref", "dst": "mine", "axes": axes},
        ]
    return {
        "name": "all-gather",
        "device_mesh": {"x": 2, "y": 2},
        "buffers": {"x": {"shape": [128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [512], "dtype": "float32"}},
            "scratch": {"smem": {"shape": [128], "dtype": "float32"}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
    }


@pytest.mark.parametrize("op", ["tma_store", "multimem_store"])
def test_multicast_over_both_axes_is_an_all_gather(op):
    r = simulate(load_scenario(_all_gather(["x", "y"], op)), check=False)
    assert r.ok, r.error
    x = _iota(512)  # the global input: device d holds x[128 d : 128 (d + 1)]
    np.testing.assert_array_equal(r.outputs["out"], np.tile(x, 4))
    assert r.races == []


@pytest.mark.parametrize("op", ["tma_store", "multimem_store"])
def test_multicast_over_one_axis_reaches_only_that_axis(op):
    r = simulate(load_scenario(_all_gather("y", op)), check=False)
    assert r.ok, r.error
    x = _iota(512).reshape(2, 2, 128)  # [x_coord, y_coord, element]
    expected = np.full((2, 2, 4, 128), np.nan, np.float32)  # [device x, device y, slot, e]
    for dx in range(2):
        for dy in range(2):
            for sy in range(2):  # every y along the same x row receives the store
                expected[dx, dy, 2 * dx + sy] = x[dx, sy]
    np.testing.assert_array_equal(r.outputs["out"], expected.reshape(-1))


def test_cluster_exchange_reads_the_named_blocks_smem():
    r = simulate(gallery.load("cluster-exchange"))
    assert r.ok, r.error
    x = _iota(256)
    # one cluster of two blocks; block c stages x[128c : 128(c + 1)] in its own SMEM
    np.testing.assert_array_equal(r.value("smem", block=0), x[:128])
    np.testing.assert_array_equal(r.value("smem", block=1), x[128:])
    # both read through cluster_ref({"c": 1}), a constant: block 1's SMEM, into their half
    np.testing.assert_array_equal(r.outputs["out"], np.concatenate([x[128:], x[128:]]))
    # block 0 reads what block 1 wrote with no barrier between: a read-write race
    (race,) = r.races
    assert race.kind == "read-write" and race.location.block == 1
    assert (race.first.kind, race.first.actor.block) == ("write", 1)
    assert (race.second.kind, race.second.actor.block) == ("read", 0)


def test_stores_into_cluster_ref_slots_land_in_one_block():
    # a plain store into another block's SMEM does not lower for a GPU
    # (GPU_CLUSTER_SMEM_STORE); the simulator shows what it would mean
    s = {
        "name": "gather-in-block-1",
        "buffers": {"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [256], "dtype": "float32"}},
            "scratch": {"smem": {"shape": [256], "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 2}, "cluster": {"c": 2}},
                    "body": [
                        {"let": "mine", "ref": "x_ref", "transforms": [
                            {"op": "at", "index": [{"block": "c", "size": 128}]}]},
                        {"let": "slot", "ref": "smem", "transforms": [
                            {"op": "cluster_ref", "block": {"c": 1}},
                            {"op": "at", "index": [{"block": "c", "size": 128}]}]},
                        {"op": "copy", "src": "mine", "dst": "slot"},
                    ],
                }
            ],
        },
    }  # fmt: skip
    r = simulate(load_scenario(s), check=False)
    assert r.ok and r.races == []
    # grid b=2 x cluster c=2: blocks 0, 1 are cluster 0 and blocks 2, 3 cluster 1
    for cluster in range(2):
        np.testing.assert_array_equal(r.value("smem", block=2 * cluster + 1), _iota(256))
        with pytest.raises(KeyError):
            r.value("smem", block=2 * cluster)  # nobody touched block c=0's SMEM
    assert np.isnan(r.outputs["out"]).all()


# ---------------------------------------------------------------- races and the log


def test_two_block_race_names_both_writers():
    r = simulate(gallery.load("two-block-race"))
    assert r.ok
    (race,) = r.races
    assert race.kind == "write-write"
    assert (race.first.actor.block, race.second.actor.block) == (0, 1)
    assert race.location.buffer == "out" and runs(race.elements) == [[0, 128]]
    assert "block 0" in race.describe() and "block 1" in race.describe()


def test_two_block_copy_has_no_race_and_a_precise_log():
    r = simulate(gallery.load("two-block-copy"))
    assert r.ok and r.races == []
    np.testing.assert_array_equal(r.outputs["out"], _iota(256))
    writes = {w.actor.block: runs(w.elements) for w in r.log.writes()}
    reads = {a.actor.block: runs(a.elements) for a in r.log.reads()}
    assert writes == reads == {0: [[0, 128]], 1: [[128, 256]]}
    data = json.loads(r.log.to_json())
    assert [a["kind"] for a in data["accesses"]] == ["read", "write", "read", "write"]
    assert data["accesses"][3]["elements"] == [[128, 256]]
    assert data["accesses"][3]["actor"]["block"] == 1


@pytest.mark.parametrize("name", ["two-block-race", "multicast-2d", "cluster-exchange"])
def test_a_log_pickles_by_column_and_comes_back_the_same(name):
    """The simulate worker sends its log back pickled (by column): every access, race,
    count and shared actor comes back equal, a race's accesses the log's own objects."""
    import pickle

    log = simulate(gallery.load(name)).log
    back = pickle.loads(pickle.dumps(log, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.accesses and len(back.accesses) == len(log.accesses)
    assert back.to_json() == log.to_json() and back.summary() == log.summary()
    for a, b in zip(log.accesses, back.accesses, strict=True):
        assert (a.id, a.kind, a.actor, a.statement, a.op, a.ref, a.location, a.path, a.field) == (
            b.id, b.kind, b.actor, b.statement, b.op, b.ref, b.location, b.path, b.field
        )  # fmt: skip
        np.testing.assert_array_equal(a.spans, b.spans)
    kept = {id(a) for a in back.accesses}
    for r in back.races:
        assert id(r.first) in kept and id(r.second) in kept
    assert (back.total, back.race_count, back.counts, back.elements_touched) == (
        log.total, log.race_count, log.counts, log.elements_touched
    )  # fmt: skip
    # actors are shared as the engine shares them (one object per thread, not per access)
    assert len({id(a.actor) for a in back.accesses}) == len({id(a.actor) for a in log.accesses})


def test_read_after_another_blocks_write_is_a_read_write_race():
    d = gallery.load("two-block-copy").to_dict()
    body = d["call"]["programs"][0]["body"]
    body.append({"op": "copy", "src": "out", "dst": "out"})  # every block reads all of out
    r = simulate(load_scenario(d))
    kinds = {x.kind for x in r.races}
    assert "read-write" in kinds
    assert all(x.first.actor != x.second.actor for x in r.races)


# ---------------------------------------------------------------- results


def test_result_json_has_the_run_json_shape_and_says_where_it_comes_from():
    r = simulate(gallery.load("two-block-race"))
    j = json.loads(json.dumps(r.to_json()))
    assert {"status", "backend", "devices", "error", "outputs", "seconds"} <= set(j)
    assert j["backend"] == "simulate" and j["status"] == "ok" and j["error"] is None
    assert "not a run of JAX" in j["note"]
    out = j["outputs"]["out"]
    assert out["shape"] == [256] and out["dtype"] == "float32"
    assert out["values"][:2] == [128.0, 129.0] and out["values"][-1] == "nan"
    assert j["races"][0]["first"]["actor"]["block"] == 0
    assert "log" in r.to_json(log=True)


def test_errors_are_data_with_a_code_and_a_path():
    d = gallery.load("ring-shift").to_dict()
    d["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = 7
    r = simulate(load_scenario(d), check=False)
    assert r.status == "error" and not r.outputs
    assert r.error.code == "REMOTE_DEVICE_OOB"
    assert r.error.path == "call.programs[0].body[0].transforms[0].device"
    assert "device id 7 is outside the device mesh (devices 0..3)" in r.error.message
    assert r.to_json()["error"]["code"] == "REMOTE_DEVICE_OOB"
    r = simulate(gallery.load("peer-then-multicast"), check=False)
    assert r.error.code == "REF_PEER_TO_MULTICAST"


def test_program_id_is_each_blocks_index_as_on_a_gpu_and_says_so():
    """JAX's GPU interpreter gives pl.program_id 0 in every block (half the output stays
    NaN there); the simulator gives the GPU's answer, and says the interpreter differs."""
    d = gallery.load("two-block-copy").to_dict()
    for let in d["call"]["programs"][0]["body"][:2]:
        let["transforms"][0]["index"] = [{"pid": 0, "size": 128}]
    gpu = simulate(load_scenario(d))
    np.testing.assert_array_equal(gpu.outputs["out"], _iota(256))
    assert any("PROGRAM_ID_GPU_INTERP" in n for n in gpu.notes)
    zero = simulate(load_scenario(d), program_id="zero")  # the interpreter's answer, on request
    assert np.isnan(zero.outputs["out"][128:]).all()


# ---------------------------------------------------------------- building blocks


@pytest.mark.slow
@pytest.mark.parametrize("init", ["zeros", "ones", "iota", "random", [[1, 2], [3, 4]]])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "bool"])
def test_host_values_equal_the_generated_codes(init, dtype):
    from mpmd_lab.callsupport import host_array
    from mpmd_lab.scenario import Buffer

    b = Buffer(shape=[2, 2], dtype=dtype, init=init, seed=3)
    got = host_value(b, 3)
    want = np.asarray(host_array(b.init, b.shape, b.dtype, b.seed, 3))
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_bitcast_offsets_regroup_bytes_along_the_second_minor_dim():
    x = np.arange(12, dtype=np.float32).reshape(4, 3) * 1.5
    raw = x.reshape(-1).view(np.uint8)
    base = (np.arange(12)[:, None] * 4 + np.arange(4)).reshape(4, 3, 4)

    def read(offs, dt):
        return np.ascontiguousarray(raw[offs]).view(dt).reshape(offs.shape[:-1])

    # narrowing: element (2i + k, j) is 16-bit half k of x[i, j] (little-endian)
    halves = read(bitcast_offsets(base, np.dtype(np.float32), np.dtype(np.int16)), np.int16)
    expected = x.view(np.int16).reshape(4, 3, 2).transpose(0, 2, 1).reshape(8, 3)
    np.testing.assert_array_equal(halves, expected)
    # widening back joins them again
    back = bitcast_offsets(
        bitcast_offsets(base, np.dtype(np.float32), np.dtype(np.int16)),
        np.dtype(np.int16),
        np_dtype("float32"),
    )
    np.testing.assert_array_equal(read(back, np.float32), x)


def test_runs_round_trip():
    e = np.array([0, 1, 2, 5, 7, 8])
    assert runs(e) == [[0, 3], [5, 6], [7, 9]]
    np.testing.assert_array_equal(from_runs(runs(e)), e)


def test_jax_rejections_come_back_as_the_validators_first_diagnostic():
    r = simulate(gallery.load("dup-ref"))
    assert r.status == "error" and r.error.code == "MPMD_DUP_REF"
    assert r.error.stage == "trace" and "same ref" in r.error.error_json()["message"]
    # a call the GPU lowering rejects: what JAX says (run --backend interpret lowers
    # first and stops there too), not a simulation of what no GPU runs (issue 18)
    r = simulate(gallery.load("bitcast-view"))
    assert r.status == "error" and (r.error.code, r.error.stage) == (
        "GPU_WG_TRANSFORMS",
        "gpu-lower",
    )
    assert simulate(gallery.load("bitcast-view"), check=False).ok  # asked to, it runs it


@pytest.mark.slow
def test_cli_run_backend_simulate(cli):
    p = cli("run", "ring-shift", "--backend", "simulate", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["backend"] == "simulate" and j["status"] == "ok"
    assert j["outputs"]["out"]["values"][:2] == [768.0, 769.0]  # device 0 holds device 3's x
    p = cli("run", "dup-ref", "--backend", "simulate", "--json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["error"]["code"] == "MPMD_DUP_REF"


def test_rank0_tuple_args_refs_and_gmem_scratch_on_two_devices():
    s = {
        "name": "odds",
        "device_mesh": {"d": 2},
        "buffers": {
            "a": {"shape": [], "dtype": "float32", "init": "ones"},
            "b": {"shape": [4], "dtype": "int32", "init": "iota", "as_ref": True},
            "c": {"shape": [4], "dtype": "int32", "init": [5, 6, 7, 8]},
        },
        "call": {
            "args": [{"buffer": "a", "param": "a_ref"}, {"tuple": ["b", "c"], "param": "t"}],
            "outputs": {
                "o": {"shape": [], "dtype": "float32"},
                "p": {"shape": [4], "dtype": "int32"},
            },
            "scratch": {"g": {"shape": [4], "dtype": "int32", "memory_space": "GMEM"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [
                        {"op": "copy", "src": "a_ref", "dst": "o"},
                        {"op": "add", "dst": "g", "lhs": "t[0]", "rhs": "t[1]"},
                        {"op": "copy", "src": "g", "dst": "p"},
                        {"op": "fill", "dst": "t[0]", "value": -1},
                    ],
                }
            ],
        },
    }
    r = simulate(load_scenario(s), check=False)
    assert r.ok, r.error
    assert r.outputs["o"].shape == () and r.outputs["o"] == 1.0  # replicated, not stacked
    b = np.arange(8, dtype=np.int32)  # the global iota; device d holds b[4d : 4d + 4]
    c = np.tile(np.array([5, 6, 7, 8], np.int32), 2)
    np.testing.assert_array_equal(r.outputs["p"], b + c)
    np.testing.assert_array_equal(r.outputs["b"], np.full(8, -1, np.int32))  # the Ref's final value


def test_races_and_errors_as_diagnostics():
    (d,) = simulate(gallery.load("two-block-race")).diagnostics()
    assert (d.code, d.severity, d.path) == ("RACE", "error", "call.programs[0].body[2]")
    assert "block 0" in d.message and "block 1" in d.message
    assert simulate(gallery.load("two-block-copy")).diagnostics() == []
    (e,) = simulate(gallery.load("peer-then-multicast"), check=False).diagnostics()
    assert e.code == "REF_PEER_TO_MULTICAST" and e.is_error
    assert e.path == "call.programs[0].body[0].transforms[1]"


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph_strategies.scenario_dicts)
def test_any_scenario_simulates_or_fails_as_data(data):
    """Whatever a user builds (unknown names, odd stacks, bad axes): a result, never a crash."""
    s = graph_strategies.loadable(data)
    assume(s is not None)
    r = simulate(s, check=False)
    assert r.status in ("ok", "error")
    assert (r.error is None) == r.ok
    json.dumps(r.to_json(log=True))
    for d in r.diagnostics():
        assert d.code


def test_a_huge_launch_is_refused_not_attempted():
    d = gallery.load("two-block-copy").to_dict()
    d["call"]["programs"][0]["mesh"]["grid"] = {"b": 1 << 20}
    r = simulate(load_scenario(d), check=False)
    assert r.error.code == "SIM_TOO_LARGE" and r.seconds < 5


def _endless() -> dict:
    """A loop whose bound only the devices know (no estimate sees it): it runs for long."""
    d = json.loads((SYNC / "ring_all_gather.json").read_text())
    loop = d["call"]["programs"][0]["body"][3]
    loop["stop"] = "10000000 + dev"
    loop["body"] = [st for st in loop["body"] if "semaphore" not in st.get("op", "")]
    return d


@pytest.mark.slow
def test_the_simulate_backend_runs_in_a_bounded_child_process():
    """Issue 16: run(..., "simulate") runs where a run belongs: a child process, with the
    timeout of the JAX backends, a bounded address space, and nothing left behind."""
    import os
    import time

    from mpmd_lab import runtime
    from mpmd_lab.engine import child

    r = runtime.run(gallery.load("ring-shift"), "simulate", timeout=60)
    assert r.ok and r.backend == "simulate" and r.outputs["out"][0] == 768.0
    worker = child._WORKER
    assert worker is not None and worker.proc.pid != os.getpid()
    limits = open(f"/proc/{worker.proc.pid}/limits").read()
    line = next(x for x in limits.splitlines() if x.startswith("Max address space"))
    assert "unlimited" not in line.split()[3]  # the soft limit is set
    t = time.perf_counter()
    slow = runtime.run(load_scenario(_endless()), "simulate", timeout=2)
    assert slow.error.code == "RUN_TIMEOUT" and time.perf_counter() - t < 20
    again = runtime.run(load_scenario((SYNC / "ring_deadlock.json").read_text()), "simulate")
    assert again.error.code == "DEADLOCK_SEMAPHORE" and again.to_json()["status"] == "error"
    child.shutdown()
    assert worker.proc.poll() is not None
