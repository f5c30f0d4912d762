"""The static synchronisation check (mpmd_lab.validate.sync): races under happens-before,
deadlocks, semaphore balance, out-of-bounds indices of every expression form and device
ids, held against real JAX where JAX speaks (its GPU interpreter's race detector and
bounds checks, in mpmd_lab.probe's workers) and against the research corpus's kernels
(tests/scenarios/sync, each traced and lowered by JAX in test_corpus_kernels_lower)."""

from __future__ import annotations

import copy
import json
import re
import sys
import time
from pathlib import Path

import pytest
from mpmd_lab import gallery, probe
from mpmd_lab.diagnostics import verdict
from mpmd_lab.fixes import apply_fix
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from test_engine import BAR, SMEM, _one_device, fixture, ring  # noqa: E402

SYNC = Path(__file__).parent / "scenarios" / "sync"
#: what this rule module reports
CODES = {
    "RACE",
    "RACE_DETECTED",
    "DEADLOCK_SEMAPHORE",
    "DEADLOCK_BARRIER",
    "SEMAPHORE_IMBALANCE",
    "OOB_READ",
    "OOB_WRITE",
    "OOB_INDEX",
    "REMOTE_DEVICE_OOB",
    "SYNC_NOT_CHECKED",
}
VALID = [
    "cluster_exchange",
    "collective_matmul",
    "device_barrier_sems",
    "exchange_shards",
    "exchange_tma_load",
    "per_block_sems_grid",
    "remote_atomic_add",
    "ring_all_gather",
    "ring_reduce_scatter",
    "wait_value_nodec",
    "ring_all_gather_pl_loop",
    "mesh_2x2_dict_ids",
    "mesh_2x2_partial_dict",
    "multicast_copy",
    "dup_ref_plgpu_kernel",
]


def sync_diags(s) -> list:
    return [d for d in check(load_scenario(s)) if d.code in CODES]


@pytest.mark.slow
def test_corpus_kernels_lower():
    """Every fixture is a kernel real JAX traces and lowers for the GPU (on this CPU)."""
    files = sorted(SYNC.glob("*.json"))
    results = probe.probe_many(
        [load_scenario(f) for f in files], ("build", "trace", "gpu-lower"), timeout=300
    )
    assert [(f.stem, r.ok) for f, r in zip(files, results, strict=True)] == [
        (f.stem, True) for f in files
    ], [(f.stem, r.message) for f, r in zip(files, results, strict=True) if not r.ok]


@pytest.mark.parametrize("name", VALID)
def test_a_correctly_synchronised_kernel_is_valid(name):
    assert sync_diags(fixture(name)) == []


def test_the_ring_without_its_wait_is_a_race_with_a_fix():
    """A race whatever detect_races says (issue 18), and RACE_DETECTED (issue 13's
    contract): the race a happens-before detector finds in a kernel that synchronises."""
    d = fixture("ring_no_wait")
    for detect in (False, True):
        d["run"]["detect_races"] = detect
        (race, leftover) = sync_diags(d)
        assert (race.code, race.severity, race.stage) == ("RACE_DETECTED", "error", "gpu-run")
        # no CPU interpreter runs this call's remote refs and semaphores: JAX says nothing
        assert race.jax is None
        assert race.message.startswith("Read/write race on out[768:1024] (output) on device 0")
        assert "device 3 writes it" in race.message and "device 0 reads it" in race.message
        assert leftover.code == "SEMAPHORE_IMBALANCE" and leftover.severity == "warning"
        fixed = apply_fix(load_scenario(d), race.fix)
        assert sync_diags(fixed.to_dict()) == []


def test_a_race_in_a_kernel_that_orders_nothing_is_race():
    from test_validate_block_oob import blocks

    d = blocks(256, 256, 2)
    d["call"]["programs"][0]["body"][1]["transforms"][0]["index"] = [[0, 128]]
    for detect in (False, True):
        d["run"]["detect_races"] = detect
        (race,) = [x for x in sync_diags(d) if x.code.startswith("RACE")]
        # JAX's GPU interpreter runs it: asked to look, it raises RACE DETECTED
        want = ("RACE_DETECTED", "interpret") if detect else ("RACE", "gpu-run")
        assert (race.code, race.stage) == want
        assert (race.jax is not None) == detect


def test_the_deadlocking_ring_names_who_waits_and_where_the_signals_went():
    d = fixture("ring_deadlock")
    (dl,) = sync_diags(d)
    assert (dl.code, dl.severity, dl.stage) == ("DEADLOCK_SEMAPHORE", "error", "gpu-run")
    assert dl.path == "call.programs[0].body[3].body[6]"
    assert "devices 0, 1, 2, 3" in dl.message and "sems[1] on device 0" in dl.message
    assert "call.programs[0].body[3].body[5]" in dl.message  # the signal that went astray
    fixed = apply_fix(load_scenario(d), dl.fix)
    assert sync_diags(fixed.to_dict()) == []


def test_signals_that_do_not_balance_are_a_warning():
    d = fixture("device_barrier_sems")
    d["call"]["programs"][0]["body"][1]["value"] = 2  # 3 signals come
    (w,) = sync_diags(d)
    assert (w.code, w.severity) == ("SEMAPHORE_IMBALANCE", "warning")
    assert "sem on device 0 block 0 = 1" in w.message


def test_a_wait_that_does_not_decrement_leaves_its_value_and_is_a_warning():
    """multimem_load_reduce's kernel waits for all 4 devices' signals with
    decrement=False: every device's semaphore ends at 4 (issue 28: a semaphore not zero
    at the end is an imbalance, whichever wait left it)."""
    diags = sync_diags(fixture("multimem_load_reduce"))
    assert [(d.code, d.severity) for d in diags] == [("SEMAPHORE_IMBALANCE", "warning")]
    assert "done on device 0 block 0 = 4" in diags[0].message
    assert "decrement=False, as at call.programs[0].body[2]" in diags[0].message


# ---------------------------------------------------------------- against JAX


def _case(name: str, body: list, scratch: dict, threads=None, devices=None) -> dict:
    d = _one_device(body, scratch, threads)
    d.update(name=name, device_mesh=devices, run={"interpret": "gpu", "detect_races": True})
    return d


LOAD = {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem", "barrier": "bar"}
USE = {"op": "copy", "src": "smem", "dst": "out"}
WAIT = {"op": "barrier_wait", "barrier": "bar"}
FILL = {"op": "copy", "src": "x_ref", "dst": "smem"}
STORE = {"op": "copy_smem_to_gmem", "src": "smem", "dst": "out"}
DONE = {"op": "wait_smem_to_gmem", "n": 0}
COMMIT = {"op": "commit_smem"}
REFILL = {"op": "fill", "dst": "smem", "value": 1.0}
WG = {"name": "wg", "count": 2}


def _wg(wait: bool, devices=None) -> tuple[list, dict, dict, dict | None]:
    produce = [FILL, {"op": "barrier_arrive", "barrier": "bar"}]
    consume = ([WAIT] if wait else []) + [USE]
    body = [
        {"op": "when", "cond": "wg == 0", "body": produce},
        {"op": "when", "cond": "wg == 1", "body": consume},
    ]
    return body, {**SMEM, **BAR}, WG, devices


#: name -> (body, scratch, threads, device mesh): what the GPU interpreter's race
#: detector (detect_races=True) says, against the check's verdict
RACE_CASES = {
    "load-wait-use": ([LOAD, WAIT, USE], {**SMEM, **BAR}, None, None),
    "load-use-wait": ([LOAD, USE, WAIT], {**SMEM, **BAR}, None, None),
    "fill-commit-store": ([FILL, COMMIT, STORE, DONE], SMEM, None, None),
    "fill-store-no-commit": ([FILL, STORE, DONE], SMEM, None, None),
    "store-refill-before-wait": ([FILL, COMMIT, STORE, REFILL, DONE], SMEM, None, None),
    "store-wait-refill": ([FILL, COMMIT, STORE, DONE, REFILL], SMEM, None, None),
    "warpgroups-barrier": _wg(True),
    "warpgroups-no-wait": _wg(False),
    "warpgroups-barrier-2dev": _wg(True, {"dev": 2}),
    "warpgroups-no-wait-2dev": _wg(False, {"dev": 2}),
}


#: runs of a case JAX's GPU interpreter crashed on, at most (see ``race_runs``)
JAX_CRASH_RETRIES = 5


def _verdict(r: probe.ProbeResult) -> bool:
    """Whether JAX answered: no error, or its race detector's."""
    return r.ok or (r.stage, r.code) == ("interpret", "RACE_DETECTED")


@pytest.fixture(scope="module")
def race_runs() -> dict:
    """JAX's verdict on every case: no error, or its race detector's. Its GPU
    interpreter on two devices sometimes fails inside itself instead (jax 0.12: an
    AssertionError "Barrier remains allocated at key ..." from its shared memory, in 9
    of 40 runs of warpgroups-barrier-2dev here): that is no verdict, and the case is
    run again, up to ``JAX_CRASH_RETRIES`` times."""
    stages = ("build", "trace", "gpu-lower", "interpret")
    runs: dict = {}
    todo = list(RACE_CASES)
    for _ in range(1 + JAX_CRASH_RETRIES):
        scenarios = [load_scenario(_case(n, *RACE_CASES[n])) for n in todo]
        runs.update(zip(todo, probe.probe_many(scenarios, stages, timeout=300), strict=True))
        todo = [n for n in todo if not _verdict(runs[n])]
        if not todo:
            break
    return runs


def _said(runs: dict) -> list:
    return [(n, r.stage, r.code, (r.message or "")[-300:]) for n, r in runs.items() if not r.ok]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RACE_CASES))
def test_races_agree_with_the_gpu_interpreters_detector(name, race_runs):
    r = race_runs[name]
    assert _verdict(r), (r.stage, r.code, r.message)  # JAX answered, in one of its runs
    mine = first_error(check(load_scenario(_case(name, *RACE_CASES[name]))))
    if r.ok:
        assert mine is None, mine.one_line()
    else:
        assert (mine.code, mine.stage) == ("RACE_DETECTED", "interpret"), mine
    # the cases do exercise both answers (guards the agreement above)
    assert {n for n, x in race_runs.items() if not x.ok} == {
        "load-use-wait",
        "fill-store-no-commit",
        "store-refill-before-wait",
        "warpgroups-no-wait",
        "warpgroups-no-wait-2dev",
    }, _said(race_runs)


def _view(name: str, ref: str, index: list) -> dict:
    return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": index}]}


def _oob_loop() -> dict:
    """A loop whose last step reads past the end (i * 128 on 384 elements)."""
    d = _one_device(
        [
            {
                "op": "loop",
                "var": "i",
                "start": 0,
                "stop": 4,
                "body": [
                    _view("src", "x_ref", [{"ds": ["i * 128", 128]}]),
                    _view("dst", "out", [{"ds": ["i * 128", 128]}]),
                    {"op": "copy", "src": "src", "dst": "dst"},
                ],
            },
        ],
        {},
        out=512,
    )
    d["buffers"]["x"]["shape"] = [384]
    d["call"]["entry"] = "pl.kernel"
    return d


def _oob_axis() -> dict:
    """(dev + 1) * 128 on 2 devices of 256 elements each: device 1 reads [256, 384)."""
    d = _one_device(
        [_view("src", "x_ref", [{"ds": ["(dev + 1) * 128", 128]}]), _view("dst", "out", [[0, 128]])]
        + [{"op": "copy", "src": "src", "dst": "dst"}],
        {},
    )
    d["device_mesh"] = {"dev": 2}
    d["call"]["entry"] = "pl.kernel"
    return d


def _oob_dynamic_int() -> dict:
    """A traced integer index ((dev + 3) % 8 on 4 rows): device 1 writes row 4."""
    d = _one_device(
        [_view("row", "out", ["(dev + 3) % 8"]), {"op": "fill", "dst": "row", "value": 1.0}], {}
    )
    d["device_mesh"] = {"dev": 2}
    d["call"]["outputs"]["out"]["shape"] = [4, 128]
    d["call"]["entry"] = "pl.kernel"
    return d


OOB_CASES = {"loop": _oob_loop(), "axis": _oob_axis(), "dynamic-int": _oob_dynamic_int()}


def _range(message: str) -> str | None:
    m = re.search(r"\[Access\(range=(.*?), permutation", message)
    return m.group(1) if m else None


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OOB_CASES))
def test_out_of_bounds_of_every_expression_form_as_the_interpreter_says_it(name):
    s = load_scenario({**OOB_CASES[name], "name": f"oob-{name}"})
    (r,) = probe.probe_many([s], ("build", "trace", "gpu-lower", "interpret"), timeout=300)
    d = first_error(check(s))
    assert not r.ok and r.stage == "interpret" and d is not None
    assert (d.code, d.stage) == (r.code, "interpret"), (d, r.message[-400:])
    assert _range(d.jax.message) == _range(r.message), (d.jax.message, r.message[-400:])
    shape = re.search(r"buffer has shape (\(.*?\))", r.message).group(1)
    assert f"buffer has shape {shape}" in d.jax.message


def test_device_ids_outside_the_mesh_for_every_form():
    """JAX checks none of them (it lowers each); the check evaluates every device's id."""
    for device, path_tail, says in [
        (7, "transforms[0].device", "device id 7 is outside the device mesh (devices 0..3)"),
        ("dev + 1", "transforms[0].device", "device id dev + 1 is 4 on device 3,"),
        ({"dev": "dev * 2"}, "transforms[0].device.dev", "index dev * 2 = 4 on device 2"),
    ]:
        d = gallery.load("ring-shift").to_dict()
        d["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = device
        (e,) = [x for x in sync_diags(d) if x.code == "REMOTE_DEVICE_OOB"]
        assert e.path.endswith(path_tail) and says in e.message, e
    # and a signal's device id, in a loop
    d = fixture("device_barrier_sems")
    d["call"]["programs"][0]["body"][0]["body"][0]["device"] = "dev + k"
    e = next(x for x in sync_diags(d) if x.code == "REMOTE_DEVICE_OOB")
    assert e.path == "call.programs[0].body[0].body[0].device" and "is 4 on device 3" in e.message


def test_program_id_is_each_blocks_index_for_the_gpu_and_zero_for_the_interpreter():
    """Under the GPU interpreter pl.program_id is 0: a pid-indexed race (all blocks write
    one tile there) is the interpreter's; on a GPU the blocks write their own tiles."""
    d = gallery.load("two-block-copy").to_dict()
    for let in d["call"]["programs"][0]["body"][:2]:
        let["transforms"][0]["index"] = [{"pid": 0, "size": 128}]
    d["run"]["detect_races"] = True
    codes = [(x.code, x.stage) for x in check(load_scenario(d)) if x.is_error]
    assert codes == [("RACE_DETECTED", "interpret")]  # the interpreter's view only
    d["run"]["detect_races"] = False
    assert [x.code for x in check(load_scenario(d)) if x.is_error] == []
    assert any(x.code == "PROGRAM_ID_GPU_INTERP" for x in check(load_scenario(d)))


# ---------------------------------------------------------------- bounds


def test_many_blocks_are_checked_at_the_corners_and_say_so():
    """The block-OOB rule used to stop silently above 4096 blocks; past its bound the
    check runs the corners of the grid for indices (exact for affine indices) and judges
    the blocks, which are interchangeable, by symmetry (and says so)."""
    from test_validate_block_oob import blocks

    for n in (4096, 4097, 100_000):
        s = load_scenario(blocks(128 * n - 1, 128 * n, n))  # the last block reads past x
        ds = check(s)
        d = first_error(ds)
        assert d is not None and d.code == "OOB_READ", (n, d)
        assert f"b={n - 1}" in d.message
        assert "SYNC_NOT_CHECKED" not in {x.code for x in ds}
        noted = [x for x in ds if x.code == "SYNC_BY_SYMMETRY"]
        assert bool(noted) == (n * 3 > 20_000), n
        if noted:
            assert "which bounds every index" in noted[0].message
    ok = load_scenario(blocks(128 * 100_000, 128 * 100_000, 100_000))
    assert first_error(check(ok)) is None


def test_a_race_among_many_blocks_is_still_found_at_the_corners():
    from test_validate_block_oob import blocks

    d = blocks(128 * 10_000, 128 * 10_000, 10_000)
    d["call"]["programs"][0]["body"][1]["transforms"][0]["index"] = [[0, 128]]  # one tile
    codes = [x.code for x in check(load_scenario(d))]
    assert "RACE" in codes and "SYNC_BY_SYMMETRY" in codes  # judged on blocks 0 and 1


def test_a_big_ring_says_what_it_did_not_check():
    ds = check(load_scenario(ring(64)))  # 64 x 63 loop steps: past the static bound
    (w,) = [x for x in ds if x.code == "SYNC_NOT_CHECKED"]
    assert w.severity == "warning" and "races, deadlocks and semaphore balance" in w.message
    # a verdict is a promise: what the check did not judge is not called plainly "valid"
    assert not any(x.is_error for x in ds) and verdict(ds) == "valid where checked"


def test_no_gallery_sized_check_runs_away():
    """A guard against a runaway check, not a speed target (``make bench`` measures the
    speed, ``tests/test_icount.py`` guards it deterministically): every gallery-sized
    scenario's check takes a few milliseconds of this process's CPU time (the machine's
    load does not count), far under the bound."""
    scenarios = [load_scenario(fixture(n)) for n in VALID + ["ring_no_wait", "ring_deadlock"]]
    scenarios += [gallery.load(n) for n in gallery.names()]
    for s in scenarios:
        check(s)  # warm
    worst = 0.0
    for s in scenarios:
        t = time.process_time()
        check(s)
        worst = max(worst, time.process_time() - t)
    assert worst < 0.5, worst


def test_the_gallery_contract_for_sync_codes():
    """Issue 13: a correctly synchronised ring is valid, the ring without its wait is
    RACE_DETECTED (run.detect_races as the gallery has it), the deadlocking ring a
    DEADLOCK code; a single-device gallery item stays what it was."""
    d = copy.deepcopy(fixture("ring_no_wait"))
    assert first_error(sync_diags(d)).code == "RACE_DETECTED"
    assert first_error(sync_diags(fixture("ring_deadlock"))).code.startswith("DEADLOCK")
    assert sync_diags(fixture("ring_all_gather")) == []
    assert [x.code for x in sync_diags(gallery.load("two-block-race").to_dict())] == [
        "RACE_DETECTED"
    ]
    assert sync_diags(gallery.load("two-block-copy").to_dict()) == []
    json.dumps([x.model_dump() for x in sync_diags(fixture("ring_no_wait"))])


def test_buffers_too_big_for_the_race_check_say_so_within_its_memory():
    """The data-free run keeps an offset per element of every buffer it touches: a call
    whose buffers are too big (one device's elements, or their offsets over every
    device) is not attempted, and the warning says why, within a small memory."""
    import tracemalloc

    from mpmd_lab import gallery
    from mpmd_lab.validate import analyze
    from mpmd_lab.validate.sync import CHECK_MEMORY, MAX_ELEMENTS, elements, offsets_bytes

    def copy(n: int, devices: int | None = None) -> object:
        d = gallery.load("two-block-copy").to_dict()
        d["buffers"]["x"]["shape"] = [n]
        d["call"]["outputs"]["out"]["shape"] = [n]
        for let in d["call"]["programs"][0]["body"][:2]:
            let["transforms"][0]["index"][0]["size"] = n // 2
        if devices:
            d["device_mesh"] = {"dev": devices}
        return load_scenario(d)

    big = copy(2**28)  # 1 GiB a buffer
    many = copy(2**22, devices=64)  # 16 MiB a buffer, on 64 devices
    assert elements(big) > MAX_ELEMENTS
    assert elements(many) <= MAX_ELEMENTS and offsets_bytes(many) > CHECK_MEMORY
    for s, words in ((big, "elements"), (many, "MiB of element offsets")):
        tracemalloc.start()
        try:
            diags = analyze(s).diagnostics
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        (w,) = [x for x in diags if x.code == "SYNC_NOT_CHECKED"]
        assert w.severity == "warning" and words in w.message, w.message
        assert peak < 64 * 2**20, peak / 2**20
    # the same call at a size the check takes is checked (and valid)
    assert list(analyze(copy(1024)).diagnostics) == []


def _returns(body: list) -> bool:
    """Whether a body (nested ones too) has a ``return``."""
    from mpmd_lab.ops import Return

    return any(
        isinstance(st, Return) or (getattr(st, "BODY", False) and _returns(st.body)) for st in body
    )


def test_the_plan_tells_the_engine_what_its_bodies_would():
    """The check sets its runs up from its plan (``_PlanNames``: the names statements
    read refs by, the statements that read a semaphore, whether a view bitcasts); an
    engine given none finds them in the bodies. Both agree on every scenario the golden
    dump covers, where the plan resolved every name (short of a ``return``, whose
    statements after it the plan never resolves: there only what the plan has)."""
    from mpmd_lab.engine.core import Prepared
    from mpmd_lab.validate.context import Ctx
    from mpmd_lab.validate.sync import _PlanNames

    from bench.golden import sources

    compared = 0
    for name, path in sources():
        try:
            s = load_scenario(path)
        except Exception:  # noqa: BLE001 - a file that does not load has no plan
            continue
        names = _PlanNames(Ctx(s))
        if not names.ok:
            continue
        try:
            own = Prepared(s)
        except Exception:  # noqa: BLE001 - a buffer the engine cannot bind: no run
            continue
        for p, prog in enumerate(s.call.programs):
            assert names.used[p] <= own.used[p], (name, p)
            if not _returns(prog.body):
                assert names.used[p] == own.used[p], (name, p)
        assert (names.reads or [{} for _ in s.call.programs]) == own.reads, name
        if not any(_returns(prog.body) for prog in s.call.programs):
            assert names.bitcast == own.bitcast, name
        compared += 1
    assert compared >= 300, compared


def test_the_interpreters_own_run_is_made_where_a_block_reads_its_program_id():
    """Tiles chosen with pl.program_id: on a GPU each block has its own, under JAX's GPU
    interpreter (program_id 0 in every block) both write tile 0. The check runs the call
    as the interpreter does only where a run read pl.program_id: asked to detect races,
    the interpreter's race is reported with JAX's message; with ``block`` indices (no
    program_id read) the same kernel has none."""
    from mpmd_lab.knowledge import card
    from mpmd_lab.validate import analyze

    d = load_scenario(card("PROGRAM_ID_GPU_INTERP").example.scenario).to_dict()
    d["run"]["detect_races"] = True
    races = [x for x in analyze(load_scenario(d)).diagnostics if x.code == "RACE_DETECTED"]
    assert len(races) == 1 and races[0].jax is not None
    assert races[0].jax.message == "RACE DETECTED" and races[0].path.endswith("body[2].dst")
    for let in d["call"]["programs"][0]["body"][:2]:
        let["transforms"][0]["index"][0] = {"block": "b", "size": 128}
    assert not [x for x in analyze(load_scenario(d)).diagnostics if x.is_error]
