"""What an op is: a schema class that also carries the op's meaning.

Every transform and every body statement is one class here (like JAX's own
``Transform`` classes: a small object that knows its type rule and its printing).
The class holds, in one place:

- its fields, with help text and defaults (the Lab's editors read them from here);
- ``label()``: the short text the graph and the editors show;
- ``exprs()``: the index expressions it evaluates, for name binding;
- its JAX meaning for each view of the project, as one method per room:

  ========== ====================================== ==========================
  method     what                                   called by
  ========== ====================================== ==========================
  typed      JAX's type rule (shape, dtype, errors) ``shapes.propagate``
  source     the JAX source it exports              ``codegen``
  view       the simulator's view of it (numpy)     ``simulate``
  trace      trace-time rules of a statement        ``validate.trace``
  lower      GPU-lowering rules                     ``validate.lower``
  execute    what a statement does when simulated   ``simulate``
  ========== ====================================== ==========================

The rooms provide the machinery (a trace context, a source writer, the simulator);
the op says what it means in their terms. Adding an op is adding a class to a module
of :mod:`mpmd_lab.ops` and listing it in ``ops/__init__.py`` (CONTRIBUTING.md).
"""

from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab import shapes
from mpmd_lab.fields import Model
from mpmd_lab.record import Record

#: How a statement's ref field is used (the graph's edges and the race check's accesses).
READ, WRITE, SYNC = "read", "write", "sync"


class Fit(Record):
    """What a new op should fit (the Lab's "add" buttons): the scenario's names
    (``refs``: every name a body can use)."""

    __slots__ = ("refs", "outputs", "device_axes", "cluster_axes", "semaphores", "barriers", "smem")

    def __init__(
        self,
        refs: list[str] | None = None,
        outputs: list[str] | None = None,
        device_axes: list[str] | None = None,
        cluster_axes: list[str] | None = None,
        semaphores: list[str] | None = None,
        barriers: list[str] | None = None,
        smem: list[str] | None = None,
    ) -> None:
        self.refs = [] if refs is None else refs
        self.outputs = [] if outputs is None else outputs
        self.device_axes = [] if device_axes is None else device_axes
        self.cluster_axes = [] if cluster_axes is None else cluster_axes
        self.semaphores = [] if semaphores is None else semaphores
        self.barriers = [] if barriers is None else barriers
        self.smem = [] if smem is None else smem

    def first(self, names: list[str], default: str) -> str:
        return names[0] if names else default


class InterpLimit(NamedTuple):
    """What a CPU interpreter raises where it cannot follow a view: the code, the
    message, JAX's own message and why."""

    code: str
    message: str
    jax_message: str
    why: str


class Op(Model):
    """Base of every transform and statement op."""

    #: a one-line description shown in the Lab's palette
    HELP: ClassVar[str] = ""
    #: the family the palette groups it under
    FAMILY: ClassVar[str] = ""

    @property
    def kind(self) -> str:
        return str(getattr(self, "op", "?"))

    def label(self) -> str:
        return self.kind

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        """``(sub-path, expression)`` for every index expression the op evaluates."""
        return iter(())

    def uses_call(self, fn: str) -> bool:
        """Whether an expression the op evaluates calls ``fn`` (``program_id``, ...)."""
        return any(fn in e.calls() for _, e in self.exprs())

    @classmethod
    def op_name(cls) -> str:
        from typing import get_args

        return get_args(cls.model_fields["op"].annotation)[0]

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """Field name -> its help text (the schema's descriptions)."""
        return {k: f.description or "" for k, f in cls.model_fields.items() if k != "op"}

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        """A new op of this kind (JSON form) whose values fit the scenario where they can:
        the fields' defaults, ref fields naming refs the body has."""
        out: dict[str, Any] = {"op": cls.op_name()}
        for name, f in cls.model_fields.items():
            if name == "op" or f.is_required() is False:
                continue
            out[name] = _fitting(name, fit)
        return out


class TransformOp(Op):
    """A ref transform: a view of a ref (``ref.at[...]``, ``plgpu.remote_ref(ref, ...)``)."""

    #: only in a scratch type's ``transforms`` (tiling, swizzle), never applied to a ref
    SCRATCH_ONLY: ClassVar[bool] = False
    #: the type of the ref must be computed to apply it (a lazy error is raised here)
    NEEDS_TYPE: ClassVar[bool] = False

    #: the repr of its transform in the GPU interpreter's ``Unsupported transform: ...``
    #: (None: that interpreter follows it)
    GPU_INTERP_REPR: ClassVar[str | None] = None
    #: the transform class the HLO interpreter has no discharge rule for (None: it has one)
    HLO_INTERP_CLASS: ClassVar[str | None] = None

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        """What JAX's CPU interpreter ``interp`` (``"gpu"``, ``"hlo"``) raises for an
        access through this view (None: it runs it); ``mpmd_lab.validate.interp`` reports it."""
        if interp == "gpu" and self.GPU_INTERP_REPR is not None:
            return self.gpu_interp_limit(L.interpret_transform_message(self.GPU_INTERP_REPR))
        if interp == "hlo" and self.HLO_INTERP_CLASS is not None:
            op = self.kind
            return InterpLimit(
                "HLO_INTERP_NO_DISCHARGE",
                f"JAX's HLO interpreter can't run {op}; simulate does",
                f"<class '{self.HLO_INTERP_CLASS}'>",
                f"The HLO interpreter has no discharge rule for {op} views.",
            )
        return None

    def unbound_axis(self, bound: frozenset[str] | set[str]) -> str | None:
        """The first axis name the transform evaluates with ``lax.axis_index`` that is
        not bound where it runs (``bound``), or ``"<pid>"``: ``shapes.first_unbound`` of
        its expressions (``apply`` asks it where ``bound`` is known)."""
        return shapes.first_unbound([e for _, e in self.exprs()], bound)

    def gpu_interp_limit(self, jax_message: str) -> InterpLimit:
        """The GPU interpreter's limit for this view, JAX's message ``jax_message``."""
        op = self.kind  # (op_name() of the instance's class: its ``op`` literal)
        return InterpLimit(
            "GPU_INTERP_UNSUPPORTED_TRANSFORM",
            f"JAX's CPU interpreter can't run {op}; simulate does",
            jax_message,
            f"The GPU interpreter runs only index and transpose views, not {op}.",
        )

    def needs_type(self, ref: Any) -> bool:
        """Whether applying it computes the ref's type (so a waiting lazy error is raised)."""
        return self.NEEDS_TYPE

    def typed(self, ref: Any) -> tuple[Any, Any, tuple[Any, ...]]:
        """JAX's type rule: ``(ref after | None, StepError | None, notes)`` (a tuple:
        the step's own)."""
        raise NotImplementedError

    def source(self, base: str, g: Any) -> str:
        """``base`` with this transform applied, as JAX source."""
        raise NotImplementedError

    def view(self, v: Any, sim: Any, actor: Any, path: str) -> Any:
        """The simulator's view after this transform (``mpmd_lab.memory.View``)."""
        raise NotImplementedError

    def scratch_source(self) -> str:
        """The layout transform a scratch type is allocated with (tiling, swizzle only)."""
        raise ValueError(f"{self.op_name()} is not a scratch layout transform")


class StatementOp(Op):
    """A body statement (``copy``, ``add``, ``semaphore_wait``, ...)."""

    #: ``(field, READ | WRITE | SYNC)`` for every field that names a ref, in the order
    #: JAX evaluates them
    REFS: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: it holds a nested ``body`` of statements (a loop, a condition)
    BODY: ClassVar[bool] = False
    #: what it does to the semaphore or barrier its SYNC ref names: ``signal``, ``wait``,
    #: ``arrive`` or ``complete`` (a TMA load completes on its barrier); the graph's edges
    SYNC_ROLE: ClassVar[str] = ""
    #: why a CPU interpreter cannot run it, by interpreter (``"gpu"``, ``"hlo"``;
    #: ``"gpu-multi"``: the GPU interpreter on several devices); ``INTERP_LIMIT`` warnings
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {}

    def interpret_error(self, interp: str) -> Any:
        """JAX's own error (a ``layout_rules.JaxError``) where the CPU interpreter
        ``interp`` fails on this statement with a message of its own (None: see
        ``interpret_limit``)."""
        return None

    def interpret_limit(self, interp: str, devices: int) -> str | None:
        """Why JAX's CPU interpreter ``interp`` cannot run this statement on ``devices``
        devices (None: it can)."""
        limits = self.INTERPRET_LIMITS
        if interp == "gpu" and devices > 1 and "gpu-multi" in limits:
            return limits["gpu-multi"]
        return limits.get(interp)

    def ref_fields(self) -> list[tuple[str, str, str]]:
        """``(field, name, access)`` for every ref this statement names."""
        out = []
        # (``self.REFS``, not ``type(self).REFS``: pydantic's metaclass hooks attribute
        # lookups on a model class, which makes them slower than the instance's)
        for f, access in self.REFS:
            name = getattr(self, f, None)
            if isinstance(name, str):
                out.append((f, name, access))
        return out

    def trace(self, t: Any) -> bool:
        """Trace-time rules (``t``: the trace context); True when tracing stops."""
        return False

    def lower(self, low: Any) -> bool:
        """GPU-lowering rules (``low``: the lowering context); True when lowering stops."""
        return False

    def execute(self, x: Any) -> None:
        """Simulate the statement for one actor (``x``: the statement's sim context)."""
        raise NotImplementedError

    def source(self, g: Any) -> list[str]:
        """The statement as lines of JAX source."""
        raise NotImplementedError


def _fitting(name: str, fit: Fit) -> Any:
    """A value for a required field, by its name's role."""
    if name in ("dst",):
        return fit.first(fit.outputs, fit.first(fit.refs, "out"))
    if name in ("src", "lhs", "rhs", "ref"):
        return fit.first(fit.refs, "x_ref")
    if name == "sem":
        return fit.first(fit.semaphores, "sem")
    if name == "barrier":
        return fit.first(fit.barriers, "barrier")
    if name == "axes":
        return list(fit.device_axes) or ["dev"]
    return 0


def parse_expr(value: int | str) -> E.Expr:
    """A field's expression (validated by the schema, so it parses)."""
    return E.parse(value)
