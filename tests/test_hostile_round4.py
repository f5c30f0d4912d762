"""Hostile inputs, fourth round: the day's new paths (affine views, candidates' plans
built like the original's, gather views, the retrace of a rejected kernel), each held
to JAX's own verdict: a clear diagnostic, never a traceback, a hang or a false
"valid"."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from test_datadep import JAX_STAGES, PLGPU, _one_device  # noqa: E402


def _view(index: list[Any], out: list[int], x: list[int] = [4, 128]) -> dict:  # noqa: B006
    """Block b copies ``x_ref.at[*index]`` into the whole of ``out``."""
    body = [
        {"let": "src", "ref": "x_ref", "transforms": [{"op": "at", "index": index}]},
        {"op": "copy", "src": "src", "dst": "out"},
    ]
    s = _one_device(body, [3, 1, 0, 2], "gather-view", PLGPU)
    s["buffers"]["x"]["shape"] = x
    s["call"]["outputs"]["out"]["shape"] = out
    return s


# ------------------------------------------- where a gather view's indices' dims go

#: (view, JAX's first error's code): the loaded indices' dims sit where the first
#: integer entry is when the integer entries are next to each other, else first
GATHER_LAYOUTS = {
    "slice-then-array": (_view([{"ds": ["0", 2]}, "off_ref[...]"], [2, 4]), "GPU_GATHER_LOAD"),
    "slice-then-array-front": (
        _view([{"ds": ["0", 2]}, "off_ref[...]"], [4, 2]),
        "SWAP_SHAPE_MISMATCH",
    ),
    "3d-slice-array-slice": (
        _view([{"ds": ["0", 2]}, "off_ref[...]"], [2, 4, 8], [2, 4, 8]),
        "GPU_GATHER_LOAD",
    ),
    "3d-apart": (
        _view(["off_ref[...]", {"ds": ["0", 2]}, "off_ref[...]"], [4, 2], [4, 4, 8]),
        "GPU_GATHER_LOAD",
    ),
    "3d-apart-in-place": (
        _view(["off_ref[...]", {"ds": ["0", 2]}, "off_ref[...]"], [2, 4], [4, 4, 8]),
        "SWAP_SHAPE_MISMATCH",
    ),
}


@pytest.mark.slow
def test_a_gather_views_indices_dims_go_where_jax_puts_them():
    """``x_ref.at[pl.ds(0, 2), off_ref[...]]`` is (2, 4) to JAX (numpy's rule, in
    NDIndexer.get_indexer_shape): the check typed it (4, 2), the indices' dims always
    first, and said SWAP_SHAPE_MISMATCH at trace for a copy JAX traces (its lowering
    refuses the gather: GPU_GATHER_LOAD); for a (4, 2) destination it said nothing of
    the shapes JAX finds differing."""
    from jaxprobe import probe_many

    names = list(GATHER_LAYOUTS)
    got = probe_many([GATHER_LAYOUTS[n][0] for n in names])
    for name, r in zip(names, got, strict=True):
        s, want = GATHER_LAYOUTS[name]
        d = first_error([x for x in check(load_scenario(s)) if x.stage in JAX_STAGES])
        assert d is not None, name
        assert (d.code, d.stage) == (r["code"], r["stage"]), (name, d.one_line(), r)
        assert want in (r["code"], r["stage"]), (name, r)
        if d.code == "SWAP_SHAPE_MISMATCH":
            assert r["message"].strip() == d.message.strip(), (name, r["message"], d.message)


# ------------------------------------------- a kernel whose defaults hold a JAX scalar

SCALAR_DEFAULT = """
import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu


def kernel(x_ref, o_ref, *, scale=jnp.float32(2.0), **kw):
    o_ref[...] = x_ref[...] * scale
    o_ref[...] = x_ref[...].astype(jnp.int32)  # JAX rejects it


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((256,), jnp.float32))
    return jax.jit(call), (jnp.arange(256, dtype=jnp.float32),)
"""


def test_a_0d_operand_gets_its_init():
    """A captured JAX scalar is a 0-d operand of the kernel: its init was read through a
    byte view numpy refuses for a 0-d array (the importer failed: ValueError)."""
    import numpy as np
    from mpmd_lab.importer.call import init_of

    assert init_of([np.asarray(np.float32(2.0))], "float32") == (2.0, None)
    assert init_of([np.asarray(np.int32(0))], "int32") == ("zeros", None)
    assert init_of([np.asarray(np.int16(7))], "int16") == (7, None)


@pytest.mark.slow
def test_a_rejected_kernel_with_a_jax_scalar_default_is_retraced_and_shown(tmp_path):
    """The retrace of the kernel (a keyword-only default that is a JAX scalar, and
    ``**kw``) left the rejected store out, but the import of what it traced failed on
    the 0-d operand the scalar becomes, so only JAX's rejection was shown. Now the
    kernel opens, the rejected store and the multiplication by the scalar (which a
    compute cannot load) each named as not imported."""
    from mpmd_lab.importer import child

    mod = tmp_path / "scalar_default.py"
    mod.write_text(SCALAR_DEFAULT)
    imp = child.run(f"{mod}:make", devices=1, timeout=120)
    assert imp.scenario is not None, [d.one_line() for d in imp.diagnostics]
    codes = [d.code for d in imp.diagnostics]
    assert codes[0] == "SWAP_DTYPE_MISMATCH", codes
    assert imp.scenario.buffers["in1"].shape == [] and imp.scenario.buffers["in1"].init == 2.0
    left = sorted(n.source.rsplit(":", 1)[1] for n in imp.scenario.not_imported)
    assert left == ["8", "9"], left


# ------------------------------------------- a pl.ds start written as a constant's text


def _ds_view(start: str, size: int, out: list[int]) -> dict:
    return _view([{"ds": [start, size]}], out, [4, 8])


#: pl.ds starts written as text ("1", as the Lab's fields write them) that JAX is given
#: as Python ints: its trace checks them as it checks any static start
STATIC_TEXT_STARTS = {
    "size-past-the-end": (_ds_view("1", 4, [4, 8]), "start=1, size=4, stride=1, dim=4"),
    "empty-at-the-end": (_ds_view("4", 0, [4, 8]), "start=4, dim=4"),
    "start-past-the-end": (_ds_view("2147483647", 2, [2, 8]), "start=2147483647, dim=4"),
}


@pytest.mark.parametrize("name", sorted(STATIC_TEXT_STARTS))
def test_a_ds_start_written_as_text_is_checked_as_jax_checks_a_static_start(name):
    """``{"ds": ["1", 4]}`` of a dim of 4: the check took the text for a traced start and
    said nothing at trace (a SWAP_SHAPE_MISMATCH or a runtime OOB_READ its first error);
    JAX's trace refuses the slice (its own bounds check of a static start)."""
    s, where = STATIC_TEXT_STARTS[name]
    d = first_error([x for x in check(load_scenario(s)) if x.stage in JAX_STAGES])
    assert d is not None and (d.code, d.stage) == ("AT_OOB_SLICE", "trace"), name
    assert d.message == f"Out of bound slice: {where}.", d.message


@pytest.mark.slow
def test_jax_refuses_the_static_text_starts_as_the_check_says():
    from jaxprobe import probe_many

    names = sorted(STATIC_TEXT_STARTS)
    got = probe_many([STATIC_TEXT_STARTS[n][0] for n in names])
    for name, r in zip(names, got, strict=True):
        s, where = STATIC_TEXT_STARTS[name]
        assert (r["stage"], r["code"]) == ("trace", "AT_OOB_SLICE"), (name, r)
        assert r["message"].strip() == f"Out of bound slice: {where}.", r["message"]


# ------------------------------------------- every command on hostile views


def _stack(transforms: list[dict], out: list[int], x: list[int] = [4, 128]) -> dict:  # noqa: B006
    s = _view([], out, x)
    s["call"]["programs"][0]["body"][0]["transforms"] = transforms
    return s


def _at(*index: Any) -> dict:
    return {"op": "at", "index": list(index)}


HOSTILE_VIEWS = {
    "ds-empty-copied": _stack([_at({"ds": ["1", 0]})], [2, 128]),
    "ds-negative": _stack([_at({"ds": ["-1", 2]})], [2, 128]),
    "ds-negative-traced": _stack([_at({"ds": ["b - 1", 2]})], [2, 128]),
    "ds-int32-max": _stack([_at({"ds": ["2147483647", 2]})], [2, 128]),
    "ds-past-int32": _stack([_at({"ds": ["2147483647 + 1", 2]})], [2, 128]),
    "index-negative": _stack([_at("-1")], [128]),
    "index-past-the-end": _stack([_at("4")], [128]),
    "transpose-0d": _stack([_at("0", "0"), {"op": "transpose", "perm": []}], []),
    "transpose-1d": _stack([_at("0"), {"op": "transpose", "perm": [0]}], [128]),
    "transpose-twice": _stack([{"op": "transpose", "perm": [1, 0]}] * 2, [4, 128]),
    "transpose-repeated-axis": _stack([{"op": "transpose", "perm": [0, 0]}], [4, 128]),
    "reshape-of-transpose": _stack(
        [{"op": "transpose", "perm": [1, 0]}, {"op": "reshape", "shape": [-1]}], [512]
    ),
    "reshape-of-strided": _stack(
        [_at({"ds": ["0", 4]}, {"ds": ["0", 64]}), {"op": "reshape", "shape": [-1]}], [256]
    ),
    "reshape-two-minus-ones": _stack([{"op": "reshape", "shape": [-1, -1]}], [512]),
    "gather-of-gather": _stack([_at("off_ref[...]"), _at("off_ref[...]")], [4, 128]),
    "gather-nested": _stack([_at("off_ref[off_ref[...]]")], [4, 128]),
    "gather-then-reshape": _stack([_at("off_ref[...]"), {"op": "reshape", "shape": [-1]}], [512]),
    "gather-in-ds": _stack([_at({"ds": ["off_ref[...]", 2]})], [2, 128]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VIEWS))
def test_every_command_answers_hostile_views_with_coded_diagnostics(name):
    """check, simulate, each fix applied (and applied again), export and the aliasing
    graph: none raises, each within seconds; every diagnostic coded, with a path; a
    fix's candidate, built from the original's objects, checks as the same scenario
    loaded afresh from its JSON."""
    import time

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpmd_lab import export, plot, simulate
    from mpmd_lab.fixes import apply_fix
    from mpmd_lab.scenario import ScenarioError
    from mpmd_lab.validate import analyze

    def seen(a: Any) -> list[tuple[str, str, str]]:
        return [(d.code, d.path, d.message) for d in a.diagnostics]

    t0 = time.perf_counter()
    s = load_scenario(HOSTILE_VIEWS[name])
    a = analyze(s)
    for d in a.diagnostics:
        assert d.code and d.path is not None and (d.message or d.explanation), d
        if d.fix is None:
            continue
        fixed = apply_fix(s, d.fix)
        assert seen(analyze(fixed)) == seen(analyze(load_scenario(fixed.to_dict()))), d.code
        try:
            twice = apply_fix(fixed, d.fix)
        except ScenarioError:
            continue
        assert seen(analyze(twice)) == seen(analyze(load_scenario(twice.to_dict()))), d.code
    res = simulate(s, check=False)
    assert res.error is None or res.error.code, res.error
    assert "pallas" in export(s)
    plt.close(plot(s))
    assert time.perf_counter() - t0 < 60
