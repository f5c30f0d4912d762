"""An import in a child process, as ``mpmd-lab import MODULE.py:FUNCTION`` runs it.

JAX fixes its device count when it starts, and a kernel over a 4-device mesh needs 4
devices to trace; so the import runs in a fresh Python whose ``XLA_FLAGS`` asks for
them (``--devices``, else the module's literal ``DEVICES = n``, else 8) on the CPU.
``FUNCTION()`` returns ``(fn, args)`` (or ``(fn, args, kwargs)``); the child traces
``fn(*args, **kwargs)`` with :func:`mpmd_lab.from_jax` and writes the result as JSON.
The parent kills the child past its time limit, whatever the user's code does.

    python -m mpmd_lab.importer.child MODULE.py FUNCTION OUT.json [--timeout S]
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: devices the child asks for when neither --devices nor the module says
DEFAULT_DEVICES = 8
#: seconds a child may take to start Python and import JAX (not the user's time)
STARTUP_SECONDS = 60.0


class SpecError(ValueError):
    """``MODULE.py:FUNCTION`` that names nothing usable (exit 2)."""


def parse_spec(spec: str) -> tuple[Path, str]:
    """``path/to/module.py:function`` -> (path, function)."""
    path, sep, fn = spec.rpartition(":")
    if not sep or not path or not fn:
        raise SpecError(f"{spec!r}: write MODULE.py:FUNCTION")
    if not fn.isidentifier():
        raise SpecError(f"{fn!r} is not a function name")
    p = Path(path)
    if p.suffix != ".py":
        raise SpecError(f"{path}: the module is a .py file")
    if not p.is_file():
        raise SpecError(f"{path}: no such file")
    return p, fn


def module_devices(path: Path) -> int | None:
    """The module's literal ``DEVICES = n`` (read without running it), if any."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "DEVICES" for t in node.targets
        ):
            try:
                n = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(n, int) and 1 <= n <= 4096:
                return n
    return None


def child_env(devices: int) -> dict[str, str]:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run(
    spec: str,
    *,
    devices: int | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> Any:
    """Import ``MODULE.py:FUNCTION`` in a child process: an :class:`Imported`.

    Raises SpecError for a spec that names no module or function (or a function that
    does not return ``(fn, args)``)."""
    from mpmd_lab.diagnostics import Diagnostic
    from mpmd_lab.importer.api import Imported

    path, fn = parse_spec(spec)
    n = devices or module_devices(path) or DEFAULT_DEVICES
    fd, out = tempfile.mkstemp(prefix="mpmd-lab-import-", suffix=".json")
    os.close(fd)
    cmd = [
        sys.executable,
        "-m",
        "mpmd_lab.importer.child",
        str(path.resolve()),
        fn,
        out,
        "--timeout",
        repr(float(timeout)),
    ]
    if not check:
        cmd.append("--no-check")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=child_env(n),
        cwd=str(path.resolve().parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout + STARTUP_SECONDS)
    except subprocess.TimeoutExpired:
        _kill(proc)
        Path(out).unlink(missing_ok=True)
        d = Diagnostic(
            code="IMPORT_TIMEOUT",
            severity="error",
            stage="trace",
            message=f"importing {spec} did not finish in {timeout:g} s and was stopped",
            explanation="The module, the function making the call or JAX's trace of it ran "
            "past the time limit (the child process was killed).",
        )
        return Imported(None, [d], seconds=time.monotonic() - t0, function=fn)
    try:
        text = Path(out).read_text(encoding="utf-8")
    except OSError:
        text = ""
    finally:
        Path(out).unlink(missing_ok=True)
    if not text:
        tail = "\n".join((err or "").strip().splitlines()[-5:])
        raise SpecError(f"the import process died (exit {proc.returncode}): {tail}")
    data = json.loads(text)
    if "error" in data:
        raise SpecError(data["error"])
    imp = Imported.from_json(data["imported"])
    return imp


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


# ---------------------------------------------------------------- the child's side


def _load(path: Path, fn: str) -> Any:
    import importlib.util

    sys.path.insert(0, str(path.parent))
    name = "_mpmd_lab_import_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    maker = getattr(mod, fn, None)
    if maker is None or not callable(maker):
        raise SpecError(f"{path.name} has no function {fn}")
    return maker


def _call_spec(made: Any, fn: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    if not isinstance(made, tuple) or len(made) not in (2, 3) or not callable(made[0]):
        raise SpecError(f"{fn}() returns (fn, args) or (fn, args, kwargs)")
    args = made[1]
    if not isinstance(args, tuple | list):
        args = (args,)
    kwargs = made[2] if len(made) == 3 else {}
    if not isinstance(kwargs, dict):
        raise SpecError(f"{fn}() returns (fn, args, kwargs) with a dict of kwargs")
    return made[0], tuple(args), kwargs


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m mpmd_lab.importer.child")
    p.add_argument("module")
    p.add_argument("function")
    p.add_argument("out")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--no-check", action="store_true")
    a = p.parse_args(argv)
    out: dict[str, Any]
    try:
        maker = _load(Path(a.module), a.function)
        try:
            made = maker()
        except Exception as e:  # noqa: BLE001 - the user's function failed: unusable input
            from mpmd_lab.importer.frames import exception_source

            msg = (str(e).strip().splitlines() or [""])[0]
            where = exception_source(e)
            hint = " (give more with --devices)" if "device" in msg.lower() else ""
            raise SpecError(
                f"{a.function}() raised {type(e).__name__}: {msg}"
                + (f" at {where}" if where else "")
                + hint
            ) from None
        fn, args, kwargs = _call_spec(made, a.function)
    except SpecError as e:
        out = {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - the module itself failed to import
        out = {"error": f"{a.module}: {type(e).__name__}: {e}"}
    else:
        from mpmd_lab.importer.api import import_call

        imp = import_call(fn, args, kwargs, timeout=a.timeout, check=not a.no_check)
        out = {"imported": imp.to_json()}
    Path(a.out).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
