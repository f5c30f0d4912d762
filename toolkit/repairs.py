"""Mechanical repairs by code: for a diagnostic of a known code, the candidate fixes that
keep what the user meant (a device index wraps round its axis, a slice keeps its size and
moves inside, a race is split between its writers...). ``mpmd_lab.fixes.offer`` checks
each and keeps those that leave fewer errors."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab.diagnostics import Diagnostic, Edit, Fix
from mpmd_lab.fields import format_path, get_path
from mpmd_lab.ops import (
    Add,
    At,
    BarrierArrive,
    Bitcast,
    ClusterRef,
    Copy,
    CopyGmemToSmem,
    Fill,
    Let,
    Loop,
    MulticastRef,
    RemoteRef,
    Reshape,
    SemaphoreSignal,
    SemaphoreSignalMulticast,
    SemaphoreWait,
    Swizzle,
    Tiling,
    TmaStore,
    When,
)
from mpmd_lab.ops import values as V
from mpmd_lab.ops.compute import Compute
from mpmd_lab.recheck import checked, form_of, with_edits
from mpmd_lab.scenario import BufferArg, Scenario
from mpmd_lab.validate.fixes_for import capture_to_arg

_OOB_VALUE = re.compile(r"(?:=|\bis) (-?\d+)|^index (-?\d+)|device id (-?\d+)")


def _device_fields(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of every ``device`` field of a scenario's JSON form (a remote
    view's, a signal's)."""
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{path}.{k}" if path else k
            if k == "device":
                yield here, v
            yield from _device_fields(v, here)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _device_fields(v, f"{path}[{i}]")


def _device_wrap(s: Scenario, d: Diagnostic) -> list[Fix]:
    """REMOTE_DEVICE_OOB: wrap the device index around its mesh axis (``(dev + 1) %
    axis_size(dev)``), as a ring does, wherever the same index names a device (the
    remote view and the signal of one ring step); a constant becomes the device it
    wraps to."""
    mesh = dict(s.device_mesh or {})
    _, _, axis = d.path.rpartition(".")
    if axis in mesh:  # one coordinate of a device-id mapping
        size, size_expr, sub = mesh[axis], f"axis_size({axis})", f".{axis}"
    else:  # a linear device id over the whole mesh
        axis, sub = next(iter(mesh), ""), ""
        size = s.num_devices
        size_expr = f"axis_size({axis})" if len(mesh) == 1 else str(size)
    value = get_path(s, d.path)
    if isinstance(value, bool) or not size or not isinstance(value, int | str):
        return []
    data = form_of(s)
    paths = [
        f"{p}{sub}"
        for p, v in _device_fields(data)
        if (v.get(axis) if sub and isinstance(v, dict) else v) == value
    ] or [d.path]
    if isinstance(value, int):
        new: int | str = value % size
        what = f"use device {new} ({value} wrapped around the {size} devices of {axis!r})"
    else:
        m = _OOB_VALUE.search(d.message)
        below = m is not None and int(next(g for g in m.groups() if g is not None)) < 0
        # (a negative index wraps by adding the axis size first: ``%`` of a negative
        # int32 keeps its sign on a GPU)
        new = f"({value} + {size_expr}) % {size_expr}" if below else f"({value}) % {size_expr}"
        what = f"wrap the device index around the mesh axis: {new}"
    if len(paths) > 1:
        what += f" (in the {len(paths)} places that name device {value!r})"
    return [Fix(description=what, edits=[Edit(op="replace", path=p, value=new) for p in paths])]


_RACE_AXIS = re.compile(r"\bblock ([A-Za-z_]\w*)=\d+|\bthread ([A-Za-z_]\w*)=\d+|\b(device) \d+")
_STMT = re.compile(r"^(call\.programs\[\d+\](?:\.body\[\d+\])+)\.(\w+)$")


def _race_split(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A write/write race: give each writer its own tile (the constant slice it writes
    becomes ``axis index * size``, along the axis that tells the writers apart), or let
    one of them write (``pl.when(axis == 0)``: the others wrote the same elements)."""
    if not d.message.startswith("Write/write race"):
        return []
    m = _STMT.match(d.path)
    hit = _RACE_AXIS.search(d.message.partition(": ")[2])
    if m is None or hit is None:
        return []
    stmt_path, field = m.groups()
    prog = get_path(s, stmt_path.split(".body[")[0])
    axis = hit.group(1) or hit.group(2)
    cond = f"{axis} == 0"
    if axis is None:  # devices: the device mesh's axes
        mesh = list(s.device_mesh or {})
        if not mesh:
            return []
        axis, count = mesh[0], s.num_devices if len(mesh) == 1 else 0
        cond = " and ".join(f"{a} == 0" for a in mesh)
    else:
        sizes = {**prog.mesh.grid, **prog.mesh.cluster}
        if prog.mesh.threads is not None and prog.mesh.threads.name:
            sizes[prog.mesh.threads.name] = prog.mesh.threads.count
        count = sizes.get(axis, 0)
        if axis in prog.mesh.cluster and len(prog.mesh.cluster) > 1:
            # (the blocks of a cluster of several axes: one block of the cluster writes)
            cond = " and ".join(f"{a} == 0" for a in prog.mesh.cluster)
    out: list[Fix] = []
    name = getattr(get_path(s, stmt_path), field, None)
    lets = [
        (j, st)
        for j, st in enumerate(prog.body)
        if isinstance(st, Let) and st.let == name and st.transforms
    ]
    if lets and count > 1:
        j, let = lets[-1]
        t = let.transforms[-1]
        if isinstance(t, At):
            tpath = (
                f"{stmt_path.split('.body[')[0]}.body[{j}].transforms"
                f"[{len(let.transforms) - 1}].index"
            )
            index = get_path(form_of(s), tpath)
            for k, entry in enumerate(index):
                size = _const_size(entry)
                if size is None:
                    continue
                tile = (
                    {"ds": [f"{axis} * {size}", size]}
                    if axis in (s.device_mesh or {})
                    else {"block": axis, "size": size}
                )
                new = [*index[:k], tile, *index[k + 1 :]]
                out.append(
                    Fix(
                        description=f"give each {axis} its own tile of {let.let!r}: "
                        f"index {k} starts at {axis} * {size}",
                        edits=[Edit(op="replace", path=tpath, value=new)],
                    )
                )
    stmt = get_path(form_of(s), stmt_path)
    out.append(
        Fix(
            description=f"let only {cond} write (the others wrote the same elements)",
            edits=[
                Edit(
                    op="replace",
                    path=stmt_path,
                    value={"op": "when", "cond": cond, "body": [stmt]},
                )
            ],
        )
    )
    return out


def _const_size(entry: Any) -> int | None:
    """The size of a constant slice entry (``[a, b]``, ``{"ds": [a, n]}``), else None."""
    if isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, int) for v in entry):
        return entry[1] - entry[0] if entry[1] > entry[0] else None
    if isinstance(entry, dict) and "ds" in entry and all(isinstance(v, int) for v in entry["ds"]):
        return int(entry["ds"][1])
    return None


_AT_STMT = re.compile(r"^(call\.programs\[(\d+)\](?:\.body\[\d+\])+)(?:\.(\w+))?")


def _lets(body: list[Any]) -> Iterator[Any]:
    """Every let of a body, nested bodies (loops, conditions) included, in order."""
    for st in body:
        if isinstance(st, Let):
            yield st
        if st.BODY:
            yield from _lets(st.body)


def _any_step(t: Any) -> bool:
    return True


def _reinterprets(t: Any) -> bool:
    """A step that changes the element type (``TransformOp.REINTERPRETS``)."""
    return bool(t.REINTERPRETS)


def _reshapes(t: Any) -> bool:
    """A step that may change the shape: not one that only reaches another device's or
    block's copy of the ref (``TransformOp.REACH``)."""
    return not t.REACH


def _root(
    s: Scenario, program: int, name: str, counts: Callable[[Any], bool] = _any_step
) -> tuple[str, str, bool] | None:
    """Where the ref ``name`` of a program comes from: ``(table, key, viewed)``, the
    scenario's table (``call.outputs``, ``buffers``, ``call.scratch``), its entry, and
    whether a view step stands between (only the steps ``counts`` counts: every step, or
    ``_reinterprets``, ``_reshapes``). None: not found."""
    viewed = False
    lets = {st.let: st for st in _lets(s.call.programs[program].body)}
    arg = {a.param: a for a in s.call.args if isinstance(a, BufferArg)}
    for _ in range(64):
        let = lets.pop(name, None)
        if let is None:
            break
        viewed = viewed or any(map(counts, let.transforms))
        name = let.ref
    c = s.call
    if name in arg:
        a = arg[name]
        return "buffers", a.buffer, viewed or any(map(counts, a.transforms))
    for table, items in (("call.outputs", c.outputs), ("call.scratch", c.scratch)):
        if name in items:
            return table, name, viewed
    return None


#: what JAX says a copy's two sides are: (message pattern, what is compared)
_MISMATCH = {
    "SWAP_DTYPE_MISMATCH": (r"Ref dtype: (\w+)\. Value dtype: (\w+)", "dtype"),
    "SWAP_SHAPE_MISMATCH": (r"Ref shape: \(([\d, ]*)\)\..*Value shape: \(([\d, ]*)\)", "shape"),
    "TMA_DTYPE_MISMATCH": (r"src had type (\w+) and dst had type (\w+)", "dtype"),
    "MULTIMEM_MISMATCH": (
        r"Value shape \(([\d, ]*)\) does not match ref shape \(([\d, ]*)\)",
        "shape",
    ),
    "TMA_SHAPE_MISMATCH": (r"src has shape \(([\d, ]*)\) and dst has shape \(([\d, ]*)\)", "shape"),
}


def _match_sides(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A copy whose two sides differ in dtype or shape: make the side that is a plain
    output, buffer or scratch (no view between) what the other side is."""
    pattern, what = _MISMATCH[d.code]
    m = re.search(pattern, d.message, re.DOTALL)
    at = _AT_STMT.match(d.path)
    if m is None or at is None:
        return []
    stmt = get_path(s, at.group(1))
    program = int(at.group(2))
    one, two = m.groups()
    # (SWAP: the ref is the destination, the value the source; TMA: src then dst)
    dst_has, src_has = (one, two) if d.code.startswith("SWAP") else (two, one)
    out: list[Fix] = []
    for side, want, other in (("dst", src_has, "src"), ("src", dst_has, "dst")):
        name = getattr(stmt, side, None)
        if not isinstance(name, str):
            continue
        root = _root(s, program, name, _reinterprets if what == "dtype" else _reshapes)
        if root is None:
            continue
        if root[2]:  # a view: its slices take the size the other side has
            if what == "shape":
                out += _resize_view(s, program, name, _ints(want))
            continue
        table, key, _ = root
        value: Any = want
        if what == "shape":
            value = _ints(want)
        out.append(
            Fix(
                description=f"make {key!r} ({table.rpartition('.')[2]}) {what} {value}, "
                f"as the copy's {other} is",
                edits=[Edit(op="replace", path=f"{table}.{key}.{what}", value=value)],
            )
        )
    return out


def _ints(text: str) -> list[int]:
    """``"128, 64"`` -> ``[128, 64]``."""
    return [int(x) for x in text.replace(" ", "").split(",") if x]


def _resize_view(s: Scenario, program: int, name: str, want: list[int]) -> list[Fix]:
    """The view ``name`` (one ``at`` of slices over a plain output, buffer or scratch)
    made ``want`` in shape: each slice keeps its start where the new size fits, else
    ends at the dimension's end."""
    hits = [
        (p, st)
        for p, st in _statements(s.call.programs[program].body, f"call.programs[{program}].body")
        if isinstance(st, Let) and st.let == name
    ]
    if len(hits) != 1:
        return []
    path, let = hits[0]
    root = _root(s, program, let.ref)
    if root is None or root[2] or len(let.transforms) != 1 or not isinstance(let.transforms[0], At):
        return []
    table, key, _ = root
    shape = list(getattr(get_path(s, f"{table}.{key}"), "shape", None) or [])
    index = get_path(form_of(s), f"{path}.transforms[0].index")
    if len(index) != len(want) or len(shape) < len(index):
        return []
    new = []
    for entry, size, dim in zip(index, want, shape, strict=False):
        start = _const_start(entry)
        if start is None or size > dim:
            return []
        start = min(start, dim - size)
        new.append([start, start + size] if isinstance(entry, list) else {"ds": [start, size]})
    if new == index:
        return []
    return [
        Fix(
            description=f"make the view {name!r} {want}, as the copy's other side is "
            f"(slices {new})",
            edits=[Edit(op="replace", path=f"{path}.transforms[0].index", value=new)],
        )
    ]


def _const_start(entry: Any) -> int | None:
    """The start of a constant slice entry, else None."""
    if isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, int) for v in entry):
        return int(entry[0])
    if isinstance(entry, dict) and "ds" in entry and all(isinstance(v, int) for v in entry["ds"]):
        return int(entry["ds"][0])
    return None


_RESHAPE = re.compile(r"cannot reshape shape \(([\d, ]*)\) into shape \(([\d, ]*)\)")


def _reshape_infer(s: Scenario, d: Diagnostic) -> list[Fix]:
    """RESHAPE_SIZE: keep the leading dimensions asked for and let the last one be what
    the size leaves (``-1``), where they divide it."""
    m = _RESHAPE.search(d.message)
    if m is None:
        return []
    have, asked = _ints(m.group(1)), _ints(m.group(2))
    total = 1
    for x in have:
        total *= x
    lead = 1
    for x in asked[:-1]:
        lead *= x
    step = get_path(form_of(s), d.path)
    if not asked or step.get("op") != "reshape" or lead == 0 or total % lead:
        return []
    new = [*asked[:-1], -1]
    return [
        Fix(
            description=f"reshape to {new}: the last dimension is what the size leaves "
            f"({total // lead})",
            edits=[Edit(op="replace", path=f"{d.path}.shape", value=new)],
        )
    ]


def _swizzle_value(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A swizzle JAX does not have: the nearest of 128, 64 and 32 bytes."""
    have = get_path(s, d.path)
    if not isinstance(have, int):
        return []
    return [
        Fix(
            description=f"swizzle {b} bytes (JAX has 32, 64 and 128)",
            edits=[Edit(op="replace", path=d.path, value=b)],
        )
        for b in sorted((128, 64, 32), key=lambda b: abs(b - have))
    ]


def _slice_inside(s: Scenario, d: Diagnostic) -> list[Fix]:
    """AT_NEGATIVE_SLICE: a slice starting before 0 starts at 0, keeping its size."""
    entry = get_path(form_of(s), d.path)
    if isinstance(entry, dict) and "ds" in entry and isinstance(entry["ds"][0], int):
        size = entry["ds"][1]
        new: Any = {"ds": [0, size]}
    elif isinstance(entry, list) and all(isinstance(v, int) for v in entry[:2]):
        size = entry[1] - entry[0]
        new = [0, size]
    else:
        return []
    return [
        Fix(
            description=f"start the slice at 0 (keeping its size {size})",
            edits=[Edit(op="replace", path=d.path, value=new)],
        )
    ]


_TILE = re.compile(r"slice start \((\d+)\) and slice size \((\d+)\).*tile size \((\d+)\)")


def _tile_align(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TILED_SLICE_ALIGN: the slice starts at the tile boundary below (keeping its size)."""
    m = _TILE.search(d.message)
    if m is None:
        return []
    start, size, tile = (int(x) for x in m.groups())
    if size % tile:
        return []
    index = get_path(form_of(s), f"{d.path}.index")
    out = []
    for k, e in enumerate(index):
        if isinstance(e, dict) and e.get("ds") == [start, size]:
            new = [*index[:k], {"ds": [start - start % tile, size]}, *index[k + 1 :]]
            out.append(
                Fix(
                    description=f"start the slice at {start - start % tile}, a multiple of "
                    f"the tile ({tile}), keeping its size {size}",
                    edits=[Edit(op="replace", path=f"{d.path}.index", value=new)],
                )
            )
    return out


def _async_store(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTICAST_PLAIN_STORE: a multicast ref is written by an async copy from SMEM
    (``plgpu.copy_smem_to_gmem``), not a plain store."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt_path = at.group(1)
    stmt = get_path(form_of(s), stmt_path)
    if stmt.get("op") != "copy":
        return []
    root = _root(s, int(at.group(2)), stmt["src"])
    if root is None:
        return []
    table, key, _ = root
    in_smem = table == "call.scratch" and getattr(s.call.scratch[key], "memory_space", "") == "SMEM"
    if in_smem:
        return [
            Fix(
                description="write the multicast ref with an async copy from SMEM (tma_store)",
                edits=[
                    Edit(
                        op="replace",
                        path=stmt_path,
                        value={"op": "tma_store", "src": stmt["src"], "dst": stmt["dst"]},
                    )
                ],
            )
        ]
    # (a GMEM source: stage it through SMEM of the shape the copy moves)

    src_info = get_path(s, f"{table}.{key}") if table != "call.scratch" else None
    shape = getattr(src_info, "shape", None)
    dtype = getattr(src_info, "dtype", None)
    if src_info is None or root[2] or shape is None:
        return []
    stage = _fresh(s, f"{stmt['src']}_smem")
    parent, _, last = stmt_path.rpartition("[")
    j = int(last.rstrip("]"))
    # (pl.kernel takes no scratch: plgpu.kernel allocates the staging buffer)
    entry = (
        [Edit(op="replace", path="call.entry", value="plgpu.kernel")]
        if s.call.entry == "pl.kernel"
        else []
    )
    return [
        Fix(
            description=f"stage {stmt['src']!r} in SMEM ({stage!r}) and write the multicast "
            "ref with an async copy from it (tma_store)"
            + ("; plgpu.kernel, which allocates the SMEM" if entry else ""),
            edits=[
                *entry,
                Edit(
                    op="add",
                    path=f"call.scratch.{stage}",
                    value={"shape": list(shape), "dtype": dtype, "memory_space": "SMEM"},
                ),
                Edit(
                    op="replace",
                    path=stmt_path,
                    value={"op": "tma_store", "src": stage, "dst": stmt["dst"]},
                ),
                Edit(
                    op="add",
                    path=f"{parent}[{j}]",
                    value={"op": "copy", "src": stmt["src"], "dst": stage},
                ),
            ],
        )
    ]


def _plain_copy(s: Scenario, d: Diagnostic) -> list[Fix]:
    """An async copy between memories it does not join: a plain copy (``dst[...] =
    src[...]``) instead."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt_path = at.group(1)
    data = form_of(s)  # (made once: the statement and its body are read from it)
    stmt = get_path(data, stmt_path)
    if "src" not in stmt or "dst" not in stmt:
        return []
    edits = [
        Edit(
            op="replace",
            path=stmt_path,
            value={"op": "copy", "src": stmt["src"], "dst": stmt["dst"]},
        )
    ]
    bar = stmt.get("barrier")
    parent = stmt_path.rpartition("[")[0]
    body = get_path(data, parent)
    # (a plain copy arrives on no barrier: the waits for it go too, last first)
    for k in range(len(body) - 1, -1, -1):
        if (
            bar is not None
            and body[k].get("op") == "barrier_wait"
            and body[k].get("barrier") == bar
        ):
            edits.append(Edit(op="remove", path=f"{parent}[{k}]"))
    return [
        Fix(
            description=f"copy with a plain store (dst[...] = src[...]): {stmt['op']} does "
            "not copy between these memories"
            + (f" (and no wait on {bar!r}, which it no longer arrives on)" if bar else ""),
            edits=edits,
        )
    ]


def _fresh(s: Scenario, base: str) -> str:
    """A scratch name not used yet: ``base``, ``base1`` ..."""
    used = {*s.call.scratch, *s.call.outputs, *s.buffers}
    used |= {a.param for a in s.call.args} | {c.name for c in s.call.captures}
    for p in s.call.programs:
        used |= {st.let for st in _lets(p.body)}
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}{k}"
    return name


def _own_barrier(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TMA_LOAD_NO_BARRIER / BARRIER_NOT_SMEM: the copy arrives on a barrier of its own
    (a new ``barrier`` scratch) and the kernel waits on it before using what it copied."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt_path = at.group(1)
    data = form_of(s)  # (made once: the statement and its body are read from it)
    stmt = get_path(data, stmt_path)
    if stmt.get("op") != "copy_gmem_to_smem":
        return []
    bar = _fresh(s, "bar")
    edits = [Edit(op="add", path=f"call.scratch.{bar}", value={"kind": "barrier"})]
    old = stmt.get("barrier")
    edits.append(Edit(op="replace", path=f"{stmt_path}.barrier", value=bar))
    parent, _, last = stmt_path.rpartition("[")
    j = int(last.rstrip("]"))
    body = get_path(data, parent)
    waits = [
        k
        for k, st in enumerate(body)
        if st.get("op") == "barrier_wait" and old is not None and st.get("barrier") == old
    ]
    for k in waits:
        edits.append(Edit(op="replace", path=f"{parent}[{k}].barrier", value=bar))
    if not waits:
        edits.append(
            Edit(op="add", path=f"{parent}[{j + 1}]", value={"op": "barrier_wait", "barrier": bar})
        )
    return [
        Fix(
            description=f"let the copy arrive on a barrier of its own ({bar!r}, SMEM) and "
            "wait on it before using what it copied",
            edits=edits,
        )
    ]


def _own_semaphore(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SEMAPHORE_WRONG_TYPE / SEMAPHORE_NOT_A_REF: signal and wait on a semaphore of the
    kernel's own (a new ``semaphore`` scratch), not on a data ref."""
    old = get_path(s, d.path)
    if not isinstance(old, str):
        return []
    sem = _fresh(s, "sem")
    edits = [Edit(op="add", path=f"call.scratch.{sem}", value={"kind": "semaphore"})]
    for p, prog in enumerate(s.call.programs):
        for path, st in _statements(prog.body, f"call.programs[{p}].body"):
            if getattr(st, "sem", None) == old:
                edits.append(Edit(op="replace", path=f"{path}.sem", value=sem))
    return [
        Fix(
            description=f"signal and wait on a semaphore of its own ({sem!r}), not on {old!r}",
            edits=edits,
        )
    ]


def _statements(body: list[Any], path: str) -> Iterator[tuple[str, Any]]:
    """``(path, statement)`` of every statement of a body, nested bodies included."""
    for j, st in enumerate(body):
        here = f"{path}[{j}]"
        yield here, st
        if st.BODY:
            yield from _statements(st.body, f"{here}.body")


def _one_semaphore(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SEMAPHORE_NOT_SCALAR: signal and wait on one semaphore of the array (``sem.at[0]``
    as a view, used by every statement that named the array)."""
    old = get_path(s, d.path)
    at = _AT_STMT.match(d.path)
    if not isinstance(old, str) or at is None:
        return []
    program = int(at.group(2))
    view = _fresh(s, f"{old}0")
    prog_path = f"call.programs[{program}]"
    edits = [
        Edit(
            op="add",
            path=f"{prog_path}.body[0]",
            value={"let": view, "ref": old, "transforms": [{"op": "at", "index": [0]}]},
        )
    ]
    # (paths after the new let at body[0]: every top-level index moves one on)
    for path, st in _statements(s.call.programs[program].body, f"{prog_path}.body"):
        if getattr(st, "sem", None) == old:
            head, _, rest = path[len(prog_path) + len(".body[") :].partition("]")
            moved = f"{prog_path}.body[{int(head) + 1}]{rest}"
            edits.append(Edit(op="replace", path=f"{moved}.sem", value=view))
    return [
        Fix(
            description=f"use one semaphore of the array: {view} = {old}.at[0]",
            edits=edits,
        )
    ]


def _row_major(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MESH_DEVICE_ORDER: Mosaic GPU takes only row-major device ids: drop the order."""
    if d.path != "device_order":
        return []
    return [
        Fix(
            description="list the devices in row-major order (Mosaic GPU takes no other)",
            edits=[Edit(op="replace", path="device_order", value=list(range(s.num_devices)))],
        )
    ]


_TRAILING = re.compile(r"Swizzle (\d+) requires the trailing dimension to be of size (\d+)")


def _swizzle_fits(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SWIZZLE_TRAILING_DIM: the swizzle as wide as the trailing dimension's bytes."""
    m = _TRAILING.search(d.message)
    step = get_path(form_of(s), d.path)
    shape = re.search(r"got shape: \(([\d, ]+)\)", d.message)
    if m is None or shape is None or step.get("op") != "swizzle":
        return []
    swizzle, wanted = int(m.group(1)), int(m.group(2))
    trailing = int(shape.group(1).split(",")[-1])
    fits = swizzle * trailing // wanted  # (bytes of the trailing dimension)
    if fits not in (32, 64, 128) or fits == swizzle:
        return []
    return [
        Fix(
            description=f"swizzle {fits} bytes: the trailing dimension holds {fits} bytes",
            edits=[Edit(op="replace", path=f"{d.path}.bytes", value=fits)],
        )
    ]


_DOT_DTYPES = re.compile(r"lhs=(\w+), rhs=(\w+)")


def _dot_dtypes(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_DTYPE_MISMATCH: the operand that is a plain scratch, buffer or output takes the
    other's dtype."""
    m = _DOT_DTYPES.search(d.message)
    at = _AT_STMT.match(d.path)
    if m is None or at is None:
        return []
    stmt = get_path(s, at.group(1))
    program = int(at.group(2))
    out = []
    for side, want in (("rhs", m.group(1)), ("lhs", m.group(2))):
        name = getattr(stmt, side, None)
        root = _root(s, program, name) if isinstance(name, str) else None
        if root is None or root[2]:
            continue
        table, key, _ = root
        other = "lhs" if side == "rhs" else "rhs"
        out.append(
            Fix(
                description=f"make {key!r} dtype {want}, as the dot's {other} is",
                edits=[Edit(op="replace", path=f"{table}.{key}.dtype", value=want)],
            )
        )
    return out


def _store_to_ref(s: Scenario, d: Diagnostic) -> list[Fix]:
    """STORE_TO_ARRAY: a captured array written in the kernel is passed as an argument
    (a Ref), not captured."""
    name = get_path(s, d.path)
    return [capture_to_arg(s, i) for i, c in enumerate(s.call.captures) if c.name == name]


def _peer_steps(s: Scenario, d: Diagnostic) -> tuple[str, list[Edit]]:
    """The view a statement's field (``d.path``) names, and the edits that drop its
    ``remote_ref`` steps (none when it has none)."""
    at = _AT_STMT.match(d.path)
    if at is None or at.group(3) is None:
        return "", []
    program = int(at.group(2))
    name = getattr(get_path(s, at.group(1)), at.group(3), None)
    edits = [
        Edit(op="remove", path=f"{p}.transforms[{k}]")
        for p, st in _statements(s.call.programs[program].body, f"call.programs[{program}].body")
        if isinstance(st, Let) and st.let == name
        for k in reversed(range(len(st.transforms)))
        if isinstance(st.transforms[k], RemoteRef)
    ]
    return str(name), edits


def _own_device(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DEVICE_ID_RANK on a call with no device mesh: the one device's peer view is the
    ref itself, so the ``remote_ref`` step goes."""
    if s.device_mesh:
        return []
    name, edits = _peer_steps(s, d)
    if not edits:
        return []
    return [
        Fix(
            description=f"drop the remote_ref step of {name!r}: with no device mesh the "
            "one device is this one",
            edits=edits,
        )
    ]


def _device_by_axes(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DEVICE_ID_RANK on a mesh of several axes: a linear (row-major) device id becomes
    one id per mesh axis (``{x: id // 2, y: id % 2}``), wherever it names a device."""
    mesh = dict(s.device_mesh or {})
    if len(mesh) < 2:
        return []
    paths = [(p, v) for p, v in _device_fields(form_of(s)) if isinstance(v, int | str)]
    if not paths or isinstance(paths[0][1], bool):
        return []
    edits = []
    for p, linear in paths:
        ids: dict[str, int | str] = {}
        inner = 1
        for axis in reversed(mesh):
            size = mesh[axis]
            if isinstance(linear, int):
                ids[axis] = linear // inner % size
            else:
                ids[axis] = (
                    f"({linear}) // {inner} % {size}" if inner > 1 else f"({linear}) % {size}"
                )
            inner *= size
        edits.append(Edit(op="replace", path=p, value={a: ids[a] for a in mesh}))
    return [
        Fix(
            description=f"name each device by its {len(mesh)} mesh coordinates "
            f"({', '.join(mesh)}), from the row-major id (in {len(edits)} place(s))",
            edits=edits,
        )
    ]


_LATER = re.compile(r"names view '([^']+)', which is defined later \(body\[(\d+)\]\)")


def _define_first(s: Scenario, d: Diagnostic) -> list[Fix]:
    """XREF_UNKNOWN_NAME for a view defined further down: the view moves up, just
    before the first statement that uses it (its own ref must be there already)."""
    m = _LATER.search(d.message)
    at = _AT_STMT.match(d.path)
    if m is None or at is None:
        return []
    stmt_path = at.group(1)
    parent, _, last = stmt_path.rpartition("[")
    use, defined = int(last.rstrip("]")), int(m.group(2))
    if defined <= use or parent.count(".body[") > 0:
        return []
    let = get_path(form_of(s), f"{parent}[{defined}]")
    return [
        Fix(
            description=f"define the view {m.group(1)!r} before its first use "
            f"(move body[{defined}] to body[{use}])",
            edits=[
                Edit(op="remove", path=f"{parent}[{defined}]"),
                Edit(op="add", path=f"{parent}[{use}]", value=let),
            ],
        )
    ]


_OOB_SPAN = re.compile(r"elements \[(\d+), (\d+)\) of dimension (\d+) of its ref, which has only")
_OOB_INT = re.compile(r"integer index (\d+) is out of bounds for a dimension of size")
_ENTRY = re.compile(r"\.transforms\[0\]\.index\[(\d+)\]$")


#: view steps that keep a ref's shape (a peer's, or every device's, copy of it)
def _grow_to_fit(s: Scenario, d: Diagnostic) -> list[Fix]:
    """OOB_READ / OOB_WRITE / OOB_INDEX of a view taken straight from an output, buffer or
    scratch: that array's dimension grows to hold what the kernel indexes (every
    block's or device's part), the indexing stays as written."""
    at = _AT_STMT.match(d.path)
    entry = _ENTRY.search(d.path)
    span, one = _OOB_SPAN.search(d.message), _OOB_INT.search(d.message)
    if at is None or entry is None or (span is None and one is None):
        return []
    if span is not None:
        dim, need = int(span.group(3)), int(span.group(2))
    else:
        dim, need = int(entry.group(1)), int(one.group(1)) + 1  # type: ignore[union-attr]
    let = get_path(s, at.group(1))
    if not isinstance(let, Let):
        return []
    root = _root(s, int(at.group(2)), let.ref, _reshapes)
    if root is None or root[2]:
        return []
    table, key, _ = root
    shape = list(getattr(get_path(s, f"{table}.{key}"), "shape", None) or [])
    if dim >= len(shape) or need <= shape[dim]:
        return []
    shape = _grown(s, d, f"{table}.{key}.shape", shape, dim, need)
    need = shape[dim]
    return [
        Fix(
            description=f"make {key!r} ({table.rpartition('.')[2]}) {shape}: dimension {dim} "
            f"holds what the kernel indexes (up to {need})",
            edits=[Edit(op="replace", path=f"{table}.{key}.shape", value=shape)],
        )
    ]


#: rechecks a grown shape gets (the golden corpus needs 2 at most)
GROW_ROUNDS = 4


def _grown(
    s: Scenario, d: Diagnostic, path: str, shape: list[int], dim: int, need: int
) -> list[int]:
    """``shape`` with dimension ``dim`` grown to ``need``, and further while the check
    finds the same access past the new end (the first actor it reports is not always
    the one reaching furthest: device 2 of 4 before device 3). At most GROW_ROUNDS
    rechecks: an access that walks past each new end (a loop whose bound is loaded from
    a huge table value) never fits, and each recheck is a whole check. (The scenario's
    JSON form is made once: each round's copies only the path to the shape.)"""
    base = form_of(s)
    for _ in range(GROW_ROUNDS):
        shape = [*shape[:dim], need, *shape[dim + 1 :]]
        data = with_edits(base, [Edit(op="replace", path=path, value=shape)])
        again = [
            int(m.group(2))
            for x in checked(data) or ()
            if x.code == d.code
            and (x.path == d.path or _same_root(s, x.path, d.path))
            and (m := _OOB_SPAN.search(x.message))
            and int(m.group(3)) == dim
        ]
        if not again or max(again) <= need:
            break
        need = max(again)
    return shape


def _same_root(s: Scenario, path: str, other: str) -> bool:
    """Whether two index entries' views (``...body[k].transforms[0].index[0]``) are taken
    straight from one array (the other accesses of the array a fix grows)."""
    roots = []
    for p in (path, other):
        at = _AT_STMT.match(p)
        let = get_path(s, at.group(1)) if at is not None else None
        if at is None or not isinstance(let, Let):
            return False
        roots.append(_root(s, int(at.group(2)), let.ref))
    return roots[0] is not None and roots[0] == roots[1]


def _peer_device(s: Scenario, program: int, name: str) -> Any:
    """The device id (JSON form) of the ``remote_ref`` a ref ``name`` is a view of, or
    None (not a peer's ref)."""
    lets = {st.let: st for st in _lets(s.call.programs[program].body)}
    for _ in range(64):
        let = lets.pop(name, None)
        if let is None:
            return None
        for t in let.transforms:
            if isinstance(t, RemoteRef):
                return t.model_dump(mode="json")["device"]
        name = let.ref
    return None


def _signal_the_peer(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DEADLOCK_SEMAPHORE on a wait no signal reaches, after a write to a peer's ref:
    signal the peer written to (its copy of the semaphore) just before the wait, as a
    ring step does (every device writes its right neighbour, signals it, and waits for
    its left one's signal)."""
    at = _AT_STMT.match(d.path)
    if at is None or at.group(3) is not None:
        return []
    wait_path = at.group(1)
    wait = get_path(s, wait_path)
    if not isinstance(wait, SemaphoreWait):
        return []
    program = int(at.group(2))
    parent, _, last = wait_path.rpartition("[")
    j = int(last.rstrip("]"))
    body = get_path(s, parent)
    device, why = None, "the device written to"
    for st in reversed(body[:j]):
        for field in ("dst", "src"):  # (written to, or read from: "done with yours")
            ref = getattr(st, field, None)
            if device is None and isinstance(ref, str) and not isinstance(st, Let):
                device = _peer_device(s, program, ref)
                why = "the device written to" if field == "dst" else "the device read from"
        if device is not None:
            break
    if device is None:  # a wait before reading a peer's ref: the peer says it is ready
        reads = (getattr(st, "src", None) for st in body[j + 1 :] if not isinstance(st, Let))
        peer = next(
            (p for r in reads if isinstance(r, str) and (p := _peer_device(s, program, r))), None
        )
        device = _ring_inverse(peer) if isinstance(peer, str) else None
        why = f"the device that reads this one's ref (as this one reads {peer}'s)"
    if device is None:
        return []
    signal = {"op": "semaphore_signal", "sem": wait.sem, "device": device}
    return [
        Fix(
            description=f"signal {wait.sem!r} on {why}, {device}, before "
            "waiting: nothing signals what this wait waits for",
            edits=[Edit(op="add", path=f"{parent}[{j}]", value=signal)],
        )
    ]


_RING = re.compile(r"^\((\w+) \+ (?:axis_size\(\1\) - )?(\d+)\) % axis_size\(\1\)$")


def _ring_inverse(device: str) -> str | None:
    """The ring step back: ``(dev + 1) % axis_size(dev)`` <-> ``(dev + axis_size(dev) - 1)
    % axis_size(dev)`` (None: not a ring step)."""
    m = _RING.match(device)
    if m is None:
        return None
    axis, k = m.groups()
    size = f"axis_size({axis})"
    back = "axis_size" in device.partition("+")[2].partition("%")[0]
    return f"({axis} + {k}) % {size}" if back else f"({axis} + {size} - {k}) % {size}"


_ARG = re.compile(r"^call\.args\[(\d+)\]\.transforms")


def _arg_view_in_body(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A view of an argument that the entry cannot take there (an array has no view
    methods; ``plgpu.kernel`` takes no transformed Ref): pass the buffer plain and make
    the same view first thing in every program's body; for an array, also: pass it as a
    Ref."""
    m = _ARG.match(d.path)
    if m is None:
        return []
    i = int(m.group(1))
    a = s.call.args[i]
    if not isinstance(a, BufferArg) or not a.transforms:
        return []
    base = _fresh(s, f"{a.param}_base")
    let = {
        "let": a.param,
        "ref": base,
        "transforms": [t.model_dump(mode="json") for t in a.transforms],
    }
    edits = [Edit(op="replace", path=f"call.args[{i}]", value={"buffer": a.buffer, "param": base})]
    edits += [
        Edit(op="add", path=f"call.programs[{p}].body[0]", value=let)
        for p in range(len(s.call.programs))
    ]
    out = [
        Fix(
            description=f"pass {a.buffer!r} plain (as {base!r}) and make the view "
            f"{a.param!r} inside the kernel body",
            edits=edits,
        )
    ]
    if not s.buffers[a.buffer].as_ref:
        out.append(
            Fix(
                description=f"pass {a.buffer!r} as a Ref (as_ref: true)",
                edits=[Edit(op="replace", path=f"buffers.{a.buffer}.as_ref", value=True)],
            )
        )
    return out


def _no_zero_fill(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SEMAPHORE_FILL of 0: a semaphore starts at 0, so the fill goes."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt = get_path(s, at.group(1))
    if not isinstance(stmt, Fill) or getattr(stmt, "value", None) != 0:
        return []
    return [
        Fix(
            description="drop the fill: a semaphore starts at 0 (and cannot be filled)",
            edits=[Edit(op="remove", path=at.group(1))],
        )
    ]


def _tile_then_swizzle(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SMEM_TRANSFORMS_ORDER: a scratch's layout takes its tiling before its swizzle."""
    steps = get_path(form_of(s), d.path)
    if not isinstance(steps, list):
        return []
    order = sorted(steps, key=lambda t: {"tiling": 0, "swizzle": 1}.get(t.get("op"), 2))
    if order == steps:
        return []
    return [
        Fix(
            description="tile first, then swizzle (the order Mosaic GPU takes)",
            edits=[Edit(op="replace", path=d.path, value=order)],
        )
    ]


def _signal_by_device(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SEMAPHORE_VIEW_TRANSFORM: a signal through a peer view of a semaphore signals the
    semaphore itself with the view's device (``device_id=``), as JAX takes it."""
    at = _AT_STMT.match(d.path)
    if at is None or at.group(3) != "sem":
        return []
    stmt = get_path(s, at.group(1))
    lets = {x.let: x for x in _lets(s.call.programs[int(at.group(2))].body)}
    let = lets.get(stmt.sem)
    if not isinstance(stmt, SemaphoreSignal) or let is None:
        return []
    if len(let.transforms) != 1 or not isinstance(let.transforms[0], RemoteRef):
        return []
    if stmt.device is not None:
        return []
    device = let.transforms[0].model_dump(mode="json")["device"]
    return [
        Fix(
            description=f"signal {let.ref!r} on device {device} (device_id=), not through "
            f"the peer view {stmt.sem!r}",
            edits=[
                Edit(op="replace", path=f"{at.group(1)}.sem", value=let.ref),
                Edit(op="replace", path=f"{at.group(1)}.device", value=device),
            ],
        )
    ]


def _operand_in_smem(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_OPERAND_NOT_SMEM: the operand's SMEM copy, made earlier in the body, is used."""
    at = _AT_STMT.match(d.path)
    if at is None or at.group(3) not in ("lhs", "rhs"):
        return []
    stmt_path, field = at.group(1), at.group(3)
    name = getattr(get_path(s, stmt_path), field)
    parent, _, last = stmt_path.rpartition("[")
    body = get_path(s, parent)[: int(last.rstrip("]"))]
    copies = [st.dst for st in body if isinstance(st, (Copy, CopyGmemToSmem)) and st.src == name]
    out = []
    for dst in copies:
        root = _root(s, int(at.group(2)), dst)
        if root is not None and root[0] == "call.scratch":
            if getattr(s.call.scratch[root[1]], "memory_space", "") == "SMEM":
                out.append(
                    Fix(
                        description=f"use {dst!r}, the SMEM copy of {name!r}, as the dot's {field}",
                        edits=[Edit(op="replace", path=f"{stmt_path}.{field}", value=dst)],
                    )
                )
    return out


_ARRIVALS = re.compile(r"waits for phase \d+ of (\w+) of .*?\((\d+) of its (\d+) arrival")


def _arrivals_that_come(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DEADLOCK_BARRIER: a barrier waiting for more arrivals than the kernel makes counts
    the arrivals that come."""
    m = _ARRIVALS.search(d.message)
    if m is None:
        return []
    name, came = m.group(1), int(m.group(2))
    sc = s.call.scratch.get(name)
    if sc is None or getattr(sc, "kind", None) != "barrier" or came < 1:
        return []
    return [
        Fix(
            description=f"let barrier {name!r} complete on the {came} arrival(s) that come",
            edits=[Edit(op="replace", path=f"call.scratch.{name}.num_arrivals", value=came)],
        )
    ]


_RACE_PATHS = re.compile(r"\((call\.programs\[\d+\]\S*?) and (call\.programs\[\d+\]\S*?)\)")
_CLUSTER_PAIR = re.compile(r"\bblock ([A-Za-z_]\w*)=\d+ \w+ it .* block \1=\d+ \w+ it")


def _cluster_meet(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A race between two blocks of one cluster (one writes SMEM, another reads it through
    a cluster view): the blocks meet at a cluster barrier between the two statements
    (``plgpu.ClusterBarrier`` over the cluster axis: arrive, then wait)."""
    pair = _CLUSTER_PAIR.search(d.message)
    paths = _RACE_PATHS.search(d.message)
    if pair is None or paths is None:
        return []
    axis = pair.group(1)
    first, second = (_AT_STMT.match(p) for p in paths.groups())
    if first is None or second is None or first.group(2) != second.group(2):
        return []
    prog = s.call.programs[int(first.group(2))]
    if axis not in prog.mesh.cluster:
        return []
    parent = f"call.programs[{first.group(2)}].body"
    (i, j) = (m.group(1).removeprefix(parent + "[") for m in (first, second))
    if not (i.endswith("]") and j.endswith("]") and i[:-1].isdigit() and j[:-1].isdigit()):
        return []  # (a barrier every block meets stays out of loops and conditions)
    at = max(int(i.rstrip("]")), int(j.rstrip("]")))
    bar = _fresh(s, "cbar")
    return [
        Fix(
            description=f"let the blocks of the cluster meet at a cluster barrier ({bar!r} "
            f"over {axis!r}) before {second.group(1)}: the write comes before the read",
            edits=[
                Edit(
                    op="add",
                    path=f"call.scratch.{bar}",
                    value={"kind": "cluster_barrier", "collective_axes": [axis]},
                ),
                Edit(
                    op="add", path=f"{parent}[{at}]", value={"op": "barrier_arrive", "barrier": bar}
                ),
                Edit(
                    op="add",
                    path=f"{parent}[{at + 1}]",
                    value={"op": "barrier_wait", "barrier": bar},
                ),
            ],
        )
    ]


def _wait_after_signals(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A race between devices in a kernel whose signals to a peer are never waited for
    after them: each device waits on its own semaphore (which its peer signals, the ring
    idiom) right after each such signal, for the signal's count, before it reads."""
    if " on device " not in d.message or " device " not in d.message.partition(": ")[2]:
        return []
    edits: list[Edit] = []
    for p, prog in enumerate(s.call.programs):
        spots = []
        for path, st in _statements(prog.body, f"call.programs[{p}].body"):
            if not isinstance(st, SemaphoreSignal) or st.device is None:
                continue
            parent, _, k = path.rpartition("[")
            body = get_path(s, parent)
            j = int(k.rstrip("]"))
            sem = (_root(s, p, st.sem) or ())[:2]
            if any(
                isinstance(x, SemaphoreWait) and (_root(s, p, x.sem) or ())[:2] == sem
                for x in body[j + 1 :]
            ):
                continue  # (a wait on the same semaphore, by whatever name, follows)
            wait: dict[str, Any] = {"op": "semaphore_wait", "sem": st.sem}
            if st.inc != 1:
                wait["value"] = st.inc
            spots.append(Edit(op="add", path=f"{parent}[{j + 1}]", value=wait))
        edits += reversed(spots)  # (the last first: an add moves no path before it)
    if not edits:
        return []
    names = sorted({e.value["sem"] for e in edits})
    return [
        Fix(
            description=f"wait for {', '.join(names)} right after signalling the peer "
            f"({len(edits)} place(s)): the signal orders the writes before it, only a wait "
            "orders the reads after it",
            edits=edits,
        )
    ]


def _multimem_own_ref(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTIMEM_PEER_REF: a multimem load or store reaches every device of its axes
    already: it takes the ref itself, not one peer's view (the ``remote_ref`` step of the
    view it names goes)."""
    name, edits = _peer_steps(s, d)
    if not edits:
        return []
    return [
        Fix(
            description=f"drop the peer view ({name!r} without remote_ref): a multimem "
            "access reaches every device of its axes already",
            edits=edits,
        )
    ]


_PARTIAL_WAIT = re.compile(r"wait at (call\.programs\[\d+\]\S*) saw only the signal")


def _wait_for_all(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A read after a wait that may see only some of the signals it counts on (two
    waits for 1 where two peers signal): the first wait waits for them all (the sum of
    the waits on that semaphore that follow it, with no signal between), and the later
    waits go."""
    m = _PARTIAL_WAIT.search(d.message)
    if m is None:
        return []
    parent, _, k = m.group(1).rpartition("[")
    body = get_path(s, parent)
    j = int(k.rstrip("]"))
    first = body[j]
    if not isinstance(first, SemaphoreWait) or not isinstance(first.value, int):
        return []
    later = []
    for i in range(j + 1, len(body)):
        st = body[i]
        if isinstance(st, SemaphoreSignal | SemaphoreSignalMulticast | Loop | When):
            break
        if isinstance(st, SemaphoreWait) and st.sem == first.sem:
            if not isinstance(st.value, int) or st.decrement != first.decrement:
                return []
            later.append((i, st.value))
    if not later:
        return []
    total = first.value + sum(v for _, v in later)
    edits = [Edit(op="remove", path=f"{parent}[{i}]") for i, _ in reversed(later)]
    edits.append(Edit(op="replace", path=f"{m.group(1)}.value", value=total))
    return [
        Fix(
            description=f"wait for all {total} signals of {first.sem} at {m.group(1)} "
            f"(not {first.value}): a wait for fewer may see any of the signallers",
            edits=edits,
        )
    ]


def _wait_for_the_copy(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A read of SMEM that no wait orders after the async copy writing it: wait on that
    copy's barrier just before the read."""
    if "no wait completes that async copy" not in d.message:
        return []
    paths = _RACE_PATHS.search(d.message)
    first = _AT_STMT.match(paths.group(1)) if paths else None
    second = _AT_STMT.match(paths.group(2)) if paths else None
    if first is None or second is None:
        return []
    copy = get_path(s, first.group(1))
    if not isinstance(copy, CopyGmemToSmem) or not copy.barrier:
        return []
    wait = {"op": "barrier_wait", "barrier": copy.barrier}
    return [
        Fix(
            description=f"wait on {copy.barrier!r} (the barrier the copy at {first.group(1)} "
            f"arrives on) before {second.group(1)} reads what it copied",
            edits=[Edit(op="add", path=second.group(1), value=wait)],
        )
    ]


def _untiled(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TMA_TILING_NO_SWIZZLE: a scratch tiled with no swizzle is copied untiled (the
    tiling goes; the data is the same, only its order in SMEM was to change)."""
    at = _AT_STMT.match(d.path)
    name = get_path(s, d.path) if at is not None else None
    root = _root(s, int(at.group(2)), name) if at is not None and isinstance(name, str) else None
    if root is None or root[0] != "call.scratch":
        return []
    steps = s.call.scratch[root[1]].transforms
    edits = [
        Edit(op="remove", path=f"call.scratch.{root[1]}.transforms[{k}]")
        for k in reversed(range(len(steps)))
        if isinstance(steps[k], Tiling)
    ]
    if not edits or any(isinstance(t, Swizzle) for t in steps):
        return []
    return [
        Fix(
            description=f"drop the tiling of {root[1]!r}: Mosaic GPU tiles an SMEM ref for "
            "a copy only with a swizzle",
            edits=edits,
        )
    ]


_DUP_PARAM = re.compile(
    r"kernel parameter '(\w+)' is already defined at (call\.args\[(\d+)\]\.param)"
)


def _own_param(s: Scenario, d: Diagnostic) -> list[Fix]:
    """XREF_DUPLICATE_NAME: an argument's parameter named as an output gets its own name
    (``<buffer>_ref``, the convention), the output keeps its name."""
    m = _DUP_PARAM.search(d.message)
    if m is None:
        return []
    arg = s.call.args[int(m.group(3))]
    if not isinstance(arg, BufferArg):
        return []
    new = _fresh(s, f"{arg.buffer}_ref")
    return [
        Fix(
            description=f"call buffer {arg.buffer!r}'s parameter {new!r}: "
            f"{m.group(1)!r} names the output",
            edits=[Edit(op="replace", path=m.group(2), value=new)],
        )
    ]


def _barrier_flat_index(s: Scenario, d: Diagnostic) -> list[Fix]:
    """BARRIER_TRANSFORM: a barrier array reshaped, then indexed by constants, is indexed
    at the flat (row-major) position instead (barriers take only indexing)."""
    steps = get_path(form_of(s), d.path.rpartition("[")[0])
    if len(steps) != 2 or steps[0].get("op") != "reshape" or steps[1].get("op") != "at":
        return []
    shape, index = steps[0]["shape"], steps[1]["index"]
    if len(index) != len(shape) or not all(isinstance(v, int) for v in [*shape, *index]):
        return []
    flat = 0
    for size, i in zip(shape, index, strict=True):
        flat = flat * size + i
    return [
        Fix(
            description=f"index the barrier array at {flat} (where [{', '.join(map(str, index))}] "
            f"of the {tuple(shape)} reshape falls): barriers take only indexing",
            edits=[
                Edit(
                    op="replace",
                    path=d.path.rpartition("[")[0],
                    value=[{"op": "at", "index": [flat]}],
                )
            ],
        )
    ]


def _peer_reaches_gmem(s: Scenario, d: Diagnostic) -> list[Fix]:
    """REMOTE_SMEM: a peer reaches only GMEM: the SMEM scratch a remote view names
    becomes an output of the same shape and dtype (GMEM, which the peer can write)."""
    at = _AT_STMT.match(d.path)
    name = get_path(s, d.path) if at is not None else None
    root = _root(s, int(at.group(2)), name) if at is not None and isinstance(name, str) else None
    if root is None or root[0] != "call.scratch":
        return []
    key = root[1]
    sc = s.call.scratch[key]
    if getattr(sc, "memory_space", None) != "SMEM" or sc.transforms:
        return []
    return [
        Fix(
            description=f"make {key!r} an output (GMEM): a peer device reaches only GMEM, "
            "not another device's SMEM",
            edits=[
                Edit(op="remove", path=f"call.scratch.{key}"),
                Edit(
                    op="add",
                    path=f"call.outputs.{key}",
                    value={"shape": list(sc.shape), "dtype": sc.dtype},
                ),
            ],
        )
    ]


def _reshape_the_buffer(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TMA_GMEM_TRANSFORM of a reshape of an argument the kernel reads only through that
    view: the buffer has the view's shape (the same elements, row-major) and the reshape
    goes."""
    at = _AT_STMT.match(d.path)
    name = get_path(s, d.path) if at is not None else None
    if at is None or not isinstance(name, str):
        return []
    program = int(at.group(2))
    found = [
        (path, st)
        for path, st in _statements(s.call.programs[program].body, f"call.programs[{program}].body")
        if isinstance(st, Let) and st.let == name
    ]
    if len(found) != 1:
        return []
    path, let = found[0]
    args = [a for a in s.call.args if isinstance(a, BufferArg) and a.param == let.ref]
    if len(args) != 1 or args[0].transforms or not let.transforms:
        return []
    if not all(isinstance(t, Reshape) for t in let.transforms):
        return []
    buffer = args[0].buffer
    if args[0].spec is not None:
        return []  # (dim 0 over the devices keeps each device's elements; another spec may not)
    if sum(isinstance(a, BufferArg) and a.buffer == buffer for a in s.call.args) != 1:
        return []
    data = form_of(s)  # (made once: read twice)
    if _mentions(data["call"]["programs"], let.ref) != 1:
        return []  # (the argument is read elsewhere as it is)
    size = 1
    for n in s.buffers[buffer].shape:
        size *= n
    shape = list(get_path(data, f"{path}.transforms")[-1]["shape"])
    known = 1
    for n in shape:
        known *= n if n != -1 else 1
    shape = [size // known if n == -1 else n for n in shape]
    return [
        Fix(
            description=f"give buffer {buffer!r} the shape {shape} (the same elements, "
            f"row-major) and drop the reshape: a TMA copy takes only indexed GMEM refs",
            edits=[
                Edit(op="replace", path=f"buffers.{buffer}.shape", value=shape),
                Edit(op="replace", path=f"{path}.transforms", value=[]),
            ],
        )
    ]


def _mentions(node: Any, name: str) -> int:
    """How many string fields of a JSON form are exactly ``name``."""
    if isinstance(node, dict):
        return sum(_mentions(v, name) for v in node.values())
    if isinstance(node, list):
        return sum(_mentions(v, name) for v in node)
    return int(node == name)


def _race_repairs(s: Scenario, d: Diagnostic) -> list[Fix]:
    """RACE / RACE_DETECTED: the writers split, the blocks of a cluster meet, each
    device waits after signalling its peer, a wait waits for all its signals, a read
    waits for the async copy it reads, a barrier waits for all who arrive on it, each
    round gets a semaphore of its own, or a thread hands its write to another at a
    barrier."""
    return [
        *_race_split(s, d),
        *_cluster_meet(s, d),
        *_wait_after_signals(s, d),
        *_wait_for_all(s, d),
        *_wait_for_the_copy(s, d),
        *_all_arrivals(s, d),
        *_semaphore_per_round(s, d),
        *_thread_handoff(s, d),
    ]


_TRAILING_TILE = re.compile(r"Swizzle (\d+) requires the trailing dimension to be of size (\d+)")


def _tile_for_swizzle(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SWIZZLE_TRAILING_DIM on a scratch: tile it so that a tile's trailing dimension is
    the swizzle's width (``TilingTransform((8, n))`` before the swizzle, as Mosaic GPU
    kernels do); the data and the swizzle stay as written."""
    m = _TRAILING_TILE.search(d.message)
    if m is None or not d.path.startswith("call.scratch."):
        return []
    wanted = int(m.group(2))
    tpath, _, k = d.path.rpartition("[")
    name = tpath.split(".")[2]
    sc = s.call.scratch[name]
    steps = get_path(form_of(s), tpath)
    shape = list(getattr(sc, "shape", []))
    if any(t.get("op") == "tiling" for t in steps) or len(shape) < 2:
        return []
    if shape[-1] % wanted or shape[-2] % 8:
        return []
    return [
        Fix(
            description=f"tile {name!r} by (8, {wanted}) before the swizzle: each tile's "
            f"trailing dimension is the {wanted} elements the swizzle spans",
            edits=[
                Edit(
                    op="add",
                    path=f"{tpath}[{k.rstrip(']')}]",
                    value={"op": "tiling", "tile": [8, wanted]},
                )
            ],
        )
    ]


def _named(s: Scenario, d: Diagnostic) -> tuple[int, str] | None:
    """``(program, ref name)`` of what a diagnostic points at: the ref a statement's field
    names, or the ref a view (``let``) is made of when it points into its steps."""
    at = _AT_STMT.match(d.path)
    if at is None or at.group(3) is None:
        return None
    stmt = get_path(s, at.group(1))
    name = stmt.ref if isinstance(stmt, Let) else getattr(stmt, at.group(3), None)
    return (int(at.group(2)), name) if isinstance(name, str) else None


def _scratch_of(s: Scenario, d: Diagnostic) -> str | None:
    """The scratch buffer a diagnostic's ref comes from (through any views), else None."""
    named = _named(s, d)
    root = None if named is None else _root(s, *named)
    return root[1] if root is not None and root[0] == "call.scratch" else None


def _tmem_to_smem(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A TMEM scratch used as memory (a plain store, a reshape, a transpose): keep it in
    SMEM, which takes them; TMEM is only the tensor core's accumulator."""
    key = _scratch_of(s, d)
    if key is None or getattr(s.call.scratch[key], "memory_space", "") != "TMEM":
        return []
    return [
        Fix(
            description=f"keep {key!r} in SMEM: TMEM holds only the tensor core's "
            "accumulator, not what is stored, reshaped or transposed",
            edits=[Edit(op="replace", path=f"call.scratch.{key}.memory_space", value="SMEM")],
        )
    ]


def _plain_layout(s: Scenario, d: Diagnostic) -> list[Fix]:
    """An SMEM scratch whose tiling or swizzle a view cannot go through (an integer
    index, a slice of a swizzled dim, a reshape): drop its layout steps (the values stay;
    only the bank-conflict-free layout goes)."""
    out: list[Fix] = []
    for key in _scratches_at(s, d):
        steps = getattr(s.call.scratch[key], "transforms", None)
        if not steps or not all(isinstance(t, Tiling | Swizzle) for t in steps):
            continue
        what = " and ".join(dict.fromkeys(t.op for t in steps))
        out.append(
            Fix(
                description=f"drop the {what} of {key!r}: what reads or writes it here needs "
                "the plain row-major layout (the values are the same; only the "
                "bank-conflict-free layout goes)",
                edits=[Edit(op="replace", path=f"call.scratch.{key}.transforms", value=[])],
            )
        )
    return out


def _scratches_at(s: Scenario, d: Diagnostic) -> list[str]:
    """The scratch buffers behind a diagnostic: its ref's, else (a statement's own
    error, or a field that names none) those of every ref the statement names."""
    key = _scratch_of(s, d)
    if key is not None:
        return [key]
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt = get_path(s, at.group(1))
    program = int(at.group(2))
    out: list[str] = []
    for field, _ in getattr(stmt, "REFS", ()):
        name = getattr(stmt, field, None)
        root = _root(s, program, name) if isinstance(name, str) else None
        if root is not None and root[0] == "call.scratch" and root[1] not in out:
            out.append(root[1])
    return out


def _view_step(s: Scenario, d: Diagnostic, kind: type) -> tuple[str, int, Any] | None:
    """``(path of the let, index of the step, the let)`` of the step of type ``kind`` in
    the view a diagnostic points at (its statement's field, or the let itself)."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return None
    program = int(at.group(2))
    stmt = get_path(s, at.group(1))
    name = stmt.let if isinstance(stmt, Let) else getattr(stmt, at.group(3) or "", None)
    body = f"call.programs[{program}].body"
    for _ in range(64):
        hits = [
            (p, st)
            for p, st in _statements(s.call.programs[program].body, body)
            if isinstance(st, Let) and st.let == name
        ]
        if len(hits) != 1:
            return None
        path, let = hits[0]
        steps = [k for k, t in enumerate(let.transforms) if isinstance(t, kind)]
        if steps:
            return path, steps[-1], let
        name = let.ref
    return None


def _drop_step(path: str, k: int) -> Edit:
    """Remove step ``k`` of the let at ``path``."""
    return Edit(op="remove", path=f"{path}.transforms[{k}]")


def _cluster_ref_gmem(s: Scenario, d: Diagnostic) -> list[Fix]:
    """``cluster_ref`` of a GMEM ref: every block of the cluster sees the same global
    memory, so the view of another block's copy is the ref itself: drop the step."""
    hit = _view_step(s, d, ClusterRef)
    if hit is None:
        return []
    path, k, let = hit
    at = _AT_STMT.match(path)
    root = _root(s, int(at.group(2)) if at else 0, let.ref)
    if root is None or root[0] == "call.scratch":
        return []
    return [
        Fix(
            description=f"drop the cluster_ref of {let.let!r}: {let.ref!r} is in GMEM, which "
            "every block of the cluster shares (another block's copy is the same memory)",
            edits=[_drop_step(path, k)],
        )
    ]


def _own_cluster_axis(s: Scenario, d: Diagnostic) -> list[Fix]:
    """CLUSTER_REF_UNKNOWN_AXIS / CLUSTER_REF_MULTI_AXIS on a GMEM ref: the step goes
    (``_cluster_ref_gmem``); on SMEM, name the one cluster axis (an unknown name becomes
    the cluster's only axis; several axes: one fix per axis kept)."""
    out = _cluster_ref_gmem(s, d)
    hit = _view_step(s, d, ClusterRef)
    if hit is None:
        return out
    path, k, let = hit
    at = _AT_STMT.match(path)
    prog = s.call.programs[int(at.group(2)) if at else 0]
    cluster = list(prog.mesh.cluster)
    block = dict(let.transforms[k].block)
    unknown = [a for a in block if a not in cluster]
    options: list[dict[str, Any]] = []
    if unknown and len(cluster) == 1 and len(block) == 1:
        options.append({cluster[0]: next(iter(block.values()))})
    elif len(block) > 1:
        options += [{a: v} for a, v in block.items() if a in cluster]
    for new in options:
        out.append(
            Fix(
                description=f"name one cluster axis in the cluster_ref of {let.let!r}: {new}",
                edits=[Edit(op="replace", path=f"{path}.transforms[{k}].block", value=new)],
            )
        )
    return out


def _own_copy_multicast(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTICAST_TMA_LOAD: a TMA load reads one copy; the multicast view (which only
    fans writes out) goes, and the load reads the device's own copy."""
    hit = _view_step(s, d, MulticastRef)
    if hit is None:
        return []
    path, k, let = hit
    return [
        Fix(
            description=f"drop the multicast_ref of {let.let!r}: a load reads this device's "
            "own copy (a multicast view only fans writes out)",
            edits=[_drop_step(path, k)],
        )
    ]


def _store_plainly(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TMA_SMEM_NOT_CONTIGUOUS: a TMA store reads a contiguous SMEM block; a strided
    view is stored with a plain copy (``dst[...] = src[...]``) instead."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return []
    stmt = get_path(form_of(s), at.group(1))
    if stmt.get("op") != "tma_store":
        return []
    return [
        Fix(
            description="store the strided SMEM view with a plain copy (dst[...] = src[...]): "
            "a TMA store reads only a contiguous block of SMEM",
            edits=[
                Edit(
                    op="replace",
                    path=at.group(1),
                    value={"op": "copy", "src": stmt["src"], "dst": stmt["dst"]},
                )
            ],
        )
    ]


def _a_permutation(s: Scenario, d: Diagnostic) -> list[Fix]:
    """TRANSPOSE_INVALID_PERM_GPU: an axis repeated in ``perm``: each repeat becomes the
    axis left out, in order (``[0, 0]`` -> ``[0, 1]``)."""
    perm = get_path(s, d.path)
    if not isinstance(perm, list | tuple) or not all(isinstance(p, int) for p in perm):
        return []
    n = len(perm)
    missing = [a for a in range(n) if a not in perm]
    seen: set[int] = set()
    new = []
    for p in perm:
        if 0 <= p < n and p not in seen:
            seen.add(p)
            new.append(p)
        elif missing:
            new.append(missing.pop(0))
        else:
            return []
    if new == list(perm):
        return []
    return [
        Fix(
            description=f"make perm a permutation of the {n} axes: {new}",
            edits=[Edit(op="replace", path=d.path, value=new)],
        )
    ]


def _multimem_to_gmem(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTIMEM_DST_NOT_GMEM: a multimem store writes GMEM: write an output of the same
    shape and dtype instead."""
    at = _AT_STMT.match(d.path)
    key = _scratch_of(s, d)
    if at is None or key is None:
        return []
    sc = s.call.scratch[key]
    outs = [
        o
        for o, spec in s.call.outputs.items()
        if list(spec.shape) == list(getattr(sc, "shape", None) or [])
        and spec.dtype == getattr(sc, "dtype", None)
    ]
    return [
        Fix(
            description=f"write the output {o!r} (GMEM, the same shape and dtype) instead of "
            f"the SMEM scratch {key!r}",
            edits=[Edit(op="replace", path=d.path, value=o)],
        )
        for o in outs
        if get_path(s, d.path) == key
    ]


def _stmt_at(s: Scenario, d: Diagnostic) -> tuple[str, int, Any] | None:
    """``(path, program, statement)`` of the statement a diagnostic points into."""
    at = _AT_STMT.match(d.path)
    if at is None:
        return None
    return at.group(1), int(at.group(2)), get_path(s, at.group(1))


def _retyped(s: Scenario, program: int, names: list[str], dtype: str) -> list[Edit] | None:
    """Edits that give the plain refs ``names`` (an output, buffer or scratch with no
    reinterpreting view between) the dtype ``dtype``, with every ref a statement of the
    program copies into them (so the copies keep matching). None: one is a view."""
    keys: dict[str, str] = {}
    todo = list(names)
    while todo:
        root = _root(s, program, todo.pop(), _reinterprets)
        if root is None or root[2]:
            return None
        table, key, _ = root
        if f"{table}.{key}" in keys:
            continue
        keys[f"{table}.{key}"] = key
        body = f"call.programs[{program}].body"
        for _, st in _statements(s.call.programs[program].body, body):
            dst, src = getattr(st, "dst", None), getattr(st, "src", None)
            if not isinstance(dst, str) or not isinstance(src, str):
                continue
            if _root(s, program, dst)[:2] == (table, key):  # type: ignore[index]
                todo.append(src)
    return [
        Edit(op="replace", path=f"{where}.dtype", value=dtype)
        for where in keys
        if getattr(get_path(s, where), "dtype", dtype) != dtype
    ]


def _dot_in_f16(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_DTYPE / DOT_INT_ACC: WGMMA with an [K, N] rhs and a float32 accumulator
    multiplies 16-bit floats: the operands (and what is copied into them) become
    float16."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    _, program, stmt = hit
    if not isinstance(getattr(stmt, "lhs", None), str) or not isinstance(stmt.rhs, str):
        return []
    edits = _retyped(s, program, [stmt.lhs, stmt.rhs], "float16")
    if not edits:
        return []
    old = getattr(get_path(s, edits[0].path.rpartition(".")[0]), "dtype", "?")
    return [
        Fix(
            description=f"multiply float16 operands (not {old}): the operands of the dot and "
            "what is copied into them become float16 (the product still accumulates in "
            "float32)",
            edits=edits,
        )
    ]


def _dot_split_n(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_N_TOO_LARGE: one WGMMA makes at most 256 columns: the product is split along
    N into dots of 256 columns (views of rhs and dst, side by side)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    path, program, stmt = hit
    n = int(_ints(re.search(r"got: (\d+)", d.message).group(1))[0])  # type: ignore[union-attr]
    width = max(w for w in range(8, 257, 8) if n % w == 0)
    if n <= 256 or width < 8:
        return []
    parent, _, last = path.rpartition("[")
    j = int(last.rstrip("]"))
    new: list[dict[str, Any]] = []
    taken: set[str] = set()
    for k in range(n // width):
        cols = [k * width, (k + 1) * width]
        names = []
        for side in ("rhs", "dst"):
            base = getattr(stmt, side)
            name = _fresh(s, f"{base}_{k}")
            while name in taken:
                name += "_"
            taken.add(name)
            names.append(name)
            new.append(
                {"let": name, "ref": base, "transforms": [{"op": "at", "index": [None, cols]}]}
            )
        new.append({"op": "dot", "dst": names[1], "lhs": stmt.lhs, "rhs": names[0]})
    edits = [Edit(op="remove", path=path)]
    edits += [Edit(op="add", path=f"{parent}[{j + i}]", value=v) for i, v in enumerate(new)]
    return [
        Fix(
            description=f"split the product along N into {n // width} dots of {width} columns "
            f"(one WGMMA makes at most 256): columns k*{width}..(k+1)*{width} of "
            f"{stmt.rhs!r} into the same columns of {stmt.dst!r}",
            edits=edits,
        )
    ]


_DOT_SHAPES = re.compile(r"lhs=\((\d+), (\d+)\), rhs=\S*?\((\d+), (\d+)\)")


def _dot_k_agree(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_SHAPE_MISMATCH: lhs [M, K] and rhs [K', N] disagree on K: the operand that is a
    plain scratch takes the other's K."""
    hit = _stmt_at(s, d)
    m = _DOT_SHAPES.search(d.message)
    if hit is None or m is None:
        return []
    _, program, stmt = hit
    mm, k1, k2, nn = map(int, m.groups())
    out: list[Fix] = []
    for side, want in (("lhs", [mm, k2]), ("rhs", [k1, nn])):
        root = _root(s, program, getattr(stmt, side))
        if root is None or root[2] or root[0] != "call.scratch":
            continue
        out.append(
            Fix(
                description=f"make {root[1]!r} {want}: the dot's K is the other operand's",
                edits=[Edit(op="replace", path=f"call.scratch.{root[1]}.shape", value=want)],
            )
        )
    return out


def _dot_one_matrix(s: Scenario, d: Diagnostic) -> list[Fix]:
    """DOT_RANK: an operand with leading batch dims: the dot takes its first matrix
    (``ref.at[0, ...]``, a view named for it)."""
    hit = _stmt_at(s, d)
    at = _AT_STMT.match(d.path)
    if hit is None or at is None or at.group(3) not in ("lhs", "rhs"):
        return []
    path, program, stmt = hit
    field = at.group(3)
    name = getattr(stmt, field)
    root = _root(s, program, name)
    if root is None:
        return []
    rank = len(getattr(get_path(s, f"{root[0]}.{root[1]}"), "shape", None) or [])
    if root[2] or rank <= 2:
        return []
    view = _fresh(s, f"{name}_0")
    index = [0] * (rank - 2)
    let = {"let": view, "ref": name, "transforms": [{"op": "at", "index": index}]}
    return [
        Fix(
            description=f"multiply the first matrix of {name!r} ({view} = {name}.at"
            f"[{', '.join(map(str, index))}])",
            edits=[
                Edit(op="replace", path=f"{path}.{field}", value=view),
                Edit(op="add", path=path, value=let),
            ],
        )
    ]


def _captured_ref(s: Scenario, d: Diagnostic) -> list[Fix]:
    """REF_NOT_A_REF: a view of a captured array (an array, not a Ref): pass the array
    as an argument (a Ref) instead of capturing it."""
    named = _named(s, d)
    if named is None:
        return []
    return [capture_to_arg(s, i) for i, c in enumerate(s.call.captures) if c.name == named[1]]


#: the 8-bit integer dtypes and the 16-bit ones their arithmetic is done in
_WIDER = {"int8": "int16", "uint8": "uint16"}


def _wider_value(s: Scenario, path: str, program: int, stmt: Compute) -> list[Fix]:
    """GPU_8BIT_ARITH in a ``compute`` value: each 8-bit load is widened to 16 bits
    (``.astype``) and the value cast back to the destination's dtype."""
    root = _root(s, program, stmt.dst)
    dtype = None if root is None else getattr(get_path(s, f"{root[0]}.{root[1]}"), "dtype", None)
    tree = V.parse(stmt.value)
    names = set(tree.loads())
    kinds: dict[str, str] = {}
    for n in names:
        r = _root(s, program, n)
        kind = None if r is None else getattr(get_path(s, f"{r[0]}.{r[1]}"), "dtype", None)
        if kind in _WIDER:
            kinds[n] = kind
    if not kinds or dtype not in _WIDER:
        return []
    text = tree.source(V.LABEL)
    for n, kind in sorted(kinds.items()):
        wide = f"{n}[...].astype(jnp.{_WIDER[kind]})"
        text = re.sub(rf"(?<![\w.]){re.escape(n)}\[\.\.\.\]", wide, text)
    value = f"({text}).astype(jnp.{dtype})"
    return [
        Fix(
            description=f"compute in {_WIDER[dtype]} and cast back to {dtype}: "
            f"{stmt.dst}[...] = {value}",
            edits=[Edit(op="replace", path=f"{path}.value", value=value)],
        )
    ]


def _wider_add(s: Scenario, d: Diagnostic) -> list[Fix]:
    """GPU_8BIT_ARITH: an 8-bit integer add is done in 16 bits and cast back (``(a16 +
    b16).astype(int8)``: the same wrapping sum, as JAX's message asks)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    path, program, stmt = hit
    if isinstance(stmt, Compute):
        return _wider_value(s, path, program, stmt)
    names = [getattr(stmt, f, None) for f in ("lhs", "rhs", "dst")]
    if not isinstance(stmt, Add) or not all(isinstance(n, str) for n in names):
        return []
    lhs, rhs, dst = (str(n) for n in names)
    roots = [_root(s, program, n) for n in (lhs, rhs, dst)]
    kinds = {getattr(get_path(s, f"{r[0]}.{r[1]}"), "dtype", None) for r in roots if r}
    if len(kinds) != 1 or (dtype := kinds.pop()) not in _WIDER:
        return []
    wide = _WIDER[dtype]
    value = f"({lhs}[...].astype(jnp.{wide}) + {rhs}[...].astype(jnp.{wide})).astype(jnp.{dtype})"
    return [
        Fix(
            description=f"add in {wide} and cast back to {dtype} (the same wrapping sum): "
            f"{dst}[...] = {value}",
            edits=[
                Edit(op="replace", path=path, value={"op": "compute", "dst": dst, "value": value})
            ],
        )
    ]


_STEP = re.compile(r"^(call\.programs\[(\d+)\](?:\.body\[\d+\])+)\.transforms\[(\d+)\]$")
_REF_SIZE = re.compile(r"size of the ref \((\d+)\)")


def _plain_shape(s: Scenario, program: int, name: str) -> list[int] | None:
    """The shape of the plain output, buffer or scratch ``name`` is (no view between)."""
    root = _root(s, program, name)
    if root is None or root[2]:
        return None
    shape = getattr(get_path(s, f"{root[0]}.{root[1]}"), "shape", None)
    return None if shape is None else list(shape)


def _reshape_fits(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A reshape JAX refuses (RESHAPE_SIZE, RESHAPE_MINUS_ONE, RESHAPE_NOT_DIVISIBLE):
    the shape of what the view is copied to or from, where it holds the same elements;
    a shape that asks for fewer rows takes them (a slice from 0) instead; one ``-1``
    kept, the ref's minor dimension for the others."""
    m = _STEP.match(d.path)
    if m is None:
        return []
    path, program, k = m.group(1), int(m.group(2)), int(m.group(3))
    let = get_path(s, path)
    step = get_path(form_of(s), d.path)
    if not isinstance(let, Let) or step.get("op") != "reshape":
        return []
    asked = list(step["shape"])
    have = None
    if (hit := _RESHAPE.search(d.message)) is not None:
        have = _ints(hit.group(1))
    elif k == 0:
        have = _plain_shape(s, program, let.ref)
    size = math.prod(have) if have else None
    if (hit2 := _REF_SIZE.search(d.message)) is not None:
        size = int(hit2.group(1))
    out: list[Fix] = []
    last = k == len(let.transforms) - 1
    body = f"call.programs[{program}].body"
    for st_path, st in _statements(s.call.programs[program].body, body):
        src, dst = getattr(st, "src", None), getattr(st, "dst", None)
        other = dst if src == let.let else src if dst == let.let else None
        want = None
        if isinstance(other, str) and last:
            field = "dst" if src == let.let else "src"
            want = _plain_shape(s, program, other) or _view_shape(s, program, st_path, field)
        if want and size == math.prod(want) and want != asked:
            out.append(
                Fix(
                    description=f"reshape to {want}, the shape of {other!r} it is copied "
                    f"{'to' if src == let.let else 'from'} ({size} elements)",
                    edits=[Edit(op="replace", path=f"{d.path}.shape", value=want)],
                )
            )
            break
    if (
        have
        and len(have) == len(asked)
        and all(0 < a <= h for a, h in zip(asked, have, strict=True))
    ):
        index = [[0, a] for a in asked]
        out.append(
            Fix(
                description=f"take the first {asked} of the {have} ref (a slice from 0) "
                "instead of a reshape (a reshape keeps every element; this shape holds fewer)",
                edits=[Edit(op="replace", path=d.path, value={"op": "at", "index": index})],
            )
        )
    if have and asked.count(-1) > 1:
        first = asked.index(-1)
        new = [a if a != -1 or i == first else have[-1] for i, a in enumerate(asked)]
        out.append(
            Fix(
                description=f"reshape to {new}: one dimension is inferred (-1), the others "
                f"keep the ref's minor dimension ({have[-1]})",
                edits=[Edit(op="replace", path=f"{d.path}.shape", value=new)],
            )
        )
    return out


def _one_program(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MPMD_SCRATCH_CORE_TYPE: several programs of one mesh with scratch: one
    ``plgpu.kernel`` program with a thread per former program (``pl.when(wg == k)``
    runs program ``k``'s body), which allocates the scratch itself."""
    progs = s.call.programs
    meshes = {(tuple(p.mesh.grid.items()), tuple(p.mesh.cluster.items())) for p in progs}
    if len(progs) < 2 or len(meshes) != 1 or any(p.mesh.threads is not None for p in progs):
        return []
    data = form_of(s)
    axes = {*progs[0].mesh.grid, *progs[0].mesh.cluster, *(s.device_mesh or {})}
    wg = next(n for n in ("wg", "role", "program", "prog_k") if n not in axes)
    body = [
        {"op": "when", "cond": f"{wg} == {k}", "body": p["body"]}
        for k, p in enumerate(data["call"]["programs"])
        if p["body"]
    ]
    mesh = {**data["call"]["programs"][0]["mesh"], "threads": {"name": wg, "count": len(progs)}}
    return [
        Fix(
            description=f"one plgpu.kernel program with {len(progs)} threads ({wg}): thread k "
            f"runs program k's body (pl.when({wg} == k)); plgpu.kernel allocates the scratch",
            edits=[
                Edit(op="replace", path="call.entry", value="plgpu.kernel"),
                Edit(op="replace", path="call.programs", value=[{"mesh": mesh, "body": body}]),
            ],
        )
    ]


def _counter_semaphore(s: Scenario, d: Diagnostic) -> list[Fix]:
    """SEMAPHORE_READ_SMEM: ``pl.semaphore_read`` of an SMEM array: the scratch becomes
    the semaphore(s) it reads (of the same shape; signals and waits change them)."""
    out: list[Fix] = []
    for key in _scratches_at(s, d) or [
        k for k in s.call.scratch if f"semaphore_read({k})" in str(get_path(s, d.path))
    ]:
        sc = s.call.scratch[key]
        if getattr(sc, "memory_space", "") != "SMEM":
            continue
        shape = list(getattr(sc, "shape", None) or [])
        value: dict[str, Any] = {"kind": "semaphore"}
        if shape and math.prod(shape) != 1:
            value["shape"] = shape
        out.append(
            Fix(
                description=f"make {key!r} a semaphore{' array' if 'shape' in value else ''}: "
                "pl.semaphore_read reads a semaphore, not SMEM",
                edits=[Edit(op="replace", path=f"call.scratch.{key}", value=value)],
            )
        )
    return out


_ADD_SHAPES = re.compile(r"\(([\d, ]*)\), \(([\d, ]*)\)")


def _operands_agree(s: Scenario, d: Diagnostic) -> list[Fix]:
    """ADD_SHAPE_MISMATCH: the operand that is a plain buffer or scratch takes the shape
    of the other (and of what the sum is stored in)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    _, program, stmt = hit
    names = [getattr(stmt, f, None) for f in ("lhs", "rhs")]
    if not all(isinstance(n, str) for n in names):
        return []
    shapes = [_plain_shape(s, program, n) for n in names]  # type: ignore[arg-type]
    dst = _plain_shape(s, program, stmt.dst) if isinstance(stmt.dst, str) else None
    out: list[Fix] = []
    for me, other in ((0, 1), (1, 0)):
        root = _root(s, program, names[me])  # type: ignore[arg-type]
        want = shapes[other]
        if root is None or want is None or (dst is not None and dst != want):
            continue
        if root[2]:  # a view: its slices take the other's size
            out += _resize_view(s, program, names[me], want)  # type: ignore[arg-type]
            continue
        out.append(
            Fix(
                description=f"make {root[1]!r} {want}, the shape of {names[other]!r} "
                "(an elementwise sum takes operands of one shape)",
                edits=[Edit(op="replace", path=f"{root[0]}.{root[1]}.shape", value=want)],
            )
        )
    return out


def _planned(s: Scenario, program: int, path: str) -> Any:
    """The compiled plan's statement at ``path`` (its refs with views applied), or None."""
    from mpmd_lab.plan import compile as compile_plan

    for st in compile_plan(s).programs[program].stmts:
        here = format_path(st.path) if isinstance(st.path, tuple) else st.path
        if here == path:
            return st
    return None


def _view_shape(s: Scenario, program: int, path: str, field: str) -> list[int] | None:
    """The shape of the ref the statement at ``path`` names in ``field``, views applied
    (the compiled plan's), else None."""
    st = _planned(s, program, path)
    info = st.refs[field].info if st is not None and field in st.refs else None
    return None if info is None else list(info.shape)


def _copy_by_tma(s: Scenario, d: Diagnostic) -> list[Fix]:
    """GPU_LAYOUT_INFERENCE on a plain GMEM -> GMEM copy whose size no register layout
    takes: copy it with TMA through SMEM (``plgpu.kernel``: a TMA load into a staging
    buffer, a barrier wait, a TMA store, a wait for the store)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    path, program, stmt = hit
    if not isinstance(stmt, Copy):
        return []
    src, dst = (_root(s, program, n) for n in (stmt.src, stmt.dst))
    if src is None or dst is None or "call.scratch" in (src[0], dst[0]):
        return []
    shape = (
        _plain_shape(s, program, stmt.dst)
        or _plain_shape(s, program, stmt.src)
        or _view_shape(s, program, path, "dst")
    )
    dtype = getattr(get_path(s, f"{dst[0]}.{dst[1]}"), "dtype", None)
    if shape is None or dtype is None:
        return []
    stage, bar = _fresh(s, f"{stmt.dst}_smem"), _fresh(s, f"{stmt.dst}_bar")
    parent, _, last = path.rpartition("[")
    j = int(last.rstrip("]"))
    steps = [
        {"op": "copy_gmem_to_smem", "src": stmt.src, "dst": stage, "barrier": bar},
        {"op": "barrier_wait", "barrier": bar},
        {"op": "tma_store", "src": stage, "dst": stmt.dst},
        {"op": "wait_smem_to_gmem"},
    ]
    edits = [
        Edit(op="replace", path="call.entry", value="plgpu.kernel"),
        Edit(
            op="add",
            path=f"call.scratch.{stage}",
            value={"shape": shape, "dtype": dtype, "memory_space": "SMEM"},
        ),
        Edit(op="add", path=f"call.scratch.{bar}", value={"kind": "barrier"}),
        Edit(op="remove", path=path),
    ]
    edits += [Edit(op="add", path=f"{parent}[{j + i}]", value=v) for i, v in enumerate(steps)]
    return [
        Fix(
            description=f"copy {stmt.src!r} to {stmt.dst!r} with TMA through SMEM ({stage!r}, "
            f"barrier {bar!r}; plgpu.kernel): a plain copy of {math.prod(shape)} elements "
            "finds no register layout",
            edits=edits,
        )
    ]


def _all_arrivals(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A race after a barrier that completes before every thread that arrives on it has
    (``num_arrivals`` below the arrivals): the barrier waits for all of them."""
    out: list[Fix] = []
    for key, sc in s.call.scratch.items():
        n = getattr(sc, "num_arrivals", None)
        if n is None or getattr(sc, "kind", "") != "barrier":
            continue
        arrive = sum(
            1
            for p in s.call.programs
            for _, st in _statements(p.body, "")
            if isinstance(st, BarrierArrive) and st.barrier == key
        )
        if arrive > n:
            out.append(
                Fix(
                    description=f"make {key!r} complete after all {arrive} arrivals "
                    f"(num_arrivals {n} -> {arrive}): before, its phase could end before "
                    "the writer arrived",
                    edits=[
                        Edit(op="replace", path=f"call.scratch.{key}.num_arrivals", value=arrive)
                    ],
                )
            )
    return out


def _signal_in_a_loop(s: Scenario, d: Diagnostic) -> list[Fix]:
    """GPU_TRACED_CONSTANT on a signal's ``inc``: the lowering takes only a constant
    increment: signal 1, ``inc`` times (a ``fori_loop``: the same count)."""
    hit = _stmt_at(s, d)
    if hit is None or not d.path.endswith(".inc"):
        return []
    path, _, stmt = hit
    if not isinstance(stmt, SemaphoreSignal) or not isinstance(stmt.inc, str):
        return []
    one = stmt.model_dump(mode="json", exclude_none=True)
    one["inc"] = 1
    var = _fresh(s, "k")
    return [
        Fix(
            description=f"signal 1, {stmt.inc} times (a fori_loop): the increment must be a "
            "constant, the count may be traced",
            edits=[
                Edit(
                    op="replace",
                    path=path,
                    value={"op": "loop", "var": var, "start": 0, "stop": stmt.inc, "body": [one]},
                )
            ],
        )
    ]


def _declare_mesh(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTICAST_NO_DEVICE_MESH: a multicast needs a device mesh: declare one with the
    multicast's axes (2 devices each: set the count the kernel runs on)."""
    if s.device_mesh:
        return []
    hit = _view_step(s, d, MulticastRef)
    if hit is None:
        return []
    _, k, let = hit
    axes = let.transforms[k].axes
    names = [axes] if isinstance(axes, str) else list(axes)
    mesh = dict.fromkeys(names, 2)
    return [
        Fix(
            description=f"declare the device mesh {mesh} (jax.set_mesh): the multicast's axes, "
            "2 devices each (set the count you run on)",
            edits=[Edit(op="add", path="device_mesh", value=mesh)],
        )
    ]


def _semaphore_per_round(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A race between rounds that share one semaphore (a signal of the next round can
    satisfy this round's wait): each round after the first gets a semaphore of its own
    (its signals, and the wait that ends it)."""
    out: list[Fix] = []
    for p, prog in enumerate(s.call.programs):
        base = f"call.programs[{p}].body"
        for key, sc in s.call.scratch.items():
            if getattr(sc, "kind", "") != "semaphore" or getattr(sc, "shape", None):
                continue
            rounds: list[list[int]] = [[]]
            for j, st in enumerate(prog.body):
                if getattr(st, "sem", None) != key:
                    continue
                rounds[-1].append(j)
                if isinstance(st, SemaphoreWait):
                    rounds.append([])
            rounds = [r for r in rounds if r]
            if len(rounds) < 2:
                continue
            edits: list[Edit] = []
            names: list[str] = []
            taken = set()
            for r in rounds[1:]:
                name = _fresh(s, f"{key}_{len(names) + 1}")
                while name in taken:
                    name += "_"
                taken.add(name)
                names.append(name)
                edits.append(
                    Edit(op="add", path=f"call.scratch.{name}", value=sc.model_dump(mode="json"))
                )
                edits += [Edit(op="replace", path=f"{base}[{j}].sem", value=name) for j in r]
            out.append(
                Fix(
                    description=f"a semaphore per round: round{'s' if len(names) > 1 else ''} "
                    f"{', '.join(str(k + 2) for k in range(len(names)))} signal"
                    f"{'' if len(names) > 1 else 's'} and wait"
                    f"{'' if len(names) > 1 else 's'} on {', '.join(map(repr, names))}, not "
                    f"{key!r} (a signal of a later round could end an earlier round's wait)",
                    edits=edits,
                )
            )
    return out


#: a narrow dtype and the 32-bit one multimem moves it in
_WORD = {
    "float16": "float32",
    "bfloat16": "float32",
    "int8": "int32",
    "int16": "int32",
    "uint8": "uint32",
    "uint16": "uint32",
}


def _multimem_words(s: Scenario, d: Diagnostic) -> list[Fix]:
    """MULTIMEM_LOAD_WIDTH / MULTIMEM_STORE_WIDTH: a multimem access moves 32, 64 or 128
    bits per thread: the values travel as 32-bit words (the refs it reads and writes, and
    what is copied into them, take the 32-bit dtype of their kind)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    _, program, stmt = hit
    names = [getattr(stmt, f, None) for f in ("src", "dst")]
    if not all(isinstance(n, str) for n in names):
        return []
    root = _root(s, program, names[0])  # type: ignore[arg-type]
    old = None if root is None else getattr(get_path(s, f"{root[0]}.{root[1]}"), "dtype", None)
    wide = _WORD.get(old or "")
    edits = None if wide is None else _retyped(s, program, names, wide)  # type: ignore[arg-type]
    if not edits:
        return []
    return [
        Fix(
            description=f"move {wide} values, not {old} ({stmt.op} moves 32, 64 or 128 bits "
            f"per thread): the refs it reads and writes become {wide}",
            edits=edits,
        )
    ]


def _bitcast_the_value(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A plain copy (or TMA store) through a bitcast view, which Mosaic GPU does not
    lower (GPU_WG_TRANSFORMS, GPU_TRANSFORMS_UNSUPPORTED, TMA_SRC_TRANSFORM): load the
    ref and bitcast the loaded value (``dst[...] = lax.bitcast_convert_type(src[...],
    dtype)``); the view keeps its other steps (a bitcast of one width keeps the shape)."""
    hit = _stmt_at(s, d)
    if hit is None:
        return []
    path, program, stmt = hit
    body = f"call.programs[{program}].body"
    if isinstance(stmt, Let):  # (the view's step: the copy that reads the view)
        readers = [
            (p, st)
            for p, st in _statements(s.call.programs[program].body, body)
            if isinstance(st, Copy | TmaStore) and st.src == stmt.let
        ]
        if len(readers) != 1:
            return []
        path, stmt = readers[0]
    src, dst = getattr(stmt, "src", None), getattr(stmt, "dst", None)
    if not isinstance(stmt, Copy | TmaStore) or not isinstance(src, str):
        return []
    lets = [
        (p, st)
        for p, st in _statements(s.call.programs[program].body, body)
        if isinstance(st, Let) and st.let == src
    ]
    if len(lets) != 1:
        return []
    let_path, let = lets[0]
    casts = [(k, t) for k, t in enumerate(let.transforms) if isinstance(t, Bitcast)]
    root = _root(s, program, let.ref, _reinterprets)
    if len(casts) != 1 or root is None or root[2]:
        return []
    old = getattr(get_path(s, f"{root[0]}.{root[1]}"), "dtype", None)
    at_step, cast = casts[0]
    new = cast.dtype
    if old is None or dtypes.bits(old) != dtypes.bits(new):
        return []
    value = f"lax.bitcast_convert_type({src}[...], {dtypes.jnp_expr(new)})"
    edits = [Edit(op="remove", path=f"{let_path}.transforms[{at_step}]")]
    uses = _mentions(form_of(s)["call"]["programs"][program]["body"], src)
    if uses > 2:  # (the view serves other statements too: a view without the bitcast)
        plain = _fresh(s, f"{src}_{old}")
        steps = [t.model_dump(mode="json") for k, t in enumerate(let.transforms) if k != at_step]
        value = f"lax.bitcast_convert_type({plain}[...], {dtypes.jnp_expr(new)})"
        view = {"let": plain, "ref": let.ref, "transforms": steps}
        edits = [Edit(op="add", path=path, value=view)]
        parent, _, last = path.rpartition("[")
        path = f"{parent}[{int(last.rstrip(']')) + 1}]"
    edits.append(Edit(op="replace", path=path, value={"op": "compute", "dst": dst, "value": value}))
    return [
        Fix(
            description=f"load {src!r} as {old} and bitcast the value: {dst}[...] = {value} "
            "(Mosaic GPU lowers no load or store through a bitcast view)",
            edits=edits,
        )
    ]


def _is_bool(n: Any) -> bool:
    """A value node that is a boolean by its form: a comparison, a conversion to bool."""
    return (isinstance(n, V.Bin) and n.op in V.COMPARISONS) or (
        isinstance(n, V.Cast | V.Bitcast) and n.dtype == "bool"
    )


def _nodes(n: Any) -> Iterator[Any]:
    yield n
    for c in n.children():
        yield from _nodes(c)


def _numbers_not_bools(s: Scenario, d: Diagnostic) -> list[Fix]:
    """VALUE_DTYPE (a negated or subtracted comparison) and BITCAST_VALUE_BOOL (a bitcast
    to or from bool): the boolean becomes a number by conversion (``.astype``), in the
    destination's dtype (a bitcast's own dtype), which is what a bool's bits mean."""
    hit = _stmt_at(s, d)
    if hit is None or not d.path.endswith(".value"):
        return []
    path, program, stmt = hit
    text = getattr(stmt, "value", None)
    dst = getattr(stmt, "dst", None)
    if not isinstance(text, str) or not isinstance(dst, str):
        return []
    root = _root(s, program, dst)
    want = None if root is None else getattr(get_path(s, f"{root[0]}.{root[1]}"), "dtype", None)
    if want in (None, "bool"):
        want = "int32"
    tree = V.parse(text)
    whole = tree.source(V.LABEL)
    swaps: list[tuple[str, str]] = []
    for n in _nodes(tree):
        if isinstance(n, V.Neg) and _is_bool(n.a):
            swaps.append((n.a.source(V.LABEL), V.Cast(n.a, want).source(V.LABEL)))
        elif isinstance(n, V.Bin) and n.op == "-":
            swaps += [
                (x.source(V.LABEL), V.Cast(x, want).source(V.LABEL))
                for x in (n.a, n.b)
                if _is_bool(x)
            ]
        elif isinstance(n, V.Bitcast) and (_is_bool(n.a) or n.dtype == "bool"):
            swaps.append((n.source(V.LABEL), V.Cast(n.a, n.dtype).source(V.LABEL)))
    new = whole
    for old, repl in dict.fromkeys(swaps):
        new = new.replace(old, repl)
    if not swaps or new == whole:
        return []
    return [
        Fix(
            description=f"convert the boolean to a number (.astype): {dst}[...] = {new}",
            edits=[Edit(op="replace", path=f"{path}.value", value=new)],
        )
    ]


def _compute_at(s: Scenario, d: Diagnostic) -> tuple[str, Compute, dict[str, V.Loaded], str] | None:
    """The ``compute`` statement ``d`` points into: its path, the statement, what its
    value loads as ``Node.typed`` takes it (name -> shape, dtype, sharding; views
    applied: the compiled plan's) and its destination's dtype; None where ``d`` is not
    at one."""
    hit = _stmt_at(s, d)
    if hit is None or not isinstance(hit[2], Compute):
        return None
    path, program, stmt = hit
    st = _planned(s, program, path)
    dst = st.refs["dst"].info if st is not None and "dst" in st.refs else None
    if dst is None:
        return None
    refs: dict[str, V.Loaded] = {}
    for field, ref in st.refs.items():
        if field.startswith("value.") and ref.info is not None:
            info = ref.info
            refs[field.removeprefix("value.")] = (tuple(info.shape), info.dtype, info.sharded)
    return path, stmt, refs, dst.dtype


def _bottom_up(n: V.Node, f: Callable[[V.Node], V.Node]) -> V.Node:
    """``f`` of each node of the value ``n``, children first (``f`` sees a node over
    its rewritten children)."""
    return f(n.mapped(lambda c: _bottom_up(c, f)))


def _value_fix(path: str, stmt: Compute, new: V.Node, what: str) -> list[Fix]:
    """The fix that makes the ``compute`` at ``path`` store ``new``: ``what``, then the
    statement as it becomes."""
    value = new.source(V.LABEL)
    return [
        Fix(
            description=f"{what}: {stmt.dst}[...] = {value}",
            edits=[Edit(op="replace", path=f"{path}.value", value=value)],
        )
    ]


def _typed(n: V.Node, refs: dict[str, V.Loaded]) -> V.Ty | None:
    """``n``'s type, None where JAX refuses it."""
    try:
        return n.typed(refs)
    except (V.ValueTypeError, KeyError):
        return None


#: what an 8-bit float is cast to before it meets another float (JAX's message's
#: ``x.astype('float32')``; Mosaic GPU converts 8-bit floats to float16 and float32 only)
_FP8_WIDE = "float32"


def _fp8_widened(s: Scenario, d: Diagnostic) -> list[Fix]:
    """VALUE_FP8_PROMOTION: each 8-bit float operand of an operation that meets a float
    of another dtype (arithmetic, a comparison, jnp.maximum, jnp.where's two values) is
    cast to float32 explicitly, as JAX's message asks; the value is cast to its float
    destination's dtype where it is then of another one."""
    at = _compute_at(s, d)
    if at is None:
        return []
    path, stmt, refs, want = at

    def wide(n: V.Node) -> V.Node:
        ty = _typed(n, refs)
        if ty is None or ty.weak or not dtypes.is_float(ty.dtype) or dtypes.bits(ty.dtype) != 8:
            return n
        return V.Cast(n, _FP8_WIDE)

    def widen(n: V.Node) -> V.Node:
        if _typed(n, refs) is not None or any(_typed(c, refs) is None for c in n.children()):
            return n  # (it types, or a child does not: not its own promotion)
        if isinstance(n, V.Bin):
            return V.Bin(n.op, wide(n.a), wide(n.b))
        if isinstance(n, V.Where):
            return V.Where(n.c, wide(n.x), wide(n.y))
        return n

    tree = V.parse(stmt.value)
    new = _bottom_up(tree, widen)
    ty = _typed(new, refs)
    if new == tree or ty is None:
        return []
    cast = ""
    if ty.dtype != want and dtypes.is_float(want):
        new, cast = V.Cast(new, want), f" and the result to {want}, {stmt.dst}'s dtype"
    return _value_fix(
        path,
        stmt,
        new,
        f"cast the 8-bit float operands to {_FP8_WIDE} (jax.numpy promotes an 8-bit float "
        f"with no other float implicitly){cast}",
    )


def _conditions_broadcast(tree: V.Node, refs: dict[str, V.Loaded]) -> tuple[V.Node, str]:
    """GPU_WHERE_BROADCAST's rewrite: a ``jnp.where`` of arrays by a scalar condition
    selects by the condition broadcast to the result's shape
    (``lax.broadcasted_iota(jnp.int32, shape, 0) < jnp.where(c, shape[0], 0)``: true
    everywhere or nowhere, as ``c`` is; a ``jnp.where`` of scalars lowers), so that the
    lowering selects between operands of the result's shape. The value, and what was
    done ("" where nothing was)."""
    conds: list[str] = []

    def broadcast(n: V.Node) -> V.Node:
        if not isinstance(n, V.Where):
            return n
        ty, c = _typed(n, refs), _typed(n.c, refs)
        if ty is None or c is None or not ty.shape or c.shape:
            return n
        conds.append(n.c.source(V.LABEL))
        everywhere = V.Where(n.c, V.Lit(ty.shape[0]), V.Lit(0))
        return V.Where(V.Bin("<", V.Iota("int32", ty.shape, 0), everywhere), n.x, n.y)

    new = _bottom_up(tree, broadcast)
    if not conds:
        return new, ""
    return new, (
        f"broadcast the scalar condition {' and '.join(dict.fromkeys(conds))} to the value's "
        "shape (Mosaic GPU selects only between operands of the result's shape)"
    )


def _bools_as_numbers(tree: V.Node, refs: dict[str, V.Loaded]) -> tuple[V.Node, str]:
    """GPU_REDUCE_BOOL's rewrite: a ``jnp.max`` / ``jnp.min`` of booleans reduces them
    as int32 (0 and 1) and compares the result with 0: the same booleans (any, all), in
    a reduction the lowering takes. The value, and what was done ("": nothing)."""
    done: list[str] = []

    def numbers(n: V.Node) -> V.Node:
        if not isinstance(n, V.Reduce) or n.fn not in ("max", "min"):
            return n
        a = _typed(n.a, refs)
        if a is None or a.dtype != "bool":
            return n
        done.append(n.source(V.LABEL))
        counted = V.Reduce(n.fn, V.Cast(n.a, "int32"), n.axis, n.keepdims)
        return V.Bin(">", counted, V.Lit(0))

    new = _bottom_up(tree, numbers)
    if not done:
        return new, ""
    return new, (
        f"reduce the booleans as int32 and compare with 0 ({', '.join(done)}: Mosaic GPU "
        "reduces numbers only)"
    )


#: the 8-bit floats
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


def _recast_one(c: V.Cast, was: str, code: str) -> V.Node | None:
    """The conversion ``c`` (from ``was``) made as Mosaic GPU lowers it, for ``code``."""
    to = dtypes.canonical(c.dtype)
    if code == "GPU_FLOAT8_CAST" and was in _FLOAT8 and to in _FLOAT8:
        return V.Cast(V.Cast(c.a, "float16"), to)
    if code == "GPU_FLOAT8_BF16_CAST" and {was, to} & set(_FLOAT8) and "bfloat16" in (was, to):
        return V.Cast(V.Cast(c.a, "float32"), to)
    if code == "GPU_CAST_BITWIDTH" and to == "bool" and was != "bool":
        return V.Bin("!=", c.a, V.Lit(0))
    return None


def _recast(s: Scenario, d: Diagnostic) -> list[Fix]:
    """GPU_FLOAT8_CAST, GPU_FLOAT8_BF16_CAST and GPU_CAST_BITWIDTH of an ``.astype`` in a
    ``compute`` value: the conversion made another way, the way the lowering converts:
    between the two 8-bit floats through float16, between an 8-bit float and bfloat16
    through float32, and numbers to booleans by a comparison with 0 (the same mask)."""
    at = _compute_at(s, d)
    if at is None:
        return []
    path, stmt, refs, _ = at

    def recast(n: V.Node) -> V.Node:
        if not isinstance(n, V.Cast):
            return n
        was = _typed(n.a, refs)
        made = None if was is None else _recast_one(n, was.dtype, d.code)
        return n if made is None else made

    tree = V.parse(stmt.value)
    new = _bottom_up(tree, recast)
    if new == tree:
        return []
    return _value_fix(path, stmt, new, "convert as the lowering can")


def _loop_of_truths(s: Scenario, d: Diagnostic) -> list[Fix]:
    """LOOP_PYTHON_NOT_INT of a Python ``for`` whose traced bound is a comparison (the
    other a comparison or an int): the loop is a ``@pl.loop``, which converts its bounds
    to int32 (True is 1) and counts them at run time, the trips ``range`` would make of
    them as Python bools. (A loaded bound may be a float, which ``range`` refuses and
    ``pl.loop`` counts in float32: no repair.)"""
    hit = _stmt_at(s, d)
    if hit is None or not isinstance(hit[2], Loop) or hit[2].via != "python":
        return []
    path, _, loop = hit
    bounds = [E.parse(b) for b in (loop.start, loop.stop)]
    # (an expression that loads no ref is an int; a load may be of floats)
    if not any(e.is_bool for e in bounds) or any(
        not e.is_bool and "load" in e.calls() for e in bounds
    ):
        return []
    return [
        Fix(
            description=f"loop with @pl.loop, which converts the bounds {loop.start} .. "
            f"{loop.stop} to int32 (True is 1) at run time: a Python for unrolls only over "
            "Python ints",
            edits=[Edit(op="replace", path=f"{path}.via", value="pl.loop")],
        )
    ]


def _reduce_whole(s: Scenario, d: Diagnostic) -> list[Fix]:
    """VALUE_AXIS (an axis the value lacks, or one named twice): the reduction is of the
    whole value (``axis`` left out), as the card says; the check after it keeps the
    repair only where the result then fits the destination (a partial reduction of a
    matrix does not lower on Mosaic GPU either)."""
    at = _compute_at(s, d)
    if at is None:
        return []
    path, stmt, refs, _ = at
    done: list[str] = []

    def whole(n: V.Node) -> V.Node:
        if not isinstance(n, V.Reduce) or n.axis is None:
            return n
        if _typed(n.a, refs) is None or _typed(n, refs) is not None:
            return n
        done.append(f"axis={n.axis!r}")
        return V.Reduce(n.fn, n.a, None, n.keepdims)

    new = _bottom_up(V.parse(stmt.value), whole)
    if not done:
        return []
    return _value_fix(
        path, stmt, new, f"reduce the whole value, leaving {', '.join(done)} out ({d.message})"
    )


#: the floats whose remainder ``_truncated_rem`` takes: their explicit mantissa bits
#: (a value of magnitude 2**bits or more is a whole number) and largest finite value
_MANTISSA = {
    "float32": (23, 3.4028234663852886e38),
    "float16": (10, 65504.0),
    "bfloat16": (7, 3.3895313892515355e38),
}


def _truncated_rem(x: V.Node, p: V.Lit, dtype: str) -> tuple[V.Node, V.Node] | None:
    """``(lax.rem(x, p), x - trunc(x / p) * p)`` of floats of ``dtype`` (``p`` a power of
    two) with no remainder of floats, bit for bit: ``d = x - trunc(x / p) * p`` (exact),
    the quotient truncated through int32 where ``|x| < 2**bits * |p|`` (beyond it ``x``
    is a multiple of ``p``: ``d = x - x``, 0, or NaN for inf); the remainder is ``d``,
    a zero with ``x``'s sign, as ``lax.rem``'s (``x * 0.0``). None where ``p`` is no
    power of two or ``2**bits * |p|`` no finite ``dtype``."""
    v = p.value
    if isinstance(v, bool) or not v or math.frexp(abs(v))[0] != 0.5 or dtype not in _MANTISSA:
        return None
    bits, top = _MANTISSA[dtype]
    bound = float(2**bits * abs(v))
    if bound > top:
        return None
    whole: V.Node = V.Cast(V.Cast(x if v == 1 else V.Bin("/", x, p), "int32"), dtype)
    if v != 1:
        whole = V.Bin("*", whole, p)
    small = V.Bin("<", V.Bin("max", x, V.Neg(x)), V.Lit(bound))
    d = V.Bin("-", x, V.Where(small, whole, x))
    return V.Where(V.Bin("!=", d, V.Lit(0.0)), d, V.Bin("*", x, V.Lit(0.0))), d


def _float_rem(x: V.Node, p: V.Lit, dtype: str) -> V.Node | None:
    """``x % p`` as jax.numpy takes it (``jnp.remainder``): the truncated remainder
    (``_truncated_rem``), plus ``p`` where its sign and ``p``'s differ (``+ -0.0``
    elsewhere keeps every bit)."""
    got = _truncated_rem(x, p, dtype)
    if got is None:
        return None
    rem, d = got
    away = V.Bin("<" if p.value > 0 else ">", d, V.Lit(0.0))
    return V.Bin("+", rem, V.Where(away, p, V.Lit(-0.0)))


def _float_floor_div(x: V.Node, p: V.Lit, dtype: str) -> V.Node | None:
    """``x // p`` as jax.numpy takes it (``_float_divmod``): ``(x - rem) / p``, a whole
    number (exact), less 1 where the remainder's sign and ``p``'s differ (``- 0.0``
    elsewhere keeps every bit; ``lax.round`` of a whole number is itself)."""
    got = _truncated_rem(x, p, dtype)
    if got is None:
        return None
    rem, d = got
    div: V.Node = V.Bin("-", x, rem)
    if p.value != 1:
        div = V.Bin("/", div, p)
    away = V.Bin("<" if p.value > 0 else ">", d, V.Lit(0.0))
    return V.Bin("-", div, V.Where(away, V.Lit(1.0), V.Lit(0.0)))


#: how ``_floats_divided`` takes each float division by a power of two
_FLOAT_DIVISION = {"%": _float_rem, "//": _float_floor_div}


def _floats_divided(tree: V.Node, refs: dict[str, V.Loaded]) -> tuple[V.Node, str]:
    """GPU_FLOAT_REM's (``x % p``, ``x // p`` of floats) and GPU_WHERE_BROADCAST's
    (``x // p``: jax.numpy's floor division of floats selects by ``p == 0``, a scalar)
    rewrite, ``x`` a float array and ``p`` a power of two: the same numbers computed
    without a remainder of floats (``_float_rem``, ``_float_floor_div``), which Mosaic
    GPU lowers. (Another divisor rounds in ``x / p``: none.) The value, and what was
    done ("": nothing)."""
    done: list[str] = []

    def rewrite(n: V.Node) -> V.Node:
        if not isinstance(n, V.Bin) or n.op not in _FLOAT_DIVISION or not isinstance(n.b, V.Lit):
            return n
        ty, a = _typed(n, refs), _typed(n.a, refs)
        if ty is None or a is None or not ty.shape or a.dtype != ty.dtype:
            return n
        new = _FLOAT_DIVISION[n.op](n.a, n.b, ty.dtype)
        if new is None:
            return n
        done.append(n.source(V.LABEL))
        return new

    new = _bottom_up(tree, rewrite)
    if not done:
        return new, ""
    return new, (
        f"take {' and '.join(dict.fromkeys(done))} as jax.numpy does, without a remainder "
        "of floats (Mosaic GPU has none): the quotient truncated through int32 where x may "
        "have a fraction, the remainder x - whole * p (a zero with x's sign), then floored "
        "to p's sign"
    )


#: a rewrite of a value: ``(tree, refs) -> (tree, what it did, "" where nothing)``
_Rewrite = Callable[[V.Node, dict[str, V.Loaded]], tuple[V.Node, str]]
#: the rewrites of a value's operations Mosaic GPU does not lower, in the order the
#: lowering meets their errors
_LOWERABLE: tuple[_Rewrite, ...] = (_conditions_broadcast, _bools_as_numbers, _floats_divided)
#: the rewrites that answer each of those codes
_LOWERS: dict[str, tuple[_Rewrite, ...]] = {
    "GPU_WHERE_BROADCAST": (_conditions_broadcast, _floats_divided),
    "GPU_REDUCE_BOOL": (_bools_as_numbers,),
    "GPU_FLOAT_REM": (_floats_divided,),
}


def _lowerable_value(s: Scenario, d: Diagnostic) -> list[Fix]:
    """GPU_WHERE_BROADCAST, GPU_REDUCE_BOOL, GPU_FLOAT_REM: each rewrite that answers
    ``d``'s code, and, where the value holds operations of other such codes too (a
    fix of one alone would leave the others, which the lowering meets as well), one
    that makes every rewrite of ``_LOWERABLE``."""
    at = _compute_at(s, d)
    if at is None:
        return []
    path, stmt, refs, _ = at
    tree = V.parse(stmt.value)
    out: list[Fix] = []
    for rewrite in _LOWERS[d.code]:
        new, what = rewrite(tree, refs)
        if what:
            out += _value_fix(path, stmt, new, what)
    whats = []
    new = tree
    for rewrite in _LOWERABLE:
        new, what = rewrite(new, refs)
        whats += [what] if what else []
    if out and len(whats) > 1:
        out += _value_fix(path, stmt, new, "; ".join(whats))
    return out


_THREAD_PAIR = re.compile(
    r"thread ([A-Za-z_]\w*)=(\d+) (writes|reads) it .*? thread \1=(\d+) (writes|reads) it"
)


def _thread_handoff(s: Scenario, d: Diagnostic) -> list[Fix]:
    """A read/write race between two threads (warpgroups) of one block: the writer
    arrives on a barrier of its own after its write and the reader waits on it before
    its read (``plgpu.Barrier``: the handoff of a producer and a consumer)."""
    pair = _THREAD_PAIR.search(d.message)
    paths = _RACE_PATHS.search(d.message)
    if pair is None or paths is None or pair.group(3) == pair.group(5):
        return []
    first, second = (_AT_STMT.match(p) for p in paths.groups())
    if first is None or second is None or first.group(2) != second.group(2):
        return []
    writer, reader = (first, second) if pair.group(3) == "writes" else (second, first)
    w_path, r_path = writer.group(1), reader.group(1)
    w_parent, _, w_last = w_path.rpartition("[")
    r_parent, _, r_last = r_path.rpartition("[")
    wi, ri = int(w_last.rstrip("]")), int(r_last.rstrip("]"))
    if w_parent == r_parent:
        return []  # (one thread's statements: program order, not a handoff)
    bar = _fresh(s, "ready")
    who = pair.group(2) if pair.group(3) == "writes" else pair.group(4)
    arrive = Edit(
        op="add", path=f"{w_parent}[{wi + 1}]", value={"op": "barrier_arrive", "barrier": bar}
    )
    wait = Edit(op="add", path=f"{r_parent}[{ri}]", value={"op": "barrier_wait", "barrier": bar})
    # (the later insertion first when one body holds the other: paths stay valid)
    edits = [arrive, wait] if r_parent.startswith(w_path) else [wait, arrive]
    return [
        Fix(
            description=f"hand {pair.group(1)}={who}'s write over at a barrier ({bar!r}): the "
            f"writer arrives after {w_path}, the reader waits before {r_path}",
            edits=[
                Edit(op="add", path=f"call.scratch.{bar}", value={"kind": "barrier"}),
                *edits,
            ],
        )
    ]


#: code -> the candidate repairs for a diagnostic of that code
BY_CODE: dict[str, Callable[[Scenario, Diagnostic], list[Fix]]] = {
    "REMOTE_DEVICE_OOB": _device_wrap,
    "RACE": _race_repairs,
    "RACE_DETECTED": _race_repairs,
    **dict.fromkeys(_MISMATCH, _match_sides),
    "SWIZZLE_VALUE": _swizzle_value,
    "AT_NEGATIVE_SLICE": _slice_inside,
    "TILED_SLICE_ALIGN": _tile_align,
    "MULTICAST_PLAIN_STORE": _async_store,
    **dict.fromkeys(
        ("TMA_SRC_NOT_SMEM", "TMA_DST_NOT_GMEM", "TMA_SRC_NOT_GMEM", "TMA_DST_NOT_SMEM"),
        _plain_copy,
    ),
    "TMA_LOAD_NO_BARRIER": _own_barrier,
    "BARRIER_NOT_SMEM": _own_barrier,
    "SEMAPHORE_WRONG_TYPE": _own_semaphore,
    "SEMAPHORE_NOT_A_REF": _own_semaphore,
    "SEMAPHORE_NOT_SCALAR": _one_semaphore,
    "MESH_DEVICE_ORDER": _row_major,
    "SWIZZLE_TRAILING_DIM": lambda s, d: [*_swizzle_fits(s, d), *_tile_for_swizzle(s, d)],
    "DOT_DTYPE_MISMATCH": _dot_dtypes,
    "STORE_TO_ARRAY": _store_to_ref,
    "DEVICE_ID_RANK": lambda s, d: [*_own_device(s, d), *_device_by_axes(s, d)],
    "XREF_UNKNOWN_NAME": _define_first,
    "DEADLOCK_SEMAPHORE": _signal_the_peer,
    "ARRAY_NO_METHOD": _arg_view_in_body,
    "ARG_VIEW_PLGPU": _arg_view_in_body,
    "IM2COL_NOT_A_REF": _arg_view_in_body,
    "SEMAPHORE_FILL": _no_zero_fill,
    "SMEM_TRANSFORMS_ORDER": _tile_then_swizzle,
    "SEMAPHORE_VIEW_TRANSFORM": _signal_by_device,
    "DOT_OPERAND_NOT_SMEM": _operand_in_smem,
    "DEADLOCK_BARRIER": _arrivals_that_come,
    "BARRIER_NOT_A_BARRIER": _own_barrier,
    "MULTIMEM_PEER_REF": _multimem_own_ref,
    "TMA_TILING_NO_SWIZZLE": _untiled,
    "XREF_DUPLICATE_NAME": _own_param,
    "BARRIER_TRANSFORM": _barrier_flat_index,
    "REMOTE_SMEM": _peer_reaches_gmem,
    "TMA_GMEM_TRANSFORM": _reshape_the_buffer,
    **dict.fromkeys(("OOB_READ", "OOB_WRITE", "OOB_INDEX"), _grow_to_fit),
    **dict.fromkeys(("TMEM_PLAIN_ACCESS", "TMEM_RESHAPE", "TRANSPOSE_TMEM"), _tmem_to_smem),
    **dict.fromkeys(
        (
            "SWIZZLED_INDEX",
            "SWIZZLED_SLICE",
            "SWIZZLED_RESHAPE",
            "TILED_RESHAPE",
            "TILED_INDEX_TYPE",
            "TRACED_BOOL",
            "GPU_GMEM_TRANSFER",
        ),
        _plain_layout,
    ),
    "GPU_CLUSTER_GMEM": _cluster_ref_gmem,
    "CLUSTER_REF_UNKNOWN_AXIS": _own_cluster_axis,
    "CLUSTER_REF_MULTI_AXIS": _own_cluster_axis,
    "MULTICAST_TMA_LOAD": _own_copy_multicast,
    "TRANSPOSE_INVALID_PERM_GPU": _a_permutation,
    "MULTIMEM_DST_NOT_GMEM": _multimem_to_gmem,
    "TMA_SMEM_NOT_CONTIGUOUS": _store_plainly,
    "DOT_DTYPE": _dot_in_f16,
    "DOT_INT_ACC": _dot_in_f16,
    "DOT_N_TOO_LARGE": _dot_split_n,
    "DOT_SHAPE_MISMATCH": _dot_k_agree,
    "DOT_RANK": _dot_one_matrix,
    "REF_NOT_A_REF": _captured_ref,
    "GPU_8BIT_ARITH": _wider_add,
    "RESHAPE_SIZE": lambda s, d: [*_reshape_infer(s, d), *_reshape_fits(s, d)],
    "RESHAPE_MINUS_ONE": _reshape_fits,
    "RESHAPE_NOT_DIVISIBLE": _reshape_fits,
    "MPMD_SCRATCH_CORE_TYPE": _one_program,
    "SEMAPHORE_READ_SMEM": _counter_semaphore,
    "ADD_SHAPE_MISMATCH": _operands_agree,
    "GPU_LAYOUT_INFERENCE": _copy_by_tma,
    "GPU_TRACED_CONSTANT": _signal_in_a_loop,
    "MULTICAST_NO_DEVICE_MESH": _declare_mesh,
    "MULTIMEM_LOAD_WIDTH": _multimem_words,
    "MULTIMEM_STORE_WIDTH": _multimem_words,
    **dict.fromkeys(
        ("GPU_WG_TRANSFORMS", "GPU_TRANSFORMS_UNSUPPORTED", "TMA_SRC_TRANSFORM"),
        _bitcast_the_value,
    ),
    "VALUE_DTYPE": _numbers_not_bools,
    **dict.fromkeys(("GPU_FLOAT8_CAST", "GPU_FLOAT8_BF16_CAST", "GPU_CAST_BITWIDTH"), _recast),
    "BITCAST_VALUE_BOOL": _numbers_not_bools,
    "VALUE_FP8_PROMOTION": _fp8_widened,
    **dict.fromkeys(_LOWERS, _lowerable_value),
    "LOOP_PYTHON_NOT_INT": _loop_of_truths,
    "VALUE_AXIS": _reduce_whole,
}


def for_code(s: Scenario, d: Diagnostic) -> list[Fix]:
    """The mechanical repairs known for ``d``'s code (none when it has none or they do
    not apply to this scenario)."""
    make = BY_CODE.get(d.code)
    if make is None:
        return []
    try:
        return make(s, d)
    except (LookupError, AttributeError, ValueError, TypeError, ArithmeticError):
        return []  # (a scenario it does not fit: no repair offered, the check goes on)
