"""Fuzz the synchronisation verdict: random small kernels, ``mpmd_lab.check`` against
the exhaustive schedule explorer of ``tests/sync_explorer.py`` (written apart from the
engine).

``python -m bench.fuzz_sync SEED N [KINDS]`` draws N kernels from SEED and prints
per-class counts and the smallest example of each disagreeing class as JSON (and the
names of all of that class). ``KINDS`` (default ``mcn``) picks among the three kinds
of kernel, each drawn equally often:

- **mutant** (``m``): a corpus family (``tests/sync_corpus/make_corpus.py``'s builders
  at a random size and mutation) with 0-3 further random edits of its body: a statement
  dropped, duplicated or swapped with its neighbour, moved into or out of a ``when``, a
  signal's device / increment changed, a wait's value / decrement changed, a
  semaphore's or slice's index changed, a ``when`` condition changed;
- **composition** (``c``): 1-4 devices, 1-2 blocks and/or 2 warpgroups, a few ``when``
  roles (on device, block and warpgroup ids) of a handful of statements each: copies between
  local and remote (``remote_ref``) halves of the outputs, semaphore signals (value,
  device, element) and waits (value, decrement), fills, async loads into SMEM with
  barrier waits, async stores and their waits, barrier arrivals and waits, branches on
  ``pl.semaphore_read``, and short loops (``commit_smem`` before every SMEM -> GMEM
  copy: see below);
- **motifs** (``n``): 1-2 synchronisation patterns that are right as drawn, each on its
  own half of the buffers (a ring send and its receive, the same over a loop with a
  semaphore per round, a fan-in of every device to device 0, a barrier or semaphore
  handshake between warpgroups, a hand-over between blocks on a ``get_global``
  semaphore, a pipelined async load and store), then 0-2 of the mutants' edits:
  near-correct kernels, where a check that misses a schedule says valid.

Only what the explorer models is kept (``Unsupported`` and ``TooBig`` are counted and
skipped), and only kernels the check accepts up to the synchronisation stage (a kernel
the check rejects for another error is counted as ``rejected``). Where the two model the
GPU apart, a kernel is counted as ``models differ`` and not compared: several async
loads of one thread in flight on one barrier beyond its arrivals
(:func:`copies_share_a_phase`). Compositions put ``commit_smem`` before every SMEM ->
GMEM copy (the explorer does not model the async proxy's fence: a thread's SMEM write
before a TMA store without it is a race to the engine, as on the GPU, not to it).

Classes: ``false valid <kind>`` (the explorer finds a race / deadlock / imbalance the
check does not report), ``false alarm <kind>`` (the reverse), ``not judged``
(SYNC_NOT_CHECKED: counted, not compared), ``agree``.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "sync_corpus")]

import make_corpus as mc  # noqa: E402
from sync_explorer import (  # noqa: E402
    Program,
    TooBig,
    Unsupported,
    compile_scenario,
    explore,
)

#: verdict codes of the check -> the explorer's kind
KIND_OF = mc.KIND_OF
KINDS = ("race", "deadlock", "imbalance")
#: codes about synchronisation or its judgement that do not make a kernel "rejected"
SYNC_CODES = {*KIND_OF, "SYNC_NOT_CHECKED", "SYNC_BY_SYMMETRY", "PROGRAM_ID_GPU_INTERP"}

K = 128  # elements per half in compositions
MAX_STATES = 200_000

# ----------------------------------------------------------------------------- mutants


def _family(rng: random.Random) -> dict:
    """A corpus family's scenario at a random size and mutation."""
    pick = rng.randrange(10)
    d = rng.choice((2, 3, 4))
    if pick == 0:
        return mc.ring_all_gather(d, rng.choice(list(mc.AG_MUTATIONS)))
    if pick == 1:
        return mc.ring_reduce_scatter(d, rng.choice(list(mc.RS_MUTATIONS)))
    if pick == 2:
        return mc.exchange_shards(d, rng.choice(list(mc.EX_MUTATIONS)))
    if pick == 3:
        return mc.double_buffer(rng.choice((2, 3)), rng.choice(list(mc.DB_MUTATIONS)), 2)
    if pick == 4:
        d = rng.choice((3, 4))
        target = rng.randrange(d)
        order = list(range(d - 1))
        rng.shuffle(order)
        return mc.partial_wait(d, target, order, rng.choice(("each", "all", "per-sender")))
    if pick == 5:
        return mc.reused_rounds(rng.choice((3, 4)), 2, rng.random() < 0.5)
    if pick == 6:
        return mc.two_purposes(rng.choice((1, 2)), rng.random() < 0.5)
    if pick == 7:
        m = rng.choice(("race", "race-fixed", "deadlock", "deadlock-fixed", "always-deadlock"))
        return mc.competing_waiters(m, mirror=rng.random() < 0.5)
    if pick == 8:
        return mc.async_loads(rng.choice((1, 2)), rng.choice(list(mc.LOAD_MODES)))
    return mc.handshake(rng.choice(list(mc.HANDSHAKE_MODES)))


def _lists(body: list[dict]) -> list[list[dict]]:
    """Every statement list in ``body`` (itself, loop and when bodies)."""
    out = [body]
    for st in body:
        if isinstance(st.get("body"), list):
            out += _lists(st["body"])
    return out


def _stmts(body: list[dict]) -> list[dict]:
    return [st for lst in _lists(body) for st in lst]


DEVICES = ["dev", mc.RIGHT, mc.LEFT, 0, 1, "(dev + 2) % axis_size(dev)"]


def _conds(s: dict) -> list[str]:
    """Conditions on the kernel's own ids (devices, warpgroups, blocks)."""
    out = []
    if s.get("device_mesh"):
        out += ["dev == 0", "dev == 1", "dev > 0", "dev != 1"]
    if s["call"]["programs"][0]["mesh"].get("threads"):
        out += ["wg == 0", "wg == 1"]
    if s["call"]["programs"][0]["mesh"]["grid"].get("b", 1) > 1:
        out += ["b == 0", "b == 1"]
    return out or ["1"]


def _edit(s: dict, rng: random.Random) -> str:
    """One random edit of the scenario's body; what it did."""
    body = s["call"]["programs"][0]["body"]
    lists = [lst for lst in _lists(body) if lst]
    lst = rng.choice(lists)
    i = rng.randrange(len(lst))
    st = lst[i]
    what = rng.randrange(9)
    if what == 0 and "op" in st:
        del lst[i]
        return "drop"
    if what == 1 and i + 1 < len(lst):
        lst[i], lst[i + 1] = lst[i + 1], lst[i]
        return "swap"
    if what == 2 and st.get("op") in ("semaphore_signal", "semaphore_wait", "copy"):
        lst.insert(i, copy.deepcopy(st))
        return "duplicate"
    sigs = [x for x in _stmts(body) if x.get("op") == "semaphore_signal"]
    waits = [x for x in _stmts(body) if x.get("op") == "semaphore_wait"]
    if what == 3 and sigs:
        x = rng.choice(sigs)
        if rng.random() < 0.5 and s.get("device_mesh"):
            x["device"] = rng.choice(DEVICES)
        else:
            x["inc"] = rng.choice((1, 2))
        return "signal"
    if what == 4 and waits:
        x = rng.choice(waits)
        if rng.random() < 0.5:
            x["value"] = rng.choice((1, 2))
        else:
            x["decrement"] = not x.get("decrement", True)
        return "wait"
    if what == 5:
        ats = [
            t
            for x in _stmts(body)
            if "let" in x
            for t in x["transforms"]
            if t["op"] == "at" and len(t["index"]) == 1 and isinstance(t["index"][0], int)
        ]
        if ats:
            t = rng.choice(ats)
            t["index"][0] = max(0, t["index"][0] + rng.choice((-1, 1)))
            return "index"
    if what == 6:
        whens = [x for x in _stmts(body) if x.get("op") == "when"]
        if whens:
            x = rng.choice(whens)
            c = rng.choice(_conds(s))
            x["cond"] = rng.choice([c, f"({x['cond']}) | ({c})", f"({x['cond']}) & ({c})"])
            return "cond"
    if what == 7 and st.get("op") == "when" and st["body"]:
        j = rng.randrange(len(st["body"]))
        moved = st["body"].pop(j)
        lst.insert(i + 1, moved)
        return "out-of-when"
    if what == 8 and st.get("op") not in (None, "when", "loop"):
        lst[i] = {
            "op": "when",
            "cond": rng.choice(_conds(s)),
            "body": [st],
        }
        return "into-when"
    return "none"


def mutant(rng: random.Random) -> dict:
    s = _family(rng)
    edits = [_edit(s, rng) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
    s["name"] = f"mut-{s['name']}" + "".join(f"_{e}" for e in edits if e != "none")
    return s


# ----------------------------------------------------------------------------- compositions


class _Comp:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        shape = rng.choice(("dev", "dev", "dev+wg", "blocks", "dev+blocks", "wg"))
        self.ndev = 1 if shape in ("blocks", "wg") else rng.choice((2, 2, 3, 4))
        self.nwg = 2 if "wg" in shape else 1
        self.nblocks = 2 if "blocks" in shape else 1
        self.bar_arrivals = rng.choice((1, 1, 2))
        self.lets: list[dict] = []
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def device(self) -> Any:
        if self.ndev == 1:
            return 0
        return self.r.choice([mc.RIGHT, mc.LEFT, 0, 1 if self.ndev > 1 else 0, "dev"])

    def half(self, ref: str) -> str:
        """A half of ``ref`` (fixed, or the block's); a let."""
        n = self.name("v")
        h = self.r.choice((0, 1, 1))
        if self.nblocks > 1 and self.r.random() < 0.3:
            self.lets.append(mc.let(n, ref, mc.at({"block": "b", "size": K})))
        else:
            self.lets.append(mc.let(n, ref, mc.at(mc.ds(h * K, K))))
        return n

    def gmem(self, write: bool) -> str:
        ref = self.r.choice(("out", "out", "res") if write else ("out", "x_ref"))
        if self.ndev > 1 and ref == "out" and self.r.random() < 0.6:
            n = self.name("peer")
            self.lets.append(mc.let(n, "out", mc.remote(self.device())))
            ref = n
        return self.half(ref)

    def sem(self) -> str:
        n = self.name("s")
        self.lets.append(mc.let(n, "sems", mc.at(self.r.choice((0, 0, 1)))))
        return n

    def bar(self) -> str:
        n = self.name("bar")
        self.lets.append(mc.let(n, "bars", mc.at(self.r.choice((0, 0, 1)))))
        return n

    def stmt(self, depth: int = 0) -> list[dict]:
        r = self.r
        k = r.randrange(12)
        if k <= 2:
            return [mc.copy_(self.gmem(False), self.gmem(True))]
        if k == 3:
            dev = self.device() if self.ndev > 1 else None
            return [mc.signal(self.sem(), dev, r.choice((1, 1, 2)))]
        if k == 4:
            return [mc.wait(self.sem(), r.choice((1, 1, 2)), r.random() < 0.85)]
        if k == 5:
            return [{"op": "fill", "dst": self.gmem(True), "value": 1.0}]
        if k == 6:
            b = self.bar()
            out = [
                {
                    "op": "copy_gmem_to_smem",
                    "src": self.gmem(False),
                    "dst": self.half("smem"),
                    "barrier": b,
                }
            ]
            if r.random() < 0.7:
                out.append({"op": "barrier_wait", "barrier": b})
            if r.random() < 0.7:
                out.append(mc.copy_(self.half("smem"), self.gmem(True)))
            return out
        if k == 7:
            # (commit_smem first: the explorer does not model the async proxy's fence)
            out = [
                {"op": "commit_smem"},
                {"op": "copy_smem_to_gmem", "src": self.half("smem"), "dst": self.gmem(True)},
            ]
            if r.random() < 0.7:
                out.append({"op": "wait_smem_to_gmem", "n": 0})
            return out
        if k == 8:
            return [{"op": r.choice(("barrier_arrive", "barrier_wait")), "barrier": self.bar()}]
        if k == 9:
            return [{"op": "fill", "dst": self.half("smem"), "value": 2.0}]
        if k == 10 and depth == 0:
            body = self.stmt(1) + (self.stmt(1) if r.random() < 0.5 else [])
            return [{"op": "loop", "var": "i", "start": 0, "stop": 2, "body": body}]
        if k == 11 and depth == 0:
            s = self.sem()
            body = self.stmt(1)
            return [mc.when(f"pl.semaphore_read({s}) >= {r.choice((1, 2))}", *body)]
        return [mc.copy_(self.gmem(False), self.gmem(True))]

    def cond(self) -> str:
        parts = []
        if self.ndev > 1 and self.r.random() < 0.8:
            parts.append(self.r.choice([f"dev == {d}" for d in range(self.ndev)] + ["dev > 0"]))
        if self.nwg > 1 and self.r.random() < 0.8:
            parts.append(f"wg == {self.r.randrange(2)}")
        if self.nblocks > 1 and self.r.random() < 0.5:
            parts.append(f"b == {self.r.randrange(2)}")
        if not parts:
            return "1"
        return " & ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]

    def build(self) -> dict:
        r = self.r
        roles = []
        for _ in range(r.choice((1, 2, 2, 3))):
            stmts = [st for _ in range(r.choice((1, 2, 2, 3, 4))) for st in self.stmt()]
            roles.append(mc.when(self.cond(), *stmts) if r.random() < 0.85 else stmts)
        body: list[dict] = []
        for role in roles:
            body += role if isinstance(role, list) else [role]
        s = mc.scenario(
            "comp",
            "a random composition",
            self.ndev if self.ndev > 1 else None,
            {"x": [2 * K]},
            [("x", "x_ref")],
            {"out": [2 * K], "res": [2 * K]},
            {
                "sems": mc.sems(2),
                "smem": {"shape": [2 * K], "dtype": "float32", "memory_space": "SMEM"},
                "bars": {"kind": "barrier", "num_barriers": 2, "num_arrivals": self.bar_arrivals},
            },
            self.lets + body,
            threads=self.nwg if self.nwg > 1 else None,
        )
        s["call"]["programs"][0]["mesh"]["grid"] = {"b": self.nblocks}
        return s


def composition(rng: random.Random) -> dict:
    return _Comp(rng).build()


class _Motifs(_Comp):
    """A kernel of synchronisation motifs that are right as drawn (a send and its
    receive, a handshake, a pipelined load, a fan-in), each on its own half of the
    buffers, then 0-2 random edits (:func:`_edit`): near-correct kernels, where a check
    that misses one schedule says valid."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.global_sems = self.nblocks > 1 and rng.random() < 0.4
        self.nsems = 4

    def sem_at(self, e: Any) -> str:
        n = self.name("s")
        self.lets.append(mc.let(n, "sems", mc.at(e)))
        return n

    def part(self, ref: str, h: Any) -> str:
        n = self.name("v")
        self.lets.append(
            mc.let(n, ref, mc.at(mc.ds(f"{h} * {K}" if isinstance(h, str) else h * K, K)))
        )
        return n

    def block_part(self, ref: str, h: int) -> str:
        """The block's own half of ``ref`` (``h`` unused: the motif takes both halves)."""
        n = self.name("v")
        self.lets.append(mc.let(n, ref, mc.at({"block": "b", "size": K})))
        return n

    def motif(self, h: int) -> list[dict]:
        r = self.r
        kinds = []
        if self.ndev > 1:
            kinds += ["ring", "fan-in", "ring-loop"]
        if self.nwg > 1:
            kinds += ["wg-barrier", "wg-sem", "wg-loop-barrier"]
        if self.ndev > 1 or self.nwg > 1:
            kinds += ["read-poll"]
        if self.nblocks > 1 and self.global_sems:
            kinds += ["blocks"]
        kinds += ["pipeline"]
        kind = r.choice(kinds)
        e = r.randrange(self.nsems)
        wg0 = "wg == 0" if self.nwg > 1 else ""
        wg1 = "wg == 1" if self.nwg > 1 else ""

        def on(*conds: str) -> str:
            """The conjunction of the non-empty conditions ("1": none)."""
            cs = [c for c in conds if c]
            if len(cs) > 1:
                return " & ".join(f"({c})" for c in cs)
            return cs[0] if cs else "1"

        if kind == "ring":
            peer = self.name("peer")
            self.lets.append(mc.let(peer, "out", mc.remote(mc.RIGHT)))
            s = self.sem_at(e)
            part = self.part
            if self.nblocks > 1 and not self.global_sems and r.random() < 0.7:
                part = self.block_part  # (each block its own half, its own semaphore)
            send = [mc.copy_(part("x_ref", h), part(peer, h)), mc.signal(s, mc.RIGHT)]
            recv = [mc.wait(s), mc.copy_(part("out", h), part("res", h))]
            if self.nwg > 1 and r.random() < 0.5:
                return [mc.when(wg0, *send), mc.when(wg1, *recv)]
            return [mc.when(wg0, *send, *recv)] if wg0 else send + recv
        if kind == "ring-loop":
            peer = self.name("peer")
            self.lets.append(mc.let(peer, "out", mc.remote(mc.RIGHT)))
            loop_sem = self.name("ls")
            body = [
                mc.let(loop_sem, "sems", mc.at("i")),
                mc.copy_(self.part("x_ref", h), self.part(peer, h)),
                mc.signal(loop_sem, mc.RIGHT),
                mc.wait(loop_sem),
                mc.copy_(self.part("out", h), self.part("res", h)),
            ]
            loop = {"op": "loop", "var": "i", "start": 0, "stop": 2, "body": body}
            return [mc.when(wg0, loop)] if wg0 else [loop]
        if kind == "fan-in":
            peer = self.name("peer")
            self.lets.append(mc.let(peer, "out", mc.remote(0)))
            s = self.sem_at(e)
            n = self.ndev - 1
            return [
                mc.when(
                    on("dev > 0", wg0),
                    mc.copy_(self.part("x_ref", h), self.part(peer, h)),
                    mc.signal(s, 0),
                ),
                mc.when(
                    on("dev == 0", wg0),
                    mc.wait(s, n),
                    mc.copy_(self.part("out", h), self.part("res", h)),
                ),
            ]
        if kind == "wg-barrier":
            b = self.name("bar")
            self.lets.append(mc.let(b, "bars", mc.at(r.randrange(2))))
            sm = self.part("smem", h)
            return [
                mc.when(
                    wg0,
                    {"op": "fill", "dst": sm, "value": 1.0},
                    {"op": "barrier_arrive", "barrier": b},
                ),
                mc.when(
                    wg1, {"op": "barrier_wait", "barrier": b}, mc.copy_(sm, self.part("out", h))
                ),
            ]
        if kind == "wg-loop-barrier":
            # warpgroup 0 fills, warpgroup 1 reads, twice; the second fill waits for the
            # first read (back-pressure on a second barrier)
            full, free = self.name("bar"), self.name("bar")
            self.lets += [mc.let(full, "bars", mc.at(0)), mc.let(free, "bars", mc.at(1))]
            sm = self.part("smem", h)
            produce = [
                mc.when("i > 0", {"op": "barrier_wait", "barrier": free}),
                {"op": "fill", "dst": sm, "value": 1.0},
                {"op": "barrier_arrive", "barrier": full},
            ]
            consume = [
                {"op": "barrier_wait", "barrier": full},
                mc.copy_(sm, self.part("out", h)),
                {"op": "barrier_arrive", "barrier": free},
            ]
            return [
                mc.when(wg0, {"op": "loop", "var": "i", "start": 0, "stop": 2, "body": produce}),
                mc.when(wg1, {"op": "loop", "var": "i", "start": 0, "stop": 2, "body": consume}),
            ]
        if kind == "read-poll":
            # the receiver reads the semaphore, copies only when the data came (the read
            # an acquire), then takes the signal off
            s = self.sem_at(e)
            if self.ndev > 1:
                peer = self.name("peer")
                self.lets.append(mc.let(peer, "out", mc.remote(0)))
                send_on, recv_on, dst, to = on("dev == 1", wg0), on("dev == 0", wg0), peer, 0
            else:
                send_on, recv_on, dst, to = wg0, wg1, "out", None
            return [
                mc.when(
                    send_on, mc.copy_(self.part("x_ref", h), self.part(dst, h)), mc.signal(s, to)
                ),
                mc.when(
                    recv_on,
                    mc.when(
                        f"pl.semaphore_read({s}) >= 1",
                        mc.copy_(self.part("out", h), self.part("res", h)),
                    ),
                    mc.wait(s),
                ),
            ]
        if kind == "wg-sem":
            s = self.sem_at(e)
            return [
                mc.when(
                    wg0, {"op": "fill", "dst": self.part("out", h), "value": 1.0}, mc.signal(s)
                ),
                mc.when(wg1, mc.wait(s), mc.copy_(self.part("out", h), self.part("res", h))),
            ]
        if kind == "blocks":
            s = self.sem_at(e)
            return [
                mc.when(
                    "b == 0", {"op": "fill", "dst": self.part("out", h), "value": 1.0}, mc.signal(s)
                ),
                mc.when("b == 1", mc.wait(s), mc.copy_(self.part("out", h), self.part("res", h))),
            ]
        # a pipelined load: into SMEM, waited, used, stored back
        b = self.name("bar")
        self.lets.append(mc.let(b, "bars", mc.at(r.randrange(2))))
        sm = self.part("smem", h)
        out = [
            {"op": "copy_gmem_to_smem", "src": self.part("x_ref", h), "dst": sm, "barrier": b},
            {"op": "barrier_wait", "barrier": b},
            mc.copy_(sm, self.part("res", h)),
            {"op": "commit_smem"},
            {"op": "copy_smem_to_gmem", "src": sm, "dst": self.part("out", h)},
            {"op": "wait_smem_to_gmem", "n": 0},
        ]
        cond = on("b == 0" if self.nblocks > 1 else "", wg0)
        return [mc.when(cond, *out)] if cond != "1" else out

    def build(self) -> dict:
        r = self.r
        self.bar_arrivals = 1
        body: list[dict] = []
        for h in range(r.choice((1, 2, 2))):
            body += self.motif(h)
        s = mc.scenario(
            "motifs",
            "synchronisation motifs",
            self.ndev if self.ndev > 1 else None,
            {"x": [2 * K]},
            [("x", "x_ref")],
            {"out": [2 * K], "res": [2 * K]},
            {
                "sems": {
                    **mc.sems(self.nsems),
                    **({"alloc": "get_global"} if self.global_sems else {}),
                },
                "smem": {"shape": [2 * K], "dtype": "float32", "memory_space": "SMEM"},
                "bars": {"kind": "barrier", "num_barriers": 2, "num_arrivals": 1},
            },
            self.lets + body,
            threads=self.nwg if self.nwg > 1 else None,
        )
        s["call"]["programs"][0]["mesh"]["grid"] = {"b": self.nblocks}
        edits = [_edit(s, r) for _ in range(r.choice((0, 1, 1, 2)))]
        s["name"] = "motifs" + "".join(f"_{e}" for e in edits if e != "none")
        return s


def motifs(rng: random.Random) -> dict:
    return _Motifs(rng).build()


def draw(rng: random.Random, kinds: str = "mcn") -> dict:
    """One kernel: a mutant (``m``), a composition (``c``) or motifs (``n``)."""
    kind = rng.choice(kinds)
    return {"m": mutant, "c": composition, "n": motifs}[kind](rng)


# ----------------------------------------------------------------------------- judging


def copies_share_a_phase(prog: Program) -> bool:
    """Whether a thread has more async loads in flight on one barrier (issued, not yet
    waited for) than the barrier's arrivals: where the engine and the explorer model
    barriers apart. The engine takes a thread's copies issued back to back to land
    together, in one phase (``arrive_expect_tx``: the bytes add up, as JAX's kernels
    rely on); the explorer takes each landing for one arrival, in any order."""
    for acts in prog.actions:
        flight: dict[int, int] = {}
        for act in acts:
            if act.kind == "load":
                flight[act.bar] = flight.get(act.bar, 0) + 1
                if flight[act.bar] > prog.bar_targets[act.bar]:
                    return True
            elif act.kind == "barrier_wait":
                flight[act.bar] = 0
    return False


def judge(s: dict) -> dict[str, Any]:
    """The explorer's and the check's verdicts on ``s``; ``skip`` says why there is no
    comparison (unsupported, too big, rejected)."""
    import mpmd_lab

    try:
        prog = compile_scenario(s)
        if copies_share_a_phase(prog):
            return {"skip": "models differ"}
        truth = explore(prog, max_states=MAX_STATES).label()["kinds"]
    except Unsupported as e:
        return {"skip": "unsupported", "why": str(e)}
    except TooBig:
        return {"skip": "too big"}
    except (KeyError, IndexError, ValueError, TypeError) as e:
        return {"skip": "unsupported", "why": f"{type(e).__name__}: {e}"}
    try:
        diags = mpmd_lab.check(s)
    except mpmd_lab.ScenarioError as e:
        return {"skip": "rejected", "why": str(e)}
    codes = {d.code for d in diags}
    other = sorted(d.code for d in diags if d.is_error and d.code not in SYNC_CODES)
    if other:
        return {"skip": "rejected", "why": other[0]}
    said = {KIND_OF[c] for c in codes if c in KIND_OF}
    return {
        "truth": set(truth) - {"clean"},
        "said": said,
        "not_checked": "SYNC_NOT_CHECKED" in codes,
    }


def classes(j: dict[str, Any]) -> list[str]:
    if "skip" in j:
        return [j["skip"]]
    if j["not_checked"]:
        return ["not judged"]
    out = [f"false valid {k}" for k in KINDS if k in j["truth"] and k not in j["said"]]
    out += [f"false alarm {k}" for k in KINDS if k in j["said"] and k not in j["truth"]]
    return out or ["agree"]


def run(seed: int, n: int, show: bool = True, kinds: str = "mcn") -> dict[str, int]:
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    examples: dict[str, tuple[int, dict, dict]] = {}
    names: dict[str, list[str]] = {}
    for i in range(n):
        s = draw(rng, kinds)
        s["name"] = f"fz{seed}-{i}-{s['name']}"
        j = judge(s)
        for c in classes(j):
            counts[c] = counts.get(c, 0) + 1
            if c.startswith("false"):
                names.setdefault(c, []).append(s["name"])
                size = len(json.dumps(s))
                if c not in examples or size < examples[c][0]:
                    examples[c] = (size, s, j)
    if show:
        print(json.dumps(dict(sorted(counts.items())), indent=1))
        for c, (_, s, j) in sorted(examples.items()):
            truth, said = sorted(j["truth"]) or ["clean"], sorted(j["said"]) or ["clean"]
            print(f"\n=== {c}: explorer {truth}, check {said}")
            print(json.dumps(s))
            print("all:", " ".join(names[c]))
    return counts


def main(argv: list[str]) -> None:
    seed = int(argv[0]) if argv else 0
    n = int(argv[1]) if len(argv) > 1 else 200
    run(seed, n, kinds=argv[2] if len(argv) > 2 else "mcn")


if __name__ == "__main__":
    main(sys.argv[1:])
