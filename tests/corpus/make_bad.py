"""Regenerate ``tests/corpus/bad/``: malformed scenarios, one file each.

Each case is (file name, expected field path printed by the CLI, content). The path
is what ``mpmd-lab`` must name on stderr (``<top>`` for the whole file). Run:
``.venv/bin/python tests/corpus/make_bad.py``; ``expected.tsv`` lists file -> field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent / "bad"
BASE = json.loads(
    (Path(__file__).resolve().parents[2] / "toolkit/gallery/ring-shift.json").read_text()
)
INJECT = 'x); import os; os.system("touch /tmp/mpmd-lab-pwned")#'


def edit(fn: Callable[[dict], object]) -> str:
    d = copy.deepcopy(BASE)
    fn(d)
    return json.dumps(d, indent=1)


def body(d: dict) -> list:
    return d["call"]["programs"][0]["body"]


def setp(path: str, value: object) -> Callable[[dict], None]:
    """Set a dotted path (ints index lists) to value."""

    def fn(d: dict) -> None:
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in head:
            d = d[p]
        d[last] = value

    return fn


def cases() -> Iterator[tuple[str, str, str | bytes]]:
    text = json.dumps(BASE, indent=1)
    # --- not JSON, or not an object
    yield "truncated", "<top>", text[: len(text) // 2]
    yield "truncated-string", "<top>", text[: text.index("ring-shift") + 4]
    yield "empty", "<top>", ""
    yield "whitespace", "<top>", " \n\t\n"
    yield "binary-garbage", "<top>", bytes(range(256)) * 4
    yield "latin1", "<top>", text.replace("Each device", "Caf\u00e9").encode("latin-1")
    yield "nul-bytes", "<top>", b"\x00" * 64
    yield "top-array", "<top>", "[" + text + "]"
    yield "top-string", "<top>", '"ring-shift"'
    yield "top-null", "<top>", "null"
    yield "top-number", "<top>", "42"
    yield "deep-nesting", "<top>", "[" * 200_000 + "]" * 200_000
    yield "deep-nesting-object", "<top>", '{"a":' * 100_000 + "1" + "}" * 100_000
    yield "deep-in-field", "description", edit(setp("description", [[[[[[[[[[[["x"]]]]]]]]]]]]))
    yield "bigint", "<top>", text.replace('"init": "iota"', '"init": "iota", "seed": ' + "9" * 5000)
    yield (
        "nan-fill",
        "call.programs[0].body[1].value",
        edit(lambda d: body(d).__setitem__(1, {"op": "fill", "dst": "p", "value": 1.5})).replace(
            "1.5", "NaN"
        ),
    )
    yield (
        "infinity-init",
        "buffers.x",
        edit(setp("buffers.x.init", [0.5] * 256)).replace("0.5", "Infinity", 1),
    )
    # --- missing, unknown, wrong schema
    yield "missing-call", "call", edit(lambda d: d.pop("call"))
    yield "missing-name", "name", edit(lambda d: d.pop("name"))
    yield "unknown-field", "colour", edit(setp("colour", "red"))
    yield "unknown-op", "call.programs[0].body[1]", edit(setp("call.programs.0.body.1.op", "jump"))
    yield (
        "unknown-transform",
        "call.programs[0].body[0].transforms[0]",
        edit(setp("call.programs.0.body.0.transforms.0.op", "rotate")),
    )
    yield "schema-v2", "schema", edit(setp("schema", "mpmd-lab/scenario@2"))
    # --- wrong types
    yield "shape-string", "buffers.x.shape", edit(setp("buffers.x.shape", "256"))
    yield "shape-float", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [256.0]))
    yield "shape-bool", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [True]))
    yield "dtype-number", "buffers.x.dtype", edit(setp("buffers.x.dtype", 32))
    yield "name-list", "name", edit(setp("name", ["ring"]))
    yield "call-list", "call", edit(setp("call", []))
    yield "call-null", "call", edit(setp("call", None))
    yield "buffers-list", "buffers", edit(setp("buffers", ["x"]))
    yield "args-object", "call.args", edit(setp("call.args", {"buffer": "x"}))
    yield "body-string", "call.programs[0].body", edit(setp("call.programs.0.body", "copy"))
    yield "program-null", "call.programs[0]", edit(setp("call.programs.0", None))
    yield (
        "transform-list",
        "call.programs[0].body[0].transforms[0]",
        edit(setp("call.programs.0.body.0.transforms.0", ["remote_ref", 1])),
    )
    yield (
        "device-string",
        "call.programs[0].body[0].transforms[0].device",
        edit(setp("call.programs.0.body.0.transforms.0.device", "left +")),  # no expression
    )
    yield "interpret-bool", "run.interpret", edit(setp("run.interpret", True))
    yield "detect-races-string", "run.detect_races", edit(setp("run.detect_races", "yes"))
    yield "device-mesh-list", "device_mesh", edit(setp("device_mesh", [4]))
    yield "seed-float", "buffers.x.seed", edit(setp("buffers.x.seed", 1.5))
    yield "as-ref-string", "buffers.x.as_ref", edit(setp("buffers.x.as_ref", "true"))
    yield "init-string", "buffers.x.init", edit(setp("buffers.x.init", "linspace"))
    yield "init-ragged", "buffers.x", edit(setp("buffers.x.init", [[1, 2], [3]]))
    yield "init-text", "buffers.x", edit(setp("buffers.x.init", ["a"] * 256))
    # --- negative, zero and huge sizes
    yield "shape-negative", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [-256]))
    yield "shape-zero", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [0]))
    yield "shape-huge-dim", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [2**31]))
    yield "shape-huge-bytes", "buffers.x", edit(setp("buffers.x.shape", [65536, 65536, 16]))
    yield "shape-rank-9", "buffers.x.shape", edit(setp("buffers.x.shape", [1] * 9))
    yield "shape-2e100", "buffers.x.shape[0]", edit(setp("buffers.x.shape", [10**100]))
    yield "output-negative", "call.outputs.out.shape[0]", edit(setp("call.outputs.out.shape", [-1]))
    yield "output-huge", "call.outputs.out", edit(setp("call.outputs.out.shape", [2**30, 2**30]))
    yield "device-mesh-zero", "device_mesh.dev", edit(setp("device_mesh", {"dev": 0}))
    yield "device-mesh-huge", "device_mesh.dev", edit(setp("device_mesh", {"dev": 10**6}))
    yield "device-mesh-product", "device_mesh", edit(setp("device_mesh", {"a": 4096, "b": 4096}))
    yield (
        "grid-zero",
        "call.programs[0].mesh.grid.blocks",
        edit(setp("call.programs.0.mesh.grid.blocks", 0)),
    )
    yield (
        "threads-negative",
        "call.programs[0].mesh.threads.count",
        edit(setp("call.programs.0.mesh.threads", {"name": "wg", "count": -2})),
    )
    yield (
        "device-offset-huge",
        "call.programs[0].body[0].transforms[0].device.dev",
        edit(setp("call.programs.0.body.0.transforms.0.device.dev.offset", 2**40)),
    )
    yield (
        "swizzle-negative",
        "call.scratch.s.transforms[0].bytes",
        edit(
            setp(
                "call.scratch",
                {
                    "s": {
                        "shape": [8],
                        "dtype": "float32",
                        "transforms": [{"op": "swizzle", "bytes": -128}],
                    }
                },
            )
        ),
    )
    # --- unknown dtypes
    yield "dtype-float33", "buffers.x.dtype", edit(setp("buffers.x.dtype", "float33"))
    yield "dtype-complex", "buffers.x.dtype", edit(setp("buffers.x.dtype", "complex64"))
    yield "dtype-empty", "call.outputs.out.dtype", edit(setp("call.outputs.out.dtype", ""))
    yield (
        "bitcast-int4",
        "call.programs[0].body[0].transforms[0].dtype",
        edit(setp("call.programs.0.body.0.transforms.0", {"op": "bitcast", "dtype": "int4"})),
    )
    # --- too long
    yield (
        "stack-65",
        "call.programs[0].body[0].transforms",
        edit(setp("call.programs.0.body.0.transforms", [{"op": "at", "index": []}] * 65)),
    )
    yield (
        "args-10001",
        "call.args",
        edit(setp("call.args", [{"buffer": "x", "param": "p"}] * 10_001)),
    )
    # --- names: Unicode, keywords, code injection
    yield "name-unicode-param", "call.args[0].param", edit(setp("call.args.0.param", "x_réf"))
    yield (
        "name-unicode-buffer",
        "buffers",
        edit(lambda d: d["buffers"].__setitem__("λ", d["buffers"]["x"])),
    )
    yield (
        "name-fullwidth",
        "call.programs[0].body[0].let",
        edit(setp("call.programs.0.body.0.let", "\uff50")),
    )
    yield "name-keyword-param", "call.args[0].param", edit(setp("call.args.0.param", "lambda"))
    yield (
        "name-keyword-let",
        "call.programs[0].body[0].let",
        edit(setp("call.programs.0.body.0.let", "None")),
    )
    yield (
        "name-soft-keyword",
        "call.outputs",
        edit(lambda d: d["call"].__setitem__("outputs", {"match": d["call"]["outputs"]["out"]})),
    )
    yield "inject-param", "call.args[0].param", edit(setp("call.args.0.param", INJECT))
    yield (
        "inject-buffer",
        "buffers",
        edit(
            lambda d: d["buffers"].__setitem__("__import__('os').system('id')", d["buffers"]["x"])
        ),
    )
    yield (
        "inject-let",
        "call.programs[0].body[0].let",
        edit(setp("call.programs.0.body.0.let", "p\nimport os\nos.system('id')")),
    )
    yield (
        "inject-copy-src",
        "call.programs[0].body[1].src",
        edit(setp("call.programs.0.body.1.src", "x_ref[...]; import os #")),
    )
    yield (
        "inject-tuple-leaf",
        "call.programs[0].body[1].src",
        edit(setp("call.programs.0.body.1.src", "x_ref[__import__('os').getpid()]")),
    )
    yield (
        "inject-axis",
        "device_mesh",
        edit(setp("device_mesh", {"dev')+__import__('os').system('id')+('": 4})),
    )
    yield (
        "inject-remote-axis",
        "call.programs[0].body[0].transforms[0].device",
        edit(setp("call.programs.0.body.0.transforms.0.device", {"dev'] or os.system('id') #": 1})),
    )
    yield (
        "inject-multicast-axes",
        "call.programs[0].body[0].transforms[0].axes",
        edit(setp("call.programs.0.body.0.transforms.0", {"op": "multicast_ref", "axes": ["a b"]})),
    )
    yield (
        "inject-grid-axis",
        "call.programs[0].mesh.grid",
        edit(setp("call.programs.0.mesh.grid", {"b;import os": 1})),
    )
    yield "inject-scenario-name", "name", edit(setp("name", 'x"""\nimport os\n"""'))
    yield (
        "inject-thread-name",
        "call.programs[0].mesh.threads.name",
        edit(setp("call.programs.0.mesh.threads", {"name": "wg)\nimport os#", "count": 1})),
    )
    yield "name-too-long", "call.args[0].param", edit(setp("call.args.0.param", "a" * 200))
    yield "name-empty", "call.args[0].param", edit(setp("call.args.0.param", ""))
    yield (
        "name-escape-seq",
        "buffers",
        edit(lambda d: d["buffers"].__setitem__("\u001b[2Jx", d["buffers"]["x"])),
    )


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for old in HERE.glob("*.json"):
        old.unlink()
    rows = []
    for name, field, content in cases():
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        (HERE / f"{name}.json").write_bytes(data)
        rows.append(f"{name}.json\t{field}")
    (HERE / "expected.tsv").write_text("\n".join(sorted(rows)) + "\n", encoding="utf-8")
    print(f"{len(rows)} files in {HERE}")


if __name__ == "__main__":
    main()
