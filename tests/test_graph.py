"""The aliasing graph model: structure on the gallery, diagnostics where they belong."""

from __future__ import annotations

import pytest
from graph_strategies import loadable, scenario_dicts
from hypothesis import HealthCheck, assume, given, settings
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.graph import build_graph, is_red, peer_targets, to_text
from mpmd_lab.scenario import load_scenario


def edges_of(g, kind):
    return [(u, v, d) for u, v, d in g.edges(data=True) if d["kind"] == kind]


def nodes_of(g, kind):
    return [n for n, k in g.nodes(data="kind") if k == kind]


def red_things(g):
    return [n for n, d in g.nodes(data=True) if is_red(d)] + [
        (u, v) for u, v, d in g.edges(data=True) if is_red(d)
    ]


def validator():
    from mpmd_lab import validate

    return validate


DUP = Diagnostic(
    code="MPMD_DUP_REF",
    path="call.args[1]",
    message="Cannot pass the same ref into a mpmd map multiple times",
)
P2M = Diagnostic(
    code="REF_PEER_TO_MULTICAST",
    path="call.programs[0].body[0].transforms[1]",
    message="Can't make a peer reference into a multicast reference.",
)


# ---------------------------------------------------------------- structure


def test_dup_ref_two_parameters_alias_one_buffer():
    g = build_graph(gallery.load("dup-ref"), diagnostics=[DUP])
    params = nodes_of(g, "param")
    assert sorted(g.nodes[p]["name"] for p in params) == ["a_ref", "b_ref"]
    for p in params:  # each parameter comes from the one buffer through its argument
        (arg,) = [u for u, _, k in g.in_edges(p, data="kind") if k == "passed-as"]
        assert list(g.predecessors(arg)) == ["buffer:acc"]
    (alias,) = edges_of(g, "aliases")
    assert {alias[0], alias[1]} == set(params)
    assert [d.code for d in alias[2]["diagnostics"]] == ["MPMD_DUP_REF"]
    assert [d.code for d in g.nodes["arg:1"]["diagnostics"]] == ["MPMD_DUP_REF"]
    assert g.nodes["arg:0"]["diagnostics"] == []


def test_dup_ref_fixed_has_no_alias():
    g = build_graph(gallery.load("dup-ref-fixed"), diagnostics=[])
    assert edges_of(g, "aliases") == []
    (stmt,) = nodes_of(g, "statement")
    assert [d["label"] for _, _, d in g.in_edges(stmt, data=True) if d["kind"] == "reads"] == [
        "lhs",
        "rhs",
    ]


def test_arrays_passed_twice_do_not_alias():
    data = gallery.load("dup-ref").to_dict()
    data["buffers"]["acc"]["as_ref"] = False
    assert edges_of(build_graph(load_scenario(data), diagnostics=[]), "aliases") == []


def test_peer_then_multicast_marks_the_failing_step():
    g = build_graph(gallery.load("peer-then-multicast"), diagnostics=[P2M])
    steps = sorted(
        (n for n in nodes_of(g, "view") if g.nodes[n].get("let") == "bad"),
        key=lambda n: g.nodes[n]["step"],
    )
    assert [g.nodes[n]["op"] for n in steps] == ["remote_ref", "multicast_ref"]
    assert g.nodes[steps[0]]["diagnostics"] == []
    assert [d.code for d in g.nodes[steps[1]]["diagnostics"]] == ["REF_PEER_TO_MULTICAST"]
    assert g.nodes[steps[1]]["name"] == "bad" and g.nodes[steps[0]]["name"] is None
    # the step is derived from the peer step, which is derived from the output
    assert list(g.predecessors(steps[1])) == [steps[0]]
    assert list(g.predecessors(steps[0])) == ["output:out"]
    # the multicast traffic the failing step would make is red, the peer traffic is not
    assert all(is_red(d) for _, _, d in edges_of(g, "multicast-to"))
    assert not any(is_red(d) for _, _, d in edges_of(g, "peer-of"))


def test_ring_has_four_peer_edges_one_per_device():
    g = build_graph(gallery.load("ring-shift"), diagnostics=[])
    peers = edges_of(g, "peer-of")
    assert len(peers) == 4
    pairs = sorted((g.nodes[u]["index"], g.nodes[v]["index"]) for u, v, _ in peers)
    assert pairs == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert len(nodes_of(g, "device")) == 4


def test_offsets_resolve_per_axis_and_wrap():
    s = load_scenario("ring-shift").to_dict()
    s["device_mesh"] = {"x": 2, "y": 3}
    s["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = {
        "y": {"offset": -1},
        "x": 1,
    }
    g = build_graph(load_scenario(s), diagnostics=[])
    pairs = sorted((g.nodes[u]["index"], g.nodes[v]["index"]) for u, v, _ in edges_of(g, "peer-of"))
    # device (x, y) = (d // 3, d % 3) writes to (1, (y - 1) % 3)
    assert pairs == sorted((d, 3 + (d % 3 - 1) % 3) for d in range(6))


def test_peer_targets_unknown_axis_and_out_of_range():
    assert peer_targets({"nope": 1}, {"dev": 4}) is None
    assert peer_targets(7, {"dev": 4}) == [-1] * 4
    assert peer_targets({"dev": 9}, {"dev": 4}) == [-1] * 4


def test_multicast_fans_out_to_every_device_of_the_group():
    g = build_graph(gallery.load("multicast-2d"), diagnostics=[])
    pairs = {(g.nodes[u]["index"], g.nodes[v]["index"]) for u, v, _ in edges_of(g, "multicast-to")}
    assert pairs == {(a, b) for a in range(4) for b in range(4)}
    s = gallery.load("multicast-2d").to_dict()
    s["call"]["programs"][0]["body"][1]["transforms"][0]["axes"] = "y"
    g = build_graph(load_scenario(s), diagnostics=[])
    pairs = {(g.nodes[u]["index"], g.nodes[v]["index"]) for u, v, _ in edges_of(g, "multicast-to")}
    # along y only: rows {0, 1} and {2, 3} of the (x, y) mesh
    assert pairs == {(a, b) for grp in ([0, 1], [2, 3]) for a in grp for b in grp}


def test_views_carry_transform_and_type_after_each_step():
    g = build_graph(gallery.load("bitcast-view"), diagnostics=[])
    (v,) = nodes_of(g, "view")
    assert g.nodes[v]["label"] == "bitcast(i32)"
    assert g.nodes[v]["type"] == "i32[8,128]"
    (e,) = [d for _, _, d in g.in_edges(v, data=True)]
    assert e["kind"] == "derived-by" and e["label"] == "bitcast(i32)"
    g = build_graph(gallery.load("transpose-view"), diagnostics=[])
    (v,) = nodes_of(g, "view")
    assert (g.nodes[v]["label"], g.nodes[v]["type"]) == ("transpose(1,0)", "f32[32,64]")
    g = build_graph(gallery.load("two-block-race"), diagnostics=[])
    types = {g.nodes[n]["name"]: g.nodes[n]["type"] for n in nodes_of(g, "view")}
    assert types == {"src": "f32[128]", "dst": "f32[128]"}


def test_reads_and_writes_follow_the_body():
    g = build_graph(gallery.load("multicast-2d"), diagnostics=[])
    writes = {(g.nodes[u]["label"], g.nodes[v]["label"]) for u, v, _ in edges_of(g, "writes")}
    reads = {(g.nodes[u]["label"], g.nodes[v]["label"]) for u, v, _ in edges_of(g, "reads")}
    assert writes == {("copy", "smem"), ("tma_store", "multicast_ref(x,y)")}
    assert reads == {("x_ref", "copy"), ("smem", "tma_store")}
    assert len(edges_of(g, "runs")) == 2


def test_unknown_names_and_missing_buffers_become_nodes():
    s = gallery.load("ring-shift").to_dict()
    s["call"]["args"].append({"buffer": "nowhere", "param": "y_ref"})
    s["call"]["programs"][0]["body"].append({"op": "copy", "src": "ghost", "dst": "p"})
    s["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = {"nope": 1}
    g = build_graph(load_scenario(s), diagnostics=[])
    assert g.nodes["buffer:nowhere"]["missing"] is True
    assert g.nodes["unknown:ghost"]["kind"] == "unknown"
    assert edges_of(g, "peer-of") == []
    (view,) = nodes_of(g, "view")
    assert g.nodes[view]["unresolved"] is True


def test_tuple_args_and_captured_refs():
    s = {
        "name": "tuples",
        "buffers": {
            "a": {"shape": [8], "dtype": "float32", "as_ref": True},
            "b": {"shape": [8], "dtype": "int32"},
        },
        "call": {
            "args": [{"tuple": ["a", "b"], "param": "t"}],
            "captures": [{"name": "cap", "buffer": "a"}],
            "outputs": {"out": {"shape": [8], "dtype": "float32"}},
            "programs": [{"body": [{"op": "copy", "src": "t[0]", "dst": "out"}]}],
        },
    }
    g = build_graph(load_scenario(s), diagnostics=[])
    assert g.nodes["param:args[0][1]"]["type"] == "i32[8]"
    assert [d["label"] for _, _, d in g.in_edges("arg:0", data=True)] == ["[0]", "[1]"]
    (alias,) = edges_of(g, "aliases")
    assert (alias[0], alias[1]) == ("param:args[0][0]", "capture:0")
    assert edges_of(g, "captured-as")[0][0] == "buffer:a"
    (r,) = edges_of(g, "reads")
    assert r[0] == "param:args[0][0]"


def test_diagnostic_paths_map_to_nodes_and_edges():
    diags = [
        Diagnostic(code="A", path="call.programs[0].body[1].src", message="m"),
        Diagnostic(code="B", path="buffers.x", message="m"),
        Diagnostic(code="C", path="call.programs[0].mesh.grid", message="m"),
        Diagnostic(code="D", path="call.programs[0].body[0].transforms[0].device.dev", message="m"),
        Diagnostic(code="E", path="run.interpret", message="m"),
        Diagnostic(code="F", path="call.outputs.out.shape[0]", message="m", severity="warning"),
        Diagnostic(code="G", path="device_mesh.dev", message="m"),
    ]
    g = build_graph(gallery.load("ring-shift"), diagnostics=diags)
    (read,) = edges_of(g, "reads")
    assert [d.code for d in read[2]["diagnostics"]] == ["A"]
    assert [d.code for d in g.nodes["buffer:x"]["diagnostics"]] == ["B"]
    assert [d.code for d in g.nodes["program:0"]["diagnostics"]] == ["C"]
    assert [d.code for d in g.nodes["view:0.0.t0"]["diagnostics"]] == ["D"]
    assert all(d.code == "D" for _, _, d in edges_of(g, "peer-of") for d in d["diagnostics"])
    assert [d.code for d in g.graph["unplaced"]] == ["E"]
    assert [d.code for d in g.nodes["output:out"]["diagnostics"]] == ["F"]
    assert not is_red(g.nodes["output:out"])  # a warning is not red
    assert all([x.code for x in g.nodes[f"device:{i}"]["diagnostics"]] == ["G"] for i in range(4))


def test_access_log_overlay():
    from mpmd_lab import simulator as simulate

    s = gallery.load("ring-shift")
    g = build_graph(s, diagnostics=[], access_log=simulate.simulate(s))
    # 4 devices each read x (256) and write the peer view p (256)
    assert g.nodes["param:args[0]"]["reads"] == 1024
    assert g.nodes["view:0.0.t0"]["writes"] == 1024
    assert g.nodes["device:2"]["reads"] == 256
    (read,) = edges_of(g, "reads")
    assert read[2]["count"] == 1024
    assert "reads 1024" in to_text(g)
    with pytest.raises(TypeError, match="AccessLog"):
        build_graph(s, diagnostics=[], access_log={"x_ref": {"reads": 256}})


# ---------------------------------------------------------------- text


def test_text_of_ring_shift():
    text = to_text(build_graph(gallery.load("ring-shift"), diagnostics=[]))
    assert text.splitlines() == [
        "graph ring-shift  (device mesh dev=4)",
        "buffer x  f32[256] array (per device; global f32[1024] P('dev',))",
        "  --passed-as--> args[0]",
        "args[0]",
        "  --passed-as--> param x_ref  f32[256]",
        "param x_ref  f32[256]",
        "  --reads--> copy p <- x_ref  (program 0)",
        "output out  f32[256] (per device; global f32[1024] P('dev',))",
        "  --derived-by remote_ref(dev+1)--> view p = remote_ref(dev+1)  f32[256]",
        "view p = remote_ref(dev+1)  f32[256]",
        "copy p <- x_ref  (program 0)",
        "  --writes--> view p = remote_ref(dev+1)  f32[256]",
        "program 0  grid b=1",
        "devices",
        "  peer-of via call.programs[0].body[0].transforms[0]: d0->d1 d1->d2 d2->d3 d3->d0",
        "problems: 0 error(s), 0 other",
    ]


def test_text_shows_problems():
    text = to_text(build_graph(gallery.load("dup-ref"), diagnostics=[DUP]))
    assert "--aliases acc--> param b_ref  f32[256]  !! error MPMD_DUP_REF" in text
    assert "problems: 1 error(s)" in text


# ---------------------------------------------------------------- with the validator


def test_validator_places_dup_ref_on_the_alias():
    validator()
    g = build_graph(gallery.load("dup-ref"))
    (alias,) = edges_of(g, "aliases")
    assert "MPMD_DUP_REF" in [d.code for d in alias[2]["diagnostics"]]


def test_validator_marks_peer_then_multicast_step():
    validator()
    g = build_graph(gallery.load("peer-then-multicast"))
    red = [n for n in red_things(g) if isinstance(n, str)]
    assert any(
        g.nodes[n].get("op") == "multicast_ref" and g.nodes[n].get("let") == "bad" for n in red
    )
    assert "view:0.0.t0" not in red


def test_validator_problems_are_drawn_where_they_are():
    validate = validator()
    for name in gallery.names():
        s = gallery.load(name)
        errors = [d for d in validate.check(s) if d.is_error]
        g = build_graph(s)
        if not errors:  # a valid scenario has no red
            assert red_things(g) == [], name
            continue
        assert g.graph["unplaced"] == [], name  # every problem lands on a node or an edge
        placed = {
            d.code
            for _, data in [*g.nodes(data=True), *((e[:2], e[2]) for e in g.edges(data=True))]
            for d in data["diagnostics"]
        }
        assert {d.code for d in errors} <= placed, name


def test_without_problems_nothing_is_red():
    for name in gallery.names():
        assert red_things(build_graph(gallery.load(name), diagnostics=[])) == []


# ---------------------------------------------------------------- robustness


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_dicts)
def test_any_loadable_scenario_makes_a_graph(data):
    s = loadable(data)
    assume(s is not None)
    g = build_graph(s, diagnostics=[])
    assert to_text(g).startswith("graph fuzz")
    assert all(k in ("device", "program") or g.nodes[n]["label"] for n, k in g.nodes(data="kind"))
    # every statement reads or writes something that exists in the graph
    for n in (n for n, k in g.nodes(data="kind") if k == "statement"):
        assert g.in_degree(n) + g.out_degree(n) >= 1


def test_access_log_from_the_simulator():
    from mpmd_lab import simulator as simulate

    s = gallery.load("ring-shift")
    result = simulate.simulate(s)
    g = build_graph(s, diagnostics=[], access_log=result)
    # every one of 4 devices reads all 256 elements of x_ref and writes 256 through p
    assert g.nodes["param:args[0]"]["reads"] == 4 * 256
    assert g.nodes["view:0.0.t0"]["writes"] == 4 * 256
    assert [g.nodes[f"device:{d}"]["writes"] for d in range(4)] == [256] * 4
    again = build_graph(s, diagnostics=[], access_log=result.log)
    assert to_text(again) == to_text(g)
