"""One controller process of a multi-process run (``mpmd_lab.multihost``).

    python _multihost_child.py RESULT_FD PARENT_PID < REQUEST

Reads one pickled request (``source``, ``stages``, ``mode``) from stdin, joins the other
processes (the ``MPMD_LAB_*`` variables of its environment, through the source's own
``start_processes``), climbs the ladder and writes the pickled result to RESULT_FD (an
unnamed temp file of the parent's). It dies with its parent and imports nothing of the
package (the ladder and the parent-death signal are loaded beside this file).
"""

import os
import pickle
import sys
import time
import traceback


def main(result_fd: int, parent: int) -> None:
    from _probe_child import _ladder, die_with_parent

    die_with_parent(parent)
    req = pickle.loads(sys.stdin.buffer.read())
    t = time.perf_counter()
    res = _ladder().climb(
        req["source"],
        list(req["stages"]),
        mode=req["mode"],
        on_stage=lambda s: print(f"[mpmd-lab] stage {s}", file=sys.stderr, flush=True),
        processes=True,
    )
    res["seconds"] = time.perf_counter() - t
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(res, out, protocol=pickle.HIGHEST_PROTOCOL)
    import jax

    if jax.distributed.is_initialized():  # every process leaves together: process 0
        jax.distributed.shutdown()  # hosts the coordinator the others still talk to


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]), int(sys.argv[2]))
    except BaseException:  # noqa: BLE001 - into the log, for the parent's message
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter shutdown: JAX's distributed shutdown waits on the others
