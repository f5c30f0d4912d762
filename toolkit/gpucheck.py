"""Run the gallery on a real GPU and compare with the CPU interpreter.

    python -m mpmd_lab.gpucheck [NAME ...] [--timeout S] [--json]

Single-device scenarios compile and run on the GPU (``gpu-run``); cross-device ones
are lowered for the GPU (``jax.export`` for ``cuda``) and run only where the machine
has as many GPUs as the scenario has devices. Each is compared with ``run(...,
backend="interpret")`` on the CPU. Prints a table; exits 0 when nothing disagrees,
1 on a mismatch, 2 when no CUDA GPU (compute capability >= 9.0) is visible.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m mpmd_lab.gpucheck", description=__doc__.split("\n")[0]
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="gallery scenarios (default: all)")
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
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
