"""Trace-stage rules, walked in the order ``jax.jit(f).trace`` meets them.

1. each argument's transforms (evaluated by the caller before the kernel call);
2. ``mpmd_map``'s argument check: the same Ref passed twice (MPMD_DUP_REF);
3. several programs: scratch without a core type, Mosaic GPU meshes that cannot combine;
4. each program's body, statement by statement (view transforms, loads and stores),
   then its return value and captured arrays;
5. closed-over Refs that alias an argument; device-mesh axes that are not Manual.
"""

from __future__ import annotations

from typing import Any

from toolkit.diagnostics import Edit, Fix
from toolkit.scenario import Add, BufferArg, Copy, Fill, Let, MultimemStore, Return, TmaStore
from toolkit.shapes import RefInfo, Step
from toolkit.validate import fixes_for
from toolkit.validate.context import Binding, Ctx, Stmt


def check_trace(ctx: Ctx) -> None:
    s = ctx.s
    c = s.call
    if ctx.build_failed:
        return
    # 1. argument transforms
    for a in ctx.args:
        for j, steps in enumerate(a.steps):
            leaf = "" if len(a.leaves) == 1 and isinstance(c.args[a.index], BufferArg) else ""
            del leaf
            buf = a.leaves[j][0]
            b = s.buffers.get(buf)
            if b is not None and not b.as_ref and c.args[a.index].transforms:
                # a plain array has no ref views: .at[...] is its update helper
                ctx.jax(
                    "ARG_TRANSFORM_ON_ARRAY",
                    f"{a.path}.transforms[0]",
                    f"Argument '_IndexUpdateRef(JitTracer({b.dtype}[{','.join(map(str, b.shape))}]), "
                    "...)' of type '<class 'jax._src.numpy.array_methods._IndexUpdateRef'>' is not "
                    "a valid JAX type",
                    explanation=f"Argument transforms make a view of a Ref, but buffer {buf!r} is "
                    "a plain array: set `as_ref: true`, or make the view inside the body.",
                    fix=Fix(
                        description=f"pass {buf!r} as a Ref (as_ref: true)",
                        edits=[Edit(op="replace", path=f"buffers.{buf}.as_ref", value=True)],
                    ),
                )
                return _stop(ctx)
            if _report_steps(ctx, steps, f"{a.path}.transforms"):
                return _stop(ctx)
    # 2. the same Ref passed twice
    seen: dict[str, tuple[int, int | None]] = {}
    for i, a in enumerate(c.args):
        leaves = [a.buffer] if isinstance(a, BufferArg) else list(a.tuple)
        for j, buf in enumerate(leaves):
            b = s.buffers.get(buf)
            if b is None or not b.as_ref:
                continue
            if buf in seen:
                first = seen[buf]
                where = f"call.args[{first[0]}]" + (
                    "" if first[1] is None else f".tuple[{first[1]}]"
                )
                path = f"call.args[{i}]" + ("" if isinstance(a, BufferArg) else f".tuple[{j}]")
                ctx.jax(
                    "MPMD_DUP_REF",
                    path,
                    "Cannot pass the same ref into a mpmd map multiple times",
                    explanation=(
                        f"Buffer {buf!r} is a Ref (as_ref) and reaches the kernel twice: at {where} "
                        f"and at {path}. mpmd_map gives each Ref argument one kernel parameter; "
                        "two views of one Ref count as the same Ref even when they do not overlap."
                    ),
                    fix=fixes_for.dup_ref(s, i, j if not isinstance(a, BufferArg) else None, first),
                )
                return _stop(ctx)
            seen[buf] = (i, None if isinstance(a, BufferArg) else j)
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
        ctx.jax(
            "MPMD_GPU_MESH_NOT_COMBINABLE",
            "call.programs[1]",
            "",
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
    # scratch types are typed when the kernel's arguments are made
    for name, sc in c.scratch.items():
        for k, t in enumerate(sc.transforms):
            if t.op == "swizzle" and t.bytes in (32, 64, 128) and sc.memory_space != "TMEM":
                from toolkit.shapes import bits

                elems = t.bytes * 8 // bits(sc.dtype)
                if not sc.shape or elems != sc.shape[-1]:
                    ctx.jax(
                        "SWIZZLE_TRAILING_DIM",
                        f"call.scratch.{name}.transforms[{k}]",
                        f"Swizzle {t.bytes} requires the trailing dimension to be of size "
                        f"{elems}, but got shape: {tuple(sc.shape)!r}",
                    )
                    return _stop(ctx)
    # 4. bodies
    for prog in ctx.programs:
        if _body(ctx, prog.stmts):
            return _stop(ctx)
        used = {b.name for st in prog.stmts for b in st.refs.values() if b.kind == "capture"}
        used |= {n for st in prog.stmts for b in st.refs.values() if b.kind == "view" for n in ()}
        for i, cap in enumerate(c.captures):
            b = s.buffers.get(cap.buffer)
            if b is None or b.as_ref or not b.shape or not _capture_used(prog.stmts, cap.name):
                continue
            ctx.jax(
                "MPMD_CAPTURED_ARRAY",
                f"call.captures[{i}]",
                f"The kernel function in mpmd_map program{prog.index} at <scenario> captures "
                f"non-scalar array constants [{_short(b.dtype)}[{','.join(map(str, b.shape))}]]. "
                "You can only close over scalars and Refs; arrays must be passed as explicit inputs.",
                fix=fixes_for.capture_to_arg(s, i),
            )
            return _stop(ctx)
    # 5. closed-over Refs aliasing an argument
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
        return _stop(ctx)
    if s.device_mesh is not None and s.run.shard_map is False:
        axes = ", ".join("Explicit" for _ in s.device_mesh)
        ctx.jax(
            "MPMD_NOT_MANUAL",
            "run.shard_map",
            f"mpmd_map requires all mesh axes to be Manual, got ({axes},)"
            if len(s.device_mesh) == 1
            else f"mpmd_map requires all mesh axes to be Manual, got ({axes})",
            fix=Fix(
                description="run the kernel under jax.shard_map (run.shard_map: true)",
                edits=[Edit(op="replace", path="run.shard_map", value=True)],
            ),
        )
        return _stop(ctx)


def _capture_used(stmts: list[Stmt], name: str) -> bool:
    return any(b.kind == "capture" and b.name == name for st in stmts for b in st.refs.values())


def _stop(ctx: Ctx) -> None:
    ctx.trace_failed = True


def _short(dtype: str) -> str:
    return {
        "float32": "f32",
        "float16": "f16",
        "bfloat16": "bf16",
        "int32": "i32",
        "int16": "i16",
        "int8": "i8",
        "uint32": "u32",
        "uint16": "u16",
        "uint8": "u8",
        "bool": "bool",
    }.get(dtype, dtype)


def _gpu_memref_repr(sc: Any) -> str:
    return f"GPUMemoryRef(shape={tuple(sc.shape)!r}, dtype={sc.dtype}, memory_space={sc.memory_space.lower()})"


def _report_steps(ctx: Ctx, steps: list[Step], base: str) -> bool:
    """Report a stack's notes and its trace error; True when the error stops tracing."""
    for st in steps:
        for n in st.notes:
            if n.stage == "trace" or n.severity == "warning":
                ctx.add(
                    n.code,
                    f"{base}[{st.index}]" + (f".{n.field}" if n.field else ""),
                    n.message,
                    severity=n.severity,
                    stage=n.stage,
                )
            else:
                ctx.deferred.append((n, f"{base}[{st.index}]" + (f".{n.field}" if n.field else "")))
        if st.error is not None:
            e = st.error
            path = f"{base}[{st.index}]" + (f".{e.field}" if e.field else "")
            if e.jax_type:
                ctx.jax(
                    e.code,
                    path,
                    e.message,
                    jax_type=e.jax_type,
                    stage=e.stage,
                    fix=fixes_for.step_fix(ctx.s, base, st),
                )
            else:
                ctx.add(e.code, path, e.message, stage=e.stage)
            return e.stage in ("trace", "build", "schema")
    return False


def _body(ctx: Ctx, stmts: list[Stmt]) -> bool:
    """One program's statements in order; True when tracing stops."""
    for st in stmts:
        if not st.ok:
            return True  # a NameError in the generated code
        node = st.node
        if isinstance(node, Let):
            if _report_steps(ctx, st.steps, f"{st.path}.transforms"):
                return True
            continue
        infos = {f: b.info for f, b in st.refs.items()}
        if any(v is None for v in infos.values()):
            continue  # a tuple used as a ref, or a failed view: reported elsewhere
        if isinstance(node, Copy):
            if _store(ctx, st, "dst", infos["dst"], infos["src"].shape, infos["src"].dtype):
                return True
        elif isinstance(node, Add):
            lhs, rhs = infos["lhs"], infos["rhs"]
            shape = _broadcast(lhs.shape, rhs.shape)
            if shape is None:
                ctx.jax(
                    "ADD_SHAPES",
                    st.path,
                    f"add got incompatible shapes for broadcasting: {lhs.shape!r}, {rhs.shape!r}.",
                    jax_type="TypeError",
                )
                return True
            if _store(ctx, st, "dst", infos["dst"], shape, promote(lhs.dtype, rhs.dtype)):
                return True
        elif isinstance(node, Fill):
            if not infos["dst"].is_ref:
                return _store_to_array(ctx, st)
        elif isinstance(node, TmaStore):
            src, dst = infos["src"], infos["dst"]
            if src.memory_space != "SMEM":
                ctx.jax(
                    "TMA_SRC_NOT_SMEM",
                    f"{st.path}.src",
                    f"src must be a SMEM reference, got {_ref_type(src)}",
                )
                return True
            if dst.memory_space != "GMEM":
                ctx.jax(
                    "TMA_DST_NOT_GMEM",
                    f"{st.path}.dst",
                    f"dst must be a GMEM reference, got {_ref_type(dst)}",
                )
                return True
        elif isinstance(node, MultimemStore):
            pass  # checked at GPU lowering
        elif isinstance(node, Return):
            ctx.jax(
                "MPMD_RETURNS_VALUE",
                st.path,
                f"The kernel function in mpmd_map program{st.path.split('[')[1].split(']')[0]} "
                "at <scenario> should return None. It returns a PyTree: PyTreeDef(*).",
                fix=Fix(
                    description="drop the return statement (write into an output instead)",
                    edits=[Edit(op="remove", path=st.path)],
                ),
            )
            return True
    return False


def _store_to_array(ctx: Ctx, st: Stmt) -> bool:
    ctx.jax(
        "STORE_TO_ARRAY",
        f"{st.path}.dst",
        "JAX arrays are immutable and do not support in-place item assignment. Instead of "
        "x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
        "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html",
        explanation="The destination is a captured plain array, which cannot be written; "
        "capture a Ref (`as_ref: true`) or write an output.",
    )
    return True


def _store(ctx: Ctx, st: Stmt, field: str, dst: RefInfo, shape: tuple, dtype: str) -> bool:
    if not dst.is_ref:
        return _store_to_array(ctx, st)
    if tuple(shape) != dst.shape:
        ctx.jax(
            "SWAP_SHAPE_MISMATCH",
            st.path,
            f"Invalid shape for `swap`. Ref shape: {_base_shape(ctx, st, field)!r}. Expected shape: "
            f"{dst.shape!r}. Value shape: {tuple(shape)!r}. Transforms: {_transforms_repr(dst)}. ",
        )
        return True
    if dtype != dst.dtype:
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
    return root if root is not None else b.info.shape


def _transforms_repr(info: RefInfo) -> str:
    return "()" if not info.transformed else "(...)"


def _broadcast(a: tuple, b: tuple) -> tuple | None:
    out = []
    for x, y in zip(
        ((1,) * (len(b) - len(a)) + tuple(a)), ((1,) * (len(a) - len(b)) + tuple(b)), strict=False
    ):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(out)


_FLOAT_RANK = {"float8_e4m3fn": 8, "float8_e5m2": 8, "float16": 16, "bfloat16": 16, "float32": 32}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "uint8": 8, "uint16": 16, "uint32": 32}


def promote(a: str, b: str) -> str:
    """JAX's type promotion of two (canonical) dtypes, without x64."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = a in _FLOAT_RANK, b in _FLOAT_RANK
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        wa, wb = _FLOAT_RANK[a], _FLOAT_RANK[b]
        if wa == wb:
            return "float32" if wa == 16 else "float16" if wa == 8 else a
        return a if wa > wb else b
    sa, sb = a.startswith("int"), b.startswith("int")
    wa, wb = _INT_BITS[a], _INT_BITS[b]
    if sa == sb:
        return a if wa > wb else b
    sw, uw = (wa, wb) if sa else (wb, wa)
    w = max(sw, 2 * uw)
    return f"int{min(w, 32)}"


def _ref_type(info: RefInfo) -> str:
    return f"Ref<{info.memory_space.lower()}>{{{info.dtype}[{','.join(map(str, info.shape))}]}}"
