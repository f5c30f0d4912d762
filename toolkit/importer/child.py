"""An import in a child process, as ``mpmd-lab import MODULE.py:FUNCTION`` runs it.

JAX fixes its device count when it starts, and a kernel over a 4-device mesh needs 4
devices to trace; so the import runs in a fresh Python whose ``XLA_FLAGS`` asks for
them (``--devices``, else the module's literal ``DEVICES = n``, else 8) on the CPU.
``FUNCTION()`` returns ``(fn, args)`` (or ``(fn, args, kwargs)``); the child traces
``fn(*args, **kwargs)`` with :func:`mpmd_lab.from_jax` and sends the result as JSON on
its socket. The parent kills the child's process group past its time limit, whatever
the user's code does, and on every other way out.

    python -m mpmd_lab.importer.child MODULE.py FUNCTION SOCKET_FD PARENT_PID [--timeout S]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: devices the child asks for when neither --devices nor the module says
DEFAULT_DEVICES = 8
#: most devices an import may ask for (each is a CPU device JAX makes, with its memory)
MAX_DEVICES = 4096
#: seconds a child may take to start Python and import JAX (not the user's time)
STARTUP_SECONDS = 60.0
#: bytes of the module the parent reads for its ``DEVICES = n`` (the rest is the child's)
MODULE_HEAD = 1 << 20
#: bytes of reply the parent takes from the child (a scenario's JSON is far smaller)
MAX_REPLY = 256 * 2**20
#: address space the user's code may add to the child's (a MemoryError past it)
MEMORY_LIMIT = 8 * 2**30


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


def check_devices(n: int) -> int:
    """``--devices``: 1 to MAX_DEVICES (JAX's own error for -5 is "vector::reserve")."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_DEVICES:
        raise SpecError(f"--devices {n!r}: give between 1 and {MAX_DEVICES} devices")
    return n


_DEVICES_LINE = re.compile(rb"^DEVICES[ \t]*=[ \t]*(\d{1,6})[ \t]*(?:#[^\n]*)?$", re.M)


def module_devices(path: Path) -> int | None:
    """The module's literal ``DEVICES = n`` at the top level, read without running it
    (nor parsing it: a line of the module's first MODULE_HEAD bytes; the last one wins,
    as Python's would)."""
    try:
        with open(path, "rb") as f:
            head = f.read(MODULE_HEAD)
    except OSError:
        return None
    found = _DEVICES_LINE.findall(head)
    if not found:
        return None
    n = int(found[-1])
    return n if 1 <= n <= MAX_DEVICES else None


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
    memory: int = MEMORY_LIMIT,
) -> Any:
    """Import ``MODULE.py:FUNCTION`` in a child process: an :class:`Imported`.

    The child is bounded like the other workers: it dies with this process (a
    parent-death signal and a watch on its socket), runs in its own process group,
    which is killed on every way out (so is anything the user's code started), has
    STARTUP_SECONDS to start JAX, then ``timeout`` seconds and ``memory`` more bytes
    of address space for the user's code and the trace; its answer comes over the socket (no file).

    Raises SpecError for a spec that names no module or function (or a function that
    does not return ``(fn, args)``), or a device count outside 1..MAX_DEVICES."""
    import math
    import socket

    path, fn = parse_spec(spec)
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise SpecError(f"timeout {timeout!r}: give a positive, finite number of seconds")
    n = check_devices(devices) if devices is not None else None
    n = n or module_devices(path) or DEFAULT_DEVICES
    ours, theirs = socket.socketpair()
    cmd = [
        sys.executable,
        "-m",
        "mpmd_lab.importer.child",
        str(path.resolve()),
        fn,
        str(theirs.fileno()),
        str(os.getpid()),
        "--timeout",
        repr(float(timeout)),
        "--memory",
        str(int(memory)),
    ]
    if not check:
        cmd.append("--no-check")
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:  # (unlinked already: nothing is left behind)
        try:
            proc = subprocess.Popen(
                cmd,
                env=child_env(n),
                cwd=str(path.resolve().parent),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # a background process the user started keeps
                stderr=err,  # no pipe of ours open: the answer comes on the socket
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        try:
            reply = _answer(ours, proc, t0, timeout)
        finally:
            ours.close()
            _kill(proc)  # the group: whatever the user's code left running goes too
        if reply is None:
            return _timed_out(spec, fn, timeout, time.monotonic() - t0)
        if not reply:
            err.seek(0, os.SEEK_END)
            err.seek(max(0, err.tell() - 4000))
            tail = err.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise SpecError(f"the import process died (exit {proc.returncode}): " + "\n".join(tail))
    data = json.loads(reply)
    if "error" in data:
        raise SpecError(data["error"])
    from mpmd_lab.importer.api import Imported

    return Imported.from_json(data["imported"])


def _answer(sock: Any, proc: subprocess.Popen[bytes], t0: float, timeout: float) -> bytes | None:
    """The child's reply: b"" when it died without one, None past its time (its start
    STARTUP_SECONDS, then ``timeout`` from when it says the user's code begins)."""
    from mpmd_lab import workers

    fd = sock.fileno()
    try:
        workers._read_exact(fd, 8, t0 + STARTUP_SECONDS)  # JAX is up: the user's time begins
        deadline = time.monotonic() + timeout + 2.0  # (its trace stops itself at timeout)
        (size,) = struct.unpack("<Q", workers._read_exact(fd, 8, deadline))
        if size > MAX_REPLY:
            return b""
        return bytes(workers._read_exact(fd, size, deadline))
    except workers._Timeout:
        return None
    except workers._Dead:
        return b""


def _timed_out(spec: str, fn: str, timeout: float, seconds: float) -> Any:
    from mpmd_lab.diagnostics import Diagnostic
    from mpmd_lab.importer.api import Imported

    d = Diagnostic(
        code="IMPORT_TIMEOUT",
        severity="error",
        stage="trace",
        message=f"importing {spec} did not finish in {timeout:g} s and was stopped",
        explanation="The module, the function making the call or JAX's trace of it ran "
        "past the time limit (the child process and all it started were killed).",
    )
    return Imported(None, [d], seconds=seconds, function=fn)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child's process group (it and whatever it started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


# ---------------------------------------------------------------- the child's side


def _bound_memory(memory: int) -> None:
    """The user's code may add ``memory`` bytes of address space to what the child
    holds now (JAX imported): past it a MemoryError, reported as the import's."""
    import resource

    from mpmd_lab.engine.child import _vm_size

    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = _vm_size() + memory
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def _send(sock: Any, data: bytes) -> None:
    sock.sendall(struct.pack("<Q", len(data)))
    sock.sendall(data)


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
    import socket

    p = argparse.ArgumentParser(prog="python -m mpmd_lab.importer.child")
    p.add_argument("module")
    p.add_argument("function")
    p.add_argument("fd", type=int, help="the socket to the parent")
    p.add_argument("parent", type=int, help="the parent's process id")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--memory", type=int, default=MEMORY_LIMIT)
    p.add_argument("--no-check", action="store_true")
    a = p.parse_args(argv)
    from mpmd_lab._probe_child import die_with_parent, watch_parent

    die_with_parent(a.parent)
    sock = socket.socket(fileno=a.fd)
    watch_parent(sock)
    import jax  # noqa: F401 - started before the user's bounds: its start is not theirs
    from mpmd_lab.importer.api import import_call

    _bound_memory(a.memory)
    sock.sendall(struct.pack("<Q", 0))  # the user's code begins: the parent's clock starts
    out: dict[str, Any]
    try:
        maker = _load(Path(a.module), a.function)
        try:
            made = maker()
        except MemoryError:
            raise
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
        imp = import_call(fn, args, kwargs, timeout=a.timeout, check=not a.no_check)
        out = {"imported": imp.to_json()}
    except SpecError as e:
        out = {"error": str(e)}
    except MemoryError:
        out = {
            "error": f"importing {a.module}:{a.function} ran past its memory limit "
            f"({a.memory / 2**30:g} GiB more than JAX's start) and was stopped"
        }
    except Exception as e:  # noqa: BLE001 - the module itself failed to import
        out = {"error": f"{a.module}: {type(e).__name__}: {e}"}
    _send(sock, json.dumps(out).encode("utf-8"))
    sock.close()
    os._exit(0)  # (no waiting on threads the user's code left)


if __name__ == "__main__":
    sys.exit(main())
