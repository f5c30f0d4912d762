"""Import kernel modules (tests/kernels/*.py) in this process: run as a child with the
device count already set (``XLA_FLAGS``), as tests/test_importer.py does.

    python tests/importer_driver.py OUT.pickle MODULE.py [MODULE.py ...]

For each module: ``fn, args = make()``, ``mpmd_lab.from_jax(fn, *args)`` (timed) and,
for a valid kernel, ``expected(*numpy args)`` (one array per result, in order) and the
real Mosaic GPU lowering of ``fn`` itself (``jax.export`` for 'cuda', on the CPU). The
pickle maps the module's name to ``{"imported": Imported.to_json(), "expected": [...] |
None, "seconds": s}``, or ``{"error": text}`` when the module itself failed.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
import time
import traceback
from pathlib import Path


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"kernel_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one(path: Path) -> dict:
    import numpy as np
    from mpmd_lab.importer import from_jax

    mod = load(path)
    fn, args = mod.make()
    t0 = time.perf_counter()
    imp = from_jax(fn, *args)
    seconds = time.perf_counter() - t0
    exp = None
    lowered = None
    expect = getattr(mod, "EXPECT", None)
    if expect == "valid" or (isinstance(expect, dict) and expect.get("stage") == "lower"):
        lowered = lower(fn, args)
        got = mod.expected(*[np.asarray(a) for a in args])
        if got is not None:
            exp = list(got.values()) if isinstance(got, dict) else list(got)
            exp = [np.asarray(e) for e in exp]
    return {"imported": imp.to_json(), "expected": exp, "seconds": seconds, "lowered": lowered}


def lower(fn, args) -> str:
    """Real JAX on the user's own function: trace it and run the Mosaic GPU lowering
    for 'cuda' on the CPU (``jax.export``); "ok" when the export holds the kernel's
    custom call, else the error."""
    import jax

    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    try:
        text = jax.export.export(jitted, platforms=["cuda"])(*args).mlir_module()
    except Exception as e:  # the finding: the test says which kernel and why
        return f"{type(e).__name__}: {str(e)[:300]}"
    return "ok" if "stablehlo.custom_call @mosaic_gpu" in text else "no mosaic_gpu custom call"


def main(argv: list[str]) -> int:
    out, paths = Path(argv[0]), [Path(p) for p in argv[1:]]
    results = {}
    for p in paths:
        try:
            results[p.stem] = one(p)
        except Exception:  # the module's own failure: the test reports it
            results[p.stem] = {"error": traceback.format_exc()}
    out.write_bytes(pickle.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
