"""Fuzz: partition specs on a call's arguments and outputs, the check and the simulator
against real JAX.

Run ``python bench/fuzz_specs.py SEED N`` (default 0, 100). Draws ``N`` scenarios over a
1- or 2-axis device mesh whose arguments (plain, Ref, tuple) and outputs carry JSON
partition specs (valid ones mostly: replicated entries, either axis, both; some with an
axis the mesh lacks, one axis twice, more entries than dims), run under ``shard_map`` or
on the global arrays, with simple bodies (copy, fill, add, slices, ``pl.program_id``,
``lax.axis_index`` / ``axis_size`` device ids, ``remote_ref`` peers). Compares:

1. the check's first JAX-stage error (code, stage, JAX's message where it claims one)
   with JAX's build, trace and Mosaic GPU lowering;
2. where JAX's CPU interpreter runs the call (no cross-device ref), the simulator's
   outputs with the interpreter's, bit for bit (NaN where unwritten);
3. the verdict "valid" never given where JAX fails (the interpreter included, unless
   the check notes that the CPU interpreter cannot run it).

Prints each disagreement with its class and the scenario, then the counts per class.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from mpmd_lab import probe  # noqa: E402
from mpmd_lab.catalogue import classify  # noqa: E402
from mpmd_lab.diagnostics import interpreter_limit, verdict  # noqa: E402
from mpmd_lab.scenario import ScenarioError, load_scenario  # noqa: E402
from mpmd_lab.simulator import simulate  # noqa: E402
from mpmd_lab.validate import check, first_error  # noqa: E402
from simulate_support import same_bits  # noqa: E402

MESHES = [{"dev": 2}, {"x": 2, "y": 2}, {"x": 1, "y": 2}, {"x": 2, "y": 1}]
SHAPES = [[8, 128], [2, 128], [4, 16], [16], [256], [2, 4, 8]]
DTYPES = ["float32", "float32", "int32", "float16"]
JAX_STAGES = ("build", "trace", "gpu-lower")


def _spec(rng: random.Random, axes: list[str], ndim: int) -> Any:
    """A JSON spec (or the absent default): valid mostly, sometimes JAX's errors."""
    r = rng.random()
    if r < 0.2:
        return None
    if r < 0.27 and ndim:  # a bad one
        bad = rng.choice(["axis", "dup", "rank"])
        if bad == "axis":
            return ["zz"]
        if bad == "dup":
            return [[axes[0], axes[0]]] if rng.random() < 0.5 else [axes[0], axes[0]][:ndim]
        return [None] * (ndim + 1)
    pool = [None, None] + axes + axes
    pool += [list(axes), list(reversed(axes)), [axes[0]]] if len(axes) > 1 else [[axes[0]]]
    out: list[Any] = []
    used: set[str] = set()
    for _ in range(rng.randint(0, ndim)):
        e = rng.choice(pool)
        names = [] if e is None else [e] if isinstance(e, str) else e
        if any(n in used for n in names):
            e = None
            names = []
        used.update(names)
        out.append(e)
    return out


def _slice(rng: random.Random, shape: list[int], axes: list[str]) -> list[dict[str, Any]]:
    """An ``at`` view of dim 0 of a ref of ``shape`` (or nothing)."""
    if not shape or rng.random() < 0.5:
        return []
    n = shape[0]
    k = rng.choice([1, max(1, n // 2), n])
    choice = rng.random()
    if choice < 0.3:
        index: Any = [0, k]
    elif choice < 0.55:
        index = {"ds": [rng.choice([0, n - k, f"{axes[0]} * {n - k}"]), k]}
    elif choice < 0.75:
        index = {"pid": 0, "size": k}
    else:
        index = rng.randrange(n)
    return [{"op": "at", "index": [index]}]


def gen(rng: random.Random, i: int) -> dict[str, Any]:
    dm = dict(rng.choice(MESHES))
    axes = list(dm)
    shape = list(rng.choice(SHAPES))
    dtype = rng.choice(DTYPES)
    bufs: dict[str, Any] = {
        "x": {"shape": shape, "dtype": dtype, "init": "iota", "as_ref": rng.random() < 0.25}
    }
    if rng.random() < 0.5:
        bufs["y"] = {
            "shape": shape if rng.random() < 0.8 else list(rng.choice(SHAPES)),
            "dtype": dtype,
            "init": "random",
            "seed": 3,
            "as_ref": rng.random() < 0.2,
        }
    args: list[dict[str, Any]] = []
    if "y" in bufs and rng.random() < 0.2:
        args.append({"tuple": ["x", "y"], "param": "t", "spec": _spec(rng, axes, len(shape))})
        names = {"t[0]": "x", "t[1]": "y"}
    else:
        names = {}
        for b in bufs:
            args.append(
                {"buffer": b, "param": f"{b}_ref", "spec": _spec(rng, axes, len(bufs[b]["shape"]))}
            )
            names[f"{b}_ref"] = b
    oshape = shape if rng.random() < 0.85 else list(rng.choice(SHAPES))
    outputs: dict[str, Any] = {"out": {"shape": oshape, "dtype": dtype}}
    outputs["out"]["spec"] = _spec(rng, axes, len(oshape))
    if rng.random() < 0.25:
        outputs["o2"] = {"shape": [128], "dtype": "int32", "spec": _spec(rng, axes, 1)}
    for a in args:
        if a["spec"] is None:
            del a["spec"]
    for o in outputs.values():
        if o["spec"] is None:
            del o["spec"]
    grid = {"b": rng.choice([1, 1, 2])}
    body: list[dict[str, Any]] = []
    srcs = list(names)
    kind = rng.random()
    dst = "out"
    if rng.random() < 0.2:  # a peer's output
        dev: Any = rng.choice(
            [{axes[0]: {"offset": 1}}, {axes[-1]: 0}, f"({axes[-1]} + 1) % axis_size('{axes[-1]}')"]
        )
        if len(axes) > 1 and isinstance(dev, str):
            dev = {axes[-1]: dev}
        body.append(
            {"let": "peer", "ref": "out", "transforms": [{"op": "remote_ref", "device": dev}]}
        )
        dst = "peer"
    src = rng.choice(srcs)
    sv = _slice(rng, bufs[names[src]]["shape"], axes)
    if sv:
        body.append({"let": "s", "ref": src, "transforms": sv})
        src = "s"
    dv = _slice(rng, oshape, axes) if dst == "out" and sv and rng.random() < 0.7 else []
    if sv and dst == "out":  # the same slice of out, so shapes match where they can
        dv = sv if oshape == bufs["x"]["shape"] and rng.random() < 0.8 else dv
    if dv:
        body.append({"let": "d", "ref": dst, "transforms": dv})
        dst = "d"
    if kind < 0.45:
        body.append({"op": "copy", "src": src, "dst": dst})
    elif kind < 0.6:
        body.append({"op": "fill", "dst": dst, "value": rng.choice([1.5, 2, 0])})
    elif kind < 0.75:
        body.append({"op": "add", "dst": dst, "lhs": src, "rhs": rng.choice([src] + srcs)})
    else:
        a = rng.choice(axes)
        value = rng.choice(
            [
                f"{src}[...] + lax.axis_index('{a}')",
                f"{src}[...] * lax.axis_size('{a}')",
                f"{src}[...] + pl.program_id(0)",
                f"jnp.where({src}[...] > 3, {src}[...], lax.axis_index('{a}'))",
            ]
        )
        if dtype != "int32":
            value = value.replace("lax.axis_index", "1.0 * lax.axis_index")
        body.append({"op": "compute", "dst": dst, "value": value})
    if "o2" in outputs:
        a = rng.choice(axes)
        body.append(
            {
                "op": "compute",
                "dst": "o2",
                "value": rng.choice(
                    [
                        f"lax.broadcasted_iota(jnp.int32, (128,), 0) + lax.axis_index('{a}') * 10",
                        "lax.broadcasted_iota(jnp.int32, (128,), 0) + pl.program_id(0) * 100",
                        f"lax.broadcasted_iota(jnp.int32, (128,), 0) * lax.axis_size('{a}')",
                    ]
                ),
            }
        )
    d: dict[str, Any] = {
        "name": f"sp{i}",
        "device_mesh": dm,
        "buffers": bufs,
        "call": {
            "entry": rng.choice(["pl.kernel", "pl.kernel", "plgpu.kernel"]),
            "args": args,
            "outputs": outputs,
            "programs": [{"mesh": {"grid": grid}, "body": body}],
        },
        "run": {"interpret": "gpu" if rng.random() < 0.85 else "hlo", "detect_races": False},
    }
    if rng.random() < 0.25:
        d["run"]["shard_map"] = False
    if bufs["x"]["as_ref"] and "x_ref" in names and rng.random() < 0.5:
        # a store into the input Ref first (what the call's later loads then see)
        body.insert(0, {"op": "fill", "dst": "x_ref", "value": rng.choice([7, 0.5])})
    if rng.random() < 0.1:  # the same buffer again, maybe under another spec
        again = {"buffer": "x", "param": "x_again"}
        spec = _spec(rng, axes, len(shape))
        if spec is not None:
            again["spec"] = spec
        args.append(again)
    if rng.random() < 0.1:  # a rank-0 buffer, loaded into o2
        bufs["k"] = {"shape": [], "dtype": "int32", "init": 3}
        a = {"buffer": "k", "param": "k_ref"}
        if rng.random() < 0.5:
            a["spec"] = rng.choice([[], [None]])
        args.append(a)
        if "o2" in outputs:
            body[-1]["value"] += " + k_ref[...]"
    return d


def draw(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    tries = 0
    while len(out) < n:
        d = gen(rng, tries)
        tries += 1
        try:
            load_scenario(d)
        except ScenarioError:
            continue
        out.append(d)
    return out


def _jax(r: Any) -> dict[str, Any]:
    if r.ok:
        return {"stage": None, "code": None, "message": ""}
    return {
        "stage": r.stage,
        "code": classify(r.error_type or "", r.message or ""),
        "message": r.message or "",
    }


def _sets(text: str) -> str:
    """``frozenset({'y', 'x'})`` in a message with its names sorted (hash order varies)."""
    return re.sub(
        r"frozenset\(\{([^}]*)\}\)",
        lambda m: "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})",
        text,
    )


def _said(mine: str, theirs: str) -> bool:
    """Whether the check's message is JAX's (``(...)``: an elided part)."""
    parts = _sets(mine.split(" at <")[0]).split("(...)")
    pattern = ".*?".join(re.escape(p) for p in parts)
    return re.search(pattern, _sets(theirs), re.S) is not None


def _crosses(d: dict[str, Any]) -> bool:
    return "remote_ref" in json.dumps(d)


def _pid_zero(s: Any) -> bool:
    blocks = math.prod(s.call.programs[0].mesh.grid.values())
    text = s.to_json(indent=None)
    return s.run.interpret == "gpu" and blocks > 1 and ('"pid"' in text or "program_id" in text)


#: what ``compare`` looked at: JAX's verdicts, outputs compared bit for bit
SEEN: Counter = Counter()


def compare(scenarios: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """Each disagreement: (class, scenario, detail); counts in ``SEEN``."""
    loaded = [load_scenario(json.loads(json.dumps(d))) for d in scenarios]
    lowered = probe.probe_many(loaded, JAX_STAGES, timeout=120)
    ran = probe.probe_many(loaded, ("interpret",), timeout=120)
    out: list[tuple[str, dict[str, Any], str]] = []
    for d, s, low, run in zip(scenarios, loaded, lowered, ran, strict=True):
        j = _jax(low)
        SEEN["JAX lowers" if low.ok else f"JAX fails at {low.stage}"] += 1
        SEEN["JAX's interpreter runs" if run.ok else "JAX's interpreter fails"] += 1
        diags = check(load_scenario(json.loads(json.dumps(d))))
        mine = first_error(diags)
        mine_jax = mine if mine is not None and mine.stage in ("schema",) + JAX_STAGES else None
        # (1) the first error
        if j["stage"] is None:
            if mine_jax is not None and mine_jax.stage != "schema":
                out.append(
                    (f"check {mine_jax.code}@{mine_jax.stage} / JAX ok", d, mine_jax.message)
                )
        elif mine_jax is None:
            out.append(
                (
                    f"check {mine and mine.code} / JAX {j['code']}@{j['stage']}",
                    d,
                    j["message"][:300],
                )
            )
        elif (mine_jax.code, mine_jax.stage) != (j["code"], j["stage"]):
            out.append(
                (
                    f"check {mine_jax.code}@{mine_jax.stage} / JAX {j['code']}@{j['stage']}",
                    d,
                    j["message"][:300],
                )
            )
        elif mine_jax.jax is not None and not _said(mine_jax.jax.message, j["message"]):
            out.append(
                (f"message {j['code']}", d, f"{mine_jax.jax.message!r} vs {j['message'][:300]!r}")
            )
        # (3) "valid" where JAX fails
        v = verdict(diags)
        if v == "valid" and not low.ok:
            out.append((f"valid / JAX {j['code']}@{j['stage']}", d, j["message"][:300]))
        elif v == "valid" and not run.ok and not any(interpreter_limit(x) for x in diags):
            jr = _jax(run)
            out.append((f"valid / JAX interpret {jr['code']}", d, jr["message"][:300]))
        # (2) the outputs
        if run.ok and not _crosses(d):
            sim = simulate(s, check=False, program_id="zero" if _pid_zero(s) else "grid")
            if not sim.ok:
                # (an error the check finds too, out-of-bounds say, which JAX's
                # interpreter clamps, is no disagreement)
                code = getattr(sim.error, "code", None)
                if not any(x.is_error and x.code == code for x in diags):
                    out.append(("simulate failed where JAX ran", d, str(sim.error)[:300]))
                continue
            if set(sim.outputs) != set(run.outputs or {}):
                out.append(("outputs differ (names)", d, f"{sorted(sim.outputs)}"))
                continue
            SEEN["outputs compared"] += 1
            for name, value in (run.outputs or {}).items():
                if not same_bits(sim.outputs[name], value, flushed=True):
                    out.append(
                        (
                            "outputs differ",
                            d,
                            f"{name}: simulate {sim.outputs[name]!r}\n jax {value!r}",
                        )
                    )
                    break
    return out


def main(seed: int = 0, n: int = 100) -> int:
    scenarios = draw(seed, n)
    found = compare(scenarios)
    classes = Counter(c for c, _d, _m in found)
    for c, d, m in found:
        print(f"== {c}: {d['name']}\n   {m}\n   {json.dumps(d)}")
    print(f"seed {seed}: {n} scenarios, {len({d['name'] for _c, d, _m in found})} disagree")
    print("   " + ", ".join(f"{k}: {v}" for k, v in sorted(SEEN.items())))
    for c, k in classes.most_common():
        print(f"{k:5d}  {c}")
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main(*[int(a) for a in sys.argv[1:3]]))
