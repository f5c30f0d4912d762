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
the op says what it means in their terms. Each room's machinery is a typed
``Protocol`` below (``TraceContext``, ``LowerContext``, ``ExecuteContext``,
``ViewContext`` and ``Actor``, ``SourceWriter``; a transform's ``typed`` takes a
``shapes.RefInfo``): the one interface an op is written against, which the type
checker holds both the ops and the stages' classes to. Adding an op is adding a class to a module
of :mod:`mpmd_lab.ops` and listing it in ``ops/__init__.py`` (CONTRIBUTING.md).
"""

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, NoReturn, Protocol

from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab import shapes
from mpmd_lab.fields import Model, Path
from mpmd_lab.record import Record
from mpmd_lab.sharding import ShardSpec

if TYPE_CHECKING:  # (the stages import the ops: their types are named for the checker only)
    import numpy as np
    from mpmd_lab.codegen import Source
    from mpmd_lab.engine.core import Engine, StmtCtx, _Run
    from mpmd_lab.engine.sync import Wait
    from mpmd_lab.memory import Abstract, View
    from mpmd_lab.plan import Binding, Stmt
    from mpmd_lab.scenario import Scenario
    from mpmd_lab.shapes import RefInfo, StepError
    from mpmd_lab.validate.context import Ctx
    from mpmd_lab.validate.lower import LowerCtx
    from mpmd_lab.validate.trace import TraceCtx

#: How a statement's ref field is used (the graph's edges and the race check's accesses).
READ, WRITE, SYNC = "read", "write", "sync"


# ---------------------------------------------------------------- the stages' contexts
#
# What each stage hands an op's hook: the one interface an op is written against. The
# stages' own classes (named in each docstring) implement them; ``_conforms`` below has
# the type checker hold them to it.


class TraceContext(Protocol):
    """What a statement's ``trace`` rule sees (``validate.trace.TraceCtx``): its refs,
    resolved, and how to report."""

    st: "Stmt"

    @property
    def path(self) -> Path: ...
    @property
    def entry(self) -> str: ...
    def info(self, field: str) -> "RefInfo": ...
    def binding(self, field: str) -> "Binding": ...
    def static(self, e: Any) -> bool: ...
    def dtype(self, e: Any) -> str | None: ...
    def use(self, field: str) -> bool: ...
    def store(self, field: str, shape: tuple[int, ...], dtype: str, weak: bool = False) -> bool: ...
    def store_to_array(self) -> bool: ...
    def root_space(self, field: str) -> str: ...
    def base_type(self, field: str) -> str: ...
    def jax(self, code: str, path: Path, message: str, **kw: Any) -> None: ...
    def end_body(self) -> bool: ...


class LowerContext(Protocol):
    """What a statement's ``lower`` rule sees (``validate.lower.LowerCtx``): its refs,
    the program's mesh, and the Mosaic GPU lowering's checks of an access."""

    ctx: "Ctx"
    st: "Stmt"
    mesh: Any

    @property
    def path(self) -> Path: ...
    @property
    def mesh_axes(self) -> tuple[str, ...]: ...
    def info(self, field: str) -> "RefInfo": ...
    def binding(self, field: str) -> "Binding": ...
    def root_space(self, field: str) -> str: ...
    def static(self, e: Any) -> bool: ...
    def access(
        self, field: str, kind: str, check_layout: bool = True, splat: bool = False
    ) -> bool: ...
    def dropped_load(self, field: str) -> bool: ...
    def tma(self, src: str, dst: str) -> bool: ...
    def tma_dst(self, field: str) -> bool: ...
    def tma_smem(self, smem: str, gmem: str, shared: int = 1) -> None: ...
    def mma_operand(self, field: str) -> bool: ...
    def collective(self, axes: Any, what: str) -> bool: ...
    def later(self, phase: str, code: str, path: Path, message: str, why: str = "") -> None: ...
    def no_layout(self, path: Path, why: str) -> None: ...
    def jax(self, code: str, path: Path, message: str, **kw: Any) -> None: ...
    def device_id(self, dev: Any, field: str) -> bool: ...
    def barrier(self, field: str, method: str) -> bool: ...
    def cluster_group(self, axes: tuple[str, ...], path: Path) -> int | None: ...
    def root_layout(self, field: str) -> tuple[tuple[int, ...], tuple[Any, ...]] | None: ...
    def multimem_ref(self, field: str) -> bool: ...
    def gmem_transforms(self, field: str, load: bool) -> bool: ...


class ScenarioContext(Protocol):
    """What a static evaluation reads (``ops.control.static_value``, ``loop_envs``,
    ``never_traced``): the scenario, for its meshes' sizes (``validate.context.Ctx``,
    ``plan.Plan``, the engine's step estimate)."""

    @property
    def s(self) -> "Scenario": ...


class ExecuteContext(Protocol):
    """What a statement's ``execute`` sees while simulated for one actor
    (``engine.core.StmtCtx``): its refs' views and the engine's memory and sync."""

    @property
    def mesh(self) -> dict[str, int]: ...
    @property
    def data(self) -> bool: ...
    def view(self, field: str) -> "View": ...
    def read(self, field: str) -> Any: ...
    def read_all(self, field: str, axes: tuple[str, ...]) -> list[Any]: ...
    def write(self, field: str, value: Any, fan_out: tuple[str, ...] | None = None) -> None: ...
    def atomic_add(self, field: str, value: Any) -> None: ...
    def like(self, shape: tuple[int, ...], dtype: Any) -> "Abstract": ...
    def eval(self, raw: Any, sub: str = "") -> int: ...
    def signal(
        self, field: str, inc: int, device: Any = None, axes: tuple[str, ...] | None = None
    ) -> None: ...
    def wait_semaphore(self, field: str, value: int, decrement: bool) -> "Wait | None": ...
    def semaphore_value(self, field: str) -> int: ...
    def arrive(self, field: str) -> None: ...
    def wait_barrier(self, field: str) -> "Wait | None": ...
    def copy_to_smem(self, src: str, dst: str, barrier: str) -> None: ...
    def copy_to_smem_collective(
        self, src: str, dst: str, barrier: str, axes: tuple[str, ...]
    ) -> None: ...
    def copy_to_gmem(self, src: str, dst: str, commit_group: bool = True) -> None: ...
    def commit(self) -> None: ...
    def wait_copies(self, n: int, read_only: bool = False) -> None: ...
    def memo(self, key: str, fn: Any) -> Any: ...
    def fail(self, code: str, message: str) -> NoReturn: ...


class ViewContext(Protocol):
    """What a transform's ``view`` sees (``engine.core.Engine``): the mesh, expressions
    evaluated for an actor, peers, and how to fail."""

    mesh: dict[str, int]

    @property
    def cluster_sizes(self) -> dict[str, int]: ...
    def memo(self, obj: Any, key: Any, fn: Any) -> Any: ...
    def expr(self, raw: Any) -> E.Expr: ...
    def fail(self, code: str, path: str, message: str) -> NoReturn: ...
    def eval(self, e: E.Expr, run: Any, path: str, sub: str = "") -> int: ...
    def peer(self, dref: Any, run: Any, path: str) -> int: ...
    def sliced(self, offsets: "np.ndarray", index: tuple) -> "np.ndarray": ...


class Actor(Protocol):
    """Who a transform's ``view`` is taken for (``engine.core._Run``): where it is,
    and its values (what its expressions evaluate against)."""

    env: E.Env

    @property
    def cluster(self) -> tuple[int, ...]: ...
    def describe(self) -> str: ...


class SourceWriter(Protocol):
    """What an op's ``source`` writes with (``codegen.Source``): names, expressions and
    nested bodies as JAX source."""

    def name_of(self, var: str) -> str: ...
    def expr(self, e: E.Expr) -> str: ...
    def ref(self, name: str) -> str: ...
    def axes(self, axes: str | list[str]) -> str: ...
    def fresh(self, prefix: str) -> str: ...
    def fail(self, message: str) -> None: ...
    def body(
        self, body: list[Any], loop_var: str | None = None, shared_scope: bool = False
    ) -> list[str]: ...


class AccessLowering(Protocol):
    """What a view step's ``lower_access`` sees while the Mosaic GPU lowering takes a
    plain load or store through the view (``validate.lower._Access``)."""

    @property
    def where(self) -> Path: ...
    @property
    def root_space(self) -> str | None: ...
    def jax(self, code: str, path: Path, message: str, **kw: Any) -> None: ...
    def own(self, code: str, path: Path, message: str, **kw: Any) -> None: ...
    def device_id(self, dev: Any) -> bool: ...
    def unmade_reshape(self, pos: int, path: Path) -> bool: ...
    def cluster(self) -> bool: ...


class GmemCopyLowering(Protocol):
    """What a view step of a TMA copy's GMEM side sees while the copy is lowered
    (``validate.lower._GmemCopy``): ``load`` for ``copy_gmem_to_smem``, ``after`` the
    view's steps after this one, ``smem`` the other side's ref."""

    load: bool
    after: tuple["TransformOp", ...]

    @property
    def where(self) -> Path: ...
    @property
    def smem(self) -> "RefInfo": ...
    @property
    def smem_layout(self) -> tuple["TransformOp", ...]: ...
    @property
    def collective(self) -> bool: ...
    def jax(self, code: str, path: Path, message: str, **kw: Any) -> None: ...
    def device_id(self, dev: Any) -> bool: ...
    def multicast(self, axes: tuple[str, ...], path: Path) -> bool: ...


class ArrayValue(Protocol):
    """A plain array (``jax.Array``, not a Ref) a transform is applied to outside the
    kernel (``validate.arrays.ArrayResult``): ``updater`` once ``x.at[...]`` made it an
    update helper (``helper_index``: its index as JAX prints it); ``spec``: how each dim
    is sharded over the device mesh's axes (``ShardSpec``; None where the array is not
    sharded or where it went is not followed), with the mesh's axis sizes (``mesh``)."""

    shape: tuple[int, ...]
    dtype: str
    updater: bool
    helper_index: str
    spec: ShardSpec | None
    mesh: Mapping[str, int]


#: an error of a transform applied to an array: ``(code, JAX's exception type, message)``
ArrayError = tuple[str, str, str]


#: A transform's type rule's answer: ``(ref after | None, StepError | None, notes)``
Typed = tuple["RefInfo | None", "StepError | None", tuple["StepError", ...]]


if TYPE_CHECKING:

    def _conforms(
        t: "TraceCtx", low: "LowerCtx", x: "StmtCtx", e: "Engine", r: "_Run", g: "Source"
    ) -> None:
        """The stages' classes implement the contexts (checked by mypy, never run)."""
        contexts: tuple[
            TraceContext, LowerContext, ExecuteContext, ViewContext, Actor, SourceWriter
        ] = (t, low, x, e, r, g)
        del contexts


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
    #: fields with a syntax of their own, as a user types it: name -> the parser of the
    #: typed text into the field's JSON value (ValueError says what is wrong); editors
    #: take JSON for the other fields
    TEXT_FIELDS: ClassVar[dict[str, Callable[[str], Any]]] = {}
    #: those fields' values shown in that syntax: name -> the writer of the JSON value as
    #: text (None: no such form, show JSON)
    TEXT_SHOWN: ClassVar[dict[str, Callable[[Any], str | None]]] = {}

    @property
    def kind(self) -> str:
        return str(getattr(self, "op", "?"))

    def label(self) -> str:
        return self.kind

    #: whether an op of the class may evaluate index expressions: its class defines
    #: ``exprs`` (set once per class; an op of any other has none to walk)
    HAS_EXPRS: ClassVar[bool] = False

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.HAS_EXPRS = cls.exprs is not Op.exprs

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        """``(sub-path, expression)`` for every index expression the op evaluates."""
        return iter(())

    def expr_kind(self, field: str) -> str:
        """What the expression ``exprs()`` gives at ``field`` is to JAX, for the dtype
        rules of a value loaded from memory: ``device`` (a device id: an int32,
        DEVICE_ID_DTYPE), ``index`` (into a ref: an integer, INDEX_DTYPE), ``bound`` (a
        loop's: LOOP_BOUND_DTYPE), ``cond`` (a condition: any number), ``count`` (a
        signal's increment, a wait's value) or ``value`` (a number in a computed value)."""
        return "device" if field == "device" or field.startswith("device.") else "index"

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

    #: JAX records it without computing the ref's type (``TransformedRef``): while a
    #: lazy error waits, the view is only marked transformed
    DEFERS_TYPE: ClassVar[bool] = False

    #: which of JAX's transforms it lowers as, in the Mosaic GPU lowering's algebra of a
    #: view (``layout_rules``): ``index`` (``NDIndexer``), ``reshape``, ``transpose``,
    #: ``bitcast``, the scratch layouts ``tiling`` and ``swizzle``, or ``other`` (no
    #: algebra: it is printed by ``jax_repr``)
    LOWERS_AS: ClassVar[str] = "other"

    #: it names another device's memory (NVSHMEM): the Mosaic GPU lowering then holds
    #: the device mesh to row-major ids (``validate.devices``)
    CROSS_DEVICE: ClassVar[bool] = False
    #: the repr of its transform in the GPU interpreter's ``Unsupported transform: ...``
    #: (None: that interpreter follows it)
    GPU_INTERP_REPR: ClassVar[str | None] = None
    #: the transform class the HLO interpreter has no discharge rule for (None: it has one)
    HLO_INTERP_CLASS: ClassVar[str | None] = None

    def traces_scalar(self) -> bool:
        """Made by the caller (an argument's transform), it holds a traced int32 (a device
        id, a block id, an integer index) that the kernel then closes over: the Mosaic GPU
        lowering's CAPTURED_SCALAR (measured, jax 0.12). This default: none."""
        return False

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        """What JAX's CPU interpreter ``interp`` (``"gpu"``, ``"hlo"``) raises for an
        access through this view (None: it runs it); ``mpmd_lab.validate.interp`` reports it.
        This default reads only the class's constants: once per class and interpreter."""
        return _class_interpret_limit(self.__class__, interp)

    def unbound_axis(self, bound: frozenset[str] | set[str]) -> str | None:
        """The first axis name the transform evaluates with ``lax.axis_index`` that is
        not bound where it runs (``bound``), or ``"<pid>"``: ``shapes.first_unbound`` of
        its expressions (``apply`` asks it where ``bound`` is known)."""
        return shapes.first_unbound([e for _, e in self.exprs()], bound)

    def gpu_interp_limit(self, jax_message: str) -> InterpLimit:
        """The GPU interpreter's limit for this view, JAX's message ``jax_message``."""
        return gpu_interp_limit(self.kind, jax_message)

    #: how the GPU lowering's memref follows it (``validate.lower``'s fold of a view):
    #: ``MOVES_AXES`` permutes the memref's axes (a transpose), ``REINTERPRETS`` changes
    #: its element type, so its strides no longer follow the ref's (a bitcast),
    #: ``RESHAPES`` folds or unfolds its axes (a reshape)
    MOVES_AXES: ClassVar[bool] = False
    REINTERPRETS: ClassVar[bool] = False
    RESHAPES: ClassVar[bool] = False
    #: what memory it reaches: ``""`` the ref's own, ``"peer"`` another device's,
    #: ``"multicast"`` every device along some axes, ``"cluster"`` another block's
    REACH: ClassVar[str] = ""
    #: it only indexes (``ref.at[...]``): a barrier, a TMA copy's GMEM side take it
    INDEXES: ClassVar[bool] = False

    def jax_repr(self) -> str:
        """The transform as JAX prints it (its traced values elided as ``...``)."""
        return self.kind

    def int_indices(self) -> Iterator[E.Expr]:
        """The integer index expressions of the dims it drops, in order (``at``)."""
        return iter(())

    def root_dims(self, dims: list[int]) -> list[int] | None:
        """Which root dim each dim of the view after it is, given ``dims`` before it
        (None: no longer one root dim per view dim)."""
        return None

    def stops_access(self) -> bool:
        """Whether ``lower_access`` may stop the lowering of a plain access at this step
        (a reshape's own is asked through ``RESHAPES``)."""
        return False

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """The Mosaic GPU lowering's rules of this step (``pos`` in the view's stack, at
        field ``path``) for a plain load or store through the view; True when it stops."""
        return False

    def lower_gmem_copy(self, a: GmemCopyLowering, path: Path) -> bool:
        """``_extract_gmem_copy_params``: this step of a TMA copy's GMEM side (at field
        ``path``); True when the lowering stops. Only indexing, peer and multicast views
        lower; anything else is refused."""
        a.jax(
            "TMA_GMEM_TRANSFORM",
            a.where,
            "Non-indexing transforms on GMEM refs are not implemented.",
            explanation=f"The GMEM side of a TMA copy is addressed by indexing only; this "
            f"view applies {self.kind}. Copy the whole (indexed) ref and transform the SMEM "
            "side or the value instead.",
        )
        return True

    def trace_gmem_load(self, t: "TraceContext", field: str, pos: int) -> bool:
        """``copy_gmem_to_smem``'s abstract eval of this step (``pos`` in ``field``'s
        stack) of the GMEM source; True when tracing stops."""
        return False

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """Apply it to a plain array outside the kernel (``a``, changed in place; ``bound``
        the axis names bound there): JAX's error, or None."""
        if a.updater:  # a ref function wraps an update helper without complaint
            return None
        return ("REF_NOT_A_REF", "TypeError", "ref must be a reference")

    def needs_type(self, ref: "RefInfo") -> bool:
        """Whether applying it computes the ref's type (so a waiting lazy error is raised)."""
        return self.NEEDS_TYPE

    def typed(self, ref: "RefInfo") -> Typed:
        """JAX's type rule: ``(ref after | None, StepError | None, notes)`` (a tuple:
        the step's own)."""
        raise NotImplementedError

    def gathered(self, after: "RefInfo", env: Mapping[str, Any]) -> "RefInfo":
        """``after`` (``typed``'s) where an index entry loads an array from a ref bound
        in ``env`` (a gather view, ``at``); ``after`` itself for a step that only
        indexes by scalars."""
        return after

    def source(self, base: str, g: SourceWriter) -> str:
        """``base`` with this transform applied, as JAX source."""
        raise NotImplementedError

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        """The simulator's view after this transform (``mpmd_lab.memory.View``)."""
        raise NotImplementedError

    def compiled(self, path: str) -> "Callable[[Any, View, ViewContext, Actor], View] | None":
        """``view`` at field path ``path`` as one function made once (per op object
        and path: a candidate fix keeps the ops it does not edit), called with the op
        first (``f(op, v, sim, actor)``) by the engine's lets per actor; None where
        ``view`` itself is that function."""
        return None

    def scratch_source(self) -> str:
        """The layout transform a scratch type is allocated with (tiling, swizzle only)."""
        raise ValueError(f"{self.op_name()} is not a scratch layout transform")


def gpu_interp_limit(op: str, jax_message: str) -> InterpLimit:
    """The GPU interpreter's limit for a view of transform ``op``, JAX's message
    ``jax_message``."""
    return InterpLimit(
        "GPU_INTERP_UNSUPPORTED_TRANSFORM",
        f"JAX's CPU interpreter can't run {op}; simulate does",
        jax_message,
        f"The GPU interpreter runs only index and transpose views, not {op}.",
    )


@functools.cache
def _class_interpret_limit(cls: type[TransformOp], interp: str) -> InterpLimit | None:
    """``TransformOp.interpret_limit``'s default for a transform class (an immutable
    answer, shared): its ``GPU_INTERP_REPR`` or ``HLO_INTERP_CLASS``, named by its op."""
    op = cls.op_name()  # (``Op.kind`` of each of its instances)
    if interp == "gpu" and cls.GPU_INTERP_REPR is not None:
        return gpu_interp_limit(op, L.interpret_transform_message(cls.GPU_INTERP_REPR))
    if interp == "hlo" and cls.HLO_INTERP_CLASS is not None:
        return InterpLimit(
            "HLO_INTERP_NO_DISCHARGE",
            f"JAX's HLO interpreter can't run {op}; simulate does",
            f"<class '{cls.HLO_INTERP_CLASS}'>",
            f"The HLO interpreter has no discharge rule for {op} views.",
        )
    return None


class StatementOp(Op):
    """A body statement (``copy``, ``add``, ``semaphore_wait``, ...)."""

    #: ``(field, READ | WRITE | SYNC)`` for every field that names a ref, in the order
    #: JAX evaluates them
    REFS: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: the SMEM operands whose layout (tiling, swizzle) Mosaic GPU's layout inference
    #: picks for this op when their scratch declares none (a WGMMA's)
    SMEM_LAYOUT_FROM_USE: ClassVar[tuple[str, ...]] = ()
    #: it holds a nested ``body`` of statements (a loop, a condition)
    BODY: ClassVar[bool] = False
    #: it writes its value with a plain store, ``dst[...] = value`` (JAX's HLO
    #: interpreter: a dynamic_update_slice)
    PLAIN_STORE: ClassVar[bool] = False
    #: what it does to the semaphore or barrier its SYNC ref names: ``signal``, ``wait``,
    #: ``arrive`` or ``complete`` (a TMA load completes on its barrier); the graph's edges
    SYNC_ROLE: ClassVar[str] = ""
    #: why a CPU interpreter cannot run it, by interpreter (``"gpu"``, ``"hlo"``;
    #: ``"gpu-multi"``: the GPU interpreter on several devices); ``INTERP_LIMIT`` warnings
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {}

    def cross_device(self) -> bool:
        """It talks to other devices (NVSHMEM: a peer's semaphore, a multimem access):
        the Mosaic GPU lowering then holds the device mesh to row-major ids."""
        return False

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

    def ref_name(self, field: str) -> str:
        """The ref a field of ``ref_fields`` names (the field's value, unless the op
        names its refs inside another field, as ``compute``'s value does)."""
        return getattr(self, field)

    def loaded_before(self, field: str, name: str) -> list[str]:
        """The ref fields (``ref_fields``) the statement loads before its expression at
        ``field`` first reads the axis ``name``, in Python's evaluation order: where
        such a load raises (a view's waiting lazy error), JAX never gets to the name.
        Nothing by default: a statement's expressions come before its refs' use."""
        return []

    def trace(self, t: TraceContext) -> bool:
        """Trace-time rules (``t``: the trace context); True when tracing stops."""
        return False

    def lower(self, low: LowerContext) -> bool:
        """GPU-lowering rules (``low``: the lowering context); True when lowering stops."""
        return False

    def execute(self, x: ExecuteContext) -> "Wait | None":
        """Simulate the statement for one actor (``x``: the statement's sim context)."""
        raise NotImplementedError

    def source(self, g: SourceWriter) -> list[str]:
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
