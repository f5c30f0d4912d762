"""binder/: what repo2docker needs, and the environment it describes really works.

The test rebuilds that environment the way repo2docker does (the Python of
``runtime.txt``, then ``pip install -r binder/requirements.txt`` from the repository
root), in a fresh venv made with uv, and runs the landing notebook in it: the installed
package, not this checkout, must carry the whole tour.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
LANDING = "00-start-here.ipynb"


def test_binder_files_are_what_repo2docker_reads():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert runtime == "python-3.12"  # x.y only: repo2docker aborts on x.y.z
    assert not (BINDER / "environment.yml").exists()  # it would switch off requirements.txt
    reqs = [
        line.strip()
        for line in (BINDER / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "." in reqs  # the project itself, from the repository root
    post = BINDER / "postBuild"
    assert not post.exists() or os.access(post, os.X_OK)
    assert (ROOT / "notebooks" / LANDING).is_file()


@pytest.mark.notebooks
def test_binder_environment_builds_and_runs_the_landing_notebook(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    python = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": ""}
    env.pop("PYTHONPATH", None)
    venv = tmp_path / "venv"

    def sh(*cmd: str, cwd: Path = ROOT, timeout: float = 600) -> None:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, (
            f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )

    sh(uv, "venv", "--python", python, str(venv))
    py = venv / "bin" / "python"
    # --refresh-package: uv keys a local project's cached wheel on pyproject.toml alone;
    # Binder always builds this checkout afresh, and so must the test.
    sh(
        uv,
        "pip",
        "install",
        "--python",
        str(py),
        "--refresh-package",
        "mpmd-lab",
        "-r",
        str(BINDER / "requirements.txt"),
    )

    # The notebook runs from a copy, so only the installed package can be imported.
    work = tmp_path / "site" / "notebooks"
    work.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / LANDING, work / LANDING)
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
        JUPYTER_PLATFORM_DIRS="1",
        MPLBACKEND="Agg",
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    sh(str(venv / "bin" / "jupyter"), "execute", "--timeout=600", LANDING, cwd=work, timeout=900)
