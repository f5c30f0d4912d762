"""Errors as data: a diagnostic has a stable code, the exact JAX message, a field path,
an explanation and, where one is known, a fix that edits the scenario.

The CLI, the widgets and the graph all show these same objects.
"""

import copy
from typing import Any, Literal

from mpmd_lab.fields import Path, format_path, parse_path
from pydantic import BaseModel, ConfigDict, model_validator

Severity = Literal["error", "warning", "info"]
#: The one list of stages: where a problem shows, in the order a call gets there.
#: ``schema`` is the scenario file itself; ``build`` … ``gpu-run`` are where JAX raises
#: it; ``simulate`` is mpmd-lab's own simulator.
STAGES: tuple[str, ...] = (
    "schema",
    "build",
    "trace",
    "gpu-lower",
    "interpret",
    "simulate",
    "gpu-run",
)
Stage = Literal[STAGES]  # type: ignore[valid-type]
STAGE_ORDER: dict[str, int] = {s: i for i, s in enumerate(STAGES)}


class JaxError(BaseModel):
    """What JAX raises: the exception type's name and its exact message."""

    model_config = ConfigDict(frozen=True)
    type: str
    message: str


class Edit(BaseModel):
    """One change to a scenario's JSON form, at a field path (``call.args[1]``).

    ``op``: ``replace`` sets the value, ``remove`` deletes a list item or mapping
    key, ``add`` inserts into a list at the index (or sets a mapping key).
    """

    model_config = ConfigDict(frozen=True)
    op: Literal["replace", "remove", "add"]
    path: str
    value: Any = None


def apply_edit(data: dict[str, Any], edit: Edit) -> None:
    """Apply one edit to a scenario's JSON form, in place."""
    parts = parse_path(edit.path)
    parent: Any = data
    for part in parts[:-1]:
        parent = parent[part]
    last = parts[-1]
    value = copy.deepcopy(edit.value)
    if edit.op == "replace":
        parent[last] = value
    elif edit.op == "remove":
        del parent[last]
    elif edit.op == "add":
        if isinstance(parent, list):
            parent.insert(int(last), value)
        else:
            parent[last] = value
    else:  # pragma: no cover - Edit.op is a Literal
        raise ValueError(edit.op)


class Fix(BaseModel):
    """A remedy: a one-line description and the edits that make it.

    ``after``: the codes of the errors the check finds once it is applied (``[]``: the
    call is valid then), as ``mpmd_lab.fixes.offer`` found them (None: not checked)."""

    model_config = ConfigDict(frozen=True)
    description: str
    edits: list[Edit]
    after: list[str] | None = None


class Diagnostic(BaseModel):
    """One problem (or warning) found in a scenario."""

    model_config = ConfigDict(frozen=True)
    code: str
    severity: Severity = "error"
    stage: Stage = "trace"
    path: str = ""
    message: str
    jax: JaxError | None = None
    explanation: str = ""
    #: the best fix offered (``fixes[0]``), or None
    fix: Fix | None = None
    #: every fix offered, best first: each one checked to leave fewer errors and no new
    #: code (``mpmd_lab.fixes.offer``)
    fixes: list[Fix] = []
    #: ``"FILE:LINE"`` of the user's source line that caused it (an imported kernel), or None
    source: str | None = None
    #: a race's or deadlock's witness: the schedule that shows it (``mpmd-lab/schedule@1``,
    #: replayable with ``simulate(..., schedule=...)``), what each actor did, the racing
    #: accesses or the wait-for cycle (``mpmd_lab.validate.witness``), or None
    witness: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_list(cls, data: Any) -> Any:
        """``fix`` is ``fixes[0]``: giving either one gives both (``validate.context``'s
        ``Ctx.add``, which makes its diagnostics unvalidated, gives both itself)."""
        if isinstance(data, dict):
            fix, fixes = data.get("fix"), data.get("fixes")
            if fix is not None and not fixes:
                data = {**data, "fixes": [fix]}
            elif fixes and fix is None:
                data = {**data, "fix": fixes[0]}
        return data

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        """The ``check --json`` form of SCENARIO.md."""
        return self.model_dump(mode="json")

    def error_json(self) -> dict[str, Any]:
        """The ``error`` object of ``run --json``: ``{code, type, message, stage, path}``
        (JAX's exception type and message where JAX raised it)."""
        own = "SimulationError" if self.stage == "simulate" else ""
        return {
            "code": self.code,
            "type": self.jax.type if self.jax else own,
            "message": self.jax.message if self.jax else self.message,
            "stage": self.stage,
            "path": self.path,
        }

    def one_line(self) -> str:
        """``path: severity CODE: message`` for terminals."""
        where = self.path or "<scenario>"
        return f"{where}: {self.severity} {self.code} [{self.stage}]: {self.message}"


def sort_key(d: Diagnostic) -> tuple[int, int]:
    """Errors before warnings, then by the stage at which JAX would raise them."""
    return (0 if d.is_error else 1, STAGE_ORDER.get(d.stage, 99))


def ordered(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics in the order JAX would show them (stable within a stage)."""
    return sorted(diags, key=sort_key)


#: the codes that say JAX's CPU interpreter cannot run the call (a warning each: a limit
#: of this machine, not of the kernel; ``run --backend auto`` simulates instead)
INTERP_CANNOT = frozenset(
    {
        "GPU_INTERP_UNSUPPORTED_TRANSFORM",
        "GPU_INTERP_MULTICAST",
        "GPU_INTERP_NOT_A_REF",
        "HLO_INTERP_NO_DISCHARGE",
        "UNBOUND_AXIS",
        "INTERP_LIMIT",
    }
)


#: the codes by which the check says it did not check something it could not follow (a
#: value it could not follow, schedules or actors past the exploration's bounds)
#: (as a warning): a scenario with no error and one of these is "valid where checked"
NOT_CHECKED = ("DATA_DEPENDENT", "SYNC_NOT_CHECKED")


def verdict(diags: list[Diagnostic] | tuple[Diagnostic, ...]) -> str:
    """``invalid`` (an error), ``valid where checked`` (no error, but the check says what
    it could not check: NOT_CHECKED) or ``valid``."""
    if any(d.is_error for d in diags):
        return "invalid"
    if any(d.code in NOT_CHECKED and d.severity == "warning" for d in diags):
        return "valid where checked"
    return "valid"


def interpreter_limit(d: Diagnostic) -> bool:
    """A note that JAX's CPU interpreter cannot run the call (a limit of this machine,
    not a problem of the kernel: a GPU runs it, and so does ``simulate``)."""
    return d.code in INTERP_CANNOT and not d.is_error


class SimError(Exception):
    """The simulated call fails: a diagnostic code, a field path and a message (raised by
    the ops' simulation hooks, caught by the engine, reported as a :class:`Diagnostic`)."""

    def __init__(self, code: str, path: Path | str, message: str):
        self.code = code
        self.path = path if isinstance(path, str) else format_path(path)
        super().__init__(message)
