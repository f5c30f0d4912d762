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


#: Test modules that ask real JAX in child processes, run the installed command many
#: times, or render many figures: the full suite (`make test`) runs them, the inner loop
#: (`make test-fast`) does not. Every other module is fast: the model, the rules, the views.
SLOW_MODULES = frozenset(
    {
        "test_agreement_cases",
        "test_agreement_stacks",
        "test_bad_input",
        "test_bench_json",
        "test_binder",
        "test_deep",
        "test_exercises",
        "test_faults",
        "test_files",
        "test_fixes",
        "test_gpucheck",
        "test_knowledge",
        "test_layout_rules",
        "test_loader_bounds",
        "test_memory_estimate",
        "test_notebooks",
        "test_multihost",
        "test_orphans",
        "test_probe",
        "test_runtime",
        "test_simulate_jax",
        "test_validate_agreement",
        "test_validate_block_oob",
    }
)
#: ... and single slow tests in otherwise fast modules (name prefixes)
SLOW_TESTS = (
    "test_every_gallery_scenario_renders_png_and_svg",
    "test_any_loadable_scenario_draws",
    "test_two_thousand_nodes_summarise",
    "test_cli_graph_writes_a_picture_and_text",
    "test_jax_agrees",
    "test_interpreter_agrees",
    "test_steps_match_jax",
    "test_fixed_set_not_below_baseline",
    "test_any_loadable_scenario_shows_the_same_model",
    "test_dup_ref_story_runs",
    "test_running_the_broken_call",
    "test_peer_then_multicast_story_runs",
    "test_corpus_kernels_lower",
    "test_races_agree_with_the_gpu_interpreters_detector",
    "test_out_of_bounds_of_every_expression_form_as_the_interpreter_says_it",
    "test_the_simulate_backend_runs_in_a_bounded_child_process",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if module in SLOW_MODULES or item.name.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
