"""Trace-stage rules, walked in the order ``jax.jit(f).trace`` meets them.

1. each argument's transforms (evaluated by the caller before the kernel call);
2. ``mpmd_map``'s argument check: the same Ref passed twice (MPMD_DUP_REF);
3. several programs: scratch without a core type, Mosaic GPU meshes that cannot combine;
4. each program's body, statement by statement (view transforms, loads and stores),
   then its return value and captured arrays;
5. closed-over Refs that alias an argument; device-mesh axes that are not Manual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab import sharding
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.dtypes import canonical, is_float, is_int, short
from mpmd_lab.fields import Path, format_path, sub_path
from mpmd_lab.ops import Let
from mpmd_lab.ops.base import StatementOp
from mpmd_lab.ops.control import is_static, loop_envs, python_vars, static_value
from mpmd_lab.plan import Binding, Stmt, expr_fields, expr_ops, sharded_operand
from mpmd_lab.scenario import BufferArg
from mpmd_lab.shapes import RefInfo, Step, base_info
from mpmd_lab.validate import fixes_for
from mpmd_lab.validate.build import spec_fix
from mpmd_lab.validate.context import Ctx


def check_trace(ctx: Ctx) -> None:
    if ctx.build_failed or _out_axes(ctx):
        return
    _check_kernel(ctx)
    if not ctx.trace_failed and not any(d.is_error and d.stage == "trace" for d in ctx.diags):
        _out_specs(ctx)


def _out_axes(ctx: Ctx) -> bool:
    """``jax.shard_map`` checks its out specs' axis names first, when the mapped function
    is called (before the body, the kernel call, traces): whether one names an axis the
    mesh lacks (reported at the first such output in JAX's order, with its fix)."""
    s = ctx.s
    if not s.device_mesh or s.run.shard_map is False:
        return False
    specs = {name: o.spec for name, o in s.call.outputs.items()}
    msg = sharding.out_axes_error(specs, s.device_mesh)
    if msg is None:
        return False
    name = next(n for n in sorted(specs) if sharding.out_axes_error({n: specs[n]}, s.device_mesh))
    o = s.call.outputs[name]
    path = f"call.outputs.{name}.spec"
    fix = spec_fix(path, o.spec, len(o.shape), s.device_mesh)
    ctx.jax("SHARD_SPEC_AXIS", path, msg, jax_type="ValueError", stage="trace", fix=fix)
    _stop(ctx)
    return True


def _out_specs(ctx: Ctx) -> None:
    """``jax.shard_map`` checks its out specs' ranks once the body (the kernel call)
    traced, every output's (their axis names were checked before it: ``_out_axes``),
    then makes their shardings, which finds an axis named twice (outputs in key order)."""
    s = ctx.s
    if not s.device_mesh or s.run.shard_map is False:
        return
    outs = s.call.outputs
    long = {n: (o.spec, o.shape, canonical(o.dtype)) for n, o in outs.items()}
    msg = sharding.out_rank_error(long, s.device_mesh)
    if msg is not None:
        name = next(n for n in sorted(long) if len(outs[n].spec or ()) > len(outs[n].shape))
        return _out_spec_error(ctx, name, "SHARD_SPEC_RANK", "ValueError", msg)
    for name in sorted(outs):
        o = outs[name]
        found = sharding.spec_error(
            o.spec, o.shape, canonical(o.dtype), s.device_mesh, "out", label=name
        )
        if found is not None:
            return _out_spec_error(ctx, name, *found)


def _out_spec_error(ctx: Ctx, name: str, code: str, jtype: str, msg: str) -> None:
    """JAX's error ``code`` at output ``name``'s spec, with the spec's fix; tracing stops."""
    o = ctx.s.call.outputs[name]
    path = f"call.outputs.{name}.spec"
    fix = spec_fix(path, o.spec, len(o.shape), ctx.s.device_mesh or {})
    ctx.jax(code, path, msg, jax_type=jtype, stage="trace", fix=fix)
    _stop(ctx)


def _check_kernel(ctx: Ctx) -> None:
    """The kernel call's trace: its arguments, then every program's body."""
    s = ctx.s
    c = s.call
    # 1. argument transforms, argument by argument, leaf by leaf
    updaters: list[tuple[int, int, str]] = []
    array_errors = ctx.array_errors
    for a in ctx.args:
        for j, steps in enumerate(a.steps):
            r = array_errors.get((a.index, j)) if array_errors else None
            if r is not None:
                if r.error is not None:
                    code, jtype, msg, path = r.error
                    ctx.jax(code, path, msg, jax_type=jtype, stage="trace")
                    return _stop(ctx)
                if r.updater:
                    updaters.append((a.index, j, a.leaves[j].buffer))
                continue
            if steps and _report_steps(ctx, steps):
                return _stop(ctx)
    if c.entry == "plgpu.kernel":
        # plgpu.kernel's custom_vmap wrapper abstractifies every operand first
        if _bad_operands(ctx, updaters, plgpu=True):
            return _stop(ctx)
    # 2. the same Ref passed twice (plgpu.kernel passes its operands through a
    #    custom_vmap, so mpmd_map sees distinct tracers there and never complains;
    #    one buffer argument cannot repeat: no walk)
    if c.entry == "pl.kernel" and (
        len(c.args) > 1 or (c.args and type(c.args[0]) is not BufferArg)
    ):
        if _dup_ref(ctx):
            return _stop(ctx)
    if c.entry == "plgpu.kernel":
        _aliased_params(ctx)
    # (pl.kernel's operands are bad only as updaters: none, nothing to report)
    if c.entry == "pl.kernel" and updaters and _bad_operands(ctx, updaters, plgpu=False):
        return _stop(ctx)
    # 3. several programs
    if len(c.programs) > 1:
        if c.scratch:
            name, sc = next(iter(c.scratch.items()))
            ctx.jax(
                "MPMD_SCRATCH_CORE_TYPE",
                f"call.scratch.{name}",
                "MPMD map with more than one mesh requires scratch_type to have a `core_type` "
                f"specified, but scratch_type={_gpu_memref_repr(sc)} is missing it.",
            )
            return _stop(ctx)
        ctx.add(
            "MPMD_GPU_MESH_NOT_COMBINABLE",
            "call.programs[1]",
            "NotImplementedError() with no message: two Mosaic GPU meshes in one call",
            jax_message="",
            explanation=(
                "jax 0.11/0.12 cannot combine two Mosaic GPU meshes in one mpmd_map: it raises a "
                "bare NotImplementedError() while checking the meshes are compatible."
            ),
            fix=Fix(
                description="keep only the first program",
                edits=[
                    Edit(op="remove", path=f"call.programs[{k}]")
                    for k in range(len(c.programs) - 1, 0, -1)
                ],
            ),
        )
        return _stop(ctx)
    # scratch types are typed when the kernel's arguments are made (pl.kernel), or
    # allocated by run_scoped at the start of the body (plgpu.kernel)
    if c.scratch and _scratch_types(ctx):
        return _stop(ctx)
    # 4. bodies
    for prog in ctx.programs:
        if _body(ctx, prog.stmts):
            return _stop(ctx)
        for i, cap in enumerate(c.captures) if c.captures else ():
            b = s.buffers.get(cap.buffer)
            if b is None or b.as_ref or not b.shape or not _capture_used(prog.stmts, cap.name):
                continue
            info = ctx.r.captures[cap.name].info  # (the global array without shard_map)
            dims = ",".join(map(str, b.shape)) if info is None else info.jax_dims()
            ctx.jax(
                "MPMD_CAPTURED_ARRAY",
                f"call.captures[{i}]",
                f"The kernel function in mpmd_map program{prog.index} at <scenario> captures "
                "non-scalar array constants "
                f"[{short(b.dtype)}[{dims}]]. "
                "You can only close over scalars and Refs; arrays must be passed as explicit "
                "inputs.",
                fix=fixes_for.capture_to_arg(s, i),
            )
            return _stop(ctx)
    # 5. closed-over Refs aliasing an argument
    if c.captures and c.entry == "pl.kernel" and _closed_ref_alias(ctx):
        return _stop(ctx)
    if s.device_mesh is not None and s.run.shard_map is False and sharded_operand(ctx.r):
        # mpmd_map's abstract eval: an array operand sharded over the device mesh (a
        # sharded Ref's is raised when the call is lowered: ``check_lower``)
        report_not_manual(ctx, "trace")
        return _stop(ctx)


def report_not_manual(ctx: Ctx, stage: str) -> None:
    """MPMD_NOT_MANUAL at ``stage``: the call is made with no mesh set (the abstract
    mesh JAX asks has no axes) on an operand sharded over the device mesh."""
    ctx.jax(
        "MPMD_NOT_MANUAL",
        "run.shard_map",
        "mpmd_map requires all mesh axes to be Manual, got ()",
        stage=stage,
        fix=Fix(
            description="run the kernel under jax.shard_map (run.shard_map: true)",
            edits=[Edit(op="replace", path="run.shard_map", value=True)],
        ),
    )


def _closed_ref_alias(ctx: Ctx) -> bool:
    """A captured Ref that is also passed as an argument, used in a body."""
    s = ctx.s
    c = s.call
    arg_bufs = {
        buf for a in c.args for buf in ([a.buffer] if isinstance(a, BufferArg) else a.tuple)
    }
    for i, cap in enumerate(c.captures):
        b = s.buffers.get(cap.buffer)
        if b is None or not b.as_ref or cap.buffer not in arg_bufs:
            continue
        if not any(_capture_used(p.stmts, cap.name) for p in ctx.programs):
            continue
        ctx.jax(
            "MPMD_CLOSED_REF_ALIAS",
            f"call.captures[{i}]",
            "Closed-over ref aliases with a passed-in ref is not supported.",
            fix=fixes_for.drop_capture(s, i),
        )
        return True
    return False


def _dup_ref(ctx: Ctx) -> bool:
    """``mpmd_map``'s argument check: the same Ref passed twice (MPMD_DUP_REF)."""
    s = ctx.s
    seen: dict[str, tuple[int, int | None]] = {}
    arg: Any
    for i, arg in enumerate(s.call.args):
        # (``type() is``: no subclasses, and isinstance of a model class is an ABC check)
        one = type(arg) is BufferArg
        leaves = [arg.buffer] if one else list(arg.tuple)
        for j, buf in enumerate(leaves):
            b = s.buffers.get(buf)
            if b is None or not b.as_ref:
                continue
            if buf in seen:
                first = seen[buf]
                where = f"call.args[{first[0]}]" + (
                    "" if first[1] is None else f".tuple[{first[1]}]"
                )
                path = f"call.args[{i}]" + ("" if one else f".tuple[{j}]")
                ctx.jax(
                    "MPMD_DUP_REF",
                    path,
                    "Cannot pass the same ref into a mpmd map multiple times",
                    explanation=(
                        f"Buffer {buf!r} is a Ref (as_ref) and reaches the kernel twice: "
                        f"at {where} "
                        f"and at {path}. mpmd_map gives each Ref argument one kernel parameter; "
                        "two views of one Ref count as the same Ref even when they do not overlap."
                    ),
                    fix=fixes_for.dup_ref(s, i, None if one else j, first),
                )
                return True
            seen[buf] = (i, None if one else j)
    return False


def _aliased_params(ctx: Ctx) -> None:
    """``plgpu.kernel`` given one Ref twice (JAX accepts it; ``pl.kernel`` refuses it,
    MPMD_DUP_REF): its parameters are one memory. ALIASED_REF (a warning) where one
    is written and the other read or written."""
    s = ctx.s
    params: dict[str, list[str]] = {}  # an as_ref buffer -> the parameters given it
    for a in s.call.args:
        if type(a) is BufferArg and (given := s.buffers.get(a.buffer)) is not None and given.as_ref:
            params.setdefault(a.buffer, []).append(a.param)
    shared = {p for ps in params.values() if len(ps) > 1 for p in ps}
    if not shared:
        return
    # parameter -> (the first statement reading it, the first writing it)
    used: dict[str, dict[str, Path]] = {}
    for prog in ctx.programs:
        for st in prog.stmts:
            fields = getattr(st.node, "ref_fields", None)
            for f, _, access in fields() if fields is not None else ():
                root = st.refs.get(f)
                while root is not None and root.parent is not None:
                    root = root.parent
                if root is not None and root.name in shared and access in ("read", "write"):
                    used.setdefault(root.name, {}).setdefault(access, st.path)
    for buf, ps in params.items():
        for i, p in enumerate(ps):
            for q in ps[i + 1 :]:
                if p == q:
                    continue
                writes = [x for x in (p, q) if "write" in used.get(x, {})]
                if not writes:
                    continue
                w = writes[0]
                other = q if w == p else p
                how = "write" if "write" in used.get(other, {}) else "read"
                if how == "read" and "read" not in used.get(other, {}):
                    continue
                at = used[other][how]
                ctx.add(
                    "ALIASED_REF",
                    used[w]["write"],
                    f"{w} and {other} are one Ref ({buf!r}) passed twice to plgpu.kernel: "
                    f"{w} is written here and {other} is {'written' if how == 'write' else 'read'} "
                    f"at {format_path(at)}; a write "
                    "through either changes both",
                    severity="warning",
                    stage="trace",
                )


def _scratch_types(ctx: Ctx) -> bool:
    """Each scratch buffer's physical type, in order (its layout stack as stacked:
    ``layout_rules.physical_shape``); then ``pl.kernel`` (mpmd_map), which does not take
    the TransformedRef a layout makes."""
    c = ctx.s.call
    for name, sc in c.scratch.items():
        found = sc.type_error()
        if found is not None:
            e, field = found
            ctx.raised(e, f"call.scratch.{name}.{field}")
            return True
    for name, sc in c.scratch.items() if c.entry == "pl.kernel" else ():
        if sc.transforms:
            ctx.jax(
                "JAX_ASSERTION",
                f"call.scratch.{name}.transforms[0]",
                "",
                explanation="pl.kernel (mpmd_map) cannot take scratch with tiling or "
                "swizzle transforms: their refs are TransformedRefs, which mpmd_map does "
                "not support, and an internal assertion fails. Use plgpu.kernel.",
                fix=Fix(
                    description="use plgpu.kernel, which allocates transformed scratch",
                    edits=[Edit(op="replace", path="call.entry", value="plgpu.kernel")],
                ),
            )
            return True
    return False


def _trailing(sc: Any, k: int) -> int:
    """The trailing dimension a scratch's ``k``-th transform sees: a tiling before it
    makes its tile's last dimension the trailing one."""
    trailing = sc.shape[-1] if sc.shape else 0
    for t in sc.transforms[:k]:
        if t.LOWERS_AS == "tiling" and t.tile:
            trailing = t.tile[-1]
    return trailing


def _bad_operands(ctx: Ctx, updaters: list[tuple[int, int, str]], plgpu: bool) -> bool:
    """Operands that are not arrays or Refs: ``x.at[...]`` of an array, and (for
    plgpu.kernel) any view of a Ref."""
    s = ctx.s
    c = s.call
    items: list[tuple[int, int, str, str]] = [(i, j, b, "updater") for i, j, b in updaters]
    if plgpu:
        for a in ctx.args:
            if c.args[a.index].transforms:
                for j, leaf in enumerate(a.leaves):
                    buf = leaf.buffer
                    b = s.buffers.get(buf)
                    if b is not None and b.as_ref:
                        items.append((a.index, j, buf, "view"))
    if not items:
        return False
    i, j, buf, kind = min(items)
    b = s.buffers[buf]
    path = f"call.args[{i}].transforms"
    if kind == "view":
        ctx.jax(
            "ARG_VIEW_PLGPU",
            path,
            "TransformedRefs cannot be abstractified.",
            explanation="plgpu.kernel passes its operands through jax.custom_vmap, which "
            "accepts arrays and Refs but not views of Refs: make the view inside the body.",
        )
        return True
    r = ctx.array_errors[(i, j)]  # (the array as it was when ``.at`` made the helper)
    shape = sharding.typed_dims(r.shape, r.spec)
    ctx.jax(
        "ARG_TRANSFORM_ON_ARRAY",
        path,
        f"Argument '_IndexUpdateRef(JitTracer({r.dtype}[{shape}]), {r.helper_index})' of "
        "type '<class 'jax._src.numpy.array_methods._IndexUpdateRef'>' is not a valid JAX type",
        explanation=f"`.at[...]` of buffer {buf!r}, a plain array, is the array's update "
        "helper, not a view: set `as_ref: true`, or make the view inside the body.",
        fix=Fix(
            description=f"pass {buf!r} as a Ref (as_ref: true)",
            edits=[Edit(op="replace", path=f"buffers.{buf}.as_ref", value=True)],
        ),
    )
    return True


def _capture_used(stmts: list[Stmt], name: str) -> bool:
    return any(b.kind == "capture" and b.name == name for st in stmts for b in st.refs.values())


def _stop(ctx: Ctx) -> None:
    ctx.trace_failed = True


def _gpu_memref_repr(sc: Any) -> str:
    """A scratch type as JAX prints it (``GPUMemoryRef(inner_aval=...)``)."""
    shape = ",".join(map(str, sc.shape))
    space = sc.memory_space
    return (
        f"GPUMemoryRef(inner_aval=ShapedArray({sc.dtype}[{shape}]), "
        f"memory_space=<MemorySpace.{space}: '{space.lower()}'>, transforms=(), layout=None, "
        "collective=None)"
    )


def _report_steps(ctx: Ctx, steps: list[Step]) -> bool:
    """Report a stack's notes and the error JAX raises while applying it.

    True when that error stops tracing. A lazy error that no step has raised yet
    waits in the view's ``pending`` (reported where the view is used).
    """
    for st in steps:
        for n in st.notes:
            if n.stage == "trace" or n.severity == "warning":
                ctx.add(n.code, n.path, n.message, severity=n.severity, stage=n.stage)
            else:
                ctx.deferred.append((n, n.path))
        if st.error is not None and st.after is None:
            _raise(ctx, st.error, st)
            return st.error.stage in ("trace", "build", "schema")
    return False


def _raise(ctx: Ctx, e: Any, st: Step | None = None) -> None:
    """Report a step error (its own field path) with its fix."""
    if e.jax_type:
        tpath = e.path[: -len(e.field) - 1] if e.field else e.path
        ctx.raised(
            e,
            e.path,
            stage=e.stage,
            fix=fixes_for.step_fix(ctx.s, tpath, e, st.before if st else None),
        )
    else:
        ctx.add(e.code, e.path, e.message, stage=e.stage)


class TraceCtx:
    """What a statement op's ``trace`` rule sees: its refs, resolved, and how to report
    (one per body, ``st`` each statement in turn)."""

    __slots__ = ("ctx", "st", "ended")

    def __init__(self, ctx: Ctx, st: Stmt):
        self.ctx, self.st, self.ended = ctx, st, False

    @property
    def path(self) -> Path:
        return self.st.path

    @property
    def entry(self) -> str:
        return self.ctx.s.call.entry

    def info(self, field: str) -> RefInfo:
        info = self.st.refs[field].info
        assert info is not None
        return info

    def binding(self, field: str) -> Binding:
        """The ref a field names, with its whole transform stack."""
        return self.st.refs[field]

    def static(self, e: Any) -> bool:
        """The expression is a Python int where this statement is traced."""
        return is_static(e, self.st)

    def dtype(self, e: Any) -> str | None:
        """JAX's dtype of ``e``'s value here (``expr.value_dtype``: None for a Python
        int)."""
        return E.value_dtype(e, self.st.load_dtype, loop_dtypes(self.st))

    def use(self, field: str) -> bool:
        """A load or store computes the view's type: a waiting lazy error is raised."""
        info = self.st.refs[field].info
        if info is not None and info.pending is not None:
            _raise(self.ctx, info.pending)
            return True
        return False

    def store(self, field: str, shape: tuple[int, ...], dtype: str, weak: bool = False) -> bool:
        """``field[...] = `` a value of ``shape`` and ``dtype`` (``weak``: weakly typed, a
        Python number's type)."""
        info = self.st.refs[field].info
        assert info is not None
        return _store(self.ctx, self.st, field, info, shape, dtype, weak)

    def store_to_array(self) -> bool:
        return _store_to_array(self.ctx, self.st)

    def root_space(self, field: str) -> str:
        """The memory space of the untransformed ref: the view's own (a view keeps its
        ref's space: ``shapes.derive``; ``_root``'s first)."""
        info = self.st.refs[field].info
        assert info is not None
        return info.memory_space

    def base_type(self, field: str) -> str:
        return _base_type(self.ctx, self.st.refs[field])

    def jax(self, code: str, path: Path | str, message: str, **kw: Any) -> None:
        self.ctx.jax(code, path, message, **kw)

    def end_body(self) -> bool:
        """The rest of the body is never traced (not an error)."""
        self.ended = True
        return False


def _body(ctx: Ctx, stmts: list[Stmt]) -> bool:
    """One program's statements in order; True when tracing stops."""
    if not stmts:
        return False
    t = TraceCtx(ctx, stmts[0])
    for st in stmts:
        if not st.ok:
            return True  # a NameError in the generated code
        # (a statement outside any loop or condition: always traced, no unrolled loop)
        if st.scope and ctx.never_traced(st):
            continue  # inside pl.when(False) or a Python loop with no iteration
        node = st.node
        if _zero_division(ctx, st):
            return True
        if st.loads:
            if (
                _load_ranks(ctx, st)
                or _index_shapes(ctx, st)
                or _data_dtypes(ctx, st)
                or _data_shapes(ctx, st)
            ):
                return True
        elif st.exprs and _typed_exprs(st) and _data_dtypes(ctx, st):
            return True
        if type(node) is Let:  # (no subclasses; a failing isinstance is a slow ABC check)
            if _report_steps(ctx, st.steps):
                return True
            if st.scope and _unrolled_bounds(ctx, st):
                return True
            continue
        if st.unbound is not None:  # lax.axis_index of a name the kernel does not know
            sub, name = st.unbound
            t.st = st
            if any(t.use(f) for f in node.loaded_before(sub, name)):
                return True  # (a load before the name raised)
            read = [e for _, field, e in st.exprs if field == sub]
            ctx.jax("UNBOUND_AXIS", sub_path(st.path, sub), E.unbound_message(name, read))
            return True
        if not st.typed:
            continue  # a tuple used as a ref, or a failed view: reported elsewhere
        t.st = st
        if node.trace(t):
            return True
        if t.ended:
            break
    return False


def _zero_division(ctx: Ctx, st: Stmt) -> bool:
    """``//`` or ``%`` of Python ints by zero in an expression of ``st`` (constants and
    axis sizes: no traced value, so Python computes it while JAX traces the statement,
    and raises ZeroDivisionError; a traced one is int32 arithmetic, see mpmd_lab.expr)."""
    for k, field, e in st.exprs:
        if e.python_divisions():
            where = st.path if k < 0 else (*st.path, "transforms", k)
            if _report_zero(ctx, where, field, e):
                return True
    return False


def _load_ranks(ctx: Ctx, st: Stmt) -> bool:
    """A load with more indices than its ref has dims (``ids_ref[b, 0]`` of a 1-D
    table): JAX's ``NDIndexer`` refuses it while tracing (AT_TOO_MANY_INDICES), so no
    value is loaded and the check must not go on as if one were."""
    for prefix, op in expr_ops(st.node):
        for field, e in op.exprs():
            for r in E.data_reads(e):
                b = st.loads.get(r.ref)
                if not isinstance(r, E.Load) or b is None or b.info is None:
                    continue
                shape = tuple(b.info.shape)
                if len(r.index) <= len(shape):
                    continue
                shown = [repr(i.value) if isinstance(i, E.Const) else _TRACED for i in r.index]
                ctx.jax(
                    "AT_TOO_MANY_INDICES",
                    sub_path(st.path, prefix + field),
                    "`indices` must not be longer than `shape`: "
                    f"indices=({', '.join(shown)}{',' if len(shown) == 1 else ''}), "
                    f"shape={shape!r}",
                    jax_type="ValueError",
                    stage="trace",
                )
                return True
    return False


#: how JAX prints a traced int32 scalar index in NDIndexer's messages
_TRACED = "JitTracer(int32[])"


def _typed_exprs(st: Stmt) -> bool:
    """Whether an expression of ``st``, which loads nothing, may be of another dtype than
    int32 (or a Python int): it holds a truth value, or names a loop variable that
    counts in the dtype of loaded bounds (``_data_dtypes`` looks at it)."""
    for _, _, e in st.exprs:
        if e.has_truth:
            return True
    for s in st.scope:
        if s.loads:
            return True
    return False


def _data_dtypes(ctx: Ctx, st: Stmt) -> bool:
    """A device id or a loop bound has JAX's dtype (``expr.value_dtype``: what it loads,
    a comparison's bool, a loop variable's where its bounds are not int32): JAX wants an
    int32 device id when it makes the peer view or the signal (DEVICE_ID_DTYPE), and
    ``lax.fori_loop`` bounds of one type (LOOP_BOUND_DTYPE, its ``bound_dtype_error``).
    A constant that is no comparison is a Python int (JAX takes it), not looked at."""
    names: dict[str, str] | None = None
    for prefix, op in expr_ops(st.node):
        bounds: dict[str, str | None] = {}
        typed = traced = False
        for field, e in op.exprs():
            if e.is_const and not e.is_bool:
                continue  # (a Python int)
            traced = traced or not e.is_const
            kind = op.expr_kind(field)
            if kind != "device" and kind != "bound":
                continue
            if names is None:
                names = loop_dtypes(st)
            dtype = E.value_dtype(e, st.load_dtype, names)
            if kind == "bound":
                bounds[field] = dtype
                typed = True
                continue
            if dtype is not None and dtype != "int32":
                path = sub_path(st.path, prefix + field)
                fix = fixes_for.loaded_as_int32(ctx.s, e, st.loads, lambda d: d != "int32")
                ctx.jax(
                    "DEVICE_ID_DTYPE",
                    path,
                    f"`device_id`s must be an int32 value, but got {dtype}",
                    jax_type="ValueError",
                    fix=fix or fixes_for.counted(ctx.s, truth_fields(ctx)),
                )
                return True
        if typed:
            msg = op.bound_dtype_error(bounds.get("start"), bounds.get("stop"))
            if msg is not None:
                start, stop = (e for _, e in op.exprs())
                fix = fixes_for.loaded_as_int32(
                    ctx.s, E.BinOp("+", start, stop), st.loads, lambda d: d != "int32"
                )
                path = sub_path(st.path, prefix + "start")
                fix = fix or fixes_for.counted(ctx.s, truth_fields(ctx))
                ctx.jax("LOOP_BOUND_DTYPE", path, msg, jax_type="TypeError", fix=fix)
                return True
            found = op.bool_bounds_error(bounds.get("start"), bounds.get("stop"), traced)
            if found is not None:
                path = sub_path(st.path, prefix + "start")
                fix = fixes_for.counted(ctx.s, truth_fields(ctx))
                ctx.jax(found[0], path, found[1], jax_type="TypeError", fix=fix)
                return True
    return False


def loop_dtypes(st: Stmt) -> dict[str, str]:
    """The variables of the loops around ``st`` whose bounds are loaded from a ref of
    another dtype than int32 (``pl.loop`` over float bounds counts in floats)."""
    out: dict[str, str] = {}
    for s in st.scope:
        if not s.loads:
            continue
        bounds = [E.value_dtype(e, s.load_dtype, out) for _, e in s.node.exprs()]
        dtype = E.combine_dtypes(*bounds) if len(bounds) == 2 else None
        if dtype is not None and dtype != "int32":
            out[s.node.var] = dtype
    return out


def truth_fields(ctx: Ctx) -> list[tuple[Path, E.Expr]]:
    """Every device id and loop bound of the kernel that is a truth value (a bool: a
    comparison, a sum of them), with its field path (``fixes_for.counted`` counts them
    as int32s)."""
    out = []
    for p in ctx.programs:
        for st in p.stmts:
            for prefix, op in expr_ops(st.node) if st.exprs else ():
                for field, e in op.exprs():
                    if (e.is_const and not e.is_bool) or op.expr_kind(field) not in (
                        "device",
                        "bound",
                    ):
                        continue
                    if E.value_dtype(e, st.load_dtype) == "bool":
                        out.append((sub_path(st.path, prefix + field), e))
    return out


def load_shapes(st: Stmt) -> Callable[[str], tuple[int, ...] | None]:
    """The shape of each ref ``st``'s expressions load, by name (None: unknown)."""

    def shape(name: str) -> tuple[int, ...] | None:
        b = st.loads.get(name)
        return tuple(b.info.shape) if b is not None and b.info is not None else None

    return shape


def short_loads(ctx: Ctx) -> list[tuple[Path, E.Expr, Callable[[str], tuple[int, ...] | None]]]:
    """Every expression of the kernel that loads, with its field path and the shapes of
    the refs it loads (``fixes_for.index_loads`` indexes the short loads among them)."""
    out = []
    for p in ctx.programs:
        for st in p.stmts:
            if st.loads:
                shape_of = load_shapes(st)
                for field, e in expr_fields(st.node):
                    if "load" in e.calls():
                        out.append((sub_path(st.path, field), e, shape_of))
    return out


def _array_start(op: Any, shape_of: Callable[[str], tuple[int, ...] | None]) -> bool:
    """A loop whose start is an array: its counter is one, and JAX traces the body (an
    error there comes first) before it compares the counter with the stop."""
    return any(f == "start" and E.value_shape(e, shape_of) for f, e in op.exprs())


def _data_shapes(ctx: Ctx, st: Stmt) -> bool:
    """A load with fewer indices than its ref has dims (``off_ref[...]`` of a 1-D table)
    loads an array (``E.value_shape``), not a scalar: ``pl.when`` refuses it as its
    condition (``lax.cond``'s COND_PRED_SHAPE), and a loop up to it compares its counter
    with an array (``lax.while_loop``'s LOOP_BOUND_SHAPE), both at trace. As a device id
    or a ``pl.ds`` start it traces, and the lowering refuses it (``lower._index_dtype``)."""
    shape_of = load_shapes(st)
    for prefix, op in expr_ops(st.node):
        for field, e in op.exprs():
            kind = op.expr_kind(field)
            if kind not in ("cond", "bound") or "load" not in e.calls():
                continue
            shape = E.value_shape(e, shape_of)
            if not shape or (kind == "bound" and (field != "stop" or _array_start(op, shape_of))):
                continue  # (a loop from an array: its counter is one; not followed here)
            dims = ",".join(map(str, shape))
            path = sub_path(st.path, prefix + field)
            fix = fixes_for.index_loads(ctx.s, [(path, e, shape_of), *short_loads(ctx)])
            if kind == "cond":
                dtype, weak_type = E.value_type(e, st.load_dtype)
                dtype, weak = dtype or "int32", "~" if weak_type else ""
                msg = (
                    f"Pred must be a scalar, got JitTracer({weak}{dtype}[{dims}]) of shape "
                    f"{shape!r}."
                )
                ctx.jax("COND_PRED_SHAPE", path, msg, jax_type="TypeError", fix=fix)
                return True
            msg = (
                "cond_fun must return a boolean scalar, but got output type(s) "
                f"[ShapedArray(bool[{dims}])]."
            )
            ctx.jax("LOOP_BOUND_SHAPE", path, msg, jax_type="TypeError", fix=fix)
            return True
    return False


def int_index_groups(op: Any) -> list[list[tuple[str, E.Expr | None, E.Expr]]]:
    """The integer entries JAX's ``NDIndexer`` broadcasts together: a view step's
    (``x_ref.at[ids_ref[...], 0]``; a statement has none), and each load's in an
    expression (``t_ref[ids_ref[...], 0]``), as (field, the field's expression where
    the entries are a load's, the entry)."""
    ints = set() if isinstance(op, StatementOp) else {id(x) for x in op.int_indices()}
    groups: list[list[tuple[str, E.Expr | None, E.Expr]]]
    groups = [[(f, None, e) for f, e in op.exprs() if id(e) in ints]]
    for f, e in op.exprs():
        if "load" in e.calls():
            groups += [
                [(f, e, i) for i in r.index] for r in E.data_reads(e) if isinstance(r, E.Load)
            ]
    return groups


def _index_shapes(ctx: Ctx, st: Stmt) -> bool:
    """Integer entries whose shapes do not broadcast (``x_ref.at[ids_ref[...],
    ids2_ref[...]]`` of tables of 4 and 2): JAX's ``NDIndexer`` raises ValueError where
    the view or the load is made, at trace (its message's f-string is missing its ``f``:
    JAX prints the braces). Shapes that broadcast are the lowering's
    (``lower._index_broadcast``)."""
    shape_of = load_shapes(st)
    for prefix, op in expr_ops(st.node):
        for group in int_index_groups(op):
            shapes = [E.value_shape(i, shape_of) for _, _, i in group]
            if len(shapes) < 2 or not any(shapes):
                continue
            try:
                np.broadcast_shapes(*shapes)
            except ValueError:
                bent = next(g for g, sh in zip(group, shapes, strict=True) if sh)
                ctx.jax(
                    "INDEX_BROADCAST_SHAPES",
                    sub_path(st.path, prefix + bent[0]),
                    "Cannot broadcast shapes for indexing: {indexer_shapes}",
                    jax_type="ValueError",
                )
                return True
    return False


def _report_zero(ctx: Ctx, path: Path, field: str, e: E.Expr) -> bool:
    """A division by zero in ``e`` (at ``path``'s sub-field ``field``), reported."""
    for d in e.python_divisions():
        if static_value(d.b, ctx) == 0:
            where = sub_path(path, field)
            ctx.jax(
                "EXPR_ZERO_DIVISION", where, E.ZERO_DIVISION[d.op], jax_type="ZeroDivisionError"
            )
            return True
    return False


def _unrolled_bounds(ctx: Ctx, st: Stmt) -> bool:
    """A view inside unrolled (Python) loops: an index expression of their variables is a
    Python int when JAX traces each iteration, so ``NDIndexer`` checks the bounds of that
    iteration's slices (``Out of bound slice``, raised by the first one out of bounds).
    ``st`` is inside a loop or condition (``st.scope``)."""
    if not python_vars(st):
        return False  # no unrolled loop around it
    envs: list[dict[str, int]] | None = None
    for step in st.steps:
        t = st.node.transforms[step.index]
        if not t.INDEXES or step.after is None:
            continue
        entries = [_plain(e) for e in t.index]
        loose = [
            (k, j)
            for k, e in enumerate(entries)
            for j, part in _parts(e)
            if isinstance(part, str) and is_static(E.parse(part), st)
        ]
        if not loose:
            continue
        if envs is None:
            envs = loop_envs(st.scope, ctx, python_only=True) or []
        for env in envs:
            concrete = list(entries)
            for k, j in loose:
                ds = list(concrete[k]["ds"])
                value = static_value(E.parse(ds[j]), ctx, env)
                if value is None:
                    break
                ds[j] = value
                concrete[k] = {"ds": ds}
            else:
                found = L.index_bounds_error_at(step.before.shape, concrete)
                if found is None:
                    continue
                err, dim = found
                at = ", ".join(f"{k}={v}" for k, v in env.items())
                ctx.jax(
                    err.code,
                    (*st.path, "transforms", step.index, "index", dim),
                    err.message,
                    jax_type=err.jax_type,
                    stage="trace",
                    explanation=f"In the unrolled loop's iteration {at} this slice starts "
                    "or ends past the dimension: its start is a Python int there, and JAX "
                    "checks it when it traces that iteration.",
                )
                return True
    return False


def _plain(e: Any) -> Any:
    """An index entry in its JSON form (``{"ds": [start, size]}``, ``[lo, hi]``, ...)."""
    return e.model_dump() if hasattr(e, "model_dump") else e


def _parts(e: Any) -> list[tuple[int, Any]]:
    """The start and size of a ``pl.ds`` entry (the parts that may be expressions)."""
    if isinstance(e, dict) and isinstance(e.get("ds"), list):
        return list(enumerate(e["ds"]))
    return []


def _store_to_array(ctx: Ctx, st: Stmt) -> bool:
    ctx.jax(
        "STORE_TO_ARRAY",
        (*st.path, "dst"),
        "JAX arrays are immutable and do not support in-place item assignment. Instead of "
        "x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
        "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html",
        explanation="The destination is a captured plain array, which cannot be written; "
        "capture a Ref (`as_ref: true`) or write an output.",
    )
    return True


def _store(
    ctx: Ctx, st: Stmt, field: str, dst: RefInfo, shape: tuple, dtype: str, weak: bool = False
) -> bool:
    if not dst.is_ref:
        return _store_to_array(ctx, st)
    if tuple(shape) != dst.shape:
        ctx.jax(
            "SWAP_SHAPE_MISMATCH",
            st.path,
            f"Invalid shape for `swap`. Ref shape: {_base_shape(ctx, st, field)!r}. "
            "Expected shape: "
            f"{dst.shape!r}. Value shape: {tuple(shape)!r}. Transforms: {_transforms_repr(dst)}. ",
        )
        return True
    if dtype != dst.dtype:
        # (ref_swap casts an integer value to a 32-bit-or-narrower integer ref implicitly,
        # and a weakly typed float to a float ref; an int64 or float64 output ref, which
        # x64-off JAX keeps, takes only its own dtype)
        cast = (is_int(dtype) and is_int(dst.dtype)) or (
            weak and is_float(dtype) and is_float(dst.dtype)
        )
        if not cast or canonical(dst.dtype) != dst.dtype:
            ctx.jax(
                "SWAP_DTYPE_MISMATCH",
                st.path,
                f"Invalid dtype for `swap`. Ref dtype: {dst.dtype}. Value dtype: {dtype}. ",
            )
            return True
    return False


def _base_shape(ctx: Ctx, st: Stmt, field: str) -> tuple:
    b: Binding = st.refs[field]
    root = ctx.root_shape(b)
    if root is not None:
        return root
    assert b.info is not None
    return b.info.shape


def _transforms_repr(info: RefInfo) -> str:
    return "()" if not info.transformed else "(...)"


def _root(ctx: Ctx, b: Binding) -> tuple[str, tuple, str]:
    """(memory space, shape, dtype) of the untransformed ref under a view."""
    spec = b.root  # (what declares it: ``Plan.root_spec``)
    if spec is not None:
        o = b.origin[0]
        if o.startswith("out:"):
            return "GMEM", tuple(spec.shape), spec.dtype
        if o.startswith("scratch:"):
            return spec.memory_space, tuple(spec.shape), spec.dtype
    assert b.info is not None
    root = ctx.root_shape(b) or b.info.shape
    return b.info.memory_space, tuple(root), b.info.dtype


#: the kinds of binding a kernel gets from its caller (``Binding.kind``)
_INPUTS = ("arg", "leaf", "capture")


def _base_type(ctx: Ctx, b: Binding) -> str:
    """The untransformed ref under a view as JAX prints its type: an argument's or a
    capture's as the kernel gets it (``RefInfo.jax_type``: a ``jax.new_ref`` buffer, the
    global array without shard_map), else what declares it."""
    root = b
    while root.parent is not None:
        root = root.parent
    info = root.info
    if root.kind in _INPUTS and not root.stack and info is not None:
        return info.jax_type()
    space, shape, dtype = _root(ctx, b)
    return base_info(shape, dtype, space, new_ref=info is not None and info.new_ref).jax_type()


def _ref_type(info: RefInfo) -> str:
    return f"Ref<{info.memory_space.lower()}>{{{info.dtype}[{','.join(map(str, info.shape))}]}}"
