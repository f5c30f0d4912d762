"""Shared fixtures: gallery scenarios, a temp dir, the CLI in-process and as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def gallery_names() -> list[str]:
    from mpmd_lab import gallery

    return gallery.names()


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed `mpmd-lab` command, as a user runs it."""
    exe = Path(sys.executable).with_name("mpmd-lab")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture
def cli():
    return run_cli


# Hypothesis profiles (default / long) and the `fuzz` marker: tests/hypothesis_profiles.py
pytest_plugins = ["hypothesis_profiles"]


def pytest_terminal_summary(terminalreporter):
    """The agreement rates the transform-stack property measured (tests/agreement_stacks.py)."""
    mod = sys.modules.get("agreement_stacks")
    for line in getattr(mod, "SUMMARY", []):
        terminalreporter.write_line(line)
