"""Scratch kinds: what a kernel allocates besides its arguments and outputs.

- an array (``kind`` absent or ``"array"``): ``plgpu.SMEM`` / ``GMEM`` / ``TMEM`` with
  optional ``tiling`` / ``swizzle`` layout transforms;
- ``"semaphore"``: ``plgpu.SemaphoreType.REGULAR`` (a scalar) or ``REGULAR((n,))``
  (an array of semaphores, indexed with ``at``);
- ``"barrier"``: ``plgpu.Barrier(num_arrivals, num_barriers)`` (completes async copies);
- ``"cluster_barrier"``: ``plgpu.ClusterBarrier(collective_axes, num_barriers)`` (the
  blocks of a cluster meet at it).

Each class says how JAX types the ref it gives the kernel (``ref_info``) and how the
exported source allocates it (``source``).

Where the kernel gets it (``alloc``): ``"scratch_types"`` (the default: an operand of
the kernel, ``plgpu.kernel(..., scratch_types=[...])``), ``"run_scoped"`` (allocated by
the body, ``pl.run_scoped(body, *types)``: the form ``pl.kernel`` takes, since its
mpmd_map lowering has no scratch operands) or, for a semaphore only, ``"get_global"``
(``pl.get_global(plgpu.SemaphoreType.REGULAR)``: one semaphore shared by every block of
the device, which outlives the call).
"""

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import dtypes
from mpmd_lab import layout_rules as L
from mpmd_lab.fields import (
    MAX_BYTES_PER_ARRAY,
    AxisNames,
    Model,
    Shape,
    axes_tuple,
)
from mpmd_lab.shapes import base_info, replace
from pydantic import Field, StrictBool, StrictInt, model_validator

if TYPE_CHECKING:
    from mpmd_lab.ops import Transforms

#: where a kernel gets its scratch (see the module docstring)
ALLOCS = ("scratch_types", "run_scoped", "get_global")
ScopedAlloc = Literal["scratch_types", "run_scoped"]
ALLOC_HELP = (
    "scratch_types: a kernel operand; run_scoped: allocated by the body with pl.run_scoped "
    "(what pl.kernel takes)"
)

#: the dtypes JAX gives semaphore and barrier refs (as the rules and the graph print them)
SEMAPHORE_DTYPE = "semaphore"
BARRIER_DTYPE = "barrier"


def alloc_note(alloc: str) -> str:
    """What a label adds for where the scratch comes from (nothing for scratch_types)."""
    return {"run_scoped": " (run_scoped)", "get_global": " (global)"}.get(alloc, "")


def check_size(shape: list[int], dtype: str) -> None:
    if dtypes.nbytes(shape, dtype) > MAX_BYTES_PER_ARRAY:
        raise ValueError(
            f"shape {shape} of {dtype} needs {dtypes.nbytes(shape, dtype) / 2**30:.0f} GiB, "
            f"more than the {MAX_BYTES_PER_ARRAY // 2**30} GiB any one device holds"
        )


class ArrayScratch(Model):
    """An array in SMEM, GMEM or TMEM (``plgpu.SMEM((8, 128), jnp.float32)``)."""

    KIND: ClassVar[str] = "array"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {}

    kind: Literal["array"] | None = Field(None, exclude=True, description="array (the default)")
    shape: Shape = Field(description="the array's shape")
    dtype: Literal[dtypes.DTYPES] = Field(description="its dtype")  # type: ignore[valid-type]
    memory_space: Literal["SMEM", "GMEM", "TMEM"] = Field(
        "SMEM", description="where it lives: SMEM (per block), GMEM, TMEM"
    )
    transforms: "Transforms" = Field([], description="layout transforms: tiling, swizzle")
    packed: StrictBool | None = Field(None, description="TMEM only")
    collective: StrictBool | None = Field(None, description="TMEM only")
    alloc: ScopedAlloc = Field("scratch_types", description=ALLOC_HELP)

    def interpret_limit(self, interp: str) -> str | None:
        """Why JAX's CPU interpreter ``interp`` cannot allocate it (None: it can)."""
        return self.INTERPRET_LIMITS.get(interp)

    @model_validator(mode="after")
    def _size(self) -> "ArrayScratch":
        check_size(self.shape, self.dtype)
        return self

    @classmethod
    def example(cls, fit: Any = None) -> dict[str, Any]:
        """A new scratch of this kind (the Lab's "+ scratch" and kind switch)."""
        return {"shape": [128], "dtype": "float32", "memory_space": "SMEM"}

    def ref_info(self, name: str) -> Any:
        info = base_info(self.shape, self.dtype, self.memory_space, name)
        # with a layout the kernel gets a TransformedRef (the layout's undo transforms)
        return replace(info, transformed=True) if self.transforms else info

    # JAX's rules for the type (mpmd_lab.layout_rules): errors with the field they are about

    def build_error(self) -> tuple[Any, str] | None:
        """What constructing the type raises (``SwizzleTransform``, ``MemorySpace.__call__``)."""
        return L.scratch_build_error_at(
            dtypes.bits(self.dtype),
            self.memory_space,
            self.transforms,
            self.packed,
            self.collective,
        )

    def type_error(self) -> tuple[Any, str] | None:
        """What computing the physical type raises at trace (the layout stack, in order)."""
        if not self.transforms:  # no layout: the shape is its own physical shape
            return None
        _, e, k = L.physical_shape_at(self.shape, dtypes.bits(self.dtype), self.transforms)
        return None if e is None else (e, f"transforms[{k}]")

    def physical_shape(self) -> tuple[int, ...] | None:
        """The shape the lowering allocates (after tiling), None where the type fails."""
        shape, _ = L.physical_shape(self.shape, dtypes.bits(self.dtype), self.transforms)
        return shape

    def label(self) -> str:
        layout = " ".join(t.label() for t in self.transforms)
        shape = ",".join(map(str, self.shape))
        return (
            f"{dtypes.short(self.dtype)}[{shape}] {self.memory_space}"
            + (f" {layout}" if layout else "")
            + alloc_note(self.alloc)
        )

    def source(self) -> str:
        args = [repr(tuple(self.shape)), dtypes.jnp_expr(self.dtype)]
        ts = [t.scratch_source() for t in self.transforms]
        if ts:
            args.append(f"transforms=({', '.join(ts)},)")
        if self.packed is not None:
            args.append(f"packed={self.packed!r}")
        if self.collective is not None:
            args.append(f"collective={self.collective!r}")
        return f"plgpu.{self.memory_space}({', '.join(args)})"


class _Special(Model):
    """A scratch kind that is no array: no layout transforms, no TMEM options."""

    #: why a CPU interpreter cannot allocate it, by interpreter (as a statement's)
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {}

    def interpret_limit(self, interp: str) -> str | None:
        """Why JAX's CPU interpreter ``interp`` cannot allocate it (None: it can)."""
        return self.INTERPRET_LIMITS.get(interp)

    @property
    def transforms(self) -> list[Any]:
        return []

    @property
    def packed(self) -> None:
        return None

    @property
    def collective(self) -> None:
        return None

    def build_error(self) -> None:
        return None

    def type_error(self) -> None:
        return None


class SemaphoreScratch(_Special):
    """``plgpu.SemaphoreType.REGULAR``: a counter other devices and blocks can signal."""

    KIND: ClassVar[str] = "semaphore"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "gpu": "The GPU interpreter fills scratch with NaN, which a semaphore cannot hold "
        "(NotImplementedError: nan + semaphore).",
    }

    kind: Literal["semaphore"]
    shape: Shape = Field([], description="[] for one semaphore, [n] for an array of them")
    alloc: Literal[ALLOCS] = Field(  # type: ignore[valid-type]
        "scratch_types",
        description=ALLOC_HELP + "; get_global: pl.get_global, one semaphore shared by "
        "every block of the device",
    )

    @property
    def shared(self) -> bool:
        """Shared by every block of the device (``pl.get_global``), not one per block."""
        return self.alloc == "get_global"

    def interpret_limit(self, interp: str) -> str | None:
        if self.shared:  # neither interpreter has a rule for get_global (jax 0.12)
            return GLOBAL_INTERPRET_LIMITS.get(interp)
        return self.INTERPRET_LIMITS.get(interp)

    @classmethod
    def example(cls, fit: Any = None) -> dict[str, Any]:
        return {"kind": "semaphore"}

    @property
    def dtype(self) -> str:
        return SEMAPHORE_DTYPE

    @property
    def memory_space(self) -> str:
        return "GMEM"

    def ref_info(self, name: str) -> Any:
        return base_info(self.shape, SEMAPHORE_DTYPE, "GMEM", name)

    def label(self) -> str:
        shape = f"[{','.join(map(str, self.shape))}]" if self.shape else ""
        return "semaphore" + shape + alloc_note(self.alloc)

    def source(self) -> str:
        if self.shape:
            return f"plgpu.SemaphoreType.REGULAR({tuple(self.shape)!r})"
        return "plgpu.SemaphoreType.REGULAR"


#: what JAX's CPU interpreters raise on ``pl.get_global`` (jax 0.12)
GLOBAL_INTERPRET_LIMITS = {
    "gpu": "The GPU interpreter cannot allocate a pl.get_global semaphore (TypeError: No "
    "ir_type_handler for aval type: AbstractRef).",
    "hlo": "The HLO interpreter cannot allocate a pl.get_global semaphore (AssertionError).",
}


class BarrierScratch(_Special):
    """``plgpu.Barrier``: completes async copies (``copy_gmem_to_smem``) and arrivals."""

    KIND: ClassVar[str] = "barrier"

    kind: Literal["barrier"]
    num_arrivals: Annotated[StrictInt, Field(ge=1, le=4096)] = Field(
        1, description="arrivals that complete one phase"
    )
    num_barriers: Annotated[StrictInt, Field(ge=1, le=64)] = Field(
        1, description="how many barriers (more than 1: index them with at)"
    )
    alloc: ScopedAlloc = Field("scratch_types", description=ALLOC_HELP)

    @classmethod
    def example(cls, fit: Any = None) -> dict[str, Any]:
        return {"kind": "barrier"}

    @property
    def shape(self) -> list[int]:
        return [self.num_barriers] if self.num_barriers > 1 else []

    @property
    def dtype(self) -> str:
        return BARRIER_DTYPE

    @property
    def memory_space(self) -> str:
        return "SMEM"

    def ref_info(self, name: str) -> Any:
        return base_info(self.shape, BARRIER_DTYPE, "SMEM", name)

    def label(self) -> str:
        n = f" x{self.num_barriers}" if self.num_barriers > 1 else ""
        return f"barrier{n} (arrivals {self.num_arrivals})" + alloc_note(self.alloc)

    def source(self) -> str:
        kw = []
        if self.num_arrivals != 1:
            kw.append(f"num_arrivals={self.num_arrivals!r}")
        if self.num_barriers != 1:
            kw.append(f"num_barriers={self.num_barriers!r}")
        return f"plgpu.Barrier({', '.join(kw)})"


class ClusterBarrierScratch(BarrierScratch):
    """``plgpu.ClusterBarrier``: the blocks of a cluster along ``collective_axes`` meet."""

    KIND: ClassVar[str] = "cluster_barrier"

    kind: Literal["cluster_barrier"]  # type: ignore[assignment]
    collective_axes: AxisNames = Field(description="cluster axes whose blocks meet at it")

    @classmethod
    def example(cls, fit: Any = None) -> dict[str, Any]:
        axes = list(getattr(fit, "cluster_axes", None) or ["c"])
        return {"kind": "cluster_barrier", "collective_axes": axes}

    def label(self) -> str:
        n = f" x{self.num_barriers}" if self.num_barriers > 1 else ""
        axes = ",".join(axes_tuple(self.collective_axes))
        return f"cluster barrier{n} over {axes}" + alloc_note(self.alloc)

    def source(self) -> str:
        kw = [f"collective_axes={axes_tuple(self.collective_axes)!r}"]
        if self.num_arrivals != 1:
            kw.append(f"num_arrivals={self.num_arrivals!r}")
        if self.num_barriers != 1:
            kw.append(f"num_barriers={self.num_barriers!r}")
        return f"plgpu.ClusterBarrier({', '.join(kw)})"


SCRATCH_CLASSES = (ArrayScratch, SemaphoreScratch, BarrierScratch, ClusterBarrierScratch)
SCRATCH_KINDS = tuple(c.KIND for c in SCRATCH_CLASSES)


def scratch_kind(v: Any) -> str:
    """The discriminator: ``kind`` (absent: an array)."""
    kind = v.get("kind") if isinstance(v, dict) else getattr(v, "kind", None)
    return kind if kind in SCRATCH_KINDS else "array"


__all__ = [
    "BARRIER_DTYPE",
    "SCRATCH_CLASSES",
    "SCRATCH_KINDS",
    "SEMAPHORE_DTYPE",
    "ALLOCS",
    "ArrayScratch",
    "BarrierScratch",
    "ClusterBarrierScratch",
    "SemaphoreScratch",
    "scratch_kind",
]
