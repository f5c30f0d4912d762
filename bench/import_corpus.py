"""Import a directory of kernel modules with ``mpmd_lab.from_jax`` and say, for each,
whether the translation is faithful, what it could not translate, and whether the
simulator computes what the module says the kernel computes.

    python -m bench.import_corpus [DIR] [PATTERN ...] [--lower] [--json OUT.json]

DIR (default: tests/kernels) holds modules with the contract of tests/kernels/*.py:
``DEVICES``, ``make() -> (fn, args)``, ``EXPECT`` ("valid" or ``{"stage", "type",
"message"}``), ``expected(*numpy_args)`` (one array per result, a dict or a sequence;
None for a kernel that never finishes, or whose results the order its blocks run in
decides) and optionally ``GPU_BEHAVIOUR`` ("race", "deadlock", or "schedule": the results
are one of several, by that order; the simulation must finish, its values are not
compared: ``ran``). The modules run in child processes, one per device count (JAX fixes its
device count when it starts), each under a time limit; a module that hangs or crashes
its child is reported as such and the others run again without it.

Columns: ``faithful`` (a scenario and nothing unsupported), ``errors`` (the error
diagnostics' codes: JAX's own while tracing, then the static check's), ``simulate``
(``==``: every result equals ``expected``; ``!=``: some differ; ``fail``: the simulation
reported a problem, its code; ``-``: not simulated) and the unsupported constructs.
``--lower``: every valid kernel's scenario is also exported and given to real JAX again
(build, trace, the Mosaic GPU lowering for 'cuda' on the CPU): column ``lower``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "tests" / "kernels"
#: seconds one child (one device count's modules) may take
CHILD_TIMEOUT = 900
#: seconds one module's import may take inside the child
IMPORT_TIMEOUT = 120.0
MARK = "@@MODULE@@"


# ---------------------------------------------------------------- child side


def _child(paths: list[str]) -> None:
    import importlib.util
    import traceback

    import numpy as np
    from mpmd_lab import simulate
    from mpmd_lab.importer import from_jax

    for p in paths:
        path = Path(p)
        rec: dict[str, Any] = {"name": path.stem}
        try:
            spec = importlib.util.spec_from_file_location(f"corpus_{path.stem}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            expect = getattr(mod, "EXPECT", "valid")
            rec["expect"] = expect if isinstance(expect, str) else dict(expect)
            rec["behaviour"] = getattr(mod, "GPU_BEHAVIOUR", None)
            fn, args = mod.make()
            t0 = time.perf_counter()
            imp = from_jax(fn, *args, timeout=IMPORT_TIMEOUT)
            rec["seconds"] = round(time.perf_counter() - t0, 2)
            rec["scenario"] = imp.scenario is not None
            rec["faithful"] = imp.faithful
            rec["unsupported"] = list(imp.unsupported)
            rec["errors"] = [d.code for d in imp.diagnostics if d.is_error]
            rec["warnings"] = [d.code for d in imp.diagnostics if not d.is_error]
            rec["error_sources"] = [d.source for d in imp.diagnostics if d.is_error]
            rec["simulate"] = "-"
            if os.environ.get("MPMD_LAB_CORPUS_LOWER") and imp.scenario is not None:
                rec["scenario_json"] = imp.scenario.to_dict()
            if imp.scenario is not None and expect == "valid":
                want = mod.expected(*[np.asarray(a) for a in args])
                res = simulate(imp.scenario)
                sim_codes = [d.code for d in res.diagnostics() if d.is_error]
                rec["sim_codes"] = sim_codes
                if want is None and rec["behaviour"] == "schedule":
                    rec["simulate"] = "ran" if res.ok else f"fail {','.join(sim_codes)}"
                elif want is None:  # a kernel that never finishes
                    rec["simulate"] = "==" if not res.ok else f"fail {','.join(sim_codes)}"
                    if rec["behaviour"] == "deadlock":
                        rec["simulate"] = "deadlock" if not res.ok else "finished?!"
                elif not res.ok and not res.outputs:
                    rec["simulate"] = f"fail {','.join(sim_codes)}"
                else:
                    want = list(want.values()) if isinstance(want, dict) else list(want)
                    got = imp.outputs(res.outputs)
                    same = len(got) == len(want) and all(
                        g is not None
                        and np.shape(g) == np.shape(w)
                        and np.array_equal(np.asarray(g), np.asarray(w))
                        for g, w in zip(got, want, strict=False)
                    )
                    rec["simulate"] = "==" if same else "!="
                    if not res.ok:
                        rec["simulate"] += f" ({','.join(sim_codes)})"
                    if not same:
                        rec["diff"] = [
                            None
                            if g is None
                            else f"got {np.asarray(g).ravel()[:6].tolist()} want "
                            f"{np.asarray(w).ravel()[:6].tolist()}"
                            for g, w in zip(got, want, strict=False)
                        ]
        except Exception as e:  # noqa: BLE001 - the module's (or our) failure is the finding
            rec["crash"] = f"{type(e).__name__}: {e}"[:500]
            rec["traceback"] = traceback.format_exc()[-1500:]
        print(MARK + json.dumps(rec, default=str), flush=True)


# ---------------------------------------------------------------- parent side


def _devices(path: Path) -> int:
    from mpmd_lab.importer.child import module_devices

    return module_devices(path) or 1


def run(paths: list[Path]) -> list[dict[str, Any]]:
    from mpmd_lab.importer.child import child_env

    groups: dict[int, list[Path]] = {}
    for p in paths:
        groups.setdefault(_devices(p), []).append(p)
    out: dict[str, dict[str, Any]] = {}
    for devices, todo in sorted(groups.items()):
        while todo:
            got = _run_group(devices, todo, child_env(devices))
            out.update({r["name"]: r for r in got})
            done = {r["name"] for r in got}
            rest = [p for p in todo if p.stem not in done]
            if rest:  # the first not reported hung or killed the child
                bad = rest[0]
                out[bad.stem] = {"name": bad.stem, "crash": "the child hung or died here"}
                rest = rest[1:]
            todo = rest
    return [out[p.stem] for p in paths if p.stem in out]


def lower(rows: list[dict[str, Any]]) -> None:
    """Real JAX again on each valid kernel's scenario: ``row["lower"]``."""
    from mpmd_lab import probe
    from mpmd_lab.scenario import Scenario

    todo = [r for r in rows if r.get("scenario_json") and r.get("expect") == "valid"]
    scenarios = [Scenario.model_validate(r["scenario_json"]) for r in todo]
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=300)
    for r, res in zip(todo, results, strict=True):
        why = f"{res.stage}: {res.error_type}: {(res.message or '')[:120]}"
        r["lower"] = "ok" if res.ok else why


def _run_group(devices: int, paths: list[Path], env: dict[str, str]) -> list[dict[str, Any]]:
    with tempfile.TemporaryFile("w+") as log:
        try:
            p = subprocess.run(
                [sys.executable, "-m", "bench.import_corpus", "--child", *map(str, paths)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                timeout=CHILD_TIMEOUT,
                cwd=ROOT,
            )
            stdout = p.stdout
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return [json.loads(line[len(MARK) :]) for line in stdout.splitlines() if line.startswith(MARK)]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'module':32} {'expect':8} {'faithful':8} {'simulate':14} {'lower':6} "
        "errors / unsupported"
    ]
    for r in rows:
        exp = r.get("expect", "?")
        exp = exp if isinstance(exp, str) else f"{exp.get('stage')}"
        if "crash" in r:
            lines.append(f"{r['name']:32} {exp:8} {'CRASH':8} {'-':14} {r['crash']}")
            continue
        faithful = "yes" if r["faithful"] else ("no" if r["scenario"] else "none")
        low = r.get("lower", "-")
        lines.append(
            f"{r['name']:32} {exp:8} {faithful:8} {r['simulate']:14} "
            f"{low if low in ('ok', '-') else 'FAIL':6} {','.join(r['errors'])}"
        )
        if low not in ("ok", "-"):
            lines.append(f"{'':34}lower: {low}")
        for u in r["unsupported"]:
            lines.append(f"{'':34}unsupported: {u[:160]}")
        for d in r.get("diff", []) or []:
            if d:
                lines.append(f"{'':34}{d[:160]}")
    valid = [r for r in rows if r.get("expect") == "valid"]
    ok = [r for r in valid if r.get("faithful") and not r.get("errors")]
    sim = [r for r in valid if str(r.get("simulate", "")).startswith(("==", "deadlock", "ran"))]
    lines.append(
        f"{len(rows)} modules; valid {len(valid)}: faithful without errors {len(ok)}, "
        f"simulate == expected (or ran, where the schedule decides) {len(sim)}; "
        f"crashes {sum('crash' in r for r in rows)}"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        _child(argv[1:])
        return 0
    json_out = None
    want_lower = "--lower" in argv
    argv = [a for a in argv if a != "--lower"]
    if "--json" in argv:
        i = argv.index("--json")
        json_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    directory = DEFAULT_DIR
    if argv and Path(argv[0]).is_dir():
        directory, argv = Path(argv[0]), argv[1:]
    patterns = argv or ["*"]
    paths = sorted(
        p
        for p in directory.glob("*.py")
        if not p.name.startswith("_") and any(fnmatch.fnmatch(p.stem, pat) for pat in patterns)
    )
    if want_lower:
        os.environ["MPMD_LAB_CORPUS_LOWER"] = "1"
    t0 = time.time()
    rows = run(paths)
    if want_lower:
        lower(rows)
    for r in rows:
        r.pop("scenario_json", None)
    print(table(rows))
    print(f"({time.time() - t0:.0f} s, {os.cpu_count()} CPUs)")
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
