"""The simulation engine: actors, a deterministic scheduler, GPU synchronisation and
happens-before over every access (see :mod:`mpmd_lab.engine.core`).

``mpmd_lab.simulator.simulate`` runs it with data; ``mpmd_lab.validate.sync`` runs it
data-free to judge races, deadlocks, out-of-bounds views and device ids statically.
"""

from mpmd_lab.engine.core import (
    MAX_ACTORS,
    MAX_STEPS,
    Blocked,
    Engine,
    Finding,
    Limits,
    Outcome,
    SimError,
    StmtCtx,
    deadlock_diagnostic,
    read_names,
    step_estimate,
    synchronises,
    written_buffers,
)

__all__ = [
    "MAX_ACTORS",
    "MAX_STEPS",
    "Blocked",
    "Engine",
    "Finding",
    "Limits",
    "Outcome",
    "SimError",
    "StmtCtx",
    "deadlock_diagnostic",
    "read_names",
    "step_estimate",
    "synchronises",
    "written_buffers",
]
