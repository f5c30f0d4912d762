"""How static check time grows with argument count and transform-stack depth (linear?)."""

from __future__ import annotations

import math
import time
from typing import Any

from bench.table import Row, timed, verdict
from bench.timing import fmt_s, median_fresh, slope

ARGS = (10, 100, 250, 500, 1000)
DEPTHS = (1, 8, 16, 32, 64)  # the loader's limit is 64 transforms per stack
ARGS_TARGET_S = 50e-3
CHAIN_LETS = (100, 200, 400, 800)  # x 64 transforms x as many copies
CHAIN_TARGET_S = 2.0


def with_args(n: int) -> dict[str, Any]:
    """n buffers, each passed as an argument, viewed and copied into one output slice."""
    buffers = {f"b{i}": {"shape": [8, 128], "dtype": "float32"} for i in range(n)}
    args = [{"buffer": f"b{i}", "param": f"x{i}"} for i in range(n)]
    body: list[dict[str, Any]] = []
    for i in range(n):
        body.append({"let": f"v{i}", "ref": f"x{i}", "transforms": [{"op": "at", "index": [0]}]})
    body.append({"op": "copy", "src": "v0", "dst": "out"})
    return _scenario(f"args-{n}", buffers, args, body, [128])


def with_depth(d: int) -> dict[str, Any]:
    """One view through a d-step stack (reshape back and forth, slices that keep the shape)."""
    steps = [
        {"op": "reshape", "shape": [16, 64]} if i % 2 == 0 else {"op": "reshape", "shape": [1024]}
        for i in range(d)
    ]
    if d % 2:
        steps.append({"op": "reshape", "shape": [1024]})
    buffers = {"b": {"shape": [1024], "dtype": "float32"}}
    args = [{"buffer": "b", "param": "x"}]
    body = [
        {"let": "v", "ref": "x", "transforms": steps[:64]},
        {"op": "copy", "src": "v", "dst": "out"},
    ]
    return _scenario(f"depth-{d}", buffers, args, body, [1024])


def chain_of_views(lets: int, transforms: int = 64, copies: int | None = None) -> dict[str, Any]:
    """A chain of views (issue 16): ``lets`` views, each of the one before through
    ``transforms`` reshapes back and forth (so view k is ``transforms * (k + 1)`` steps
    from the buffer), then ``copies`` copies, copy i from view ``i % lets``. At
    800 x 64 x 800 it is the 1.7 MB file a quadratic check took minutes over."""
    steps = [
        {"op": "reshape", "shape": [16, 64]} if i % 2 == 0 else {"op": "reshape", "shape": [1024]}
        for i in range(transforms)
    ]
    body: list[dict[str, Any]] = []
    prev = "x"
    for i in range(lets):
        body.append({"let": f"v{i}", "ref": prev, "transforms": [dict(t) for t in steps]})
        prev = f"v{i}"
    for i in range(lets if copies is None else copies):
        body.append({"op": "copy", "src": f"v{i % lets}", "dst": "out"})
    buffers = {"b": {"shape": [1024], "dtype": "float32"}}
    return _scenario(f"chain-{lets}", buffers, [{"buffer": "b", "param": "x"}], body, [1024])


def _scenario(name: str, buffers: dict, args: list, body: list, out: list[int]) -> dict[str, Any]:
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": buffers,
        "call": {
            "args": args,
            "outputs": {"out": {"shape": out, "dtype": "float32"}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
    }


def _series(label: str, unit: str, xs: tuple[int, ...], make) -> tuple[list[float], list[Row]]:
    from mpmd_lab import validate
    from mpmd_lab.scenario import load_scenario

    ys = []
    for x in xs:
        d = make(x)  # each check a first check of a fresh load (the load untimed)
        ys.append(median_fresh(lambda d=d: load_scenario(d), validate.check, repeats=9))
    b, a = slope(xs, ys)
    # t ~ n**k: k from a log-log fit over the larger sizes (where fixed costs fade); k ~ 1 is
    # linear, k ~ 2 quadratic
    k, _ = slope([math.log(x) for x in xs[1:]], [math.log(y) for y in ys[1:]])
    series = ", ".join(f"{x}: {fmt_s(y)}" for x, y in zip(xs, ys, strict=True) if x in xs[::2])
    return ys, [
        Row("scaling", f"check vs {label} (a fresh load each)", series, value=ys[-1], unit="s"),
        _exponent_row(
            f"  fit: {fmt_s(max(a, 0))} + {fmt_s(b)} per {unit}; t ~ n^k", k, xs, ys, unit
        ),
    ]


def _exponent_row(measure: str, k: float, xs: list | tuple, ys: list, unit: str) -> Row:
    """The fitted exponent of ``t ~ n^k`` against its target: linear (k < 1.2)."""
    return Row(
        "scaling",
        measure,
        f"k = {k:.2f}",
        f"{ys[-1] / ys[0]:.0f}x time for {xs[-1] // xs[0]}x {unit}s",
        target="linear (k < 1.2)",
        verdict=verdict(k < 1.2),
        value=k,
        unit="exponent",
    )


def _chains() -> list[Row]:
    """Load + check of growing chains of views, as ``mpmd-lab check`` does a file."""
    import json

    from mpmd_lab import validate
    from mpmd_lab.scenario import load_scenario

    xs, ys, sizes, cpus = [], [], [], []
    for lets in CHAIN_LETS:
        text = json.dumps(chain_of_views(lets), separators=(",", ":"))
        t0, c0 = time.perf_counter(), time.process_time()
        diags = validate.check(load_scenario(text))
        ys.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        xs.append(lets)
        sizes.append(len(text))
        if any(d.is_error for d in diags):
            raise AssertionError(f"chain of {lets} views: {diags[0].one_line()}")
    k, _ = slope([math.log(x) for x in xs], [math.log(y) for y in ys])
    series = ", ".join(f"{x}: {fmt_s(y)}" for x, y in zip(xs, ys, strict=True))
    mb = sizes[-1] / 1e6
    return [
        Row(
            "scaling",
            f"load + check, chain of views ({CHAIN_LETS[-1]} lets: 64 reshapes each, "
            "as many copies)",
            series,
            value=ys[-1],
            unit="s",
        ),
        _exponent_row(
            "  t ~ lets^k over the chains (stack depth grows with the lets)", k, xs, ys, "let"
        ),
        timed(
            "scaling",
            f"load + check, the {mb:.1f} MB chain ({CHAIN_LETS[-1]} lets x 64 transforms x "
            f"{CHAIN_LETS[-1]} copies)",
            ys[-1],
            target_s=CHAIN_TARGET_S,
        ),
        timed(
            "scaling",
            "  the same, CPU time of this process (what the machine's load does not add)",
            cpus[-1],
            target_s=CHAIN_TARGET_S,
        ),
    ]


def rows() -> list[Row]:
    from mpmd_lab import validate
    from mpmd_lab.scenario import load_scenario

    ys, out = _series("argument count", "argument", ARGS, with_args)
    t1000 = ys[ARGS.index(1000)]
    out.append(
        timed(
            "scaling",
            "check, 1,000 arguments (each time a first check of a fresh load)",
            t1000,
            target_s=ARGS_TARGET_S,
        )
    )
    d1000 = with_args(1000)
    cpu = median_fresh(
        lambda: load_scenario(d1000), validate.check, repeats=5, clock=time.process_time
    )
    out.append(
        timed(
            "scaling",
            "  the same, CPU time of this process (what the machine's load does not add)",
            cpu,
            target_s=ARGS_TARGET_S,
        )
    )
    out += _series("stack depth", "step", DEPTHS, with_depth)[1]
    out += _chains()
    return out
