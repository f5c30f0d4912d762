"""Reads and scopes of synchronisation (issue 29): ``pl.semaphore_read`` in a compute's
value, ``pl.get_global`` semaphores, ``pl.run_scoped`` allocations (the form
``pl.kernel`` lowers), ``plgpu.barrier_arrive_and_wait``,
``plgpu.semaphore_signal_parallel`` and ``wait_smem_to_gmem(wait_read_only=True)``.

Kernels written as JAX's tests write them (tests/kernels/sync_*.py) are imported by
``from_jax`` in child processes, lowered by real JAX, and the imports simulated to the
kernels' values; the scenario forms are checked against JAX's lowering of their export.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import simulate
from mpmd_lab.codegen import generate
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jaxprobe import probe_many  # noqa: E402
from test_importer import KERNELS, _line_of, imported_all  # noqa: E402

#: kernels that import faithfully: every construct carried
FAITHFUL = [
    "sync_run_scoped_sem",
    "sync_scoped_smem_pl_kernel",
    "sync_get_global",
    "sync_global_handoff",
    "sync_arrive_and_wait",
    "sync_wait_read_only",
    "sync_signal_parallel",
    "sync_semaphore_read",
    "sync_multicast_load",
    "sync_alloc_semaphore",
    "sync_read_in_when",
]
#: what the language does not carry yet: (module, what, the line's text)
PARTIAL = [
    (
        "sync_leader_tracked",
        "copy_gmem_to_smem with leader_tracked",
        "plgpu.copy_gmem_to_smem(",
    ),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, dict]:
    return imported_all(FAITHFUL + [p[0] for p in PARTIAL], tmp_path_factory.mktemp("sync"))


def _scenario(imported: dict, name: str):
    return imported[name]["obj"].scenario


# ---------------------------------------------------------------- from_jax


@pytest.mark.parametrize("name", FAITHFUL)
def test_the_kernel_imports_faithfully_and_jax_lowers_it(imported, name):
    r = imported[name]
    imp = r["obj"]
    assert r["lowered"] == "ok"  # real JAX: the user's own function lowers for the GPU
    assert imp.faithful and imp.unsupported == [], imp.unsupported
    errors = [d.one_line() for d in imp.diagnostics if d.is_error]
    assert errors == []


#: kernels whose values depend on the order the blocks run (tested on their own)
ORDER_DEPENDENT = ("sync_semaphore_read", "sync_read_in_when")


@pytest.mark.parametrize("name", [n for n in FAITHFUL if n not in ORDER_DEPENDENT])
def test_a_faithful_import_simulates_to_the_kernels_values(imported, name):
    r = imported[name]
    imp = r["obj"]
    result = simulate(imp.scenario)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    got = imp.outputs(result.outputs)
    assert len(got) == len(r["expected"])
    for g, e in zip(got, r["expected"], strict=True):
        np.testing.assert_array_equal(g, e)


def test_a_semaphore_read_gives_a_value_the_order_of_the_blocks_allows(imported):
    """Each block signals, reads, then takes one off: it reads 1 (the other block has
    not signalled, or has already taken its own) or 2; the check judges the read per
    schedule (an acquire, as JAX lowers it) and says nothing is left unchecked."""
    imp = imported["sync_semaphore_read"]["obj"]
    value = imp.scenario.call.programs[0].body[3].value
    assert value == "x_at[...] * 0 + pl.semaphore_read(sem)"
    result = simulate(imp.scenario)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    out = imp.outputs(result.outputs)[0].reshape(2, 128)
    for block in out:
        assert len(set(block.tolist())) == 1 and block[0] in (1, 2)
    diags = check(imp.scenario)
    assert [d.one_line() for d in diags if d.code == "SYNC_NOT_CHECKED" or d.is_error] == []


def test_an_alloc_semaphore_operand_is_a_global_semaphore(imported):
    """``plgpu.alloc_semaphore(())`` made before the call and passed in: a zeroed GMEM
    semaphore the kernel's blocks share, which is what ``pl.get_global`` gives for one
    call; the import says so in a note."""
    imp = imported["sync_alloc_semaphore"]["obj"]
    sc = imp.scenario.call.scratch["sem_ref"]
    assert sc.kind == "semaphore" and sc.alloc == "get_global"
    assert [a.param for a in imp.scenario.call.args] == ["x_ref"]
    assert any("plgpu.alloc_semaphore" in n and "pl.get_global" in n for n in imp.notes)
    assert "pl.get_global(" in generate(imp.scenario)


def test_scoped_and_global_allocations_are_named_and_placed(imported):
    sc = _scenario(imported, "sync_run_scoped_sem").call.scratch
    assert {n: (x.KIND, x.alloc) for n, x in sc.items()} == {
        "ready_sem": ("semaphore", "run_scoped"),
        "recv_sem": ("semaphore", "run_scoped"),
    }
    sc = _scenario(imported, "sync_scoped_smem_pl_kernel").call.scratch
    assert {n: (x.KIND, x.alloc) for n, x in sc.items()} == {
        "smem_ref": ("array", "run_scoped"),
        "barrier": ("barrier", "run_scoped"),
    }
    sc = _scenario(imported, "sync_get_global").call.scratch
    assert {n: (x.KIND, x.alloc) for n, x in sc.items()} == {"sem": ("semaphore", "get_global")}
    body = _scenario(imported, "sync_arrive_and_wait").call.programs[0].body
    assert [st.op for st in body if st.kind != "let"].count("barrier_arrive_and_wait") == 2
    body = _scenario(imported, "sync_wait_read_only").call.programs[0].body
    waits = [st for st in body if st.kind == "wait_smem_to_gmem"]
    assert [w.wait_read_only for w in waits] == [True, False]


@pytest.mark.parametrize("name,what,text", PARTIAL)
def test_what_is_not_carried_is_said_at_its_line(imported, name, what, text):
    imp = imported[name]["obj"]
    assert imported[name]["lowered"] == "ok"
    assert not imp.faithful and not imp.ok
    line = _line_of(name, text)
    assert any(u.startswith(what) for u in imp.unsupported), imp.unsupported
    errors = [d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED"]
    assert errors and all(d.is_error for d in errors)
    mine = [d for d in errors if what in d.message]
    assert mine and all(d.source == f"{KERNELS / name}.py:{line}" for d in mine)
    assert all(text in d.message for d in mine)  # the user's own line, quoted


@pytest.mark.slow
def test_the_exported_scenarios_trace_and_lower_for_the_gpu(imported):
    """The export (``pl.run_scoped(lambda ...)``, ``pl.get_global``,
    ``barrier_arrive_and_wait``, ``wait_read_only=True``, ``pl.semaphore_read``) is
    what JAX traces and lowers."""
    scenarios = [_scenario(imported, n) for n in FAITHFUL]
    results = probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=300)
    bad = {n: r for n, r in zip(FAITHFUL, results, strict=True) if r["stage"] is not None}
    assert bad == {}


# ---------------------------------------------------------------- the scenario forms


def _with_alloc(s, alloc: str):
    data = s.to_dict()
    for sc in data["call"]["scratch"].values():
        sc["alloc"] = alloc
    return load_scenario(data)


def test_pl_kernel_scratch_operands_fail_to_lower_and_run_scoped_lowers(imported):
    """JAX's verdict on both forms: scratch operands of ``pl.kernel`` do not lower
    (MPMD_GPU_SCRATCH, as the check says); the same scratch allocated by the body does."""
    scoped = _scenario(imported, "sync_scoped_smem_pl_kernel")
    operands = _with_alloc(scoped, "scratch_types")
    assert "MPMD_GPU_SCRATCH" in [d.code for d in check(operands)]
    assert [d for d in check(scoped) if d.is_error] == []
    src = generate(scoped)
    assert "pl.run_scoped(lambda smem_ref, barrier: program0_body(" in src
    assert "scratch_types" not in src.split("kernel = pl.kernel(", 1)[1].split(")\n", 1)[0]
    jax_says = probe_many([scoped, operands], ("build", "trace", "gpu-lower"), timeout=300)
    assert jax_says[0]["stage"] is None
    assert jax_says[1]["code"] == "MPMD_GPU_SCRATCH"


def test_a_global_semaphore_is_shared_by_the_blocks(imported):
    """Block 1 signals, block 0 waits: on one semaphore of the device (``get_global``)
    that is a handoff; on a semaphore per block (``scratch_types``) block 0 waits
    forever, and the check says so."""
    s = _scenario(imported, "sync_global_handoff")
    assert [d for d in check(s) if d.is_error] == []
    assert "sem = pl.get_global(plgpu.SemaphoreType.REGULAR)" in generate(s)
    per_block = _with_alloc(s, "scratch_types")
    codes = [d.code for d in check(per_block) if d.is_error]
    assert any(c.startswith("DEADLOCK") for c in codes), codes
    assert not simulate(per_block).ok


def test_only_a_semaphore_is_global():
    from mpmd_lab.ops import ArrayScratch, SemaphoreScratch
    from pydantic import ValidationError

    assert SemaphoreScratch(kind="semaphore", alloc="get_global").shared
    assert not SemaphoreScratch(kind="semaphore").shared
    with pytest.raises(ValidationError):
        ArrayScratch(shape=[8], dtype="float32", alloc="get_global")


def _copy_twice(wait_read_only: bool, read_out_after: bool) -> dict:
    """x staged in SMEM, TMA-stored to out[0], the SMEM refilled, stored to out[1]."""
    body: list[dict] = [
        {"op": "copy", "src": "x_ref", "dst": "smem"},
        {"op": "commit_smem"},
        {"let": "o0", "ref": "o_ref", "transforms": [{"op": "at", "index": [0]}]},
        {"let": "o1", "ref": "o_ref", "transforms": [{"op": "at", "index": [1]}]},
        {"op": "copy_smem_to_gmem", "src": "smem", "dst": "o0"},
        {"op": "wait_smem_to_gmem", "n": 0, "wait_read_only": wait_read_only},
    ]
    if read_out_after:  # the GMEM destination of the first store, read back
        body.append({"op": "copy", "src": "o0", "dst": "smem"})
    else:
        body.append({"op": "add", "lhs": "x_ref", "rhs": "x_ref", "dst": "smem"})
    body += [
        {"op": "commit_smem"},
        {"op": "copy_smem_to_gmem", "src": "smem", "dst": "o1"},
        {"op": "wait_smem_to_gmem", "n": 0},
    ]
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "copy_twice",
        "buffers": {"x": {"shape": [8, 128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"o_ref": {"shape": [2, 8, 128], "dtype": "float32"}},
            "scratch": {"smem": {"shape": [8, 128], "dtype": "float32"}},
            "programs": [{"mesh": {}, "body": body}],
        },
    }


def test_wait_read_only_frees_the_smem_but_not_the_gmem():
    """After ``wait_read_only=True`` the SMEM source may be refilled (no race, and the
    values are the kernel's); reading the store's GMEM destination still races (its
    write may be in flight), which a full wait orders."""
    refill = load_scenario(_copy_twice(True, read_out_after=False))
    assert [d.one_line() for d in check(refill) if d.is_error] == []
    result = simulate(refill)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(result.outputs["o_ref"], np.stack([x, x + x]))
    read_back = load_scenario(_copy_twice(True, read_out_after=True))
    races = [d for d in check(read_back) if d.code.startswith("RACE")]
    assert races and all(d.is_error for d in races)
    full = load_scenario(_copy_twice(False, read_out_after=True))
    assert [d for d in check(full) if d.code.startswith("RACE")] == []
    src = generate(refill)
    assert "plgpu.wait_smem_to_gmem(0, wait_read_only=True)" in src


def test_no_wait_at_all_races_on_the_smem():
    """The control: without the read-only wait the refill races with the store's read."""
    data = _copy_twice(True, read_out_after=False)
    body = data["call"]["programs"][0]["body"]
    body.pop(5)
    races = [d for d in check(load_scenario(data)) if d.code.startswith("RACE")]
    assert races


def test_arrive_and_wait_is_an_arrive_then_a_wait(imported):
    """The fused call means what barrier_arrive followed by barrier_wait means: the same
    outputs; with the second block's arrival gone the first waits forever."""
    s = _scenario(imported, "sync_arrive_and_wait")
    data = s.to_dict()
    body = data["call"]["programs"][0]["body"]
    split: list[dict] = []
    for st in body:
        if st.get("op") == "barrier_arrive_and_wait":
            split += [{**st, "op": "barrier_arrive"}, {**st, "op": "barrier_wait"}]
        else:
            split.append(st)
    two = copy.deepcopy(data)
    two["call"]["programs"][0]["body"] = split
    a, b = simulate(s), simulate(load_scenario(two))
    assert a.ok and b.ok
    np.testing.assert_array_equal(a.outputs["o_ref"], b.outputs["o_ref"])
    one_waits = copy.deepcopy(data)
    k = next(i for i, st in enumerate(body) if st.get("op") == "barrier_arrive_and_wait")
    one_waits["call"]["programs"][0]["body"][k] = {
        "op": "when",
        "cond": "c == 0",
        "body": [{**body[k]}],
    }
    codes = [d.code for d in check(load_scenario(one_waits)) if d.is_error]
    assert any(c.startswith("DEADLOCK") for c in codes), codes


def test_an_old_scenario_without_alloc_keeps_loading():
    data = _copy_twice(False, read_out_after=False)
    body = data["call"]["programs"][0]["body"]
    del body[5]["wait_read_only"]
    s = load_scenario(data)
    assert s.call.scratch["smem"].alloc == "scratch_types"
    assert s.call.programs[0].body[5].wait_read_only is False


def test_the_gpu_interpreter_cannot_allocate_a_global_semaphore(imported):
    """JAX's GPU interpreter has no rule for ``pl.get_global`` (jax 0.12): the check's
    interpreter limit says so, and the interpreter itself fails."""
    s = _scenario(imported, "sync_get_global")
    limits = [d for d in check(s) if d.code == "INTERP_LIMIT"]
    assert [d.path for d in limits] == ["call.scratch.sem"]
    assert "pl.get_global" in limits[0].explanation and not limits[0].is_error
    r = probe_many([s], ("build", "trace", "interpret"))[0]
    assert r["stage"] == "interpret", r


def test_the_lab_moves_pl_kernel_scratch_into_the_body(imported, tmp_path):
    """In the Lab, the scratch row's ``alloc`` pick list is the fix of MPMD_GPU_SCRATCH:
    the same scratch allocated by the body with ``pl.run_scoped``."""
    import ipywidgets as w
    from mpmd_lab.widgets import Lab
    from mpmd_lab.widgets.testing import find_all

    operands = _with_alloc(_scenario(imported, "sync_scoped_smem_pl_kernel"), "scratch_types")
    path = tmp_path / "scoped.json"
    path.write_text(operands.to_json())
    lab = Lab(str(path), background=False, graph=False)
    assert "MPMD_GPU_SCRATCH" in [d.code for d in lab.state.diagnostics]
    picks = find_all(lab, "mpl-f-alloc", w.Dropdown)
    assert len(picks) == 2 and all("run_scoped" in p.options for p in picks)
    for p in picks:
        p.value = "run_scoped"
    scratch = lab.state.scenario.call.scratch
    assert [x.alloc for x in scratch.values()] == ["run_scoped", "run_scoped"]
    assert "MPMD_GPU_SCRATCH" not in [d.code for d in lab.state.diagnostics]


def test_jaxs_gpu_interpreter_computes_what_simulate_does(imported):
    """Where JAX's GPU interpreter runs them (one device, no semaphore, no cluster view),
    the exports give simulate's values bit for bit."""
    from simulate_support import run_in_jax, same_bits

    refill = _copy_twice(True, read_out_after=False)
    refill["run"] = {"interpret": "gpu"}
    scenarios = [
        _scenario(imported, "sync_wait_read_only"),
        _scenario(imported, "sync_scoped_smem_pl_kernel"),
        load_scenario(refill),
    ]
    for s, got in zip(scenarios, run_in_jax(scenarios, timeout=300), strict=True):
        assert isinstance(got, dict), (s.name, got)
        sim = simulate(s)
        assert sim.ok and set(got) == set(sim.outputs)
        for k, v in got.items():
            assert same_bits(sim.outputs[k], np.asarray(v)), (s.name, k)


def _handoff(after: str) -> dict:
    """Block 1 writes out[1] and signals a global semaphore; block 0 then reads out[1]
    into out[0] ``after``: "wait" a semaphore_wait (which takes the signal); "guard" a
    ``pl.when(pl.semaphore_read(sem) > 0)`` around the copy (then takes the signal
    back); "read" a read of the semaphore's value stored, the copy unguarded (then the
    wait)."""
    copy_ = {"op": "copy", "src": "o1", "dst": "o0"}
    wait = {"op": "semaphore_wait", "sem": "sem"}
    store = {"op": "compute", "dst": "seen", "value": "pl.semaphore_read(sem)"}
    guard = {"op": "when", "cond": "pl.semaphore_read(sem) > 0", "body": [copy_]}
    block0 = {"wait": [wait, copy_], "guard": [guard, wait], "read": [store, copy_, wait]}
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": f"handoff-{after}",
        "buffers": {"x": {"shape": [2, 128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {
                "o_ref": {"shape": [2, 128], "dtype": "float32"},
                "seen": {"shape": [], "dtype": "int32"},
            },
            "scratch": {"sem": {"kind": "semaphore", "alloc": "get_global"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 2}},
                    "body": [
                        {"let": "x1", "ref": "x_ref", "transforms": [{"op": "at", "index": [1]}]},
                        {"let": "o0", "ref": "o_ref", "transforms": [{"op": "at", "index": [0]}]},
                        {"let": "o1", "ref": "o_ref", "transforms": [{"op": "at", "index": [1]}]},
                        {
                            "op": "when",
                            "cond": "b == 1",
                            "body": [
                                {"op": "copy", "src": "x1", "dst": "o1"},
                                {"op": "semaphore_signal", "sem": "sem"},
                            ],
                        },
                        {"op": "when", "cond": "b == 0", "body": block0[after]},
                    ],
                }
            ],
        },
    }


_PTX = r"""
import importlib.util, json, os, sys
import jax
spec = importlib.util.spec_from_file_location("exported", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
fn, mesh = mod.build(None)
args = mod.place(mod.make_inputs(), mesh)
text = jax.export.export(fn, platforms=["cuda"])(*args).mlir_module()
print("@@" + json.dumps([w for w in ("ld.acquire.sys.u32", "red.release.sys.global.add.u32",
      "red.relaxed.sys") if w in text]))
"""


def test_a_semaphore_read_that_saw_the_signal_orders_like_a_wait(tmp_path):
    """``pl.semaphore_read`` is an acquire in JAX 0.12: Mosaic GPU lowers it to
    ``ld.acquire.sys.u32 $0,[$1];`` (``_semaphore_read_lowering_rule``,
    jax/_src/pallas/mosaic_gpu/lowering.py) and ``pl.semaphore_signal`` to
    ``red.release.sys.global.add.u32`` (``SemaphoreRef.signal`` with ``relaxed=False``,
    jax/experimental/mosaic/gpu/utils.py, from ``_semaphore_signal_lowering_rule`` in
    primitives.py). An acquire load that reads the value a release add wrote is ordered
    after it (PTX memory model: release pattern, acquire pattern, morally strong at .sys).

    So the handoff ordered by a wait is clean, and so is the one whose copy a read that
    saw the signal guards; a read whose value guards nothing still races (it may read 0,
    before the signal), its witness saying where the read fell. Real JAX traces and
    lowers all three for cuda, as the check accepts them."""
    results = {}
    for after in ("wait", "guard", "read"):
        diags = check(load_scenario(_handoff(after)))
        results[after] = [d for d in diags if d.is_error]
        assert not [d for d in diags if d.code == "SYNC_NOT_CHECKED"], after
    assert results["wait"] == [] and results["guard"] == [], results
    (race,) = [d for d in results["read"] if d.code == "RACE_DETECTED"]
    edge = race.witness["race"]["missing_edge"]
    assert "read 0 from" in edge and "acquire load" in edge, edge
    jax_says = probe_many(
        [load_scenario(_handoff(a)) for a in ("wait", "guard", "read")],
        ("build", "trace", "gpu-lower"),
        timeout=300,
    )
    assert [g["stage"] for g in jax_says] == [None, None, None], jax_says
    # the guarded handoff's own lowering: the read is the acquire load, the signal the
    # release add (none relaxed)
    path = tmp_path / "guard.py"
    path.write_text(generate(load_scenario(_handoff("guard"))))
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)
    p = subprocess.run(
        [sys.executable, "-c", _PTX, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    found = json.loads(p.stdout.split("@@")[-1])
    assert found == ["ld.acquire.sys.u32", "red.release.sys.global.add.u32"], found


def _two_signallers(index: int) -> dict:
    """Blocks 1 and 2 each write their row of out and signal a global semaphore; block
    0, where its read sees exactly one signal, copies row ``index`` into row 0, then
    waits for both. Which signal the read saw is the schedule's."""
    s = _handoff("guard")
    s["name"] = f"two-signallers-{index}"
    s["buffers"]["x"]["shape"] = [3, 128]
    s["call"]["outputs"]["o_ref"]["shape"] = [3, 128]
    row = {"op": "at", "index": ["b"]}
    copy_ = {"op": "copy", "src": f"o{index}", "dst": "o0"}
    s["call"]["programs"][0]["mesh"]["grid"] = {"b": 3}
    s["call"]["programs"][0]["body"] = [
        {"let": "xb", "ref": "x_ref", "transforms": [row]},
        {"let": "ob", "ref": "o_ref", "transforms": [row]},
        {"let": "o0", "ref": "o_ref", "transforms": [{"op": "at", "index": [0]}]},
        {"let": f"o{index}", "ref": "o_ref", "transforms": [{"op": "at", "index": [index]}]},
        {
            "op": "when",
            "cond": "b > 0",
            "body": [
                {"op": "copy", "src": "xb", "dst": "ob"},
                {"op": "semaphore_signal", "sem": "sem"},
            ],
        },
        {
            "op": "when",
            "cond": "b == 0",
            "body": [
                {"op": "when", "cond": "pl.semaphore_read(sem) == 1", "body": [copy_]},
                {"op": "semaphore_wait", "sem": "sem", "value": "2"},
            ],
        },
    ]
    return s


def test_a_read_orders_only_the_signal_it_saw_not_every_one_of_its_value():
    """A read of 1 may have seen block 1's signal or block 2's: each orders a different
    write before block 0's copy, so both sets are explored (4 sets of signals: none,
    either, both; with one set per value, one of the two races below goes unseen), and
    the copy of row 1 (of row 2) races that row's write where the read saw the other
    block's signal (the witness replays it), as the exhaustive explorer
    (tests/sync_explorer.py) finds too."""
    from sync_explorer import compile_scenario, explore

    for index in (1, 2):
        raw = _two_signallers(index)
        diags = check(load_scenario(raw))
        (race,) = [d for d in diags if d.code == "RACE_DETECTED"]
        assert race.message.startswith(f"Read/write race on o_ref[{index}:{index + 1}, 0:128]")
        reads = [c for c in race.witness["schedule"]["choices"] if "reads" in c]
        assert [c["value"] for c in reads] == [1] and reads[0]["sets"] == 4, reads
        res = simulate(load_scenario(raw), schedule=race.witness)
        assert res.races and not any("does not fit" in n for n in res.notes)
        assert explore(compile_scenario(raw)).label()["kinds"] == ["race"]
    jax_says = probe_many(
        [load_scenario(_two_signallers(i)) for i in (1, 2)],
        ("build", "trace", "gpu-lower"),
        timeout=300,
    )
    assert [g["stage"] for g in jax_says] == [None, None], jax_says
