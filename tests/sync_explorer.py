"""An exhaustive schedule explorer for scenario files, written apart from the engine.

The ground truth for the labelled corpus (``tests/sync_corpus``): it reads the scenario
JSON itself (no ``mpmd_lab`` import) and gives synchronisation its own small semantics.

- **Actors**: one per (device, block, warpgroup); each runs its statement list, loops
  unrolled and ``when`` decided per actor, as a flat list of actions.
- **Memory**: a buffer of one device (GMEM, keyed by parameter name and device) or of
  one block (SMEM scratch, keyed by name, device and block); an access touches a set
  of flat element indices.
- **Semaphores**: one counter per (scratch element, device, block; ``get_global``: one
  per device). ``semaphore_signal`` adds ``inc`` to the target device's counter;
  ``semaphore_wait`` can go when the counter is >= ``value`` and then takes ``value`` off
  (``decrement=False``: leaves it).
- **Reads**: a ``when`` whose condition compares ``pl.semaphore_read(sem)`` with an
  expression of the actor's coordinates is a branch step: it reads the counter when it
  runs (any interleaving) and skips its body when the comparison fails. A read is an
  acquire, as Mosaic GPU lowers it (``ld.acquire.sys.u32``; a signal is a
  ``red.release.sys.global.add.u32``): here that needs nothing more, since a race is
  two co-enabled accesses and an access a read's value guards is never co-enabled with
  what came before the signal it needed; ``enumerate_traces`` orders the reader after
  every signal before it, as a wait.
- **Barriers**: per (element, device, block); ``num_arrivals`` arrivals complete a
  phase; an actor's k-th ``barrier_wait`` on a barrier can go once k+1 phases completed.
- **Async copies**: ``copy_gmem_to_smem`` and ``copy_smem_to_gmem`` put a copy in
  flight; it completes at any later step (a load then arrives at its barrier);
  ``wait_smem_to_gmem(n)`` can go when at most ``n`` of the actor's stores are in flight.

Every interleaving of actor steps and copy completions is explored (states memoised).

- **race**: a reachable state in which two live accesses overlap on an element and at
  least one writes; live = an actor's next action, or a copy in flight. Two live
  accesses of one state can happen in either order, so nothing orders them.
- **deadlock**: a reachable state where nothing can move and some actor is not done.
- **imbalance**: a final state (all done) with a semaphore not zero.

``enumerate_traces`` is the naive cross-check: every complete trace, no memo, races by
happens-before (vector clocks) in each trace instead of co-enabled accesses.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class Unsupported(Exception):
    """The scenario uses something outside this explorer's subset."""


class TooBig(Exception):
    """More states than the bound: no verdict."""


# ----------------------------------------------------------------------------- expressions


def evaluate(expr: Any, env: dict[str, int], sizes: dict[str, int]) -> int:
    """An index expression (an int or Python-syntax string) in ``env``."""
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, int):
        return expr
    if not isinstance(expr, str):
        raise Unsupported(f"expression {expr!r}")
    return _ev(ast.parse(expr, mode="eval").body, env, sizes)


def _ev(n: ast.AST, env: dict[str, int], sizes: dict[str, int]) -> int:
    if isinstance(n, ast.Constant) and isinstance(n.value, int):
        return int(n.value)
    if isinstance(n, ast.Name):
        return env[n.id]
    if isinstance(n, ast.UnaryOp):
        v = _ev(n.operand, env, sizes)
        if isinstance(n.op, ast.USub):
            return -v
        if isinstance(n.op, ast.Not):
            return int(not v)
    if isinstance(n, ast.BinOp):
        a, b = _ev(n.left, env, sizes), _ev(n.right, env, sizes)
        ops = {
            ast.Add: lambda: a + b,
            ast.Sub: lambda: a - b,
            ast.Mult: lambda: a * b,
            ast.FloorDiv: lambda: a // b,
            ast.Mod: lambda: a % b,
            ast.BitAnd: lambda: int(bool(a) and bool(b)),
            ast.BitOr: lambda: int(bool(a) or bool(b)),
        }
        if type(n.op) in ops:
            return ops[type(n.op)]()
    if isinstance(n, ast.BoolOp):
        vals = [bool(_ev(v, env, sizes)) for v in n.values]
        return int(all(vals) if isinstance(n.op, ast.And) else any(vals))
    if isinstance(n, ast.Compare):
        left = _ev(n.left, env, sizes)
        for op, right_node in zip(n.ops, n.comparators, strict=True):
            right = _ev(right_node, env, sizes)
            cmp = {
                ast.Lt: left < right,
                ast.LtE: left <= right,
                ast.Gt: left > right,
                ast.GtE: left >= right,
                ast.Eq: left == right,
                ast.NotEq: left != right,
            }
            if not cmp[type(op)]:
                return 0
            left = right
        return 1
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        if n.func.id == "axis_size" and isinstance(n.args[0], ast.Name):
            return sizes[n.args[0].id]
        if n.func.id == "program_id":
            return env[f"program_id({_ev(n.args[0], env, sizes)})"]
    raise Unsupported(f"expression {ast.dump(n)}")


# ----------------------------------------------------------------------------- compiling


@dataclass(frozen=True)
class View:
    """A view: the memory it is in (``key``), and its elements (flat indices, shaped)."""

    key: tuple
    idx: np.ndarray


@dataclass
class Action:
    """One step of one actor."""

    kind: str
    path: str
    reads: dict = field(default_factory=dict)  # memory key -> frozenset of elements
    writes: dict = field(default_factory=dict)
    sem: int = -1  # semaphore id
    value: int = 1
    decrement: bool = True
    bar: int = -1  # barrier id
    n: int = 0
    test: str = ""  # a branch's comparison of the semaphore's value with ``value``


@dataclass
class Program:
    """A scenario compiled for exploration."""

    actors: list[str]
    actions: list[list[Action]]
    sem_names: list[str]
    bar_names: list[str]
    bar_targets: list[int]


def _device(spec: Any, env: dict[str, int], sizes: dict[str, int], axis: str) -> int:
    if isinstance(spec, dict):
        ((ax, v),) = spec.items()
        if isinstance(v, dict):
            return (env[ax] + v["offset"]) % sizes[ax]
        return evaluate(v, env, sizes)
    return evaluate(spec, env, sizes)


def _index(view: View, entries: list, env: dict[str, int], sizes: dict[str, int]) -> View:
    sel: list[Any] = []
    for e in entries:
        if e is None:
            sel.append(slice(None))
        elif isinstance(e, list):
            sel.append(slice(evaluate(e[0], env, sizes), evaluate(e[1], env, sizes)))
        elif isinstance(e, dict) and "ds" in e:
            start = evaluate(e["ds"][0], env, sizes)
            if not 0 <= start <= view.idx.shape[len(sel)] - e["ds"][1]:
                raise Unsupported(f"pl.ds({start}, {e['ds'][1]}) out of bounds")
            sel.append(slice(start, start + e["ds"][1]))
        elif isinstance(e, dict) and "block" in e:
            k = e["size"]
            start = env[e["block"]] * e.get("stride", k)
            sel.append(slice(start, start + k))
        elif isinstance(e, dict):
            raise Unsupported(f"index {e}")
        else:
            i = evaluate(e, env, sizes)
            if not 0 <= i < view.idx.shape[len(sel)]:
                raise Unsupported(f"index {i} out of bounds")
            sel.append(i)
    return View(view.key, view.idx[tuple(sel)])


class _Compiler:
    def __init__(self, scenario: dict) -> None:
        self.s = scenario
        call = scenario["call"]
        mesh = scenario.get("device_mesh") or {}
        if len(mesh) > 1:
            raise Unsupported("a device mesh of more than one axis")
        if len(call["programs"]) != 1:
            raise Unsupported("more than one program")
        prog = call["programs"][0]
        if prog["mesh"].get("cluster"):
            raise Unsupported("clusters")
        self.axis = next(iter(mesh), "dev")
        self.ndev = next(iter(mesh.values()), 1)
        self.grid = dict(prog["mesh"]["grid"])
        threads = prog["mesh"].get("threads")
        self.wg_name = threads["name"] if threads else None
        self.nwg = threads["count"] if threads else 1
        self.body = prog["body"]
        self.shapes: dict[str, tuple[list[int], str]] = {}  # name -> shape, memory space
        for a in call["args"]:
            if "buffer" not in a or a.get("transforms"):
                raise Unsupported("an argument that is not a plain buffer")
            self.shapes[a["param"]] = (scenario["buffers"][a["buffer"]]["shape"], "GMEM")
        for name, o in call["outputs"].items():
            self.shapes[name] = (o["shape"], "GMEM")
        self.sync: dict[str, tuple[str, int, int]] = {}  # name -> kind, count, arrivals
        self.shared: set[str] = set()  # semaphores every block shares (get_global)
        for name, sc in (call.get("scratch") or {}).items():
            kind = sc.get("kind", "array")
            if kind == "semaphore":
                shape = sc.get("shape", [])
                self.sync[name] = ("sem", shape[0] if shape else 1, 0)
                if sc.get("alloc") == "get_global":
                    self.shared.add(name)
            elif kind == "barrier":
                self.sync[name] = ("bar", sc.get("num_barriers", 1), sc.get("num_arrivals", 1))
            elif kind == "array":
                self.shapes[name] = (sc["shape"], sc.get("memory_space", "SMEM"))
            else:
                raise Unsupported(f"scratch kind {kind}")
        self.sem_ids: dict[tuple, int] = {}
        self.bar_ids: dict[tuple, int] = {}
        self.bar_targets: list[int] = []

    def base(self, name: str, dev: int, block: int) -> View:
        if name in self.sync:
            _, count, _ = self.sync[name]
            return View(("sync", name, dev, -1 if name in self.shared else block), np.arange(count))
        shape, space = self.shapes[name]
        key = (name, dev, block) if space == "SMEM" else (name, dev)
        return View(key, np.arange(int(np.prod(shape))).reshape(shape))

    def compile(self) -> Program:
        actors, actions = [], []
        sizes = {self.axis: self.ndev, **self.grid}
        if self.wg_name:
            sizes[self.wg_name] = self.nwg
        blocks = list(itertools.product(*(range(n) for n in self.grid.values())))
        for dev in range(self.ndev):
            for bi, block in enumerate(blocks):
                for wg in range(self.nwg):
                    env = {self.axis: dev, **dict(zip(self.grid, block, strict=True))}
                    for d, b in enumerate(block):
                        env[f"program_id({d})"] = b
                    if self.wg_name:
                        env[self.wg_name] = wg
                    label = f"device {dev}" + (f" block {bi}" if len(blocks) > 1 else "")
                    label += f" wg {wg}" if self.wg_name else ""
                    actors.append(label)
                    out: list[Action] = []
                    self.stmts(self.body, "call.programs[0].body", env, sizes, {}, dev, bi, out)
                    actions.append(out)
        sem_names = [""] * len(self.sem_ids)
        for (name, e, d, b), i in self.sem_ids.items():
            sem_names[i] = f"{name}[{e}] of device {d}" + (f" block {b}" if b >= 0 else "")
        bar_names = [""] * len(self.bar_ids)
        for (name, e, d, b), i in self.bar_ids.items():
            bar_names[i] = f"{name}[{e}] of device {d} block {b}"
        return Program(actors, actions, sem_names, bar_names, self.bar_targets)

    def view(self, name: str, lets: dict[str, View], dev: int, block: int) -> View:
        return lets[name] if name in lets else self.base(name, dev, block)

    def one(self, v: View) -> tuple[str, int, int, int]:
        if v.key[0] != "sync" or v.idx.size != 1:
            raise Unsupported(f"a synchronisation op on {v.key}")
        _, name, d, b = v.key
        return name, int(v.idx.reshape(-1)[0]), d, b

    def sem(self, v: View) -> int:
        k = self.one(v)
        return self.sem_ids.setdefault(k, len(self.sem_ids))

    def bar(self, v: View) -> int:
        k = self.one(v)
        if k not in self.bar_ids:
            self.bar_ids[k] = len(self.bar_ids)
            self.bar_targets.append(self.sync[k[0]][2])
        return self.bar_ids[k]

    def stmts(self, body, path, env, sizes, lets, dev, block, out) -> None:  # noqa: ANN001
        lets = dict(lets)
        for i, st in enumerate(body):
            p = f"{path}[{i}]"
            if "let" in st:
                v = self.view(st["ref"], lets, dev, block)
                for t in st.get("transforms", []):
                    if t["op"] == "at":
                        v = _index(v, t["index"], env, sizes)
                    elif t["op"] == "remote_ref":
                        d = _device(t["device"], env, sizes, self.axis)
                        if v.key[0] == "sync" or len(v.key) != 2:
                            raise Unsupported("remote_ref of scratch")
                        if not 0 <= d < self.ndev:
                            raise Unsupported("device out of range")
                        v = View((v.key[0], d), v.idx)
                    else:
                        raise Unsupported(f"transform {t['op']}")
                lets[st["let"]] = v
                continue
            op = st["op"]

            def ref(fld: str) -> View:
                return self.view(st[fld], lets, dev, block)  # noqa: B023

            def fp(v: View) -> dict:
                return {v.key: frozenset(v.idx.reshape(-1).tolist())}

            if op == "loop":
                start = evaluate(st.get("start", 0), env, sizes)
                stop = evaluate(st["stop"], env, sizes)
                for it in range(start, stop, st.get("step", 1)):
                    self.stmts(
                        st["body"],
                        f"{p}.body",
                        {**env, st["var"]: it},
                        sizes,
                        lets,
                        dev,
                        block,
                        out,
                    )
            elif op == "when" and "semaphore_read" in str(st["cond"]):
                m = _READ.fullmatch(str(st["cond"]))
                if m is None:
                    raise Unsupported(f"a semaphore read in {st['cond']!r}")
                sem = self.sem(self.view(m[1], lets, dev, block))
                inner: list[Action] = []
                self.stmts(st["body"], f"{p}.body", env, sizes, lets, dev, block, inner)
                value = evaluate(m[3], env, sizes)
                out.append(Action("branch", p, sem=sem, value=value, n=len(inner), test=m[2]))
                out.extend(inner)
            elif op == "when":
                if evaluate(st["cond"], env, sizes):
                    self.stmts(st["body"], f"{p}.body", env, sizes, lets, dev, block, out)
            elif op == "copy":
                out.append(Action("access", p, reads=fp(ref("src")), writes=fp(ref("dst"))))
            elif op in ("add", "dot"):
                reads = fp(ref("lhs"))
                for k, s in fp(ref("rhs")).items():
                    reads[k] = reads.get(k, frozenset()) | s
                out.append(Action("access", p, reads=reads, writes=fp(ref("dst"))))
            elif op == "fill":
                out.append(Action("access", p, writes=fp(ref("dst"))))
            elif op == "semaphore_signal":
                v = ref("sem")
                if st.get("device") is not None:
                    d = _device(st["device"], env, sizes, self.axis)
                    if not 0 <= d < self.ndev:
                        raise Unsupported("device out of range")
                    v = View(("sync", v.key[1], d, v.key[3]), v.idx)
                inc = evaluate(st.get("inc", 1), env, sizes)
                out.append(Action("signal", p, sem=self.sem(v), value=inc))
            elif op == "semaphore_wait":
                out.append(
                    Action(
                        "wait",
                        p,
                        sem=self.sem(ref("sem")),
                        value=evaluate(st.get("value", 1), env, sizes),
                        decrement=st.get("decrement", True),
                    )
                )
            elif op == "barrier_wait":
                out.append(Action("barrier_wait", p, bar=self.bar(ref("barrier"))))
            elif op == "barrier_arrive":
                out.append(Action("arrive", p, bar=self.bar(ref("barrier"))))
            elif op == "copy_gmem_to_smem":
                if st.get("barrier") is None:
                    raise Unsupported("a load without a barrier")
                out.append(
                    Action(
                        "load",
                        p,
                        reads=fp(ref("src")),
                        writes=fp(ref("dst")),
                        bar=self.bar(ref("barrier")),
                    )
                )
            elif op == "copy_smem_to_gmem":
                out.append(Action("store", p, reads=fp(ref("src")), writes=fp(ref("dst"))))
            elif op == "wait_smem_to_gmem":
                out.append(Action("store_wait", p, n=st.get("n", 0)))
            elif op == "commit_smem":
                continue
            else:
                raise Unsupported(f"statement {op}")


#: a condition on a semaphore's value: ``pl.semaphore_read(sem) OP expr``
_READ = re.compile(r"\s*(?:pl\.)?semaphore_read\((\w+)\)\s*(>=|<=|==|!=|>|<)\s*(.+)")
_TESTS = {
    ">": lambda v, k: v > k,
    ">=": lambda v, k: v >= k,
    "==": lambda v, k: v == k,
    "!=": lambda v, k: v != k,
    "<": lambda v, k: v < k,
    "<=": lambda v, k: v <= k,
}


def compile_scenario(scenario: dict | str | Path) -> Program:
    """The scenario (a dict, or a JSON file) as actors' action lists."""
    if not isinstance(scenario, dict):
        scenario = json.loads(Path(scenario).read_text())
    return _Compiler(scenario).compile()


# ----------------------------------------------------------------------------- exploring


def _conflict(a: Action, b: Action) -> bool:
    for w, other in ((a.writes, b), (b.writes, a)):
        for key, elems in w.items():
            for acc in (other.reads, other.writes):
                if key in acc and not elems.isdisjoint(acc[key]):
                    return True
    return False


@dataclass
class Verdict:
    """What every schedule can do: racing statement pairs, blocked statements of the
    deadlocked states, semaphores left non-zero; ``states`` explored."""

    races: set[tuple[str, str]] = field(default_factory=set)
    deadlocks: set[str] = field(default_factory=set)
    imbalance: set[str] = field(default_factory=set)
    states: int = 0
    #: a shortest schedule to each race ("A | B": the steps, then both accesses are
    #: next) and to a deadlock ("deadlock": the steps, then who is blocked where)
    witnesses: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def label(self) -> dict[str, Any]:
        kinds = [
            k
            for k, v in (
                ("race", self.races),
                ("deadlock", self.deadlocks),
                ("imbalance", self.imbalance),
            )
            if v
        ]
        return {
            "kinds": kinds or ["clean"],
            "races": sorted(list(r) for r in self.races),
            "deadlocks": sorted(self.deadlocks),
            "imbalance": sorted(self.imbalance),
            "states": self.states,
            "witnesses": dict(sorted(self.witnesses.items())),
        }


# A state: (pcs, semaphore values, barrier arrivals, barrier phases,
#           barrier waits done per (actor, barrier), copies in flight as (actor, pc)).
State = tuple


class _Machine:
    """The transition relation, shared by the explorer and the naive enumerator."""

    def __init__(self, prog: Program) -> None:
        self.p = prog
        self.na = len(prog.actors)
        self.nb = len(prog.bar_names)

    def initial(self) -> State:
        return (
            (0,) * self.na,
            (0,) * len(self.p.sem_names),
            (0,) * self.nb,
            (0,) * self.nb,
            (0,) * (self.na * self.nb),
            frozenset(),
        )

    def action(self, a: int, pc: int) -> Action | None:
        acts = self.p.actions[a]
        return acts[pc] if pc < len(acts) else None

    def steps(self, s: State) -> list[tuple[tuple, State]]:
        """Every step from ``s``: (("actor", a) or ("land", (a, pc)), next state)."""
        pcs, sems, arr, ph, waits, flight = s
        out: list[tuple[tuple, State]] = []
        for a in range(self.na):
            act = self.action(a, pcs[a])
            if act is None:
                continue
            npcs = pcs[:a] + (pcs[a] + 1,) + pcs[a + 1 :]
            k = act.kind
            if k == "access" or (k == "store_wait" and self._stores(flight, a) <= act.n):
                out.append((("actor", a), (npcs, sems, arr, ph, waits, flight)))
            elif k == "signal":
                sv = _set(sems, act.sem, sems[act.sem] + act.value)
                out.append((("actor", a), (npcs, sv, arr, ph, waits, flight)))
            elif k == "wait" and sems[act.sem] >= act.value:
                sv = _set(sems, act.sem, sems[act.sem] - act.value) if act.decrement else sems
                out.append((("actor", a), (npcs, sv, arr, ph, waits, flight)))
            elif k == "barrier_wait" and ph[act.bar] > waits[a * self.nb + act.bar]:
                w = _set(waits, a * self.nb + act.bar, waits[a * self.nb + act.bar] + 1)
                out.append((("actor", a), (npcs, sems, arr, ph, w, flight)))
            elif k == "arrive":
                narr, nph = self._arrive(arr, ph, act.bar)
                out.append((("actor", a), (npcs, sems, narr, nph, waits, flight)))
            elif k in ("load", "store"):
                out.append((("actor", a), (npcs, sems, arr, ph, waits, flight | {(a, pcs[a])})))
            elif k == "branch":  # (the body runs only where the value read passes)
                if not _TESTS[act.test](sems[act.sem], act.value):
                    npcs = pcs[:a] + (pcs[a] + 1 + act.n,) + pcs[a + 1 :]
                out.append((("actor", a), (npcs, sems, arr, ph, waits, flight)))
        for a, pc in sorted(flight):
            act = self.p.actions[a][pc]
            narr, nph = self._arrive(arr, ph, act.bar) if act.kind == "load" else (arr, ph)
            out.append((("land", (a, pc)), (pcs, sems, narr, nph, waits, flight - {(a, pc)})))
        return out

    def _stores(self, flight: frozenset, a: int) -> int:
        return sum(1 for b, pc in flight if b == a and self.p.actions[b][pc].kind == "store")

    def _arrive(self, arr: tuple, ph: tuple, b: int) -> tuple[tuple, tuple]:
        if arr[b] + 1 >= self.p.bar_targets[b]:
            return _set(arr, b, 0), _set(ph, b, ph[b] + 1)
        return _set(arr, b, arr[b] + 1), ph

    def name(self, s: State, step: tuple) -> str:
        """A step as a person reads it: "device 1: PATH", or "device 0: PATH lands
        (copy k)" for the landing of the actor's k-th async copy."""
        kind, who = step
        if kind == "actor":
            return f"{self.p.actors[who]}: {self.p.actions[who][s[0][who]].path}"
        a, pc = who
        k = sum(1 for x in self.p.actions[a][:pc] if x.kind in ("load", "store"))
        return f"{self.p.actors[a]}: {self.p.actions[a][pc].path} lands (copy {k})"

    def done(self, s: State) -> bool:
        return all(pc >= len(acts) for pc, acts in zip(s[0], self.p.actions, strict=True))

    def blocked(self, s: State) -> set[str]:
        return {
            f"{self.p.actors[a]}: {act.path}"
            for a in range(self.na)
            if (act := self.action(a, s[0][a])) is not None
        }

    def imbalance(self, s: State) -> set[str]:
        return {f"{self.p.sem_names[i]} = {v}" for i, v in enumerate(s[1]) if v}


def _set(t: tuple, i: int, v: int) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]


def explore(prog: Program, max_states: int = 2_000_000) -> Verdict:
    """Every reachable state of ``prog`` (breadth-first, memoised, so each witness is a
    shortest schedule). Raises ``TooBig`` past ``max_states``: never a partial verdict."""
    m = _Machine(prog)
    verdict = Verdict()
    parent: dict[State, tuple[State, tuple] | None] = {m.initial(): None}
    queue = deque([m.initial()])
    conflicts: dict[tuple[int, int, int, int], bool] = {}

    def schedule(s: State) -> list[str]:
        steps = []
        while (link := parent[s]) is not None:
            s, step = link
            steps.append(m.name(s, step))
        return steps[::-1]

    while queue:
        s = queue.popleft()
        live = []
        for a in range(m.na):
            act = m.action(a, s[0][a])
            if act is not None and act.kind == "access":
                live.append((a, s[0][a], act, m.name(s, ("actor", a))))
        for a, pc in s[5]:
            live.append((a, pc, prog.actions[a][pc], m.name(s, ("land", (a, pc)))))
        # each live access is a different actor's next action or a different copy
        for (a1, p1, x1, n1), (a2, p2, x2, n2) in itertools.combinations(live, 2):
            key = (a1, p1, a2, p2)
            if key not in conflicts:
                conflicts[key] = _conflict(x1, x2)
            if conflicts[key]:
                pair = (min(x1.path, x2.path), max(x1.path, x2.path))
                if pair not in verdict.races:
                    verdict.races.add(pair)
                    verdict.witnesses[" | ".join(pair)] = {
                        "steps": schedule(s),
                        "then": [n1, n2],
                    }
        nxt = m.steps(s)
        if not nxt:
            if m.done(s):
                verdict.imbalance |= m.imbalance(s)
            else:
                verdict.deadlocks |= m.blocked(s)
                verdict.witnesses.setdefault(
                    "deadlock", {"steps": schedule(s), "blocked": sorted(m.blocked(s))}
                )
        for step, t in nxt:
            if t not in parent:
                parent[t] = (s, step)
                if len(parent) > max_states:
                    raise TooBig(f"more than {max_states} states")
                queue.append(t)
    verdict.states = len(parent)
    return verdict


def replay(prog: Program, steps: list[str]) -> tuple[State, list[str]]:
    """Run a witness's named steps; the state reached and the names of the steps then
    possible. Raises ``ValueError`` at a step that cannot be taken there."""
    m = _Machine(prog)
    s = m.initial()
    for want in steps:
        options = {m.name(s, step): t for step, t in m.steps(s)}
        if want not in options:
            raise ValueError(f"cannot take {want!r} here; possible: {sorted(options)}")
        s = options[want]
    return s, sorted(m.name(s, step) for step, _ in m.steps(s))


def live_accesses(prog: Program, s: State) -> list[str]:
    """The names of the accesses next in ``s``: actors' next accesses, copies in flight."""
    m = _Machine(prog)
    names = [
        m.name(s, ("actor", a))
        for a in range(m.na)
        if (act := m.action(a, s[0][a])) is not None and act.kind == "access"
    ]
    return names + [m.name(s, ("land", ap)) for ap in sorted(s[5])]


# ----------------------------------------------------------------------------- naive


def enumerate_traces(prog: Program, max_traces: int = 200_000) -> tuple[Verdict, int]:
    """Every complete trace, one by one (no memo), races by happens-before in each.

    Clocks: one component per actor and per copy put in flight. A signal's clock joins
    its semaphore's; a wait and a read's branch (an acquire) take the semaphore's clock
    (every signal before it: the adds continue the release sequence); a
    barrier phase joins its arrivals' clocks and its waits take them; a copy starts from
    its issuer's clock and its landing arrives with it; ``wait_smem_to_gmem`` takes the
    clocks of the actor's landed stores. Two conflicting accesses race when neither's
    clock is below the other's. Returns the verdict and the number of traces."""
    m = _Machine(prog)
    comps = {("actor", a): a for a in range(m.na)}
    for a, acts in enumerate(prog.actions):
        for pc, act in enumerate(acts):
            if act.kind in ("load", "store"):
                comps[("copy", a, pc)] = len(comps)
    nc = len(comps)
    verdict = Verdict()
    count = 0

    def join(x: tuple, y: tuple) -> tuple:
        return tuple(max(i, j) for i, j in zip(x, y, strict=True))

    def tick(c: tuple, comp: int) -> tuple:
        return _set(c, comp, c[comp] + 1)

    def before(e: tuple, f: tuple) -> bool:  # e = (owner comp, clock, action)
        return e[1][e[0]] <= f[1][e[0]]

    def walk(s: State, clocks: dict, events: list, depth: int) -> None:
        nonlocal count
        nxt = m.steps(s)
        if not nxt:
            count += 1
            if count > max_traces:
                raise TooBig(f"more than {max_traces} traces")
            if m.done(s):
                verdict.imbalance |= m.imbalance(s)
            else:
                verdict.deadlocks |= m.blocked(s)
            for e, f in itertools.combinations(events, 2):
                if e[0] != f[0] and _conflict(e[2], f[2]) and not before(e, f):
                    if not before(f, e):
                        verdict.races.add((min(e[2].path, f[2].path), max(e[2].path, f[2].path)))
            return
        for (kind, who), t in nxt:
            c = dict(clocks)
            ev = list(events)
            if kind == "actor":
                a = who
                act = prog.actions[a][s[0][a]]
                me = tick(c[("actor", a)], a)
                if act.kind == "access":
                    ev.append((a, me, act))
                elif act.kind == "signal":
                    c[("sem", act.sem)] = join(c.get(("sem", act.sem), (0,) * nc), me)
                elif act.kind in ("wait", "branch"):
                    me = join(me, c.get(("sem", act.sem), (0,) * nc))
                elif act.kind == "barrier_wait":
                    k = s[4][a * m.nb + act.bar]
                    me = join(me, c.get(("phase", act.bar, k), (0,) * nc))
                elif act.kind == "arrive":
                    c[("phase", act.bar, s[3][act.bar])] = join(
                        c.get(("phase", act.bar, s[3][act.bar]), (0,) * nc), me
                    )
                elif act.kind in ("load", "store"):
                    cp = comps[("copy", a, s[0][a])]
                    c[("copy", a, s[0][a])] = tick(me, cp)
                    ev.append((cp, c[("copy", a, s[0][a])], act))
                elif act.kind == "store_wait":
                    for key, cc in list(c.items()):
                        if key[0] == "landed" and key[1][0] == a:
                            me = join(me, cc)
                c[("actor", a)] = me
            else:
                a, pc = who
                act = prog.actions[a][pc]
                cc = c[("copy", a, pc)]
                if act.kind == "load":
                    key = ("phase", act.bar, s[3][act.bar])
                    c[key] = join(c.get(key, (0,) * nc), cc)
                else:
                    c[("landed", (a, pc))] = cc
            walk(t, c, ev, depth + 1)

    walk(m.initial(), {("actor", a): (0,) * nc for a in range(m.na)}, [], 0)
    return verdict, count


__all__ = [
    "Action",
    "Program",
    "TooBig",
    "Unsupported",
    "Verdict",
    "compile_scenario",
    "enumerate_traces",
    "evaluate",
    "explore",
    "live_accesses",
    "replay",
]
