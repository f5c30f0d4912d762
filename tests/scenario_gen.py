"""Random scenarios for agreement tests and fuzzing: ``gen(rng, i)`` -> a scenario dict.

Covers device meshes (none, 1-D, 2-D), plain and Ref buffers, tuple and duplicate
arguments, argument views, captures, outputs, SMEM/TMEM scratch with tiling and
swizzle, grids, clusters, threads, several programs, and stacks of every transform
feeding copy / add / fill / tma_store / multimem_store / return statements.
"""

from __future__ import annotations

# ruff: noqa: E501


def gen(rng, i):
    dm = rng.choice([None, None, {"dev": 2}, {"x": 2, "y": 2}])
    shapes = [[256], [8, 128], [2, 128], [16, 16], [4], [4, 256], [128], [3, 128]]
    dts = ["float32", "float32", "float16", "int32", "bfloat16", "int8"]
    xs, xd = rng.choice(shapes), rng.choice(dts)
    bufs = {"x": {"shape": xs, "dtype": xd, "as_ref": rng.random() < 0.3}}
    if rng.random() < 0.4:
        bufs["y"] = {
            "shape": rng.choice([xs, rng.choice(shapes)]),
            "dtype": rng.choice([xd, rng.choice(dts)]),
            "as_ref": rng.random() < 0.3,
        }
    args = [{"buffer": "x", "param": "x_ref"}]
    if "y" in bufs:
        args.append({"buffer": "y", "param": "y_ref"})
    r = rng.random()
    if r < 0.1:
        args.append({"buffer": "x", "param": "x2"})
    elif r < 0.15:
        args = [{"tuple": list(bufs), "param": "t"}]
    names = [a["param"] for a in args if "buffer" in a] or ["t[0]"]
    os_, od = rng.choice([xs, rng.choice(shapes)]), rng.choice([xd, xd, rng.choice(dts)])
    outputs = {"out": {"shape": os_, "dtype": od}}
    entry = rng.choice(["pl.kernel", "pl.kernel", "plgpu.kernel"])
    scratch = {}
    if rng.random() < 0.3:
        scratch["smem"] = {
            "shape": rng.choice([xs, os_]),
            "dtype": rng.choice([xd, od]),
            "memory_space": "SMEM",
        }
    grid = {"b": rng.choice([1, 1, 2])}
    mesh = {"grid": grid}
    if rng.random() < 0.2:
        mesh["cluster"] = {"c": 2}
    if rng.random() < 0.15:
        mesh["threads"] = {"name": "wg", "count": rng.choice([2, 4])}

    def tpool():
        return rng.choice(
            [
                {"op": "at", "index": [[0, rng.choice([1, 2, 4, 8, 128])]]},
                {"op": "at", "index": [rng.choice([0, 1, 3])]},
                {"op": "at", "index": [{"ds": [rng.choice([0, 1, 2]), rng.choice([1, 2, 128])]}]},
                {"op": "at", "index": [{"block": "b", "size": rng.choice([1, 2, 128])}]},
                {"op": "at", "index": [None, [0, 64]]},
                {"op": "bitcast", "dtype": rng.choice(["int32", "float16", "int8"])},
                {"op": "reshape", "shape": rng.choice([[-1], [2, -1], [-1, 128], [256]])},
                {"op": "transpose", "perm": rng.choice([[1, 0], [0, 1], [0]])},
                {
                    "op": "remote_ref",
                    "device": rng.choice([{"dev": {"offset": 1}}, {"x": 1}, 0, {"dev": 0}]),
                },
                {"op": "multicast_ref", "axes": rng.choice(["dev", ["x", "y"], "x"])},
                {"op": "cluster_ref", "block": {"c": 1}},
                {"op": "at", "index": [{"pid": 0, "size": rng.choice([1, 2, 128])}]},
                {"op": "transpose", "perm": [1, 0], "via": "transpose_ref"},
                {"op": "reshape", "shape": [-1, -1]},
                {"op": "at", "index": [0, 0, 0]},
            ]
        )

    body = []
    refs = names + ["out"] + list(scratch)
    for k in range(rng.choice([1, 2, 3, 4])):
        if rng.random() < 0.6:
            v = f"v{k}"
            body.append(
                {
                    "let": v,
                    "ref": rng.choice(refs),
                    "transforms": [tpool() for _ in range(rng.choice([1, 1, 2, 3]))],
                }
            )
            refs.append(v)
    srcs = [r for r in refs]
    dsts = ["out"] + [r for r in refs if r.startswith("v") or r == "smem"]
    op = rng.random()
    if op < 0.55:
        body.append({"op": "copy", "src": rng.choice(srcs), "dst": rng.choice(dsts)})
    elif op < 0.7:
        body.append(
            {"op": "add", "dst": rng.choice(dsts), "lhs": rng.choice(srcs), "rhs": rng.choice(srcs)}
        )
    elif op < 0.8:
        body.append({"op": "fill", "dst": rng.choice(dsts), "value": 1.0})
    elif op < 0.92:
        body.append({"op": "tma_store", "src": rng.choice(srcs), "dst": rng.choice(dsts)})
    else:
        body.append(
            {
                "op": "multimem_store",
                "src": rng.choice(srcs),
                "dst": rng.choice(dsts),
                "axes": rng.choice(["dev", ["x", "y"], ["dev"]]),
            }
        )
    if rng.random() < 0.15:
        body.insert(0, {"op": "fill", "dst": "out", "value": rng.choice([0, 1.5])})
    if rng.random() < 0.08:
        body.append({"op": "return", "src": rng.choice(srcs)})
    caps = []
    if rng.random() < 0.15:
        caps = [{"name": "cap", "buffer": rng.choice(list(bufs))}]
        if rng.random() < 0.7:
            body.insert(0, {"op": "copy", "src": "cap", "dst": "out"})
    if rng.random() < 0.15 and args and "buffer" in args[0]:
        args[0]["transforms"] = [tpool() for _ in range(rng.choice([1, 2]))]
    if scratch and rng.random() < 0.3:
        scratch["smem"]["shape"]
        scratch["smem"]["transforms"] = [
            rng.choice(
                [
                    {"op": "swizzle", "bytes": rng.choice([32, 64, 128, 16])},
                    {"op": "tiling", "tile": [8, 64]},
                ]
            )
        ]
    if rng.random() < 0.05:
        scratch["tm"] = {
            "shape": [128, 128],
            "dtype": rng.choice(["float32", "float16"]),
            "memory_space": "TMEM",
        }
    d = {
        "name": f"fz{i}",
        "buffers": bufs,
        "call": {
            "entry": entry,
            "args": args,
            "outputs": outputs,
            "scratch": scratch,
            "programs": [{"mesh": mesh, "body": body}],
            "captures": caps,
        },
    }
    # (a second program under pl.kernel only: plgpu.kernel takes one, and the export of
    # a scenario that has two says so before JAX is asked: nothing to compare)
    if rng.random() < 0.05 and entry == "pl.kernel":
        d["call"]["programs"].append({"mesh": {"grid": {"b": 1}}, "body": []})
    if dm and rng.random() < 0.1:
        d["run"] = {"shard_map": False}
    if dm:
        d["device_mesh"] = dm
    return d
