"""mpmd_lab.from_jax against real JAX: kernels written as JAX's distributed tests write
them (tests/kernels/*.py) are traced, never run, and read into scenarios that JAX
traces and lowers again, that the simulator runs to the kernel's values, and whose
errors point at the user's lines.

The imports run in child processes (tests/importer_driver.py), one per device count,
since JAX fixes its device count when it starts.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import probe
from mpmd_lab.importer import Imported
from mpmd_lab.importer.child import child_env, module_devices

pytestmark = pytest.mark.slow  # imports kernels through real JAX in child processes

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
DRIVER = HERE / "importer_driver.py"

#: the kernels the issue names, and more patterns; each must import faithfully
VALID = [
    "two_block_copy",
    "ring_shift_sem",
    "exchange_2dev",
    "ring_all_gather",
    "ring_reduce_scatter",
    "multicast_copy",
    "mesh_2x2_dict_ids",
    "ring_all_gather_pl_loop",
    "exchange_tma_load",
    "exchange_shards_4",
    "cluster_exchange",
    "mesh_2x2_partial_dict",
    "per_block_sems_grid",
    "multimem_store",
    "multimem_load_reduce",
    "remote_dma_in_loop",
    "all_gather_op",
    "transposed_spec",
    "ring_gather_left",
    "allreduce_pull",
    "logical_ring_2x2",
    "gather_matmul_wgmma",
    "uneven_split",
    "pair_swap_where",
    "scratch_dict",
    # values computed in registers (a compute statement)
    "values_axpy",
    "values_iota_cast",
    "values_max_bf16",
    "values_device_index",
    "two_programs_warpgroups",
    "dup_ref_one_memory",
    "values_traced_divisor",
    # JAX's distributed tests, written with plgpu.kernel (the form JAX 0.12 lowers)
    "remote_tma_tuple_ids",
    "mm_load_reduce_slice",
    "mm_store_tma_iota",
    "signal_multicast_wait",
    "wait_nodec",
    "wait_twice",
    "mm_store_regs_iota",  # multimem_store of a register value
    "reduce_scatter_op",  # JAX's ops/gpu/reduce_scatter_mgpu, as _test_reduce_scatter calls it
]
#: seed errors: (module, code, the text of the line JAX's error points at)
SEEDS = [
    ("err_dup_ref", "MPMD_DUP_REF", "out_type=())(x_ref, x_ref)"),
    ("err_peer_to_multicast", "REF_PEER_TO_MULTICAST", "plgpu.multicast_ref(plgpu.remote_ref("),
    ("err_multicast_to_peer", "REF_MULTICAST_TO_PEER", "plgpu.remote_ref(plgpu.multicast_ref("),
    ("err_rejected_in_when", "SWAP_DTYPE_MISMATCH", "o_ref[b] = x_ref[...].astype(jnp.int32)"),
    ("err_short_when", "COND_PRED_SHAPE", "@pl.when(flag_ref[...] > 0)"),
]
#: seeds rejected inside the kernel body: the import opens on what was traced, without
#: the rejected statement and those that use what it made (the line of each left out)
OPENED = {
    "err_peer_to_multicast": [
        "dst = plgpu.multicast_ref(",
        "plgpu.copy_smem_to_gmem(smem_ref, dst)",
    ],
    "err_multicast_to_peer": ["dst = plgpu.remote_ref(", "plgpu.copy_smem_to_gmem(smem_ref, dst)"],
    "err_rejected_in_when": ["o_ref[b] = x_ref[...].astype(jnp.int32)"],
}
#: kernels with a construct the scenario cannot express: (module, name in unsupported, line)
UNSUPPORTED = [
    ("negative_rem", "rem (lax.rem)", "lax.rem(dev - 1, DEVICES)"),
    ("exp_partial", "exp", "jnp.exp(x_ref[...])"),
]
#: pl.pallas_call with plgpu.CompilerParams, as JAX's distributed tests write their
#: kernels: JAX 0.12 traces it and does not lower it (module, the line the import names)
PALLAS_CALLS = [
    ("pallas_call_remote_dma", "return pl.pallas_call("),
    ("pallas_call_wait_twice", "def kernel(y_ref, sem):"),
    ("pallas_call_wait_nodec", "def kernel(y_ref, sem):"),
    ("pallas_call_signal_multicast", "def kernel(y_ref, sem):"),
]


def _line_of(module: str, text: str) -> int:
    """The line (outside the module's docstring) that holds ``text``."""
    import ast

    source = (KERNELS / f"{module}.py").read_text()
    doc = ast.parse(source).body[0]
    skip = range(doc.lineno, doc.end_lineno + 1) if isinstance(doc, ast.Expr) else range(0)
    lines = source.splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if text in line and i + 1 not in skip]
    assert len(hits) == 1, (module, text, hits)
    return hits[0]


def _import_all(names: list[str], tmp: Path) -> dict[str, dict]:
    groups: dict[int, list[Path]] = {}
    for n in names:
        p = KERNELS / f"{n}.py"
        groups.setdefault(module_devices(p) or 1, []).append(p)
    out: dict[str, dict] = {}
    for devices, paths in sorted(groups.items()):
        target = tmp / f"import-{devices}.pickle"
        subprocess.run(
            [sys.executable, str(DRIVER), str(target), *map(str, paths)],
            env=child_env(devices),
            check=True,
            timeout=600,
            cwd=HERE.parent,
        )
        out.update(pickle.loads(target.read_bytes()))
    return out


def imported_all(names: list[str], tmp: Path) -> dict[str, dict]:
    """``_import_all``, each import read back as an ``Imported`` (``["obj"]``); a module
    the driver could not import at all fails the test that asked for it."""
    raw = _import_all(names, tmp)
    for name, r in raw.items():
        assert "error" not in r, f"{name}: {r.get('error')}"
        r["obj"] = Imported.from_json(r["imported"])
    return raw


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, dict]:
    names = VALID + [s[0] for s in SEEDS] + [u[0] for u in UNSUPPORTED]
    names += [c[0] for c in PALLAS_CALLS] + ["pallas_call_smem_out", "collective_matmul_op"]
    names += ["datadep_count_peer", "two_kernel_calls"]
    return imported_all(names, tmp_path_factory.mktemp("imports"))


# ---------------------------------------------------------------- faithful imports


@pytest.mark.parametrize("name", VALID)
def test_valid_kernel_imports_faithfully(imported, name):
    imp = imported[name]["obj"]
    assert imp.scenario is not None, imp.summary()
    assert imp.unsupported == [], imp.unsupported
    errors = [d for d in imp.diagnostics if d.is_error]
    assert errors == [], [d.one_line() for d in errors]
    # every statement keeps the user's line, in the kernel's own file
    body = imp.scenario.call.programs[0].body
    for i in range(len(body)):
        where = imp.source_of(f"call.programs[0].body[{i}]")
        assert where is not None and where.startswith(str(KERNELS / f"{name}.py")), (i, where)
    assert imported[name]["seconds"] < 30


@pytest.mark.parametrize("name", VALID + [u[0] for u in UNSUPPORTED])
def test_real_jax_traces_and_lowers_the_kernel(imported, name):
    """The test kernels are real: JAX traces them and runs the Mosaic GPU lowering."""
    assert imported[name]["lowered"] == "ok", imported[name]["lowered"]


def _kinds(body) -> list[str]:
    out = []
    for st in body:
        out.append(st.kind)
        out += _kinds(getattr(st, "body", None) or [])
    return out


def test_a_wgmma_in_a_scoped_accumulator_is_a_dot(imported):
    s = imported["gather_matmul_wgmma"]["obj"].scenario
    body = s.call.programs[0].body
    dots = [st for st in body if st.kind == "dot"]
    assert [(d.lhs, d.rhs) for d in dots] == [("a_smem", "b_smem")] * 2
    assert "ACC" not in json.dumps(s.call.model_dump())  # registers, not scratch


def test_a_sum_of_four_keeps_jaxs_order(imported):
    body = imported["allreduce_pull"]["obj"].scenario.call.programs[0].body
    adds = [st for st in body if st.kind == "add"]
    assert len(adds) == 3
    assert adds[0].lhs == "x_ref" and adds[0].dst == "o_ref"
    assert all((a.dst, a.lhs) == ("o_ref", "o_ref") for a in adds[1:])


def test_a_condition_used_as_a_number_is_written_in_arithmetic(imported):
    body = imported["uneven_split"]["obj"].scenario.call.programs[0].body
    loop = next(st for st in body if st.kind == "loop")
    assert loop.stop == "2 - dev"  # 3 // 2 + int(dev < 1): no bool where JAX takes an int


def test_an_integer_picked_by_a_condition_is_arithmetic(imported):
    body = imported["pair_swap_where"]["obj"].scenario.call.programs[0].body
    signal = next(st for st in body if st.kind == "semaphore_signal")
    assert isinstance(signal.device, str) and "==" not in signal.device  # jnp.where's pick


def test_logical_device_ids_become_mesh_coordinates(imported):
    body = imported["logical_ring_2x2"]["obj"].scenario.call.programs[0].body
    signal = next(st for st in body if st.kind == "semaphore_signal")
    assert isinstance(signal.device, dict) and list(signal.device) == ["x", "y"]


def test_the_statements_are_the_kernels(imported):
    """Read off the ring all-gather: its loop, its index arithmetic, its handshake."""
    imp = imported["ring_all_gather"]["obj"]
    s = imp.scenario
    assert s.device_mesh == {"dev": 4}
    assert s.call.entry == "plgpu.kernel"
    assert [a.param for a in s.call.args] == ["x_ref"]
    assert list(s.call.outputs) == ["o_ref"]
    assert s.call.scratch["sems"].KIND == "semaphore" and s.call.scratch["sems"].shape == [3]
    body = s.call.programs[0].body
    loop = next(st for st in body if getattr(st, "kind", "") == "loop")
    assert (loop.var, loop.start, loop.stop, loop.via) == ("s", 0, 3, "fori_loop")
    kinds = [st.kind for st in loop.body]
    assert kinds.count("copy") == 1 and "semaphore_signal" in kinds and "semaphore_wait" in kinds
    signal = next(st for st in loop.body if st.kind == "semaphore_signal")
    assert signal.device == "(dev + 1) % 4"
    text = json.dumps([st.model_dump() for st in loop.body])
    assert "(dev - s + 4) % 4 * 256" in text  # lax.rem(dev + D - s, D) * S, never negative
    loop_line = _line_of("ring_all_gather", "lax.fori_loop(")
    assert imp.source_of(f"call.programs[0].body[{body.index(loop)}]").endswith(f":{loop_line}")


def test_pl_loop_is_a_loop_too(imported):
    body = imported["ring_all_gather_pl_loop"]["obj"].scenario.call.programs[0].body
    loop = next(st for st in body if getattr(st, "kind", "") == "loop")
    assert loop.via == "pl.loop" and (loop.start, loop.stop) == (0, 3)


def test_dict_device_ids_and_mesh_axes(imported):
    s = imported["mesh_2x2_dict_ids"]["obj"].scenario
    assert s.device_mesh == {"x": 2, "y": 2}
    signal = next(st for st in s.call.programs[0].body if st.kind == "semaphore_signal")
    assert signal.device == {"x": "1 - x", "y": "1 - y"}
    partial = imported["mesh_2x2_partial_dict"]["obj"].scenario
    peer = next(
        t for st in partial.call.programs[0].body if st.kind == "let" for t in st.transforms
    )
    assert peer.op == "remote_ref" and peer.device == {"x": "1 - x"}


def test_buffers_hold_the_arguments_values(imported):
    # iota where the values are iota; the exact values (global form) where they are not
    assert imported["ring_all_gather"]["obj"].scenario.buffers["x"].init == "iota"
    rs = imported["ring_reduce_scatter"]["obj"].scenario.buffers["x"]
    from mpmd_lab.memory import host_value

    want = (np.arange(4 * 4 * 256) % 97).astype(np.float32)
    np.testing.assert_array_equal(host_value(rs, 4), want)
    # a transposed spec: the scenario keeps P(None, 'dev') and the global value, each
    # device holding its column block
    s = imported["transposed_spec"]["obj"].scenario
    assert s.call.args[0].spec == [None, "dev"] and s.global_shape("x") == [8, 256]
    g = (np.arange(8 * 256) % 251).astype(np.float32).reshape(8, 256)
    np.testing.assert_array_equal(host_value(s.buffers["x"], 2, s.global_shape("x")), g)


def test_scratch_layouts_and_barriers(imported):
    sc = imported["cluster_exchange"]["obj"].scenario.call.scratch
    smem = next(v for v in sc.values() if v.KIND == "array")
    assert smem.shape == [64, 32] and smem.memory_space == "SMEM"
    assert [t.op for t in smem.transforms] == ["tiling", "swizzle"]
    kinds = sorted(v.KIND for v in sc.values())
    assert kinds == ["array", "barrier", "cluster_barrier"]


# ---------------------------------------------------------------- JAX again


@pytest.mark.slow
def test_exported_scenarios_trace_and_lower_for_the_gpu(imported):
    scenarios = [imported[n]["obj"].scenario for n in VALID]
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=300)
    bad = {
        n: (r.stage, r.error_type, (r.message or "")[:200])
        for n, r in zip(VALID, results, strict=True)
        if not r.ok
    }
    assert bad == {}


# ---------------------------------------------------------------- what the kernel computes


@pytest.mark.parametrize("name", VALID)
def test_simulate_gives_what_the_kernel_computes(imported, name):
    from mpmd_lab import simulate

    r = imported[name]
    imp = r["obj"]
    result = simulate(imp.scenario)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    got = imp.outputs(result.outputs)
    assert len(got) == len(r["expected"])
    for g, e in zip(got, r["expected"], strict=True):
        assert g is not None
        np.testing.assert_array_equal(g, e)
    # the scenario carries the user's in and out specs: simulate's outputs themselves
    # are the function's results (side by side for transposed_spec's P(None, "dev"))
    for res, e in zip(imp.results, r["expected"], strict=True):
        np.testing.assert_array_equal(result.outputs[res.name], e)


# ---------------------------------------------------------------- errors at the user's line


@pytest.mark.parametrize("name,code,text", SEEDS)
def test_seed_error_at_the_users_line(imported, name, code, text):
    imp = imported[name]["obj"]
    if name not in OPENED:  # rejected at the call itself: nothing was traced to show
        assert imp.scenario is None
        assert [d.code for d in imp.diagnostics] == [code]
    d = imp.diagnostics[0]  # JAX's rejection first
    assert d.code == code
    assert d.stage == "trace" and d.jax is not None
    assert d.source == f"{KERNELS / name}.py:{_line_of(name, text)}"
    assert d.explanation  # the card's meaning and its first fix


@pytest.mark.parametrize("name", sorted(OPENED))
def test_a_rejected_kernel_opens_on_what_was_traced(imported, name):
    """JAX rejects a statement of the body at trace: the import is the kernel traced
    again without it (and without the statements that use what it made), partial, each
    left out at its line; never valid, never simulated as if whole."""
    from mpmd_lab import simulate

    imp = imported[name]["obj"]
    assert imp.scenario is not None and imp.scenario.call.programs[0].body
    assert not imp.faithful and not imp.ok
    left = imp.scenario.not_imported
    texts = OPENED[name]
    assert len(left) == len(texts)
    for n, text in zip(left, texts, strict=True):
        assert n.source == f"{KERNELS / name}.py:{_line_of(name, text)}"
        assert n.path == "call.programs[0].body"
    assert "JAX rejected it" in left[0].what
    assert all("which a statement left out made" in n.what for n in left[1:])
    errors = [d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED"]
    assert len(errors) == len(texts) and all(d.is_error for d in errors)
    r = simulate(imp.scenario)
    assert not r.ok and r.outputs == {} and r.error.code == "IMPORT_UNSUPPORTED"


def test_the_retrace_leaves_the_users_function_as_it_was(tmp_path):
    """The rewritten kernel is traced through fresh copies, never through the user's
    function: it keeps its code, and is rejected again, exactly as before the import
    (JAX's caches, keyed by the copies, do not serve the rewritten trace to it)."""
    path = str(KERNELS / "err_rejected_in_when.py")
    script = textwrap.dedent(
        f"""
        import importlib.util, jax
        from mpmd_lab.importer import from_jax
        spec = importlib.util.spec_from_file_location("k", {path!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn, args = mod.make()
        code = mod.kernel.__code__
        imp = from_jax(fn, *args)
        assert imp.scenario is not None and not imp.faithful
        assert mod.kernel.__code__ is code
        for f in (fn, jax.jit(mod.make()[0])):
            try:
                f.trace(*args)
            except ValueError as e:
                assert "Invalid dtype for `swap`" in str(e), e
            else:
                raise AssertionError("the rewritten trace served a later call")
        print("restored")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script],
        env=child_env(1),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
    )
    assert r.returncode == 0 and "restored" in r.stdout, r.stderr[-2000:]


@pytest.mark.parametrize("name,what,text", UNSUPPORTED)
def test_unsupported_named_at_its_line(imported, name, what, text):
    imp = imported[name]["obj"]
    line = _line_of(name, text)
    hits = [u for u in imp.unsupported if u.startswith(what)]
    assert hits and all(f"{name}.py:{line})" in u for u in hits), imp.unsupported
    assert imp.scenario is not None  # the rest is still there to look at


@pytest.mark.parametrize("name,what,text", UNSUPPORTED)
def test_a_partial_import_is_never_valid_or_ok(imported, name, what, text):
    """What the import left out is an error at the user's line (their own text, their
    own names), the scenario says it is partial (a saved file too), and neither the
    check, simulate nor a run says "valid" or "ok" about it."""
    from mpmd_lab import runtime, simulate, validate
    from mpmd_lab.scenario import load_scenario

    imp = imported[name]["obj"]
    assert not imp.faithful and not imp.ok
    line = _line_of(name, text)
    errors = [d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED"]
    assert errors and all(d.is_error for d in errors)
    assert len(errors) == len(imp.unsupported)
    mine = [d for d in errors if d.source == f"{KERNELS / name}.py:{line}"]
    assert mine and all(text in d.message for d in mine), [d.message for d in errors]
    assert all(f"{name}.py:{line}: " in d.message for d in mine)
    # a saved partial scenario stays partial
    again = load_scenario(imp.scenario.to_json())
    assert again.not_imported == imp.scenario.not_imported
    analysis = validate.analyze(again)
    assert not analysis.valid
    assert analysis.first_error is not None
    assert "IMPORT_UNSUPPORTED" in [d.code for d in analysis.diagnostics if d.is_error]
    for check in (True, False):
        r = simulate(again, check=check)
        assert not r.ok and r.outputs == {}
        assert r.error is not None and r.error.is_error
    assert simulate(again, check=False).error.code == "IMPORT_UNSUPPORTED"
    for backend in ("simulate", "interpret"):
        res = runtime.run(again, backend, analysis=analysis)
        assert res.status == "error" and res.error.code == "IMPORT_UNSUPPORTED", backend
        assert not res.outputs


@pytest.mark.parametrize("name,text", PALLAS_CALLS)
def test_a_pallas_call_is_partial_and_holds_the_plgpu_kernel_it_equals(imported, name, text):
    """JAX 0.12 lowers no Mosaic GPU pl.pallas_call (real JAX: the user's function stops
    at gpu_lowering's AssertionError): the import says so at the call's line and is not
    ok; what it holds is the plgpu.kernel the call equals (no grid, operands whole in
    GMEM), which JAX lowers and which computes the kernel's values."""
    from mpmd_lab import simulate
    from mpmd_lab.scenario import load_scenario

    r = imported[name]
    imp = r["obj"]
    assert r["lowered"].startswith("AssertionError"), r["lowered"]
    line = _line_of(name, text)
    assert len(imp.unsupported) == 1 and imp.unsupported[0].startswith(
        f"pallas_call (at {name}.py:{line}): JAX 0.12 has no Mosaic GPU lowering"
    ), imp.unsupported
    assert not imp.faithful and not imp.ok
    assert imp.scenario.call.entry == "plgpu.kernel"
    data = json.loads(imp.scenario.to_json())
    data.pop("not_imported")  # the rewrite the message offers
    rewritten = load_scenario(data)
    result = simulate(rewritten)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    for res, e in zip(imp.results, r["expected"], strict=True):
        np.testing.assert_array_equal(result.outputs[res.name], e)
    (lowered,) = probe.probe_many([rewritten], ("build", "trace", "gpu-lower"), timeout=300)
    assert lowered.ok, (lowered.stage, lowered.error_type, lowered.message)


def test_a_pallas_call_through_smem_is_refused_at_the_kernel(imported):
    """An output block spec in SMEM (the call copies it back after the body) is not
    plgpu.kernel's kernel either: the import says so at the kernel's def, and is not ok."""
    imp = imported["pallas_call_smem_out"]["obj"]
    line = _line_of("pallas_call_smem_out", "def kernel(")
    hits = [u for u in imp.unsupported if u.startswith("pallas_call")]
    assert len(hits) == 1 and f"pallas_call_smem_out.py:{line})" in hits[0]
    assert "output 0 puts it in SMEM" in hits[0]
    where = f"{KERNELS / 'pallas_call_smem_out'}.py:{line}"
    errors = [d for d in imp.diagnostics if d.is_error]
    assert errors and all(d.source == where for d in errors), [d.source for d in errors]
    assert imported["pallas_call_smem_out"]["lowered"].startswith("AssertionError")
    assert not imp.faithful and not imp.ok


def test_an_error_no_rule_knows_says_what_and_where_it_was_raised(imported):
    """JAX's own collective matmul op asks the device for its SM count while tracing; a
    CPU device has none. No user line is in the traceback: the error names its type and
    the op's line that raised it, not only "an error no rule knows"."""
    imp = imported["collective_matmul_op"]["obj"]
    assert imp.scenario is None and not imp.ok
    (d,) = [d for d in imp.diagnostics if d.is_error]
    assert d.code == "JAX_UNKNOWN" and d.jax.type == "AttributeError"
    assert "AttributeError (raised at collective_matmul_mgpu.py:" in d.message
    assert "jax.devices()[0].core_count" in d.message


def test_a_device_id_reduced_from_data_is_named_with_its_load(imported):
    """test_remote_dma_dynamic_index's peer, jnp.sum(x_ref[...] == 1): an integer scalar
    made by a reduction of a loaded array, which index expressions do not hold. Each use
    says so at its line, naming the load and its line (not 'not an integer scalar')."""
    name = "datadep_count_peer"
    r = imported[name]
    assert r["lowered"] == "ok"  # JAX lowers the kernel as written
    imp = r["obj"]
    load = _line_of(name, "peer = jnp.sum(x_ref[...] == 1")
    uses = [
        _line_of(name, "pl.semaphore_signal(ready_sem"),
        _line_of(name, "plgpu.remote_ref(y_ref, peer)"),
        _line_of(name, "pl.semaphore_signal(recv_sem"),
    ]
    why = (
        "a device id computed in registers by a reduction of x_ref[...] "
        f"(loaded at {name}.py:{load})"
    )
    assert [u for u in imp.unsupported if u.startswith(why)] == imp.unsupported
    assert sorted(int(u.rsplit(":", 1)[1].rstrip(")")) for u in imp.unsupported) == uses
    assert not imp.faithful and not imp.ok
    # the signals left out leave every wait unsatisfied: no deadlock is claimed for it
    errors = {d.code for d in imp.diagnostics if d.is_error}
    assert errors == {"IMPORT_UNSUPPORTED"}, errors
    (hang,) = [d for d in imp.diagnostics if d.code == "DEADLOCK_SEMAPHORE"]
    assert hang.severity == "warning" and hang.message.startswith(
        "not judged: the import left out 3 construct(s)"
    )
    # the same check of a whole scenario keeps its deadlock an error
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.validate import check

    data = json.loads(imp.scenario.to_json())
    data.pop("not_imported")
    assert "DEADLOCK_SEMAPHORE" in {d.code for d in check(load_scenario(data)) if d.is_error}


def test_each_kernel_call_left_out_is_at_its_own_line(imported):
    """test_remote_dma_several_mosaic_ops calls two kernels in a loop: the scenario holds
    the first call; every other call (each line once) and what the function computes
    from it are errors at their own lines, not at the first call's."""
    name = "two_kernel_calls"
    imp = imported[name]["obj"]
    first = _line_of(name, "r = _call(one_sem, 1)(r)")
    second = _line_of(name, "r = _call(two_sems, 2)(r)")
    errors = [d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED"]
    at = {f"{KERNELS / name}.py:{k}" for k in (first, second)}
    assert len(errors) == 3 and {d.source for d in errors} == at
    for d in errors:
        assert f"(at {name}.py:{d.source.rsplit(':', 1)[1]})" in d.message, d.message
    assert list(imp.scenario.call.scratch) == ["done"]  # the first kernel, one_sem
    assert not imp.faithful and not imp.ok


def test_a_body_construct_left_out_points_into_the_body(imported):
    s = imported["exp_partial"]["obj"].scenario
    assert s.call.programs[0].body == []  # the store of exp(x) is the one left out
    (n,) = s.not_imported
    assert n.path == "call.programs[0].body" and n.what.startswith("exp")
    assert n.source == f"{KERNELS / 'exp_partial.py'}:{_line_of('exp_partial', 'jnp.exp(')}"


def test_a_written_scenario_has_no_not_imported_field():
    from mpmd_lab.gallery import path_of
    from mpmd_lab.scenario import load_scenario

    s = load_scenario(path_of("ring-all-gather"))
    assert s.not_imported == [] and "not_imported" not in s.to_dict()


def test_scratch_given_as_a_dict_keeps_each_name(imported):
    """JAX binds a scratch dict by keyword, keys sorted: each ref keeps its own name
    (smem_ref the SMEM array, barrier_ref the barrier), not the def's positions."""
    s = imported["scratch_dict"]["obj"].scenario
    sc = s.call.scratch
    assert sc["smem_ref"].KIND == "array" and sc["smem_ref"].shape == [8, 128]
    assert sc["barrier_ref"].KIND == "barrier"
    body = s.call.programs[0].body
    load = next(st for st in body if st.kind == "copy_gmem_to_smem")
    assert (load.dst, load.barrier) == ("smem_ref", "barrier_ref")
    wait = next(st for st in body if st.kind == "barrier_wait")
    assert wait.barrier == "barrier_ref"


def test_a_device_order_is_kept_and_its_lowering_error_reported(tmp_path):
    """A mesh listing its devices as 2, 0, 3, 1: the scenario keeps the order, the check
    reports the Mosaic GPU lowering's own error, which real JAX gives both for the user's
    function and for the exported scenario."""
    name = "ring_shift_device_order"
    imp = Imported.from_json(_import_all([name], tmp_path)[name]["imported"])
    assert imp.faithful and imp.scenario.device_order == [2, 0, 3, 1]
    (d,) = [d for d in imp.diagnostics if d.is_error]
    want = (
        "Mosaic GPU only supports meshes with device ordering that follows row-major "
        "device ids. Got: [2 0 3 1] device ids."
    )
    assert (d.code, d.stage, d.jax.message) == ("MESH_DEVICE_ORDER", "gpu-lower", want)
    # what real JAX says: the user's function, and the scenario exported
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, importlib.util; sys.path.insert(0, 'tests');"
            "import importer_driver as d;"
            f"m = d.load(__import__('pathlib').Path({str(KERNELS / (name + '.py'))!r}));"
            "fn, args = m.make(); print('LOWER', d.lower(fn, args))",
        ],
        env=child_env(4),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
    )
    assert f"LOWER NotImplementedError: {want}" in done.stdout, done.stdout + done.stderr[-2000:]
    r = probe.probe(imp.scenario, ("build", "trace", "gpu-lower"), timeout=300)
    assert (r.stage, r.error_type, r.message) == ("gpu-lower", "NotImplementedError", want)
    # row-major again: the error goes, the kernel lowers
    fixed = imp.scenario.model_copy(update={"device_order": None})
    from mpmd_lab import validate

    assert not any(d.code == "MESH_DEVICE_ORDER" for d in validate.check(fixed))


def test_an_old_scenario_without_device_order_keeps_loading():
    from mpmd_lab.scenario import ScenarioError, load_scenario

    data = json.loads((HERE.parent / "toolkit/gallery/ring-shift.json").read_text())
    assert "device_order" not in data
    s = load_scenario(data)
    assert s.device_order is None and "device_order" not in s.to_dict()
    with pytest.raises(ScenarioError):
        load_scenario({**data, "device_order": [0, 0, 1, 2]})


# ---------------------------------------------------------------- never run, never hang


def _write(tmp: Path, name: str, body: str) -> Path:
    p = tmp / f"{name}.py"
    p.write_text(HEADER + textwrap.dedent(body))
    return p


HEADER = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
"""


def test_a_trace_that_never_ends_is_stopped(tmp_path):
    p = _write(
        tmp_path,
        "forever",
        """
        def kernel(x_ref, o_ref):
            while True:  # at trace time: Python never leaves the body
                pass

        def make():
            f = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((128,), jnp.float32))
            return jax.jit(f), (jnp.zeros(128),)
        """,
    )
    code = textwrap.dedent(f"""
        import time, importlib.util, json
        spec = importlib.util.spec_from_file_location("forever", {str(p)!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        from mpmd_lab.importer import from_jax
        fn, args = m.make()
        t0 = time.perf_counter()
        imp = from_jax(fn, *args, timeout=3)
        print(json.dumps([[d.code for d in imp.diagnostics], time.perf_counter() - t0]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=child_env(1)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    codes, seconds = json.loads(out.stdout.strip().splitlines()[-1])
    assert codes == ["IMPORT_TIMEOUT"] and seconds < 20


def test_the_time_limit_covers_translating_and_checking(tmp_path):
    """A kernel unrolled into 8000 statements, traced once beforehand (JAX caches the
    trace): the import's own translation and static check take seconds, and a limit
    well under that stops them (IMPORT_TIMEOUT), in a fraction of the unbounded time
    measured in the same process (so a loaded machine slows both alike)."""
    p = _write(
        tmp_path,
        "unrolled",
        """
        from jax.experimental import pallas as pl

        def kernel(x_ref, o_ref):
            for i in range(8000):  # unrolled while tracing: 8000 statements
                o_ref[pl.ds((i % 2) * 128, 128)] = x_ref[pl.ds((i % 2) * 128, 128)]

        def make():
            f = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((256,), jnp.float32))
            return jax.jit(f), (jnp.zeros(256),)
        """,
    )
    code = textwrap.dedent(f"""
        import time, importlib.util, json
        spec = importlib.util.spec_from_file_location("unrolled", {str(p)!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        from mpmd_lab.importer import from_jax
        fn, args = m.make()
        fn.trace(*args)  # JAX's trace cache: from_jax's own trace is now instant
        t0 = time.perf_counter()
        whole = from_jax(fn, *args, timeout=None)
        unbounded = time.perf_counter() - t0
        t0 = time.perf_counter()
        imp = from_jax(fn, *args, timeout=unbounded / 4)
        bounded = time.perf_counter() - t0
        print(json.dumps([[d.code for d in imp.diagnostics if d.is_error],
                          [d.message for d in imp.diagnostics if d.is_error],
                          whole.faithful, unbounded, bounded]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=child_env(1)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    codes, messages, faithful, unbounded, bounded = json.loads(out.stdout.strip().splitlines()[-1])
    assert faithful  # without a limit it imports
    assert codes == ["IMPORT_TIMEOUT"], (codes, messages)
    assert "translating" in messages[0] or "static check" in messages[0]
    assert bounded < 0.75 * unbounded, (bounded, unbounded)


def test_importing_never_runs_the_function(tmp_path):
    marker = tmp_path / "ran"
    p = _write(
        tmp_path,
        "side_effect",
        f"""
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        def note(x):
            open({str(marker)!r}, "w").write("ran")

        def fn(x):
            jax.debug.callback(note, x)  # runs only when the function runs
            return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((128,), jnp.float32))(x)

        def make():
            return jax.jit(fn), (jnp.zeros(128),)
        """,
    )
    from mpmd_lab.importer import child

    imp = child.run(f"{p}:make", devices=1, timeout=120)
    assert imp.faithful, imp.summary()
    assert not marker.exists()


def test_cli_stops_a_module_stuck_outside_python(tmp_path, cli):
    """The child is killed ``--timeout`` seconds after the user's code begins (its JAX
    start-up, up to STARTUP_SECONDS, is not the user's time): timed from when ``make``
    ran, the command ends within the timeout and a margin far below that start-up
    allowance, so a kill that waited for timeout + STARTUP_SECONDS fails here."""
    from mpmd_lab.importer.child import STARTUP_SECONDS

    began = tmp_path / "began"
    p = _write(
        tmp_path,
        "sleepy",
        f"""
        import time

        def kernel(x_ref, o_ref):
            time.sleep(3600)  # in C: no exception reaches it; only the child's kill

        def make():
            open({str(began)!r}, "w").write(repr(time.time()))
            f = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((128,), jnp.float32))
            return jax.jit(f), (jnp.zeros(128),)
        """,
    )
    r = cli("import", f"{p}:make", "--timeout", "3", "--devices", "1")
    ended = time.time()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "IMPORT_TIMEOUT" in r.stdout
    margin = 20.0  # the parent's 2 s grace, the kill, the command's exit, a loaded machine
    assert margin < STARTUP_SECONDS
    assert ended - float(began.read_text()) < 3 + margin


# ---------------------------------------------------------------- the command line


def test_cli_import_writes_the_scenario(tmp_path, cli):
    out = tmp_path / "ring.json"
    r = cli("import", f"{KERNELS / 'ring_shift_sem.py'}:make", "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    from mpmd_lab.scenario import load_scenario

    s = load_scenario(out)
    assert s.device_mesh == {"dev": 4} and s.call.entry == "plgpu.kernel"
    r = cli("check", str(out))
    assert r.returncode in (0, 1)  # a scenario the checker reads


def test_cli_import_reports_the_seed_error_at_its_line(cli):
    path = KERNELS / "err_peer_to_multicast.py"
    r = cli("import", f"{path}:make", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    # what was traced, without the rejected statement; JAX's error first, at its line
    assert data["scenario"] is not None and data["scenario"]["not_imported"]
    d = data["diagnostics"][0]
    line = _line_of("err_peer_to_multicast", "plgpu.multicast_ref(plgpu.remote_ref(")
    assert d["code"] == "REF_PEER_TO_MULTICAST" and d["source"] == f"{path}:{line}"


@pytest.mark.parametrize(
    "spec,why",
    [
        ("nowhere.py:make", "no such file"),
        ("tests/kernels/ring_shift_sem.py", "MODULE.py:FUNCTION"),
        ("tests/kernels/ring_shift_sem.py:nothing", "no function nothing"),
        ("tests/kernels/ring_shift_sem.py:expected", "expected()"),
    ],
)
def test_cli_import_bad_spec_is_exit_2(cli, spec, why):
    r = cli("import", spec)
    assert r.returncode == 2, r.stdout + r.stderr
    assert why in r.stderr


def test_child_env_sets_the_device_count():
    env = child_env(4)
    assert re.search(r"--xla_force_host_platform_device_count=4\b", env["XLA_FLAGS"])
    assert env["XLA_FLAGS"].count("device_count") == 1
    assert module_devices(KERNELS / "ring_shift_sem.py") == 4
    assert module_devices(HERE / "test_importer.py") is None


# ---------------------------------------------------------------- the corpus report


def test_import_corpus_reports_each_module(tmp_path):
    """bench/import_corpus.py: faithful or the constructs by name, and simulate against
    the module's own expected()."""
    out = tmp_path / "rows.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.import_corpus",
            str(KERNELS),
            "two_block_copy",
            "dup_ref_one_memory",
            "err_dup_ref",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parent,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["name"]: row for row in json.loads(out.read_text())}
    assert rows["two_block_copy"]["faithful"] and rows["two_block_copy"]["simulate"] == "=="
    dup = rows["dup_ref_one_memory"]
    # b = a + 1.0 through one Ref passed twice: a compute loads a, then stores b
    assert dup["faithful"] and dup["simulate"] == "=="
    assert rows["err_dup_ref"]["errors"] == ["MPMD_DUP_REF"]
    assert (
        "3 modules; valid 2: faithful without errors 2, simulate == expected (or ran, where "
        "the schedule decides) 2" in r.stdout
    )


# ---------------------------------------------------------------- index arithmetic


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_a_boolean_as_a_number_is_exact_over_its_bounds(op):
    """int(a OP b) (and its not / and / or) written in + - * // only, checked at every
    point of the operands' intervals against Python's own comparison."""
    import itertools
    import operator

    from mpmd_lab import expr as E
    from mpmd_lab.importer import values as V

    fn = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
          "==": operator.eq, "!=": operator.ne}[op]  # fmt: skip
    for alo, ahi, blo, bhi in [(0, 3, 0, 3), (-2, 5, 1, 1), (0, 7, -3, 2)]:
        a, b = V.name("a", alo, ahi), V.name("b", blo, bhi)
        c = V.compare(op, a, b)
        small = V.compare("<", a, V.const(2))
        forms = {
            "c": (V.as_int(c), lambda x, y: fn(x, y)),
            "not": (V.as_int(V.logical_not(c)), lambda x, y: not fn(x, y)),
            "and": (V.as_int(V.logical("and", c, small)), lambda x, y: fn(x, y) and x < 2),
            "or": (V.as_int(V.logical("or", c, small)), lambda x, y: fn(x, y) or x < 2),
        }
        for x, y in itertools.product(range(alo, ahi + 1), range(blo, bhi + 1)):
            env = E.Env({"a": x, "b": y}, {})
            for what, (n, want) in forms.items():
                assert n is not None and not n.is_bool
                got = n.const if n.const is not None else n.expr.eval(env)
                assert got == int(want(x, y)), (what, x, y, n.expr.label())
                assert not isinstance(n.expr, E.Compare | E.BoolOp | E.Not)


def test_a_traced_divisor_is_exact_over_its_bounds():
    """lax.div / lax.rem (and jnp's // and %) by a divisor that depends on where the
    kernel runs: written where the bounds keep it positive (and, for the truncating
    ones, the dividend never negative), each point of the intervals equal to JAX's
    (C's truncation, Python's floor) and inside the bounds it is given; refused else."""
    import itertools

    from mpmd_lab import expr as E
    from mpmd_lab.importer import values as V

    def c_div(x, y):
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y > 0) else -q

    def c_rem(x, y):
        return x - c_div(x, y) * y

    forms = {
        V.trunc_div: c_div,
        V.trunc_rem: c_rem,
        V.floor_div: lambda x, y: x // y,
        V.floor_mod: lambda x, y: x % y,
    }
    for alo, ahi, blo, bhi in [(0, 7, 1, 4), (3, 5, 2, 9), (-4, 6, 1, 3), (0, 0, 1, 2)]:
        a, b = V.name("a", alo, ahi), V.name("b", blo, bhi)
        for fn, want in forms.items():
            r = fn(a, b)
            truncating = fn in (V.trunc_div, V.trunc_rem)
            if truncating and alo < 0:
                assert r is None, fn  # C's truncation of a negative: not a floor
                continue
            assert r is not None and V.fits(r), (fn, alo, ahi, blo, bhi)
            for x, y in itertools.product(range(alo, ahi + 1), range(blo, bhi + 1)):
                got = r.const if r.const is not None else r.expr.eval(E.Env({"a": x, "b": y}, {}))
                assert got == want(x, y), (fn.__name__, x, y, r.expr.label())
                assert r.lo <= got <= r.hi, (fn.__name__, x, y, r.lo, r.hi)
    # a divisor that may be zero or negative is refused
    for blo, bhi in [(0, 3), (-2, 2)]:
        b = V.name("b", blo, bhi)
        assert all(fn(V.name("a", 0, 5), b) is None for fn in forms)


def test_an_integer_select_is_exact_over_its_bounds():
    """jnp.where / lax.select_n / lax.switch of integers on a traced index, in arithmetic."""
    from mpmd_lab import expr as E
    from mpmd_lab.importer import values as V

    a = V.name("a", 0, 5)
    two = [V.add(a, V.const(1)), V.sub(a, V.const(1))]
    pick2 = V.select_arith(V.compare("<", a, V.const(3)), two)  # a < 3 -> the second
    three = [V.const(7), V.mul(a, V.const(2)), V.sub(V.const(9), a)]
    k = V.name("k", 0, 2)
    pick3 = V.select_arith(k, three)
    for x in range(0, 6):
        env = E.Env({"a": x, "k": 0}, {})
        assert pick2.expr.eval(env) == (x - 1 if x < 3 else x + 1)
        for kk in range(3):
            env = E.Env({"a": x, "k": kk}, {})
            assert pick3.expr.eval(env) == [7, 2 * x, 9 - x][kk]
