"""Every workshop notebook run in JupyterLab in a real Chromium, top to bottom, with a
screenshot of each screenful (test-artifacts/notebooks/NAME-NN.png) to look at: no
JavaScript errors, every widget output rendered, no cell stuck or failed where it
should not be."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.notebooks]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RAISES = "raises-exception"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_in_the_browser(workshop_server, page, artifacts, run_notebook, path):
    base, _work = workshop_server
    page.set_viewport_size({"width": 1280, "height": 1100})
    run_notebook(page, base, path.name, timeout=600_000)
    nb = nbformat.read(path, as_version=4)
    meant = sum(
        1 for c in nb.cells if c.cell_type == "code" and RAISES in c.metadata.get("tags", [])
    )
    # errors show only where the notebook means them
    errors = page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']")
    assert errors.count() <= meant, f"{errors.count()} error outputs, {meant} meant"
    # every widget rendered (no "Loading widget..." or an error box left)
    page.wait_for_function(
        "() => !document.querySelector('.jp-OutputArea-output .jupyter-widgets-disconnected')"
    )
    assert page.locator(".jp-OutputArea-output:has-text('Error displaying widget')").count() == 0
    shots = artifacts / "notebooks"
    shots.mkdir(exist_ok=True)
    for old in shots.glob(f"{path.stem}-*.png"):
        old.unlink()
    panel = page.locator(".jp-NotebookPanel .jp-WindowedPanel-outer").first
    height = panel.evaluate("el => el.scrollHeight")
    view = panel.evaluate("el => el.clientHeight")
    n, top = 0, 0
    while True:
        panel.evaluate(f"el => {{ el.scrollTop = {top}; }}")
        page.wait_for_timeout(250)
        n += 1
        page.screenshot(path=str(shots / f"{path.stem}-{n:02d}.png"))
        top += max(view - 80, 200)
        if top >= height or n >= 40:
            break
