"""Control flow: a loop with an index variable, and a statement block run when a
condition holds.

- ``loop {var, start, stop, step, via, body}``: the body once per ``var`` in
  ``range(start, stop, step)``; ``via`` is how the source writes it: ``"fori_loop"``
  (``lax.fori_loop``), ``"pl.loop"`` (the ``@pl.loop`` decorator) or ``"python"`` (a
  Python ``for``: unrolled at trace time, so the bounds must be static);
- ``when {cond, body}``: ``@pl.when(cond)``: the body where ``cond`` holds (a device,
  program, warpgroup or step predicate: ``"dev == 0"``, ``"i < axis_size(dev) - 1"``).

A ``let`` inside a body names a view inside that body only. ``start``, ``stop`` and
``cond`` are index expressions (:mod:`mpmd_lab.expr`); ``var`` is a name the body's
expressions may use.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import expr as E
from mpmd_lab.fields import MAX_STATEMENTS, Expr, Ident, check_expr
from mpmd_lab.ops.base import Fit, StatementOp
from pydantic import AfterValidator, Field, StrictInt

if TYPE_CHECKING:
    from mpmd_lab.ops import Statement


class Loop(StatementOp):
    """``lax.fori_loop(start, stop, body, None)`` / ``@pl.loop(start, stop, step)``."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "loop", "var": "i", "start": 0, "stop": 2, "body": []}

    HELP: ClassVar[str] = "repeat the body for var in range(start, stop, step)"
    FAMILY: ClassVar[str] = "control"
    BODY: ClassVar[bool] = True

    op: Literal["loop"]
    var: Ident = Field(description="the loop index's name (usable in the body's expressions)")
    start: Expr = Field(0, description="the first value (an int or an expression)")
    stop: Expr = Field(description="one past the last value (an int or an expression)")
    step: Annotated[StrictInt, Field(ge=1, le=2**31 - 1)] = Field(1, description="a static step")
    via: Literal["fori_loop", "pl.loop", "python"] = Field(
        "fori_loop", description="how the source writes it: lax.fori_loop, @pl.loop, Python for"
    )
    body: Annotated[list[Statement], Field(max_length=MAX_STATEMENTS)] = Field(
        [], description="the statements repeated"
    )

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "start", E.parse(self.start)
        yield "stop", E.parse(self.stop)

    def label(self) -> str:
        step = "" if self.step == 1 else f" step {self.step}"
        a, b = E.parse(self.start).label(), E.parse(self.stop).label()
        return f"for {self.var} in {a}..{b}{step} ({self.via})"

    def source(self, g: Any) -> list[str]:
        start, stop = g.expr(E.parse(self.start)), g.expr(E.parse(self.stop))
        inner = g.body(self.body, loop_var=self.var)
        var = g.name_of(self.var)
        if self.via == "python":
            if not (E.parse(self.start).is_const and E.parse(self.stop).is_const):
                g.fail("a Python loop is unrolled at trace time: its bounds must be static")
            return [f"for {var} in range({start}, {stop}, {self.step}):", *_indent(inner)]
        fn = g.fresh("loop")
        if self.via == "pl.loop":
            step = "" if self.step == 1 else f", step={self.step}"
            return [f"@pl.loop({start}, {stop}{step})", f"def {fn}({var}):", *_indent(inner)]
        if self.step == 1:
            head = [f"def {fn}({var}, carry):"]
            trips = f"{start}, {stop}"
        else:  # lax.fori_loop has no step: count trips, compute the index
            k = g.fresh("k")
            head = [f"def {fn}({k}, carry):", f"    {var} = {start} + {k} * {self.step}"]
            trips = f"0, ({stop} - {start} + {self.step - 1}) // {self.step}"
        return [
            *head,
            *_indent(inner),
            "    return carry",
            "",
            f"lax.fori_loop({trips}, {fn}, None)",
        ]


class When(StatementOp):
    """``@pl.when(cond)``: the body where the condition holds."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        dev = fit.device_axes
        return {"op": "when", "cond": f"{dev[0]} == 0" if dev else "program_id(0) == 0", "body": []}

    HELP: ClassVar[str] = "run the body where a condition holds (pl.when)"
    FAMILY: ClassVar[str] = "control"
    BODY: ClassVar[bool] = True

    op: Literal["when"]
    cond: Annotated[str, Field(min_length=1, max_length=E.MAX_TEXT), AfterValidator(check_expr)] = (
        Field(description='a condition: "dev == 0", "wg == 1", "i < axis_size(dev) - 1"')
    )
    body: Annotated[list[Statement], Field(max_length=MAX_STATEMENTS)] = Field(
        [], description="the statements run where cond holds"
    )

    def condition(self) -> E.Expr:
        return E.parse(self.cond)

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "cond", self.condition()

    def label(self) -> str:
        return f"when {self.condition().label()}"

    def source(self, g: Any) -> list[str]:
        fn = g.fresh("when")
        inner = g.body(self.body)
        return [f"@pl.when({g.expr(self.condition())})", f"def {fn}():", *_indent(inner)]


def _indent(lines: list[str]) -> list[str]:
    return [("    " + line) if line else "" for line in (lines or ["pass"])]


__all__ = ["Loop", "When"]
