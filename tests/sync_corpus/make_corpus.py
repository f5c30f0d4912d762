"""Write the labelled synchronisation corpus: ``python tests/sync_corpus/make_corpus.py``.

Mutations of the gallery's collectives at 2-4 devices (ring all-gather, ring
reduce-scatter, exchange-shards, ring-shift, collective matmul, a double-buffered ring)
and the schedule-dependent patterns (a partial wait with several signallers, one
semaphore reused across rounds by several senders, two warpgroups competing for one
semaphore, async loads assumed to land in order, a warpgroup barrier handshake), each
with its correct variant. Every file's label (race / deadlock / imbalance / clean, and
which statements) comes from ``tests/sync_explorer.py`` over every schedule and goes in
``labels.json``.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sync_explorer import compile_scenario, explore  # noqa: E402

K = 128  # elements per chunk
SCHEMA = "mpmd-lab/scenario@1"
#: the check's verdict codes (``mpmd_lab.check``) -> a label's kind (the explorer's)
KIND_OF = {
    "RACE": "race",
    "RACE_DETECTED": "race",
    "DEADLOCK_SEMAPHORE": "deadlock",
    "DEADLOCK_BARRIER": "deadlock",
    "SEMAPHORE_IMBALANCE": "imbalance",
}


def scenario(
    name: str,
    description: str,
    devices: int | None,
    buffers: dict[str, Any],
    args: list[tuple[str, str]],
    outputs: dict[str, list[int]],
    scratch: dict[str, Any],
    body: list[dict],
    threads: int | None = None,
    entry: str = "plgpu.kernel",
    dtype: str = "float32",
) -> dict[str, Any]:
    s: dict[str, Any] = {"schema": SCHEMA, "name": name, "description": description}
    if devices:
        s["device_mesh"] = {"dev": devices}
    s["buffers"] = {
        b: {"shape": shape, "dtype": dtype, "init": "iota"} for b, shape in buffers.items()
    }
    call: dict[str, Any] = {
        "entry": entry,
        "args": [{"buffer": b, "param": p} for b, p in args],
        "outputs": {o: {"shape": shape, "dtype": dtype} for o, shape in outputs.items()},
    }
    if scratch:
        call["scratch"] = scratch
    call["programs"] = [
        {
            "mesh": {
                "grid": {"b": 1},
                "cluster": {},
                "threads": {"name": "wg", "count": threads} if threads else None,
            },
            "body": body,
        }
    ]
    s["call"] = call
    s["run"] = {"interpret": "gpu", "detect_races": False}
    return s


def let(name: str, ref: str, *transforms: dict) -> dict:
    return {"let": name, "ref": ref, "transforms": list(transforms)}


def at(*index: Any) -> dict:
    return {"op": "at", "index": list(index)}


def ds(start: Any, size: int) -> dict:
    return {"ds": [start, size]}


def remote(device: Any) -> dict:
    return {"op": "remote_ref", "device": device}


def signal(sem: str, device: Any = None, inc: int = 1) -> dict:
    st: dict[str, Any] = {"op": "semaphore_signal", "sem": sem}
    if inc != 1:
        st["inc"] = inc
    if device is not None:
        st["device"] = device
    return st


def wait(sem: str, value: Any = 1, decrement: bool = True) -> dict:
    st: dict[str, Any] = {"op": "semaphore_wait", "sem": sem}
    if value != 1:
        st["value"] = value
    if not decrement:
        st["decrement"] = False
    return st


def copy_(src: str, dst: str) -> dict:
    return {"op": "copy", "src": src, "dst": dst}


def when(cond: str, *body: dict) -> dict:
    return {"op": "when", "cond": cond, "body": list(body)}


def sems(n: int | None = None) -> dict:
    return {"kind": "semaphore", "shape": [n]} if n else {"kind": "semaphore"}


RIGHT = "(dev + 1) % axis_size(dev)"
LEFT = "(dev + axis_size(dev) - 1) % axis_size(dev)"

# ----------------------------------------------------------------------------- the rings

AG_MUTATIONS = {
    "correct": "the gallery's ring all-gather",
    "no-wait": "the loop's semaphore_wait dropped",
    "no-signal": "the loop's semaphore_signal dropped",
    "signal-left": "the signal misdirected to the left neighbour",
    "signal-self": "the signal sent to this device instead of the right neighbour",
    "wait-2": "the wait asks for 2 where one signal comes",
    "inc-2": "the signal adds 2 where the wait takes 1",
    "one-sem": "one semaphore reused for every round (one sender: still ordered)",
    "mismatch-sem": "signals go to sems[0], waits read sems[i]",
    "wait-first": "the wait moved before the signal",
    "signal-first": "the signal moved before the copy it publishes",
    "chunk-off-by-one": "the chunk sent is one step ahead of the one received",
    "right-off-by-one": "the copy goes to dev + 2 while the signal goes to dev + 1",
    "no-decrement": "the wait leaves its value (decrement=False)",
}


def ring_all_gather(d: int, mut: str) -> dict:
    chunk = "(dev + axis_size(dev) - i) % axis_size(dev)"
    if mut == "chunk-off-by-one":
        chunk = "(dev + axis_size(dev) - i - 1) % axis_size(dev)"
    target = "(dev + 2) % axis_size(dev)" if mut == "right-off-by-one" else RIGHT
    sent, arrived = "i", "i"
    if mut == "one-sem":
        sent = arrived = 0
    if mut == "mismatch-sem":
        sent = 0
    dest = {"signal-left": LEFT, "signal-self": None}.get(mut, RIGHT)
    sig = signal("sent", dest, inc=2 if mut == "inc-2" else 1)
    wt = wait("arrived", 2 if mut == "wait-2" else 1, decrement=mut != "no-decrement")
    cp = copy_("chunk", "to_right")
    steps = [cp, let("sent", "sems", at(sent)), sig, let("arrived", "sems", at(arrived)), wt]
    if mut == "no-wait":
        steps.remove(wt)
    if mut == "no-signal":
        steps.remove(sig)
    if mut == "wait-first":
        steps = [cp, steps[3], wt, steps[1], sig]
    if mut == "signal-first":
        steps = [steps[1], sig, cp, steps[3], wt]
    body = [
        let("mine", "out", at(ds(f"dev * {K}", K))),
        copy_("x_ref", "mine"),
        let("right_out", "out", remote(target)),
        {
            "op": "loop",
            "var": "i",
            "start": 0,
            "stop": "axis_size(dev) - 1",
            "via": "fori_loop",
            "body": [
                let("chunk", "out", at(ds(f"{chunk} * {K}", K))),
                let("to_right", "right_out", at(ds(f"{chunk} * {K}", K))),
                *steps,
            ],
        },
    ]
    return scenario(
        f"ag{d}-{mut}",
        f"ring all-gather over {d} devices: {AG_MUTATIONS[mut]}",
        d,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [d * K]},
        {"sems": sems(d - 1)},
        body,
    )


RS_MUTATIONS = {
    "correct": "the gallery's ring reduce-scatter",
    "no-wait": "every semaphore_wait dropped",
    "no-loop-wait": "the loop's semaphore_wait dropped",
    "no-signal": "the first semaphore_signal dropped",
    "signal-left": "the signals misdirected to the left neighbour",
    "wait-2": "the first wait asks for 2",
    "one-sem": "one semaphore for every step (one sender: still ordered)",
    "wait-first": "each wait moved before its signal",
    "signal-first": "each signal moved before the write it publishes",
    "slot-off-by-one": "each step adds recv[s] (not yet received) instead of recv[s - 1]",
    "no-decrement": "the waits leave their value (decrement=False)",
}


def ring_reduce_scatter(d: int, mut: str) -> dict:
    dest = LEFT if mut == "signal-left" else RIGHT

    def sem_at(i: Any) -> Any:
        return 0 if mut == "one-sem" else i

    def step(write: dict, sem: str, first: bool) -> list[dict]:
        sig = signal(sem, dest)
        wt = wait(sem, 2 if (mut == "wait-2" and first) else 1, decrement=mut != "no-decrement")
        out = [write, sig, wt]
        if mut == "no-wait" or (mut == "no-loop-wait" and not first):
            out.remove(wt)
        if mut == "no-signal" and first:
            out.remove(sig)
        if mut == "wait-first":
            out = [write, wt, sig]
        if mut == "signal-first":
            out = [sig, write, wt]
        return out

    partial = "s" if mut == "slot-off-by-one" else "s - 1"
    body = [
        let("right_recv", "recv", remote(RIGHT)),
        let("first", "x_ref", at(ds(f"(dev - 1) % axis_size(dev) * {K}", K))),
        let("slot0", "right_recv", at(0)),
        let("sem0", "sems", at(sem_at(0))),
        *step(copy_("first", "slot0"), "sem0", True),
        {
            "op": "loop",
            "var": "s",
            "start": 1,
            "stop": "axis_size(dev) - 1",
            "via": "fori_loop",
            "body": [
                let("piece", "x_ref", at(ds(f"(dev - s - 1) % axis_size(dev) * {K}", K))),
                let("partial", "recv", at(partial)),
                let("slot", "right_recv", at("s")),
                let("sem", "sems", at(sem_at("s"))),
                *step({"op": "add", "dst": "slot", "lhs": "partial", "rhs": "piece"}, "sem", False),
            ],
        },
        let("last", "recv", at("axis_size(dev) - 2")),
        let("own", "x_ref", at(ds(f"dev * {K}", K))),
        {"op": "add", "dst": "out", "lhs": "last", "rhs": "own"},
    ]
    return scenario(
        f"rs{d}-{mut}",
        f"ring reduce-scatter over {d} devices: {RS_MUTATIONS[mut]}",
        d,
        {"x": [d * K]},
        [("x", "x_ref")],
        {"out": [K], "recv": [max(d - 1, 1), K]},
        {"sems": sems(max(d - 1, 1))},
        body,
    )


EX_MUTATIONS = {
    "correct": "exchange-shards, then each device overwrites its x once its reader is done",
    "no-done-wait": "the 'done' wait dropped: x overwritten while the left neighbour reads it",
    "no-done-signal": "the 'done' signal dropped",
    "done-wrong-way": "'done' signalled to the left neighbour instead of the right",
    "no-ready-wait": "the 'ready' wait dropped (x is not written before: still clean)",
    "no-ready-signal": "the 'ready' signal dropped",
    "ready-wait-2": "the 'ready' wait asks for 2",
    "done-inc-2": "'done' adds 2",
    "done-no-decrement": "the 'done' wait leaves its value (decrement=False)",
}


def exchange_shards(d: int, mut: str) -> dict:
    ready_sig = signal("ready", LEFT)
    ready_wait = wait("ready", 2 if mut == "ready-wait-2" else 1)
    done_sig = signal(
        "done", LEFT if mut == "done-wrong-way" else RIGHT, 2 if mut == "done-inc-2" else 1
    )
    done_wait = wait("done", decrement=mut != "done-no-decrement")
    body = [
        ready_sig,
        ready_wait,
        let("right_x", "x_ref", remote(RIGHT)),
        copy_("right_x", "out"),
        done_sig,
        done_wait,
        {"op": "fill", "dst": "x_ref", "value": 0.0},
    ]
    drop = {
        "no-done-wait": done_wait,
        "no-done-signal": done_sig,
        "no-ready-wait": ready_wait,
        "no-ready-signal": ready_sig,
    }
    if mut in drop:
        body.remove(drop[mut])
    return scenario(
        f"ex{d}-{mut}",
        f"exchange over {d} devices: {EX_MUTATIONS[mut]}",
        d,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {"ready": sems(), "done": sems()},
        body,
    )


SHIFT_TARGETS = {
    "right": ({"dev": {"offset": 1}}, "each device writes x into out on its right neighbour"),
    "all-to-0": (0, "every device writes x into device 0's out"),
    "self": ("dev", "each device writes its own out"),
    "two-right": ("(dev + 2) % axis_size(dev)", "each device writes out two to its right"),
}


def ring_shift(d: int, mut: str) -> dict:
    device, what = SHIFT_TARGETS[mut]
    return scenario(
        f"shift{d}-{mut}",
        f"ring shift over {d} devices: {what}",
        d,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {},
        [let("p", "out", remote(device)), copy_("x_ref", "p")],
        entry="pl.kernel",
    )


DB_MUTATIONS = {
    "ack": "two receive buffers, the receiver acks each before the sender reuses it",
    "no-ack": "two receive buffers reused every other round without an ack",
    "ack-never-sent": "the sender waits for acks nobody sends",
    "one-buffer-ack": "one receive buffer, acked every round",
    "one-buffer-no-ack": "one receive buffer reused every round without an ack",
}


def double_buffer(d: int, mut: str, rounds: int = 3) -> dict:
    nbuf = 1 if mut.startswith("one-buffer") else 2
    acked = mut in ("ack", "one-buffer-ack", "ack-never-sent")
    body: list[dict] = [let("right_buf", "buf", remote(RIGHT))]
    for r in range(rounds):
        slot = r % nbuf
        if acked and r >= nbuf:
            body += [let(f"ack{r}", "acks", at(slot)), wait(f"ack{r}")]
        body += [
            let(f"src{r}", "x_ref", at(ds(r * K, K))),
            let(f"to{r}", "right_buf", at(slot)),
            copy_(f"src{r}", f"to{r}"),
            let(f"full{r}", "full", at(slot)),
            signal(f"full{r}", RIGHT),
            wait(f"full{r}"),
            let(f"mine{r}", "buf", at(slot)),
            let(f"res{r}", "out", at(r)),
            copy_(f"mine{r}", f"res{r}"),
        ]
        if acked and mut != "ack-never-sent" and r + nbuf < rounds:
            body += [let(f"give{r}", "acks", at(slot)), signal(f"give{r}", LEFT)]
    return scenario(
        f"db{d}-{mut}",
        f"double-buffered ring over {d} devices, {rounds} rounds: {DB_MUTATIONS[mut]}",
        d,
        {"x": [rounds * K]},
        [("x", "x_ref")],
        {"out": [rounds, K], "buf": [nbuf, K]},
        {"full": sems(nbuf), "acks": sems(nbuf)},
        body,
    )


CM_MUTATIONS = {
    "correct": "the gallery's collective matmul",
    "no-barrier-wait": "the loop's barrier_wait dropped: the dot reads a_smem while it loads",
    "no-store-wait": "the loop's wait_smem_to_gmem dropped: a_smem reloaded while it is sent",
    "no-sem-wait": "the loop's semaphore_wait dropped",
    "no-first-signal": "the first semaphore_signal dropped",
}


def collective_matmul(d: int, mut: str) -> dict:
    gallery = json.loads((HERE.parents[1] / "toolkit/gallery/collective-matmul.json").read_text())
    s = copy.deepcopy(gallery)
    s["name"] = f"cm{d}-{mut}"
    s["description"] = f"collective matmul over {d} devices: {CM_MUTATIONS[mut]}"
    s["device_mesh"] = {"dev": d}
    call = s["call"]
    call["outputs"]["out"]["shape"] = [64 * d, 128]
    call["outputs"]["recv"]["shape"] = [d - 1, 64, 64]
    body = call["programs"][0]["body"]
    loop = next(st for st in body if st.get("op") == "loop")
    inner = next(st for st in loop["body"] if st.get("op") == "when")["body"]
    if mut == "no-barrier-wait":
        loop["body"] = [st for st in loop["body"] if st.get("op") != "barrier_wait"]
    if mut == "no-store-wait":
        inner[:] = [st for st in inner if st.get("op") != "wait_smem_to_gmem"]
    if mut == "no-sem-wait":
        inner[:] = [st for st in inner if st.get("op") != "semaphore_wait"]
    if mut == "no-first-signal":
        body[:] = [st for st in body if st.get("op") != "semaphore_signal"]
    return s


# ----------------------------------------------------------------------------- schedules


def partial_wait(d: int, target: int, order: list[int], mode: str) -> dict:
    """Devices other than ``target`` each write their slot of the target's ``out``, then
    signal it; the target reads the slots in ``order``. ``mode``: "each" (wait 1 before
    each slot: racy whichever slot comes first), "all" (wait for every signal first),
    "per-sender" (a semaphore per sender)."""
    senders = [i for i in range(d) if i != target]
    n = len(senders)
    body: list[dict] = [let("dst", "out", remote(target))]
    for k, snd in enumerate(senders):
        sem = "sems" if mode != "per-sender" else f"s{k}"
        if mode == "per-sender":
            body.append(let(f"s{k}", "sems_each", at(k)))
        body.append(
            when(
                f"dev == {snd}",
                let(f"slot{k}", "dst", at(ds(k * K, K))),
                copy_("x_ref", f"slot{k}"),
                signal(sem, target),
            )
        )
    reads: list[dict] = []
    if mode == "all":
        reads.append(wait("sems", n))
    for k in order:
        if mode == "each":
            reads.append(wait("sems"))
        if mode == "per-sender":
            reads.append(wait(f"s{k}"))
        reads += [
            let(f"part{k}", "out", at(ds(k * K, K))),
            let(f"keep{k}", "res", at(ds(k * K, K))),
            copy_(f"part{k}", f"keep{k}"),
        ]
    body.append(when(f"dev == {target}", *reads))
    name = f"pw{d}-t{target}-{mode}-{''.join(map(str, order))}"
    return scenario(
        name,
        f"{n} devices write their part of device {target}'s out and signal one semaphore; "
        f"it reads the parts in order {order}, waiting "
        + {
            "each": "for 1 before each part (a partial wait)",
            "all": f"for {n} first",
            "per-sender": "on each sender's own semaphore",
        }[mode],
        d,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [n * K], "res": [n * K]},
        {"sems": sems(), "sems_each": sems(n)},
        body,
    )


def reused_rounds(d: int, rounds: int, per_round: bool) -> dict:
    """Devices 1..d-1 each write their slot of device 0's row ``r`` and signal; device 0
    waits for all of a round's signals, then reads the row. One semaphore for every
    round lets a fast sender's next-round signal stand in for a slow one's."""
    n = d - 1
    body: list[dict] = [let("dst", "out", remote(0))]
    for r in range(rounds):
        sem = f"r{r}" if per_round else "one"
        if per_round:
            body.append(let(sem, "sems", at(r)))
        body.append(
            when(
                "dev > 0",
                let(f"slot{r}", "dst", at(r, ds(f"(dev - 1) * {K}", K))),
                copy_("x_ref", f"slot{r}"),
                signal(sem, 0),
            )
        )
    reads: list[dict] = []
    for r in range(rounds):
        sem = f"r{r}" if per_round else "one"
        reads += [
            wait(sem, n),
            let(f"row{r}", "out", at(r)),
            let(f"keep{r}", "res", at(r)),
            copy_(f"row{r}", f"keep{r}"),
        ]
    body.append(when("dev == 0", *reads))
    body.insert(0, let("one", "sems", at(0)))
    kind = "a semaphore per round" if per_round else "one semaphore for every round"
    return scenario(
        f"rr{d}-{rounds}-{'per-round' if per_round else 'reused'}",
        f"{n} senders, {rounds} rounds, {kind}",
        d,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [rounds, n * K], "res": [rounds, n * K]},
        {"sems": sems(rounds)},
        body,
    )


def two_purposes(data_from: int, shared: bool) -> dict:
    """Device ``data_from`` writes device 0's ``out`` and signals; the other of devices
    1 and 2 signals device 0 to say hello. Device 0 waits once for the data (then
    reads it) and once for the hello. On one semaphore, the hello can stand in for the
    data; on two, it cannot."""
    hello_from = 3 - data_from
    data_sem, hello_sem = ("s", "s") if shared else ("s", "t")
    body = [
        let("s", "sems", at(0)),
        let("t", "sems", at(1)),
        let("dst", "out", remote(0)),
        when(f"dev == {data_from}", copy_("x_ref", "dst"), signal(data_sem, 0)),
        when(f"dev == {hello_from}", signal(hello_sem, 0)),
        when("dev == 0", wait(data_sem), copy_("out", "res"), wait(hello_sem)),
    ]
    how = "one semaphore for both" if shared else "a semaphore for each"
    return scenario(
        f"tp3-d{data_from}-{'shared' if shared else 'split'}",
        f"device {data_from} sends data, device {hello_from} a hello, to device 0: {how}",
        3,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K], "res": [K]},
        {"sems": sems(2)},
        body,
    )


def competing_waiters(mut: str, mirror: bool = False) -> dict:
    """Two warpgroups of device 0 each wait once on one semaphore that device 1 signals
    (``mirror``: the two warpgroups' parts swapped)."""
    w0, w1 = (1, 0) if mirror else (0, 1)
    if mut in ("race", "race-fixed"):
        a, b = ("s", "s") if mut == "race" else ("s", "t")
        body = [
            let("dst", "out", remote(0)),
            let("s", "sems", at(0)),
            let("t", "sems", at(1)),
            let("first", "dst", at(ds(0, K))),
            let("second", "dst", at(ds(K, K))),
            when(
                "(dev == 1) & (wg == 0)",
                copy_("x_ref", "first"),
                signal(a, 0),
                copy_("x_ref", "second"),
                signal(b, 0),
            ),
            when(
                f"(dev == 0) & (wg == {w0})",
                wait(a),
                let("mine", "out", at(ds(0, K))),
                let("keep", "res", at(ds(0, K))),
                copy_("mine", "keep"),
            ),
            when(
                f"(dev == 0) & (wg == {w1})",
                wait(b),
                let("mine", "out", at(ds(K, K))),
                let("keep", "res", at(ds(K, K))),
                copy_("mine", "keep"),
            ),
        ]
        what = (
            f"one semaphore: if warpgroup {w1} takes the first signal"
            " it reads the second half as it is written"
        )
        if mut == "race-fixed":
            what = "a semaphore per warpgroup"
    else:
        a, b = ("s", "s") if mut != "deadlock-fixed" else ("s", "t")
        sender = [signal(a, 0), wait("ack"), signal(b, 0)]
        if mut == "always-deadlock":
            sender = [signal(a, 0), wait("ack")]
        body = [
            let("s", "sems", at(0)),
            let("t", "sems", at(1)),
            let("ack", "sems", at(2)),
            when("(dev == 1) & (wg == 0)", *sender),
            when(f"(dev == 0) & (wg == {w0})", wait(a), signal("ack", 1)),
            when(f"(dev == 0) & (wg == {w1})", wait(b)),
        ]
        what = {
            "deadlock": (
                f"one semaphore: if warpgroup {w1} takes the first signal,"
                f" warpgroup {w0} and device 1 wait forever"
            ),
            "deadlock-fixed": "a semaphore per warpgroup",
            "always-deadlock": "two waiters, one signal",
        }[mut]
    return scenario(
        f"cw-{mut}{'-mirror' if mirror else ''}",
        f"two warpgroups waiting on device 1's signals: {what}",
        2,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [2 * K], "res": [2 * K]},
        {"sems": sems(3)},
        body,
        threads=2,
    )


LOAD_MODES = {
    "wait-second": "two loads on two barriers, only the second waited",
    "wait-first": "two loads on two barriers, only the first waited",
    "wait-both": "two loads on two barriers, both waited",
    "wait-none": "two loads, no barrier waited",
    "one-barrier-two-arrivals": "two loads on one barrier of two arrivals, waited once",
}


def async_loads(d: int, mode: str) -> dict:
    """Load both halves of x into SMEM asynchronously, then write both halves out."""
    src = "x_ref" if d == 1 else "peer_x"
    bar1 = "bar0" if mode == "one-barrier-two-arrivals" else "bar1"
    body: list[dict] = []
    if d > 1:
        body.append(let("peer_x", "x_ref", remote(RIGHT)))
    body += [
        let("bar0", "bars", at(0)),
        let("bar1", "bars", at(1)),
        let("lo", src, at(ds(0, K))),
        let("hi", src, at(ds(K, K))),
        let("lo_smem", "smem", at(ds(0, K))),
        let("hi_smem", "smem", at(ds(K, K))),
        {"op": "copy_gmem_to_smem", "src": "lo", "dst": "lo_smem", "barrier": "bar0"},
        {"op": "copy_gmem_to_smem", "src": "hi", "dst": "hi_smem", "barrier": bar1},
    ]
    waits = {
        "wait-second": ["bar1"],
        "wait-first": ["bar0"],
        "wait-both": ["bar0", "bar1"],
        "wait-none": [],
        "one-barrier-two-arrivals": ["bar0"],
    }[mode]
    body += [{"op": "barrier_wait", "barrier": b} for b in waits]
    body.append(copy_("smem", "out"))
    arrivals = 2 if mode == "one-barrier-two-arrivals" else 1
    return scenario(
        f"loads{d}-{mode}",
        f"{LOAD_MODES[mode]}, then both halves read ({d} device{'s' if d > 1 else ''})",
        d if d > 1 else None,
        {"x": [2 * K]},
        [("x", "x_ref")],
        {"out": [2 * K]},
        {
            "smem": {"shape": [2 * K], "dtype": "float32", "memory_space": "SMEM"},
            "bars": {"kind": "barrier", "num_barriers": 2, "num_arrivals": arrivals},
        },
        body,
    )


HANDSHAKE_MODES = {
    "correct": "warpgroup 0 fills SMEM and arrives; warpgroup 1 waits on the barrier and reads",
    "no-arrive": "the barrier_arrive dropped",
    "no-wait": "the barrier_wait dropped",
    "two-arrivals": "a barrier of two arrivals, one arrive",
}


def handshake(mode: str) -> dict:
    producer = [{"op": "fill", "dst": "smem", "value": 1.0}]
    if mode != "no-arrive":
        producer.append({"op": "barrier_arrive", "barrier": "bar"})
    consumer = [copy_("smem", "out")]
    if mode != "no-wait":
        consumer.insert(0, {"op": "barrier_wait", "barrier": "bar"})
    return scenario(
        f"hs-{mode}",
        f"a barrier between two warpgroups: {HANDSHAKE_MODES[mode]}",
        None,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {
            "smem": {"shape": [K], "dtype": "float32", "memory_space": "SMEM"},
            "bar": {"kind": "barrier", "num_arrivals": 2 if mode == "two-arrivals" else 1},
        },
        [when("wg == 0", *producer), when("wg == 1", *consumer)],
        threads=2,
    )


# ----------------------------------------------------------------------------- the corpus

#: family -> whether its cases are the schedule-dependent patterns
FAMILIES: dict[str, bool] = {
    "ag": False,
    "rs": False,
    "ex": False,
    "shift": False,
    "db": False,
    "cm": False,
    "pw": True,
    "rr": True,
    "tp": True,
    "cw": True,
    "loads": True,
    "hs": False,
}


def corpus() -> Iterator[dict]:
    """Every scenario of the corpus, in a fixed order."""
    cases: list[Callable[[], dict]] = []
    for d in (2, 3, 4):
        cases += [lambda d=d, m=m: ring_all_gather(d, m) for m in AG_MUTATIONS]
        cases += [lambda d=d, m=m: ring_reduce_scatter(d, m) for m in RS_MUTATIONS]
        cases += [lambda d=d, m=m: exchange_shards(d, m) for m in EX_MUTATIONS]
        cases += [lambda d=d, m=m: ring_shift(d, m) for m in SHIFT_TARGETS]
        cases += [lambda d=d, m=m: double_buffer(d, m) for m in DB_MUTATIONS]
    for d in (2, 3):
        cases += [lambda d=d, m=m: collective_matmul(d, m) for m in CM_MUTATIONS]
    for d, target, order in [
        (3, 2, [0, 1]),
        (3, 2, [1, 0]),
        (3, 0, [0, 1]),
        (3, 0, [1, 0]),
        (4, 3, [0, 1, 2]),
        (4, 3, [2, 1, 0]),
    ]:
        cases.append(lambda d=d, t=target, o=order: partial_wait(d, t, o, "each"))
    for d, target, order in [(3, 2, [0, 1]), (3, 2, [1, 0]), (4, 3, [0, 1, 2])]:
        cases.append(lambda d=d, t=target, o=order: partial_wait(d, t, o, "all"))
        cases.append(lambda d=d, t=target, o=order: partial_wait(d, t, o, "per-sender"))
    for d, rounds in [(3, 2), (3, 3), (4, 2)]:
        for per_round in (False, True):
            cases.append(lambda d=d, r=rounds, p=per_round: reused_rounds(d, r, p))
    for data_from in (1, 2):
        for shared in (True, False):
            cases.append(lambda f=data_from, sh=shared: two_purposes(f, sh))
    for m in ("race", "race-fixed", "deadlock", "deadlock-fixed", "always-deadlock"):
        cases.append(lambda m=m: competing_waiters(m))
    for m in ("race", "deadlock"):
        cases.append(lambda m=m: competing_waiters(m, mirror=True))
    for d in (1, 2):
        cases += [lambda d=d, m=m: async_loads(d, m) for m in LOAD_MODES]
    cases += [lambda m=m: handshake(m) for m in HANDSHAKE_MODES]
    for make in cases:
        yield make()


def family(name: str) -> str:
    """The family a corpus file's name starts with."""
    head = name.split("-")[0]
    return head.rstrip("0123456789")


def write(out: Path = HERE) -> dict[str, dict]:
    """Write every scenario and ``labels.json`` into ``out``; the labels."""
    labels = {}
    for old in out.glob("*.json"):
        old.unlink()
    for s in corpus():
        labels[s["name"]] = label_of(s)
        (out / f"{s['name']}.json").write_text(json.dumps(s, indent=1) + "\n")
    (out / "labels.json").write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")
    return labels


def label_of(s: dict) -> dict[str, Any]:
    """The explorer's label of one scenario, and whether it is a schedule pattern."""
    label = explore(compile_scenario(s)).label()
    label["schedule_pattern"] = FAMILIES[family(s["name"])]
    return label


def main() -> None:
    labels = write()
    kinds: dict[str, int] = {}
    for lab in labels.values():
        for k in lab["kinds"]:
            kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(labels)} scenarios: {kinds}")


if __name__ == "__main__":
    main()
