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

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import expr as E
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.dtypes import is_int
from mpmd_lab.fields import MAX_STATEMENTS, Expr, Ident, check_expr, format_path, sub_path
from mpmd_lab.ops.base import Fit, ScenarioContext, SourceWriter, StatementOp, TraceContext
from pydantic import AfterValidator, Field, StrictInt

if TYPE_CHECKING:
    from mpmd_lab.ops import Statement
    from mpmd_lab.plan import Stmt


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
    body: "Annotated[list[Statement], Field(max_length=MAX_STATEMENTS)]" = Field(
        [], description="the statements repeated"
    )

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "start", E.parse(self.start)
        yield "stop", E.parse(self.stop)

    def expr_kind(self, field: str) -> str:
        return "bound"

    def bound_dtype_error(self, start: str | None, stop: str | None) -> str | None:
        """JAX's error for bounds of these dtypes (None: a Python int), or None.
        ``lax.fori_loop`` wants equal types (a Python int is an int32 there, but takes an
        integer's dtype; a comparison is a bool); ``pl.loop`` takes any. A step other than 1
        is written ``lax.fori_loop(0, ((stop) - (start) + step - 1) // step, ...)``: the
        bounds only meet in the trip count, whose dtype (an integer's, which the 0 takes,
        or a float's, refused) is what ``fori_loop`` sees (two bools: ``bool_bounds_error``)."""
        if self.via != "fori_loop":
            return None
        if self.step != 1:
            trips = E.combine_dtypes(start, stop)
            if trips is None or not trips.startswith("float"):
                return None
            start, stop = None, trips  # (the 0 of the trip count, then the count)
        elif start == stop:
            return None
        if start is None or stop is None:
            strong = start or stop
            if strong is None or not (strong.startswith("float") or strong == "bool"):
                return None
        a, b = start or "int32", stop or "int32"
        return f"lower and upper arguments to fori_loop must have equal types, got {a} and {b}"

    def bool_bounds_error(
        self, start: str | None, stop: str | None, traced: bool
    ) -> tuple[str, str] | None:
        """JAX's error (code, message) for two bool bounds (comparisons: equal types,
        which ``bound_dtype_error`` lets through), or None. ``lax.fori_loop`` with a
        ``traced`` bound runs a ``while_loop`` counting in the bounds' dtype, whose body
        adds 1 to the counter (``lax.add``, which refuses a bool) before it traces the
        loop's own body (LOOP_BOUND_BOOL); a step other than 1 subtracts them first, in
        the trip count (``lax.sub``: VALUE_DTYPE). Two constant bounds are Python bools
        (a ``scan``, no error); ``pl.loop`` casts its bounds."""
        if self.via != "fori_loop" or not traced or start != "bool" or stop != "bool":
            return None
        # (JAX lists the accepted kinds in the order of a set: this is one of them)
        kinds = "Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating."
        if self.step != 1:
            return "VALUE_DTYPE", f"sub does not accept dtype bool at position 0. {kinds}"
        return "LOOP_BOUND_BOOL", f"add does not accept dtype bool at position 0. {kinds}"

    def counts_in_int32(self, python: frozenset[str] | set[str]) -> bool:
        """Whether JAX counts this loop's trips in int32 (``trips``): a ``fori_loop``
        or ``pl.loop`` with a step other than 1 whose bounds are not both Python ints
        (``python``: the variables of the unrolled loops around it)."""
        if self.step == 1 or self.via == "python":
            return False
        bounds = (E.parse(self.start), E.parse(self.stop))
        return not all(
            _value_names(e) <= python and _calls(e) <= {"axis_size", "num_programs"} for e in bounds
        )

    def trips(self, start: int, stop: int, int32: bool) -> range:
        """The values ``var`` takes: ``range(start, stop, step)``, but where the trips
        are counted in int32 (``counts_in_int32``), as the generated code and
        ``pl.loop`` count them, ``(stop - start + step - 1) // step``, wrapped: past
        2**31 - 1 the count is negative, and the loop runs no trip."""
        if not int32:
            return range(start, stop, self.step)
        n = (stop - start + self.step - 1 + 2**31) % 2**32 - 2**31
        return range(start, start + max(0, n // self.step) * self.step, self.step)

    def label(self) -> str:
        step = "" if self.step == 1 else f" step {self.step}"
        a, b = E.parse(self.start).label(), E.parse(self.stop).label()
        return f"for {self.var} in {a}..{b}{step} ({self.via})"

    def source(self, g: SourceWriter) -> list[str]:
        start, stop = g.expr(E.parse(self.start)), g.expr(E.parse(self.stop))
        inner = g.body(self.body, loop_var=self.var, shared_scope=self.via == "python")
        var = g.name_of(self.var)
        if self.via == "python":
            # unrolled at trace time: traced bounds are JAX's error (written as they are)
            step = "" if self.step == 1 else f", {self.step}"
            return [f"for {var} in range({start}, {stop}{step}):", *_indent(inner)]
        fn = g.fresh("loop")
        if self.via == "pl.loop":
            step = "" if self.step == 1 else f", step={self.step}"
            return [f"@pl.loop({start}, {stop}{step})", f"def {fn}({var}):", *_indent(inner)]
        carry = g.fresh("carry")  # a fresh name: no user name can be it
        if self.step == 1:
            head = [f"def {fn}({var}, {carry}):"]
            trips = f"{start}, {stop}"
        else:  # lax.fori_loop has no step: count trips, compute the index
            # (each bound in parentheses: ``stop - start`` of ``b + 1`` is ``stop - (b + 1)``,
            # and of comparisons no chained comparison)
            k = g.fresh("k")
            head = [f"def {fn}({k}, {carry}):", f"    {var} = ({start}) + {k} * {self.step}"]
            trips = f"0, (({stop}) - ({start}) + {self.step - 1}) // {self.step}"
        return [
            *head,
            *_indent(inner),
            f"    return {carry}",
            "",
            f"lax.fori_loop({trips}, {fn}, None)",
        ]

    def trace(self, t: TraceContext) -> bool:
        """An unrolled Python loop needs Python ints: ``range`` of a traced bound fails."""
        if self.via != "python":
            return False
        for f in ("start", "stop"):
            e = E.parse(getattr(self, f))
            if not t.static(e):
                # (``range`` asks ``__index__`` of start, then stop: an integer tracer
                # is TracerIntegerConversionError, a bool or float one a TypeError)
                dtype = t.dtype(e) or "int32"
                if is_int(dtype):
                    code = "LOOP_PYTHON_TRACED"
                    message = (
                        f"The __index__() method was called on traced array with shape {dtype}[]"
                    )
                    jax_type = None
                else:
                    code = "LOOP_PYTHON_NOT_INT"
                    message = "Only integer scalar arrays can be converted to a scalar index."
                    jax_type = "TypeError"
                t.jax(
                    code,
                    sub_path(t.path, f),
                    message,
                    jax_type=jax_type,
                    fix=Fix(
                        description="loop with lax.fori_loop (its bounds may be traced)",
                        edits=[
                            Edit(
                                op="replace", path=format_path((*t.path, "via")), value="fori_loop"
                            )
                        ],
                    ),
                )
                return True
        return False


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
    body: "Annotated[list[Statement], Field(max_length=MAX_STATEMENTS)]" = Field(
        [], description="the statements run where cond holds"
    )

    def condition(self) -> E.Expr:
        return E.parse(self.cond)

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "cond", self.condition()

    def expr_kind(self, field: str) -> str:
        return "cond"

    def label(self) -> str:
        return f"when {self.condition().label()}"

    def source(self, g: SourceWriter) -> list[str]:
        fn = g.fresh("when")
        inner = g.body(self.body)
        return [f"@pl.when({g.expr(self.condition())})", f"def {fn}():", *_indent(inner)]


def _value_names(e: E.Expr) -> set[str]:
    """The names an expression reads as values (not ``axis_size``'s argument: a size is
    static)."""
    if isinstance(e, E.Name):
        return {e.id}
    if isinstance(e, E.Call):
        return set()
    out: set[str] = set()
    for f in ("a", "b"):
        sub = getattr(e, f, None)
        if isinstance(sub, E.Expr):
            out |= _value_names(sub)
    for sub in getattr(e, "items", ()):
        out |= _value_names(sub)
    return out


def _calls(e: E.Expr) -> set[str]:
    return set(e.calls())


def python_vars(st: "Stmt") -> set[str]:
    """The loop variables that are Python ints where ``st`` is traced: those of the
    unrolled (``via: "python"``) loops around it."""
    return {s.node.var for s in st.scope if s.node.kind == "loop" and s.node.via == "python"}


def is_static(e: E.Expr, st: "Stmt") -> bool:
    """A Python int when ``st`` is traced: no axis index, no program id, no loop variable
    but an unrolled loop's (axis sizes and ``pl.num_programs`` are static)."""
    return _value_names(e) <= python_vars(st) and _calls(e) <= {"axis_size", "num_programs"}


def _sizes(ctx: ScenarioContext) -> dict[str, int]:
    sizes: dict[str, int] = dict(ctx.s.device_mesh or {})
    for p in ctx.s.call.programs:
        sizes.update(p.mesh.grid)
        sizes.update(p.mesh.cluster)
        if p.mesh.threads is not None and p.mesh.threads.name:
            sizes[p.mesh.threads.name] = p.mesh.threads.count
    return sizes


def static_value(
    e: E.Expr, ctx: ScenarioContext, values: dict[str, int] | None = None
) -> int | None:
    """The value of an expression that reads no axis index (sizes from the meshes;
    ``values``: the unrolled loops' variables), or None."""
    values = values or {}
    if _value_names(e) - set(values) or _calls(e) - {"axis_size"}:
        return None
    try:
        return e.eval(E.Env(values, _sizes(ctx)))
    except E.ExprError:
        return None


#: most iterations of unrolled loops ``never_traced`` enumerates
MAX_UNROLLED = 4096


def trip_count(start: int, stop: int, step: int) -> int:
    """``len(range(start, stop, step))`` for any ints (``len`` of a range past 2**63
    raises OverflowError; a loop bound may be an expression of huge constants)."""
    if step > 0:
        return max(0, -(-(stop - start) // step))
    return max(0, -(-(start - stop) // -step))


def statements_run(
    body: Iterable[Any],
    ctx: ScenarioContext,
    unrolled_only: bool = False,
    loops: list[tuple[int, str]] | None = None,
    base: str = "",
) -> int:
    """Statements a body runs, counting each loop's trips (constants and axis sizes, in
    closed form: ``axis_size(dev) * 2**31`` costs nothing; a loop whose bounds are not
    static counts once; a trip of an empty body counts one, as the engine counts it) and
    each ``when`` body once. ``unrolled_only``: count the trips
    of Python loops only (``via: python``), as JAX's trace meets the statements (a
    ``fori_loop`` or ``pl.loop`` body is traced once). ``loops``: gets ``(statements,
    field path)`` of every loop whose trips were counted (``base``: the body's path)."""
    n = 0
    for j, st in enumerate(body):
        n += 1
        kind = st.kind
        path = f"{base}[{j}]" if loops is not None else ""
        if kind == "loop":
            inner = statements_run(st.body, ctx, unrolled_only, loops, f"{path}.body")
            if unrolled_only and st.via != "python":
                n += inner
                continue
            a = static_value(E.parse(st.start), ctx)
            b = static_value(E.parse(st.stop), ctx)
            trips = 1 if a is None or b is None else trip_count(a, b, st.step)
            here = trips * max(inner, 1)  # an empty body's trips are steps all the same
            if loops is not None:
                loops.append((here, path))
            n += here
        elif kind == "when":
            n += statements_run(st.body, ctx, unrolled_only, loops, f"{path}.body")
    return n


def loop_envs(
    scope: Iterable["Stmt"],
    ctx: ScenarioContext,
    python_only: bool = False,
    limit: int = MAX_UNROLLED,
) -> list[dict[str, int]] | None:
    """Every assignment of the variables of the loops in ``scope`` (the statements
    around one, outermost first; a bound may use an outer loop's variable). None when a
    bound is not static or there are more than ``limit`` (counted before any is made: a
    loop of 2**31 steps costs nothing). ``python_only``: only the loops unrolled by
    Python (``via: python``)."""
    envs: list[dict[str, int]] = [{}]
    for s in scope:
        node = s.node
        if node.kind != "loop" or (python_only and node.via != "python"):
            continue
        nxt: list[dict[str, int]] = []
        for env in envs:
            a = static_value(E.parse(node.start), ctx, env)
            b = static_value(E.parse(node.stop), ctx, env)
            if a is None or b is None:
                return None
            if len(nxt) + trip_count(a, b, node.step) > limit:
                return None
            nxt += [{**env, node.var: v} for v in range(a, b, node.step)]
        envs = nxt
    return envs


def _python_bool(e: E.Expr) -> bool:
    """The exported condition is a Python ``bool`` (``pl.when`` then is an ``if``): a
    comparison of constants, or ``and``/``or`` (written ``&``/``|``) of those; ``not`` is
    ``jnp.logical_not``, an array."""
    if isinstance(e, E.Compare):
        return True
    if isinstance(e, E.BoolOp):
        return all(_python_bool(x) for x in e.items)
    return False


def never_traced(st: "Stmt", ctx: ScenarioContext) -> bool:
    """``st`` is inside a body JAX never traces: ``pl.when`` of a condition that is a
    Python ``False`` (in every iteration of the unrolled loops around it), or an unrolled
    Python loop with no iteration."""
    for k, s in enumerate(st.scope):
        node = s.node
        if node.kind == "when":
            cond = node.condition()
            if not _python_bool(cond):
                continue
            envs = loop_envs(st.scope[:k], ctx, python_only=True)
            if envs is not None and all(static_value(cond, ctx, env) == 0 for env in envs):
                return True
        elif node.kind == "loop" and node.via == "python":
            envs = loop_envs(st.scope[: k + 1], ctx, python_only=True)
            if envs is not None and not envs:
                return True
    return False


def _indent(lines: list[str]) -> list[str]:
    return [("    " + line) if line else "" for line in (lines or ["pass"])]


__all__ = [
    "Loop",
    "When",
    "is_static",
    "loop_envs",
    "never_traced",
    "python_vars",
    "static_value",
    "trip_count",
]
