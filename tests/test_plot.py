"""The aliasing picture: every gallery scenario renders; problems are red; any scenario draws."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import matplotlib
import pytest
from graph_strategies import loadable, scenario_dicts
from hypothesis import HealthCheck, assume, given, settings
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text
from mpmd_lab import draw as plot
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import load_scenario

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
RED = matplotlib.colors.to_rgba(plot.RED)


def synthetic(n: int) -> dict:
    spec = importlib.util.spec_from_file_location("bench_graph", ROOT / "bench/bench_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.synthetic(n)


def red_texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_color() == plot.RED and t.get_text()]


def red_patches(fig: Figure) -> list[Patch]:
    return [p for p in fig.findobj(Patch) if p.get_edgecolor() == RED]


DUP = Diagnostic(code="MPMD_DUP_REF", path="call.args[1]", message="Cannot pass the same ref")


@pytest.mark.slow
def test_every_gallery_scenario_renders_png_and_svg(tmp_path):
    for name in gallery.names():
        fig = plot.plot_aliasing(gallery.load(name))
        assert fig.mpmd_lab_mode == "full", name
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        fig.savefig(png, dpi=60)
        fig.savefig(svg)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert png.stat().st_size > 10_000, name
        text = svg.read_text()
        assert "<svg" in text and "</svg>" in text, name
    out = plot.save_aliasing(gallery.load("dup-ref"), tmp_path / "dup-ref.svg")
    assert "<svg" in out.read_text()


def test_pdf_and_bad_suffix(tmp_path):
    out = plot.save_aliasing(gallery.load("ring-shift"), tmp_path / "ring.pdf")
    assert out.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match="png, .svg or .pdf"):
        plot.save_aliasing(gallery.load("ring-shift"), tmp_path / "ring.gif")


def test_problems_are_red_with_their_code():
    fig = plot.plot_aliasing(gallery.load("dup-ref"), diagnostics=[DUP])
    texts = red_texts(fig)
    assert "x MPMD_DUP_REF" in texts  # inside the argument's node
    assert "MPMD_DUP_REF" in texts  # on the alias edge
    assert any(t.startswith("x MPMD_DUP_REF  call.args[1]") for t in texts)  # the footer
    assert red_patches(fig)


def test_a_valid_scenario_has_no_red():
    for name in ("ring-shift", "multicast-2d", "dup-ref-fixed"):
        fig = plot.plot_aliasing(gallery.load(name), diagnostics=[])
        assert red_texts(fig) == [] and red_patches(fig) == [], name


def test_device_panel_shows_traffic():
    fig = plot.plot_aliasing(gallery.load("ring-shift"), diagnostics=[])
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert {"d0", "d1", "d2", "d3"} <= set(texts)
    assert any("remote_ref(dev+1)" in t for t in texts)
    fig = plot.plot_aliasing(gallery.load("two-block-copy"), diagnostics=[])
    assert "d0" not in [t.get_text() for t in fig.findobj(Text)]  # no device mesh, no panel


def test_draws_into_a_given_axes():
    fig = Figure(figsize=(9, 5))
    ax = fig.add_subplot()
    assert plot.plot_aliasing(gallery.load("peer-then-multicast"), ax=ax) is fig
    assert fig.mpmd_lab_mode == "full"


def test_many_devices_draw_a_traffic_matrix(tmp_path):
    s = gallery.load("ring-shift").to_dict()
    s["device_mesh"] = {"dev": 256}
    fig = plot.plot_aliasing(load_scenario(s), diagnostics=[])
    assert fig.mpmd_lab_mode == "full"
    assert any("who writes to whom" in t.get_text() for t in fig.findobj(Text))
    fig.savefig(tmp_path / "m.png")


@pytest.mark.slow
def test_two_thousand_nodes_summarise_in_seconds(tmp_path):
    s = load_scenario(synthetic(2000))
    t0 = time.perf_counter()
    out = plot.save_aliasing(s, tmp_path / "big.png", diagnostics=[DUP])
    seconds = time.perf_counter() - t0
    fig = plot.plot_aliasing(s, diagnostics=[DUP])
    assert fig.mpmd_lab_mode == "summary"
    assert "x MPMD_DUP_REF" in red_texts(fig)  # the problem stays visible
    assert out.stat().st_size > 10_000
    assert seconds < 30  # a few seconds on a quiet machine; generous for a busy CI box


@pytest.mark.slow
def test_cli_graph_writes_a_picture_and_text(cli, tmp_path, capsys):
    out = tmp_path / "ring.svg"
    r = cli("graph", "ring-shift", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "<svg" in out.read_text()
    from mpmd_lab.cli import main

    assert main(["graph", "ring-shift", "--text"]) == 0
    assert "peer-of via call.programs[0].body[0].transforms[0]" in capsys.readouterr().out


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_dicts)
def test_any_loadable_scenario_draws(data):
    s = loadable(data)
    assume(s is not None)
    fig = plot.plot_aliasing(s)
    assert fig.mpmd_lab_mode in ("full", "summary")  # never the fallback picture
    fig.savefig(__import__("io").BytesIO(), format="png", dpi=40)


def test_toolkit_exports_plot_aliasing_lazily():
    import mpmd_lab

    fig = mpmd_lab.plot_aliasing("ring-shift", diagnostics=[])
    assert isinstance(fig, Figure) and fig.mpmd_lab_mode == "full"


def test_access_counts_are_drawn():
    from mpmd_lab import simulator as simulate

    s = gallery.load("two-block-race")
    fig = plot.plot_aliasing(s, diagnostics=[], access_log=simulate.simulate(s))
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert "reads 256 · writes 256" in texts  # the copy: two blocks of 128 elements


def test_the_figure_shows_itself_in_a_notebook():
    from IPython.core.formatters import DisplayFormatter

    fig = plot.plot_aliasing(gallery.load("ring-shift"), diagnostics=[])
    data, _ = DisplayFormatter().format(fig)  # what IPython does with a cell's value
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
