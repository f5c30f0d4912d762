"""Run the gallery on a real GPU and compare with the CPU interpreter.

    python -m mpmd_lab.gpucheck [NAME ...] [--timeout S] [--json] [--hosts [--cpu]]

Single-device scenarios compile and run on the GPU (``gpu-run``); cross-device ones
are lowered for the GPU (``jax.export`` for ``cuda``) and run only where the machine
has as many GPUs as the scenario has devices. Each is compared with ``run(...,
backend="interpret")`` on the CPU. Prints a table; exits 0 when nothing disagrees,
1 on a mismatch, 2 when no CUDA GPU (compute capability >= 9.0) is visible.

``--hosts``: launched once per host (``srun ... python -m mpmd_lab.gpucheck --hosts``, or
with the ``MPMD_LAB_*`` variables, docs/CLUSTER.md), every process joins
``jax.distributed``; each scenario whose devices split evenly over the processes runs
compiled on the global GPU mesh (the exported file's own functions, every process in the
same order), and process 0 compares the gathered outputs with the single-process CPU
interpreter run and prints the table. ``--cpu`` rehearses that on CPU devices, with JAX's
HLO interpreter standing in for the GPU (what ``mpmd-lab run --processes`` runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from mpmd_lab import gallery, probe, runtime
from mpmd_lab.diagnostics import INTERP_CANNOT
from mpmd_lab.scenario import Scenario

#: CPU interpreter errors that a GPU does not raise: its limits, and what only it checks.
INTERPRETER_ONLY = INTERP_CANNOT | {"RACE_DETECTED", "OOB_READ"}
#: Verdicts that fail the check.
FAILING = frozenset({"MISMATCH"})


@dataclass
class Row:
    name: str
    devices: int
    cpu: str  # "ok" or the CPU run's error code
    gpu: str  # "ok" / "lowered" or the GPU's error code
    verdict: str  # match | lowered | gpu-only | partial | MISMATCH
    note: str = ""


def _status(ok: bool, code: str | None, stage: str | None) -> str:
    return "ok" if ok else f"{code}@{stage}"


def _outputs_agree(cpu: dict[str, np.ndarray], gpu: dict[str, np.ndarray]) -> tuple[bool, bool]:
    """(equal, equal where the interpreter wrote): NaN in the CPU output marks unwritten."""
    if list(cpu) != list(gpu):
        return False, False
    equal = all(
        c.shape == g.shape and np.allclose(c, g, rtol=1e-6, atol=0, equal_nan=True)
        for c, g in ((np.asarray(cpu[k]), np.asarray(gpu[k])) for k in cpu)
    )
    if equal:
        return True, True
    partial = True
    for k in cpu:
        c, g = np.asarray(cpu[k]), np.asarray(gpu[k])
        if c.shape != g.shape or c.dtype.kind != "f":
            return False, False
        written = ~np.isnan(c)
        if written.all() or not np.allclose(c[written], g[written], rtol=1e-6, atol=0):
            partial = False
    return False, partial


def compare(name: str, cpu: runtime.RunResult, gpu: probe.ProbeResult) -> Row:
    """One table row: the CPU interpreter's run against what the GPU did."""
    err = cpu.error
    code, cpu_stage = (err.code, err.stage) if err is not None else (None, None)
    cpu_s = _status(cpu.ok, code, cpu_stage)
    lowered_only = gpu.ok and "gpu-run" not in gpu.stages
    gpu_s = "lowered" if lowered_only else _status(gpu.ok, gpu.code, gpu.stage)
    row = Row(name, cpu.devices, cpu_s, gpu_s, "MISMATCH")
    if gpu.timed_out or gpu.crashed:
        row.note = f"the GPU side did not finish: {gpu.message}"
        return row
    if lowered_only:
        # only the lowering was asked: it must agree with the CPU run's lowering
        cpu_lowered = cpu.ok or cpu_stage in ("interpret", "gpu-run")
        row.verdict = "lowered" if cpu_lowered else "MISMATCH"
        if not cpu_lowered:
            row.note = "the GPU lowered what failed on the CPU before the interpreter"
        return row
    if not gpu.ok:
        if not cpu.ok and code == gpu.code:
            row.verdict = "match"
        elif not gpu.ok and gpu.stage != "gpu-run" and cpu.ok:
            row.note = "the CPU ran what the GPU could not build or trace"
        else:
            row.note = f"GPU: {gpu.error_type}: {(gpu.message or '')[:200]}"
        return row
    if not cpu.ok:
        if cpu_stage == "interpret" and code in INTERPRETER_ONLY:
            row.verdict = "gpu-only"
            row.note = f"the CPU interpreter stopped with {code}"
        else:
            row.note = f"the GPU ran what the CPU rejected with {code}"
        return row
    equal, partial = _outputs_agree(cpu.outputs, gpu.outputs or {})
    if equal:
        row.verdict = "match"
    elif partial:
        row.verdict = "partial"
        row.note = "equal where the interpreter wrote; it left NaN elsewhere"
    else:
        row.note = "outputs differ"
    return row


def check_one(s: Scenario, gpu_count: int, timeout: float) -> Row:
    cpu = runtime.run(s, "interpret", timeout=timeout)
    ndev = probe.devices_of(s)
    if ndev == 1 or ndev <= gpu_count:
        gpu = probe.probe(s, runtime.GPU_STAGES, timeout=timeout, platform="default")
    else:
        gpu = probe.probe(s, ("build", "trace", "gpu-lower"), timeout=timeout)
    row = compare(s.name, cpu, gpu)
    if ndev > 1 and ndev > gpu_count and row.verdict == "lowered":
        row.note = row.note or f"needs {ndev} GPUs to run; lowered for the GPU only"
    return row


def format_table(rows: Sequence[Row]) -> str:
    head = ("scenario", "dev", "cpu interpret", "gpu", "verdict", "note")
    cells = [head] + [
        (r.name, str(r.devices), r.cpu, r.gpu, r.verdict, r.note.replace("\n", " ")[:90])
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    lines = []
    for c in cells:
        lines.append("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=False)) + "  " + c[-1])
    return "\n".join(line.rstrip() for line in lines)


def _across_hosts(s: Scenario, processes: int, devices: int, cpu: bool) -> Any:
    """The scenario run on the global mesh by this process (all processes do the same):
    a ProbeResult, or the reason it is not run (a str)."""
    from mpmd_lab import codegen, ladder, multihost

    ndev = probe.devices_of(s)
    if cpu:
        why = multihost.refusal(s, processes, None)
    elif s.device_mesh is None or ndev % processes or ndev > devices:
        why = f"{ndev} devices do not split evenly over {processes} processes of {devices}"
    else:
        why = None
    if why is not None:
        return why
    mode = multihost.MODE if cpu else None
    stage = "interpret" if cpu else "gpu-run"
    try:
        source = codegen.generate(s, interpret=mode, detect_races=False, cpu_limits=False)
    except codegen.CodegenError as e:
        return f"cannot be exported: {e}"
    t0 = time.perf_counter()
    r = ladder.climb(source, ["build", "trace", stage], mode=mode, processes=True)
    return probe.ProbeResult(
        ok=r["ok"],
        stage=r["stage"],
        error_type=r["error_type"],
        message=r["message"],
        code=None if r["ok"] else probe._code(r["error_type"], r["message"]),
        outputs=r["outputs"],
        seconds=time.perf_counter() - t0,
        stages=runtime.GPU_STAGES,  # cpu: the HLO interpreter stands for the GPU run
        devices=ndev,
        platform="cpu" if cpu else "gpu",
    )


def main_hosts(names: Sequence[str], timeout: float, as_json: bool, cpu: bool) -> int:
    """``--hosts``: this process is one of several (see the module docstring)."""
    import jax
    from mpmd_lab.callsupport import start_processes

    processes = start_processes(os.environ)
    devices = jax.device_count()
    if not cpu and jax.default_backend() != "gpu":
        print("no GPU is visible to JAX in this process (--cpu rehearses on CPUs)", file=sys.stderr)
        return 2
    # every process runs every scenario in the same order: the runs are collective
    results = {n: _across_hosts(gallery.load(n), processes, devices, cpu) for n in names}
    if jax.process_index() != 0:
        return 0
    rows = []
    for n, res in results.items():
        s = gallery.load(n)
        if isinstance(res, str):
            rows.append(Row(n, probe.devices_of(s), "-", "-", "skipped", res))
            continue
        rows.append(compare(n, runtime.run(s, "interpret", timeout=timeout), res))
    where = f"{processes} processes x {devices // processes} {jax.default_backend()} devices"
    if cpu:
        where += " (a rehearsal: JAX's HLO interpreter stands for the GPU)"
    if as_json:
        print(json.dumps({"hosts": where, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(where)
        print(format_table(rows))
    bad = [r for r in rows if r.verdict in FAILING]
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m mpmd_lab.gpucheck", description=__doc__.split("\n")[0]
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="gallery scenarios (default: all)")
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--hosts", action="store_true", help="one of several processes, one per host")
    p.add_argument("--cpu", action="store_true", help="with --hosts: rehearse on CPU devices")
    args = p.parse_args(argv)
    if args.hosts:
        return main_hosts(args.names or gallery.names(), args.timeout, args.json, args.cpu)
    info = runtime.gpu_info()
    if info is None or not runtime.has_gpu():
        print(
            "no CUDA GPU of compute capability >= 9.0 is visible to JAX here; "
            f"found: {info or 'none'}",
            file=sys.stderr,
        )
        return 2
    names = args.names or gallery.names()
    gpu_count = int(info.get("devices") or 1)
    rows = [check_one(gallery.load(n), gpu_count, args.timeout) for n in names]
    if args.json:
        print(json.dumps({"gpu": info, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(
            f"GPU: {info.get('platform')} x{gpu_count}, compute capability "
            f"{info.get('compute_capability')}, jax {info.get('jax')}"
        )
        print(format_table(rows))
    bad = [r for r in rows if r.verdict in FAILING]
    if not args.json:
        print(
            f"{len(rows) - len(bad)}/{len(rows)} agree"
            + (f"; MISMATCH: {', '.join(r.name for r in bad)}" if bad else "")
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
