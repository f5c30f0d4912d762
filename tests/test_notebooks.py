"""The workshop notebooks: committed clean, built from notebooks/_build.py, and every one
runs top to bottom headless, raising only in the cells tagged ``raises-exception``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_committed_notebooks_carry_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_committed_notebooks_are_what_the_build_script_makes():
    done = subprocess.run(
        [sys.executable, str(NOTEBOOKS / "_build.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def execute(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run a notebook in a fresh kernel, cwd notebooks/, as a learner would."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    return nb


@pytest.mark.notebooks
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path):
    nb = execute(path)  # raises on an error in an untagged cell
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
