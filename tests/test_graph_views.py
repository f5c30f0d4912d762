"""The fast view (``mpmd_lab.scene``, painted as SVG for the browser) and the matplotlib
figure (``mpmd_lab.draw``) show the same graph model: the same nodes, edges and problem
marks, the same device traffic, the same problems listed; and the layout cache returns
the same positions a fresh layout would."""

from __future__ import annotations

import importlib.util
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pytest
from graph_strategies import loadable, scenario_dicts
from hypothesis import HealthCheck, assume, given, settings
from mpmd_lab import draw as plot
from mpmd_lab import gallery, graph, layout, scene
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import load_scenario

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"


def synthetic(n: int) -> dict:
    spec = importlib.util.spec_from_file_location("bench_graph", ROOT / "bench/bench_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.synthetic(n)


def painted(fig) -> dict:
    """``plot.draw``'s record in the form of ``scene.marks``."""
    rec = fig.mpmd_lab_painted
    return {
        "nodes": rec["nodes"],
        "edges": sorted(rec["edges"]),
        "clusters": rec["clusters"],
        "problems": rec["problems"],
        "devices": None
        if rec["devices"] is None
        else {
            **rec["devices"],
            "red": sorted(rec["devices"]["red"]),
            "peers": sorted(rec["devices"]["peers"]),
            "signals": sorted(rec["devices"]["signals"]),
            "hubs": sorted(rec["devices"]["hubs"]),
        },
    }


def assert_same(g) -> dict:
    """Both views of ``g`` show the same marks, and those are the model's."""
    s = scene.scene(g)
    json.dumps(s)  # the fast view's form is plain JSON
    fast, mpl = scene.marks(s), painted(plot.draw(g))
    shown = plot.FOOTER_PROBLEMS
    assert mpl["problems"] == fast["problems"][:shown]
    assert plot.draw(g).mpmd_lab_painted["more_problems"] == max(0, len(s["problems"]) - shown)
    for key in ("nodes", "edges", "clusters", "devices"):
        assert fast[key] == mpl[key], key
    # ... and against the model itself: every problem, each red node carries an error
    assert [(d.code, d.is_error) for d in graph.problems(g)] == [
        p for p in fast["problems"] if p[1]
    ]
    if s["mode"] == "full":
        drawn = {n for n, k in g.nodes(data="kind") if k not in ("device", "program")}
        assert drawn <= set(fast["nodes"])
        for n in drawn:
            assert fast["nodes"][n]["red"] == graph.is_red(g.nodes[n]), n
    return s


@pytest.mark.slow
def test_every_gallery_scenario_shows_the_same_model_in_both_views():
    for name in gallery.names():
        s = assert_same(graph.build_graph(gallery.load(name)))
        assert s["nodes"], name


def test_problems_are_marked_the_same_and_listed_in_full():
    dup = Diagnostic(code="MPMD_DUP_REF", path="call.args[1]", message="Cannot pass " * 40)
    g = graph.build_graph(gallery.load("dup-ref"), diagnostics=[dup])
    s = assert_same(g)
    red = [n for n in s["nodes"] if n["red"]]
    assert red and all(any("MPMD_DUP_REF" in t for t, _c, _b in n["lines"]) for n in red)
    assert any(e["red"] and e["kind"] == "aliases" for e in s["edges"])
    assert s["problems"][0]["message"] == " ".join(dup.message.split())  # not cut
    # the figure's footer wraps the long message instead of cutting it with "…"
    texts = [t.get_text() for t in plot.draw(g).findobj(matplotlib.text.Text)]
    footer = [t for t in texts if "Cannot pass" in t]
    assert len(footer) > 1 and not any(t.endswith("…") for t in footer)
    assert " ".join(" ".join(footer).split()).count("Cannot pass") == 40


def test_a_big_graph_is_summarised_the_same_way_in_both_views():
    dup = Diagnostic(code="MPMD_DUP_REF", path="call.args[1]", message="Cannot pass the same ref")
    g = graph.build_graph(load_scenario(synthetic(400)), diagnostics=[dup])
    s = assert_same(g)
    assert s["mode"] == "summary" and any(n["red"] for n in s["nodes"])


def test_many_devices_show_the_same_traffic_matrix():
    d = gallery.load("peer-then-multicast").to_dict()
    d["device_mesh"] = {"dev": 128}
    s = assert_same(graph.build_graph(load_scenario(d)))
    assert s["devices"]["shape"] == "matrix" and any(c["red"] for c in s["devices"]["cells"])


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_dicts)
def test_any_loadable_scenario_shows_the_same_model_in_both_views(data):
    s = loadable(data)
    assume(s is not None)
    assert_same(graph.build_graph(s))


def test_the_svg_holds_what_the_scene_says():
    s = scene.scene(graph.build_graph(gallery.load("peer-then-multicast")))
    root = ET.fromstring(scene.to_svg(s))
    nodes = {g.get("data-id"): g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "")}
    assert set(nodes) == {n["id"] for n in s["nodes"]}
    for n in s["nodes"]:
        g = nodes[n["id"]]
        assert ("red" in g.get("class").split()) == n["red"]
        assert g.get("data-path") == n["path"]
        assert [t.text for t in g.iter(f"{SVG}text")] == [t for t, _c, _b in n["lines"]]
        assert n["path"] in g.find(f"{SVG}title").text  # the hover text names the field
    edges = [g for g in root.iter(f"{SVG}g") if "edge" in g.get("class", "")]
    assert len(edges) == len(s["edges"])
    dev = ET.fromstring(scene.devices_svg(s))
    assert {c.get("data-i") for c in dev.iter(f"{SVG}g") if "device" in c.get("class")} == {
        "0",
        "1",
    }


def test_the_layout_cache_reuses_positions_when_only_text_changes():
    cache = layout.LayoutCache()
    base = gallery.load("dup-ref-fixed").to_dict()
    first = layout.laid_out(graph.build_graph(load_scenario(base), diagnostics=[]), cache)
    assert cache.misses == 1 and not cache.last_hit
    renamed = json.loads(json.dumps(base).replace('"acc"', '"acd"'))  # same length
    again = layout.laid_out(graph.build_graph(load_scenario(renamed), diagnostics=[]), cache)
    assert cache.last_hit and cache.misses == 1
    fresh = layout.layout(layout.drawing(graph.build_graph(load_scenario(renamed), [])))
    assert again.bb == fresh.bb == first.bb
    for n, node in fresh.nodes.items():
        assert (again.nodes[n].x, again.nodes[n].y) == (node.x, node.y), n
    assert [e.pts for e in again.edges] == [e.pts for e in fresh.edges]
    assert any("acd" in t for node in again.nodes.values() for t, _ in node.lines)
    # a new node is a new structure: laid out afresh
    more = json.loads(json.dumps(base))
    more["call"]["args"].append({"buffer": "acc", "param": "again"})
    layout.laid_out(graph.build_graph(load_scenario(more), diagnostics=[]), cache)
    assert not cache.last_hit and cache.misses == 2


def test_the_fast_view_follows_typing_at_fifty_nodes():
    """Graph model -> SVG strings for the browser, at ~50 nodes: far under 100 ms once the
    structure is known (the browser's paint is timed in the browser test and the bench)."""
    from mpmd_lab.widgets.graph_view import GraphSVG

    g = graph.build_graph(load_scenario(synthetic(50)), diagnostics=[])
    view, cache = GraphSVG(), layout.LayoutCache()
    view.show(scene.scene(g, cache))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        view.show(scene.scene(g, cache))
        times.append(time.perf_counter() - t0)
    assert cache.last_hit
    assert sorted(times)[2] < 0.1  # typically ~5 ms; generous for a loaded CI machine


def test_inline_figures_are_readable_at_a_notebook_column():
    """Shown inline (100 dpi) in a 1,000 px column, node text is at least 11 px: past
    the column's width the device panel goes under the graph instead of beside it."""
    for name in ("ring-shift", "peer-then-multicast", "multicast-2d", "dup-ref"):
        fig = plot.plot_aliasing(gallery.load(name))
        shrink = min(1.0, 1000 / (fig.get_size_inches()[0] * 100))
        node_texts = [
            t.get_fontsize()
            for t in fig.findobj(matplotlib.text.Text)
            if t.get_text() in {"args[0]", "x_ref"}
        ]
        assert node_texts, name
        assert min(node_texts) * 100 / 72 * shrink >= 10.9, (name, node_texts, shrink)


@pytest.mark.parametrize("name", gallery.names())
def test_each_programs_statements_read_top_to_bottom_in_program_order(name):
    """One column per program, its statements in program order from the top (15.5.2
    after 15.5.1, after 15.5), every edge drawn to where its boxes are."""
    s = scene.scene(graph.build_graph(gallery.load(name)), cache=None)
    nodes = {n["id"]: n for n in s["nodes"]}
    column: dict[int, list[tuple[tuple[int, ...], dict]]] = {}
    for nid, n in nodes.items():
        if n["kind"] == "statement" and nid.startswith("stmt:"):
            index = layout._statement_index(nid)
            column.setdefault(index[0], []).append((index, n))
    for stmts in column.values():
        stmts.sort(key=lambda t: t[0])
        assert len({round(n["x"]) for _, n in stmts}) == 1, "one column"
        for (_, a), (_, b) in zip(stmts, stmts[1:], strict=False):
            assert a["y"] + a["h"] / 2 <= b["y"] - b["h"] / 2, (a["label"], b["label"])
    for e in s["edges"]:  # the arrow ends at its head box's edge (within a few points)
        head = nodes[e["v"]]
        tip = e["head"][0] if e["head"] else None
        if tip is None:
            continue
        assert abs(tip[0] - head["x"]) <= head["w"] / 2 + 4, (e["u"], e["v"])
        assert abs(tip[1] - head["y"]) <= head["h"] / 2 + 4, (e["u"], e["v"])
