"""mpmd_lab.gpucheck's CPU-side logic: verdicts, table, and its behaviour without a GPU."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from mpmd_lab import gallery, gpucheck, probe, runtime
from mpmd_lab.diagnostics import Diagnostic

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

X = np.arange(256, dtype=np.float32)


@pytest.fixture(scope="module")
def cpu_runs():
    return {n: runtime.run(gallery.load(n), "interpret") for n in ("two-block-copy", "dup-ref")}


def gpu_result(ok=True, outputs=None, code=None, stage=None, stages=runtime.GPU_STAGES):
    """What a GPU worker reports (the same ProbeResult a real run returns)."""
    return probe.ProbeResult(
        ok=ok,
        outputs=outputs,
        code=code,
        stage=stage,
        error_type=None if ok else "ValueError",
        message=None if ok else "boom",
        stages=tuple(stages),
        platform="gpu",
    )


def test_equal_outputs_match(cpu_runs):
    cpu = cpu_runs["two-block-copy"]
    np.testing.assert_array_equal(cpu.outputs["out"], X)
    row = gpucheck.compare("two-block-copy", cpu, gpu_result(outputs={"out": X.copy()}))
    assert (row.cpu, row.gpu, row.verdict) == ("ok", "ok", "match")


def test_different_outputs_mismatch(cpu_runs):
    wrong = X.copy()
    wrong[7] += 1
    row = gpucheck.compare("t", cpu_runs["two-block-copy"], gpu_result(outputs={"out": wrong}))
    assert row.verdict == "MISMATCH" and "differ" in row.note


def test_interpreter_nan_fill_is_partial():
    cpu_out = X.copy()
    cpu_out[128:] = np.nan  # the GPU interpreter's fill where no block wrote
    cpu = runtime.RunResult("t", "ok", "interpret", 1, outputs={"out": cpu_out})
    row = gpucheck.compare("t", cpu, gpu_result(outputs={"out": X}))
    assert row.verdict == "partial"


def test_same_error_code_matches(cpu_runs):
    cpu = cpu_runs["dup-ref"]
    assert cpu.error.code == "MPMD_DUP_REF"
    assert (
        gpucheck.compare("d", cpu, gpu_result(False, code="MPMD_DUP_REF", stage="trace")).verdict
        == "match"
    )
    other = gpu_result(False, code="AT_OOB_SLICE", stage="trace")
    assert gpucheck.compare("d", cpu, other).verdict == "MISMATCH"
    # the GPU ran what the CPU rejected at trace: a mismatch
    assert gpucheck.compare("d", cpu, gpu_result(outputs={"out": X})).verdict == "MISMATCH"


def test_interpreter_limits_are_gpu_only():
    err = Diagnostic(code="GPU_INTERP_UNSUPPORTED_TRANSFORM", stage="interpret", message="m")
    cpu = runtime.RunResult("r", "error", "interpret", 1, error=err)
    row = gpucheck.compare("r", cpu, gpu_result(outputs={"out": X}))
    assert row.verdict == "gpu-only"


def test_cross_device_lowering(cpu_runs):
    lowered = gpu_result(stages=("build", "trace", "gpu-lower"))
    err = Diagnostic(code="GPU_INTERP_UNSUPPORTED_TRANSFORM", stage="interpret", message="m")
    cpu = runtime.RunResult("ring", "error", "interpret", 4, error=err)
    row = gpucheck.compare("ring", cpu, lowered)
    assert (row.gpu, row.verdict) == ("lowered", "lowered")
    assert gpucheck.compare("d", cpu_runs["dup-ref"], lowered).verdict == "MISMATCH"


def test_table_lists_every_row(cpu_runs):
    rows = [
        gpucheck.compare(
            "two-block-copy", cpu_runs["two-block-copy"], gpu_result(outputs={"out": X})
        ),
        gpucheck.compare(
            "dup-ref", cpu_runs["dup-ref"], gpu_result(False, code="MPMD_DUP_REF", stage="trace")
        ),
    ]
    text = gpucheck.format_table(rows)
    assert text.splitlines()[0].startswith("scenario")
    assert "two-block-copy" in text and "MPMD_DUP_REF@trace" in text


def test_without_a_gpu_exits_2():
    if runtime.has_gpu():
        pytest.skip("a GPU is present")
    assert gpucheck.main([]) == 2
    p = subprocess.run(
        [sys.executable, "-m", "mpmd_lab.gpucheck", "--help"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "gpucheck" in p.stdout
