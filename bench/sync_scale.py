"""Synchronisation verdicts at scale (issue 28): the gallery's ring collectives at 64, 256
and 1,024 devices and the collective matmul at JAX's real size (132 blocks x 3
warpgroups x 4 devices), each judged by symmetry (``mpmd_lab.validate.symmetry``)
where the engine alone would stop at its step bound.

The scaled scenarios are made here from the gallery's JSON (``scaled``, ``real_matmul``);
``tests/test_validate_symmetry.py`` holds their verdicts to the small meshes'."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from mpmd_lab import gallery

from bench.table import Row, timed
from bench.table import verdict as verdict_text

#: The ring collectives of the gallery and the sizes they are judged at.
RINGS = ("ring-all-gather", "ring-reduce-scatter", "ring-all-gather-no-wait")
RINGS_MORE = ("ring-all-gather-deadlock",)
SIZES = (64, 256, 1024)
#: Elements of a chunk in the gallery's rings (one per device).
CHUNK = 256
#: Seconds a verdict may take (the issue's target).
TARGET_S = 2.0
#: JAX's collective matmul on an H100: one block per SM, three warpgroups.
SMS, WARPGROUPS = 132, 3


def scaled(name: str, devices: int) -> dict[str, Any]:
    """A gallery ring collective over ``devices`` devices: the device axis and every
    shape that holds one slot per device (or per step: D - 1) grown with it."""
    data = json.loads(gallery.path_of(name).read_text(encoding="utf-8"))
    was = data["device_mesh"]["dev"]
    data["device_mesh"] = {"dev": devices}
    data["name"] = f"{name}-{devices}"

    def grow(shape: list[int]) -> list[int]:
        if shape[0] == was - 1:
            return [devices - 1, *shape[1:]]
        if shape[0] == was * CHUNK:  # one chunk per device
            return [CHUNK * devices, *shape[1:]]
        return shape

    c = data["call"]
    for group in (data["buffers"], c["outputs"], c["scratch"]):
        for item in group.values():
            if "shape" in item and item["shape"]:
                item["shape"] = grow(item["shape"])
    return data


def real_matmul(devices: int = 4, blocks: int = SMS, tile_n: int = 128) -> dict[str, Any]:
    """The gallery's collective matmul laid out as JAX's kernel runs it: ``blocks``
    blocks (one per SM), each computing its own ``tile_n`` columns of the output, in three
    warpgroups: warpgroup 2 issues the TMA loads, warpgroups 0 and 1 each multiply half
    the tile, and warpgroup 0 also forwards the lhs tile left round the ring (into the
    block's own slot of the neighbour's landing buffer), signals and waits for the one
    from the right; a barrier of two arrivals tells the loader both consumers are done
    with the tile (and the next has arrived) before it loads the next."""
    base = json.loads(gallery.path_of("collective-matmul").read_text(encoding="utf-8"))
    data = copy.deepcopy(base)
    data["name"] = f"collective-matmul-{blocks}x{WARPGROUPS}x{devices}"
    data.pop("description", None)
    data["device_mesh"] = {"dev": devices}
    m, k = base["buffers"]["lhs"]["shape"]
    n = blocks * tile_n
    half = tile_n // 2
    data["buffers"]["rhs"]["shape"] = [k, n]
    c = data["call"]
    c["outputs"]["out"]["shape"] = [devices * m, n]
    c["outputs"]["recv"]["shape"] = [devices - 1, blocks, m, k]
    c["scratch"]["b_smem"]["shape"] = [k, tile_n]
    c["scratch"]["consumed"] = {"kind": "barrier", "num_arrivals": 2}

    def at(ref: str, name: str, *index: Any) -> dict[str, Any]:
        return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": list(index)}]}

    def ds(start: Any, size: int) -> dict[str, Any]:
        return {"ds": [start, size]}

    size = "axis_size(dev)"
    loader = [
        at("rhs_ref", "rhs_tile", ds(0, k), ds(f"b * {tile_n}", tile_n)),
        {"op": "copy_gmem_to_smem", "src": "rhs_tile", "dst": "b_smem", "barrier": "rhs_ready"},
        {"op": "copy_gmem_to_smem", "src": "lhs_ref", "dst": "a_smem", "barrier": "lhs_ready"},
        {
            "op": "loop",
            "var": "i",
            "start": 1,
            "stop": size,
            "via": "pl.loop",
            "body": [
                {"op": "barrier_wait", "barrier": "consumed"},
                at("recv", "from_right", "i - 1", "b"),
                {
                    "op": "copy_gmem_to_smem",
                    "src": "from_right",
                    "dst": "a_smem",
                    "barrier": "lhs_ready",
                },
            ],
        },
    ]
    send = [
        at("left_recv", "to_left", "i", "b"),
        {"op": "commit_smem"},
        {"op": "copy_smem_to_gmem", "src": "a_smem", "dst": "to_left"},
        {"op": "wait_smem_to_gmem", "n": 0},
        {"op": "semaphore_signal", "sem": "received", "device": f"(dev + {size} - 1) % {size}"},
        {"op": "semaphore_wait", "sem": "received"},
    ]
    consumer = [
        {"op": "barrier_wait", "barrier": "rhs_ready"},
        at("b_smem", "b_half", ds(0, k), ds(f"wg * {half}", half)),
        {
            "op": "loop",
            "var": "i",
            "start": 0,
            "stop": size,
            "via": "pl.loop",
            "body": [
                {"op": "barrier_wait", "barrier": "lhs_ready"},
                at(
                    "out",
                    "tile",
                    ds(f"(dev + i) % {size} * {m}", m),
                    ds(f"b * {tile_n} + wg * {half}", half),
                ),
                {"op": "dot", "dst": "tile", "lhs": "a_smem", "rhs": "b_half"},
                {"op": "when", "cond": f"wg == 0 and i < {size} - 1", "body": send},
                {
                    "op": "when",
                    "cond": f"i < {size} - 1",
                    "body": [{"op": "barrier_arrive", "barrier": "consumed"}],
                },
            ],
        },
    ]
    body = base["call"]["programs"][0]["body"][:3]  # left_recv, rhs_ready, lhs_ready
    body += [
        {"op": "when", "cond": "wg == 2", "body": loader},
        {"op": "when", "cond": "wg < 2", "body": consumer},
    ]
    c["programs"] = [
        {
            "mesh": {
                "grid": {"b": blocks},
                "cluster": {},
                "threads": {"name": "wg", "count": WARPGROUPS},
            },
            "body": body,
        }
    ]
    return data


def verdict(data: dict[str, Any]) -> tuple[set[tuple[str, str]], set[str], float, float]:
    """The check's verdict (error and balance codes, with their paths), the codes of its
    notes on coverage (``SYNC_*``), and the wall and CPU seconds of the whole check
    (``validate.analyze`` with its fixes, as ``mpmd-lab check`` runs it; loading not timed)."""
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.validate import analyze

    s = load_scenario(data)
    t0, c0 = time.perf_counter(), time.process_time()
    diags = analyze(s).diagnostics
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    found = {(d.code, d.path) for d in diags if d.code in VERDICT}
    return found, {d.code for d in diags if d.code.startswith("SYNC_")}, wall, cpu


#: The codes a verdict is made of.
VERDICT = frozenset(
    {"RACE", "RACE_DETECTED", "DEADLOCK_SEMAPHORE", "DEADLOCK_BARRIER", "SEMAPHORE_IMBALANCE"}
)


def _row(
    measure: str, big: dict[str, Any], small: dict[str, Any], repeats: int
) -> tuple[Row, float]:
    """One timed verdict against the engine's own on the small mesh (run whole)."""
    want, small_notes, _, _ = verdict(small)
    times = []
    for _ in range(repeats):
        found, notes, wall, cpu = verdict(big)
        times.append((wall, cpu))
    wall, cpu = sorted(times)[len(times) // 2]
    codes = ", ".join(sorted({c for c, _ in found})) or "clean"
    same = found == want and not small_notes and notes == {"SYNC_BY_SYMMETRY"}
    row = timed(
        "symmetry",
        f"{measure}: {codes}",
        wall,
        baseline="same verdict as the small mesh" if same else "DIFFERENT verdict or coverage",
        ratio=f"cpu {cpu:.2f} s",
        target_s=TARGET_S,
    )
    if not same:
        row.verdict = "MISSED"
    return row, cpu


def rows(quick: bool = False) -> list[Row]:
    """``make bench``'s symmetry section: each ring at 64, 256 and 1,024 devices and the
    collective matmul at 132 x 3 x 4, a full verdict (no SYNC_NOT_CHECKED) equal to the
    small mesh's, in under 2 s."""
    repeats = 1 if quick else 3
    made = []
    for name in RINGS + RINGS_MORE:
        for n in SIZES:
            made.append(_row(f"{name}, {n} devices", scaled(name, n), scaled(name, 4), repeats))
    made.append(
        _row(
            f"collective-matmul, {SMS} blocks x {WARPGROUPS} warpgroups x 4 devices",
            real_matmul(4, SMS),
            real_matmul(4, 2),
            repeats,
        )
    )
    out = [row for row, _ in made]
    # the process's CPU time, which a loaded machine does not inflate as it does wall time
    worst, which = max((cpu, row.measure.split(":")[0]) for row, cpu in made)
    out.append(
        Row(
            "symmetry",
            f"  slowest in CPU time ({which})",
            f"{worst:.2f} s",
            target=f"< {TARGET_S:.2f} s",
            verdict=verdict_text(worst < TARGET_S),
            value=worst,
            unit="s",
        )
    )
    return out
