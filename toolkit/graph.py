"""The aliasing graph of a scenario: who passes, views, reads and writes which memory.

``build_graph(scenario)`` is a ``networkx.MultiDiGraph``; every node and edge has a
``kind`` and a ``label``, and the diagnostics that concern it (``diagnostics``, a list).

Nodes (``kind``): ``buffer`` (host value), ``argument`` (``call.args[i]``), ``param``
(kernel parameter of an argument, or a tuple leaf), ``output``, ``scratch``,
``capture``, ``view`` (one per transform step of a ``let`` or an argument, labelled
with the transform and the shape/dtype after it), ``statement`` (a body op),
``program``, ``device`` (with a device mesh) and ``unknown`` (a name nothing defines).

Edges (``kind``): ``passed-as`` (buffer -> argument -> parameter), ``captured-as``,
``derived-by`` (base -> view, ``label`` is the transform), ``reads`` (ref -> statement),
``writes`` (statement -> ref), ``runs`` (program -> statement), ``aliases`` (parameter
-> parameter of the same Ref), ``peer-of`` (device -> device through ``remote_ref``,
one per device), ``multicast-to`` (device -> every device of its multicast group).

The graph never raises on a loadable scenario: unknown names become ``unknown`` nodes,
missing buffers ``buffer`` nodes with ``missing=True``, unresolvable device ids no edges.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import networkx as nx
from mpmd_lab import shapes
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import (
    At,
    Bitcast,
    BlockIndex,
    ClusterRef,
    DsIndex,
    Let,
    MulticastRef,
    Offset,
    PidIndex,
    RemoteRef,
    Reshape,
    Scenario,
    Swizzle,
    Tiling,
    Transpose,
)

#: At most this many device-to-device edges (peer + multicast) in one graph.
DEVICE_EDGE_CAP = 20_000
#: Codes that concern two parameters of one Ref (drawn on the ``aliases`` edge too).
ALIAS_CODES = ("MPMD_DUP_REF", "MPMD_CLOSED_REF_ALIAS")

NODE_KINDS = (
    "buffer",
    "argument",
    "param",
    "output",
    "scratch",
    "capture",
    "view",
    "statement",
    "program",
    "device",
    "unknown",
)
EDGE_KINDS = (
    "passed-as",
    "captured-as",
    "derived-by",
    "reads",
    "writes",
    "runs",
    "aliases",
    "peer-of",
    "multicast-to",
)

# ---------------------------------------------------------------- labels


def type_label(shape: list[int] | tuple[int, ...] | None, dtype: str | None) -> str:
    """``f32[8,128]``; ``?`` for what cannot be known."""
    d = shapes.short_dtype(dtype) if dtype else "?"
    if shape is None:
        return f"{d}[?]"
    return f"{d}[{','.join(map(str, shape))}]"


def _index_label(e: Any) -> str:
    if e is None:
        return ":"
    if isinstance(e, bool):
        return str(e)
    if isinstance(e, int):
        return str(e)
    if isinstance(e, list):
        a, b = (e + [None, None])[:2]
        return f"{'' if a is None else a}:{'' if b is None else b}"
    if isinstance(e, DsIndex):
        return f"ds({e.ds[0]},{e.ds[1]})"
    if isinstance(e, BlockIndex):
        stride = e.size if e.stride is None else e.stride
        return f"ds({e.block}*{stride},{e.size})"
    if isinstance(e, PidIndex):
        return f"ds(pid{e.pid}*{e.size},{e.size})"
    return "?"


def _device_label(device: Any) -> str:
    if isinstance(device, int):
        return str(device)
    parts = []
    for axis, v in device.items():
        if isinstance(v, Offset):
            parts.append(f"{axis}{v.offset:+d}")
        else:
            parts.append(f"{axis}={v}")
    return ",".join(parts)


def _axes_list(axes: str | list[str]) -> list[str]:
    return [axes] if isinstance(axes, str) else list(axes)


def transform_label(t: Any) -> str:
    """A transform as a short call: ``remote_ref(dev+1)``, ``at[0:128]``, ``bitcast(i32)``."""
    if isinstance(t, At):
        return f"at[{','.join(_index_label(e) for e in t.index) or '...'}]"
    if isinstance(t, Bitcast):
        return f"bitcast({shapes.short_dtype(t.dtype)})"
    if isinstance(t, Reshape):
        return f"reshape({','.join(map(str, t.shape))})"
    if isinstance(t, Transpose):
        name = "transpose_ref" if t.via == "transpose_ref" else "transpose"
        return f"{name}({','.join(map(str, t.perm))})"
    if isinstance(t, RemoteRef):
        return f"remote_ref({_device_label(t.device)})"
    if isinstance(t, MulticastRef):
        return f"multicast_ref({','.join(_axes_list(t.axes))})"
    if isinstance(t, ClusterRef):
        return f"cluster_ref({','.join(f'{k}={v}' for k, v in t.block.items())})"
    if isinstance(t, Tiling):
        return f"tiling({','.join(map(str, t.tile))})"
    if isinstance(t, Swizzle):
        return f"swizzle({t.bytes})"
    return str(getattr(t, "op", "?"))


# ---------------------------------------------------------------- shapes


def _info(shape: list[int] | None, dtype: str | None, memory_space: str = "GMEM") -> Any:
    """A whole ref as ``mpmd_lab.shapes`` sees it (None when unknown)."""
    if shape is None or dtype is None:
        return None
    return shapes.base_info(shape, dtype, memory_space)


def _step(info: Any, t: Any, k: int) -> tuple[Any, str | None]:
    """The ref after one transform and the code of the error the step raises, if any."""
    if info is None:
        return None, None
    try:
        step = shapes.apply(info, t, k)
    except Exception:  # noqa: BLE001 - an odd stack shows as an unknown type, never a crash
        return None, None
    return step.after, (step.error.code if step.error else None)


# ---------------------------------------------------------------- devices


def _device_coords(mesh: dict[str, int]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(n) for n in mesh.values())))


def _flat(coords: tuple[int, ...], sizes: list[int]) -> int:
    out = 0
    for c, n in zip(coords, sizes, strict=True):
        out = out * n + c
    return out


def peer_targets(device: Any, mesh: dict[str, int]) -> list[int] | None:
    """For each device (flat, row-major), the device a ``remote_ref`` names; ``None``
    when it names an axis the mesh lacks. Out-of-range ids map to ``-1``."""
    axes, sizes = list(mesh), list(mesh.values())
    n = math.prod(sizes)
    if isinstance(device, int):
        return [device if 0 <= device < n else -1] * n
    if any(a not in mesh for a in device):
        return None
    out = []
    for coords in _device_coords(mesh):
        target = list(coords)
        bad = False
        for axis, v in device.items():
            i = axes.index(axis)
            if isinstance(v, Offset):
                target[i] = (coords[i] + v.offset) % sizes[i]
            elif 0 <= v < sizes[i]:
                target[i] = v
            else:
                bad = True
        out.append(-1 if bad else _flat(tuple(target), sizes))
    return out


def multicast_groups(axes: str | list[str], mesh: dict[str, int]) -> list[list[int]] | None:
    """The device groups a ``multicast_ref`` over ``axes`` reaches; ``None`` for unknown axes."""
    names = _axes_list(axes)
    if any(a not in mesh for a in names):
        return None
    keep = [i for i, a in enumerate(mesh) if a not in names]
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for d, coords in enumerate(_device_coords(mesh)):
        groups[tuple(coords[i] for i in keep)].append(d)
    return list(groups.values())


def device_label(d: int, mesh: dict[str, int], coords: tuple[int, ...] | None = None) -> str:
    """``d3`` or, on several axes, ``d3 (x=1,y=1)``."""
    if len(mesh) <= 1:
        return f"d{d}"
    if coords is None:
        coords = _device_coords(mesh)[d]
    return f"d{d} (" + ",".join(f"{a}={c}" for a, c in zip(mesh, coords, strict=False)) + ")"


# ---------------------------------------------------------------- building


class _Builder:
    def __init__(self, scenario: Scenario):
        self.s = scenario
        self.g = nx.MultiDiGraph(name=scenario.name, description=scenario.description)
        self.paths: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        self.device_edges = 0
        self.info: dict[str, Any] = {}  # node -> mpmd_lab.shapes.RefInfo (None: unknown)
        self.g.graph["truncated"] = False

    # -- registry
    def node(self, nid: str, kind: str, label: str, path: str | None = None, **attrs: Any) -> str:
        if nid not in self.g:
            self.g.add_node(nid, kind=kind, label=label, path=path, diagnostics=[], **attrs)
            if path:
                self.paths[path].append(("node", nid))
        return nid

    def edge(self, u: str, v: str, kind: str, label: str = "", path: str | None = None, **a: Any):
        key = self.g.add_edge(u, v, kind=kind, label=label, path=path, diagnostics=[], **a)
        if path:
            self.paths[path].append(("edge", (u, v, key)))
        return (u, v, key)

    # -- parts
    def buffer(self, name: str, path_hint: str) -> str:
        b = self.s.buffers.get(name)
        nid = f"buffer:{name}"
        if nid in self.g:
            return nid
        if b is None:
            return self.node(nid, "buffer", name, None, missing=True, type="missing", shape=None)
        kind = "Ref" if b.as_ref else "array"
        self.info[nid] = _info(list(b.shape), b.dtype)
        return self.node(
            nid,
            "buffer",
            name,
            f"buffers.{name}",
            missing=False,
            as_ref=b.as_ref,
            shape=list(b.shape),
            dtype=b.dtype,
            type=f"{type_label(b.shape, b.dtype)} {kind}",
        )

    def stack(
        self,
        base: str,
        shape: list[int] | None,
        dtype: str | None,
        transforms: list[Any],
        prefix: str,
        path: str,
        name: str | None,
        **attrs: Any,
    ) -> tuple[str, list[int] | None, str | None]:
        """One view node per transform step; returns the last node and its type."""
        cur = base
        for k, t in enumerate(transforms):
            after, error = _step(self.info.get(cur), t, k)
            if after is not None:
                shape, dtype = list(after.shape), after.dtype
            else:
                shape, dtype = None, (t.dtype if isinstance(t, Bitcast) else dtype)
            tpath = f"{path}.transforms[{k}]"
            last = k == len(transforms) - 1
            nid = self.node(
                f"{prefix}.t{k}",
                "view",
                transform_label(t),
                tpath,
                name=name if last else None,
                let=name,
                base=base,
                step=k,
                steps=len(transforms),
                op=t.op,
                shape=shape,
                dtype=dtype,
                type=type_label(shape, dtype),
                step_error=error,
                transform=t,
                **attrs,
            )
            self.info[nid] = after
            self.edge(cur, nid, "derived-by", transform_label(t), tpath)
            self.device_traffic(nid, t, tpath)
            cur = nid
        return cur, shape, dtype

    def device_traffic(self, view: str, t: Any, path: str) -> None:
        mesh = self.s.device_mesh
        if not mesh or not isinstance(t, RemoteRef | MulticastRef):
            return
        if isinstance(t, RemoteRef):
            targets = peer_targets(t.device, mesh)
            if targets is None:
                self.g.nodes[view]["unresolved"] = True
                return
            pairs: Iterable[tuple[int, int]] = ((d, e) for d, e in enumerate(targets) if e >= 0)
            kind = "peer-of"
        else:
            groups = multicast_groups(t.axes, mesh)
            if groups is None:
                self.g.nodes[view]["unresolved"] = True
                return
            pairs = ((d, e) for grp in groups for d in grp for e in grp)
            kind = "multicast-to"
        for d, e in pairs:
            if self.device_edges >= DEVICE_EDGE_CAP:
                self.g.graph["truncated"] = True
                return
            self.device_edges += 1
            self.edge(f"device:{d}", f"device:{e}", kind, "", path, view=view)

    def build(self) -> nx.MultiDiGraph:
        s, c = self.s, self.s.call
        g = self.g
        g.graph["device_mesh"] = dict(s.device_mesh) if s.device_mesh else None
        if s.device_mesh:
            for d, coords in enumerate(_device_coords(s.device_mesh)):
                label = device_label(d, s.device_mesh, coords)
                self.node(f"device:{d}", "device", label, None, index=d, coords=coords)
        names: dict[str, tuple[str, list[int] | None, str | None]] = {}
        param_buffer: dict[str, str] = {}  # param node -> buffer name (Refs only)
        param_order: list[str] = []

        for i, a in enumerate(c.args):
            apath = f"call.args[{i}]"
            arg = self.node(f"arg:{i}", "argument", f"args[{i}]", apath, index=i)
            leaves = [a.buffer] if hasattr(a, "buffer") else list(a.tuple)
            is_tuple = not hasattr(a, "buffer")
            shape = dtype = None
            for j, bname in enumerate(leaves):
                b = self.buffer(bname, apath)
                bb = s.buffers.get(bname)
                shape, dtype = (list(bb.shape), bb.dtype) if bb else (None, None)
                lpath = f"{apath}.tuple[{j}]" if is_tuple else f"{apath}.buffer"
                if a.transforms and not is_tuple:
                    b, shape, dtype = self.stack(
                        b, shape, dtype, a.transforms, f"argview:{i}", apath, None, arg=i
                    )
                self.edge(b, arg, "passed-as", f"[{j}]" if is_tuple else "", lpath)
            pid = self.node(
                f"param:args[{i}]",
                "param",
                a.param,
                f"{apath}.param",
                name=a.param,
                tuple=is_tuple,
                shape=None if is_tuple else shape,
                dtype=None if is_tuple else dtype,
                type="tuple" if is_tuple else type_label(shape, dtype),
            )
            self.edge(arg, pid, "passed-as", "", None)
            if not is_tuple:
                self.info[pid] = self.info.get(b)
            names.setdefault(a.param, (pid, None if is_tuple else shape, dtype))
            if is_tuple:
                for j, bname in enumerate(leaves):
                    bb = s.buffers.get(bname)
                    lshape, ldtype = (list(bb.shape), bb.dtype) if bb else (None, None)
                    leaf = self.node(
                        f"param:args[{i}][{j}]",
                        "param",
                        f"{a.param}[{j}]",
                        f"{apath}.tuple[{j}]",
                        name=f"{a.param}[{j}]",
                        shape=lshape,
                        dtype=ldtype,
                        type=type_label(lshape, ldtype),
                    )
                    self.edge(pid, leaf, "derived-by", f"[{j}]", None)
                    self.info[leaf] = _info(lshape, ldtype)
                    names.setdefault(f"{a.param}[{j}]", (leaf, lshape, ldtype))
                    if bb is not None and bb.as_ref:
                        param_buffer[leaf] = bname
                        param_order.append(leaf)
            elif (bb := s.buffers.get(a.buffer)) is not None and bb.as_ref:
                param_buffer[pid] = a.buffer
                param_order.append(pid)

        for name, o in c.outputs.items():
            nid = self.node(
                f"output:{name}",
                "output",
                name,
                f"call.outputs.{name}",
                name=name,
                shape=list(o.shape),
                dtype=o.dtype,
                type=type_label(o.shape, o.dtype),
            )
            names.setdefault(name, (nid, list(o.shape), o.dtype))
            self.info[nid] = _info(list(o.shape), o.dtype)
        for name, sc in c.scratch.items():
            layout = " ".join(transform_label(t) for t in sc.transforms)
            nid = self.node(
                f"scratch:{name}",
                "scratch",
                name,
                f"call.scratch.{name}",
                name=name,
                memory_space=sc.memory_space,
                shape=list(sc.shape),
                dtype=sc.dtype,
                type=f"{type_label(sc.shape, sc.dtype)} {sc.memory_space}"
                + (f" {layout}" if layout else ""),
            )
            names.setdefault(name, (nid, list(sc.shape), sc.dtype))
            self.info[nid] = _info(list(sc.shape), sc.dtype, sc.memory_space)
        for i, cap in enumerate(c.captures):
            cpath = f"call.captures[{i}]"
            b = self.buffer(cap.buffer, cpath)
            bb = s.buffers.get(cap.buffer)
            shape, dtype = (list(bb.shape), bb.dtype) if bb else (None, None)
            nid = self.node(
                f"capture:{i}",
                "capture",
                cap.name,
                cpath,
                name=cap.name,
                shape=shape,
                dtype=dtype,
                type=type_label(shape, dtype) if bb else "missing",
            )
            self.edge(b, nid, "captured-as", "", cpath)
            names.setdefault(cap.name, (nid, shape, dtype))
            self.info[nid] = _info(shape, dtype, "GMEM" if bb and bb.as_ref else "VALUE")
            if bb is not None and bb.as_ref:
                param_buffer[nid] = cap.buffer
                param_order.append(nid)

        # aliases: every later parameter of a Ref to the first one of the same Ref
        first: dict[str, str] = {}
        for p in param_order:
            bname = param_buffer[p]
            if bname in first:
                self.edge(first[bname], p, "aliases", bname, None, buffer=bname)
            else:
                first[bname] = p

        for i, prog in enumerate(c.programs):
            self.program(i, prog, names)
        return g

    def program(self, i: int, prog: Any, global_names: dict[str, Any]) -> None:
        m = prog.mesh
        parts = []
        if m.grid:
            parts.append("grid " + ",".join(f"{k}={v}" for k, v in m.grid.items()))
        if m.cluster:
            parts.append("cluster " + ",".join(f"{k}={v}" for k, v in m.cluster.items()))
        if m.threads is not None:
            parts.append(f"threads {m.threads.name or '?'}={m.threads.count}")
        pid = self.node(
            f"program:{i}",
            "program",
            f"program {i}",
            f"call.programs[{i}]",
            index=i,
            mesh=" · ".join(parts) or "no axes",
        )
        names = dict(global_names)
        for j, st in enumerate(prog.body):
            spath = f"call.programs[{i}].body[{j}]"
            if isinstance(st, Let):
                base, shape, dtype = self.resolve(st.ref, names, i)
                if st.transforms:
                    last, shape, dtype = self.stack(
                        base,
                        shape,
                        dtype,
                        st.transforms,
                        f"view:{i}.{j}",
                        spath,
                        st.let,
                        program=i,
                        statement=j,
                    )
                    self.paths[spath].append(("node", last))
                else:
                    last = self.node(
                        f"view:{i}.{j}",
                        "view",
                        "(same ref)",
                        spath,
                        name=st.let,
                        step=0,
                        steps=0,
                        op="alias",
                        shape=shape,
                        dtype=dtype,
                        type=type_label(shape, dtype),
                        program=i,
                        statement=j,
                    )
                    self.edge(base, last, "derived-by", "=", spath)
                    self.info[last] = self.info.get(base)
                names[st.let] = (last, shape, dtype)
                continue
            label = _statement_label(st)
            sid = self.node(
                f"stmt:{i}.{j}", "statement", st.op, spath, program=i, statement=j, text=label
            )
            self.edge(pid, sid, "runs", "", None)
            for field in ("src", "lhs", "rhs"):
                if hasattr(st, field):
                    ref = self.resolve(getattr(st, field), names, i)[0]
                    self.edge(ref, sid, "reads", field, f"{spath}.{field}", statement=sid)
            if hasattr(st, "dst"):
                ref = self.resolve(st.dst, names, i)[0]
                self.edge(sid, ref, "writes", "dst", f"{spath}.dst", statement=sid)

    def resolve(self, name: str, names: dict[str, Any], program: int) -> tuple[str, Any, Any]:
        if name in names:
            return names[name]
        nid = self.node(f"unknown:{name}", "unknown", name, None, name=name, type="undefined")
        return nid, None, None


def _statement_label(st: Any) -> str:
    op = st.op
    if op == "copy" or op == "tma_store":
        return f"{st.dst} <- {st.src}"
    if op == "add":
        return f"{st.dst} <- {st.lhs} + {st.rhs}"
    if op == "fill":
        return f"{st.dst} <- {st.value!r}"
    if op == "multimem_store":
        return f"{st.dst} <- {st.src} over {','.join(_axes_list(st.axes))}"
    if op == "return":
        return f"return {st.src}"
    return op


# ---------------------------------------------------------------- diagnostics

_TAIL = re.compile(r"(\.[^.\[\]]+|\[[^\]]*\])$")


def _as_diagnostic(d: Any) -> Diagnostic | None:
    if isinstance(d, Diagnostic):
        return d
    try:
        if isinstance(d, dict):
            return Diagnostic.model_validate(d)
        return Diagnostic.model_validate(d, from_attributes=True)
    except Exception:  # noqa: BLE001 - a malformed diagnostic is skipped, never fatal
        return None


def _run_validator(scenario: Scenario) -> tuple[list[Diagnostic], str | None]:
    try:
        from mpmd_lab import validate  # noqa: PLC0415 - written by another helper
    except ImportError:
        return [], "validator not available"
    try:
        return list(validate.check(scenario)), None
    except Exception as e:  # noqa: BLE001 - a validator bug must not hide the graph
        return [], f"validator failed: {type(e).__name__}: {e}"


def _attach(b: _Builder, diags: list[Diagnostic]) -> None:
    g = b.g
    unplaced: list[Diagnostic] = []
    alias_edges = [(u, v, k) for u, v, k, kd in g.edges(keys=True, data="kind") if kd == "aliases"]
    for d in diags:
        path = d.path or ""
        targets: list[tuple[str, Any]] = []
        probe = path
        while probe:
            if probe in b.paths:
                targets = b.paths[probe]
                break
            cut = _TAIL.search(probe)
            if cut is None:
                break
            probe = probe[: cut.start()]
        if d.code in ALIAS_CODES or "ALIAS" in d.code or "DUP" in d.code:
            nodes = {t for kind, t in targets if kind == "node"}
            params = set(nodes)
            for n in nodes:  # an argument's parameter shares its alias edge
                params.update(v for _, v, kd in g.out_edges(n, data="kind") if kd == "passed-as")
            near = [e for e in alias_edges if e[0] in params or e[1] in params]
            targets = targets + [("edge", e) for e in (near or ([] if targets else alias_edges))]
        if not targets and path.startswith("device_mesh"):
            targets = [("node", n) for n, k in g.nodes(data="kind") if k == "device"]
        if not targets:
            unplaced.append(d)
            continue
        for kind, t in targets:
            store = g.nodes[t] if kind == "node" else g.edges[t]
            if d not in store["diagnostics"]:
                store["diagnostics"].append(d)
    g.graph["unplaced"] = unplaced


# ---------------------------------------------------------------- access log


def _field(obj: Any, *names: str) -> Any:
    for n in names:
        if isinstance(obj, dict):
            if n in obj:
                return obj[n]
        elif obj is not None and hasattr(obj, n):
            return getattr(obj, n)
    return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _items(log: Any) -> list[Any]:
    """The accesses of a log: ``SimResult``, ``AccessLog``, its JSON, or plain data."""
    inner = getattr(log, "log", None)
    if inner is not None and hasattr(inner, "accesses"):
        log = inner
    if not isinstance(log, dict | list | str) and hasattr(log, "accesses"):
        return list(log.accesses)
    if isinstance(log, str):
        import json

        try:
            log = json.loads(log)
        except ValueError:
            return []
    if isinstance(log, dict):
        if isinstance(log.get("log"), dict):
            log = log["log"]
        for key in ("accesses", "events", "entries", "records"):
            if isinstance(log.get(key), list):
                return log[key]
        out = []
        for name, v in log.items():  # {name: {"reads": n, "writes": m}}
            if isinstance(v, dict):
                for kind in ("reads", "writes"):
                    if isinstance(v.get(kind), int | float):
                        out.append({"ref": name, "kind": kind, "count": v[kind]})
        return out
    if isinstance(log, Iterable):
        return list(log)
    return []


def _count(ev: Any) -> int:
    n = _field(ev, "count", "n")
    if isinstance(n, int | float) and not isinstance(n, bool):
        return int(n)
    el = _field(ev, "elements", "indices")
    size = getattr(el, "size", None)
    if isinstance(size, int):
        return size
    if isinstance(el, list | tuple):  # runs [[start, stop), ...] or plain indices
        if all(isinstance(r, list | tuple) and len(r) == 2 for r in el):
            return sum(int(b) - int(a) for a, b in el)
        return len(el)
    return 1


def _overlay(b: _Builder, log: Any) -> None:
    """Add ``reads``/``writes`` counts to nodes, statements' edges and devices."""
    g = b.g
    by_name: dict[str, list[str]] = defaultdict(list)
    for n, data in g.nodes(data=True):
        if data["kind"] in ("device", "program", "statement", "argument"):
            continue
        if data["kind"] == "view" and not data.get("name"):
            continue
        by_name[data.get("name") or data["label"]].append(n)
    total = 0
    for ev in _items(log):
        kind = str(_field(ev, "kind", "access", "mode", "type") or "").lower()
        if kind.startswith(("w", "store")):
            attr = "writes"
        elif kind.startswith(("r", "load")):
            attr = "reads"
        else:
            continue
        n = _count(ev)
        actor = _field(ev, "actor")
        ref = _field(ev, "ref", "view", "name", "target", "param")
        program = _first(_field(actor, "program"), _field(ev, "program"), 0)
        device = _first(_field(actor, "device"), _field(ev, "device"))
        stmt = _field(ev, "statement", "stmt", "path")
        sid = None
        if isinstance(stmt, int) and not isinstance(stmt, bool):
            sid = f"stmt:{program}.{stmt}"
        elif isinstance(stmt, str):
            sid = next(
                (t for k, t in b.paths.get(stmt, []) if k == "node" and t.startswith("stmt:")),
                None,
            )
        hits: list[str] = []
        if sid in g:
            g.nodes[sid][attr] = g.nodes[sid].get(attr, 0) + n
            edges = g.out_edges(sid, keys=True) if attr == "writes" else g.in_edges(sid, keys=True)
            for e in edges:
                other = e[1] if attr == "writes" else e[0]
                named = g.nodes[other].get("name") or g.nodes[other]["label"]
                if g.edges[e]["kind"] == attr and (ref is None or named == ref):
                    g.edges[e]["count"] = g.edges[e].get("count", 0) + n
                    hits.append(other)
        if not hits and ref is not None:
            hits = by_name.get(str(ref), [])
        for h in dict.fromkeys(hits):
            g.nodes[h][attr] = g.nodes[h].get(attr, 0) + n
        if isinstance(device, int) and f"device:{device}" in g:
            node = g.nodes[f"device:{device}"]
            node[attr] = node.get(attr, 0) + n
        total += n
    g.graph["access_overlay"] = total


# ---------------------------------------------------------------- public


def build_graph(
    scenario: Scenario | Any,
    diagnostics: list[Diagnostic] | None = None,
    access_log: Any = None,
) -> nx.MultiDiGraph:
    """The aliasing graph of a scenario, with diagnostics attached where they are.

    ``diagnostics=None`` asks ``mpmd_lab.validate.check``; an ``access_log`` (from the
    simulator, or ``{ref: {"reads": n, "writes": m}}``) adds ``reads``/``writes`` counts.
    """
    if not isinstance(scenario, Scenario):
        from mpmd_lab.scenario import load_scenario

        scenario = load_scenario(scenario)
    b = _Builder(scenario)
    b.build()
    note = None
    if diagnostics is None:
        diagnostics, note = _run_validator(scenario)
    diags = [x for x in (_as_diagnostic(d) for d in diagnostics) if x is not None]
    b.g.graph["diagnostics"] = diags
    b.g.graph["validator_note"] = note
    _attach(b, diags)
    b.g.graph["paths"] = dict(b.paths)
    if access_log is not None:
        try:
            _overlay(b, access_log)
        except Exception as e:  # noqa: BLE001 - an odd log must not break the graph
            b.g.graph["access_overlay_error"] = f"{type(e).__name__}: {e}"
    return b.g


def problems(g: nx.MultiDiGraph) -> list[Diagnostic]:
    """Every error-severity diagnostic in the graph."""
    return [d for d in g.graph.get("diagnostics", []) if d.is_error]


def is_red(data: dict[str, Any]) -> bool:
    """Does this node or edge carry an error?"""
    return any(d.is_error for d in data.get("diagnostics", ()))


def node_text(g: nx.MultiDiGraph, n: str) -> str:
    """A node as one line: ``view p = remote_ref(dev+1) f32[256]``."""
    d = g.nodes[n]
    kind = d["kind"]
    if kind == "view":
        name = f"{d['name']} = " if d.get("name") else ""
        return f"view {name}{d['label']}  {d.get('type', '')}".rstrip()
    if kind == "statement":
        return f"{d['label']} {d.get('text', '')}  (program {d.get('program')})"
    if kind == "program":
        return f"{d['label']}  {d.get('mesh', '')}"
    if kind == "argument":
        return d["label"]
    extra = d.get("type") or ""
    return f"{kind} {d['label']}  {extra}".rstrip()


def _codes(data: dict[str, Any]) -> str:
    ds = data.get("diagnostics") or []
    return "".join(f"  !! {x.severity} {x.code}" for x in ds)


def _counts(data: dict[str, Any]) -> str:
    parts = [f"{k} {data[k]}" for k in ("reads", "writes", "count") if data.get(k)]
    return f"  [{', '.join(parts)}]" if parts else ""


def to_text(g: nx.MultiDiGraph) -> str:
    """The graph for a terminal: each node with its out-edges, device traffic, problems."""
    lines = [f"graph {g.graph.get('name', '')}"]
    mesh = g.graph.get("device_mesh")
    if mesh:
        lines[0] += "  (device mesh " + ", ".join(f"{k}={v}" for k, v in mesh.items()) + ")"
    order = {k: i for i, k in enumerate(NODE_KINDS)}
    nodes = sorted(
        (n for n in g if g.nodes[n]["kind"] != "device"),
        key=lambda n: (order.get(g.nodes[n]["kind"], 99), _natural(n)),
    )
    for n in nodes:
        data = g.nodes[n]
        lines.append(f"{node_text(g, n)}{_counts(data)}{_codes(data)}")
        for _, v, e in sorted(g.out_edges(n, data=True), key=lambda x: _natural(x[1])):
            if e["kind"] in ("runs",):
                continue
            lab = f" {e['label']}" if e["label"] and e["kind"] in ("derived-by", "aliases") else ""
            lines.append(f"  --{e['kind']}{lab}--> {node_text(g, v)}{_counts(e)}{_codes(e)}")
    if mesh:
        lines.append("devices")
        traffic: dict[tuple[str, str], list[str]] = defaultdict(list)
        red: Counter[tuple[str, str]] = Counter()
        for u, v, e in g.edges(data=True):
            if e["kind"] in ("peer-of", "multicast-to"):
                pair = f"{g.nodes[u]['label'].split()[0]}->{g.nodes[v]['label'].split()[0]}"
                key = (e["kind"], e.get("path") or "")
                traffic[key].append(pair)
                if is_red(e):
                    red[key] += 1
        if not traffic:
            lines.append("  (no peer or multicast traffic)")
        for (kind, path), pairs in sorted(traffic.items()):
            pairs.sort(key=_natural)
            shown = " ".join(pairs[:32]) + (f" ... (+{len(pairs) - 32})" if len(pairs) > 32 else "")
            flag = "  !! error" if red[(kind, path)] else ""
            lines.append(f"  {kind} via {path}: {shown}{flag}")
        if g.graph.get("truncated"):
            lines.append(f"  (device edges capped at {DEVICE_EDGE_CAP})")
    diags = g.graph.get("diagnostics", [])
    lines.append(
        f"problems: {sum(d.is_error for d in diags)} error(s), "
        f"{sum(not d.is_error for d in diags)} other"
    )
    for d in diags:
        lines.append(f"  {d.severity} {d.code} at {d.path or '<scenario>'}: {d.message}")
    if g.graph.get("validator_note"):
        lines.append(f"  ({g.graph['validator_note']})")
    return "\n".join(lines)


def _natural(s: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
