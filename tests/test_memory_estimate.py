"""The run's memory guard (``probe.host_bytes``) against the measured peak of real runs.

Each case runs in a fresh JAX worker; its peak resident size (``VmHWM``, reset through
``/proc/PID/clear_refs`` after a warm-up) and this process's (the caller receives the
outputs) are measured with the run in between. The estimate must cover the peak (the
guard refuses what would not fit) without being far above it. ``iota`` and ``random``
inputs are the case the guard used to miss 3x: numpy makes them as int64 / float64
first, then casts.
"""

from __future__ import annotations

import sys

import numpy as np
import psutil
import pytest
from mpmd_lab import gallery, probe, runtime, workers
from mpmd_lab.dtypes import nbytes
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import analyze

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's"),
    pytest.mark.slow,  # real JAX runs of 32 MiB buffers: `make test` only
]

N = 2**23  # elements: 32 MiB of float32, far above the noise of a JAX run


def _copy(init: str, dtype: str, extra_inputs: int = 0):
    d = gallery.load("two-block-copy").to_dict()
    d["buffers"]["x"].update(shape=[N], init=init, dtype=dtype)
    d["call"]["outputs"]["out"].update(shape=[N], dtype=dtype)
    for let in d["call"]["programs"][0]["body"][:2]:
        let["transforms"][0]["index"][0]["size"] = N // 2
    for i in range(extra_inputs):
        d["buffers"][f"y{i}"] = {"shape": [N], "dtype": dtype, "init": init}
        d["call"]["args"].append({"buffer": f"y{i}", "param": f"y{i}_ref"})
    return load_scenario(d)


def _status(pid: int | str) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def _reset_peak(pid: int | str) -> int:
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # the peak resident size starts again from the current one
    return _status(pid)["VmRSS"]


def _measured_peak(scenario) -> tuple[int, runtime.RunResult]:
    key = (probe.devices_of(scenario), "cpu")
    if key in workers._POOL:
        workers._discard(workers._POOL[key])  # a fresh worker: no arena left by earlier runs
    assert runtime.run(gallery.load("two-block-copy"), "interpret", timeout=300).ok
    worker = workers._POOL[key]
    assert psutil.Process(worker.pid).is_running()
    # the estimate is the run's (the worker, and this process taking its outputs); the
    # static check before it has its own bound (validate.sync: CHECK_MEMORY)
    analysis = analyze(scenario)
    w0, me0 = _reset_peak(worker.pid), _reset_peak("self")
    result = runtime.run(scenario, "interpret", timeout=600, analysis=analysis)
    peak = _status(worker.pid)["VmHWM"] - w0 + _status("self")["VmHWM"] - me0
    return peak, result


@pytest.mark.parametrize(
    "init,dtype,extra",
    [("iota", "float32", 0), ("random", "int8", 0), ("iota", "int8", 2)],
)
def test_the_estimate_covers_the_measured_peak_of_a_run(init, dtype, extra):
    s = _copy(init, dtype, extra)
    peak, result = _measured_peak(s)
    assert result.ok, result.summary()
    np.testing.assert_equal(result.outputs["out"].shape, (N,))
    estimate = probe.host_bytes(s)
    data = sum(nbytes(b.shape, b.dtype) for b in s.buffers.values()) + nbytes([N], dtype)
    mib = (
        f"peak {peak / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} MiB, data {data / 2**20:.0f}"
    )
    assert peak <= estimate, mib
    assert estimate <= 2 * peak, mib  # a guard that refuses runs that fit is no better
    inputs = sum(nbytes(b.shape, b.dtype) for b in s.buffers.values())
    assert peak > 1.5 * (2 * inputs + nbytes([N], dtype)), mib  # the old guard: 2 in + 1 out


def test_the_guard_refuses_with_its_estimate():
    s = _copy("iota", "float32")
    huge = s.to_dict()
    huge["buffers"]["x"]["shape"] = [2**31 - 1]
    huge["call"]["outputs"]["out"]["shape"] = [2**31 - 1]
    big = load_scenario(huge)
    r = runtime.run(big, "interpret", timeout=60)
    assert r.error.code == "INTERP_LIMIT", r.to_json()
    assert f"{probe.host_bytes(big) / 2**30:.1f} GiB" in r.error.error_json()["message"]
