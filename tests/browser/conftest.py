"""Real-browser fixtures: a token-less JupyterLab on 127.0.0.1 over a temp copy of the
test notebooks, Debian's Chromium driven by Playwright (shared/design/RECIPES-jupyter.md).

Only what these fixtures start is stopped, by PID. Without /usr/bin/chromium the browser
tests fail with the command that installs it (CI installs it; see .ci/run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(work: Path) -> None:
    base = work / "settings" / "@jupyterlab"
    files = {
        "apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for rel, value in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


def _stop(proc: subprocess.Popen, base_url: str) -> None:
    import psutil

    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    try:
        req = urllib.request.Request(base_url + "/api/shutdown", method="POST")
        urllib.request.urlopen(req, timeout=5)
    except OSError:
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for k in kids:  # leftovers (kernels, JAX workers), by PID
        try:
            k.terminate()
            k.wait(5)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            k.kill()


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """``(base_url, work_dir)`` of a JupyterLab serving copies of tests/browser/*.ipynb."""
    yield from _serve(tmp_path_factory.mktemp("jlab"), HERE.glob("*.ipynb"), "nb")


@pytest.fixture(scope="session")
def workshop_server(tmp_path_factory):
    """``(base_url, work_dir)`` of a JupyterLab serving copies of the workshop notebooks
    (in a folder named ``notebooks``, as the notebooks expect)."""
    yield from _serve(
        tmp_path_factory.mktemp("workshop"), (ROOT / "notebooks").glob("*.ipynb"), "notebooks"
    )


def _serve(work: Path, notebooks, folder: str):
    nb = work / folder
    nb.mkdir()
    for f in notebooks:
        shutil.copy(f, nb / f.name)
    _settings(work)
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(work / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(work / "rt"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "IPYTHONDIR": str(work / "ipython"),
        "MPLBACKEND": "Agg",
    }
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={nb}",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={work / 'ws'}",
        f"--LabApp.user_settings_dir={work / 'settings'}", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=work, env=env
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(base + "/api/status", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail("JupyterLab did not start:\n" + (work / "server.log").read_text())
            time.sleep(0.3)
    try:
        yield base, work
    finally:
        _stop(proc, base)
        log.close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium fonts-dejavu-core")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROME_ARGS)
        yield b
        b.close()


#: jupyter_server 2.21 answers a kernel listing made while a kernel is still starting with
#: a 500 (TraitError: 'last_activity' ... not the NoneType None); JupyterLab polls again.
#: Seen only on a loaded machine. Exactly that request is tolerated; nothing else is.
KERNEL_LIST_RACE = re.compile(r"/api/kernels\?\d+$")


def _console(msg, errors: list[str]) -> None:
    if msg.type != "error":
        return
    url = (msg.location or {}).get("url", "")
    if "status of 500" in msg.text and KERNEL_LIST_RACE.search(url):
        return
    errors.append(f"console: {msg.text} ({url})")


@pytest.fixture
def page(browser):
    """A page that records every JavaScript error; the test fails on any."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    # no internet here: answer anything not on 127.0.0.1 with an empty 200
    ctx.route(
        re.compile(r"^https?://(?!127\.0\.0\.1[:/])"),
        lambda r: r.fulfill(status=200, body="", content_type="text/css"),
    )
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("console", lambda m: _console(m, errors))
    pg.js_errors = errors
    yield pg
    ctx.close()
    assert not errors, "JavaScript errors in the page:\n" + "\n".join(errors)


@pytest.fixture
def run_notebook():
    """``run_notebook(page, base, name)``: open a notebook and run all its cells."""
    return open_and_run_all


def open_and_run_all(page, base: str, notebook: str, timeout: float = 120_000) -> None:
    """Open a notebook, wait for an idle kernel, run every cell, wait until all ran."""
    page.goto(f"{base}/lab/tree/{notebook}?reset")
    page.wait_for_function(
        "window.jupyterapp && window.jupyterapp.shell.currentWidget "
        "&& window.jupyterapp.shell.currentWidget.sessionContext"
    )
    page.wait_for_function(
        """() => { const w = window.jupyterapp.shell.currentWidget;
        const k = w.sessionContext.session && w.sessionContext.session.kernel;
        return k && k.status === 'idle'; }"""
    )
    page.evaluate(
        """async () => { const c = window.jupyterapp.commands;
        await c.execute('notebook:clear-all-cell-outputs');
        await c.execute('notebook:run-all-cells'); }"""
    )
    page.wait_for_function(
        """() => { const w = window.jupyterapp.shell.currentWidget;
        const k = w.sessionContext.session.kernel;
        return k.status === 'idle' && w.content.widgets.every(
            c => c.model.type !== 'code' || c.model.executionCount); }""",
        timeout=timeout,
    )


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
