"""Sharding as JAX writes it: per-argument and per-output ``PartitionSpec`` over the
device mesh (``call.args[i].spec``, ``call.outputs.NAME.spec``), checked with
``jax.shard_map``'s and ``NamedSharding``'s own messages, simulated to the values JAX's
interpreter gives, exported, and imported by ``from_jax`` (real JAX throughout)."""

from __future__ import annotations

import copy
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpmd_lab import gallery, run, sharding
from mpmd_lab.codegen import generate
from mpmd_lab.importer.api import Imported
from mpmd_lab.importer.child import child_env
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from jaxprobe import probe_many  # noqa: E402


def two_by_two(arg_spec: Any = None, outs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A 2x2 mesh (x, y), one [2, 128] argument copied into each output."""
    outs = outs if outs is not None else {"o": None}
    arg: dict[str, Any] = {"buffer": "a", "param": "a_ref"}
    if arg_spec is not None:
        arg["spec"] = arg_spec
    outputs: dict[str, Any] = {}
    for name, spec in outs.items():
        outputs[name] = {"shape": [2, 128], "dtype": "float32"}
        if spec is not None:
            outputs[name]["spec"] = spec
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "specs",
        "device_mesh": {"x": 2, "y": 2},
        "buffers": {"a": {"shape": [2, 128], "dtype": "float32", "init": "iota"}},
        "call": {
            "args": [arg],
            "outputs": outputs,
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [{"op": "copy", "src": "a_ref", "dst": n} for n in outs],
                }
            ],
        },
    }


SPECS = two_by_two([None, "y"], {"o": [None, "y"], "r": [None], "q": [["y", "x"]], "d": None})


def test_specs_simulate_as_jaxs_interpreter():
    s = load_scenario(SPECS)
    assert s.global_shape("a") == [2, 256]
    got = simulate(s)
    assert got.ok, got.summary()
    want = run(s, backend="interpret", timeout=300)
    assert want.ok, want.summary()
    shapes = {"o": (2, 256), "r": (2, 128), "q": (8, 128), "d": (8, 128)}
    for name, shape in shapes.items():
        assert want.outputs[name].shape == shape
        np.testing.assert_array_equal(got.outputs[name], want.outputs[name])
    a = np.arange(512, dtype=np.float32).reshape(2, 256)
    np.testing.assert_array_equal(got.outputs["o"], a)
    np.testing.assert_array_equal(got.outputs["r"], a[:, :128])  # the first device's


def test_export_carries_the_specs():
    src = generate(load_scenario(SPECS))
    assert "in_specs=(P(None, 'y'), )" in src
    assert "'r': P(None,)" in src and "'q': P(('y', 'x'),)" in src
    assert "'d': P(('x', 'y'),)" in src  # no spec: the schema@1 default


def same_set_order(message: str) -> str:
    """A message with its ``frozenset({...})`` in sorted order: JAX prints the set of
    manual axes in its hash order, which changes from one process to the next."""

    def srt(m: re.Match[str]) -> str:
        return "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})"

    return re.sub(r"frozenset\(\{([^}]*)\}\)", srt, message)


BAD = {
    "in-axis": two_by_two(["z"]),
    "in-dup": two_by_two(["x", "x"]),
    "in-rank": two_by_two([None, None, None]),
    "out-axis": two_by_two(None, {"o": ["z"]}),
    "out-dup": two_by_two(None, {"o": [["x", "y"], "x"]}),
    "out-rank": two_by_two(None, {"o": [None, None, None]}),
}


def test_bad_specs_say_what_jax_says():
    found = probe_many(list(BAD.values()), stages=("build", "trace", "gpu-lower"))
    for (name, data), r in zip(BAD.items(), found, strict=True):
        d = first_error(check(load_scenario(data)))
        assert d is not None and r["stage"] is not None, (name, r)
        assert d.code == r["code"], (name, d.code, r)
        assert d.stage == r["stage"], (name, d.stage, r)
        assert d.jax is not None and d.jax.type == r["type"], (name, r)
        assert same_set_order(d.jax.message) == same_set_order(r["message"]), (name, r)
        assert d.path.endswith(".spec"), d.path
        assert d.fixes and d.fixes[0].after == [], (name, d.fixes)  # a verified fix


def test_good_specs_pass_check_and_jax():
    assert not [d for d in check(load_scenario(SPECS)) if d.is_error]
    assert probe_many([SPECS])[0]["stage"] is None


def test_schema1_files_keep_their_meaning():
    s = gallery.load("ring-shift")
    assert "spec" not in s.to_json()
    assert s.global_shape("x") == [s.buffers["x"].shape[0] * s.num_devices]
    assert sharding.is_default(None, 1, s.device_mesh)
    assert sharding.text(None, 1, {"x": 2, "y": 2}) == "P(('x', 'y'),)"
    assert sharding.text(None, 0, {"x": 2}) == "P()"


def test_explicit_global_init_follows_the_spec():
    data = two_by_two([None, "y"])
    value = np.arange(512).reshape(2, 256)
    data["buffers"]["a"]["init"] = value.tolist()
    s = load_scenario(data)
    r = simulate(s, past_lowering=True)
    np.testing.assert_array_equal(r.outputs["o"][:2], value[:, :128])  # device (0, 0)
    np.testing.assert_array_equal(r.outputs["o"][2:4], value[:, 128:])  # device (0, 1)
    bad = copy.deepcopy(data)
    bad["buffers"]["a"]["init"] = np.zeros((8, 128)).tolist()  # dim 0 times 4: not P(None,'y')
    with pytest.raises(ScenarioError, match=r"global value \(shape \[2, 256\]"):
        load_scenario(bad)


def test_one_buffer_two_specs_is_refused():
    data = two_by_two([None, "y"])
    data["call"]["args"].append({"buffer": "a", "param": "b_ref", "spec": ["x"]})
    with pytest.raises(ScenarioError, match="passed with the spec"):
        load_scenario(data)


KERNEL = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    P = jax.P
    DEVICES = 4
    EXPECT = "valid"


    def kernel(a_ref, o_ref, r_ref):
        o_ref[...] = a_ref[...]
        r_ref[...] = a_ref[...]


    def make():
        mesh = jax.make_mesh((2, 2), ("x", "y"))
        t = jax.ShapeDtypeStruct((8, 128), jnp.float32)
        call = plgpu.kernel(kernel, out_type=(t, t))
        fn = jax.jit(
            jax.shard_map(
                call,
                mesh=mesh,
                in_specs=P(None, "y"),
                out_specs=(P("x", "y"), P(None)),
                check_vma=False,
            )
        )
        a = jnp.arange(8 * 256, dtype=jnp.float32).reshape(8, 256)
        return fn, (jax.device_put(a, jax.NamedSharding(mesh, P(None, "y"))),)


    def expected(a):
        return None
    """
)


def test_from_jax_keeps_the_users_specs(tmp_path):
    src = tmp_path / "spec_kernel.py"
    src.write_text(KERNEL)
    out = tmp_path / "out.pickle"
    subprocess.run(
        [sys.executable, str(HERE / "importer_driver.py"), str(out), str(src)],
        env=child_env(4),
        check=True,
        timeout=600,
        cwd=HERE.parent,
    )
    raw = pickle.loads(out.read_bytes())["spec_kernel"]
    imp = Imported.from_json(raw["imported"])
    assert imp.faithful, imp.unsupported
    s = imp.scenario
    assert s.call.args[0].spec == [None, "y"]
    specs = {k: o.spec for k, o in s.call.outputs.items()}
    assert sorted(specs.values(), key=str) == [["x", "y"], [None]], specs
    a = np.arange(8 * 256, dtype=np.float32).reshape(8, 256)
    r = simulate(s, past_lowering=True)
    assert r.ok, r.summary()
    got = imp.outputs(r.outputs)
    # P('x', 'y') of each device's (8, 128) shard: rows doubled (x), columns as a's
    np.testing.assert_array_equal(got[0], np.concatenate([a, a]))
    np.testing.assert_array_equal(got[1], a[:, :128])  # P(None): the first device's
    assert raw["lowered"] == "ok"


def test_export_with_specs_is_safe():
    from test_export_safety import assert_export_is_safe

    assert_export_is_safe(load_scenario(SPECS))


def test_graph_says_which_shape_is_which():
    from mpmd_lab.graph import build_graph, to_text

    g = build_graph(load_scenario(SPECS))
    a, o = g.nodes["buffer:a"], g.nodes["output:o"]
    assert a["type"] == "f32[2,128] array"
    assert a["sharding"] == "per device; global f32[2,256] P(None, 'y')"
    assert a["global_shape"] == [2, 256] and a["spec"] == "P(None, 'y')"
    assert o["global_shape"] == [2, 256]
    assert g.nodes["output:r"]["sharding"] == "per device; global f32[2,128] P(None,)"
    text = to_text(g)
    assert "output q  f32[2,128] (per device; global f32[8,128] P(('y', 'x'),))" in text


def test_a_spec_needs_a_device_mesh():
    data = two_by_two(None, {"o": [None]})
    del data["device_mesh"]
    with pytest.raises(ScenarioError, match=r"call.outputs.o.spec: a partition spec splits"):
        load_scenario(data)


def test_a_tuple_arguments_spec_splits_every_leaf():
    data = two_by_two()
    data["buffers"]["b"] = {"shape": [2, 128], "dtype": "float32", "init": "ones"}
    data["call"]["args"] = [{"tuple": ["a", "b"], "param": "t", "spec": [None, "y"]}]
    data["call"]["programs"][0]["body"] = [{"op": "copy", "src": "t[0]", "dst": "o"}]
    s = load_scenario(data)
    assert s.global_shape("a") == s.global_shape("b") == [2, 256]
    assert "'a': P(None, 'y')," in generate(s) and "'b': P(None, 'y')," in generate(s)
    assert probe_many([data])[0]["stage"] is None
    r = simulate(s)
    assert r.ok, r.summary()
    a = np.arange(512, dtype=np.float32).reshape(2, 256)
    np.testing.assert_array_equal(r.outputs["o"][:2], a[:, :128])  # device (0, 0)
    np.testing.assert_array_equal(r.outputs["o"][2:4], a[:, 128:])  # device (0, 1)


@pytest.mark.parametrize("init", ["iota", "random", "local", "global"])
def test_host_values_follow_the_spec_as_the_export_does(init):
    from mpmd_lab.callsupport import host_array
    from mpmd_lab.memory import host_value

    data = two_by_two([None, "y"])
    b = data["buffers"]["a"]
    if init == "local":
        b["init"] = np.arange(256).reshape(2, 128).tolist()
    elif init == "global":
        b["init"] = (np.arange(512).reshape(2, 256) % 7).tolist()
    else:
        b["init"] = init
    s = load_scenario(data)
    buf, gshape = s.buffers["a"], s.global_shape("a")
    got = host_value(buf, 4, gshape)
    want = np.asarray(host_array(buf.init, buf.shape, buf.dtype, buf.seed, 4, gshape))
    assert got.shape == (2, 256)
    np.testing.assert_array_equal(got, want)
    if init == "local":  # one device's value, on every device
        np.testing.assert_array_equal(got[:, 128:], got[:, :128])


@pytest.mark.parametrize(
    "text,spec",
    [
        ("", None),
        ("P()", []),
        ("P('x',)", ["x"]),
        ("P(None,)", [None]),
        ("P(None, 'y')", [None, "y"]),
        ("P(('x', 'y'),)", [["x", "y"]]),
        ("None, 'y'", [None, "y"]),
    ],
)
def test_spec_text_round_trips(text, spec):
    assert sharding.parse_text(text) == spec
    if spec is not None:
        assert sharding.parse_text(sharding.text(spec, len(spec), {"x": 2, "y": 2})) == spec


def test_lab_edits_a_spec():
    from mpmd_lab.session import Session
    from mpmd_lab.widgets.call_editor import CallEditor

    st = Session(load_scenario(two_by_two()))
    ed = CallEditor(st)
    boxes = [
        b
        for b in _walk(ed)
        if "mpl-arg-spec" in getattr(b, "_dom_classes", ()) and hasattr(b, "value")
    ]
    assert len(boxes) == 1
    boxes[0].value = "P(None, 'y')"  # (committed as it changes)
    assert st.scenario.call.args[0].spec == [None, "y"]
    assert st.scenario.global_shape("a") == [2, 256]
    with pytest.raises(ValueError, match="partition spec"):
        sharding.parse_text("P(None, 3")


def _walk(wd):
    yield wd
    for k in getattr(wd, "children", ()):
        yield from _walk(k)
