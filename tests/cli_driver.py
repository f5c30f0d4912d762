"""Run many ``mpmd-lab`` command lines in one process (a test helper, run as a child).

Reads a JSON list of argv lists on stdin; for each, calls ``mpmd_lab.cli.main`` with
stdout/stderr captured, a per-case alarm and an address-space cap, and prints one JSON
line per case: ``{"argv", "rc", "stderr", "stdout_head", "escaped", "seconds"}`` where
``escaped`` is the traceback of any exception that got out of ``main`` (what a user
would see as a traceback) or ``"timeout"``.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import signal
import sys
import time
import traceback

CASE_SECONDS = 60
ADDRESS_SPACE = 6 * 2**30  # a memory blow-up becomes a MemoryError, not a dead machine


class Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise Timeout()


def run_case(argv: list[str]) -> dict:
    from mpmd_lab import cli

    out, err = io.StringIO(), io.StringIO()
    escaped = None
    rc = None
    t0 = time.perf_counter()
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
    except SystemExit as e:  # argparse usage errors
        rc = e.code
    except Timeout:
        escaped = "timeout"
    except BaseException:
        escaped = traceback.format_exc()
    finally:
        signal.alarm(0)
    return {
        "argv": argv,
        "rc": rc,
        "stderr": err.getvalue()[:20000],
        "stdout_head": out.getvalue()[:2000],
        "escaped": escaped,
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    signal.signal(signal.SIGALRM, _alarm)
    for argv in json.load(sys.stdin):
        print(json.dumps(run_case(argv)), flush=True)


if __name__ == "__main__":
    main()
