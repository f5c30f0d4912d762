"""``plgpu.im2col_ref``: the windows of a channels-last GMEM ref, for TMA loads.

Read off jax 0.12 ``pallas.mosaic_gpu.core`` (``im2col_ref``, ``Im2ColTransform``) and
``primitives`` (``copy_gmem_to_smem``, ``_extract_im2col_copy_params``), and checked by
tracing and lowering real kernels (tests/test_im2col.py). For ``ref`` of shape
``(N, *spatial_in, C)`` (1 to 3 spatial dims) the view has shape
``(N * prod(spatial_out), *window_shape, C)``, ``spatial_out[i] = spatial_in[i] +
pad_lo + pad_hi - window_shape[i] + 1``: row ``r`` is one window of the zero-padded
input. Only ``copy_gmem_to_smem`` reads it, indexed as ``view.at[rows, *offsets,
channels]``; a kernel of ``plgpu.kernel`` lowers with warpgroup semantics, where JAX
0.12 does not lower an im2col copy at all.
"""

import math
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import layout_rules as L
from mpmd_lab.fields import MAX_DIM, MAX_RANK, Path, SmallInt, sub_path
from mpmd_lab.ops.base import (
    AccessLowering,
    Actor,
    ArrayError,
    ArrayValue,
    Fit,
    GmemCopyLowering,
    InterpLimit,
    SourceWriter,
    TraceContext,
    TransformOp,
    ViewContext,
)
from mpmd_lab.shapes import RefInfo, StepError, err, view_info
from pydantic import Field, StrictInt

if TYPE_CHECKING:
    from mpmd_lab.memory import View

#: ``_IM2COL_INDEXING_ERROR``: how an im2col view must be indexed for a TMA load
INDEXING = (
    "im2col_ref must be indexed with a unit-stride row slice, scalar filter offsets for each "
    "window dimension, and a unit-stride channel slice."
)


class Im2Col(TransformOp):
    """``plgpu.im2col_ref(ref, window_shape=..., padding=...)``: one row per window."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "im2col_ref", "window_shape": [3, 3], "padding": [[1, 1], [1, 1]]}

    HELP: ClassVar[str] = "the windows of an (N, *spatial, C) GMEM ref: plgpu.im2col_ref"
    FAMILY: ClassVar[str] = "views"
    NEEDS_TYPE: ClassVar[bool] = True  # (im2col_ref computes the view's type at once)
    HLO_INTERP_CLASS: ClassVar[str | None] = "jax._src.pallas.mosaic_gpu.core.Im2ColTransform"

    op: Literal["im2col_ref"]
    window_shape: Annotated[
        list[Annotated[StrictInt, Field(ge=0, le=MAX_DIM)]], Field(max_length=MAX_RANK)
    ] = Field(description="the window's size along each spatial dim (1 to 3 of them)")
    padding: (
        Annotated[
            list[Annotated[list[SmallInt], Field(min_length=2, max_length=2)]],
            Field(max_length=MAX_RANK),
        ]
        | None
    ) = Field(None, description="[pad_lo, pad_hi] zeros per spatial dim (null: none)")

    @property
    def pads(self) -> tuple[tuple[int, int], ...]:
        """The padding as JAX holds it (none: zeros)."""
        if self.padding is None:
            return ((0, 0),) * len(self.window_shape)
        return tuple((lo, hi) for lo, hi in self.padding)

    def jax_repr(self) -> str:
        """The transform as JAX prints it."""
        return f"Im2ColTransform(window_shape={tuple(self.window_shape)!r}, padding={self.pads!r})"

    def label(self) -> str:
        pad = "" if not any(lo or hi for lo, hi in self.pads) else f" pad {list(self.pads)}"
        return f"im2col({'x'.join(map(str, self.window_shape))}{pad})"

    def source(self, base: str, g: SourceWriter) -> str:
        pad = "" if self.padding is None else f", padding={self.pads!r}"
        return f"plgpu.im2col_ref({base}, window_shape={tuple(self.window_shape)!r}{pad})"

    # ------------------------------------------------------------ JAX's type rule

    def _window_error(self) -> str | None:
        """``Im2ColTransform.__post_init__``: the window and padding fit the TMA's range."""
        n = len(self.window_shape)
        if n not in (1, 2, 3):
            return (
                f"im2col_ref requires 1, 2, or 3 spatial dimensions, got {n} "
                f"({tuple(self.window_shape)!r})"
            )
        pads = self.pads
        if len(pads) != n:
            return f"Expected {n} (pad_lo, pad_hi) pairs in padding, got {len(pads)}"
        max_window = 1 << (16 // n)
        max_bound = max_window // 2
        for i, (k, (lo, hi)) in enumerate(zip(self.window_shape, pads, strict=True)):
            if not 1 <= k <= max_window:
                return (
                    f"window_shape[{i}] must be in [1, {max_window}] with {n} spatial dims, got {k}"
                )
            if lo < 0 or hi < 0:
                return f"padding[{i}] must be non-negative, got ({lo}, {hi})"
            if lo > max_bound:
                return (
                    f"padding[{i}][0] must be at most {max_bound} with {n} spatial dims, got {lo}"
                )
            low, high = max(0, k - 1 - max_bound), k - 2 + max_bound
            if not low <= hi <= high:
                return (
                    f"padding[{i}][1] must be in [{low}, {high}] with window_shape[{i}]={k} "
                    f"and {n} spatial dims, got {hi}"
                )
        return None

    def spatial_out(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Window positions along each spatial dim of a ref of ``shape``."""
        return tuple(
            s + lo + hi - k + 1
            for s, k, (lo, hi) in zip(shape[1:-1], self.window_shape, self.pads, strict=True)
        )

    def view_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The view's shape over a ref of ``shape`` (one that fits: ``_shape_error``)."""
        return (math.prod((shape[0], *self.spatial_out(shape))), *self.window_shape, shape[-1])

    def _shape_error(self, shape: tuple[int, ...]) -> str | None:
        """``Im2ColTransform.transform_type``: an ``(N, *spatial, C)`` ref with windows."""
        n = len(self.window_shape)
        if len(shape) != n + 2:
            return (
                f"im2col_ref with {n} spatial dims requires a rank-{n + 2} (N, *spatial, C) "
                f"reference, got shape {tuple(shape)!r}"
            )
        for i, s in enumerate(self.spatial_out(shape)):
            if s < 1:
                return (
                    f"im2col_ref spatial dim {i} has non-positive output size {s} for input "
                    f"size {shape[i + 1]}, window size {self.window_shape[i]}, and padding "
                    f"{self.pads[i]!r}"
                )
        return None

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        if ref.transformed:
            e = err(
                "IM2COL_TRANSFORMED_REF",
                "TypeError",
                "im2col_ref must be applied to an untransformed reference",
            )
            return None, e, ()
        message = self._window_error()
        if message is not None:
            return None, err("IM2COL_WINDOW", "ValueError", message), ()
        message = self._shape_error(ref.shape)
        if message is not None:
            return None, err("IM2COL_SHAPE", "ValueError", message), ()
        return view_info(ref, self.view_shape(ref.shape), None, None), None, ()

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """``im2col_ref`` of a plain array: no ref to view (``get_ref_and_transforms``)."""
        value = f"JitTracer({a.dtype}[{','.join(map(str, a.shape))}])"
        return (
            "IM2COL_NOT_A_REF",
            "ValueError",
            f"Can only call `im2col_ref` on a `Ref`: {value}.",
        )

    # ------------------------------------------------------------ its uses

    def trace_gmem_load(self, t: TraceContext, field: str, pos: int) -> bool:
        """``copy_gmem_to_smem`` takes an im2col view indexed only, down to 2 dims."""
        after = t.binding(field).stack[pos + 1 :]
        others = [step for _, step in after if not step.INDEXES]
        if others:
            got = ", ".join(step.label() for step in others)
            t.jax(
                "IM2COL_NOT_INDEXED",
                sub_path(t.path, field),
                f"Only indexing is supported on im2col-transformed refs, got [{got}]",
            )
            return True
        if len(t.info(field).shape) != 2:
            t.jax("IM2COL_INDEXING", sub_path(t.path, field), INDEXING)
            return True
        return False

    def stops_access(self) -> bool:
        return True

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """A plain load or store: the lowering has no rule for the transform."""
        a.jax(
            "GPU_TRANSFORMS_UNSUPPORTED",
            a.where,
            f"({self.jax_repr()}, NDIndexer(...))",
            explanation="An im2col view is read by a TMA load only "
            "(`copy_gmem_to_smem` into SMEM); a plain load or store through it does not lower.",
        )
        return True

    def lower_gmem_copy(self, a: GmemCopyLowering, path: Path) -> bool:
        """A TMA load of windows: not under warpgroup semantics (``plgpu.kernel``'s)."""
        if not a.load:
            return super().lower_gmem_copy(a, path)
        a.jax(
            "IM2COL_WARPGROUP",
            a.where,
            "im2col copies are not supported under Warpgroup lowering semantics.",
        )
        return True

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        if interp == "gpu":
            return self.gpu_interp_limit(L.interpret_transform_message(self.jax_repr()))
        return super().interpret_limit(interp)

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        """Row ``r`` of the view: the window at ``unravel(r, (N, *spatial_out))``."""
        import numpy as np

        if any(lo or hi for lo, hi in self.pads):
            sim.fail(
                "SIM_UNSUPPORTED",
                path,
                "im2col_ref's padding reads zeros outside the ref; the simulator's views "
                "address the ref's own elements only",
            )
        shape = v.offsets.shape[:-1]
        message = self._window_error() or self._shape_error(shape)
        if message is not None:
            sim.fail("IM2COL_SHAPE", path, message)
        spatial = len(self.window_shape)
        grid = np.indices((shape[0], *self.spatial_out(shape), *self.window_shape))
        starts, offsets = grid[1 : 1 + spatial], grid[1 + spatial :]
        index = (grid[0], *(s + k for s, k in zip(starts, offsets, strict=True)))
        windows = v.offsets[index]  # (N, *spatial_out, *window, C, bytes)
        return v.with_(offsets=windows.reshape(-1, *windows.shape[-(spatial + 2) :]))


__all__ = ["Im2Col"]
