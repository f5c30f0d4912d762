"""The collectives language (semaphores, barriers, TMA copies, loops, conditions, dot,
multimem, atomics) held against real JAX: the static rules agree with JAX's trace and
Mosaic GPU lowering on every case of tests/collectives_cases.py; the gallery's
collectives check valid, trace and lower (their exported files too), and draw their
synchronisation; their simulated values are numpy's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import deep, gallery, graph
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from collectives_cases import CASES, KERNELS  # noqa: E402
from jaxprobe import probe_many  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VALID = ["exchange-shards", "ring-all-gather", "ring-reduce-scatter", "collective-matmul"]
BROKEN = ["ring-all-gather-no-wait", "ring-all-gather-deadlock"]

# ---------------------------------------------------------------- the rules against JAX

ALL = {**CASES, **{f"kernel:{k}": v for k, v in KERNELS.items()}}


@pytest.fixture(scope="module")
def jax_outcomes() -> dict[str, dict]:
    """Every case through real JAX (build, trace, gpu-lower) in one child process."""
    names = list(ALL)
    res = probe_many([ALL[n] for n in names], stages=("build", "trace", "gpu-lower"))
    return dict(zip(names, res, strict=True))


def _ours(case: dict) -> tuple[str | None, str | None]:
    d = first_error(check(load_scenario(case)))
    if d is None or d.stage in ("interpret", "gpu-run"):
        return None, None  # JAX accepts it at build, trace and lowering
    return d.code, d.stage


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALL))
def test_rules_agree_with_jax(name, jax_outcomes):
    r = jax_outcomes[name]
    assert r["stage"] != "probe", r  # the case itself exports
    code, stage = _ours(ALL[name])
    assert (code, stage) == (r.get("code"), r["stage"]), (r.get("type"), r.get("message"))
    if code is not None:
        d = first_error(check(load_scenario(ALL[name])))
        assert d.jax is not None and d.jax.type == r["type"], (d.jax, r["type"])
        assert d.path, "every diagnostic names a field path"


def test_the_cases_cover_valid_and_broken_forms_of_every_construct(jax_outcomes):
    accepted = [n for n, r in jax_outcomes.items() if r["stage"] is None]
    raised = {r.get("code") for r in jax_outcomes.values() if r["stage"] is not None}
    assert len(accepted) >= 40, accepted
    assert len(raised) >= 40, sorted(raised)  # distinct JAX errors the rules predict
    ops = {
        st.get("op")
        for case in CASES.values()
        for st in _statements(case["call"]["programs"][0]["body"])
    }
    for op in (
        "semaphore_signal",
        "semaphore_signal_multicast",
        "semaphore_wait",
        "barrier_wait",
        "barrier_arrive",
        "copy_gmem_to_smem",
        "copy_smem_to_gmem",
        "commit_smem",
        "wait_smem_to_gmem",
        "loop",
        "when",
        "dot",
        "multimem_load_reduce",
        "atomic_add",
    ):
        assert op in ops, op


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_written_as_jax_writes_them_check_valid(name, jax_outcomes):
    """The patterns of JAX's own distributed kernels: JAX accepts them, and the check
    finds nothing wrong (the atomic many-to-one add too: atomics do not race)."""
    assert jax_outcomes[f"kernel:{name}"]["stage"] is None
    assert not [d.one_line() for d in check(load_scenario(KERNELS[name])) if d.is_error]


def _swap(x: np.ndarray) -> np.ndarray:
    """Two devices' shards exchanged: out_d = x_{1-d}."""
    return np.concatenate(np.split(x, 2)[::-1])


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each of 4 devices' a_d @ b_d, exact (float64 holds float16 products and sums)."""
    a4, b4 = a.astype(np.float64).reshape(4, 64, 64), b.astype(np.float64).reshape(4, 64, 128)
    return np.concatenate([a4[d] @ b4[d] for d in range(4)])


#: what each kernel computes, from its global inputs (numpy, written from the corpus
#: module's docstring, not from the simulator)
KERNEL_VALUES = {
    "ring_shift": lambda x: np.roll(x.reshape(4, -1), 1, axis=0).reshape(-1),  # from d-1
    "exchange_two_devices": _swap,
    "exchange_by_tma_load": _swap,
    "device_barrier": lambda x: x,
    "per_block_semaphores": _swap,  # block b of d lands in block b of 1-d
    "remote_atomic_add": lambda x: np.concatenate(
        [x.reshape(4, -1).sum(axis=0), np.zeros(3 * 256, np.float32)]
    ),
    "multimem_all_gather": lambda x: np.tile(x, 4),
    "multimem_all_reduce": lambda x: np.tile(x.reshape(4, -1).sum(axis=0), 4),
    "signal_multicast_barrier": lambda x: x,
    "wait_value_no_decrement": lambda x: x,
    "remote_dma_in_loop": _swap,
    "cluster_exchange": lambda x: np.concatenate([x[128:], x[:128]]),  # block c reads 1-c
    "warpgroups": lambda x: x,
    "dot_double_buffered": _matmul,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_written_as_jax_writes_them_simulate_to_what_they_compute(name):
    """Every kernel pattern runs race-free and balanced in the simulator and gives what
    the kernel computes (numpy), bit for bit where the sums are of small integers."""
    import mpmd_lab
    from mpmd_lab.exercises import inputs_of

    s = load_scenario(KERNELS[name])
    res = mpmd_lab.simulate(s)
    assert res.ok, res.error
    assert res.races == [] and res.leftover == [] and res.deadlock == []
    want = KERNEL_VALUES[name](*inputs_of(s).values())
    got = res.outputs["out"]
    assert got.shape == want.shape and got.dtype == np.float32, (got.shape, got.dtype)
    if name == "dot_double_buffered":
        np.testing.assert_allclose(got, want, rtol=64 * 2.0**-24)
    else:
        np.testing.assert_array_equal(got, want)


def test_every_kernel_has_its_values():
    assert set(KERNEL_VALUES) == set(KERNELS)


def test_conditions_written_as_jax_writes_them():
    """``(dev == 0) | (dev == 2)``: & and | of comparisons are and/or (JAX traces them so,
    rules_agree holds them against JAX); of integers they are refused, not guessed."""
    import mpmd_lab
    from mpmd_lab import expr

    e = expr.parse("(x == 0) & (y == 1) & (x < y)")
    assert isinstance(e, expr.BoolOp) and e.op == "and" and len(e.items) == 3
    assert e.eval(expr.Env({"x": 0, "y": 1}, {})) == 1
    assert e.eval(expr.Env({"x": 0, "y": 0}, {})) == 0
    with pytest.raises(expr.ExprError, match="combine comparisons"):
        expr.parse("x & 1")
    res = mpmd_lab.simulate(load_scenario(CASES["when_bitwise_and_or"]))
    assert res.ok and res.races == []
    np.testing.assert_array_equal(res.outputs["out"], np.arange(1024, dtype=np.float32))


def test_a_float64_input_is_float32_in_the_kernel():
    """Without x64, ``jax.device_put`` makes a float64 input float32: the simulator's
    kernel sees (and copies) float32, as JAX's trace does (float64_input_to_float32 is
    valid there), and its values are the float64 iota's."""
    import mpmd_lab

    res = mpmd_lab.simulate(load_scenario(CASES["float64_input_to_float32"]))
    assert res.ok, res.error
    out = res.outputs["out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.arange(4 * 256, dtype=np.float64).astype(np.float32))


#: the research corpus's error kernels, as scenarios: JAX's code and stage are ours
CORPUS_ERRORS = sorted((ROOT / "tests" / "scenarios" / "corpus_errors").glob("*.json"))


def test_corpus_error_kernels_are_refused_where_and_as_jax_refuses_them():
    assert len(CORPUS_ERRORS) >= 9
    scenarios = [load_scenario(p) for p in CORPUS_ERRORS]
    results = probe_many(scenarios, stages=("build", "trace", "gpu-lower"))
    for path, s, r in zip(CORPUS_ERRORS, scenarios, results, strict=True):
        assert r["stage"] in ("trace", "gpu-lower") and r["code"], (path.stem, r)
        d = first_error(check(s))
        assert d is not None, path.stem
        assert (d.code, d.stage) == (r["code"], r["stage"]), (path.stem, d.one_line(), r)
        assert d.jax is not None and d.jax.type == r["type"], (path.stem, d.jax, r["type"])
        assert r["message"].startswith(d.jax.message.rstrip(". ")[:40]), (d.jax, r["message"])


SCENARIOS = ROOT / "tests" / "scenarios"
#: the research corpus's 45 kernels (/work/research/kernels/corpus) -> the scenario that
#: writes it in the language, each held against JAX and the kernel's values by the tests
#: of its folder (sync/: test_engine, test_validate_sync; corpus_errors/ and KERNELS:
#: here; codes/: test_validate_codes; the gallery: above)
CORPUS = {
    **{
        k: f"sync/{k}.json"
        for k in (
            "ring_all_gather",
            "ring_all_gather_pl_loop",
            "ring_reduce_scatter",
            "collective_matmul",
            "exchange_tma_load",
            "per_block_sems_grid",
            "remote_atomic_add",
            "cluster_exchange",
            "device_barrier_sems",
            "multimem_load_reduce",
            "wait_value_nodec",
            "mesh_2x2_dict_ids",
            "mesh_2x2_partial_dict",
            "multicast_copy",
            "ring_no_wait",
            "ring_deadlock",
            "dup_ref_plgpu_kernel",
        )
    },
    "exchange_shards_4": "sync/exchange_shards.json",
    "ring_shift_sem": "KERNELS:ring_shift",
    "exchange_2dev": "KERNELS:exchange_two_devices",
    "multimem_store": "KERNELS:multimem_all_gather",
    "signal_multicast_barrier": "KERNELS:signal_multicast_barrier",
    "remote_dma_in_loop": "KERNELS:remote_dma_in_loop",
    "two_programs_warpgroups": "KERNELS:warpgroups",
    "two_block_copy": "gallery:two-block-copy",
    "collective_matmul_no_transforms": "gallery:collective-matmul",  # WG infers the tiling
    "err_dup_ref": "gallery:dup-ref",
    "err_mpmd_two_programs": "codes/MPMD_GPU_MESH_NOT_COMBINABLE.json",
    **{p.stem: f"corpus_errors/{p.name}" for p in CORPUS_ERRORS},
}
#: what the language cannot write (yet), and why
NOT_EXPRESSIBLE = {
    "all_gather_op": "JAX's own op: a persistent grid of blocks pipelining multimem stores",
    "all_gather_op_long_axis_name": "the same op (its lowering bug on a long axis name)",
    "reduce_scatter_op": "JAX's own op: persistent blocks pipelining multimem_load_reduce",
    "collective_matmul_op": "JAX's own op: 3 warpgroups, a persistent grid, pl.get_global",
    "global_semaphore_blocks": "pl.get_global (one semaphore for all blocks), x + 1.0",
    "signal_parallel": "plgpu.semaphore_signal_parallel and pl.semaphore_read",
    "dynamic_device_id": "a device id loaded from an int32 operand",
    "err_permuted_mesh": "the order of the devices in the mesh (Mesh(devices[::-1]))",
}


def test_the_corpus_map_names_every_kernel_and_each_scenario_exists():
    assert len(CORPUS) + len(NOT_EXPRESSIBLE) == 45 and not set(CORPUS) & set(NOT_EXPRESSIBLE)
    for kernel, where in CORPUS.items():
        kind, _, name = where.partition(":")
        if kind == "KERNELS":
            assert name in KERNELS, kernel
        elif kind == "gallery":
            assert name in gallery.names(), kernel
        else:
            load_scenario(SCENARIOS / where)


def _statements(body: list[dict]) -> list[dict]:
    out = []
    for st in body:
        out.append(st)
        out += _statements(st.get("body", []))
    return out


# ---------------------------------------------------------------- the gallery


@pytest.mark.parametrize("name", VALID)
def test_gallery_collectives_check_valid(name):
    diags = check(gallery.load(name))
    assert not [d.one_line() for d in diags if d.is_error]


@pytest.mark.parametrize("name", VALID + BROKEN)
def test_gallery_collectives_check_deep(name):
    """``check --deep``: real JAX traces and lowers them (the broken rings too: JAX
    never matches signals to waits), so JAX adds nothing to the static findings."""
    s = gallery.load(name)
    static = check(s)
    deep_diags = deep.deep_check(s, timeout=300, static=static)
    assert not [d.one_line() for d in deep_diags if d.code == "RULES_DISAGREE"]
    assert [d.code for d in deep_diags if d.is_error] == [d.code for d in static if d.is_error]


def test_ring_without_its_wait_is_a_race():
    codes = [d.code for d in check(gallery.load("ring-all-gather-no-wait")) if d.is_error]
    assert "RACE_DETECTED" in codes, codes


def test_ring_with_the_wrong_signal_deadlocks():
    codes = [d.code for d in check(gallery.load("ring-all-gather-deadlock")) if d.is_error]
    assert any(c.startswith("DEADLOCK") for c in codes), codes


@pytest.mark.parametrize("name", BROKEN)
def test_the_broken_rings_have_a_fix_that_makes_them_the_ring(name):
    """The fix the check offers for the race (add the wait) and for the deadlock (signal
    the slot the neighbour waits on) is verified valid, and the fixed ring simulates to
    the all-gather's values."""
    import mpmd_lab
    from mpmd_lab.fixes import apply_fix

    s = gallery.load(name)
    err = first_error(check(s))
    assert err.code == ("RACE_DETECTED" if "no-wait" in name else "DEADLOCK_SEMAPHORE")
    assert err.fix is not None and err.fix.after == [], err.fixes
    fixed = apply_fix(s, err.fix)
    assert not [d.one_line() for d in check(fixed) if d.is_error]
    res = mpmd_lab.simulate(fixed)
    assert res.ok and res.races == [] and res.leftover == [], res.error
    np.testing.assert_array_equal(res.outputs["out"], expected_values("ring-all-gather")["out"])


def _sha(a: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.mark.slow
def test_run_simulate_on_the_command_line(cli):
    """``mpmd-lab run --backend simulate``: the valid rings exit 0 with the contract's
    values (the output's digest), the deadlocked ring exits 1 quickly, naming the wait."""
    for name in ("ring-all-gather", "ring-reduce-scatter"):
        r = cli("run", name, "--backend", "simulate", "--json", timeout=120)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["status"] == "ok" and res["backend"] == "simulate", res
        want, got = expected_values(name)["out"], res["outputs"]["out"]
        assert got["shape"] == list(want.shape) and got["dtype"] == "float32", got
        if "values" in got:  # a small array comes back whole, a large one as a digest
            np.testing.assert_array_equal(np.asarray(got["values"], np.float32), want)
        else:
            assert got["sha256"] == _sha(want), name
    r = cli("run", "ring-all-gather-deadlock", "--backend", "simulate", "--json", timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    res = json.loads(r.stdout)
    assert res["error"]["code"] == "DEADLOCK_SEMAPHORE", res["error"]
    assert res["error"]["path"] == "call.programs[0].body[3].body[6]"
    assert "devices 0, 1, 2, 3" in res["error"]["message"]


_EXPORTED = r"""
import importlib.util, json, os, sys
flags = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = flags + " --xla_force_host_platform_device_count=4"
import jax
out = {}
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("exported", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        fn, mesh = mod.build(None)
        args = mod.place(mod.make_inputs(), mesh)
        fn.trace(*args)
        exp = jax.export.export(fn, platforms=["cuda"])(*args)
        out[path] = "mosaic_gpu" in exp.mlir_module()
    except Exception as e:
        out[path] = f"{type(e).__name__}: {e}"[:2000]
print("@@" + json.dumps(out))
"""


@pytest.mark.slow
def test_exported_files_trace_and_lower_for_the_gpu(cli, tmp_path):
    """``mpmd-lab export`` writes files that real JAX traces and lowers alone."""
    paths = []
    for name in VALID + BROKEN:
        p = tmp_path / f"{name.replace('-', '_')}.py"
        r = cli("export", name, "-o", str(p))
        assert r.returncode == 0, r.stderr
        paths.append(str(p))
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)  # the files are self-contained: no mpmd_lab in them
    p = subprocess.run(
        [sys.executable, "-c", _EXPORTED, *paths],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert "@@" in p.stdout, p.stderr[-3000:]
    result = json.loads(p.stdout.split("@@", 1)[1])
    assert result == {path: True for path in paths}, result


def test_exported_source_is_what_a_kernel_author_writes():
    from mpmd_lab import codegen

    src = codegen.generate(gallery.load("collective-matmul"))
    for line in (
        "plgpu.SemaphoreType.REGULAR",
        "plgpu.Barrier(num_barriers=2)",
        "plgpu.copy_gmem_to_smem(rhs_ref, b_smem, rhs_ready)",
        "plgpu.barrier_wait(rhs_ready)",
        "plgpu.wgmma(",
        "plgpu.ACC(",
        "pl.run_scoped(",
        "@pl.loop(1, 4)",
        "@pl.when(i < 4 - 1)",
        "plgpu.copy_smem_to_gmem(a_smem, to_left)",
        "pl.semaphore_signal(received, device_id=(lax.axis_index('dev') + 4 - 1) % 4)",
        "pl.semaphore_wait(received)",
    ):
        assert line in src, line
    ring = codegen.generate(gallery.load("ring-all-gather"))
    assert "lax.fori_loop(0, 4 - 1, " in ring
    assert "sems.at[i]" in ring


def _iota(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)


def expected_values(name: str) -> dict[str, np.ndarray]:
    """The gallery contract, computed with numpy (global arrays: device d's shard is
    block d of dim 0)."""
    d_, s_ = 4, 256
    if name == "exchange-shards":
        x = _iota((d_ * s_,))
        return {"out": np.concatenate([np.split(x, d_)[(d + 1) % d_] for d in range(d_)])}
    if name == "ring-all-gather":
        x = _iota((d_ * s_,))
        return {"out": np.tile(x, d_)}
    if name == "ring-reduce-scatter":
        x = _iota((d_ * d_ * s_,)).reshape(d_, d_, s_)  # [device j, chunk c, S]
        return {"out": x.sum(axis=0).reshape(-1)}
    if name == "collective-matmul":
        # the exact products of the float16 inputs (float64 holds them exactly)
        lhs = _iota((d_ * 64, 64), "float16").astype(np.float64)
        rhs = _iota((d_ * 64, 128), "float16").astype(np.float64).reshape(d_, 64, 128)
        return {"out": np.concatenate([lhs @ rhs[d] for d in range(d_)])}
    raise KeyError(name)


@pytest.mark.parametrize("name", VALID)
def test_simulated_values_are_the_contract(name):
    import mpmd_lab

    res = mpmd_lab.simulate(gallery.load(name))
    assert res.ok, res.error
    for k, v in expected_values(name).items():
        assert res.outputs[k].dtype == np.float32, (k, res.outputs[k].dtype)
        if name == "collective-matmul":
            # WGMMA sums K=64 products in a float32 accumulator, in an order of its own:
            # within 64 roundings (K * 2**-24) of the exact product, never bit for bit
            np.testing.assert_allclose(res.outputs[k], v, rtol=64 * 2.0**-24, err_msg=k)
        else:  # copies and sums of small integers: exact
            np.testing.assert_array_equal(res.outputs[k], v, err_msg=f"{name}.{k}")


def test_expected_values_hold_the_contract():
    """The numpy expectations say what the contract says (independently written)."""
    ag = expected_values("ring-all-gather")["out"].reshape(4, 1024)
    assert all((row == np.arange(1024)).all() for row in ag)
    rs = expected_values("ring-reduce-scatter")["out"].reshape(4, 256)
    x = np.arange(4 * 1024, dtype=np.float32).reshape(4, 1024)
    assert (rs[1] == sum(x[j, 256:512] for j in range(4))).all()
    ex = expected_values("exchange-shards")["out"]
    assert ex[0] == 256 and ex[3 * 256] == 0


# ---------------------------------------------------------------- the graph


def _edges(g, kind, u_kind=None):
    return [
        (u, v, e)
        for u, v, e in g.edges(data=True)
        if e["kind"] == kind and (u_kind is None or g.nodes[u]["kind"] == u_kind)
    ]


def test_signals_connect_devices_and_statements():
    g = graph.build_graph(gallery.load("exchange-shards"))
    sig = [(u, v, e) for u, v, e in _edges(g, "signals", "statement")]
    assert len(sig) == 2  # ready -> its wait, done -> its wait
    for u, v, _ in sig:
        assert g.nodes[u]["label"] == "semaphore_signal"
        assert g.nodes[v]["label"] == "semaphore_wait"
    ready = next(e for u, v, e in sig if "ready" in e["sem"])
    assert ready["pairs"] == sorted((d, (d - 1) % 4) for d in range(4))
    dev = _edges(g, "signals", "device")
    assert sorted((g.nodes[u]["index"], g.nodes[v]["index"]) for u, v, e in dev) == sorted(
        [(d, (d - 1) % 4) for d in range(4)] + [(d, (d + 1) % 4) for d in range(4)]
    )
    sync = _edges(g, "sync")
    assert {e["role"] for _, _, e in sync} == {"signal", "wait"}
    assert "signals via call.programs[0].body[0].sem: d0->d3" in graph.to_text(g)


def test_a_loop_is_a_repeat_marker_and_its_signals_are_per_step():
    g = graph.build_graph(gallery.load("ring-all-gather"))
    loop = next(n for n, d in g.nodes(data=True) if d.get("control") == "loop")
    data = g.nodes[loop]
    assert data["repeat"] and data["var"] == "i" and data["trips"] == 3
    inside = [v for _, v, e in g.out_edges(loop, data=True) if e["kind"] == "body"]
    assert inside and all(g.nodes[v]["repeats"] == 3 for v in inside)
    assert all(loop in g.nodes[v]["scope"] for v in inside)
    dev = _edges(g, "signals", "device")
    assert len(dev) == 4 * 3  # each device, each step's slot
    steps = sorted(e["steps"][0]["i"] for u, v, e in dev if u == "device:0")
    assert steps == [0, 1, 2]
    assert all(g.nodes[v]["index"] == (g.nodes[u]["index"] + 1) % 4 for u, v, e in dev)
    # each step's signal meets the wait on the same slot of the right neighbour
    assert all(e["waits"] for _, _, e in dev)


def test_the_deadlocked_ring_signals_one_slot_only():
    g = graph.build_graph(gallery.load("ring-all-gather-deadlock"))
    dev = _edges(g, "signals", "device")
    assert {e["slot"] for _, _, e in dev} == {(0,)}
    wait = next(n for n, d in g.nodes(data=True) if d["label"] == "semaphore_wait")
    diag = Diagnostic(
        code="DEADLOCK_WAIT",
        severity="error",
        stage="gpu-run",
        path=g.nodes[wait]["path"],
        message="every device waits on sems[1], which nothing signals",
    )
    g = graph.build_graph(gallery.load("ring-all-gather-deadlock"), diagnostics=[diag])
    assert g.nodes[wait]["deadlock"] and graph.is_red(g.nodes[wait])
    into = [e for u, v, e in g.in_edges(wait, data=True) if e["kind"] == "signals"]
    assert into and all(diag in e["diagnostics"] for e in into)


def test_a_wait_no_signal_reaches_is_the_wait_that_never_ends():
    data = gallery.load("exchange-shards").to_dict()
    body = data["call"]["programs"][0]["body"]
    body[0]["sem"] = "done"  # ready is waited on but never signalled
    s = load_scenario(data)
    wait_path = "call.programs[0].body[1]"
    diag = Diagnostic(code="DEADLOCK", severity="error", stage="gpu-run", path=wait_path,
                      message="ready is never signalled")  # fmt: skip
    g = graph.build_graph(s, diagnostics=[diag])
    wait = next(n for n, d in g.nodes(data=True) if d["path"] == wait_path)
    assert g.nodes[wait]["deadlock"] and g.nodes[wait]["never_signalled"]


def test_barriers_connect_copies_and_arrivals_to_their_waits():
    g = graph.build_graph(gallery.load("collective-matmul"))
    completes = _edges(g, "completes")
    assert completes
    for u, v, _ in completes:
        assert g.nodes[u]["label"] == "copy_gmem_to_smem"
        assert g.nodes[v]["label"] == "barrier_wait"
    # the rhs load completes on bars[0] only: its wait, not the lhs waits
    rhs = next(n for n, d in g.nodes(data=True) if d.get("text", "").startswith("b_smem <~"))
    assert [g.nodes[v]["text"] for _, v, e in g.out_edges(rhs, data=True)
            if e["kind"] == "completes"] == ["wait rhs_ready"]  # fmt: skip
    when = next(n for n, d in g.nodes(data=True) if d.get("control") == "when")
    assert g.nodes[when]["repeats"] == 3
    arr = load_scenario(CASES["arrive_wait"])
    assert len(_edges(graph.build_graph(arr), "arrives")) == 1


# ---------------------------------------------------------------- values on one device

#: one device: the GPU interpreter runs TMA loads and stores, barriers, WGMMA, loops and
#: conditions (not semaphores, remote refs, multimem or atomics: INTERP_LIMIT)
ONE_DEVICE = {
    "tma_roundtrip": lambda: _one(
        {**CASES["load_store"]},
        lambda x: {"out": x},
    ),
    "dot": lambda: _one(
        {**CASES["dot"]},
        lambda a, b: {"out": a.astype(np.float32) @ b.astype(np.float32)},
    ),
    "loop_and_when": lambda: _one(
        {**CASES["loop_index_view"]},
        lambda x: {"out": np.concatenate([x[:256], np.full(256, np.nan, np.float32)])},
        shapes=(512,),
    ),
}


def _one(case: dict, expected, shapes: tuple[int, ...] | None = None):
    d = json.loads(json.dumps(case))
    d.pop("device_mesh", None)
    if shapes is not None:  # a larger buffer and output than the loop writes
        for b in d["buffers"].values():
            b["shape"] = list(shapes)
        for o in d["call"]["outputs"].values():
            o["shape"] = list(shapes)
    return load_scenario(d), expected


@pytest.mark.parametrize("name", list(ONE_DEVICE))
def test_one_device_collectives_interpret_to_numpy(name):
    """The exported TMA copies, barriers, dot, loops and views compute what numpy does,
    in JAX's GPU interpreter (auto picks it: no INTERP_LIMIT on one device)."""
    from mpmd_lab import probe, runtime

    s, expected = ONE_DEVICE[name]()
    assert not [d for d in check(s) if d.code in runtime.INTERP_CANNOT]
    r = probe.probe(s, ("build", "trace", "interpret"), timeout=300, detect_races=False)
    assert r.ok, r.message
    inputs = [_iota(tuple(b.shape), b.dtype) for b in s.buffers.values()]
    for k, v in expected(*inputs).items():
        np.testing.assert_allclose(r.outputs[k], v, rtol=1e-3, equal_nan=True, err_msg=k)
