"""gpu-lower rules: what the Mosaic GPU lowering (``jax.export`` for ``cuda``) rejects.

Order as the lowering meets them: scratch through ``pl.kernel`` first; then each
statement's loads and stores in body order (transform handling, peer device ids,
multicast, cluster refs, TMA and multimem stores, splat stores); then layout
inference over the whole kernel; then IR verification (transposed GMEM access).
"""

from __future__ import annotations

import math
from typing import Any

from mpmd_lab import expr as E
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import axes_tuple
from mpmd_lab.ops import Let
from mpmd_lab.ops.control import never_traced
from mpmd_lab.ops.statements import LANES
from mpmd_lab.resolve import Binding, Stmt
from mpmd_lab.shapes import RefInfo
from mpmd_lab.validate.context import Ctx


def check_lower(ctx: Ctx) -> None:
    if ctx.build_failed or ctx.trace_failed:
        return
    s = ctx.s
    c = s.call
    if c.entry == "pl.kernel" and c.scratch:
        name = next(iter(c.scratch))
        ctx.jax(
            "MPMD_GPU_SCRATCH",
            f"call.scratch.{name}",
            "Scratch operands are not supported by the Mosaic GPU mpmd_map lowering",
            fix=Fix(
                description="use plgpu.kernel, which allocates scratch itself",
                edits=[Edit(op="replace", path="call.entry", value="plgpu.kernel")],
            ),
        )
        return
    # errors of later lowering phases, in statement order: layout inference (p2), the
    # Mosaic GPU dialect lowering (p3), IR verification (p4)
    layout: list[tuple[str, str, str, str]] = []
    verify: dict[str, list[tuple[str, str, str, str]]] = {"p1": [], "p3": [], "p4": []}
    if _scratch_lowering(ctx):
        return
    for prog in ctx.programs:
        mesh = c.programs[prog.index].mesh
        if mesh.threads is not None and mesh.threads.count >= 16:
            ctx.jax(
                "GPU_TOO_MANY_BARRIERS",
                f"{prog.path}.mesh.threads.count",
                "Too many CTA barriers requested: 0 requested, but only -1 available "
                "(16 warpgroup barriers and 1 CTA-wide barrier reserved).",
                fix=Fix(
                    description="use at most 15 threads (warpgroups)",
                    edits=[Edit(op="replace", path=f"{prog.path}.mesh.threads.count", value=15)],
                ),
            )
            return
        for st in prog.stmts:
            if _stmt(ctx, st, mesh, layout, verify):
                return
    for phase in (verify["p1"], layout, verify["p3"], verify["p4"]):
        if phase:
            code, path, msg, why = phase[0]
            ctx.jax(code, path, msg, explanation=why)
            return


LAYOUT_MSG = (
    "Failed to infer a possible set of layouts. This should only happen if user-provided "
    "layout casts are unsatisfiable. To dump the constraint system for debugging, use "
    "`MOSAIC_GPU_DUMP_CONSTRAINT_SYSTEM=1`."
)
VERIFY_MSG = (
    "Pallas encountered an internal verification error. Please file a bug at "
    "https://github.com/jax-ml/jax/issues/new/choose. Error details: 'vector.load' op most "
    "minor memref dim must have unit stride"
)


class LowerCtx:
    """What a statement op's ``lower`` rule sees: its refs, and the lowering's checks."""

    __slots__ = ("ctx", "st", "mesh", "layout", "verify")

    def __init__(self, ctx: Ctx, st: Stmt, mesh: Any, layout: list, verify: dict):
        self.ctx, self.st, self.mesh, self.layout, self.verify = ctx, st, mesh, layout, verify

    @property
    def path(self) -> str:
        return self.st.path

    def info(self, field: str) -> RefInfo:
        info = self.st.refs[field].info
        assert info is not None
        return info

    def access(self, field: str, kind: str, check_layout: bool = True) -> bool:
        """A plain load or store through the ref (``ref[...]``)."""
        return _access(
            self.ctx, self.st, field, kind, self.mesh, self.layout, self.verify, check_layout
        )

    def tma(self, src: str, dst: str) -> bool:
        return _tma(self.ctx, self.st, self.info(src), self.info(dst), self.mesh)

    def collective(self, axes: Any, what: str) -> bool:
        return _collective(self.ctx, self.st, axes, what)

    def later(self, phase: str, code: str, path: str, message: str, why: str = "") -> None:
        """An error of a later lowering phase (``p1``: verifying the module the lowering
        rules built, ``p2``: layout and transform inference, ``p3``: dialect lowering,
        ``p4``: verifying the lowered module)."""
        if phase == "p2":
            self.layout.append((code, path, message, why))
        else:
            self.verify[phase].append((code, path, message, why))

    # the lowering rules' own checks, raised where the statement is lowered

    def jax(self, code: str, path: str, message: str, **kw: Any) -> None:
        self.ctx.jax(code, path, message, **kw)

    @property
    def mesh_axes(self) -> tuple[str, ...]:
        return self.ctx.mesh_axes

    def binding(self, field: str) -> Binding:
        return self.st.refs[field]

    def root_space(self, field: str) -> str:
        from mpmd_lab.validate.trace import _root

        return _root(self.ctx, self.st.refs[field])[0]

    def static(self, e: Any) -> bool:
        """The expression is a Python int where this statement is lowered."""
        from mpmd_lab.ops.control import is_static

        return is_static(e, self.st)

    def device_id(self, dev: Any, path: str) -> bool:
        """A device id the lowering cannot resolve against the device mesh."""
        return device_id_problem(self.ctx, dev, path)

    def barrier(self, field: str, method: str) -> bool:
        """A barrier operand: indexed only, one barrier, a barrier's memory (``method``:
        what the lowering calls on it, as its AttributeError names it)."""
        return _barrier(self.ctx, self.st, field, method)

    def multimem_ref(self, field: str) -> bool:
        """A multimem op's ref: indexed only (``allow_peer_refs=False``, no multicast)."""
        b = self.st.refs[field]
        path = _where(self.st, field)
        for _p, t in b.stack:
            if t.op == "multicast_ref":
                self.ctx.jax(
                    "MULTICAST_PLAIN_STORE",
                    path,
                    "Multicast references are not allowed in the lowering of this primitive.",
                    explanation="A multimem op already reaches every device along its axes: "
                    "give it the plain ref, not a multicast view of it.",
                )
                return True
        for _p, t in b.stack:
            if t.op == "remote_ref":
                if device_id_problem(self.ctx, t.device, path):
                    return True
                self.ctx.jax(
                    "MULTIMEM_PEER_REF",
                    path,
                    "Peer device references are not allowed in the lowering of this primitive.",
                )
                return True
        return False

    def gmem_transforms(self, field: str, multicast_ok: bool) -> bool:
        """The GMEM side of a TMA copy: only indexing, peer and multicast transforms."""
        return _gmem_copy_transforms(self.ctx, self.st, field, multicast_ok)


def _scratch_lowering(ctx: Ctx) -> bool:
    """What allocating the scratch at the kernel's start rejects (before any statement):
    a cluster barrier over an axis the cluster lacks."""
    c = ctx.s.call
    for name, sc in c.scratch.items():
        if sc.KIND != "cluster_barrier":
            continue
        cluster = list(c.programs[0].mesh.cluster) if c.programs else []
        for axis in axes_tuple(sc.collective_axes):
            if axis not in cluster:
                ctx.jax(
                    "CLUSTER_REF_UNKNOWN_AXIS",
                    f"call.scratch.{name}.collective_axes",
                    f"Unknown cluster axis {axis}, available axes: {cluster!r}",
                    explanation=f"A cluster barrier meets the blocks of a cluster along "
                    f"cluster axes; {axis!r} is not a cluster axis of the kernel's mesh "
                    f"(cluster axes: {cluster or 'none'}). JAX allocates the barrier when the "
                    "kernel starts, so this fails even if the barrier is never used.",
                    fix=None
                    if not cluster
                    else Fix(
                        description="meet along the kernel's cluster axes",
                        edits=[
                            Edit(
                                op="replace",
                                path=f"call.scratch.{name}.collective_axes",
                                value=cluster,
                            )
                        ],
                    ),
                )
                return True
    return False


def _stmt(ctx: Ctx, st: Stmt, mesh: Any, layout: list, verify: dict) -> bool:
    node = st.node
    if isinstance(node, Let) or not st.ok or never_traced(st, ctx):
        return False
    if any(b.info is None for b in st.refs.values()):
        return False
    return node.lower(LowerCtx(ctx, st, mesh, layout, verify))


def _where(st: Stmt, field: str) -> str:
    return f"{st.path}.{field}"


def _view_path(ctx: Ctx, b: Binding, op: str) -> str:
    """The field path of the first transform of kind ``op`` in the view's stack."""
    if b.kind == "view" and b.stmt >= 0:
        return b.path + ".transforms"
    return b.path


def _access(
    ctx: Ctx,
    st: Stmt,
    field: str,
    kind: str,
    mesh: Any,
    layout: list,
    verify: list,
    check_layout: bool = True,
) -> bool:
    """A plain load or store through a ref view (``ref[...]``)."""
    b = st.refs[field]
    info = b.info
    assert info is not None
    if not info.is_ref:
        return False
    # pass 1 (warpgroup semantics, transposes not yet bubbled): every index, reshape,
    # peer, multicast and cluster step must commute past the transposes and bitcasts
    # before it; only an index commutes past a transpose
    remaining: list[Any] = []
    for path, t in b.stack:
        if t.op in ("transpose", "bitcast"):
            remaining.append(t)
            continue
        for r in reversed(remaining):
            if r.op == "transpose" and t.op == "at":
                continue
            ctx.jax(
                "GPU_TRANSFORMS_UNSUPPORTED",
                path,
                f"({_t_repr(r)}, {_t_repr(t)})",
                explanation=f"The Mosaic GPU lowering cannot move a {t.op} step before an "
                f"earlier {r.op}; reorder the stack so {t.op} comes first.",
            )
            return True
    # pass 2: the steps in order
    for path, t in b.stack:
        if t.op == "at":
            for k, ix in enumerate(t.entries()):
                if ix.kind == "ds" and isinstance(ix.start, E.Const) and ix.start.value < 0:
                    start, size = ix.start.value, ix.size
                    ctx.jax(
                        "AT_NEGATIVE_SLICE",
                        f"{path}.index[{k}]",
                        f"Slice slice({start}, {start + size}, 1) along axis {k} has negative "
                        "bounds",
                    )
                    return True
        elif t.op == "transpose":
            if any(p < 0 for p in t.perm):
                ctx.jax(
                    "TRANSPOSE_NEGATIVE_PERM_GPU",
                    f"{path}.perm",
                    "get_permutation(): incompatible function arguments.",
                    fix=_perm_fix(path, t.perm),
                )
                return True
            if sorted(t.perm) != list(range(len(t.perm))):
                ctx.jax(
                    "TRANSPOSE_INVALID_PERM_GPU",
                    f"{path}.perm",
                    "Invalid permutation when attempting to create an AffineMap",
                )
                return True
        elif t.op == "reshape":
            msg = _strided_reshape(ctx, b, path)
            if msg:
                jt = "ValueError" if msg.startswith("strides=") else "NotImplementedError"
                ctx.jax("GPU_RESHAPE_STRIDED", path, msg, jax_type=jt)
                return True
        elif t.op == "remote_ref":
            if _device_id(ctx, st, field, t.device):
                return True
        elif t.op == "multicast_ref":
            ctx.jax(
                "MULTICAST_PLAIN_STORE",
                _where(st, field),
                "Multicast references are not allowed in the lowering of this primitive.",
                explanation="A multicast view can only be written by a TMA copy "
                "(`tma_store` from SMEM); a plain load or store through it does not lower.",
            )
            return True
        elif t.op == "cluster_ref":
            if _cluster(ctx, st, field, info, mesh):
                return True
    if info.cluster:
        if info.memory_space == "GMEM":
            layout.append(
                (
                    "GPU_CLUSTER_GMEM",
                    _where(st, field),
                    "ValueSite(operation=<UnrealizedConversionCastOp>, "
                    "type=<VariableType.RESULT: 1>, index=0, region_index=None)",
                    "cluster_ref addresses another block's shared memory; a GMEM ref has no "
                    "cluster-peer form, and layout inference fails with an internal KeyError.",
                )
            )
        elif kind == "store" and info.memory_space == "SMEM":
            verify["p3"].append(
                (
                    "GPU_CLUSTER_SMEM_STORE",
                    _where(st, field),
                    "Unsupported memory space: #mosaic_gpu.smem_cluster",
                    "A plain store into another block's SMEM (cluster_ref) does not lower; "
                    "copy with TMA or have the owning block write it.",
                )
            )
    if remaining and any(r.op == "bitcast" for r in remaining):
        ctx.jax(
            "GPU_WG_TRANSFORMS",
            _where(st, field),
            "Transforms are not yet implemented for warpgroup semantics",
            explanation="A plain load or store through a bitcast view is not lowered by "
            "Mosaic GPU (warpgroup semantics). Bitcast the loaded value instead "
            "(lax.bitcast_convert_type).",
        )
        return True
    if info.shape and check_layout and info.size % LANES:
        layout.append(
            (
                "GPU_LAYOUT_INFERENCE",
                _where(st, field),
                LAYOUT_MSG,
                f"{kind} of {info.describe()} ({info.size} elements): the Mosaic GPU lowering "
                f"holds a loaded array in the registers of one warpgroup ({LANES} threads), so "
                f"its size must be a multiple of {LANES}.",
            )
        )
    if info.transposed and info.memory_space == "GMEM" and _minor_moved(ctx, b):
        verify["p4"].append(
            (
                "GPU_VERIFICATION",
                _where(st, field),
                VERIFY_MSG,
                "A transposed GMEM view moves the minor dimension, so a plain load or store "
                "would need a strided minor dimension, which the GPU vector ops cannot do. "
                "Transpose in registers or through SMEM instead.",
            )
        )
    return False


def _t_repr(t: Any) -> str:
    """A transform roughly as JAX prints it in the lowering's NotImplementedError."""
    if t.op == "transpose":
        return f"TransposeTransform(permutation={tuple(t.perm)!r})"
    if t.op == "bitcast":
        return f"BitcastTransform(dtype=dtype('{t.dtype}'))"
    if t.op == "reshape":
        return f"ReshapeTransform(shape={tuple(t.shape)!r})"
    if t.op == "multicast_ref":
        axes = (t.axes,) if isinstance(t.axes, str) else tuple(t.axes)
        return f"MulticastRef(collective_axes={axes!r})"
    if t.op == "cluster_ref":
        return f"ClusterRefTransform(dims={tuple(t.block)!r}, idxs=(...))"
    if t.op == "remote_ref":
        return "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)"
    return "NDIndexer(...)"


def _strided_reshape(ctx: Ctx, b: Binding, path: str) -> str | None:
    """The lowering folds/unfolds contiguous dims only: a reshape of a sliced view fails."""
    from mpmd_lab.shapes import propagate

    key = (b.origin[0] if b.origin else "", tuple(p for p, _ in b.stack))
    cached = ctx.stack_cache.get(key)
    if cached is None:
        # one propagation per (base, stack), reused for every reshape step in it
        root_info = _root_info(ctx, b)
        steps = [] if root_info is None else propagate(root_info, [t for _, t in b.stack])
        at = {p: k for k, (p, _t) in enumerate(b.stack)}
        cached = ctx.stack_cache[key] = (root_info, steps, at)
    root_info, steps, at = cached
    if root_info is None:
        return None
    i = at.get(path)
    if i is not None and i < len(steps):
        st = steps[i]
        before = st.before
        if before.region is None or before.view_dims is None or st.after is None:
            return None
        if _contiguous(before, root_info.shape) or st.after.shape == before.shape:
            return None
        if len(st.after.shape) == 1 and len(before.shape) > 1:
            strides = [math.prod(root_info.shape[k + 1 :]) for k in range(len(root_info.shape))]
            kept = [strides[k] for k in before.view_dims]
            return (
                f"strides={kept}, ref_ty.shape={list(before.shape)}, dim=0, "
                f"fold_rank={len(before.shape)}"
            )
        return (
            f"Can't reshape {list(before.shape)} to {list(st.after.shape)} by composing "
            "independent folds/unfolds."
        )
    return None


def _contiguous(info: RefInfo, root: tuple[int, ...]) -> bool:
    """A view whose elements are one contiguous run of its base."""
    region = info.region
    full = True  # every more-minor dim so far covers its base dim
    for d, base in zip(reversed(region), reversed(root), strict=False):
        if not full and d.size > 1:
            return False
        if d.start != 0 or d.size != base:
            full = False
    return True


def _root_info(ctx: Ctx, b: Binding) -> RefInfo | None:
    from mpmd_lab.shapes import base_info

    o = b.origin[0] if b.origin else ""
    c = ctx.s.call
    if o.startswith("out:"):
        spec, space = c.outputs.get(o[4:]), "GMEM"
    elif o.startswith("scratch:"):
        spec = c.scratch.get(o[8:])
        space = spec.memory_space if spec else "SMEM"
    else:
        spec, space = ctx.s.buffers.get(o), "GMEM"
    if spec is None:
        return None
    return base_info(spec.shape, spec.dtype, space, o)


def _minor_moved(ctx: Ctx, b: Binding) -> bool:
    perm = ctx.net_perm(b)
    return perm is None or (len(perm) > 0 and perm[-1] != len(perm) - 1)


def _cluster(ctx: Ctx, st: Stmt, field: str, info: RefInfo, mesh: Any) -> bool:
    block = dict(info.cluster_block)
    if len(block) != 1:
        for axis in block:
            if axis not in mesh.cluster:
                break
        else:
            ctx.jax(
                "CLUSTER_REF_MULTI_AXIS",
                _where(st, field),
                "Only overriding a single cluster axis is supported for now.",
            )
            return True
    for axis in block:
        if axis not in mesh.cluster:
            ctx.jax(
                "CLUSTER_REF_UNKNOWN_AXIS",
                _where(st, field),
                f"Unknown cluster axis {axis}, available axes: {list(mesh.cluster)!r}",
            )
            return True
    return False


def _device_id(ctx: Ctx, st: Stmt, field: str, dev: Any) -> bool:
    return device_id_problem(ctx, dev, _where(st, field))


def device_id_problem(ctx: Ctx, dev: Any, path: str) -> bool:
    """What the lowering's ``device_id_to_logical`` rejects in a device id (``remote_ref``,
    ``semaphore_signal``): one flat id on a device mesh of another rank (none, or more
    than one axis), or a mapping that names an axis the device mesh lacks."""
    from mpmd_lab.ops.peers import resolve_device

    axes = ctx.mesh_axes
    dref = resolve_device(dev)
    if dref.linear is not None:
        if len(axes) != 1:
            ctx.jax(
                "DEVICE_ID_RANK",
                path,
                "Number of device ids must match the number of mesh axes, but got 1 ids for a "
                f"{len(axes)}D mesh.",
            )
            return True
        return False
    unknown = [(a, e) for a, e in dref.coords if a not in axes]
    if unknown:
        # a literal is a weakly typed int32 to JAX, an axis-index expression is not
        inner = ", ".join(
            f"{a!r}: JitTracer({'~' if e.is_const else ''}int32[])" for a, e in unknown
        )
        ctx.jax(
            "DEVICE_ID_UNKNOWN_AXIS",
            path,
            f"Unrecognized axes in device_id: {{{inner}}}",
        )
        return True
    return False


def _tma(ctx: Ctx, st: Stmt, src: RefInfo, dst: RefInfo, mesh: Any) -> bool:
    """A TMA store (``copy_smem_to_gmem``): the GMEM side's transforms."""
    return _gmem_copy_transforms(ctx, st, "dst", multicast_ok=True)


def _gmem_copy_transforms(ctx: Ctx, st: Stmt, field: str, multicast_ok: bool) -> bool:
    """``_extract_gmem_copy_params``: the GMEM ref of a TMA copy may be indexed, a peer's
    (its device id resolved) or, for a store, multicast to the whole device mesh."""
    b = st.refs[field]
    path = _where(st, field)
    for _p, t in b.stack:
        if t.op == "at":
            continue
        if t.op == "remote_ref":
            if device_id_problem(ctx, t.device, path):
                return True
            continue
        if t.op == "multicast_ref":
            if not multicast_ok:
                ctx.jax(
                    "MULTICAST_TMA_LOAD",
                    path,
                    "Multicast refs are not supported by this primitive.",
                    explanation="A TMA load reads one device's memory: it cannot read "
                    "through a multicast view. Load from a peer (remote_ref), or reduce over "
                    "every device with multimem_load_reduce.",
                )
                return True
            if not ctx.s.device_mesh:
                ctx.jax(
                    "MULTICAST_NO_DEVICE_MESH",
                    path,
                    "JAX device mesh is required by multicast copies, but not defined. Use "
                    "jax.set_mesh.",
                )
                return True
            if set(t.axis_names) != set(ctx.mesh_axes):
                ctx.jax(
                    "COLLECTIVE_AXES_NOT_ALL",
                    path,
                    "Only collective_axes that include all JAX device mesh  axes are "
                    f"supported, but got {tuple(t.axis_names)!r}. Make sure to pass "
                    f"collective_axes={ctx.mesh_axes!r}",
                    fix=_all_axes_fix(ctx, b),
                )
                return True
            continue
        ctx.jax(
            "TMA_GMEM_TRANSFORM",
            path,
            "Non-indexing transforms on GMEM refs are not implemented.",
            explanation=f"The GMEM side of a TMA copy is addressed by indexing only; this "
            f"view applies {t.op}. Copy the whole (indexed) ref and transform the SMEM side "
            "or the value instead.",
        )
        return True
    return False


def _barrier(ctx: Ctx, st: Stmt, field: str, method: str) -> bool:
    """A barrier operand as the lowering takes it: indexed only, a barrier's memory, one
    barrier (not a whole array of them)."""
    b = st.refs[field]
    info = b.info
    assert info is not None
    path = _where(st, field)
    for p, t in b.stack:
        if t.op != "at":
            ctx.jax("BARRIER_TRANSFORM", p, "Barrier does not support arbitrary transforms")
            return True
    if info.dtype != "barrier":
        ctx.jax(
            "BARRIER_NOT_A_BARRIER",
            path,
            f"'jaxlib.mlir._mlir_libs._mlir.ir.OpResult' object has no attribute '{method}'",
            explanation="The ref is not a barrier: a `plgpu.Barrier` or `ClusterBarrier` "
            "scratch is (`kind: barrier`); an SMEM array cannot stand in for one.",
        )
        return True
    if info.size > 1:
        ctx.jax(
            "BARRIER_NOT_SINGLE",
            path,
            f"Operation is only valid for a single barrier, but barrier ref contains "
            f"{info.size}. Individual barriers can be accessed by indexing into the ref.",
            fix=_index_fix(ctx, st, field),
        )
        return True
    return False


def _index_fix(ctx: Ctx, st: Stmt, field: str) -> Fix | None:
    """Use the first barrier of the array: a view ``name_0 = name.at[0]`` before ``st``."""
    b = st.refs[field]
    if b.kind != "scratch" or not st.path.rsplit("[", 1)[-1].rstrip("]").isdigit():
        return None
    name = b.name
    body, _, idx = st.path.rpartition("[")
    view = f"{name}_0"
    return Fix(
        description=f"index the barrier array: {view} = {name}.at[0]",
        edits=[
            Edit(
                op="add",
                path=f"{body}[{idx}",
                value={"let": view, "ref": name, "transforms": [{"op": "at", "index": [0]}]},
            ),
            Edit(op="replace", path=f"{body}[{int(idx.rstrip(']')) + 1}].{field}", value=view),
        ],
    )


def _all_axes_fix(ctx: Ctx, b: Binding) -> Fix | None:
    from mpmd_lab.ops import MulticastRef

    for _k, t in enumerate(ctx.stack(b)):
        if isinstance(t[1], MulticastRef):
            return Fix(
                description="multicast over every device-mesh axis",
                edits=[Edit(op="replace", path=f"{t[0]}.axes", value=list(ctx.mesh_axes))],
            )
    return None


def _collective(ctx: Ctx, st: Stmt, axes: Any, what: str) -> bool:
    mesh_axes = ctx.mesh_axes
    if not ctx.s.device_mesh:
        ctx.jax(
            "MULTICAST_NO_DEVICE_MESH",
            f"{st.path}.axes",
            f"JAX device mesh is required by {what}, but not defined.",
        )
        return True
    # the generated call passes a str as is: JAX compares set(axes), so "dev" is {'d','e','v'}
    got = set(axes) if isinstance(axes, str) else set(axes)
    if got != set(mesh_axes):
        shown = repr(axes) if not isinstance(axes, str) else axes
        if isinstance(axes, list):
            shown = repr(tuple(axes))
        ctx.jax(
            "COLLECTIVE_AXES_NOT_ALL",
            f"{st.path}.axes",
            f"Only collective_axes that include all JAX device mesh ({mesh_axes!r}) axes are "
            f"supported, but got {shown}",
            fix=Fix(
                description="pass every device-mesh axis, as a list",
                edits=[Edit(op="replace", path=f"{st.path}.axes", value=list(mesh_axes))],
            ),
        )
        return True
    return False


def _perm_fix(path: str, perm: list[int]) -> Fix | None:
    n = len(perm)
    fixed = [p % n for p in perm]
    if sorted(fixed) != list(range(n)):
        return None
    return Fix(
        description=f"write the permutation with non-negative axes: {fixed}",
        edits=[Edit(op="replace", path=f"{path}.perm", value=fixed)],
    )
