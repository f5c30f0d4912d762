"""Resolve every name of the call in JAX's order; report unknown names (XREF_*).

Fills ``ctx.args``, ``ctx.params`` and ``ctx.programs`` for the other rules.
Transform errors themselves are reported by ``views``; this module only records
the steps.
"""

from __future__ import annotations

from mpmd_lab.scenario import BufferArg, Let, Return
from mpmd_lab.shapes import RefInfo, base_info, propagate
from mpmd_lab.validate.context import ArgInfo, Binding, Ctx, ProgramInfo, Stmt, leaf_name

_OP_FIELDS = ("src", "lhs", "rhs", "dst")
_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def _op_fields(cls: type) -> tuple[str, ...]:
    """The ref-naming fields of an op class, in evaluation order (cached)."""
    if cls not in _FIELDS_OF:
        _FIELDS_OF[cls] = tuple(f for f in _OP_FIELDS if f in cls.model_fields)
    return _FIELDS_OF[cls]


def analyse(ctx: Ctx) -> None:
    s = ctx.s
    c = s.call
    seen_params: dict[str, str] = {}

    def define(name: str, path: str, b: Binding) -> None:
        if name in seen_params:
            ctx.add(
                "XREF_DUPLICATE_NAME",
                path,
                f"kernel parameter {name!r} is already defined at {seen_params[name]}; "
                "Python rejects a function with two parameters of one name",
            )
            return
        seen_params[name] = path
        ctx.params[name] = b

    outside = ctx.bound_outside
    # arguments (the call evaluates each argument's transforms first)
    for i, a in enumerate(c.args):
        path = f"call.args[{i}]"
        leaves: list[tuple[str, RefInfo | None]] = []
        steps = []
        for j, buf in enumerate([a.buffer] if isinstance(a, BufferArg) else a.tuple):
            bpath = path + ("" if isinstance(a, BufferArg) else f".tuple[{j}]")
            b = s.buffers.get(buf)
            if b is None:
                ctx.add(
                    "XREF_UNKNOWN_BUFFER",
                    path + (".buffer" if isinstance(a, BufferArg) else f".tuple[{j}]"),
                    f"argument names buffer {buf!r}, which is not in `buffers`"
                    + (f" (there: {', '.join(sorted(s.buffers))})" if s.buffers else ""),
                )
                leaves.append((buf, None))
                steps.append([])
                continue
            shape = list(b.shape)
            if s.device_mesh and s.run.shard_map is False and shape:
                shape[0] *= s.num_devices  # no shard_map: the kernel sees the global array
            if not b.as_ref and a.transforms:
                # a plain array: the transforms are array methods (see arrays.py)
                from mpmd_lab.shapes import canonical_dtype
                from mpmd_lab.validate.arrays import apply_array

                r = apply_array(
                    tuple(shape),
                    canonical_dtype(b.dtype),
                    a.transforms,
                    f"{path}.transforms",
                    outside,
                )
                ctx.array_errors[(i, j)] = r
                steps.append([])
                ok = r.error is None and not r.updater
                leaves.append((buf, base_info(r.shape, b.dtype, "GMEM", buf) if ok else None))
                continue
            sharded = None
            if s.device_mesh and s.run.shard_map is False and shape:
                axes = tuple(s.device_mesh)
                sharded = axes[0] if len(axes) == 1 else repr(axes)
            info = base_info(shape, b.dtype, "GMEM", buf, sharded=sharded)
            st = ctx_steps(info, a.transforms, f"{path}.transforms", outside)
            steps.append(st)
            final = info if not st else st[-1].after
            leaves.append((buf, final))
            del bpath
        ctx.args.append(ArgInfo(i, path, leaves, steps))
        if len(leaves) != len(steps):  # pragma: no cover - defensive
            raise AssertionError("arg leaves and steps out of step")
        if isinstance(a, BufferArg):
            buf, info = leaves[0]
            stack = tuple((f"{path}.transforms[{k}]", t) for k, t in enumerate(a.transforms))
            define(
                a.param, path + ".param", Binding(a.param, info, "arg", path, (buf,), stack=stack)
            )
        else:
            define(a.param, path + ".param", Binding(a.param, None, "tuple", path, tuple(a.tuple)))
            for j, (buf, info) in enumerate(leaves):
                ctx.params[leaf_name(a.param, j)] = Binding(
                    leaf_name(a.param, j),
                    info,
                    "leaf",
                    f"{path}.tuple[{j}]",
                    (buf,),
                    stack=tuple((f"{path}.transforms[{k}]", t) for k, t in enumerate(a.transforms)),
                )
    for name, o in c.outputs.items():
        path = f"call.outputs.{name}"
        define(
            name,
            path,
            Binding(
                name, base_info(o.shape, o.dtype, "GMEM", name), "output", path, (f"out:{name}",)
            ),
        )
    for name, sc in c.scratch.items():
        path = f"call.scratch.{name}"
        info = base_info(sc.shape, sc.dtype, sc.memory_space, name)
        define(name, path, Binding(name, info, "scratch", path, (f"scratch:{name}",)))

    captures: dict[str, Binding] = {}
    for i, cap in enumerate(c.captures):
        path = f"call.captures[{i}]"
        b = s.buffers.get(cap.buffer)
        if b is None:
            ctx.add(
                "XREF_UNKNOWN_BUFFER",
                path + ".buffer",
                f"capture {cap.name!r} names buffer {cap.buffer!r}, which is not in `buffers`",
            )
            captures[cap.name] = Binding(cap.name, None, "capture", path, (cap.buffer,))
            continue
        space = "GMEM" if b.as_ref else "VALUE"
        shape = list(b.shape)
        if s.device_mesh and s.run.shard_map is False and shape:
            shape[0] *= s.num_devices  # no shard_map: the kernel closes over the global value
        captures[cap.name] = Binding(
            cap.name, base_info(shape, b.dtype, space, cap.buffer), "capture", path, (cap.buffer,)
        )

    for p, prog in enumerate(c.programs):
        ctx.programs.append(_program(ctx, p, prog, captures))


def ctx_steps(info: RefInfo, transforms: list, base_path: str, bound: frozenset[str]) -> list:
    return propagate(info, transforms, base_path, bound) if transforms else []


def _program(ctx: Ctx, p: int, prog, captures: dict[str, Binding]) -> ProgramInfo:
    ppath = f"call.programs[{p}]"
    out = ProgramInfo(p, ppath)
    env: dict[str, Binding] = dict(ctx.params)
    env.update(captures)
    bound = ctx.bound_in(p)
    later: dict[str, int] = {}
    for j, st in enumerate(prog.body):
        if isinstance(st, Let):
            later.setdefault(st.let, j)
    for j, st in enumerate(prog.body):
        if out.stmts and isinstance(out.stmts[-1].node, Return):
            break  # never executed: the body returned
        path = f"{ppath}.body[{j}]"
        stmt = Stmt(j, path, st)
        names = (
            [("ref", st.ref)]
            if isinstance(st, Let)
            else [(f, getattr(st, f)) for f in _op_fields(type(st))]
        )
        for field, name in names:
            b = env.get(name)
            if b is None:
                stmt.ok = False
                where = later.get(name)
                if where is not None and where >= j:
                    msg = (
                        f"{field} names view {name!r}, which is defined later "
                        f"(body[{where}]); a statement can only use names defined before it"
                    )
                else:
                    msg = (
                        f"{field} names {name!r}: no parameter, capture or earlier view has "
                        "that name"
                    )
                ctx.add("XREF_UNKNOWN_NAME", f"{path}.{field}", msg)
                continue
            stmt.refs[field] = b
        if isinstance(st, Let):
            src = stmt.refs.get("ref")
            info = None
            if src is not None and src.info is not None:
                stmt.steps = ctx_steps(src.info, st.transforms, f"{path}.transforms", bound)
                info = src.info if not stmt.steps else stmt.steps[-1].after
            own = tuple((f"{path}.transforms[{k}]", t) for k, t in enumerate(st.transforms))
            env[st.let] = Binding(
                st.let,
                info,
                "view",
                path,
                src.origin if src else (),
                stmt=j,
                stack=(src.stack if src else ()) + own,
            )
        out.stmts.append(stmt)
    return out
