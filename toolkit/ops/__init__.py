"""Every op of the scenario language, in one registry.

An op is a class in one of the family modules (each class holds the op's whole
meaning: see :mod:`mpmd_lab.ops.base`). This module lists them; the schema's unions,
the loader's field paths and the Lab's palette are derived from these lists.

To add an op: write its class in the module of its family (or a new one), add it to
``AnyTransform`` or ``AnyStatementOp`` below, and it is loadable, checkable,
simulated, exported, drawn and in the palette (CONTRIBUTING.md).
"""

from typing import Annotated, Any, ClassVar, get_args

from mpmd_lab.fields import MAX_TRANSFORMS, Ident, Model, RefName
from mpmd_lab.ops import control as _control
from mpmd_lab.ops import scratch as _scratch
from mpmd_lab.ops.async_copies import (
    CommitSmem,
    CopyGmemToSmem,
    CopySmemToGmem,
    MultimemStore,
    TmaStore,
    WaitSmemToGmem,
)
from mpmd_lab.ops.base import READ, SYNC, WRITE, Op, StatementOp, TransformOp
from mpmd_lab.ops.compute import AtomicAdd, Compute, Dot, MultimemLoadReduce
from mpmd_lab.ops.control import Loop, When
from mpmd_lab.ops.im2col import Im2Col
from mpmd_lab.ops.peers import ClusterRef, DeviceRef, MulticastRef, Offset, RemoteRef
from mpmd_lab.ops.scratch import (
    ArrayScratch,
    BarrierScratch,
    ClusterBarrierScratch,
    SemaphoreScratch,
    scratch_kind,
)
from mpmd_lab.ops.statements import Add, Copy, Fill, Return
from mpmd_lab.ops.sync import (
    BarrierArrive,
    BarrierArriveAndWait,
    BarrierWait,
    SemaphoreSignal,
    SemaphoreSignalMulticast,
    SemaphoreWait,
)
from mpmd_lab.ops.views import (
    At,
    Bitcast,
    BlockIndex,
    DsIndex,
    PidIndex,
    Reshape,
    Swizzle,
    Tiling,
    Transpose,
)
from pydantic import Discriminator, Field, Tag

#: Every transform op, in the order of docs/SCENARIO.md (the one list: the tuples and
#: the schema's unions are made from it).
AnyTransform = (
    At
    | Bitcast
    | Reshape
    | Transpose
    | Im2Col
    | RemoteRef
    | MulticastRef
    | ClusterRef
    | Tiling
    | Swizzle
)
#: Every statement op (``let`` aside), in the order of docs/SCENARIO.md.
AnyStatementOp = (
    Copy
    | Add
    | Fill
    | TmaStore
    | MultimemStore
    | Return
    | SemaphoreSignal
    | SemaphoreSignalMulticast
    | SemaphoreWait
    | CopyGmemToSmem
    | CopySmemToGmem
    | CommitSmem
    | WaitSmemToGmem
    | BarrierWait
    | BarrierArrive
    | BarrierArriveAndWait
    | Loop
    | When
    | AtomicAdd
    | MultimemLoadReduce
    | Dot
    | Compute
)
TRANSFORM_CLASSES: tuple[type[TransformOp], ...] = get_args(AnyTransform)
STATEMENT_CLASSES: tuple[type[StatementOp], ...] = get_args(AnyStatementOp)

TRANSFORM_OPS: tuple[str, ...] = tuple(c.op_name() for c in TRANSFORM_CLASSES)
STATEMENT_OPS: tuple[str, ...] = tuple(c.op_name() for c in STATEMENT_CLASSES)
BY_OP: dict[str, type[Op]] = {c.op_name(): c for c in (*TRANSFORM_CLASSES, *STATEMENT_CLASSES)}

Transform = Annotated[AnyTransform, Field(discriminator="op")]
Transforms = Annotated[list[Transform], Field(max_length=MAX_TRANSFORMS)]


class Let(Model):
    """``name = ref`` with a transform stack applied first to last: names a view."""

    HELP: ClassVar[str] = "name a view: a ref with transforms"
    FAMILY: ClassVar[str] = "views"

    let: Ident = Field(description="the view's name")
    ref: RefName = Field(description="the ref (a parameter or an earlier view) it is a view of")
    transforms: Transforms = Field([], description="applied first to last")

    BODY: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return "let"

    def exprs(self) -> Any:
        return iter(())

    def label(self) -> str:
        """``p = out.remote_ref(dev+1)``: the view with its transforms (without them a
        peer view read as a plain alias)."""
        return f"{self.let} = {self.ref}" + "".join(f".{t.label()}" for t in self.transforms)

    def ref_fields(self) -> Any:
        return [("ref", self.ref, "view")]


OpStatement = Annotated[AnyStatementOp, Field(discriminator="op")]


def _stmt_kind(v: Any) -> str:
    if isinstance(v, dict):
        return "let" if "let" in v else "op"
    return "let" if isinstance(v, Let) else "op"


Statement = Annotated[
    Annotated[Let, Tag("let")] | Annotated[OpStatement, Tag("op")],
    Discriminator(_stmt_kind),
]


# the recursive and forward references: bodies hold statements, scratch holds transforms.
# The models build their schemas on first use (``defer_build``): the names they refer to
# are put where that build looks them up, the modules that define them.
_control.Statement = Statement
_scratch.Transforms = Transforms

Scratch = Annotated[
    Annotated[ArrayScratch, Tag("array")]
    | Annotated[SemaphoreScratch, Tag("semaphore")]
    | Annotated[BarrierScratch, Tag("barrier")]
    | Annotated[ClusterBarrierScratch, Tag("cluster_barrier")],
    Discriminator(scratch_kind),
]


def palette() -> dict[str, list[tuple[str, str]]]:
    """The Lab's palette: family -> ``(op, help)`` for every op, in registry order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for c in (*TRANSFORM_CLASSES, *STATEMENT_CLASSES):
        out.setdefault(c.FAMILY or "other", []).append((c.op_name(), c.HELP))
    return out


__all__ = [
    "BY_OP",
    "ArrayScratch",
    "AtomicAdd",
    "BarrierArrive",
    "BarrierArriveAndWait",
    "BarrierScratch",
    "BarrierWait",
    "ClusterBarrierScratch",
    "CommitSmem",
    "CopyGmemToSmem",
    "CopySmemToGmem",
    "Compute",
    "Dot",
    "Loop",
    "MultimemLoadReduce",
    "Scratch",
    "SemaphoreScratch",
    "SemaphoreSignal",
    "SemaphoreSignalMulticast",
    "SemaphoreWait",
    "WaitSmemToGmem",
    "When",
    "READ",
    "STATEMENT_CLASSES",
    "STATEMENT_OPS",
    "SYNC",
    "TRANSFORM_CLASSES",
    "TRANSFORM_OPS",
    "WRITE",
    "Add",
    "At",
    "Bitcast",
    "BlockIndex",
    "ClusterRef",
    "Copy",
    "DeviceRef",
    "DsIndex",
    "Fill",
    "Im2Col",
    "Let",
    "MulticastRef",
    "MultimemStore",
    "Offset",
    "OpStatement",
    "PidIndex",
    "RemoteRef",
    "Reshape",
    "Return",
    "Statement",
    "StatementOp",
    "Swizzle",
    "Tiling",
    "TmaStore",
    "Transform",
    "TransformOp",
    "Transforms",
    "Transpose",
]
