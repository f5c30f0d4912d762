"""What the user reads is bounded and always comes out: user input is quoted cut to a sane
length, any output encoding works, and no description breaks a picture (control
characters in SVG, matplotlib mathtext such as ``$\\undefinedcmd$``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mpmd_lab import cli, gallery
from mpmd_lab import draw as plot
from mpmd_lab.safetext import clip, printable
from mpmd_lab.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mpmd-lab")
    return subprocess.run(
        [str(exe), *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **env},
    )


def test_clip_keeps_head_and_tail_and_says_how_much_went():
    assert clip("short") == "short"
    long = "a" * 5_000_000 + "END"
    out = clip(long, 80)
    assert len(out) < 110 and out.startswith("aaa") and out.endswith("END")
    assert "4,999,9" in out  # how many characters were left out
    assert printable("a\x01b\x1b[2J\x7fc\ufffe\nd") == "a\\x01b\\x1b[2J\\x7fc\\ufffe\nd"


def test_ascii_streams_never_crash_and_json_stays_json():
    for argv in (["explain", "MPMD_DUP_REF"], ["graph", "cluster-exchange", "--text"]):
        proc = _cli(*argv, PYTHONIOENCODING="ascii")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (argv, proc.stderr)
        assert proc.stdout.isascii() and "\\u00b7" in proc.stdout, proc.stdout[:400]
    data = gallery.load("ring-shift").to_dict()
    data["description"] = "naïve · ünïcödé ✓ 🚀"
    proc = _cli("check", json.dumps(data), "--fix", PYTHONIOENCODING="ascii")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["description"] == data["description"]


@pytest.mark.slow
def test_a_5_mb_name_makes_short_messages(tmp_path, capsys):
    data = gallery.load("ring-shift").to_dict()
    data["buffers"]["n" * 5_000_000] = {"shape": [4], "dtype": "float32"}
    data["call"]["args"][0]["param"] = "p" * 3_000_000
    bad = tmp_path / "huge-name.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad)
    assert len(str(info.value)) < 5_000
    assert cli.main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "buffers" in err and "call.args[0].param" in err, err
    assert len(err) < 5_000 and max(map(len, err.splitlines())) < 1_000, len(err)
    query = "no such message " * 100_000
    assert cli.main(["explain", query]) == 1
    err = capsys.readouterr().err
    assert "no code or known JAX message matches" in err and len(err) < 20_000


def _with_description(text: str):
    data = gallery.load("ring-shift").to_dict()
    data["description"] = text
    return load_scenario(data)


def test_control_characters_in_a_description_keep_the_svg_well_formed(tmp_path):
    hostile = "bell\x07 esc\x1b[31m nul-ish\x01\x02 del\x7f c1\x85\x9b -- ]]> <&> \ufffe end"
    svg = plot.render_aliasing(_with_description(hostile), "svg")
    root = ET.fromstring(svg)  # raises on ill-formed XML
    assert root.tag.endswith("svg")
    assert b"\\x07" in svg and b"\x07" not in svg
    out = tmp_path / "g.svg"
    assert (
        cli.main(["graph", json.dumps(_with_description(hostile).to_dict()), "-o", str(out)]) == 0
    )
    ET.parse(out)


@pytest.mark.parametrize("desc", [r"costs $\undefinedcmd$", r"$x^$ and $$", "a $ b $ c \\"])
def test_mathtext_in_a_description_is_plain_text_not_a_traceback(tmp_path, capsys, desc):
    s = _with_description(desc)
    out = tmp_path / "g.png"
    assert cli.main(["graph", json.dumps(s.to_dict()), "-o", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert out.read_bytes().startswith(b"\x89PNG")
    fig = plot.plot_aliasing(s)  # the notebook's inline picture and the Lab's redraw
    assert fig._repr_png_().startswith(b"\x89PNG")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    assert desc.split()[0] in "\n".join(t.get_text() for t in fig.texts + _texts(fig))


def _texts(fig):
    from matplotlib.text import Text

    return list(fig.findobj(Text))
