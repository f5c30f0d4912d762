"""gpu-lower rules: what the Mosaic GPU lowering (``jax.export`` for ``cuda``) rejects.

Order as the lowering meets them: scratch through ``pl.kernel`` first; then what
``plgpu.kernel`` allocates (GMEM scratch, the SMEM it needs, barriers); then each
statement's loads and stores in body order (transform handling, peer device ids,
multicast, cluster refs, TMA and multimem stores, splat stores); then layout
inference over the whole kernel (deriving each op's constraints in order, solving them,
writing the solution back); then the dialect lowering (TMA copies); then IR
verification (transposed GMEM access). The layout rules of views and scratch are JAX's
own, in ``mpmd_lab.layout_rules`` (where ``LOWERING_PHASE`` says which phase raises
each code).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import Path, axes_tuple, format_path, sub_path
from mpmd_lab.ops import ClusterBarrierScratch, Let
from mpmd_lab.ops.base import READ, WRITE, StatementOp
from mpmd_lab.ops.control import is_static
from mpmd_lab.ops.peers import resolve_device
from mpmd_lab.ops.statements import LANES
from mpmd_lab.plan import Binding, Stmt, along_chain, expr_ops, own_steps, sharded_operand
from mpmd_lab.shapes import RefInfo
from mpmd_lab.validate import fixes_for
from mpmd_lab.validate.context import Ctx
from mpmd_lab.validate.trace import (
    _root,
    int_index_groups,
    load_shapes,
    loop_dtypes,
    report_not_manual,
    short_loads,
)


def check_lower(ctx: Ctx) -> None:
    if ctx.build_failed or ctx.trace_failed:
        return
    s = ctx.s
    c = s.call
    if s.device_mesh is not None and s.run.shard_map is False and sharded_operand(ctx.r, True):
        # (mpmd_map's abstract eval again, once the Refs are discharged into arrays)
        report_not_manual(ctx, "gpu-lower")
        return
    operands = [n for n, x in c.scratch.items() if x.alloc == "scratch_types"]
    if c.entry == "pl.kernel" and operands:
        name = operands[0]
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
    if c.scratch and _scratch_lowering(ctx):
        return
    if c.entry == "plgpu.kernel" and _resources(ctx):
        return
    low = LowerCtx(ctx)
    for prog in ctx.programs:
        mesh = c.programs[prog.index].mesh
        if mesh.threads is not None and mesh.threads.count >= 16:
            ctx.jax(
                "GPU_TOO_MANY_BARRIERS",
                (*prog.path, "mesh", "threads", "count"),
                "Too many CTA barriers requested: 0 requested, but only -1 available "
                "(16 warpgroup barriers and 1 CTA-wide barrier reserved).",
                fix=Fix(
                    description="use at most 15 threads (warpgroups)",
                    edits=[
                        Edit(
                            op="replace",
                            path=format_path((*prog.path, "mesh", "threads", "count")),
                            value=15,
                        )
                    ],
                ),
            )
            return
        if c.captures and _captured_scalar(ctx, prog):
            return
        if _argument_scalar(ctx):
            return
        low.mesh = mesh
        # (never_traced and whether a loop around loads its bounds read only the
        # statement's scope, which the statements of one body share: asked once per run
        # of them)
        scope, skip, scope_loads = None, False, False
        for st in prog.stmts:
            node = st.node
            # (``type() is``: Let has no subclasses, and a failing ``isinstance`` of a
            # model class is a slow ABC check)
            if not st.ok:
                continue
            if st.scope is not scope:
                scope, skip = st.scope, ctx.never_traced(st)
                scope_loads = bool(scope) and _scope_loads(scope)
            if skip:
                continue
            if (st.loads or scope_loads) and _index_dtype(ctx, st):
                return
            if type(node) is Let or not st.typed:
                continue  # (a ref of no type: a tuple used as a ref, or a failed view)
            low.st = st
            if node.lower(low):
                return
    if low.found:
        code, path, msg, why, *jt = low.first_later()
        ctx.jax(code, path, msg, explanation=why, stage="gpu-lower", jax_type=(jt or [None])[0])


LAYOUT_MSG = L.layout_inference_error().message


def _mlir_op(e: E.Expr) -> str:
    """The MLIR operation that made a float index: a load, the arithmetic on one, or a
    loop's counter (``lower + i``: an ``addf``)."""
    if isinstance(e, E.Load):
        return "memref.load"
    if isinstance(e, E.Neg):
        return "arith.negf"
    if isinstance(e, E.BinOp):
        return {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf"}.get(e.op, "arith")
    return "arith.addf" if isinstance(e, E.Name) else "arith"


#: MLIR's names of the float types a loaded index may have
_MLIR_FLOAT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def _index_dtype(ctx: Ctx, st: Stmt) -> bool:
    """An index loaded from a float ref (``x.at[f_ref[0]]``, ``pl.ds(f_ref[0], n)``):
    JAX traces it, and the Mosaic GPU lowering refuses the float value as an index
    (INDEX_DTYPE; its message prints the MLIR value, here with its operands elided)."""

    names = loop_dtypes(st)
    for prefix, op in expr_ops(st.node):
        if _index_broadcast(ctx, st, op, prefix):
            return True
        for field, e in op.exprs():
            loads = "load" in e.calls()
            if not loads and not (names and not names.keys().isdisjoint(e.names())):
                continue
            path = sub_path(st.path, prefix + field)
            if loads and _vector_index(ctx, st, op, field, e, path):
                return True
            # the field itself where it is an index; in any field, what indexes a load
            # (``off_ref[f_ref[0]]`` in a condition: the load's index is lowered as one)
            index = [e] if op.expr_kind(field) == "index" else []
            if loads:
                index += [ix for r in E.data_reads(e) if isinstance(r, E.Load) for ix in r.index]
            for ix in index:
                if _float_index(ctx, path, ix, st.load_dtype, names, st.loads):
                    return True
    return False


#: JAX's error for the ``broadcast_to`` primitive (the same under ``pl.kernel`` and
#: ``plgpu.kernel``, with or without threads: both lower it with warpgroup semantics)
_BROADCAST_TO = (
    "Unimplemented primitive in Pallas Mosaic GPU lowering: broadcast_to for lowering "
    "semantics LoweringSemantics.Warpgroup and user thread semantics "
    "PrimitiveSemantics.Warpgroup. Please file an issue at "
    "https://github.com/jax-ml/jax/issues/new/choose."
)


def _index_broadcast(ctx: Ctx, st: Stmt, op: Any, prefix: str) -> bool:
    """Integer indices of different shapes: an array (a load with fewer indices than its
    ref has dims, ``E.value_shape``) next to a scalar, as the integer entries of a view
    (``x_ref.at[ids_ref[...], 0]``) or of a load (``t_ref[ids_ref[...], 0]``). JAX's
    ``NDIndexer`` broadcasts each index to their common shape with the ``broadcast_to``
    primitive where the view or the load is made (a view never used too), and the
    Mosaic GPU lowering has no rule for it (GPU_INDEX_BROADCAST): before the gather
    itself (GPU_GATHER_LOAD), which an array alone as the integer index reaches."""
    shape_of = load_shapes(st)
    for group in int_index_groups(op):
        shapes = [E.value_shape(i, shape_of) for _, _, i in group]
        if len(shapes) < 2 or not any(shapes):
            continue
        common = E.broadcast_shapes(tuple(shapes))
        bent = next((g for g, sh in zip(group, shapes, strict=True) if sh != common), None)
        if bent is not None:
            path = sub_path(st.path, prefix + bent[0])
            # a load's short index loaded at 0 (a view's: another shape, no fix)
            fix = None
            if bent[1] is not None:
                fix = fixes_for.index_loads(ctx.s, [(path, bent[1], shape_of), *short_loads(ctx)])
            ctx.jax(
                "GPU_INDEX_BROADCAST",
                path,
                _BROADCAST_TO,
                stage="gpu-lower",
                jax_type="NotImplementedError",
                fix=fix,
            )
            return True
    return False


def _vector_index(ctx: Ctx, st: Stmt, op: Any, field: str, e: E.Expr, path: Path) -> bool:
    """A load with fewer indices than its ref has dims (``off_ref[...]`` of a 1-D table)
    is an array (``E.value_shape``): JAX traces it as a device id or a ``pl.ds`` start,
    and the Mosaic GPU lowering refuses it there: a device id must be an i32 scalar (a
    bare ``assert`` in ``LaunchContext._get_parameter_address_on_peer``: JAX_ASSERTION),
    an index an integer scalar (INDEX_DTYPE, the array's ``vector_load`` printed), a
    semaphore wait's value an i32 (WAIT_VALUE_SHAPE; a signal's count is a constant only,
    GPU_TRACED_CONSTANT). Before any of those, a load indexed by an array
    (``off_ref[off_ref[...]]``: a gather) is refused where it is lowered
    (GPU_GATHER_LOAD). An array as an integer ``.at[...]`` entry makes a gather view
    (``At.gathered``), whose load or store is refused (``LowerCtx.access``)."""
    kind = op.expr_kind(field)
    if kind == "count" and isinstance(op, StatementOp) and op.SYNC_ROLE == "wait":
        kind = "wait"  # (a signal's count: a constant only, GPU_TRACED_CONSTANT in its lower)
    if kind not in ("device", "index", "wait", "count"):
        return False
    shape_of = load_shapes(st)
    shape = E.value_shape(e, shape_of)
    if not shape or (kind == "index" and any(e is x for x in op.int_indices())):
        return False
    fix = fixes_for.index_loads(ctx.s, [(path, e, shape_of), *short_loads(ctx)])
    if any(E.value_shape(i, shape_of) for r in E.data_reads(e) for i in getattr(r, "index", ())):
        ctx.jax(
            "GPU_GATHER_LOAD",
            path,
            "int_indexer_shape non-empty",
            stage="gpu-lower",
            jax_type="NotImplementedError",
            fix=fix,
        )
        return True
    if kind == "count":
        return False  # (a signal's count: GPU_TRACED_CONSTANT, in the signal's lower)
    if kind == "device":
        why = (
            "JAX asserts that a device id is an i32 scalar when it lowers the peer view or "
            f"the signal; {e.label()} loads an array of shape {shape!r}"
        )
        ctx.jax(
            "JAX_ASSERTION", path, "", stage="gpu-lower", jax_type="AssertionError",
            explanation=why, fix=fix,
        )  # fmt: skip
        return True
    dtype = E.value_dtype(e, st.load_dtype) or "int32"
    t = _MLIR_FLOAT.get(dtype) or f"i{dtypes.bits(dtype)}"
    dims = "x".join(map(str, shape))
    if kind == "wait":  # (Mosaic GPU's semaphore wait takes an i32 value)
        msg = f"Expected a i32 value, got vector<{dims}x{t}>"
        ctx.jax("WAIT_VALUE_SHAPE", path, msg, stage="gpu-lower", jax_type="ValueError", fix=fix)
        return True
    ctx.jax(
        "INDEX_DTYPE",
        path,
        f'Unsupported index: OpResult(%... = "{_mlir_vector_op(e)}"(...) : (...) -> '
        f"vector<{dims}x{t}>) of type <class 'jaxlib.mlir._mlir_libs._mlir.ir.OpResult'>",
        stage="gpu-lower",
        jax_type="ValueError",
        fix=fix,
    )
    return True


def _mlir_vector_op(e: E.Expr) -> str:
    """The MLIR operation that made an array index: a load of the leftover dims."""
    return "mosaic_gpu.vector_load" if isinstance(e, E.Load) else "arith"


def _scope_loads(scope: tuple[Stmt, ...]) -> bool:
    """A loop or condition around a statement loads from memory (its bounds)."""
    return any(s.loads for s in scope)


def _float_index(
    ctx: Ctx,
    path: Path,
    e: E.Expr,
    dtype_of: Callable[[str], str],
    names: dict[str, str],
    loads: dict[str, Binding],
) -> bool:
    dtype = E.value_dtype(e, dtype_of, names)
    if dtype is None or not dtypes.is_float(dtype):
        return False
    what = _mlir_op(e)
    t = _MLIR_FLOAT.get(dtype, dtype)
    ctx.jax(
        "INDEX_DTYPE",
        path,
        f'Unsupported index: OpResult(%... = "{what}"(...) : (...) -> {t}) of type '
        "<class 'jaxlib.mlir._mlir_libs._mlir.ir.OpResult'>",
        stage="gpu-lower",
        jax_type="ValueError",
        fix=fixes_for.loaded_as_int32(ctx.s, e, loads, dtypes.is_float),
    )
    return True


def _resources(ctx: Ctx) -> bool:
    """What ``plgpu.kernel`` allocates before any statement is lowered: the resource
    estimate of ``run_scoped`` takes SMEM, TMEM, barriers and GMEM semaphores only
    (``layout_rules.gmem_scratch_error``), then Mosaic GPU checks the SMEM it needs
    against the GPU's (``layout_rules.smem_capacity_error``, physical shapes)."""
    c = ctx.s.call
    # (one walk of the scratch: SMEM arrays and barriers counted, a GMEM array's error
    # raised on the way, as the estimate's walk before the capacity check raises it)
    smem: list[tuple[Any, int, Any]] = []
    barriers = 0
    for name, sc in c.scratch.items():
        kind = sc.KIND
        if kind in ("barrier", "cluster_barrier"):
            barrier: Any = sc  # (a barrier scratch, by its KIND: no isinstance to narrow)
            barriers += barrier.num_barriers
            continue
        if kind != "array":  # semaphores live in GMEM: the estimate knows them
            continue
        space = sc.memory_space
        if space == "SMEM":  # (gmem_scratch_error is about GMEM arrays only)
            smem.append((sc.shape, dtypes.bits(sc.dtype), sc.transforms))
            continue
        e = L.gmem_scratch_error(c.entry, [(space, sc.dtype)])
        if e is not None:
            ctx.raised(
                e,
                f"call.scratch.{name}.memory_space",
                fix=Fix(
                    description=f"allocate {name!r} in SMEM (or pass a GMEM buffer in)",
                    edits=[
                        Edit(op="replace", path=f"call.scratch.{name}.memory_space", value="SMEM")
                    ],
                ),
            )
            return True
    e = L.smem_capacity_error(smem, barriers)
    if e is not None:
        ctx.raised(e, "call.scratch")
        return True
    return False


class LowerCtx:
    """What a statement op's ``lower`` rule sees: its refs (``st``, the statement being
    lowered, in ``mesh``), and the lowering's checks. One per check: ``found`` holds
    the errors of later phases with their phase's rank (``later_error``), and each
    view's ``_View`` and memref are folded once per binding (``view``, ``memref``)."""

    __slots__ = ("ctx", "layouts", "st", "mesh", "found", "_roots", "_views", "_memrefs")

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        #: whether a scratch of the call has a layout (only such a root is tiled SMEM)
        self.layouts = any(sc.transforms for sc in ctx.s.call.scratch.values())
        #: errors of later lowering phases, in statement order, each with its phase's
        #: rank (``_RANK``) in the order they run: verifying the module the lowering rules
        #: built, layout inference (deriving constraints, solving them, finding none,
        #: assigning the solution), the Mosaic GPU dialect lowering (p3), IR verification
        #: (p4)
        self.found: list[tuple[int, tuple[Any, ...]]] = []
        self.st: Stmt
        self.mesh: Any
        # (each fold's memo, by root's origin or by binding; the folds are bound methods:
        # one step of a fold is a plain method call). The per-binding ones are the plan's
        # (``Plan.folds``: a fix's candidate starts with the original's answers, a view's
        # answer being its stack's and root's alone)
        self._roots: dict[str, _View] = {}
        self._views: dict[int, tuple[Binding, _View]] = ctx.r.folds["lower.view"]
        self._memrefs: dict[int, tuple[Binding, Any]] = ctx.r.folds["lower.memref"]

    def view(self, b: Binding) -> _View:
        """``b``'s ``_View``, once per binding from its source view's answer and its own
        steps (``resolve.along_chain``): every access asks it of each of its views. A
        binding of no step is its untransformed ref's (``root_view``)."""
        if not b.stack:
            return self.root_view(b)
        return along_chain(self._views, b, self._view_step)

    def root_view(self, b: Binding) -> _View:
        """The ``_View`` of the untransformed ref under ``b`` (its stack without a step),
        once per root: its ``root`` is (shape, dtype, memory space, layout stack) of what
        declares it (``Plan.root_spec``; None: unknown)."""
        o = b.origin[0] if b.origin else ""
        v = self._roots.get(o)
        if v is None:
            spec = b.root  # (``Plan.root_spec``)
            if spec is None:
                v = _View(None, False, False, False, None, False)
            else:
                packing = 1
                if o.startswith("scratch:"):  # its own memory space and layout
                    space, stack = spec.memory_space, tuple(spec.transforms)
                    if space == "TMEM" and spec.packed:  # (its columns' elements)
                        packing = 32 // dtypes.bits(spec.dtype)
                else:
                    space, stack = "GMEM", ()
                root = _Root(tuple(spec.shape), spec.dtype, space, stack, packing)
                v = _View(root, False, False, space != "GMEM" or stack != (), None, False)
            self._roots[o] = v
        return v

    def _view_step(self, y: Binding, src: _View | None) -> _View:
        if src is None:  # a view of an untransformed ref: all of its stack is its own
            own = y.stack
            root, moved, tangled, rules, stop, reshape = self.root_view(y)
            at = 0
        else:
            own = own_steps(y)
            root, moved, tangled, rules, stop, reshape = src
            assert y.parent is not None
            at = len(y.parent.stack)
        if not (tangled and reshape) or stop is None:  # (all three stay so once set)
            for k, (_, t) in enumerate(own, at):
                if t.REINTERPRETS:
                    moved = tangled = True
                elif t.MOVES_AXES:
                    moved = True
                elif moved:
                    tangled = True
                if t.RESHAPES:
                    reshape = True
                elif stop is None and t.stops_access():
                    stop = k
            rules = rules or (tangled and root is not None)
        return _View(root, moved, tangled, rules, stop, reshape)

    def memref(self, b: Binding) -> L.MemrefFold:
        """``layout_rules.view_memref`` of ``b`` from its untransformed ref: the memref,
        and the first reshape the lowering cannot make with its position in the stack.
        Folded on demand (most accesses ask no rule that reads it), once per binding from
        its source view's (``resolve.along_chain``)."""
        return along_chain(self._memrefs, b, self._memref_step)

    def _memref_step(self, y: Binding, src: L.MemrefFold | None) -> L.MemrefFold:
        if src is None:  # a view of an untransformed ref: all of its stack is its own
            root = self.root_view(y).root
            if root is None:
                return L.MemrefFold(None, None)
            return L.view_memref(root.shape, [t for _, t in y.stack])
        own = own_steps(y)
        if src.memref is None or not own:
            return src
        assert y.parent is not None  # its source's memref, followed by its own steps
        return L.view_memref_from(src.memref, [t for _, t in own], len(y.parent.stack))

    def dropped_load(self, field: str) -> bool:
        """A load whose value nothing uses (``return v[...]`` under plgpu.kernel): the
        lowering rules' own errors (its view's transforms), none of the later phases'
        (the unused op is gone before them)."""
        kept = len(self.found)
        stop = self.access(field, "load", check_layout=False, dropped=True)
        del self.found[kept:]
        return stop

    def later_error(self, phase: str, item: tuple[Any, ...]) -> None:
        """An error of the later lowering phase ``phase`` (a key of ``_RANK``)."""
        self.found.append((_RANK[phase], item))

    def first_later(self) -> tuple[Any, ...]:
        """The error of the later phases the lowering raises: the first (in statement
        order) of the first phase that has one (``found`` is not empty)."""
        return min(self.found, key=_rank)[1]

    @property
    def path(self) -> Path:
        return self.st.path

    def info(self, field: str) -> RefInfo:
        info = self.st.refs[field].info
        assert info is not None
        return info

    def access(
        self,
        field: str,
        kind: str,
        check_layout: bool = True,
        splat: bool = False,
        dropped: bool = False,
    ) -> bool:
        """A plain load or store through the ref (``ref[...]``; ``splat``: a store of a
        constant, ``jnp.full``; ``dropped``: a load whose value nothing uses, which makes
        no vector)."""
        st = self.st
        b = st.refs[field]
        info = b.info
        assert info is not None
        if not info.is_ref:
            return False
        if info.gathered:
            # x.at[off_ref[...]]: the lowering of the load or store refuses it (no fix:
            # one element loaded instead makes a view of another shape)
            self.ctx.jax(
                "GPU_GATHER_LOAD",
                _where(st, field),
                "int_indexer_shape non-empty",
                stage="gpu-lower",
                jax_type="NotImplementedError",
            )
            return True
        root, _, tangled, rules, stop, reshape = self.view(b)
        leftover = None
        if rules:
            done, leftover = _view_rules(self, field, root, tangled, kind, splat)
            if done:
                return True
        if (stop is not None or reshape) and _apply_steps(self, field, root, stop, reshape):
            return True
        if info.cluster:
            if info.memory_space == "GMEM":
                self.later_error(
                    "solve",
                    (
                        "GPU_CLUSTER_GMEM",
                        _where(st, field),
                        "ValueSite(operation=<UnrealizedConversionCastOp>, "
                        "type=<VariableType.RESULT: 1>, index=0, region_index=None)",
                        "cluster_ref addresses another block's shared memory; a GMEM ref has no "
                        "cluster-peer form, and layout inference fails with an internal KeyError.",
                    ),
                )
            elif kind == "store" and info.memory_space == "SMEM":
                self.later_error(
                    "p3",
                    (
                        "GPU_CLUSTER_SMEM_STORE",
                        _where(st, field),
                        "Unsupported memory space: #mosaic_gpu.smem_cluster",
                        "A plain store into another block's SMEM (cluster_ref) does not lower; "
                        "copy with TMA or have the owning block write it.",
                    ),
                )
        if leftover is not None:
            self.ctx.raised(
                leftover,
                _where(st, field),
                explanation="A plain load or store through a bitcast view is not lowered by "
                "Mosaic GPU (warpgroup semantics). Bitcast the loaded value instead "
                "(lax.bitcast_convert_type).",
            )
            return True
        if info.size == 0 and info.shape and not dropped:
            self.ctx.add(
                "GPU_ZERO_SIZE_ACCESS",
                _where(st, field),
                f"a plain {kind} of {info.describe()}, which holds no element: Mosaic GPU "
                "makes no vector with a dimension of size 0, and JAX's lowering fails (an MLIR "
                "'Invalid type: vector types must have positive constant sizes', an "
                "AssertionError or a layout inference failure, by the statement)",
                stage="gpu-lower",
                fix=Fix(
                    description=f"drop the statement: a {kind} of no element does nothing",
                    edits=[Edit(op="remove", path=format_path(st.path))],
                ),
            )
            return True
        if info.memory_space == "TMEM":
            return False  # its layout errors are tmem_access_error's
        if info.shape and check_layout and info.size % LANES:
            self.no_layout(
                _where(st, field),
                f"{kind} of {info.describe()} ({info.size} elements): the Mosaic GPU lowering "
                f"holds a loaded array in the registers of one warpgroup ({LANES} threads), so "
                f"its size must be a multiple of {LANES}.",
            )
        if self.layouts and info.memory_space == "GMEM" and root is not None and not splat:
            # the value takes the register layout of tiled SMEM on the statement's other side
            other = WRITE if kind == "load" else READ
            for f, acc in st.node.REFS:
                o = st.refs.get(f) if acc == other else None
                spec = None if o is None else self.root_view(o).root
                if o is None or spec is None or spec.space != "SMEM":
                    continue
                if [t.LOWERS_AS for t in spec.layout] in (["tiling"], ["tiling", "swizzle"]):
                    om = self.memref(o).memref
                    bits = dtypes.bits(info.dtype)
                    oinfo = o.info
                    layouts = (
                        None
                        if oinfo is None
                        else L.smem_value_layouts(spec.layout, oinfo.shape, bits, om, spec.shape)
                    )
                    if layouts is None:  # (not followed: the measured rule)
                        wgmma = bits == 16 or not L.minor_strided(om)
                    else:
                        wgmma = bool(layouts) and layouts[0] == L.WGMMA_LAYOUT
                    e = L.gmem_transfer_error(bits, wgmma)
                    if e is not None:
                        self.later_error(
                            "p3", (e.code, _where(st, field), e.message, _GMEM_XFER_WHY)
                        )
                    break
        # (a view of no step is the ref itself, contiguous: its minor dim is unit-stride;
        # the view's memref only for a vector of more than one element a thread: for
        # one, any stride will do)
        if (
            b.stack
            and root is not None
            and (root.space == "GMEM" or (root.space == "SMEM" and not root.layout))
        ):
            bits = dtypes.bits(info.dtype)
            vec = (
                L.splat_vec_size(info.shape, bits)
                if splat
                else L.strided_vec_size(info.shape, bits)
            )
            if vec <= 1:  # (one element a thread, or none: any stride will do)
                return False
            m = self.memref(b).memref
            e = L.strided_transfer_error(vec, m)
            if e is not None:
                self.later_error("p3", (e.code, _where(st, field), e.message, _STRIDED_WHY))
                return False
            e = L.transposed_access_error(vec, m, kind)
            if e is not None:
                self.later_error(
                    "p4",
                    (
                        e.code,
                        _where(st, field),
                        e.message,
                        "The view's minor dimension is not the ref's (a transpose moved it, or an "
                        "integer index dropped the ref's), so a plain load or store would need a "
                        "strided minor dimension, which the GPU vector ops cannot do. Transpose in "
                        "registers instead.",
                    ),
                )
        return False

    def tma(self, src: str, dst: str) -> bool:
        """A TMA copy from the SMEM ref ``src`` into the GMEM ref ``dst``."""
        return _tma(self, src, dst)

    def tma_dst(self, field: str) -> bool:
        """A TMA load's SMEM destination through its view (``_tma_smem_view``), lowered
        before anything else of the copy; a bitcast left over stops it."""
        done, leftover = _tma_smem_view(self, field, "tma-load")
        if leftover is not None:
            self.ctx.raised(leftover, _where(self.st, field))
            return True
        return done

    def mma_operand(self, field: str) -> bool:
        """A WGMMA operand's SMEM view as the lowering takes it (``_handle_transforms``):
        its steps commuted past the scratch's layout (``_view_rules``' commute rules, as
        for any access: a window of tiled scratch starts and ends at a tile); the SMEM
        layout it needs is the op's to say (layout inference), not an access's."""
        done, leftover = _tma_smem_view(self, field, "wgmma")
        if leftover is not None:
            self.ctx.raised(leftover, _where(self.st, field))
            return True
        return done

    def tma_smem(self, smem: str, gmem: str, shared: int = 1) -> None:
        """The dialect lowering's checks of a TMA load's SMEM side (``_tma_smem``;
        ``shared``: the blocks a multicast load is split among)."""
        _tma_smem(self, smem, gmem, load=True, shared=shared)

    def collective(self, axes: Any, what: str) -> bool:
        return _collective(self.ctx, self.st, axes, what)

    def later(self, phase: str, code: str, path: Path, message: str, why: str = "") -> None:
        """An error of a later lowering phase (``p1``: verifying the module the lowering
        rules built, ``p2``: layout and transform inference, ``p3``: dialect lowering,
        ``p4``: verifying the lowered module)."""
        self.found.append((_RANK[phase], (code, path, message, why)))

    def no_layout(self, path: Path, why: str) -> None:
        """Layout inference finds no layout (GPU_LAYOUT_INFERENCE, raised when its search
        ends: the ``unsat`` phase); ``why`` says what has none."""
        self.later("unsat", "GPU_LAYOUT_INFERENCE", path, LAYOUT_MSG, why)

    # the lowering rules' own checks, raised where the statement is lowered

    def jax(self, code: str, path: Path | str, message: str, **kw: Any) -> None:
        self.ctx.jax(code, path, message, **kw)

    @property
    def mesh_axes(self) -> tuple[str, ...]:
        return self.ctx.mesh_axes

    def binding(self, field: str) -> Binding:
        return self.st.refs[field]

    def root_space(self, field: str) -> str:
        return _root(self.ctx, self.st.refs[field])[0]

    def static(self, e: Any) -> bool:
        """The expression is a Python int where this statement is lowered."""
        return is_static(e, self.st)

    def device_id(self, dev: Any, field: str) -> bool:
        """A device id (the statement's ``field``) the lowering cannot resolve against the
        device mesh."""
        return device_id_problem(self.ctx, dev, self.st, field)

    def barrier(self, field: str, method: str) -> bool:
        """A barrier operand: indexed only, one barrier, a barrier's memory (``method``:
        what the lowering calls on it, as its AttributeError names it)."""
        return _barrier(self.ctx, self.st, field, method)

    def cluster_group(self, axes: tuple[str, ...], path: Path) -> int | None:
        """How many blocks a multicast load's ``collective_axes`` group (the product of
        their cluster sizes); None after JAX's error for an axis the cluster lacks
        (``_resolve_cluster_axis``)."""
        cluster = dict(self.mesh.cluster)
        n = 1
        for axis in axes:
            if axis not in cluster:
                self.ctx.jax(
                    "CLUSTER_REF_UNKNOWN_AXIS",
                    path,
                    f"Unknown cluster axis {axis}, available axes: {list(cluster)!r}",
                    explanation=f"A multicast load (collective_axes) shares the copy among the "
                    f"blocks of a cluster along cluster axes; {axis!r} is not a cluster axis "
                    f"of the kernel's mesh (cluster axes: {list(cluster) or 'none'}).",
                )
                return None
            n *= cluster[axis]
        return n

    def root_layout(self, field: str) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
        """The shape and scratch layout (its transforms; empty for GMEM) of the ref under
        ``field``'s view (None: unknown)."""
        root = self.root_view(self.st.refs[field]).root
        return None if root is None else (root.shape, root.layout)

    def multimem_ref(self, field: str) -> bool:
        """A multimem op's ref: indexed only (``allow_peer_refs=False``, no multicast)."""
        b = self.st.refs[field]
        for _p, t in b.stack:
            if t.REACH == "multicast":
                self.ctx.jax(
                    "MULTICAST_PLAIN_STORE",
                    _where(self.st, field),
                    "Multicast references are not allowed in the lowering of this primitive.",
                    explanation="A multimem op already reaches every device along its axes: "
                    "give it the plain ref, not a multicast view of it.",
                )
                return True
        for _p, t in b.stack:
            if t.REACH == "peer":
                if device_id_problem(self.ctx, t.device, self.st, field):
                    return True
                self.ctx.jax(
                    "MULTIMEM_PEER_REF",
                    _where(self.st, field),
                    "Peer device references are not allowed in the lowering of this primitive.",
                )
                return True
        return False

    def gmem_transforms(self, field: str, load: bool) -> bool:
        """The GMEM side of a TMA copy (``load``: copy_gmem_to_smem, the other side
        ``dst``; else copy_smem_to_gmem, the other side ``src``): each step's
        ``lower_gmem_copy``."""
        return _gmem_copy_transforms(self, field, load)


def _scratch_lowering(ctx: Ctx) -> bool:
    """What allocating the scratch at the kernel's start rejects (before any statement):
    a cluster barrier over an axis the cluster lacks."""
    c = ctx.s.call
    for name, sc in c.scratch.items():
        if not isinstance(sc, ClusterBarrierScratch):
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


def _where(st: Stmt, field: str) -> Path:
    """The field path of ``st``'s ``field`` (a name, or a sub-path as text)."""
    return sub_path(st.path, field)


def _argument_scalar(ctx: Ctx) -> bool:
    """An argument's view the caller made holds a traced scalar (a device id, an integer
    index: ``TransformOp.traces_scalar``), which every program closes over (under
    ``plgpu.kernel`` the view is refused at trace: ARG_VIEW_PLGPU)."""
    for i, a in enumerate(ctx.s.call.args):
        for k, t in enumerate(a.transforms):
            if t.traces_scalar():
                e = L.captured_scalar_error("int32")
                ctx.raised(
                    e, f"call.args[{i}].transforms[{k}]", fix=fixes_for.view_into_body(ctx.s, i)
                )
                return True
    return False


def _captured_scalar(ctx: Ctx, prog: Any) -> bool:
    """A rank-0 array the body closes over (``layout_rules.captured_scalar_error``): the
    lowering binds the kernel's constants before its first statement."""
    s = ctx.s  # (asked of a call with captures)
    used = {b.name for st in prog.stmts for b in st.refs.values() if b.kind == "capture"}
    for i, cap in enumerate(s.call.captures):
        b = s.buffers.get(cap.buffer)
        if b is None or b.as_ref or b.shape or cap.name not in used:
            continue
        e = L.captured_scalar_error(b.dtype)
        ctx.raised(
            e,
            f"call.captures[{i}]",
            fix=Fix(
                description=f"pass {cap.buffer!r} as a Ref (as_ref: true): a kernel may close "
                "over a Ref",
                edits=[Edit(op="replace", path=f"buffers.{cap.buffer}.as_ref", value=True)],
            ),
        )
        return True
    return False


def _report(ctx: Ctx, e: L.JaxError, path: Path | str, why: str = "") -> None:
    ctx.raised(e, path, stage=e.stage, explanation=why)


def _later(low: LowerCtx, e: L.JaxError, path: Path | str, why: str = "") -> None:
    """An error of a later lowering phase (``layout_rules.lowering_phase``)."""
    low.found.append(
        (_RANK[L.lowering_phase(e.code, e.message)], (e.code, path, e.message, why, e.jax_type))
    )


#: the later lowering phases in the order they run (``LowerCtx.later``'s p1-p4 and
#: ``layout_rules.lowering_phase``'s names): the first error of the first phase that has
#: one is reported
_RANK = {
    "verify-early": 0,
    "p1": 0,
    "derive": 1,
    "solve": 2,
    "p2": 2,
    "unsat": 3,
    "assign": 4,
    "p3": 5,
    "dialect": 5,
    "p4": 6,
    "verify": 6,
}
_rank: Callable[[tuple[int, Any]], int] = operator.itemgetter(0)


class _Root(NamedTuple):
    """The untransformed ref under a view, as what declares it: its shape, dtype, memory
    space and scratch layout (``layout``: its transforms; empty for GMEM)."""

    shape: tuple[int, ...]
    dtype: str
    space: str
    layout: tuple[Any, ...]
    #: elements a 32-bit TMEM column holds (``packed`` TMEM of a narrow dtype; else 1)
    packing: int = 1


class _View(NamedTuple):
    """What the lowering rules ask of a view's whole stack (``LowerCtx.view``)."""

    #: the untransformed ref under the view (``LowerCtx.root_view``: one root along a
    #: chain of views; None: unknown)
    root: _Root | None
    #: a transpose or a bitcast, a step the lowering moves others past (or that stays
    #: after them)
    moved: bool
    #: a bitcast, or a step after a moved one that is not a transpose: the lowering must
    #: commute them (``layout_rules.view_lowering_error_at``, which finds nothing in a
    #: view of GMEM without one: its transposes all come last)
    tangled: bool
    #: whether ``_view_rules`` has anything to check: a root in SMEM or TMEM, a scratch
    #: layout, or a tangled view (without any, the lowering moves no step past another)
    rules: bool
    #: the position of the first step that ``stops_access`` holds for (None: none)
    stop: int | None
    #: a reshape, which ``_apply_steps`` stops at where the lowering cannot make it
    #: (with neither, every step lowers: it has nothing to check)
    reshape: bool


def _view_rules(
    low: LowerCtx, field: str, root: _Root | None, tangled: bool, access: str, splat: bool = False
) -> tuple[bool, L.JaxError | None]:
    """The Mosaic GPU lowering's handling of the view's transforms
    (``layout_rules.view_lowering_error_at``, ``tmem_access_error``,
    ``smem_transforms_error``) of the ref's view (its ``_View``'s ``root`` and
    ``tangled``): (stops here, the bitcast left over that the access itself rejects once
    the view's steps are lowered). Asked of a view with ``rules`` (``_View``) only: a
    view of GMEM without one has nothing for the lowering to move its steps past (no
    scratch layout, no bitcast, no step after a transpose but transposes), so
    view_lowering_error_at has nothing to say, and the rest is about SMEM and TMEM."""
    ctx, st = low.ctx, low.st
    b = st.refs[field]
    assert root is not None
    shape, dtype, space, layout_stack, packing = root
    tma = access in ("tma", "tma-load")
    why = _TMA_LOAD_WHY if access == "tma-load" else _TMA_WHY if tma else _ASSIGNMENT_WHY
    if tma:
        access = "tma"  # (view_lowering_error_at's: the same rules either way)
    if space == "TMEM" and not tma:
        e = L.tmem_access_error(shape, [t for _, t in b.stack], dtype, packing)
        if e is None:
            return False, None
        if L.lowering_phase(e.code, e.message) != "statement":
            _later(low, e, _where(st, field), _TMEM_WHY)
            return False, None
        if e.code in L.LEFTOVER_CODES:
            return False, e
        _report(ctx, e, _where(st, field))
        return True, None
    # (without a scratch layout and untangled, view_lowering_error_at finds nothing in any
    # memory space, as of GMEM above: its transposes all come last; SMEM scratch skips
    # the walk)
    found = (
        L.view_lowering_error_at(shape, dtype, layout_stack, [t for _, t in b.stack], access)
        if layout_stack or tangled
        else None
    )
    if found is not None:
        e, i = found
        if e.code in L.LEFTOVER_CODES:
            leftover: L.JaxError | None = e
        else:
            _report(ctx, e, b.stack[i][0] if i is not None else _where(st, field), _COMMUTE_WHY)
            return True, None
    else:
        leftover = None
    if access == "wgmma":  # (its operand's layout is layout inference's: ``Dot.lower``)
        return False, leftover
    if space == "SMEM" and leftover is None and b.stack:
        # (the view's memref from its untransformed ref, as ``LowerCtx.memref`` keeps it
        # per view: ``smem_contiguity_error`` of the same shape and steps; a view of no
        # step is the ref itself, contiguous)
        e = L.smem_memref_contiguity_error(low.memref(b).memref)
        if e is not None:
            _later(low, e, _where(st, field))
    if space == "SMEM" and layout_stack:
        _smem_layout(low, field, root, why)
        tiles = [t for t in layout_stack if t.LOWERS_AS == "tiling"]
        if tiles and b.stack:
            e = L.tiled_transpose_error(low.memref(b).memref, len(tiles[0].tile))
            if e is not None:
                _later(low, e, _where(st, field), _TILED_TRANSPOSE_WHY)
        info = b.info
        if access != "tma" and info is not None and leftover is None:
            m = low.memref(b).memref
            e = L.smem_register_error(
                layout_stack, info.shape, dtypes.bits(dtype), L.minor_strided(m), splat, m, shape
            )
            if e is not None:
                _later(low, e, _where(st, field), _REGISTERS_WHY)
    return False, leftover


def _smem_layout(low: LowerCtx, field: str, root: _Root, why: str) -> None:
    """The ``with_transforms(reinterpret_cast(ref))`` the lowering puts before each access
    of SMEM scratch with a layout (``root.layout``): MLIR's verifier of the cast
    (``reinterpret_cast_error``), then layout inference's rule for the op: the
    transforms' order (``smem_transforms_error``) and whether they fit the ref
    (``smem_assignment_error``, explained by ``why``)."""
    st = low.st
    b = st.refs[field]
    spath = f"call.scratch.{b.origin[0][8:]}.transforms"
    e = L.reinterpret_cast_error(root.shape, dtypes.bits(root.dtype), root.layout)
    if e is not None:
        _later(low, e, spath, _TILE_RANK_WHY)
    if (e := L.smem_transforms_error(root.layout)) is not None:
        _later(low, e, spath)
        return
    e = L.smem_assignment_error(root.shape, dtypes.bits(root.dtype), root.layout)
    if e is not None:
        _later(low, e, _where(st, field), why)


_ASSIGNMENT_WHY = (
    "Mosaic GPU's layout inference takes an SMEM ref's tiling and swizzle only where they fit "
    "the ref as declared: a tiling must tile its shape (a tile of no more dims than the ref, "
    "each dividing its dim), and a swizzle's row must divide the minor dim. Use a tile of at "
    "most the scratch's rank."
)
_TILED_TRANSPOSE_WHY = (
    "The view transposes a tiled dim of the scratch with an untiled one: Mosaic GPU gives "
    "a view of tiled SMEM the scratch's tiling only while the tiled dims stay the minor "
    "ones, so layout inference finds no layout for it. Transpose only among the tiled dims "
    "(or only among the leading ones), or transpose on the GMEM side."
)
_STRIDED_WHY = (
    "A plain load or store spreads the view over the warpgroup's 128 threads, several "
    "consecutive elements a thread; this view is not one contiguous run of its ref, and "
    "its unit-stride dim or its other strides do not hold whole vectors of them. Copy a "
    "contiguous view, or transpose in registers."
)
_TMEM_WHY = (
    "TMEM is read and written with plgpu.async_load_tmem / async_store_tmem; a plain load "
    "or store of a TMEM ref (or of a view of one) does not lower."
)
_REGISTERS_WHY = (
    "A plain load or store of tiled, swizzled SMEM moves the value through registers in "
    "the layout the tiling and swizzle allow (the WGMMA layout: 64-row tiles, rows of the "
    "swizzle's width); this view has no such layout. Copy with TMA, or keep the view "
    "untransposed with a multiple of 64 rows and both a tiling and a swizzle."
)
_GMEM_XFER_WHY = (
    "The value is copied between GMEM and tiled, swizzled SMEM, so it is held in the register "
    "layout the SMEM tiling needs (2 consecutive elements per thread); for 8- and 16-bit "
    "dtypes the GMEM side of that layout is not a whole number of 32-byte sectors. Copy with "
    "TMA (copy_gmem_to_smem / copy_smem_to_gmem) instead."
)
_TILE_RANK_WHY = (
    "The tile has more dims than the scratch: JAX pairs the whole shape with the tile's first "
    "entries, so the tiled allocation holds more elements than the ref, and the lowering "
    "cannot view it as the ref's shape. Use a tile of at most the scratch's rank."
)
_COMMUTE_WHY = (
    "The Mosaic GPU lowering moves every index, reshape and peer step of a view before "
    "the transposes, bitcasts and scratch layout (tiling, swizzle) under it; this step "
    "cannot be moved there. Reorder the view, or index the ref before transforming it."
)


def _apply_steps(
    low: LowerCtx, field: str, root: _Root | None, stop: int | None, reshape: bool
) -> bool:
    """The steps of the ref's view lowered in order (``_handle_transforms`` after the
    commutes): slices, transposes, reshapes, peer device ids, multicast and cluster views.
    Asked of a view with a step that may stop it (``stop``, ``_View``) or a reshape: the
    steps before the first that fails lower. The first reshape the lowering cannot make
    is the view's memref fold's (``LowerCtx.memref``, linear in a chain of views): the
    walk starts at it or at ``stop``, whichever comes first, and a view whose only such
    steps are reshapes is not walked at all (a walk per access from its first reshape
    was quadratic in a chain of reshaped views)."""
    ctx, st = low.ctx, low.st
    b = st.refs[field]
    # (a scratch layout's reshapes are the commute rules')
    bad = low.memref(b).unmade if reshape and root is not None and not root.layout else None
    if bad is not None and (stop is None or bad.pos < stop):
        ctx.raised(bad.error, b.stack[bad.pos][0])
        return True
    if stop is None:
        return False
    a = _Access(low, field, root, bad)
    for pos, (path, t) in enumerate(b.stack[stop:], stop):
        if t.lower_access(a, pos, path):
            return True
    return False


class _Access:
    """What a view step's ``lower_access`` sees (``ops.base.AccessLowering``): the
    statement's ref ``field`` lowered for a plain access."""

    def __init__(self, low: LowerCtx, field: str, root: _Root | None, bad: Any) -> None:
        self.low = low
        self.field = field
        self.root = root
        self.bad = bad  # (the first reshape the lowering cannot make, if asked)

    @property
    def where(self) -> Path:
        return _where(self.low.st, self.field)

    @property
    def root_space(self) -> str | None:
        return None if self.root is None else self.root.space

    def jax(self, code: str, path: Path | str, message: str, **kw: Any) -> None:
        self.low.ctx.jax(code, path, message, **kw)

    def own(self, code: str, path: Path | str, message: str, **kw: Any) -> None:
        """mpmd-lab's finding where JAX gives no error (its lowering crashes)."""
        self.low.ctx.add(code, path, message, **kw)

    def device_id(self, dev: Any) -> bool:
        return device_id_problem(self.low.ctx, dev, self.low.st, self.field)

    def unmade_reshape(self, pos: int, path: Path) -> bool:
        if self.bad is not None and self.bad.pos == pos:
            self.low.ctx.raised(self.bad.error, path)
            return True
        return False

    def cluster(self) -> bool:
        info = self.low.st.refs[self.field].info
        assert info is not None  # (the callers' ref)
        return _cluster(self.low.ctx, self.low.st, self.field, info, self.low.mesh)


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


def device_id_problem(ctx: Ctx, dev: Any, st: Stmt, field: str) -> bool:
    """What the lowering's ``device_id_to_logical`` rejects in a device id (``remote_ref``,
    ``semaphore_signal``; reported at the statement's ``field``): one flat id on a device
    mesh of another rank (none, or more than one axis), or a mapping that names an axis
    the device mesh lacks."""
    found = device_id_error(ctx, dev)
    if found is None:
        return False
    ctx.jax(found[0], _where(st, field), found[1])
    return True


def device_id_error(ctx: Ctx, dev: Any) -> tuple[str, str] | None:
    """``device_id_problem``'s code and JAX's message, or None (it reports nothing)."""
    axes = ctx.mesh_axes
    dref = resolve_device(dev)
    if dref.linear is not None:
        if len(axes) != 1:
            return (
                "DEVICE_ID_RANK",
                "Number of device ids must match the number of mesh axes, but got 1 ids for a "
                f"{len(axes)}D mesh.",
            )
        return None
    unknown = [(a, e) for a, e in dref.coords if a not in axes]
    if unknown:
        # a literal is a weakly typed int32 to JAX, an axis-index expression is not
        inner = ", ".join(
            f"{a!r}: JitTracer({'~' if e.is_const else ''}int32[])" for a, e in unknown
        )
        return "DEVICE_ID_UNKNOWN_AXIS", f"Unrecognized axes in device_id: {{{inner}}}"
    return None


def _tma(low: LowerCtx, src_field: str, dst_field: str) -> bool:
    """``copy_smem_to_gmem``'s lowering: the SMEM source's view (``_handle_transforms``),
    the GMEM destination's (multicast, peer), then what is left of the source's view;
    the copy itself when the dialect is lowered (``layout_rules.tma_smem_error``)."""
    ctx, st = low.ctx, low.st
    done, leftover = _tma_smem_view(low, src_field, "tma")
    if done:
        return True
    if _gmem_copy_transforms(low, dst_field, load=False):
        return True
    if leftover is not None:
        ctx.raised(
            leftover,
            _where(st, src_field),
            explanation="A TMA copy takes an SMEM ref whose layout the copy engine can "
            "follow; a bitcast view of it has none (the lowering cannot undo the bitcast). "
            "Copy the ref with its own dtype and bitcast in GMEM, or in registers.",
        )
        return True
    _tma_smem(low, src_field, dst_field)
    return False


def _tma_smem_view(low: LowerCtx, field: str, access: str) -> tuple[bool, L.JaxError | None]:
    """The SMEM side of a TMA copy (``access``: ``tma`` a store's source, ``tma-load`` a
    load's destination) through ``_handle_transforms``: its view's rules and steps, as
    a plain access's (``LowerCtx.access``): (stops here, the bitcast left over)."""
    root, _, tangled, rules, stop, reshape = low.view(low.st.refs[field])
    leftover = None
    if rules:
        done, leftover = _view_rules(low, field, root, tangled, access)
        if done:
            return True, None
    if (stop is not None or reshape) and _apply_steps(low, field, root, stop, reshape):
        return True, None
    return False, leftover


def _tma_smem(
    low: LowerCtx, smem_field: str, gmem_field: str, load: bool = False, shared: int = 1
) -> None:
    """What ``async_copy`` raises for the SMEM side of a TMA copy (a store's source, a
    load's destination) against its GMEM side (``layout_rules.tma_smem_error``): a view
    that is not one contiguous block, a transpose the GMEM ref cannot follow, a box of the
    wrong width (a load's width is its own rule's to say: ``_copy_width``)."""
    st = low.st
    smem_root = low.root_view(st.refs[smem_field]).root
    gmem_root = low.root_view(st.refs[gmem_field]).root
    if smem_root is None or gmem_root is None or smem_root.space != "SMEM":
        return
    gm = low.memref(st.refs[gmem_field]).memref
    if gm is None:
        return
    shape, dtype, _space, stack, _packing = smem_root
    e = L.tma_smem_error(
        shape,
        dtypes.bits(dtype),
        stack,
        [t for _, t in st.refs[smem_field].stack],
        low.memref(st.refs[smem_field]).memref,
        gm.shape,
        gm.strides,
        load and shared == 1,  # (a multicast load's box is shared first: not checked)
        # (a GMEM view of indices only is a slice of the whole ref the copy is given)
        gmem_root.shape if all(t.INDEXES for _, t in st.refs[gmem_field].stack) else None,
    )
    if e is None or (load and e.code == "TMA_LAST_DIM_BITS"):
        return
    if e.message.startswith(L.TMA_BOX_MESSAGE) and not stack and _layout_from_use(low, smem_field):
        return  # (its box is the tiles of the layout inferred for it: not known here)
    _later(low, e, (*st.path, smem_field), _TMA_LOAD_WHY if load else _TMA_WHY)


def _layout_from_use(low: LowerCtx, field: str) -> bool:
    """Whether the scratch under the statement's ``field`` is an operand whose SMEM layout
    layout inference picks (``StatementOp.SMEM_LAYOUT_FROM_USE``: a WGMMA's) anywhere in
    the kernel."""
    origin = low.st.refs[field].origin[:1]
    for prog in low.ctx.programs:
        for st in prog.stmts:
            if type(st.node) is Let:
                continue
            for f in st.node.SMEM_LAYOUT_FROM_USE:
                b = st.refs.get(f)
                if b is not None and b.origin[:1] == origin:
                    return True
    return False


def _barrier(ctx: Ctx, st: Stmt, field: str, method: str) -> bool:
    """A barrier operand as the lowering takes it: indexed only, a barrier's memory, one
    barrier (not a whole array of them)."""
    b = st.refs[field]
    info = b.info
    assert info is not None
    for p, t in b.stack:
        if not t.INDEXES:
            ctx.jax("BARRIER_TRANSFORM", p, "Barrier does not support arbitrary transforms")
            return True
    if info.dtype != "barrier":
        ctx.jax(
            "BARRIER_NOT_A_BARRIER",
            _where(st, field),
            f"'jaxlib.mlir._mlir_libs._mlir.ir.OpResult' object has no attribute '{method}'",
            explanation="The ref is not a barrier: a `plgpu.Barrier` or `ClusterBarrier` "
            "scratch is (`kind: barrier`); an SMEM array cannot stand in for one.",
        )
        return True
    if info.size > 1:
        ctx.jax(
            "BARRIER_NOT_SINGLE",
            _where(st, field),
            f"Operation is only valid for a single barrier, but barrier ref contains "
            f"{info.size}. Individual barriers can be accessed by indexing into the ref.",
            fix=_index_fix(ctx, st, field),
        )
        return True
    return False


def _index_fix(ctx: Ctx, st: Stmt, field: str) -> Fix | None:
    """Use the first barrier of the array: a view ``name_0 = name.at[0]`` before ``st``."""
    b = st.refs[field]
    idx = st.path[-1]
    if b.kind != "scratch" or not isinstance(idx, int):
        return None
    name = b.name
    body = st.path[:-1]
    view = f"{name}_0"
    return Fix(
        description=f"index the barrier array: {view} = {name}.at[0]",
        edits=[
            Edit(
                op="add",
                path=format_path(st.path),
                value={"let": view, "ref": name, "transforms": [{"op": "at", "index": [0]}]},
            ),
            Edit(op="replace", path=format_path((*body, idx + 1, field)), value=view),
        ],
    )


def _gmem_copy_transforms(low: LowerCtx, field: str, load: bool) -> bool:
    """``_extract_gmem_copy_params``: each step of the GMEM side of a TMA copy, asked in
    order (``TransformOp.lower_gmem_copy``: indexing, a peer's device id, multicast for a
    store)."""
    b = low.st.refs[field]
    for k, (path, t) in enumerate(b.stack):
        if t.lower_gmem_copy(_GmemCopy(low, field, load, k), path):
            return True
    if load and b.info is not None and b.info.gathered == "GMEM":
        # a TMA gather (its index array loaded from GMEM): the dialect lowering refuses
        # the transfer (held against JAX for 4 to 512 int32 indices, rows of 32 to 128
        # float32 or bfloat16; indices loaded from SMEM are not followed)
        low.later_error(
            "p3",
            (
                "GPU_GMEM_TRANSFER",
                _where(low.st, field),
                _SECTORS,
                _GATHER_TMA_WHY,
                "TransferPlanDerivationError",
            ),
        )
    return False


_SECTORS = "GMEM transfer does not access a whole number of complete 32 byte sectors"
_GATHER_TMA_WHY = (
    "The TMA copy's GMEM side is a gather view (an array as its index, loaded from GMEM): "
    "the Mosaic GPU lowering makes it a TMA gather, and the GMEM transfer it plans for it "
    "is not whole 32-byte sectors. Copy the rows one by one (one element of the index "
    "array each), or index by a scalar."
)


class _GmemCopy:
    """What a step of a TMA copy's GMEM side sees (``ops.base.GmemCopyLowering``)."""

    def __init__(self, low: LowerCtx, field: str, load: bool, pos: int) -> None:
        self.low = low
        self.field = field
        self.load = load
        self.after = tuple(t for _, t in low.st.refs[field].stack[pos + 1 :])

    @property
    def where(self) -> Path:
        return _where(self.low.st, self.field)

    @property
    def _other(self) -> str:
        return "dst" if self.load else "src"

    @property
    def smem(self) -> RefInfo:
        info = self.low.st.refs[self._other].info
        assert info is not None  # (the copy's refs resolved)
        return info

    @property
    def smem_layout(self) -> tuple[Any, ...]:
        root = self.low.root_view(self.low.st.refs[self._other]).root
        return () if root is None else tuple(root.layout)

    @property
    def collective(self) -> bool:
        return getattr(self.low.st.node, "collective_axes", None) is not None

    def jax(self, code: str, path: Path | str, message: str, **kw: Any) -> None:
        self.low.ctx.jax(code, path, message, **kw)

    def device_id(self, dev: Any) -> bool:
        return device_id_problem(self.low.ctx, dev, self.low.st, self.field)

    def multicast(self, axes: tuple[str, ...], path: Path) -> bool:
        """A multicast copy: over every axis of the JAX device mesh, which must be set."""
        ctx = self.low.ctx
        if not ctx.mesh_axes:
            ctx.jax(
                "MULTICAST_NO_DEVICE_MESH",
                self.where,
                "JAX device mesh is required by multicast copies, but not defined. Use "
                "jax.set_mesh.",
            )
            return True
        if set(axes) != set(ctx.mesh_axes):
            ctx.jax(
                "COLLECTIVE_AXES_NOT_ALL",
                self.where,
                "Only collective_axes that include all JAX device mesh  axes are "
                f"supported, but got {tuple(axes)!r}. Make sure to pass "
                f"collective_axes={ctx.mesh_axes!r}",
                fix=Fix(
                    description="multicast over every device-mesh axis",
                    edits=[
                        Edit(
                            op="replace",
                            path=format_path((*path, "axes")),
                            value=list(ctx.mesh_axes),
                        )
                    ],
                ),
            )
            return True
        return False


_TMA_WHY = (
    "The TMA engine copies one contiguous SMEM block (its tiled, swizzled layout as "
    "allocated) into a box of the GMEM ref whose minor dim is unit-stride; this source "
    "view is not such a block. Copy the whole scratch (or slices of whole tile rows) and "
    "transpose or slice on the GMEM side or in registers."
)
_TMA_LOAD_WHY = (
    "The TMA engine copies a box of the GMEM ref whose minor dim is unit-stride into one "
    "contiguous SMEM block (its tiled, swizzled layout as allocated); this destination "
    "view is not such a block (a transposed or strided view of the scratch). Load into "
    "the whole scratch (or slices of whole tile rows) and transpose or slice where it is "
    "read."
)


def _collective(ctx: Ctx, st: Stmt, axes: Any, what: str) -> bool:
    mesh_axes = ctx.mesh_axes
    if not mesh_axes:
        ctx.jax(
            "MULTICAST_NO_DEVICE_MESH",
            (*st.path, "axes"),
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
            (*st.path, "axes"),
            f"Only collective_axes that include all JAX device mesh ({mesh_axes!r}) axes are "
            f"supported, but got {shown}",
            fix=Fix(
                description="pass every device-mesh axis, as a list",
                edits=[
                    Edit(op="replace", path=format_path((*st.path, "axes")), value=list(mesh_axes))
                ],
            ),
        )
        return True
    return False
