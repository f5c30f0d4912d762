"""The workshop notebooks: each authored as a jupytext pair (a percent-format ``.py``
beside the ``.ipynb``, the ``.py`` reviewed as code), the pairs in sync, and every one
runs top to bottom headless from a copy, raising only in the cells tagged
``raises-exception``. Running the notebooks in place (JupyterLab autosaves their
outputs) changes nothing here: the tests read sources, never outputs, and run copies."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import jupytext
import mpmd_lab
import nbformat
import pytest

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
RAISES = "raises-exception"


def test_the_curriculum_is_all_there():
    names = {p.stem for p in PATHS}
    for prefix in ("00-", "01-", "02-", "03-", "04-", "05-", "07-", "08-"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert {"06-exercises", "06-exercises-solutions"} <= names
    assert (NOTEBOOKS / "FACILITATOR.md").is_file()


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    """What a pair must agree on: each cell's kind, source and tags (not outputs)."""
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_notebook_is_a_jupytext_pair():
    scripts = {p.stem for p in NOTEBOOKS.glob("[0-9]*.py")}
    assert scripts == {p.stem for p in PATHS}
    assert not (NOTEBOOKS / "_build.py").exists()  # the pairs are the source now
    for path in PATHS:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata["jupytext"]["formats"] == "ipynb,py:percent", path.name


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_the_pair_is_in_sync(path):
    """The ``.ipynb`` holds what its ``.py`` says (``jupytext --sync notebooks/*.py``
    after editing either one outside JupyterLab; inside it, saving updates both)."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    script = jupytext.read(path.with_suffix(".py"))
    assert _cells(script) == _cells(nb), f"run: jupytext --sync {path.with_suffix('.py')}"


def test_start_here_lists_every_notebook_and_uses_the_public_api():
    text = (NOTEBOOKS / "00-start-here.py").read_text()
    rows = re.findall(r"^# \| (\d\d) ([a-z ]+?) \|", text, re.M)
    listed = {f"{n}-{words.strip().replace(' ', '-')}" for n, words in rows}
    assert {p.stem for p in PATHS} - {"06-exercises-solutions"} <= listed
    assert "06 exercises — solutions" in text  # the key, on the exercises' row
    cells = jupytext.read(NOTEBOOKS / "00-start-here.py").cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    for module_call in ("validate.check", "runtime.run", "knowledge.lookup", "codegen.generate"):
        assert module_call not in code and module_call not in text, module_call
    used = {
        n.attr
        for n in ast.walk(ast.parse(re.sub(r"^[%!].*$", "", code, flags=re.M)))
        if isinstance(n, ast.Attribute) and getattr(n.value, "id", "") == "mpmd_lab"
    }
    assert used and used <= set(mpmd_lab.__all__), used - set(mpmd_lab.__all__)
    readme = (ROOT / "README.md").read_text()
    assert all(f"mpmd_lab.{name}" in readme for name in used)


def execute(path: Path, work: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run a notebook, made from its ``.py``, in a fresh kernel, from a copy of
    notebooks/ (cwd ``work/notebooks``, as a learner's): nothing in the repository is
    read as run or written."""
    from nbclient import NotebookClient

    folder = work / "notebooks"
    shutil.copytree(NOTEBOOKS, folder, ignore=shutil.ignore_patterns("*.ipynb", ".*"))
    nb = jupytext.read(folder / path.with_suffix(".py").name)
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    return nb


@pytest.mark.notebooks
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path):
    nb = execute(path, tmp_path)  # raises on an error in an untagged cell
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tagged = RAISES in cell.metadata.get("tags", [])
        # a tagged cell must really show its error, so the story it tells stays true
        assert bool(errors) == tagged, (cell.source[:80], [e.get("ename") for e in errors])
        for out in cell.outputs:
            text = out.get("text", "")
            assert "Traceback" not in text or tagged, cell.source[:80]


def test_make_lab_turns_the_news_toast_off():
    """``make lab`` starts JupyterLab with the news feed and the update check off, and
    the notification plugin's defaults (this environment's overrides.json, written by
    the Makefile) say "never"."""
    import json
    import subprocess
    import sys

    dry = subprocess.run(
        ["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    assert "--LabApp.news_url=None" in dry and "NeverCheckForUpdate" in dry
    makefile = (ROOT / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if "echo" in x and "fetchNews" in x)
    assert "$(LAB_OVERRIDES)" in makefile.split("\nlab:", 1)[1].splitlines()[0]
    overrides = json.loads(line.split("'")[1])
    plugin, values = next(iter(overrides.items()))
    schema = Path(sys.prefix, "share/jupyter/lab/schemas", *plugin.split(":"))
    props = json.loads(schema.with_suffix(".json").read_text())["properties"]
    assert values == {"fetchNews": "false", "checkForUpdates": False}
    assert values["fetchNews"] in {x["const"] for x in props["fetchNews"]["oneOf"]}
    assert "checkForUpdates" in props


def test_collectives_says_what_the_ring_check_prints():
    """Notebook 08 says the ring's check has no error or warning and one note, a fact of
    this machine (it said "nothing from the check" above a printed note)."""
    from mpmd_lab import load, validate
    from mpmd_lab.diagnostics import interpreter_limit

    text = (NOTEBOOKS / "08-collectives.py").read_text()
    assert "nothing from the check" not in text and "its one note is a fact of this machine" in text
    diags = validate.check(load("ring-all-gather"))
    assert len(diags) == 1 and interpreter_limit(diags[0])


def test_prototyping_uses_the_readmes_names():
    """Notebook 05 walks the README's loop (load, check, run, export, save) by the names
    the README gives, not the modules beneath them (it used validate.check, runtime.run,
    codegen.generate)."""
    text = (NOTEBOOKS / "05-prototyping.py").read_text()
    for module_call in ("validate.check", "runtime.run", "codegen.generate", "load_scenario"):
        assert module_call not in text, module_call
    for name in ("load", "check", "run", "export", "save"):
        assert f"mpmd_lab.{name}(" in text, name


def test_the_facilitators_guide_names_every_notebook():
    """The guide plans each workshop notebook (09, the puzzles, was missing)."""
    guide = " ".join((NOTEBOOKS / "FACILITATOR.md").read_text().split())
    for p in PATHS:
        number, words = p.stem.split("-", 1)
        if words.endswith("solutions"):
            continue
        assert f"{number} {words.replace('-', ' ')}" in guide, p.stem
