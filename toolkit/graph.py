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

Synchronisation (the collectives language): ``sync`` (a statement's semaphore or barrier
field: statement -> object for a signal, an arrival or a copy that completes on it;
object -> statement for a wait; ``role`` says which), ``signals`` (signal -> the waits it
can satisfy; between statements, with the device pairs in ``pairs``, and between
devices, one per (signal, source device, target device) with the loop steps in
``steps`` and the waits on the target in ``waits``), ``completes`` (a TMA load -> the
``barrier_wait`` on its barrier), ``arrives`` (``barrier_arrive`` -> ``barrier_wait``),
``body`` (a ``loop`` or ``when`` statement -> each statement directly in its body).
Every statement carries ``scope`` (the control statements around it, outermost first)
and ``repeats`` (how many times it runs per program instance: the product of the static
trip counts of its loops, None when one is traced); a loop is a repeat marker
(``repeat=True``, ``var``, ``trips``, ``range``). A diagnostic whose code starts with
``DEADLOCK`` is drawn on the wait it names, on the signals that reach that wait, and
the wait is marked ``deadlock=True`` (``never_signalled=True`` when no signal reaches it).

The graph never raises on a loadable scenario: unknown names become ``unknown`` nodes,
missing buffers ``buffer`` nodes with ``missing=True``, unresolvable device ids no edges.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import networkx as nx
from mpmd_lab import dtypes, shapes, sharding
from mpmd_lab import expr as E
from mpmd_lab.accesslog import Access, AccessLog
from mpmd_lab.diagnostics import INTERP_CANNOT, Diagnostic
from mpmd_lab.fields import Path, axes_tuple, format_path, sub_path
from mpmd_lab.ops import (
    BY_OP,
    SYNC,
    WRITE,
    Bitcast,
    Let,
    Loop,
    MulticastRef,
    RemoteRef,
    SemaphoreSignalMulticast,
    StatementOp,
    When,
)
from mpmd_lab.ops.control import loop_envs, static_value, trip_count
from mpmd_lab.ops.peers import device_targets, resolve_device
from mpmd_lab.plan import Plan, compile, expr_ops
from mpmd_lab.scenario import BufferArg, Scenario, load_scenario
from mpmd_lab.validate import Analysis, analyze

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
    "sync",
    "signals",
    "completes",
    "arrives",
    "body",
)
#: At most this many loop iterations (all loops around a statement together) are
#: evaluated for the signal edges of one statement.
MAX_STEPS = 4096
#: most (device, loop step) pairs whose signal targets the graph evaluates per statement
MAX_SIGNAL_STEPS = 1 << 16

# ---------------------------------------------------------------- labels


def type_label(shape: list[int] | tuple[int, ...] | None, dtype: str | None) -> str:
    """``f32[8,128]``; ``?`` for what cannot be known."""
    d = dtypes.short(dtype) if dtype else "?"
    if shape is None:
        return f"{d}[?]"
    return f"{d}[{','.join(map(str, shape))}]"


def transform_label(t: Any) -> str:
    """A transform as a short call: ``remote_ref(dev+1)``, ``at[0:128]``, ``bitcast(i32)``."""
    return t.label()


# ---------------------------------------------------------------- shapes


def _info(shape: list[int] | None, dtype: str | None, memory_space: str = "GMEM") -> Any:
    """A whole ref as ``mpmd_lab.shapes`` sees it (None when unknown)."""
    if shape is None or dtype is None:
        return None
    return shapes.base_info(shape, dtype, memory_space)


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
    when it cannot be known from the device alone. Out-of-range ids map to ``-1``."""
    return device_targets(device, mesh)


def multicast_groups(axes: str | list[str], mesh: dict[str, int]) -> list[list[int]] | None:
    """The device groups a ``multicast_ref`` over ``axes`` reaches; ``None`` for unknown axes."""
    names = axes_tuple(axes)
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
    def __init__(self, plan: Plan):
        self.r = plan
        self.s = scenario = plan.scenario
        self.node_of: dict[int, str] = {}  # id(binding) -> its node
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
        spec, gshape = self.s.buffer_spec(name), self.s.global_shape(name)
        return self.node(
            nid,
            "buffer",
            name,
            f"buffers.{name}",
            missing=False,
            as_ref=b.as_ref,
            shape=list(b.shape),
            dtype=b.dtype,
            global_shape=gshape,
            spec=self._spec_text(spec, b.shape),
            sharding=self._sharding(b.dtype, gshape, spec, b.shape),
            type=f"{type_label(b.shape, b.dtype)} {kind}",
        )

    def _spec_text(self, spec: Any, shape: list[int]) -> str | None:
        """The partition spec as JAX prints it (None without a device mesh)."""
        mesh = self.s.device_mesh
        return sharding.text(spec, len(shape), mesh) if mesh else None

    def _sharding(self, dtype: str, gshape: list[int], spec: Any, shape: list[int]) -> str:
        """On a device mesh, which shape the node's type is and the global one:
        ``per device; global f32[1024] P('dev',)`` ("" without a mesh)."""
        if not self.s.device_mesh:
            return ""
        where = self._spec_text(spec, shape)
        return f"per device; global {type_label(gshape, dtype)} {where}"

    def stack(
        self,
        base: str,
        shape: list[int] | None,
        dtype: str | None,
        transforms: list[Any],
        steps: list[Any],
        prefix: str,
        path: str,
        name: str | None,
        **attrs: Any,
    ) -> tuple[str, list[int] | None, str | None]:
        """One view node per transform step (types from the resolved steps); returns the
        last node and its type."""
        cur = base
        for k, t in enumerate(transforms):
            step = steps[k] if k < len(steps) else None
            after = step.after if step is not None else None
            error = step.error.code if step is not None and step.error is not None else None
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
                        b,
                        shape,
                        dtype,
                        a.transforms,
                        self.r.args[i].steps[j],
                        f"argview:{i}",
                        apath,
                        None,
                        arg=i,
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
            if a.param in self.r.params and self.r.params[a.param].path == ("call", "args", i):
                self.node_of[id(self.r.params[a.param])] = pid
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
                    lb = self.r.params.get(f"{a.param}[{j}]")
                    if lb is not None and lb.path == ("call", "args", i, "tuple", j):
                        self.node_of[id(lb)] = leaf
                    names.setdefault(f"{a.param}[{j}]", (leaf, lshape, ldtype))
                    if bb is not None and bb.as_ref:
                        param_buffer[leaf] = bname
                        param_order.append(leaf)
            elif (
                isinstance(a, BufferArg)
                and (bb := s.buffers.get(a.buffer)) is not None
                and bb.as_ref
            ):
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
                global_shape=self.s.output_global_shape(name),
                spec=self._spec_text(o.spec, o.shape),
                sharding=self._sharding(o.dtype, self.s.output_global_shape(name), o.spec, o.shape),
                type=type_label(o.shape, o.dtype),
            )
            names.setdefault(name, (nid, list(o.shape), o.dtype))
            self.info[nid] = _info(list(o.shape), o.dtype)
            self._own(name, ("call", "outputs", name), nid)
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
            self._own(name, ("call", "scratch", name), nid)
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
            cb = self.r.captures.get(cap.name)
            if cb is not None and cb.path == ("call", "captures", i):
                self.node_of[id(cb)] = nid
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

    def _own(self, name: str, path: Path, nid: str) -> None:
        b = self.r.params.get(name)
        if b is not None and b.path == path:
            self.node_of[id(b)] = nid

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
        for rst in self.r.programs[i].stmts:
            # (the graph's paths are text: its labels and the diagnostics' paths)
            st, j, spath = rst.node, rst.index, format_path(rst.path)
            if isinstance(st, Let):
                base, shape, dtype = self.ref_node(rst, "ref", st.ref)
                if st.transforms:
                    last, shape, dtype = self.stack(
                        base,
                        shape,
                        dtype,
                        st.transforms,
                        rst.steps,
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
                if rst.defines is not None:
                    self.node_of[id(rst.defines)] = last
                self.load_edges(rst, last)
                continue
            scope = tuple(f"stmt:{i}.{c.index}" for c in rst.scope)
            sid = self.node(
                f"stmt:{i}.{j}",
                "statement",
                st.op,
                spath,
                program=i,
                statement=j,
                text=st.label(),
                scope=scope,
                repeats=self.repeats(rst),
            )
            if isinstance(st, Loop):
                trips = self.trips(st)
                self.g.nodes[sid].update(
                    repeat=True,
                    control="loop",
                    var=st.var,
                    trips=trips,
                    range=f"{E.parse(st.start).label()}..{E.parse(st.stop).label()}"
                    + ("" if st.step == 1 else f" step {st.step}"),
                )
            elif isinstance(st, When):
                self.g.nodes[sid].update(control="when", cond=st.condition().label())
            self.edge(pid, sid, "runs", "", None)
            if scope:
                self.edge(scope[-1], sid, "body", "", None)
            for fname, name, access in st.ref_fields():
                ref = self.ref_node(rst, fname, name)[0]
                if access == WRITE:
                    self.edge(sid, ref, "writes", fname, f"{spath}.{fname}", statement=sid)
                elif access == SYNC:
                    role = _sync_role(st)
                    u, v = (ref, sid) if role == "wait" else (sid, ref)
                    self.edge(u, v, "sync", fname, f"{spath}.{fname}", statement=sid, role=role)
                else:
                    self.edge(ref, sid, "reads", fname, f"{spath}.{fname}", statement=sid)
            self.load_edges(rst, sid)
        self.sync_edges(i)

    def load_edges(self, rst: Any, target: str) -> None:
        """A ``reads`` edge from each ref an expression of the statement loads from
        (``ids_ref[0]`` as a device id or an index; ``pl.semaphore_read(sem)``) to the
        statement, or to the view a ``let`` makes with it."""
        for name, b in rst.loads.items():
            nid = self.node_of.get(id(b))
            if nid is not None:
                path = format_path(rst.path)
                self.edge(nid, target, "reads", f"load {name}", path, statement=target)
        if not rst.loads:
            return
        for prefix, op in expr_ops(rst.node):
            for field, e in op.exprs():
                if op.expr_kind(field) == "device" and E.reads_data(e):
                    # (peers by data: no device edges drawn, the text says which)
                    self.g.graph.setdefault("data_peers", []).append(
                        (format_path(sub_path(rst.path, prefix + field)), e.label())
                    )

    # -- loops and synchronisation

    def trips(self, loop: Any) -> int | None:
        """A loop's static trip count (None when a bound is traced)."""
        a = static_value(E.parse(loop.start), self.r)
        b = static_value(E.parse(loop.stop), self.r)
        return None if a is None or b is None else trip_count(a, b, loop.step)

    def repeats(self, rst: Any) -> int | None:
        n = 1
        for c in rst.scope:
            if isinstance(c.node, Loop):
                t = self.trips(c.node)
                if t is None:
                    return None
                n *= t
        return n

    def loop_envs(self, rst: Any) -> list[dict[str, int]] | None:
        """Every assignment of the loop variables around a statement (static ranges; a
        bound may use an outer loop's variable); None when unknown or too many."""
        return loop_envs(rst.scope, self.r, limit=MAX_STEPS)

    def sync_edges(self, i: int) -> None:
        """``signals`` edges (signal -> the waits it can satisfy, per device pair and
        loop step) and barrier edges (``completes``, ``arrives``) of program ``i``."""
        mesh = dict(self.s.device_mesh or {})
        coords = _device_coords(mesh) if mesh else [()]
        sizes = {**mesh, **_mesh_sizes(self.s.call.programs[i].mesh)}
        signals: list[tuple[Any, str, list[tuple[int, dict, int, Any]]]] = []
        waits: dict[tuple[int, str, Any], set[str]] = defaultdict(set)
        barrier_waits: list[tuple[Any, str]] = []
        barrier_ops: list[tuple[Any, str, str]] = []
        for rst in self.r.programs[i].stmts:
            st = rst.node
            role = st.SYNC_ROLE if isinstance(st, StatementOp) else ""
            sid = f"stmt:{i}.{rst.index}"
            if role and _sync_field(st) == "sem":
                b = rst.refs.get("sem")
                envs = self.loop_envs(rst)
                if b is None or envs is None:
                    self.g.nodes[sid]["unresolved"] = True
                    continue
                if len(coords) * len(envs) > MAX_SIGNAL_STEPS:  # said, not drawn
                    self.g.nodes[sid]["unresolved"] = True
                    self.g.graph["truncated"] = True
                    self.g.graph.setdefault("signals_not_drawn", []).append(format_path(rst.path))
                    continue
                root = b.origin[0] if b.origin else b.name
                hits: list[tuple[int, dict, int, Any]] = []
                for d, own in enumerate(coords):
                    own_env = dict(zip(mesh, own, strict=True))
                    for env in envs:
                        values = {**own_env, **env}
                        slot = _slot(b, values, sizes)
                        if role == "wait":
                            waits[(d, root, slot)].add(sid)
                            continue
                        for e in self.signal_targets(st, d, own_env, values, sizes, mesh):
                            hits.append((d, env, e, slot))
                if role == "signal":
                    signals.append((rst, root, hits))
            elif role == "wait":
                barrier_waits.append((rst, sid))
            elif role in ("arrive", "complete"):
                barrier_ops.append((rst, sid, "arrives" if role == "arrive" else "completes"))
        for rst, root, hits in signals:
            sid = f"stmt:{i}.{rst.index}"
            pairs: dict[str, set[tuple[int, int]]] = defaultdict(set)
            per_device: dict[tuple[int, int, Any], dict[str, Any]] = {}
            for d, env, e, slot in hits:
                targets = waits.get((e, root, slot), set()) | waits.get((e, root, None), set())
                if slot is None:  # an unknown slot may meet any wait on the semaphore
                    targets |= {
                        w for (dd, r, _s), ws in waits.items() if dd == e and r == root for w in ws
                    }
                for w in targets:
                    pairs[w].add((d, e))
                key = (d, e, slot)
                item = per_device.setdefault(key, {"steps": [], "waits": set()})
                if env:
                    item["steps"].append(env)
                item["waits"] |= targets
            label = rst.node.ref_name("sem")
            spath = format_path((*rst.path, "sem"))
            for w, ps in sorted(pairs.items()):
                self.edge(sid, w, "signals", label, spath, pairs=sorted(ps), sem=root)
            for (d, e, slot), item in sorted(per_device.items(), key=lambda x: (x[0][0], x[0][1])):
                if self.device_edges >= DEVICE_EDGE_CAP:
                    self.g.graph["truncated"] = True
                    break
                if not mesh:
                    break
                self.device_edges += 1
                self.edge(
                    f"device:{d}",
                    f"device:{e}",
                    "signals",
                    label,
                    spath,
                    signal=sid,
                    sem=root,
                    slot=slot,
                    steps=item["steps"],
                    waits=sorted(item["waits"]),
                )
        for rst, sid, kind in barrier_ops:
            b = rst.refs.get("barrier")
            if b is None:
                continue
            root = b.origin[0] if b.origin else b.name
            for wrst, wid in barrier_waits:
                wb = wrst.refs.get("barrier")
                if wb is None or (wb.origin[0] if wb.origin else wb.name) != root:
                    continue
                if _same_slot(b, wb, sizes):
                    self.edge(
                        sid, wid, kind, root.split(":", 1)[-1], format_path((*rst.path, "barrier"))
                    )

    def signal_targets(
        self, st: Any, d: int, own: dict, values: dict, sizes: dict, mesh: dict
    ) -> list[int]:
        """The devices a signal from device ``d`` (at one loop step) reaches."""
        if isinstance(st, SemaphoreSignalMulticast):
            groups = multicast_groups(st.axes, mesh) if mesh else None
            if groups is None:
                return []
            return next((grp for grp in groups if d in grp), [])
        if st.device is None:
            return [d]
        if not mesh:
            return []
        try:
            e = resolve_device(st.device).target(own, mesh, E.Env(values, sizes))
        except (LookupError, IndexError, E.ExprError):
            return []
        return [e]

    def ref_node(self, rst: Any, fname: str, name: str) -> tuple[str, Any, Any]:
        """The node of the ref a statement's field names (as resolved), and its type."""
        b = rst.refs.get(fname)
        nid = self.node_of.get(id(b)) if b is not None else None
        if nid is None:
            nid = self.node(f"unknown:{name}", "unknown", name, None, name=name, type="undefined")
            return nid, None, None
        d = self.g.nodes[nid]
        return nid, d.get("shape"), d.get("dtype")


def _statement_label(st: Any) -> str:
    return st.label()


def _sync_role(st: Any) -> str:
    """What a statement does to the semaphore or barrier it names (its op says)."""
    return st.SYNC_ROLE or "signal"


def _sync_field(st: StatementOp) -> str | None:
    """The field naming the semaphore or barrier a statement acts on."""
    return next((f for f, access in st.REFS if access == SYNC), None)


def _mesh_sizes(m: Any) -> dict[str, int]:
    sizes = {**m.grid, **m.cluster}
    if m.threads is not None and m.threads.name:
        sizes[m.threads.name] = m.threads.count
    return sizes


def _slot(b: Any, values: dict[str, int], sizes: dict[str, int]) -> Any:
    """Which semaphore (or barrier) of an array a view names: the integer indices of its
    ``at`` steps, evaluated (None when one needs more than ``values``)."""
    out: list[int] = []
    for _p, t in b.stack:
        for e in t.int_indices():
            try:
                out.append(e.eval(E.Env(values, sizes)))
            except E.ExprError:
                return None
    return tuple(out)


def _same_slot(a: Any, b: Any, sizes: dict[str, int]) -> bool:
    """Two views of one barrier array may name the same barrier (indices that depend on
    the kernel's coordinates count as the same)."""
    sa, sb = _slot(a, {}, sizes), _slot(b, {}, sizes)
    return sa is None or sb is None or sa == sb


# ---------------------------------------------------------------- diagnostics

_TAIL = re.compile(r"(\.[^.\[\]]+|\[[^\]]*\])$")


def _attach(b: _Builder, diags: list[Diagnostic]) -> None:
    g = b.g
    unplaced: list[Diagnostic] = []
    alias_edges = [(u, v, k) for u, v, k, kd in g.edges(keys=True, data="kind") if kd == "aliases"]
    for d in diags:
        if d.code in INTERP_CANNOT and not d.is_error:
            continue  # a fact of this machine (said once), not a problem of a node
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
    _deadlocks(g, diags)


def _deadlocks(g: nx.MultiDiGraph, diags: list[Diagnostic]) -> None:
    """A ``DEADLOCK*`` diagnostic on a wait: the wait is marked, and so are the signals
    that reach it (none: the wait that never ends)."""
    for d in diags:
        if not d.code.startswith("DEADLOCK"):
            continue
        for n, data in g.nodes(data=True):
            if data["kind"] != "statement" or d not in data["diagnostics"]:
                continue
            op = BY_OP.get(data["label"])
            if op is None or getattr(op, "SYNC_ROLE", "") != "wait":
                continue
            data["deadlock"] = True
            incoming = [
                (u, v, k)
                for u, v, k, kind in g.in_edges(n, keys=True, data="kind")
                if kind in ("signals", "completes", "arrives")
            ]
            device_edges = [
                (u, v, k)
                for u, v, k, e in g.edges(keys=True, data=True)
                if e["kind"] == "signals" and n in e.get("waits", ())
            ]
            if not incoming:
                data["never_signalled"] = True
            for e in incoming + device_edges:
                store = g.edges[e]
                if d not in store["diagnostics"]:
                    store["diagnostics"].append(d)


# ---------------------------------------------------------------- access log


def _accesses(log: Any) -> list[Access]:
    """The accesses of the simulator's log (an ``AccessLog``, or a result holding one)."""
    inner = getattr(log, "log", log)
    if not isinstance(inner, AccessLog):
        raise TypeError(
            f"access_log is the simulator's AccessLog (or its result), not {type(log).__name__}"
        )
    return inner.accesses


def _overlay(b: _Builder, log: Any) -> None:
    """Add ``reads``/``writes`` counts to nodes, statements' edges and devices."""
    g = b.g
    total = 0
    for ev in _accesses(log):
        attr = "writes" if ev.kind == "write" else "reads"
        n = int(ev.elements.size)
        sid = f"stmt:{ev.actor.program}.{ev.statement}"
        if sid in g:
            g.nodes[sid][attr] = g.nodes[sid].get(attr, 0) + n
            edges = g.out_edges(sid, keys=True) if attr == "writes" else g.in_edges(sid, keys=True)
            for e in edges:
                other = e[1] if attr == "writes" else e[0]
                named = g.nodes[other].get("name") or g.nodes[other]["label"]
                if g.edges[e]["kind"] == attr and named == ev.ref:
                    g.edges[e]["count"] = g.edges[e].get("count", 0) + n
                    g.nodes[other][attr] = g.nodes[other].get(attr, 0) + n
        node = g.nodes.get(f"device:{ev.actor.device}")
        if node is not None:
            node[attr] = node.get(attr, 0) + n
        total += n
    g.graph["access_overlay"] = total


# ---------------------------------------------------------------- public


def build_graph(
    scenario: Scenario | Any,
    diagnostics: list[Diagnostic] | None = None,
    access_log: Any = None,
    *,
    analysis: Analysis | None = None,
) -> nx.MultiDiGraph:
    """The aliasing graph of a scenario, with diagnostics attached where they are.

    Pass the scenario's ``analysis`` (``validate.analyze``) when you have it: the graph
    reads its resolved form and diagnostics. Else ``diagnostics=None`` analyses the
    scenario once; given ``diagnostics`` are drawn as they are. An ``access_log`` (the
    simulator's result or its ``AccessLog``) adds ``reads``/``writes`` counts.
    """
    if analysis is None:
        s = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        if diagnostics is None:
            analysis = analyze(s)
            plan, diags = analysis.plan, list(analysis.diagnostics)
        else:
            plan, diags = compile(s), list(diagnostics)
    else:
        plan = analysis.plan
        diags = list(analysis.diagnostics if diagnostics is None else diagnostics)
    b = _Builder(plan)
    b.build()
    b.g.graph["diagnostics"] = diags
    _attach(b, diags)
    b.g.graph["paths"] = dict(b.paths)
    if access_log is not None:
        _overlay(b, access_log)
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
    if d.get("sharding"):
        extra += f" ({d['sharding']})"
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
            if (
                e["kind"] in ("peer-of", "multicast-to", "signals")
                and g.nodes[u]["kind"] == "device"
            ):
                pair = f"{g.nodes[u]['label'].split()[0]}->{g.nodes[v]['label'].split()[0]}"
                key = (e["kind"], e.get("path") or "")
                traffic[key].append(pair)
                if is_red(e):
                    red[key] += 1
        data_peers = g.graph.get("data_peers", [])
        if not traffic and not data_peers:
            lines.append("  (no peer, multicast or signal traffic)")
        for path, label in data_peers:
            lines.append(f"  peer by data via {path}: {label} (loaded as the kernel runs)")
        for (kind, path), pairs in sorted(traffic.items()):
            pairs.sort(key=_natural)
            shown = " ".join(pairs[:32]) + (f" ... (+{len(pairs) - 32})" if len(pairs) > 32 else "")
            flag = "  !! error" if red[(kind, path)] else ""
            lines.append(f"  {kind} via {path}: {shown}{flag}")
        if g.graph.get("truncated"):
            lines.append(f"  (device edges capped at {DEVICE_EDGE_CAP})")
        for path in g.graph.get("signals_not_drawn", []):
            lines.append(
                f"  (signals of {path} not drawn: more than {MAX_SIGNAL_STEPS:,}"
                " device x loop-step pairs)"
            )
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
