"""``plgpu.im2col_ref`` (toolkit/ops/im2col.py) against real JAX 0.12: its type rule is
``Im2ColTransform``'s own (shape and exact messages), its uses are checked as JAX traces
and lowers them (tests/scenarios/codes/IM2COL_*.json, tests/test_validate_codes.py), the
simulator's windows are the ones JAX's docstring defines, and from_jax reads it back."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jax._src import core as jax_core
from jax._src.pallas.mosaic_gpu.core import Im2ColTransform
from mpmd_lab import codegen, shapes
from mpmd_lab.importer import Imported
from mpmd_lab.importer.child import child_env
from mpmd_lab.ops import Im2Col, Reshape
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error

HERE = Path(__file__).resolve().parent
CODES = HERE / "scenarios" / "codes"

#: (ref shape, window_shape, padding): valid views and every message of JAX's type rule
CASES = [
    ((2, 8, 8, 64), [3, 3], None),
    ((2, 8, 8, 64), [3, 3], [[1, 1], [1, 1]]),
    ((1, 16, 4), [5], [[2, 2]]),
    ((2, 4, 6, 5, 8), [1, 2, 3], [[0, 0], [1, 0], [0, 2]]),
    ((2, 8, 8, 64), [3], None),  # rank
    ((2, 8, 8, 64), [3, 9], None),  # no window fits
    ((2, 8, 8, 64), [3, 3, 3, 3], None),  # four spatial dims
    ((2, 8, 8, 64), [], None),
    ((2, 8, 8, 64), [3, 3], [[1, 1]]),  # padding pairs
    ((2, 8, 8, 64), [3, 300], None),  # window range
    ((2, 8, 8, 64), [3, 0], None),
    ((2, 8, 8, 64), [3, 3], [[-1, 1], [0, 0]]),  # negative padding
    ((2, 8, 8, 64), [3, 3], [[129, 0], [0, 0]]),  # low padding range
    ((2, 8, 8, 64), [3, 3], [[0, 0], [0, 200]]),  # high padding range
    ((1, 300, 300, 4), [200, 200], [[0, 0], [0, 0]]),  # high padding too low for the window
]


def _jax(shape, window, padding):
    """JAX's answer: the view's shape, or its exception (type, message)."""
    pads = ((0, 0),) * len(window) if padding is None else tuple(map(tuple, padding))
    try:
        t = Im2ColTransform(window_shape=tuple(window), padding=pads)
        return tuple(t.transform_type(jax_core.ShapedArray(shape, np.float16)).shape)
    except (ValueError, TypeError) as e:
        return (type(e).__name__, str(e))


def _ours(shape, window, padding):
    op = Im2Col.model_validate({"op": "im2col_ref", "window_shape": window, "padding": padding})
    step = shapes.apply(shapes.base_info(shape, "float16"), op)
    if step.error is not None:
        return (step.error.jax_type, step.error.message)
    assert step.after is not None
    return step.after.shape


@pytest.mark.parametrize("shape,window,padding", CASES)
def test_the_type_rule_is_jaxs(shape, window, padding):
    assert _ours(shape, window, padding) == _jax(shape, window, padding)


def test_a_view_of_a_view_is_refused_as_jax_does():
    """im2col_ref takes the ref itself (tests/scenarios/codes/IM2COL_TRANSFORMED_REF.json
    is the same through the whole check)."""
    reshape = Reshape.model_validate({"op": "reshape", "shape": [2, 8, 8, 64]})
    im2col = Im2Col.model_validate({"op": "im2col_ref", "window_shape": [3, 3]})
    steps = shapes.propagate(shapes.base_info((2, 8, 8, 64), "float16"), [reshape, im2col], "t")
    assert steps[-1].error is not None
    assert (steps[-1].error.code, steps[-1].error.jax_type) == (
        "IM2COL_TRANSFORMED_REF",
        "TypeError",
    )


def test_the_source_is_the_jax_call():
    op = Im2Col.model_validate(
        {"op": "im2col_ref", "window_shape": [3, 3], "padding": [[1, 1], [0, 2]]}
    )
    s = load_scenario(CODES / "IM2COL_WARPGROUP.json")
    src = codegen.transform_expr("x_ref", op, s)
    assert src == "plgpu.im2col_ref(x_ref, window_shape=(3, 3), padding=((1, 1), (0, 2)))"


@pytest.mark.parametrize("code", sorted(p.stem for p in CODES.glob("IM2COL_*.json")))
def test_each_use_is_found_where_jax_finds_it(code):
    """The static check's first error (its stage and JAX's type from the catalogue);
    tests/test_validate_codes.py probes the same scenarios with real JAX."""
    d = first_error(check(load_scenario(CODES / f"{code}.json")))
    assert d is not None and d.code == code
    assert d.jax is not None


@pytest.mark.slow
def test_an_im2col_view_of_an_array_moves_into_the_body_where_jax_goes_on():
    """IM2COL_NOT_A_REF (an argument's im2col view of an array): the fix passes the
    buffer plain and makes the same view first thing in the body, as the card says;
    what it says it leaves (the next use's error) is what JAX raises then."""
    from jaxprobe import answers
    from mpmd_lab.fixes import apply_fix

    plain = json.loads((CODES / "IM2COL_NOT_A_REF.json").read_text())
    indexed = json.loads(json.dumps(plain))
    step = {"op": "at", "index": [{"ds": [0, 64]}, 0, 1, [0, 64]]}
    indexed["call"]["args"][0]["transforms"].append(step)
    fixed = {}
    for name, data in (("plain", plain), ("indexed", indexed)):
        s = load_scenario(json.loads(json.dumps(data)))
        d = first_error(check(s))
        assert d is not None and d.code == "IM2COL_NOT_A_REF" and d.fix is not None
        assert "inside the kernel body" in d.fix.description
        after = apply_fix(s, d.fix)
        assert [x.code for x in check(after) if x.is_error] == d.fix.after, name
        fixed[name] = (after.to_dict(), d.fix.after[0])
    got = answers({name: data for name, (data, _) in fixed.items()})
    assert {name: got[name]["code"] for name in fixed} == {
        name: code for name, (_, code) in fixed.items()
    }
    assert fixed["indexed"][1] == "IM2COL_WARPGROUP"  # (no im2col copy lowers in plgpu.kernel)


def test_a_plain_access_is_the_lowerings_unsupported_transforms():
    s = json.loads((CODES / "IM2COL_WARPGROUP.json").read_text())
    body = s["call"]["programs"][0]["body"]
    s["call"]["programs"][0]["body"] = [body[0], {"op": "copy", "src": "xc", "dst": "out"}]
    d = first_error(check(load_scenario(s)))
    assert d is not None and (d.code, d.stage) == ("GPU_TRANSFORMS_UNSUPPORTED", "gpu-lower")
    assert d.message.startswith("(Im2ColTransform(window_shape=(3, 3), padding=((1, 1), (1, 1))), ")


def _float32(s):
    for part in (s["buffers"]["x"], s["call"]["outputs"]["out"], s["call"]["scratch"]["smem"]):
        part["dtype"] = "float32"
    return s


def test_the_simulators_windows_are_jaxs_definition():
    """``view[r, dh, dw, c] == x[n, h + dh, w + dw, c]``, ``(n, h, w) = unravel(r, (N,
    *spatial_out))`` (im2col_ref's docstring), read through a TMA load past lowering."""
    s = _float32(json.loads((CODES / "IM2COL_WARPGROUP.json").read_text()))
    s["call"]["programs"][0]["body"][0]["transforms"][0].pop("padding")
    r = simulate(s, past_lowering=True)
    assert r.lowering is not None and r.lowering.code == "IM2COL_WARPGROUP"
    x = np.arange(2 * 8 * 8 * 64, dtype=np.float32).reshape(2, 8, 8, 64)
    want = np.empty((64, 64), np.float32)
    for row in range(64):
        n, h, w = np.unravel_index(row, (2, 6, 6))
        want[row] = x[n, h + 0, w + 1]
    np.testing.assert_array_equal(np.asarray(r.outputs["out"]), want)


def test_the_simulator_says_it_cannot_pad():
    s = _float32(json.loads((CODES / "IM2COL_WARPGROUP.json").read_text()))
    r = simulate(s, past_lowering=True)
    assert not r.ok
    assert "padding" in str(r.error)


def test_from_jax_reads_it_back(tmp_path):
    """A kernel using plgpu.im2col_ref imports as the op, with JAX's lowering error."""
    target = tmp_path / "im2col.pickle"
    subprocess.run(
        [
            sys.executable,
            str(HERE / "importer_driver.py"),
            str(target),
            str(HERE / "kernels" / "im2col_load.py"),
        ],
        env=child_env(1),
        check=True,
        timeout=600,
        cwd=HERE.parent,
    )
    r = pickle.loads(target.read_bytes())["im2col_load"]
    imp = Imported.from_json(r["imported"])
    assert imp.scenario is not None and imp.unsupported == []
    lets = [st for st in imp.scenario.call.programs[0].body if getattr(st, "let", None)]
    ops = [t for st in lets for t in st.transforms]
    assert [t.op for t in ops][:1] == ["im2col_ref"]
    assert (ops[0].window_shape, ops[0].padding) == ([3, 3], [[1, 1], [1, 1]])
    first = first_error(imp.diagnostics)
    assert first is not None and first.code == "IM2COL_WARPGROUP"
