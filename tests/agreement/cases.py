"""Regression cases of issue 18: small scenarios and what the static check must say.

``CASES`` defines each case (its scenario, the stages JAX is asked, what to hold the
check to); ``python tests/agreement/capture.py`` runs real JAX on them and writes
``cases/NAME.json`` with JAX's outcome recorded next to the scenario (stage, exception
type, exact message, code): nothing in ``jax`` is typed by hand.
``tests/test_agreement_cases.py`` holds the check to those records (and re-runs JAX to
show they still hold).

``expect``:

- ``"jax"``: the check's verdict is JAX's. JAX passed every stage: no error at those
  stages; JAX failed at a stage up to ``gpu-lower``: the check's first error is at that
  stage with JAX's code, type and message; JAX failed in the interpreter: no error
  before it, and a diagnostic at ``interpret`` with JAX's type and message.
- ``"race"``: the kernel races on a GPU (whatever the interpreter can show): the check
  reports it as an error (``RACE`` or ``RACE_DETECTED``), ``run.detect_races`` on or off.
- ``"schema"``: not a scenario (the loader refuses it).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "toolkit" / "gallery"
LOWER = ("build", "trace", "gpu-lower")
ALL = ("build", "trace", "gpu-lower", "interpret")


def _gallery(name: str) -> dict[str, Any]:
    d = json.loads((GALLERY / f"{name}.json").read_text())
    d.pop("description", None)
    return d


def kernel(
    body: list[dict[str, Any]],
    *,
    entry: str = "plgpu.kernel",
    buffers: dict[str, Any] | None = None,
    args: list[dict[str, Any]] | None = None,
    outputs: dict[str, Any] | None = None,
    scratch: dict[str, Any] | None = None,
    mesh: dict[str, Any] | None = None,
    device_mesh: dict[str, int] | None = None,
    detect_races: bool = False,
    captures: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": "case",
        "buffers": buffers or {},
        "call": {
            "entry": entry,
            "args": args or [],
            "outputs": outputs or {"out": {"shape": [128], "dtype": "float32"}},
            "scratch": scratch or {},
            "programs": [
                {"mesh": mesh or {"grid": {"b": 1}, "cluster": {}, "threads": None}, "body": body}
            ],
        },
        "run": {"interpret": "gpu", "detect_races": detect_races},
    }
    if captures:
        d["call"]["captures"] = captures
    if device_mesh:
        d["device_mesh"] = device_mesh
    return d


def smem(shape, dtype, *transforms):
    return {
        "s": {
            "shape": shape,
            "dtype": dtype,
            "memory_space": "SMEM",
            "transforms": list(transforms),
        }
    }


def T(*tile):
    return {"op": "tiling", "tile": list(tile)}


def S(nbytes):
    return {"op": "swizzle", "bytes": nbytes}


TR = {"op": "transpose", "perm": [1, 0], "via": "method"}


def view(ref, *transforms, name="v"):
    return {"let": name, "ref": ref, "transforms": list(transforms)}


def at(*index):
    return {"op": "at", "index": list(index)}


def ds(start, size):
    return {"ds": [start, size]}


FILL_S = {"op": "fill", "dst": "s", "value": 1}
FILL_V = {"op": "fill", "dst": "v", "value": 1}


def tma(src="s", dst="out"):
    return {"op": "tma_store", "src": src, "dst": dst}


def out(shape, dtype):
    return {"out": {"shape": shape, "dtype": dtype}}


def _x(shape, dtype, init="iota"):
    return {"x": {"shape": shape, "dtype": dtype, "init": init}}


X_ARG = [{"buffer": "x", "param": "x_ref"}]


def _transpose_view(kind: str) -> dict[str, Any]:
    d = _gallery("transpose-view")
    body = d["call"]["programs"][0]["body"]
    if kind == "load":
        d["buffers"]["x"]["shape"] = [64, 32]
        d["call"]["outputs"]["out"]["shape"] = [32, 64]
        body[:] = [view("x_ref", {"op": "transpose", "perm": [1, 0]}, name="xt")]
        body.append({"op": "copy", "src": "xt", "dst": "out"})
    elif kind == "both":
        d["call"]["outputs"]["out"]["shape"] = [32, 64]
        body[:] = [
            view("x_ref", {"op": "transpose", "perm": [1, 0]}, name="xt"),
            view("out", {"op": "transpose", "perm": [1, 0]}, name="ot"),
            {"op": "copy", "src": "xt", "dst": "ot"},
        ]
    elif kind == "fill":
        body[1] = {"op": "fill", "dst": "out_t", "value": 1.0}
    return d


def _tmem(view_steps, use, dtype="float32", shape=(128, 128)):
    body = []
    ref = "t"
    if view_steps:
        body.append(view("t", *view_steps))
        ref = "v"
    if use == "fill":
        body.append({"op": "fill", "dst": ref, "value": 1})
        outs = None
    else:
        body.append({"op": "copy", "src": ref, "dst": "out"})
        outs = out(list(shape), dtype)
    spec = {"shape": list(shape), "dtype": dtype, "memory_space": "TMEM"}
    return kernel(body, scratch={"t": spec}, outputs=outs)


def _rank0(kind: str, init: Any) -> dict[str, Any]:
    bufs = {
        "x": {"shape": [128], "dtype": "float32", "init": "iota"},
        "c": {"shape": [], "dtype": "float32", "init": init},
    }
    if kind == "arg":
        return kernel(
            [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "c_ref"}],
            entry="pl.kernel",
            buffers=bufs,
            args=[*X_ARG, {"buffer": "c", "param": "c_ref"}],
        )
    return kernel(
        [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "cv"}],
        entry="pl.kernel",
        buffers=bufs,
        args=X_ARG,
        captures=[{"name": "cv", "buffer": "c"}],
    )


_RACE_MESH1 = {"grid": {"b": 1}, "cluster": {}, "threads": None}


def _threads_race() -> dict[str, Any]:
    return kernel(
        [{"op": "copy", "src": "x_ref", "dst": "out"}],
        entry="pl.kernel",
        buffers=_x([256], "float32"),
        args=X_ARG,
        outputs=out([256], "float32"),
        mesh={"grid": {"b": 1}, "cluster": {}, "threads": {"name": "wg", "count": 2}},
    )


def _multimem() -> dict[str, Any]:
    return kernel(
        [{"op": "multimem_store", "src": "x_ref", "dst": "out", "axes": ["dev"]}],
        entry="pl.kernel",
        buffers=_x([128], "float32"),
        args=X_ARG,
        outputs=out([128], "float32"),
        device_mesh={"dev": 2},
    )


def _multicast() -> dict[str, Any]:
    return kernel(
        [
            {"op": "copy", "src": "x_ref", "dst": "s"},
            view("out", {"op": "multicast_ref", "axes": ["dev"]}, name="m"),
            tma("s", "m"),
        ],
        buffers=_x([256], "float32"),
        args=X_ARG,
        outputs=out([256], "float32"),
        scratch={"s": {"shape": [256], "dtype": "float32", "memory_space": "SMEM"}},
        device_mesh={"dev": 2},
    )


def _remote_race() -> dict[str, Any]:
    return kernel(
        [
            view("out", {"op": "remote_ref", "device": {"dev": 0}}, name="p"),
            {"op": "copy", "src": "x_ref", "dst": "p"},
        ],
        entry="pl.kernel",
        buffers=_x([256], "float32"),
        args=X_ARG,
        outputs=out([256], "float32"),
        device_mesh={"dev": 2},
    )


def _two_block_race(detect: bool) -> dict[str, Any]:
    d = _gallery("two-block-race")
    d["run"]["detect_races"] = detect
    return d


TS128 = (T(8, 32), S(128))
I32 = "int32"

#: name -> (scenario, stages JAX is asked, detect_races for the record, expect, note)
CASES: dict[str, tuple[dict[str, Any], tuple[str, ...], bool | None, str, str]] = {
    # --- swizzle after tiling: the order stacked (issue 18, point 1)
    "swizzle-after-tiling-ok": (
        kernel(
            [FILL_S, tma()], scratch=smem([128, 128], I32, *TS128), outputs=out([128, 128], I32)
        ),
        LOWER,
        None,
        "jax",
        "int32[128, 128] tiled (8, 32) then swizzled 128 (JAX's distributed tests): valid",
    ),
    "swizzle-after-tiling-load": (
        kernel(
            [FILL_S, {"op": "copy", "src": "s", "dst": "out"}],
            scratch=smem([128, 128], I32, *TS128),
            outputs=out([128, 128], I32),
        ),
        LOWER,
        None,
        "jax",
        "the same scratch, a plain load into GMEM: valid",
    ),
    "swizzle-after-small-tile": (
        kernel([FILL_S], scratch=smem([128, 128], I32, T(8, 8), S(128))),
        LOWER,
        None,
        "jax",
        "tile (8, 8) leaves a trailing dim of 8: the swizzle sees (16, 16, 8, 8)",
    ),
    "swizzle-passes-raw-shape": (
        kernel([FILL_S], scratch=smem([128, 32], I32, T(8, 8), S(128))),
        LOWER,
        None,
        "jax",
        "the raw trailing dim (32) fits swizzle 128, the tiled one (8) does not",
    ),
    "swizzle-64-after-tiling": (
        kernel([FILL_S], scratch=smem([128, 128], I32, T(8, 32), S(64))),
        LOWER,
        None,
        "jax",
        "swizzle 64 wants 16 elements; after tiling (8, 32) the trailing dim is 32",
    ),
    "swizzle-then-tiling": (
        kernel(
            [FILL_S, tma()],
            scratch=smem([128, 32], I32, S(128), T(8, 32)),
            outputs=out([128, 32], I32),
        ),
        LOWER,
        None,
        "jax",
        "swizzle first (on the raw shape, fits), then tiling: TMA wants the swizzle last",
    ),
    "swizzle-rank0": (
        kernel([], scratch=smem([], I32, S(128))),
        LOWER,
        None,
        "jax",
        "a rank-0 swizzled scratch: the swizzle indexes a trailing dim that is not there",
    ),
    "tile-longer-than-rank": (
        kernel([FILL_S], scratch=smem([256], "int16", T(16, 64), S(128))),
        LOWER,
        None,
        "jax",
        "a 2-D tile on a 1-D scratch: JAX pairs the tile's first entry with the dim",
    ),
    "tiled-scratch-pl-kernel": (
        kernel([FILL_S], entry="pl.kernel", scratch=smem([128, 128], I32, *TS128)),
        LOWER,
        None,
        "jax",
        "pl.kernel (mpmd_map) does not take a transformed scratch ref",
    ),
    "tiling-without-swizzle": (
        kernel([FILL_S], scratch=smem([128, 128], I32, T(8, 32))),
        LOWER,
        None,
        "jax",
        "a plain store into a tiled, unswizzled SMEM ref: no register layout fits",
    ),
    "gmem-scratch": (
        kernel([], scratch={"g": {"shape": [128, 128], "dtype": I32, "memory_space": "GMEM"}}),
        LOWER,
        None,
        "jax",
        "plgpu.kernel with GMEM scratch, unused: the lowering's resource estimate fails",
    ),
    # --- views of tiled / swizzled SMEM (the harness's misses)
    "tiled-slice-unaligned": (
        kernel([view("s", at(ds(4, 64))), FILL_V], scratch=smem([128, 128], I32, *TS128)),
        LOWER,
        None,
        "jax",
        "a slice of a tiled dim that does not start on a tile boundary",
    ),
    "tiled-int-index": (
        kernel([view("s", at(0)), FILL_V], scratch=smem([128, 128], I32, *TS128)),
        LOWER,
        None,
        "jax",
        "an integer index into a tiled dim",
    ),
    "swizzled-int-index": (
        kernel([view("s", at(None, 0)), FILL_V], scratch=smem([128, 32], I32, S(128))),
        LOWER,
        None,
        "jax",
        "an integer index into the minor dim of a swizzled ref",
    ),
    "swizzled-slice": (
        kernel([view("s", at(None, ds(0, 16))), FILL_V], scratch=smem([128, 32], I32, S(128))),
        LOWER,
        None,
        "jax",
        "a slice of the swizzled dim",
    ),
    "tiled-reshape-unfold": (
        kernel(
            [view("s", {"op": "reshape", "shape": [2, 64, 128]}), FILL_V],
            scratch=smem([128, 128], I32, *TS128),
        ),
        LOWER,
        None,
        "jax",
        "a reshape that splits a tiled dim",
    ),
    "tiled-reshape-flatten": (
        kernel(
            [view("s", {"op": "reshape", "shape": [-1]}), FILL_V],
            scratch=smem([128, 128], I32, *TS128),
        ),
        LOWER,
        None,
        "jax",
        "flattening a ref tiled in both dims",
    ),
    "tiled-reshape-fold": (
        kernel(
            [view("s", {"op": "reshape", "shape": [-1]}), FILL_V],
            scratch=smem([128, 64], "float32", T(8), S(32)),
        ),
        LOWER,
        None,
        "jax",
        "a 1-D tile: flattening folds the tiled dim into an untiled one",
    ),
    "tiled-reshape-trailing-one": (
        kernel(
            [view("s", {"op": "reshape", "shape": [128, 128, 1]}), FILL_V],
            scratch=smem([128, 128], I32, *TS128),
        ),
        LOWER,
        None,
        "jax",
        "adding a trailing unit dim to a tiled ref: an assertion in the commute rule",
    ),
    "tiled-bitcast-tma": (
        kernel(
            [view("s", {"op": "bitcast", "dtype": "float32"}), tma("v")],
            scratch=smem([128, 128], I32, *TS128),
            outputs=out([128, 128], "float32"),
        ),
        LOWER,
        None,
        "jax",
        "a TMA copy from a bitcast view of SMEM",
    ),
    "bitcast-then-reshape-tma": (
        kernel(
            [
                view("s", {"op": "bitcast", "dtype": I32}, {"op": "reshape", "shape": [-1]}),
                tma("v"),
            ],
            scratch=smem(
                [8, 128],
                "float16",
            ),
            outputs=out([512], I32),
        ),
        LOWER,
        None,
        "jax",
        "a reshape after a bitcast does not commute past it",
    ),
    "bitcast-then-transpose": (
        kernel(
            [
                view(
                    "o",
                    {"op": "bitcast", "dtype": "float32"},
                    {"op": "transpose", "perm": [2, 0, 1]},
                ),
                FILL_V,
            ],
            entry="pl.kernel",
            outputs={"o": {"shape": [2, 64, 64], "dtype": "float16"}},
        ),
        LOWER,
        None,
        "jax",
        "a transpose after a bitcast: the second bubbling pass cannot commute it",
    ),
    "transpose-ref-of-tiled": (
        kernel(
            [view("s", {"op": "transpose", "perm": [1, 0], "via": "transpose_ref"}), FILL_V],
            scratch=smem([128, 32], I32, S(128)),
        ),
        LOWER,
        None,
        "jax",
        "transpose_ref of a swizzled scratch: already a TransformedRef (no raw-ref bug)",
    ),
    "tma-transposed-smem": (
        kernel(
            [view("s", {"op": "transpose", "perm": [1, 0]}), tma("v")],
            scratch=smem([128, 128], I32, *TS128),
            outputs=out([128, 128], I32),
        ),
        LOWER,
        None,
        "jax",
        "a TMA copy from a transposed tiled SMEM view",
    ),
    "tma-strided-smem": (
        kernel(
            [view("s", at(None, ds(0, 32))), tma("v")],
            scratch=smem([128, 128], I32, *TS128),
            outputs=out([128, 32], I32),
        ),
        LOWER,
        None,
        "jax",
        "a TMA copy from a column window of a tiled ref: not contiguous",
    ),
    "int8-tiled-gmem-copy": (
        kernel(
            [{"op": "copy", "src": "x_ref", "dst": "s"}],
            buffers=_x([128, 128], "int8"),
            args=X_ARG,
            scratch=smem([128, 128], "int8", T(8, 128), S(128)),
        ),
        LOWER,
        None,
        "jax",
        "int8 copied from GMEM into tiled SMEM: the register layout moves 2 bytes a thread",
    ),
    "empty-slice-reindexed": (
        kernel(
            [view("out", at([1, 1]), at(None, None)), FILL_V],
            entry="pl.kernel",
            outputs=out([8, 128], "float32"),
        ),
        LOWER,
        None,
        "jax",
        "an empty slice, then the view indexed again: even a whole slice of a 0-size dim fails",
    ),
    "swizzled-dynamic-minor": (
        kernel(
            [view("s", at(None, {"block": "b", "size": 32})), FILL_V],
            scratch=smem([128, 32], I32, S(128)),
        ),
        LOWER,
        None,
        "jax",
        "a block-indexed window of the swizzled dim: the commute rule tests a traced start",
    ),
    "smem-capacity": (
        kernel([FILL_S], scratch=smem([256, 256], "float32")),
        LOWER,
        None,
        "jax",
        "256 KiB of SMEM scratch: more than the target's 227 KiB",
    ),
    "smem-capacity-tiling-inflates": (
        kernel([], scratch=smem([64, 64], I32, T(8, 16, 64))),
        LOWER,
        None,
        "jax",
        "16 KiB of scratch, but a 3-D tile on a 2-D ref makes its physical shape 1 MiB",
    ),
    "tma-tiled-unswizzled-3d-tile": (
        kernel([tma()], scratch=smem([128, 64], I32, T(64, 8, 1)), outputs=out([128, 64], I32)),
        LOWER,
        None,
        "jax",
        "a TMA copy from SMEM tiled without swizzle by a tile of rank 3",
    ),
    "f16-tiled-gmem-copy": (
        kernel(
            [{"op": "copy", "src": "x_ref", "dst": "s"}],
            buffers=_x([128, 128], "float16"),
            args=X_ARG,
            scratch=smem([128, 128], "float16", T(8, 64), S(128)),
        ),
        LOWER,
        None,
        "jax",
        "float16 copied from GMEM into tiled SMEM: the transfer misses whole 32-byte sectors",
    ),
    "transposed-unit-minor-gmem": (
        kernel(
            [
                view(
                    "x_ref",
                    at({"block": "b", "size": 128}, [64, 65]),
                    {"op": "transpose", "perm": [1, 0], "via": "transpose_ref"},
                ),
                {"op": "copy", "src": "v", "dst": "out"},
            ],
            buffers=_x([128, 128], "float32"),
            args=X_ARG,
            outputs=out([1, 128], "float32"),
        ),
        LOWER,
        None,
        "jax",
        "a transposed GMEM view whose moved dim has size 1: the load lowers",
    ),
    # --- TMEM (issue 18, point 2)
    "tmem-transpose-method-store": (
        _tmem([{"op": "transpose", "perm": [1, 0]}], "fill"),
        LOWER,
        None,
        "jax",
        "a TMEM ref transposed with ref.transpose, then stored to",
    ),
    "tmem-transpose-method-load": (
        _tmem([{"op": "transpose", "perm": [1, 0]}], "load"),
        LOWER,
        None,
        "jax",
        "a TMEM ref transposed with ref.transpose, then loaded",
    ),
    "tmem-transpose-ref": (
        _tmem([{"op": "transpose", "perm": [1, 0], "via": "transpose_ref"}], "fill"),
        LOWER,
        None,
        "jax",
        "plgpu.transpose_ref of a raw TMEM ref",
    ),
    "tmem-plain-store": (
        _tmem([], "fill"),
        LOWER,
        None,
        "jax",
        "a plain store into TMEM",
    ),
    "tmem-plain-load": (
        _tmem([], "load"),
        LOWER,
        None,
        "jax",
        "a plain load from TMEM",
    ),
    "tmem-transpose-then-reshape": (
        _tmem([{"op": "transpose", "perm": [1, 0]}, {"op": "reshape", "shape": [-1]}], "fill"),
        LOWER,
        None,
        "jax",
        "a TMEM view transposed then reshaped: the reshape does not commute past the transpose",
    ),
    "tmem-reshape": (
        _tmem([{"op": "reshape", "shape": [-1]}], "fill"),
        LOWER,
        None,
        "jax",
        "a reshaped TMEM view",
    ),
    # --- transposed GMEM views: which op the verifier names (point 8)
    "transpose-view-store": (
        _transpose_view("store"),
        LOWER,
        None,
        "jax",
        "the gallery's transpose-view: the store goes through the transposed view",
    ),
    "transpose-view-load": (
        _transpose_view("load"),
        LOWER,
        None,
        "jax",
        "the load goes through it",
    ),
    "transpose-view-both": (
        _transpose_view("both"),
        LOWER,
        None,
        "jax",
        "both sides transposed: the load comes first",
    ),
    "transpose-view-fill": (
        _transpose_view("fill"),
        LOWER,
        None,
        "jax",
        "a fill through a transposed view",
    ),
    # --- races (point 3) and the interpreter (point 4)
    "race-threads-detect-off": (
        _threads_race(),
        ALL,
        True,
        "race",
        "two warpgroups store the same output; detect_races off",
    ),
    "race-blocks-detect-off": (
        _two_block_race(False),
        ALL,
        True,
        "race",
        "the gallery's two-block-race with detect_races off",
    ),
    "race-multimem": (
        _multimem(),
        ALL,
        True,
        "race",
        "two devices multimem_store into the same output",
    ),
    "multimem-interpret": (
        _multimem(),
        ALL,
        False,
        "jax",
        "multimem_store under the GPU interpreter",
    ),
    "race-multicast": (
        _multicast(),
        ALL,
        True,
        "race",
        "two devices TMA-store through a multicast view of the same output",
    ),
    "race-remote": (
        _remote_race(),
        ALL,
        True,
        "race",
        "two devices store into device 0's output through remote_ref",
    ),
    "race-cluster-read": (
        _gallery("cluster-exchange"),
        ALL,
        True,
        "race",
        "the gallery's cluster-exchange: block 0 reads block 1's SMEM unordered",
    ),
    "cluster-ref-interpret": (
        _gallery("cluster-exchange"),
        ALL,
        False,
        "jax",
        "a load through plgpu.cluster_ref under the GPU interpreter",
    ),
    "remote-ref-interpret": (
        _gallery("ring-shift"),
        ALL,
        False,
        "jax",
        "a store through plgpu.remote_ref under the GPU interpreter",
    ),
    # --- rank-0 buffers (point 6)
    "rank0-scalar-init-arg": (
        _rank0("arg", 3.0),
        ALL,
        False,
        "jax",
        "a rank-0 buffer with init 3.0, passed as an argument",
    ),
    "rank0-list-init": (
        _rank0("arg", [3.0]),
        (),
        None,
        "schema",
        "[3.0] is a rank-1 value: still not a rank-0 buffer's init",
    ),
    "rank0-capture": (
        _rank0("capture", "ones"),
        ALL,
        False,
        "jax",
        "a rank-0 buffer closed over by the kernel (a traced scalar)",
    ),
}


# --- the lowering's families, measured while the rules were wired in (issue 18): each
# rule of mpmd_lab.layout_rules at the edge where JAX's answer changes


def _copy_in(shape, dtype, scratch, *steps):
    """``copy`` from a GMEM argument into (a view of) scratch ``s``."""
    body = [view("s", *steps), {"op": "copy", "src": "x_ref", "dst": "v"}] if steps else []
    if not steps:
        body = [{"op": "copy", "src": "x_ref", "dst": "s"}]
    return kernel(body, scratch=scratch, buffers=_x(shape, dtype), args=X_ARG)


def _copy_out(shape, dtype, scratch, *steps):
    """``copy`` from (a view of) scratch ``s`` into an output of ``shape``."""
    src = "v" if steps else "s"
    body = ([view("s", *steps)] if steps else []) + [{"op": "copy", "src": src, "dst": "out"}]
    return kernel(body, scratch=scratch, outputs=out(shape, dtype))


def _fill(scratch, *steps):
    body = ([view("s", *steps)] if steps else []) + [FILL_V if steps else FILL_S]
    return kernel(body, scratch=scratch)


def _tma_of(scratch, out_shape, dtype, *steps):
    src = "v" if steps else "s"
    body = ([view("s", *steps)] if steps else []) + [tma(src)]
    return kernel(body, scratch=scratch, outputs=out(out_shape, dtype))


def _tmem_of(shape, *steps, use="fill", dtype="float32"):
    spec = {"s": {"shape": shape, "dtype": dtype, "memory_space": "TMEM"}}
    if use == "fill":
        return _fill(spec, *steps)
    return _copy_out(use, dtype, spec, *steps)


def _dot(dtype, a, b, a_layout=None, b_layout=None, lhs_t=False, rhs_t=False):
    """``out = a @ b`` of SMEM scratch (their layouts: transforms; ``*_t``: the operand
    is a transposed view of scratch of the transposed shape)."""

    def spec(shape, layout, t):
        return {
            "shape": shape[::-1] if t else shape,
            "dtype": dtype,
            "memory_space": "SMEM",
            "transforms": list(layout or []),
        }

    body = []
    for name, t in (("a", lhs_t), ("b", rhs_t)):
        if t:
            body.append(view(name, TR, name=f"{name}v"))
    lhs, rhs = "av" if lhs_t else "a", "bv" if rhs_t else "b"
    return kernel(
        [*body, {"op": "dot", "dst": "out", "lhs": lhs, "rhs": rhs}],
        scratch={"a": spec(a, a_layout, lhs_t), "b": spec(b, b_layout, rhs_t)},
        outputs=out([a[0], b[1]], F32),
    )


def _dot_window(dtype, a, b, a_layout, b_layout, lhs=(), rhs=(), a_scratch=None, b_scratch=None):
    """``out = a @ b`` where an operand is a view (``lhs``/``rhs``: its steps) of SMEM
    scratch of shape ``*_scratch`` (default: the operand's), with its own layout."""

    def spec(shape, layout):
        return {"shape": shape, "dtype": dtype, "memory_space": "SMEM", "transforms": layout}

    body = [view(n, *steps, name=f"{n}v") for n, steps in (("a", lhs), ("b", rhs)) if steps]
    return kernel(
        [
            *body,
            {"op": "dot", "dst": "out", "lhs": "av" if lhs else "a", "rhs": "bv" if rhs else "b"},
        ],
        scratch={"a": spec(a_scratch or a, a_layout), "b": spec(b_scratch or b, b_layout)},
        outputs=out([a[0], b[1]], F32),
    )


def _packed_tmem(dtype):
    return {"s": {"shape": [128, 128], "dtype": dtype, "memory_space": "TMEM", "packed": True}}


TP = {"op": "transpose", "perm": [1, 0]}
F32 = "float32"


def _reshape(*shape):
    return {"op": "reshape", "shape": list(shape)}


FAMILIES: dict[str, tuple[dict[str, Any], str]] = {
    # register transfers of tiled SMEM (layout_rules.smem_register_error)
    "tiled-rows-not-64": (
        _copy_in([32, 128], F32, smem([32, 128], F32, *TS128)),
        "a tiled, swizzled view of 32 rows: the WGMMA register tile has 64",
    ),
    "tiled-rows-192": (
        _copy_in([192, 128], F32, smem([192, 128], F32, *TS128)),
        "192 rows (a multiple of 64): a register layout fits",
    ),
    "tiling-only-narrow": (
        _copy_in([128, 128], F32, smem([128, 128], F32, T(8, 16))),
        "tiling (8, 16) without a swizzle, float32: a layout fits",
    ),
    "tiling-only-wide": (
        _fill(smem([128, 128], F32, T(8, 32))),
        "tiling (8, 32) without a swizzle: no layout fits",
    ),
    "tiling-only-int8-gmem": (
        _copy_in([128, 128], "int8", smem([128, 128], "int8", T(8, 32))),
        "int8 through tiling (8, 32) without a swizzle: the GMEM side moves 2 bytes a thread",
    ),
    "rank1-tile-swizzle-64": (
        _fill(smem([128, 128], F32, T(16), S(64))),
        "a one-dim tile (16,) with swizzle 64: no layout fits",
    ),
    "rank1-tile-swizzle-128": (
        _fill(smem([128, 128], F32, T(32), S(128))),
        "a one-dim tile (32,) with swizzle 128: a layout fits",
    ),
    # a one-dim tile as wide as the swizzle: whether a layout fits is decided by how many
    # tiles the minor dim holds (k), measured for k = 1..16
    "rank1-tile-int16-k2": (
        _fill(smem([64, 32], "int16", T(16), S(32))),
        "int16, tile (16,), swizzle 32, 2 tiles a row: a layout fits",
    ),
    "rank1-tile-int16-k4": (
        _fill(smem([64, 64], "int16", T(16), S(32))),
        "int16, tile (16,), swizzle 32, 4 tiles a row: no layout fits",
    ),
    "rank1-tile-int8-k3-swizzle-128": (
        _fill(smem([128, 384], "int8", T(128), S(128))),
        "int8, tile (128,), swizzle 128, 3 tiles a row: a layout fits",
    ),
    "rank1-tile-int8-k8-swizzle-128": (
        _fill(smem([64, 1024], "int8", T(128), S(128))),
        "int8, tile (128,), swizzle 128, 8 tiles a row: no layout fits",
    ),
    "rank1-tile-f32-k3-swizzle-64": (
        _copy_in([64, 48], F32, smem([64, 48], F32, T(16), S(64))),
        "float32, tile (16,), swizzle 64, 3 tiles a row: no layout fits",
    ),
    "rank1-tile-f32-k6-swizzle-128": (
        _copy_in([64, 192], F32, smem([64, 192], F32, T(32), S(128))),
        "float32, tile (32,), swizzle 128, 6 tiles a row: a layout fits",
    ),
    "rank1-tile-f32-k3-swizzle-32": (
        _fill(smem([2, 64, 24], F32, T(8), S(32))),
        "float32, tile (8,), swizzle 32, 3 tiles a row (a leading dim): a layout fits",
    ),
    # layout inference's search raises a non-contiguous SMEM ref's error on its way,
    # before it finds no solution: whatever the statements' order
    "smem-column-after-unsat-copy": (
        kernel(
            [
                view("s", at(None, 0)),
                {"op": "copy", "src": "z_ref", "dst": "out"},  # 64 elements: no layout
                {"op": "copy", "src": "x_ref", "dst": "v"},  # a strided SMEM column
            ],
            buffers={**_x([128], F32), "z": {"shape": [64], "dtype": F32}},
            args=[*X_ARG, {"buffer": "z", "param": "z_ref"}],
            outputs={"out": {"shape": [64], "dtype": F32}},
            scratch=smem([128, 32], F32),
        ),
        "a 64-element copy (no register layout), then a store into a strided SMEM column: "
        "the column's error",
    ),
    "smem-column-of-64": (
        kernel(
            [view("s", at(None, 0)), {"op": "copy", "src": "x_ref", "dst": "v"}],
            buffers=_x([64], "float16"),
            args=X_ARG,
            scratch=smem([64, 32], "float16"),
        ),
        "a store of 64 elements (no register layout) into a strided SMEM column: the "
        "column's error",
    ),
    # a TMA store of a transposed view of swizzled SMEM: a one-dim tile leaves layout
    # inference no SMEM layout; a tile of one row is a tile of two dims (the TMA rules)
    "tma-transposed-one-dim-tile": (
        _tma_of(smem([128, 128], "float16", T(64), S(128)), [128, 128], "float16", TR),
        "a TMA store of a transposed view, tile (64,): no SMEM layout",
    ),
    "tma-transposed-one-row-tile": (
        _tma_of(smem([128, 128], "float16", T(1, 64), S(128)), [128, 128], "float16", TR),
        "a TMA store of a transposed view, tile (1, 64): the GMEM side's minor stride",
    ),
    "rank1-tile-f32-k8-swizzle-128": (
        _fill(smem([128, 256], F32, T(32), S(128))),
        "float32, tile (32,), swizzle 128, 8 tiles a row: no layout fits",
    ),
    # JAX's transfer schedule for a WGMMA layout (smem_transfer.transferable, ported):
    # a tile of one row is a tile of one dim; 2-row tiles and narrow unswizzled tiles
    # leave every schedule with bank conflicts or misaligned vectors
    "one-row-tile-uint8-swizzle-32": (
        _fill(smem([128, 128], "uint8", T(1, 32), S(32))),
        "uint8, tile (1, 32), swizzle 32: as the one-dim tile (32,), 4 tiles a row: no layout",
    ),
    "one-row-tile-bf16-copy-out": (
        _copy_out([128, 128], "bfloat16", smem([128, 128], "bfloat16", T(1, 16), S(32))),
        "bfloat16, tile (1, 16), swizzle 32, copied out: no layout (before the GMEM side)",
    ),
    "one-row-tile-f32-swizzle-128": (
        _fill(smem([128, 128], F32, T(1, 32), S(128))),
        "float32, tile (1, 32), swizzle 128: 4 tiles a row, a layout fits",
    ),
    "two-row-tile-f32-swizzle-128": (
        _fill(smem([128, 128], F32, T(2, 32), S(128))),
        "float32, tile (2, 32), swizzle 128: every schedule has bank conflicts",
    ),
    "two-row-tile-f16-swizzle-32": (
        _copy_in([128, 128], "float16", smem([128, 128], "float16", T(2, 16), S(32))),
        "float16, tile (2, 16), swizzle 32: no layout (before the GMEM side)",
    ),
    "one-dim-tile-column-window": (
        _fill(smem([64, 256], F32, T(32), S(128)), at(None, ds(0, 128))),
        "a window of half the columns of tile (32,) swizzle 128: 4 tiles a view row, "
        "but the row stride is the ref's 8 tiles: no layout",
    ),
    "tiling-only-f32-4-wide": (
        _fill(smem([128, 128], F32, T(8, 4))),
        "float32 tiled (8, 4) without a swizzle: a tile narrower than the 8 a row of "
        "lanes moves: no layout",
    ),
    "swizzle-only-store": (
        _fill(smem([128, 32], F32, S(128))),
        "a plain store into SMEM swizzled without a tiling: no layout fits",
    ),
    # a transposed view of tiled SMEM: layout inference transposes the tiling with the
    # view and asks JAX's transfer schedule (smem_transfer.transfer_layouts); the first
    # layout with one is the value's: WGMMA (the GMEM side then decides) or
    # WGMMA_TRANSPOSED (the dialect lowering's tiled strides error)
    "transposed-two-row-tile-fill": (
        _fill(smem([256, 64], F32, T(2, 8), S(32)), TP),
        "a fill of a transposed view, float32 tile (2, 8) swizzle 32: no schedule",
    ),
    "transposed-two-row-tile-copy": (
        _copy_in([64, 256], F32, smem([256, 64], F32, T(2, 8), S(32)), TP),
        "a copy into the same view: no layout (not the tiled strides error)",
    ),
    "transposed-one-row-tile-int8-fill": (
        _fill(smem([64, 256], "int8", T(1, 128), S(128)), TP),
        "int8, tile (1, 128) swizzle 128, transposed: the tile (128, 1) has a schedule",
    ),
    "transposed-unswizzled-f16-copy": (
        _copy_in([64, 256], "float16", smem([256, 64], "float16", T(8, 8)), TP),
        "float16 tiled (8, 8) without a swizzle, transposed: the transposed txmatrix "
        "moves it in the WGMMA layout; the GMEM side fails",
    ),
    "transposed-two-row-tile-f16-copy": (
        _copy_in([64, 256], "float16", smem([256, 64], "float16", T(2, 32), S(64)), TP),
        "float16 tile (2, 32) swizzle 64, transposed: only WGMMA_TRANSPOSED has a "
        "schedule: the tiled strides error, not the GMEM side's",
    ),
    "transposed-3d-two-row-tile-fill": (
        _fill(smem([2, 128, 64], F32, T(2, 8), S(32)), {"op": "transpose", "perm": [0, 2, 1]}),
        "a 3-D ref's minor dims swapped, float32 tile (2, 8) swizzle 32: no schedule",
    ),
    # a 3-D tile: the view's tiling is the scratch's permuted as its tiled dims are; a
    # tiled dim moved among the untiled ones leaves none
    "tile3d-perm-210-fill": (
        _fill(smem([2, 64, 128], F32, T(1, 8, 8), S(32)), {"op": "transpose", "perm": [2, 1, 0]}),
        "a 3-D tile (1, 8, 8) swizzle 32, dims reversed: the tiled dims move: no layout",
    ),
    "tile3d-perm-210-f16-copy": (
        _copy_out(
            [128, 64, 2],
            "float16",
            smem([2, 64, 128], "float16", T(1, 8, 16), S(32)),
            {"op": "transpose", "perm": [2, 1, 0]},
        ),
        "the same in float16, copied out: no layout (not the GMEM side's error)",
    ),
    "tile3d-minor-swap-f16-fill": (
        _fill(smem([2, 64, 128], "float16", T(1, 8, 16)), {"op": "transpose", "perm": [0, 2, 1]}),
        "float16, unswizzled 3-D tile (1, 8, 16), minor dims swapped: the tile (1, 16, 8) "
        "has a schedule: a constant is stored",
    ),
    "tile3d-minor-swap-f16-copy": (
        _copy_out(
            [2, 128, 64],
            "float16",
            smem([2, 64, 128], "float16", T(1, 8, 16)),
            {"op": "transpose", "perm": [0, 2, 1]},
        ),
        "the same copied out: only the transposed layout moves it: the tiled strides error",
    ),
    "transposed-tiled-f32-copy": (
        _copy_in([128, 128], F32, smem([128, 128], F32, *TS128), TP),
        "a float32 copy through a transposed view of tiled SMEM: the tiled transfer fails",
    ),
    "transposed-tiled-f16-copy": (
        _copy_out([128, 128], "float16", smem([128, 128], "float16", T(8, 64), S(128)), TP),
        "the same in float16: the GMEM side of the WGMMA layout fails first",
    ),
    "transposed-tiled-int8-copy": (
        _copy_in([128, 128], "int8", smem([128, 128], "int8", T(8, 32), S(32)), TP),
        "the same in int8: the tiled transfer fails (not the GMEM side)",
    ),
    "transposed-tiled-fill": (
        _fill(smem([128, 128], F32, *TS128), TP),
        "a constant stored through a transposed view of tiled SMEM: lowers",
    ),
    "transposed-tiled-no-swizzle": (
        _fill(smem([128, 128], F32, T(8, 16)), TP),
        "a transposed view of SMEM tiled without a swizzle: no layout fits",
    ),
    "transposed-tiled-no-swizzle-3d": (
        _fill(
            smem([2, 64, 64], I32, T(16, 8)),
            {"op": "transpose", "perm": [0, 2, 1], "via": "transpose_ref"},
            {"op": "transpose", "perm": [2, 1, 0]},
        ),
        "the fuzz's find (seed 634972487): a 3-D tiled, unswizzled view, transposed twice",
    ),
    "transposed-one-row-tile": (
        _fill(smem([128, 128], F32, T(1, 32), S(128)), TP),
        "a transposed view of SMEM tiled by one-row tiles: no layout fits",
    ),
    # TMA copies (layout_rules.tma_smem_error)
    "tma-transposed-major": (
        _tma_of(smem([2, 64, 32], F32), [64, 2, 32], F32, {"op": "transpose", "perm": [1, 0, 2]}),
        "a TMA copy from a view that transposes major dims only: lowers",
    ),
    "tma-transposed-3d": (
        _tma_of(smem([2, 64, 32], F32), [2, 32, 64], F32, {"op": "transpose", "perm": [0, 2, 1]}),
        "a TMA copy from a view that moves the minor dim: the GMEM minor stride is 64",
    ),
    "tma-transposed-window": (
        _tma_of(smem([16, 256], "float16"), [8, 16], "float16", TP, at(ds(0, 8))),
        "a transposed window: the SMEM block is strided in memory order",
    ),
    "tma-column-int": (
        _tma_of(smem([128, 128], F32), [128], F32, at(None, 3)),
        "a TMA copy of a column: no unit-stride dim for a layout",
    ),
    "tma-narrow-rows": (
        _tma_of(smem([8, 8], "uint8"), [8, 8], "uint8"),
        "a TMA copy into 8-byte GMEM rows",
    ),
    "tma-swizzle-row": (
        _tma_of(smem([128, 32], F32, S(128)), [64, 64], F32, _reshape(64, 64)),
        "a swizzled SMEM ref reshaped to rows of 64: not the swizzle's row of 32",
    ),
    # TMEM views (layout_rules.tmem_access_error)
    "tmem-column-slice": (
        _tmem_of([128, 128], at(None, ds(1, 31))),
        "a slice of TMEM columns keeps every lane: only the plain store fails",
    ),
    # packed TMEM (packing elements a 32-bit column): a column slice's subview asks its
    # size, the dim and its start to share a multiple of the packing (Divides)
    "tmem-packed-odd-column-slice": (
        _fill(
            _packed_tmem("float16"),
            at(None, ds(1, 32)),
        ),
        "packed float16 TMEM, columns from 1: no TMEM layout",
    ),
    "tmem-packed-even-column-slice": (
        _fill(
            _packed_tmem("float16"),
            at(None, ds(2, 32)),
        ),
        "packed float16 TMEM, 32 columns from 2: a TMEM layout (the plain store fails)",
    ),
    "tmem-packed-int8-slice-size": (
        _copy_out(
            [128, 30],
            "int8",
            _packed_tmem("int8"),
            at(None, ds(4, 30)),
        ),
        "packed int8 TMEM, 30 columns from 4: 30 is not a multiple of 4: no TMEM layout",
    ),
    "tmem-packed-slice-of-slice": (
        _fill(
            _packed_tmem("bfloat16"),
            at(None, ds(0, 64)),
            at(None, ds(1, 16)),
        ),
        "the fuzz's find (seed 8007): a slice of a packed column slice from 1: no layout",
    ),
    "tmem-packed-block-window": (
        _fill(
            _packed_tmem("float16"),
            at(None, {"block": "b", "size": 3}),
        ),
        "a window of 3 packed columns at the block index: no layout (size 8 has one)",
    ),
    "tmem-64-rows-column-slice": (
        _tmem_of([64, 128], at(None, ds(32, 32))),
        "a slice of the columns of 64-row TMEM: the subview's rows (64) are not a "
        "multiple of the TMEM layout's 128 lanes: no layout",
    ),
    "tmem-64-rows-block-rows-then-columns": (
        _fill(
            {"s": {"shape": [64, 128], "dtype": "int8", "memory_space": "TMEM", "packed": True}},
            at({"block": "b", "size": 64}),
            at(None, ds(96, 32)),
        ),
        "the fuzz's find (seed 8012): the block's rows (all 64), then 32 columns: no layout",
    ),
    "tmem-row-slice": (
        _tmem_of([128, 128], at(ds(0, 64))),
        "a slice of TMEM rows (lanes): no layout",
    ),
    "tmem-identity-transpose-after-at": (
        _tmem_of([128, 128], at(None, None), {"op": "transpose", "perm": [0, 1]}),
        "an identity transpose of an indexed TMEM view changes nothing",
    ),
    "tmem-identity-transpose": (
        _tmem_of([128, 128], {"op": "transpose", "perm": [0, 1]}),
        "an identity transpose of the TMEM ref itself: no layout",
    ),
    "tmem-unfold-refold": (
        _tmem_of([128, 64], _reshape(1, 128, 64), _reshape(128, 64), use=[128, 64], dtype=I32),
        "a reshape and its inverse: folded away",
    ),
    "tmem-unfold": (
        _tmem_of([128, 256], _reshape(1, 128, 256)),
        "an unfold of TMEM (expand_shape): no layout",
    ),
    # strided GMEM and SMEM access (layout_rules.transposed_access_error, view_memref)
    "gmem-column-256": (
        kernel(
            [view("x_ref", at(None, 3)), {"op": "copy", "src": "v", "dst": "out"}],
            buffers=_x([256, 128], F32),
            args=X_ARG,
            outputs=out([256], F32),
        ),
        "a column of 256 (2 a thread): a strided vector.load",
    ),
    "gmem-column-128": (
        kernel(
            [view("x_ref", at(None, 3)), {"op": "copy", "src": "v", "dst": "out"}],
            buffers=_x([128, 128], F32),
            args=X_ARG,
            outputs=out([128], F32),
        ),
        "a column of 128 (1 a thread): a scalar access, any stride",
    ),
    "smem-transposed-store": (
        _fill(smem([128, 128], F32), TP),
        "a store through a transposed view of untiled SMEM: a strided vector.store",
    ),
    "strided-unfold-load": (
        kernel(
            [
                view("x_ref", at(ds(0, 32), ds(8, 8)), _reshape(2, 16, 8)),
                {"op": "copy", "src": "v", "dst": "out"},
            ],
            buffers=_x([64, 32], F32),
            args=X_ARG,
            outputs=out([2, 16, 8], F32),
        ),
        "an unfold of a strided view: memref_reshape unfolds any strides",
    ),
    "strided-fold-load": (
        kernel(
            [
                view("x_ref", at([0, 64], [0, 64]), _reshape(-1)),
                {"op": "copy", "src": "v", "dst": "out"},
            ],
            buffers=_x([128, 128], F32),
            args=X_ARG,
            outputs=out([4096], F32),
        ),
        "a fold of a strided view: memref_fold needs contiguous dims",
    ),
    # WGMMA operands (Dot.lower): rhs is asked for an MMA tiling, lhs for rhs's
    "dot-lhs-untileable": (
        _dot("float16", [64, 72], [72, 64]),
        "lhs [64, 72] of float16 fits no MMA tiling (72 is not a multiple of 16): rhs does, "
        "lhs takes rhs's: no layout (not DOT_SMEM_TILING, which is rhs's)",
    ),
    "dot-int8-lhs-narrow": (
        _dot("int8", [64, 16], [16, 64]),
        "int8 lhs [64, 16]: narrower than the (8, 32) tile: no layout, before the "
        "accumulator's dtype error",
    ),
    "dot-swizzles-differ": (
        _dot("float16", [64, 64], [64, 64], (T(8, 16), S(32)), (T(8, 64), S(128))),
        "lhs swizzled 32, rhs 128: lhs must take rhs's layout: no layout",
    ),
    "dot-rhs-layout-too-wide-for-lhs": (
        _dot("float16", [64, 32], [32, 64], None, (T(8, 64), S(128))),
        "rhs tiled (8, 64) swizzle 128, lhs [64, 32] declares none: rhs's tile does not "
        "divide it: no layout",
    ),
    "dot-f32-rhs-transposed": (
        _dot("float32", [64, 64], [64, 64], rhs_t=True),
        "float32 with rhs a transposed view of [N, K] scratch (K-major): lowers (the "
        "dialect's transposes are an lhs stored [K, M] or an rhs stored [K, N])",
    ),
    "dot-f32-lhs-transposed": (
        _dot("float32", [64, 64], [64, 64], lhs_t=True, rhs_t=True),
        "float32 with lhs a transposed view: only 16-bit WGMMA transposes",
    ),
    # windows of WGMMA operands: their steps commuted past the scratch's tiling, and the
    # subview's Divides (the tile divides each window's offset and size)
    "dot-window-rows-unaligned": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 64), S(128)],
            lhs=[at(ds(4, 64))],
            a_scratch=[80, 128],
        ),
        "lhs rows 4..68 of scratch tiled (8, 64): the window does not start at a tile",
    ),
    "dot-window-cols-unaligned": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 64), S(128)],
            rhs=[at(None, ds(32, 128))],
            b_scratch=[128, 256],
        ),
        "rhs columns 32..160 of scratch tiled (8, 64): the window does not start at a tile",
    ),
    "dot-window-layouts-differ": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 16), S(32)],
            lhs=[at(ds(8, 64))],
            a_scratch=[80, 128],
        ),
        "an aligned window of lhs swizzled 128, rhs swizzled 32: lhs takes rhs's layout, "
        "no layout (a window keeps its scratch's)",
    ),
    "dot-window-stage-layouts-differ": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 16), S(32)],
            [T(8, 64), S(128)],
            lhs=[at(1)],
            a_scratch=[2, 64, 128],
        ),
        "lhs one stage of a [2, 64, 128] buffer swizzled 32, rhs swizzled 128: no layout",
    ),
    "dot-window-untiled-rows-unaligned": (
        _dot_window(
            "float16", [64, 128], [128, 128], [], [], lhs=[at(ds(4, 64))], a_scratch=[80, 128]
        ),
        "rows 4..68 of untiled scratch: the subview asks its tiling (8 rows) to divide 4: "
        "no layout",
    ),
    "dot-window-f32-rhs-transposed": (
        _dot_window(
            "float32",
            [64, 64],
            [64, 64],
            [T(8, 32), S(128)],
            [T(8, 32), S(128)],
            rhs=[at(ds(8, 64)), TR],
            b_scratch=[80, 64],
        ),
        "float32, rhs a transposed aligned window (K-major): lowers",
    ),
    "dot-window-dynamic-unaligned": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 64), S(128)],
            lhs=[at(ds("b*4", 64))],
            a_scratch=[128, 128],
        ),
        "lhs rows from b*4 of tiled scratch: layout inference knows the start a multiple "
        "of 4, not of the tile's 8 rows: no layout",
    ),
    "dot-window-dynamic-layouts-differ": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 16), S(32)],
            lhs=[at({"block": "b", "size": 64})],
            a_scratch=[128, 128],
        ),
        "lhs block b of 64 rows swizzled 128, rhs swizzled 32: no layout",
    ),
    "dot-window-dynamic-sum": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 64), S(128)],
            lhs=[at(ds("b*64 + 64", 64))],
            a_scratch=[192, 128],
        ),
        "lhs rows from b*64 + 64: a sum of two multiples of 64 is known one: lowers",
    ),
    "dot-window-aligned": (
        _dot_window(
            "float16",
            [64, 128],
            [128, 128],
            [T(8, 64), S(128)],
            [T(8, 64), S(128)],
            lhs=[at(ds(8, 64))],
            rhs=[at(None, ds(64, 128))],
            a_scratch=[80, 128],
            b_scratch=[128, 256],
        ),
        "aligned windows of both operands, one layout: lowers",
    ),
    # K in groups of the swizzle's width: a transposed lhs is tiled along M, not K
    "dot-f16-lhs-transposed-k16": (
        _dot("float16", [64, 16], [16, 64], lhs_t=True),
        "float16 lhs a transposed view [64, 16]: swizzle 128 fits both, K = 16 is not a "
        "group of 64",
    ),
    "dot-f32-lhs-transposed-k16": (
        _dot("float32", [64, 16], [16, 64], lhs_t=True),
        "float32 lhs a transposed view, K = 16: K's group of 32 is refused before the transposes",
    ),
    "dot-f16-lhs-transposed-k16-swizzle-32": (
        _dot("float16", [64, 16], [16, 64], [T(8, 16), S(32)], [T(8, 16), S(32)], lhs_t=True),
        "float16 lhs a transposed view, both swizzled 32: groups of 16, K = 16 lowers",
    ),
    "dot-rhs-transposed-narrow-n": (
        _dot("float16", [64, 64], [64, 24], rhs_t=True),
        "rhs [64, 24] a transposed view: its tiling is (64, 8) transposed, N = 24 fits",
    ),
    "dot-rhs-transposed-layouts-differ": (
        _dot("float16", [64, 64], [64, 64], (T(8, 64), S(128)), (T(8, 16), S(32)), rhs_t=True),
        "lhs swizzled 128, rhs a transposed view of scratch swizzled 32: no layout",
    ),
    "dot-same-layouts": (
        _dot("float16", [64, 64], [64, 64], (T(8, 64), S(128)), (T(8, 64), S(128))),
        "both tiled (8, 64) swizzle 128: lowers",
    ),
    # SMEM capacity (layout_rules.smem_capacity_error): each buffer rounded to 1 KiB
    "smem-capacity-aligned": (
        kernel(
            [],
            scratch={
                f"s{i}": {"shape": sh, "dtype": F32, "memory_space": "SMEM"}
                for i, sh in enumerate([[256, 224], [1, 1], [1, 1], [1, 1], [1, 1]])
            },
        ),
        "224 KiB and four 4-byte buffers: 228 KiB once each is rounded up to 1 KiB",
    ),
    "smem-capacity-barriers": (
        kernel(
            [],
            scratch={
                "s": {"shape": [256, 226], "dtype": F32, "memory_space": "SMEM"},
                **{f"b{i}": {"kind": "barrier"} for i in range(129)},
            },
        ),
        "226 KiB and 129 barriers of 8 bytes: 8 bytes over",
    ),
    # captured scalars (layout_rules.captured_scalar_error)
    "rank0-capture-int32": (
        kernel(
            [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "cv"}],
            buffers={**_x([128], I32), "c": {"shape": [], "dtype": I32, "init": 2}},
            args=X_ARG,
            outputs=out([128], I32),
            captures=[{"name": "cv", "buffer": "c"}],
        ),
        "a captured rank-0 int32 array: memref<i32> where the jaxpr has i32",
    ),
    "rank0-capture-ref": (
        kernel(
            [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "cv"}],
            buffers={
                **_x([128], F32),
                "c": {"shape": [], "dtype": F32, "init": 2.0, "as_ref": True},
            },
            args=X_ARG,
            captures=[{"name": "cv", "buffer": "c"}],
        ),
        "a captured rank-0 Ref: lowers",
    ),
}
for _name, (_d, _note) in FAMILIES.items():
    CASES[_name] = (_d, LOWER, None, "jax", _note)


def case_scenarios() -> dict[str, dict[str, Any]]:
    """Each case's scenario dict, named after the case."""
    out = {}
    for name, (d, *_rest) in CASES.items():
        d = copy.deepcopy(d)
        d["name"] = name
        out[name] = d
    return out
