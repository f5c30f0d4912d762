"""README loose ends (issue 15): the Binder badge can be pointed at your copy, the CLI
examples run from the repository without an activated venv, the Lab's picture is a real
screenshot of today's Lab."""

from __future__ import annotations

import importlib.util
import re
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _badge():
    spec = importlib.util.spec_from_file_location("badge", ROOT / "binder" / "badge.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "remote",
    [
        "https://github.com/alice/mpmd-lab.git",
        "git@github.com:alice/mpmd-lab.git",
        "https://github.com/alice/mpmd-lab",
    ],
)
def test_the_binder_badge_is_derived_from_the_remote(remote):
    badge = _badge()
    assert badge.owner_repo(remote) == ("alice", "mpmd-lab")
    text = badge.set_badge(README, *badge.owner_repo(remote))
    assert "https://mybinder.org/v2/gh/alice/mpmd-lab/HEAD?labpath=" in text
    assert "OWNER/mpmd-lab/HEAD" not in text
    assert text.replace("alice", "OWNER") == README  # nothing else changed
    with pytest.raises(ValueError):
        badge.owner_repo("https://gitlab.com/alice/mpmd-lab.git")


def test_the_readme_says_how_to_set_the_badge_and_where_the_command_is():
    assert "make binder-badge" in README and "binder-badge:" in (ROOT / "Makefile").read_text()
    console = README.split("```console", 1)[1].split("```", 1)[0]
    commands = [x for x in console.splitlines() if x.startswith("$ ")]
    assert commands and all(x.startswith("$ .venv/bin/mpmd-lab ") for x in commands)


def test_the_labs_picture_is_a_screenshot():
    data = (ROOT / "docs" / "img" / "lab.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1000 and height >= 600  # a browser window, not a thumbnail
    assert re.search(r"!\[The Lab in JupyterLab\]\(docs/img/lab\.png\)", README)


def _library_block() -> str:
    return README.split("## The library", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def test_the_readmes_multi_process_run_names_a_call_that_can_split():
    """The README's ``.run(processes=2)`` is on a scenario that runs as 2 processes here
    (the fixed dup-ref runs on one device: there it was refused)."""
    from mpmd_lab import load, multihost

    block = _library_block()
    (line,) = [x for x in block.splitlines() if ".run(processes=2)" in x]
    var = line.split(".run(", 1)[0].strip()
    (made,) = [x for x in block.splitlines() if x.startswith(f"{var} = mpmd_lab.Session(")]
    name = re.search(r'mpmd_lab\.load\("([^"]+)"\)', made).group(1)
    assert multihost.refusal(load(name), 2, None) is None
    assert multihost.refusal(load("dup-ref-fixed"), 2, None) is not None


def test_the_readme_says_where_make_lab_serves():
    """``make lab`` prints a tokened address: the README says to open it, on the port
    the Makefile uses by default, and how to pick another."""
    port = re.search(r"^PORT \?= (\d+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"http://127.0.0.1:{port}/lab?token=" in README
    assert "make lab PORT=" in README


def test_the_readmes_command_lines_name_every_option():
    """Each option of each subcommand is in the README's command-line blocks (run's
    --past-lowering was not)."""
    from mpmd_lab import cli

    cmd = README.split("## The command line", 1)[1].split("```", 2)[1]
    imp = README.split("```\nmpmd-lab import", 1)[1].split("```", 1)[0]
    (sub,) = [a for a in cli.parser()._actions if isinstance(a.choices, dict)]
    missing = [
        (name, a.option_strings)
        for name, p in sub.choices.items()
        for a in p._actions
        if a.option_strings and "-h" not in a.option_strings
        if not any(re.search(re.escape(o) + r"\b", cmd + imp) for o in a.option_strings)
    ]
    assert missing == []


def test_the_readme_says_an_import_carries_values_and_loaded_indices():
    """What an import carries: the README said "other arithmetic on values" was left out,
    while ``from_jax`` writes it as ``compute`` (reductions included) and reads indices
    loaded from a ref (tests/test_importer.py imports such kernels faithfully)."""
    para = README.split("What an import carries today", 1)[1].split("\n\n", 1)[0]
    assert "`compute`" in para and "jnp.sum" in para and "loaded from a ref" in para
    assert "other arithmetic on values" not in para


def test_the_readmes_layout_names_every_notebook():
    """The Layout table's notebooks row names each workshop notebook by number (09, the
    collective puzzles, was missing)."""
    (row,) = [x for x in README.splitlines() if x.startswith("| `notebooks/` |")]
    numbers = {p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.py")}
    assert numbers and all(re.search(rf"\b{n} [a-z]", row) for n in numbers), numbers


def test_the_readmes_cell_magic_line_has_every_option():
    """The README's ``%%mpmd_lab`` line names each option the magic parses
    (``--timeout`` was missing)."""
    from mpmd_lab.importer import notebook

    (line,) = re.findall(r"`(%%mpmd_lab [^`]*)`", README)
    options = [a.option_strings for a in notebook._parser()._actions if a.option_strings]
    assert options and all(any(o in line for o in names) for names in options), line
