"""What every rule needs: the resolved scenario (:mod:`mpmd_lab.plan`, read-only)
and the diagnostics collected so far, each with its catalogue stage and explanation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mpmd_lab.catalogue import BY_CODE, EXPLANATIONS, OWN
from mpmd_lab.diagnostics import Diagnostic, Fix
from mpmd_lab.fields import Path, format_path
from mpmd_lab.ops.control import never_traced
from mpmd_lab.plan import ArgInfo, Binding, Plan, ProgramInfo, compile
from mpmd_lab.scenario import Scenario


class Ctx:
    """One check: the resolved scenario (read-only) and the diagnostics so far."""

    def __init__(
        self,
        scenario: Scenario,
        plan: Plan | None = None,
        recheck: Callable[[Scenario], tuple[Diagnostic, ...]] | None = None,
    ):
        r = self.r = plan if plan is not None else compile(scenario)
        self.s = scenario
        #: the rules' diagnostics of another scenario (``symmetry`` judges a big mesh
        #: from two small ones): given by the runner of the rules, which sits above them
        self.recheck = recheck
        # the resolved form, as the rules read it (``r``'s own objects: attributes, not
        # properties, as every rule reads them)
        self.args: list[ArgInfo] = r.args
        self.params: dict[str, Binding] = r.params
        self.programs: list[ProgramInfo] = r.programs
        self.array_errors: dict[tuple[int, int], Any] = r.array_errors
        self.bound_outside: frozenset[str] = r.bound_outside
        self.diags: list[Diagnostic] = []
        self.trace_failed = False
        self.build_failed = False
        #: notes JAX raises later (gpu-lower, interpret), with their field paths
        self.deferred: list[tuple[Any, str]] = []
        #: id(scope) -> (scope, never_traced of its statements)
        self._never: dict[int, tuple[tuple, bool]] = {}
        if r.problems:
            for pr in r.problems:
                self.add(pr.code, pr.path, pr.message)

    @property
    def mesh_axes(self) -> tuple[str, ...]:
        """The device-mesh axes the kernel runs in, as the Mosaic GPU lowering knows them
        (device ids, collective axes): shard_map's; none where the kernel is called on
        the global arrays (run.shard_map false: no mesh context)."""
        return self.r.mesh_axes if self.s.run.shard_map is not False else ()

    def bound_in(self, p: int) -> frozenset[str]:
        return self.r.bound_in(p)

    def root_shape(self, b: Binding) -> tuple[int, ...] | None:
        return self.r.root_shape(b)

    def net_perm(self, b: Binding) -> list[int] | None:
        return self.r.net_perm(b)

    def stack(self, b: Binding) -> Any:
        """``b``'s ``(field path, transform)`` pairs, first to last (a tuple or a Stack)."""
        return b.stack

    def never_traced(self, st: Any) -> bool:
        """``ops.control.never_traced`` of a statement, once per body: it reads only the
        statement's scope, which the statements of one body share (one tuple)."""
        scope = st.scope
        if not scope:
            return False  # a program's own statement: always traced
        hit = self._never.get(id(scope))
        if hit is None:
            hit = self._never[id(scope)] = (scope, never_traced(st, self))  # (scope kept alive)
        return hit[1]

    # ------------------------------------------------------------ reporting

    def add(
        self,
        code: str,
        path: Path | str,
        message: str,
        *,
        jax_message: str | None = None,
        jax_type: str | None = None,
        severity: str | None = None,
        stage: str | None = None,
        explanation: str = "",
        fix: Fix | list[Fix | None] | None = None,
    ) -> Diagnostic:
        # a list: the alternatives, in the rule's order (``fixes.offer`` keeps what works)
        if fix is None:
            options = []
        else:
            options = [f for f in (fix if isinstance(fix, list) else [fix]) if f is not None]
        if options:  # (a rule's own Fix objects: made with it, not shared)
            d = _diagnostic(code, path, message, jax_message, jax_type, severity, stage,
                            explanation, options)  # fmt: skip
        else:
            d = _plain(code, path, message, jax_message, jax_type, severity, stage, explanation)
        self.diags.append(d)
        return d

    def jax(self, code: str, path: Path | str, jax_message: str, **kw: Any) -> Diagnostic:
        """A diagnostic whose message is JAX's own."""
        return self.add(code, path, jax_message, jax_message=jax_message, **kw)

    def raised(self, e: Any, path: Path | str, **kw: Any) -> Diagnostic:
        """What a rule found JAX raises (``layout_rules.JaxError``, ``StepError``: its
        code, exception type and message), at ``path``."""
        return self.add(e.code, path, e.message, jax_message=e.message, jax_type=e.jax_type, **kw)


def _diagnostic(
    code: str,
    path: Path | str,
    message: str,
    jax_message: str | None,
    jax_type: str | None,
    severity: str | None,
    stage: str | None,
    explanation: str,
    options: tuple[Fix, ...] | list[Fix] = (),
) -> Diagnostic:
    """The Diagnostic ``Ctx.add`` reports: its stage, severity and explanation the
    catalogue's where the rule gives none."""
    entry = BY_CODE.get(code)
    if stage is None:
        own = OWN.get(code)
        stage = entry.stage if entry else (own[1] if own else "trace")
    if severity is None:
        severity = entry.severity if entry else "error"
    # (JaxError's fields, validated with the Diagnostic's: one validation, not two)
    jax = None
    if jax_message is not None:
        jax = {"type": jax_type or (entry.type if entry else "Error"), "message": jax_message}
    return Diagnostic(
        code=code,
        severity=severity,
        stage=stage,
        # the plan's paths are tuples: text only once a diagnostic is reported
        path=path if isinstance(path, str) else format_path(path),
        message=message,
        jax=jax,
        explanation=explanation or _explanation(code),
        fix=options[0] if options else None,
        fixes=list(options),
    )


#: ``_diagnostic`` of a diagnostic with no fix, made once per content: a Diagnostic is
#: frozen, and nothing edits one in place (``fixes.offer``, ``sync``'s witness and the
#: importer's source make a copy, ``model_copy(update=...)``), so every check that
#: reports the same problem at the same place (a fix's candidate that leaves it) shares
#: one, where validating it was most of a report's cost
_plain = functools.lru_cache(maxsize=2048)(_diagnostic)


def clear_cache() -> None:
    """Forget the diagnostics kept by content (``_plain``)."""
    _plain.cache_clear()


def _explanation(code: str) -> str:
    if code in EXPLANATIONS:
        return EXPLANATIONS[code]
    entry = BY_CODE.get(code)
    if entry is not None:
        return entry.title + "."
    own = OWN.get(code)
    return own[0][:1].upper() + own[0][1:] + "." if own else ""
