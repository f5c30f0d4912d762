"""What only running reveals (JAX never raises these before a run), and interpreter limits.

- REMOTE_DEVICE_OOB: a ``remote_ref`` device id outside the device mesh (error);
- AT_SLICE_CLAMPED (reported with the view, a warning);
- PROGRAM_ID_GPU_INTERP: ``pl.program_id`` under the GPU interpreter (warning);
- OOB_INDEX / OOB_READ / OOB_WRITE: integer indices, and block-indexed (``block`` / ``pid``)
  slices, out of bounds inside the kernel (error; the GPU interpreter's codes under it);
- RACE / RACE_DETECTED: overlapping accesses from different blocks, threads or devices,
  at least one a write (error; RACE_DETECTED when the GPU interpreter's race detector
  is on and the race is within one device);
- INTERP_LIMIT: a transform the CPU interpreter cannot run (warning about this machine).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.ops import READ, BlockIndex, Let, PidIndex
from mpmd_lab.ops.peers import device_targets
from mpmd_lab.resolve import Binding, Stmt
from mpmd_lab.validate.context import Ctx

MAX_EXECUTORS = 256


def check_runtime(ctx: Ctx) -> None:
    s = ctx.s
    if ctx.build_failed:
        return
    _device_ids(ctx)
    _oob(ctx)
    interp = s.run.interpret
    for prog in ctx.programs:
        mesh = s.call.programs[prog.index].mesh
        blocks = math.prod(mesh.grid.values()) * math.prod(mesh.cluster.values())
        for st in prog.stmts:
            if isinstance(st.node, Let):
                for k, t in enumerate(st.node.transforms):
                    if t.op == "at" and any(isinstance(e, PidIndex) for e in t.index):
                        if interp == "gpu" and blocks > 1:
                            ctx.add(
                                "PROGRAM_ID_GPU_INTERP",
                                f"{st.path}.transforms[{k}]",
                                "pl.program_id is 0 in every block under the GPU interpreter: "
                                f"all {blocks} blocks use the same slice here (on a GPU they "
                                "differ); use a `block` index (lax.axis_index) instead",
                                severity="warning",
                            )
    if not ctx.trace_failed:
        _races(ctx)
    _interp_limits(ctx)


def _device_ids(ctx: Ctx) -> None:
    mesh = ctx.s.device_mesh or {}
    n = ctx.s.num_devices
    for prog in ctx.programs:
        for st in prog.stmts:
            if not isinstance(st.node, Let):
                continue
            for k, t in enumerate(st.node.transforms):
                if t.op != "remote_ref":
                    continue
                path = f"{st.path}.transforms[{k}].device"
                dev = t.device
                if isinstance(dev, str):  # an expression: evaluated on every device
                    targets = device_targets(dev, mesh) if mesh else None
                    if targets is not None and -1 in targets:
                        src = targets.index(-1)
                        ctx.add(
                            "REMOTE_DEVICE_OOB",
                            path,
                            f"device id {dev!r} is outside the device mesh on device {src} "
                            f"(devices 0..{n - 1}); JAX does not check it, and on a GPU it "
                            "addresses no device",
                        )
                    continue
                if isinstance(dev, int):
                    if mesh and len(mesh) == 1 and not 0 <= dev < n:
                        ctx.add(
                            "REMOTE_DEVICE_OOB",
                            path,
                            f"device id {dev} is outside the device mesh (devices 0..{n - 1}); "
                            "JAX does not check it, and on a GPU it addresses no device",
                        )
                    continue
                for axis, v in dev.items():
                    if axis in mesh and isinstance(v, int) and not 0 <= v < mesh[axis]:
                        ctx.add(
                            "REMOTE_DEVICE_OOB",
                            f"{path}.{axis}",
                            f"index {v} on device-mesh axis {axis!r} is outside "
                            f"0..{mesh[axis] - 1}; "
                            "JAX does not check it, and on a GPU it addresses no device",
                        )


def _oob(ctx: Ctx) -> None:
    loads: set[str] = set()
    views: dict[str, Binding] = {}  # stack step path -> a view accessed through it
    for prog in ctx.programs:
        for st in prog.stmts:
            for f, b in st.refs.items():
                if f in ("src", "lhs", "rhs"):
                    loads |= {p for p, _ in b.stack}
                for p, _ in b.stack:
                    views.setdefault(p, b)
    for n, path in ctx.deferred:
        if n.code != "OOB_INDEX":
            continue
        read = any(path.startswith(p) for p in loads)
        if ctx.s.run.interpret == "gpu":
            # the GPU interpreter checks every access: a read or a write (swap) fails
            b = next((v for p, v in views.items() if path.startswith(p + ".")), None)
            jax_msg = _int_oob_message(ctx, b, "r" if read else "w")
            ctx.add(
                "OOB_READ" if read else "OOB_WRITE",
                path,
                n.message,
                jax_message=jax_msg,
                stage="interpret",
            )
        else:
            ctx.add("OOB_INDEX", path, n.message)
    _block_oob(ctx)


def _block_oob(ctx: Ctx) -> None:
    """A block-indexed view (``block`` / ``pid`` entries) that some block places past the
    end of its ref. JAX never checks it at trace; the GPU interpreter raises OOB_READ /
    OOB_WRITE in the first block that goes out (``pl.program_id`` is 0 there)."""
    s = ctx.s
    interp_gpu = s.run.interpret == "gpu"
    for prog in ctx.programs:
        mesh = s.call.programs[prog.index].mesh
        axes: dict[str, int] = {**mesh.grid, **mesh.cluster}
        if mesh.threads is not None and mesh.threads.name:
            axes[mesh.threads.name] = mesh.threads.count
        if math.prod(axes.values()) > MAX_EXECUTORS * 16:
            continue
        execs = [
            dict(zip(axes, vals, strict=True))
            for vals in itertools.product(*(range(n) for n in axes.values()))
        ]
        for st in prog.stmts:
            if not st.ok:
                break
            # a copy reads its source before it writes (swaps) its destination
            for f, kind in sorted(_accesses(st), key=lambda a: a[1] != "r"):
                b = st.refs.get(f)
                if b is None or b.info is None or not b.info.is_ref or b.info.region is None:
                    continue
                hit = _first_oob(ctx, b, execs, mesh, interp_gpu)
                if hit is None:
                    continue
                _report_block_oob(ctx, st, f, kind, b, hit, interp_gpu, mesh)
                if interp_gpu:
                    return  # the interpreter stops at the first failing access


def _first_oob(ctx: Ctx, b: Binding, execs: list[dict], mesh: Any, interp_gpu: bool) -> Any:
    """(executor, base dim, access range per base dim, base shape) of the first block whose
    view of ``b`` leaves the base ref along a block-indexed dim; None if none does."""
    region = b.info.region
    dyn = [k for k, d in enumerate(region) if d.axis is not None]
    if not dyn:
        return None
    root = ctx.root_shape(b)
    if root is None or len(root) != len(region):
        return None
    root = list(root)
    o = b.origin[0] if b.origin else ""
    if (
        ctx.s.device_mesh
        and ctx.s.run.shard_map is False
        and not o.startswith(("out:", "scratch:"))
    ):
        root[0] *= ctx.s.num_devices  # no shard_map: the kernel sees the global array
    for e in execs:
        box = _box(region, e, mesh, interp_gpu, list(mesh.grid))
        if box is None:  # an index that needs a loop variable or a device's coordinates
            continue
        for k in dyn:
            lo, hi = box[k]
            if lo < 0 or hi > root[k]:
                return e, k, box, tuple(root)
    return None


def _report_block_oob(
    ctx: Ctx, st: Stmt, f: str, kind: str, b: Binding, hit: Any, interp_gpu: bool, mesh: Any
) -> None:
    e, k, box, root = hit
    d = b.info.region[k]
    where = ", ".join(f"{a}={v}" for a, v in e.items()) or "the only block"
    what = "reads" if kind == "r" else "writes"
    msg = (
        f"in block {where} this view {what} elements [{box[k][0]}, {box[k][1]}) of dimension "
        f"{k} of its ref, which has only {root[k]}; JAX does not check block-indexed slices "
        "inside a kernel"
    )
    path = _block_entry_path(b, d.axis) or f"{st.path}.{f}"
    fix = _grid_fix(ctx, st, d, root[k], mesh)
    if not interp_gpu:
        ctx.add("OOB_INDEX", path, msg, stage="interpret", fix=fix)
        return
    jax_msg = _interp_message(kind, box, b.info, root)
    ctx.add(
        "OOB_READ" if kind == "r" else "OOB_WRITE",
        path,
        msg,
        jax_message=jax_msg,
        stage="interpret",
        fix=fix,
    )


def _interp_message(kind: str, box: list, info: Any, root: tuple[int, ...]) -> str:
    """The GPU interpreter's out-of-bounds message (its allocation key elided): the access
    range per base dim (an integer-indexed dim as its index), and the buffer's shape."""
    shown = set(info.view_dims) if info.view_dims is not None else set(range(len(box)))
    parts = [
        f"slice({lo}, {hi}, {max(1, r.step)})" if k in shown else str(lo)
        for k, ((lo, hi), r) in enumerate(zip(box, info.region, strict=True))
    ]
    rng = ", ".join(parts) + ("," if len(parts) == 1 else "")
    access = f"[Access(range=({rng}), permutation=None)]"
    if kind == "r":
        return (
            f"Out-of-bounds read of HostAllocationKey(...): reading {access} but buffer has "
            f"shape {root!r}."
        )
    return (
        f"Out-of-bounds swap of HostAllocationKey(...): swapping {access} but buffer has "
        f"shape {root!r} ."
    )


def _int_oob_message(ctx: Ctx, b: Binding | None, kind: str) -> str | None:
    """The interpreter's message for an integer index out of bounds (block 0), or None
    when the view's region is not known."""
    if b is None or b.info is None or b.info.region is None:
        return None
    root = ctx.root_shape(b)
    if root is None or len(root) != len(b.info.region):
        return None
    box = _box(b.info.region, {}, None, True, [])  # block 0; pl.program_id is 0
    return _interp_message(kind, box, b.info, tuple(root))


def _block_entry_path(b: Binding, axis: Any) -> str | None:
    """The field path of the index entry that made a dim block-indexed."""
    kind, name = axis
    for p, t in b.stack:
        if t.op != "at":
            continue
        for i, e in enumerate(t.index):
            if kind == "block" and isinstance(e, BlockIndex) and e.block == name:
                return f"{p}.index[{i}]"
            if kind == "pid" and isinstance(e, PidIndex) and e.pid == name:
                return f"{p}.index[{i}]"
    return None


def _grid_fix(ctx: Ctx, st: Stmt, d: Any, extent: int, mesh: Any) -> Fix | None:
    """Size the grid axis to the data: as many blocks as fit in the dimension."""
    kind, name = d.axis
    if kind != "block" or name not in mesh.grid or d.start != 0 or d.step != 1 or not d.stride:
        return None
    if d.stride < d.size:
        return None
    n = (extent - d.size) // d.stride + 1
    if n < 1 or n == mesh.grid[name]:
        return None
    prog = st.path.split(".body[")[0]
    return Fix(
        description=f"run {n} blocks along {name!r} (as many as fit in {extent} elements)",
        edits=[Edit(op="replace", path=f"{prog}.mesh.grid.{name}", value=n)],
    )


# ---------------------------------------------------------------- races


def _accesses(st: Stmt) -> list[tuple[str, str]]:
    """``(field, "r" | "w")`` for every ref the statement reads or writes."""
    if isinstance(st.node, Let):
        return []
    return [(f, "r" if a == READ else "w") for f, _n, a in st.node.ref_fields() if a != "sync"]


def _races(ctx: Ctx) -> None:
    s = ctx.s
    # on a GPU (pl.program_id differs per block) ...
    if _find_races(ctx, pid_zero=False):
        return
    # ... and under the GPU interpreter's race detector, where pl.program_id is always 0
    if s.run.detect_races and s.run.interpret == "gpu":
        _find_races(ctx, pid_zero=True)


def _find_races(ctx: Ctx, pid_zero: bool) -> bool:
    s = ctx.s
    mesh_dev = s.device_mesh or {}
    interp_gpu = pid_zero
    for prog in ctx.programs:
        mesh = s.call.programs[prog.index].mesh
        axes: dict[str, int] = {**mesh.grid, **mesh.cluster}
        if mesh.threads is not None and mesh.threads.name:
            axes[mesh.threads.name] = mesh.threads.count
        dev_axes = dict(mesh_dev)
        space = {**{f"dev:{a}": n for a, n in dev_axes.items()}, **axes}
        total = math.prod(space.values()) if space else 1
        if total <= 1 or total > MAX_EXECUTORS:
            continue
        names = list(space)
        execs = [
            dict(zip(names, vals, strict=True))
            for vals in itertools.product(*(range(space[n]) for n in names))
        ]
        found = None
        acc_list: list[tuple[Stmt, str, str, Binding]] = []
        for st in prog.stmts:
            if not st.ok:
                break
            for f, kind in _accesses(st):
                b = st.refs.get(f)
                if b is None or b.info is None or not b.info.is_ref or b.info.region is None:
                    continue
                acc_list.append((st, f, kind, b))
        touched: dict[tuple, list[tuple[int, dict, str, Stmt, str]]] = {}
        for st, f, kind, b in acc_list:
            info = b.info
            root = b.origin[0] if b.origin else b.name
            private = root.startswith("scratch:") and info.memory_space in ("SMEM", "TMEM")
            for ei, e in enumerate(execs):
                box = _box(info.region, e, mesh, interp_gpu, list(mesh.grid))
                if box is None:
                    continue
                for target in _targets(info, e, dev_axes):
                    key_block = ()
                    if private:
                        blk = tuple(e.get(a, 0) for a in list(mesh.grid) + list(mesh.cluster))
                        key_block = blk
                        if info.cluster:
                            key_block = ("cluster-peer",) + blk
                    key = (root, target, key_block)
                    for ej, e2, k2, st2, f2 in touched.get(key, []):
                        if ej == ei or (kind == "r" and k2 == "r"):
                            continue
                        if _overlap(box, e2):
                            found = (st, f, st2, f2, e, execs[ej])
                            break
                    if found:
                        break
                    touched.setdefault(key, []).append((ei, box, kind, st, f))
                if found:
                    break
            if found:
                break
        if found:
            st, f, st2, f2, e1, e2 = found
            cross_device = any(e1.get(k) != e2.get(k) for k in e1 if k.startswith("dev:"))
            who = _who(e1, e2)
            msg = (
                f"{who} access overlapping elements of the same buffer ({st2.path}.{f2} and "
                f"{st.path}.{f}) with at least one write and nothing ordering them"
            )
            if s.run.detect_races and s.run.interpret == "gpu" and not cross_device:
                ctx.add(
                    "RACE_DETECTED",
                    f"{st.path}.{f}",
                    msg,
                    jax_message="RACE DETECTED",
                    jax_type="RuntimeError",
                )
            elif (
                st.refs[f].info.multicast
                or st2.refs[f2].info.multicast
                or _threads_only(e1, e2, mesh)
            ):
                # every device broadcasting into one buffer: by design of a multicast,
                # but the last writer wins
                ctx.add("RACE", f"{st.path}.{f}", msg, severity="warning")
            else:
                ctx.add("RACE", f"{st.path}.{f}", msg)
            return True
    return False


def _who(e1: dict, e2: dict) -> str:
    diff = [k for k in e1 if e1[k] != e2.get(k)]
    parts = []
    for k in diff:
        label = f"device {k[4:]}" if k.startswith("dev:") else f"{k}"
        parts.append(f"{label}={e1[k]} and {label}={e2[k]}")
    return "Executors " + ", ".join(parts) if parts else "Two executors"


def _box(region: Any, e: dict, mesh: Any, interp_gpu: bool, grid_names: list[str]) -> list | None:
    out = []
    for d in region:
        start = d.start
        if d.axis is not None:
            kind, name = d.axis
            if kind == "block":
                idx = e.get(name, 0)
            elif kind == "expr":  # an index expression: this executor's value, if it has one
                idx = _eval_at(name, e)
                if idx is None:
                    return None
            else:  # pid: the grid dim's index; 0 under the GPU interpreter
                idx = (
                    0
                    if interp_gpu
                    else (e.get(grid_names[name], 0) if name < len(grid_names) else 0)
                )
            start += idx * d.stride
        out.append((start, start + d.size * max(1, d.step)))
    return out


def _eval_at(expr: Any, e: dict) -> int | None:
    """An index expression's value for one executor (None: it needs a loop variable)."""
    from mpmd_lab import expr as E

    values = {k[4:] if k.startswith("dev:") else k: v for k, v in e.items()}
    try:
        return expr.eval(E.Env(values, {}))
    except (E.ExprError, KeyError, TypeError):
        return None


def _overlap(a: list, b: list) -> bool:
    return all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1) in zip(a, b, strict=False)) and all(
        x1 > x0 for x0, x1 in a
    )


def _targets(info: Any, e: dict, dev_axes: dict[str, int]) -> list[tuple]:
    """Which device's copy of the buffer an access touches."""
    own = tuple(e.get(f"dev:{a}", 0) for a in dev_axes)
    if info.multicast:
        return [tuple(v) for v in itertools.product(*(range(n) for n in dev_axes.values()))]
    if info.peer:
        # (a device id that needs more than the device's coordinates -- a loop variable,
        # a block axis -- is taken as this device: the engine's happens-before check
        # evaluates it per step)
        from mpmd_lab import expr as E
        from mpmd_lab.ops.peers import resolve_device

        coords = dict(zip(dev_axes, own, strict=True))
        try:
            flat = resolve_device(info.peer_device).target(
                coords, dev_axes, E.Env(coords, dict(dev_axes))
            )
        except (LookupError, IndexError, E.ExprError):
            return [own]
        out = []
        for n in reversed(list(dev_axes.values())):
            out.append(flat % n)
            flat //= n
        return [tuple(reversed(out))]
    return [own]


# ---------------------------------------------------------------- interpreter limits

_GPU_INTERP_REPR = {
    "remote_ref": "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)",
    "reshape": "ReshapeTransform(shape=...)",
    "bitcast": "BitcastTransform(dtype=...)",
    "cluster_ref": "ClusterRefTransform(dims=..., idxs=...)",
}
_HLO_CANNOT = {
    "transpose": "jax._src.state.types.TransposeTransform",
    "remote_ref": "jax._src.pallas.mosaic_gpu.core.PeerMemRef",
    "multicast_ref": "jax._src.pallas.mosaic_gpu.core.MulticastRef",
    "cluster_ref": "jax._src.pallas.mosaic_gpu.core.ClusterRefTransform",
}
_LIMIT = (
    " This is a limit of the CPU interpreter on this machine, not an error of the kernel: "
    "check, trace and GPU lowering still work here, and a GPU runs it."
)


def _interp_limits(ctx: Ctx) -> None:
    """The first statement the chosen CPU interpreter cannot run (a warning)."""
    interp = ctx.s.run.interpret
    for prog in ctx.programs:
        for st in prog.stmts:
            if isinstance(st.node, Let):
                continue
            for b in st.refs.values():
                for path, t in b.stack:
                    if interp == "gpu" and t.op == "multicast_ref":
                        ctx.add(
                            "GPU_INTERP_MULTICAST",
                            path,
                            "'MulticastRef' object has no attribute 'indices'",
                            jax_message="'MulticastRef' object has no attribute 'indices'",
                            severity="warning",
                            explanation="The GPU interpreter cannot run multicast views." + _LIMIT,
                        )
                        return
                    if interp == "gpu" and t.op in _GPU_INTERP_REPR:
                        msg = f"Unsupported transform: {_GPU_INTERP_REPR[t.op]}"
                        ctx.add(
                            "GPU_INTERP_UNSUPPORTED_TRANSFORM",
                            path,
                            msg,
                            jax_message=msg,
                            severity="warning",
                            explanation=f"The GPU interpreter runs only index and transpose "
                            f"views, not {t.op}." + _LIMIT,
                        )
                        return
                    if interp == "hlo" and t.op == "at":
                        axis = next((e.block for e in t.index if isinstance(e, BlockIndex)), None)
                        if axis is not None:
                            msg = (
                                f"Found an unbound axis name: {axis}. To fix this, please call "
                                "axis_index under `jax.shard_map`."
                            )
                            ctx.add(
                                "UNBOUND_AXIS",
                                path,
                                msg,
                                jax_message=msg,
                                severity="warning",
                                stage="interpret",
                                explanation="The HLO interpreter (interpret=True) cannot "
                                "evaluate lax.axis_index of a kernel axis; the GPU interpreter "
                                "(run.interpret: gpu) can." + _LIMIT,
                            )
                            return
                    if interp == "hlo" and t.op in _HLO_CANNOT:
                        msg = f"<class '{_HLO_CANNOT[t.op]}'>"
                        ctx.add(
                            "HLO_INTERP_NO_DISCHARGE",
                            path,
                            msg,
                            jax_message=msg,
                            severity="warning",
                            explanation=f"The HLO interpreter has no discharge rule for {t.op} "
                            "views." + _LIMIT,
                        )
                        return


def _threads_only(e1: dict, e2: dict, mesh: Any) -> bool:
    """Two warpgroups of one block (the same values written by each is a common idiom)."""
    t = mesh.threads.name if mesh.threads is not None else None
    diff = [k for k in e1 if e1[k] != e2.get(k)]
    return bool(t) and diff == [t]
