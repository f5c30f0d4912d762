"""Hostile inputs, eighth round: what a fuzz against real JAX found, each held to JAX's
own verdict (its trace and Mosaic GPU lowering, run here on a CPU)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import answers, assert_agrees  # noqa: E402


def _kernel(entry: str = "plgpu.kernel") -> dict[str, Any]:
    return {
        "name": "round8",
        "buffers": {},
        "call": {
            "entry": entry,
            "args": [],
            "outputs": {},
            "scratch": {},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": []}],
        },
    }


# ------------------------------------- an SMEM layout that does not fit the scratch


def _tiled(
    use: str,
    tile: list[int],
    shape: list[int] | None = None,
    dtype: str = "bfloat16",
    view: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """SMEM scratch ``s`` of ``shape`` tiled by ``tile`` (no swizzle), accessed through
    ``view`` (a let ``v``) by ``use``: a fill, a plain copy in or out, a TMA store, or a
    TMA load (``tma_load``) into it."""
    shape = shape or [64, 128]
    s = _kernel()
    c = s["call"]
    body = c["programs"][0]["body"]
    c["scratch"]["s"] = {
        "shape": shape,
        "dtype": dtype,
        "memory_space": "SMEM",
        "transforms": [{"op": "tiling", "tile": tile}],
    }
    ref = "s"
    vshape = shape
    if view:
        body.append({"let": "v", "ref": "s", "transforms": view})
        ref = "v"
        vshape = [view[0]["index"][0]["ds"][1], *shape[1:]]
    if use == "fill":
        body.append({"op": "fill", "dst": ref, "value": 1})
    elif use == "copy_in":
        s["buffers"]["y"] = {"shape": vshape, "dtype": dtype, "init": "iota"}
        c["args"].append({"buffer": "y", "param": "y_ref"})
        body.append({"op": "copy", "src": "y_ref", "dst": ref})
    elif use == "tma_load":
        s["buffers"]["y"] = {"shape": vshape, "dtype": dtype, "init": "iota"}
        c["args"].append({"buffer": "y", "param": "y_ref"})
        c["scratch"]["bar"] = {"kind": "barrier"}
        body.append({"op": "copy_gmem_to_smem", "src": "y_ref", "dst": ref, "barrier": "bar"})
        body.append({"op": "barrier_wait", "barrier": "bar"})
    else:  # copy_out, tma_store
        c["outputs"]["r"] = {"shape": vshape, "dtype": dtype}
        body.append({"op": "copy" if use == "copy_out" else "tma_store", "src": ref, "dst": "r"})
    if not c["outputs"]:
        c["outputs"]["r"] = {"shape": [128], "dtype": "float32"}
    return s


_HALF = [{"op": "at", "index": [{"ds": ["0", 32]}]}]

#: name -> scenario: layout inference takes a scratch's tiling only where it tiles the
#: ref as declared (``_with_transforms_constraint_system`` -> ``_is_valid_smem_layout_
#: assignment``): the ``with_transforms`` op before *every* access refuses a tile of
#: more dims than the scratch (unswizzled: a swizzle's own trace rule fails first), with
#: the scratch's shape in its message, before layout inference solves anything (the
#: stacks fuzz's class: a plain copy into a view of such a scratch was
#: GPU_LAYOUT_INFERENCE, a fill was "valid", a TMA load unchecked, a TMA store of a view
#: printed the view's shape)
TILED = {
    **{
        f"{use}-3d-tile": _tiled(use, [16, 64, 1])
        for use in ("fill", "copy_in", "copy_out", "tma_store", "tma_load")
    },
    **{
        f"{use}-3d-tile-half-view": _tiled(use, [16, 64, 1], view=_HALF)
        for use in ("fill", "copy_in", "copy_out", "tma_store", "tma_load")
    },
    "copy_in-4d-tile-3d-ref": _tiled("copy_in", [1, 16, 64, 1], [2, 64, 128], "float32"),
    "tma_load-int8": _tiled("tma_load", [16, 64, 1], dtype="int8"),
    # the tile fits: no such error (the 2-d tile's register layout is another rule's)
    "tma_load-2d-tile": _tiled("tma_load", [8, 64], dtype="float32"),
    "tma_load-3d-tile-3d-ref": _tiled("tma_load", [1, 8, 64], [4, 64, 128], "float32"),
}


def _after_a_layout_failure(use: str) -> dict[str, Any]:
    """``_tiled(use, [16, 64, 1])`` after a copy of 100 elements, which no register
    layout fits (layout inference's solve, after every op's constraints are derived)."""
    s = _tiled(use, [16, 64, 1])
    s["buffers"]["w"] = {"shape": [100], "dtype": "float32"}
    s["call"]["args"].append({"buffer": "w", "param": "w_ref"})
    s["call"]["outputs"]["o2"] = {"shape": [100], "dtype": "float32"}
    s["call"]["programs"][0]["body"].insert(0, {"op": "copy", "src": "w_ref", "dst": "o2"})
    return s


TILED.update(
    {
        # derived before anything is solved: the later statement's error is the first
        **{
            f"{use}-after-a-layout-failure": _after_a_layout_failure(use)
            for use in ("fill", "tma_store", "tma_load")
        },
        # a tile the cast cannot view as the scratch (verified before layout inference):
        # a TMA load's destination too
        **{
            f"{use}-2d-tile-on-1d-ref": _tiled(use, [8, 128], [128], "float32")
            for use in ("copy_in", "tma_load")
        },
    }
)


@pytest.fixture(scope="module")
def jax_tiled() -> dict[str, dict[str, Any]]:
    return answers(TILED)


@pytest.mark.parametrize("name", list(TILED))
def test_a_tile_that_does_not_fit_the_scratch_fails_every_access(
    name: str, jax_tiled: dict
) -> None:
    assert_agrees(TILED[name], jax_tiled[name])


# ------------------------------- a sharded input's slice: its bounds before its sharding


def _global_view(
    index: list[Any], use: dict[str, Any] | None, y_as_ref: bool = False, shard_map: bool = False
) -> dict[str, Any]:
    """Two devices without shard_map: the kernel sees ``y`` (4 x 256 per device) as the
    global 8 x 256 array; ``v = y_ref.at[*index]`` then ``use``."""
    s = _kernel()
    s["buffers"] = {
        "x": {"shape": [4, 256], "dtype": "float32", "as_ref": True},
        "y": {"shape": [4, 256], "dtype": "float32", "as_ref": y_as_ref},
    }
    c = s["call"]
    c["args"] = [{"buffer": "x", "param": "x_ref"}, {"buffer": "y", "param": "y_ref"}]
    c["outputs"] = {"out": {"shape": [3, 128], "dtype": "int8"}}
    body = [{"let": "v", "ref": "y_ref", "transforms": [{"op": "at", "index": index}]}]
    c["programs"][0]["body"] = body + ([use] if use else [])
    s["device_mesh"] = {"dev": 2}
    s["run"] = {"shard_map": shard_map}
    return s


_TMA_V = {"op": "tma_store", "src": "v", "dst": "v"}

#: name -> scenario: ``NDIndexer`` checks a static slice's bounds when ``.at`` makes it,
#: the sharding of the ref (``_validate_sharding``) only when the view's type is next
#: computed: a slice out of the global array's bounds is the first error, whatever the
#: view is used for (fuzz fz39: "TMA_SRC_NOT_SMEM" where JAX raised the slice, a copy
#: was SHARDED_REF_SLICE, an unused view MPMD_NOT_MANUAL)
SHARDED = {
    "oob-tma": _global_view([{"ds": [1, 128]}], _TMA_V),
    "oob-tma-as-ref": _global_view([{"ds": [1, 128]}], _TMA_V, y_as_ref=True),
    "oob-copy": _global_view([{"ds": [1, 128]}], {"op": "copy", "src": "v", "dst": "out"}),
    "oob-unused": _global_view([{"ds": [1, 128]}], None),
    "oob-python-slice-past-the-end": _global_view([[9, 12]], None),
    "oob-after-an-int": _global_view([0, {"ds": [300, 10]}], None),
    "oob-shard-map": _global_view([{"ds": [1, 128]}], _TMA_V, shard_map=True),
    # in bounds: the sharding's own errors, as before
    "in-bounds-partial": _global_view([{"ds": [0, 4]}], {"op": "copy", "src": "v", "dst": "out"}),
    "in-bounds-int": _global_view([0], {"op": "copy", "src": "v", "dst": "out"}),
}


@pytest.fixture(scope="module")
def jax_sharded() -> dict[str, dict[str, Any]]:
    return answers(SHARDED)


@pytest.mark.parametrize("name", list(SHARDED))
def test_a_sharded_inputs_slice_is_bounds_checked_first(name: str, jax_sharded: dict) -> None:
    assert_agrees(SHARDED[name], jax_sharded[name])


# ------------------------------------ a GMEM ref's type as JAX prints it in a message


def _tma_from(src: str, entry: str, shard_map: bool | None) -> dict[str, Any]:
    """A TMA store whose source is a GMEM argument: ``x`` passed as a Ref
    (``jax.new_ref``), ``y`` as an array; two devices, with or without shard_map (None:
    no device mesh)."""
    s = _global_view([None], None)
    s["call"]["entry"] = entry
    s["call"]["programs"][0]["body"] = [{"op": "tma_store", "src": src, "dst": "y_ref"}]
    if shard_map is None:
        del s["device_mesh"], s["run"]
    else:
        s["run"]["shard_map"] = shard_map
    return s


#: name -> scenario: ``src must be a SMEM reference, got <type>`` (and transpose_ref's
#: refusal of a plain ref) prints the ref's ``AbstractRef.str_short``: a ``jax.new_ref``
#: Ref (an argument or a capture) has no memory space (``Ref{...}``), a kernel without
#: shard_map sees the global array, dim 0 sharded (``8@dev``, ``16@(x,y)``)
TYPES = {
    f"{entry}-{src}-{'no-mesh' if sm is None else 'shard_map' if sm else 'global'}": _tma_from(
        src, entry, sm
    )
    for entry in ("plgpu.kernel", "pl.kernel")
    for src in ("x_ref", "y_ref")
    for sm in (None, True, False)
}


def _captured(entry: str, shard_map: bool | None, as_ref: bool, body: list[Any]) -> dict:
    """``_tma_from``'s call closing over ``z`` (4 x 256 a device) as ``zc``."""
    s = _tma_from("x_ref", entry, shard_map)
    s["buffers"]["z"] = {"shape": [4, 256], "dtype": "float32", "as_ref": as_ref}
    s["call"]["captures"] = [{"name": "zc", "buffer": "z"}]
    s["call"]["programs"][0]["body"] = body
    return s


def _transposed(ref: str) -> list[dict[str, Any]]:
    return [
        {
            "let": "v",
            "ref": ref,
            "transforms": [{"op": "transpose", "perm": [1, 0], "via": "transpose_ref"}],
        }
    ]


_TMA_ZC = [{"op": "tma_store", "src": "zc", "dst": "y_ref"}]
for _entry in ("plgpu.kernel", "pl.kernel"):
    _two = _tma_from("x_ref", _entry, False)
    _two["device_mesh"] = {"x": 2, "y": 2}
    TYPES[f"{_entry}-x_ref-global-two-axes"] = _two
    _arg_view = _tma_from("x_ref", _entry, None)
    _arg_view["call"]["args"][0]["transforms"] = [{"op": "at", "index": [{"ds": [0, 2]}]}]
    TYPES[f"{_entry}-x_ref-viewed-by-the-caller"] = _arg_view
    for _sm in (None, False):
        _tag = "global" if _sm is False else "no-mesh"
        TYPES[f"{_entry}-captured-{_tag}"] = _captured(_entry, _sm, True, _TMA_ZC)
        TYPES[f"{_entry}-captured-transpose_ref-{_tag}"] = _captured(
            _entry, _sm, True, _transposed("zc")
        )
        for _src in ("x_ref", "y_ref"):
            _t = _tma_from(_src, _entry, _sm)
            _t["call"]["programs"][0]["body"] = _transposed(_src)
            TYPES[f"{_entry}-{_src}-transpose_ref-{_tag}"] = _t
    # a captured array (not a Ref) is refused with its global shape
    TYPES[f"{_entry}-captured-array-global"] = _captured(
        _entry, False, False, [{"op": "add", "dst": "y_ref", "lhs": "zc", "rhs": "zc"}]
    )
    # a captured Ref of the global array is sharded like an argument (JAX's
    # _validate_sharding): slicing its dim 0 is refused (was MPMD_NOT_MANUAL)
    for _k, _ix in (("slice", [{"ds": [0, 2]}]), ("int", [0])):
        TYPES[f"{_entry}-captured-global-{_k}"] = _captured(
            _entry,
            False,
            True,
            [
                {"let": "v", "ref": "zc", "transforms": [{"op": "at", "index": _ix}]},
                {"op": "copy", "src": "v", "dst": "v"},
            ],
        )


@pytest.fixture(scope="module")
def jax_types() -> dict[str, dict[str, Any]]:
    return answers(TYPES)


@pytest.mark.parametrize("name", list(TYPES))
def test_a_kernel_input_is_typed_as_jax_types_it(name: str, jax_types: dict) -> None:
    assert_agrees(TYPES[name], jax_types[name])


# ------------------------------------------------ a TMA load's destination, viewed


def _load_into(
    dtype: str,
    shape: list[int],
    layout: list[dict[str, Any]],
    view: list[dict[str, Any]],
    src: list[int],
) -> dict[str, Any]:
    """``copy_gmem_to_smem(x_ref, s.<view>, bar)`` of an ``src``-shaped GMEM argument into
    SMEM scratch ``s`` of ``shape`` with ``layout``."""
    s = _kernel()
    c = s["call"]
    c["scratch"] = {
        "s": {"shape": shape, "dtype": dtype, "memory_space": "SMEM", "transforms": layout},
        "bar": {"kind": "barrier"},
    }
    s["buffers"]["x"] = {"shape": src, "dtype": dtype, "init": "iota"}
    c["args"].append({"buffer": "x", "param": "x_ref"})
    c["outputs"]["r"] = {"shape": [128], "dtype": "float32"}
    c["programs"][0]["body"] = [
        {"let": "v", "ref": "s", "transforms": view},
        {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "v", "barrier": "bar"},
        {"op": "barrier_wait", "barrier": "bar"},
    ]
    return s


_TS = [{"op": "tiling", "tile": [8, 64]}, {"op": "swizzle", "bytes": 128}]
_T1 = [{"op": "tiling", "tile": [8, 32]}]


def _ds(start: str, size: int) -> dict[str, Any]:
    return {"ds": [start, size]}


#: name -> scenario: the lowering of copy_gmem_to_smem handles its destination's
#: transforms first (``lowering._handle_transforms``, as for a plain access or a TMA
#: store's source): an index inside a tile, an integer index of a tiled dim, a reshape
#: past a tiling raise there, before the barrier or the GMEM side is looked at (they
#: were "valid": the destination's view was never lowered)
LOADS = {
    "slice-inside-a-swizzled-tile": _load_into(
        "bfloat16", [64, 128], _TS, [{"op": "at", "index": [_ds("3", 8)]}], [8, 128]
    ),
    "slice-inside-a-tile": _load_into(
        "float32", [64, 128], _T1, [{"op": "at", "index": [_ds("3", 8)]}], [8, 128]
    ),
    "int-index-of-a-tiled-dim": _load_into(
        "bfloat16", [64, 128], _TS, [{"op": "at", "index": [3]}], [128]
    ),
    "reshape-past-a-tiling": _load_into(
        "bfloat16", [64, 128], _TS, [{"op": "reshape", "shape": [8, 8, 128]}], [8, 8, 128]
    ),
    "unfoldable-reshape": _load_into(
        "float32",
        [64, 128],
        [],
        [{"op": "at", "index": [None, _ds("0", 64)]}, {"op": "reshape", "shape": [4096]}],
        [4096],
    ),
    "bitcast-left-over": _load_into(
        "float32",
        [64, 128],
        [],
        [{"op": "at", "index": [_ds("8", 8)]}, {"op": "bitcast", "dtype": "int32"}],
        [8, 128],
    ),
    # these lower
    "tile-aligned-slice": _load_into(
        "bfloat16", [64, 128], _TS, [{"op": "at", "index": [_ds("8", 8)]}], [8, 128]
    ),
    "int-index-of-an-untiled-dim": _load_into(
        "float32", [2, 64, 128], _T1, [{"op": "at", "index": [1, _ds("8", 16)]}], [16, 128]
    ),
}
LOADS["bitcast-left-over"]["buffers"]["x"]["dtype"] = "int32"
_nb = LOADS["no-barrier-after-the-view"] = copy.deepcopy(LOADS["slice-inside-a-swizzled-tile"])
_nb["call"]["programs"][0]["body"][1].pop("barrier")


@pytest.fixture(scope="module")
def jax_loads() -> dict[str, dict[str, Any]]:
    return answers(LOADS)


@pytest.mark.parametrize("name", list(LOADS))
def test_a_tma_loads_destination_view_is_lowered_first(name: str, jax_loads: dict) -> None:
    assert_agrees(LOADS[name], jax_loads[name])


# ------------------------------ an unswizzled tile of too few rows for a register layout

#: name -> scenario: a plain load, store or fill of SMEM tiled without a swizzle moves the
#: value through registers in a layout transfer_tiled can follow
#: (``IsTransferableSmemRegisters``); none fits a tile of fewer rows than 64 bits of
#: elements of at least 16 bits (1 row of 32-bit, 2 of 16- or 8-bit elements), whatever
#: its width and rank (stacks fuzz: a (2, 64, 64) float32 scratch tiled (1, 8) copied
#: into was "valid")
ROWS = {
    f"{use}-{dtype}-{'x'.join(map(str, tile))}": _tiled(
        use, tile, [2, 64, 64] if len(tile) == 3 else [64, 64], dtype
    )
    for use in ("fill", "copy_in", "copy_out")
    for dtype, tile in (
        ("float32", [1, 8]),
        ("float32", [1, 16]),
        ("float32", [2, 8]),
        ("int32", [1, 8]),
        ("bfloat16", [2, 8]),
        ("bfloat16", [2, 2]),
        ("bfloat16", [4, 8]),
        ("float16", [2, 8]),
        ("int8", [2, 8]),
        ("int8", [4, 8]),
        ("float32", [1, 1, 8]),
        ("float32", [2, 1, 8]),
        ("float32", [1, 2, 8]),
    )
}


@pytest.fixture(scope="module")
def jax_rows() -> dict[str, dict[str, Any]]:
    return answers(ROWS)


@pytest.mark.parametrize("name", list(ROWS))
def test_an_unswizzled_tile_of_too_few_rows_has_no_register_layout(
    name: str, jax_rows: dict
) -> None:
    assert_agrees(ROWS[name], jax_rows[name])


# ---------------------------------------- a TMA box of more than 256 elements along a dim


def _store_from(shape: list[int], layout: list[dict[str, Any]], dtype: str = "float32") -> dict:
    """A TMA store of a whole ``shape`` SMEM scratch with ``layout`` into an output."""
    s = _tiled("tma_store", [1], shape, dtype)
    s["call"]["scratch"]["s"]["transforms"] = layout
    return s


def _then_dot(first: dict[str, Any]) -> dict[str, Any]:
    """``first`` (a load of an (8, 512) box), then a dot whose N (512) is too large: the
    load's error is the first (program order, both at dialect lowering)."""
    s = copy.deepcopy(first)
    c = s["call"]
    c["scratch"]["a_s"] = {"shape": [64, 64], "dtype": "float16", "memory_space": "SMEM"}
    c["scratch"]["b_s"] = {"shape": [64, 512], "dtype": "float16", "memory_space": "SMEM"}
    s["buffers"]["a"] = {"shape": [64, 64], "dtype": "float16"}
    s["buffers"]["b"] = {"shape": [64, 512], "dtype": "float16"}
    c["args"] += [{"buffer": "a", "param": "a_ref"}, {"buffer": "b", "param": "b_ref"}]
    c["outputs"]["out"] = {"shape": [64, 512], "dtype": "float32"}
    c["programs"][0]["body"] += [
        {"op": "copy", "src": "a_ref", "dst": "a_s"},
        {"op": "copy", "src": "b_ref", "dst": "b_s"},
        {"op": "dot", "dst": "out", "lhs": "a_s", "rhs": "b_s"},
    ]
    return s


_ALL: list[dict[str, Any]] = [{"op": "at", "index": [None]}]

#: name -> scenario: a copy through a tensor map (every TMA load: its out-of-bounds
#: elements are zero-filled; a swizzled store) takes a box of at most 256 elements along
#: each dim of the slice as the SMEM tiling arranges it (``LaunchContext.async_copy``:
#: ``Async copies only support copying <=256 elements along each dimension``); an
#: unswizzled store of a contiguous GMEM slice is one bulk copy, with no such limit
#: (the loads were "valid")
BOXES = {
    "load-8x512": _load_into("float32", [8, 512], [], _ALL, [8, 512]),
    "load-512": _load_into("float32", [512], [], _ALL, [512]),
    "load-300x8": _load_into("float32", [300, 8], [], _ALL, [300, 8]),
    "load-tile-of-512-rows": _load_into(
        "float32", [512, 64], [{"op": "tiling", "tile": [512, 8]}], _ALL, [512, 64]
    ),
    "load-then-a-dot-too-wide": _then_dot(_load_into("float32", [8, 512], [], _ALL, [8, 512])),
    # within the limit: these lower
    "load-256x8": _load_into("float32", [256, 8], [], _ALL, [256, 8]),
    "load-tiled-16x512": _load_into(
        "float32", [16, 512], [{"op": "tiling", "tile": [8, 64]}], _ALL, [16, 512]
    ),
    "store-8x512": _store_from([8, 512], []),
    "store-512": _store_from([512], []),
    "store-tiled-8x512": _store_from([16, 512], [{"op": "tiling", "tile": [8, 512]}]),
}


def _store_into(src: list[int], out: list[int], index: list[Any]) -> dict[str, Any]:
    """A TMA store of an untiled ``src`` scratch into ``r.at[*index]`` of an ``out``."""
    s = _store_from(src, [])
    s["call"]["outputs"]["r"]["shape"] = out
    s["call"]["programs"][0]["body"] = [
        {"let": "w", "ref": "r", "transforms": [{"op": "at", "index": index}]},
        {"op": "tma_store", "src": "s", "dst": "w"},
    ]
    return s


_SW = {"op": "swizzle", "bytes": 128}
BOXES.update(
    {
        # a swizzled store goes through a tensor map too
        "store-swizzled-tile-of-512-rows": _store_from(
            [512, 64], [{"op": "tiling", "tile": [512, 64]}, _SW], "bfloat16"
        ),
        "store-swizzled-512x64": _store_from([512, 64], [_SW], "bfloat16"),
        "store-swizzled-tiles-of-8-rows": _store_from(
            [512, 64], [{"op": "tiling", "tile": [8, 64]}, _SW], "bfloat16"
        ),
        # so does a store into a strided GMEM slice; a contiguous one is a bulk copy
        "store-into-300-of-1024-columns": _store_into([8, 300], [8, 1024], [None, _ds("0", 300)]),
        "store-into-strided-3d": _store_into([2, 4, 512], [2, 8, 512], [None, _ds("0", 4)]),
        "store-into-whole-rows": _store_into([4, 512], [8, 512], [_ds("0", 4)]),
        "store-into-a-row": _store_into([512], [8, 512], [3]),
        "store-into-half-of-1d": _store_into([512], [1024], [_ds("0", 512)]),
        # the GMEM strides are the whole ref's: a column of a (300, 2) float32 output
        # has 8-byte rows
        "store-into-a-column": _store_into([300], [300, 2], [None, 0]),
    }
)


@pytest.fixture(scope="module")
def jax_boxes() -> dict[str, dict[str, Any]]:
    return answers(BOXES)


@pytest.mark.parametrize("name", list(BOXES))
def test_a_tma_box_holds_at_most_256_elements_a_dim(name: str, jax_boxes: dict) -> None:
    assert_agrees(BOXES[name], jax_boxes[name])


# ------------------------------------ a plain access of a view that is not one run


def _gmem_view(
    dtype: str, shape: list[int], steps: list[dict[str, Any]], out: list[int], store: bool = False
) -> dict:
    """``v = x_ref.<steps>``, then ``r[...] = v[...]`` (or ``v[...] = y_ref[...]``)."""
    s = _kernel()
    c = s["call"]
    s["buffers"]["x"] = {"shape": shape, "dtype": dtype, "init": "iota"}
    c["args"].append({"buffer": "x", "param": "x_ref"})
    body = [{"let": "v", "ref": "x_ref", "transforms": steps}]
    if store:
        s["buffers"]["y"] = {"shape": out, "dtype": dtype}
        c["args"].append({"buffer": "y", "param": "y_ref"})
        c["outputs"]["r"] = {"shape": [128], "dtype": "float32"}
        body.append({"op": "copy", "src": "y_ref", "dst": "v"})
    else:
        c["outputs"]["r"] = {"shape": out, "dtype": dtype}
        body.append({"op": "copy", "src": "v", "dst": "r"})
    c["programs"][0]["body"] = body
    return s


def _t(*perm: int) -> dict[str, Any]:
    return {"op": "transpose", "perm": list(perm), "via": "method"}


_PAIRS = [{"op": "reshape", "shape": [2048, 2]}, _t(1, 0)]

#: name -> scenario: a plain load or store moves ``vec`` elements a thread; through a
#: view that is not one contiguous run of its ref, ``transfer_strided`` folds the
#: contiguous dims and wants the unit-stride dim a multiple of ``vec`` long and the other
#: strides multiples of ``vec`` (stacks fuzz: a bfloat16 (2048, 2) reshape transposed was
#: GPU_VERIFICATION where JAX raises the first; a 4-column slice of a 129-column ref was
#: "valid"); what gets through is the vector op MLIR's verifier rejects, as before
STRIDED = {
    "pairs-transposed-bfloat16": _gmem_view("bfloat16", [4096], _PAIRS, [2, 2048]),
    "pairs-transposed-bfloat16-store": _gmem_view("bfloat16", [4096], _PAIRS, [2, 2048], True),
    "4-of-129-columns": _gmem_view(
        "float32", [64, 129], [{"op": "at", "index": [None, _ds("0", 4)]}], [64, 4]
    ),
    "64-of-130-minor-3d": _gmem_view(
        "bfloat16", [4, 64, 130], [{"op": "at", "index": [None, None, _ds("0", 64)]}], [4, 64, 64]
    ),
    # these pass transfer_strided: the verifier's error, or none
    "pairs-transposed-float32": _gmem_view("float32", [4096], _PAIRS, [2, 2048]),
    "transposed-64x128": _gmem_view("float32", [64, 128], [_t(1, 0)], [128, 64]),
    "4-of-130-columns": _gmem_view(
        "float32", [64, 130], [{"op": "at", "index": [None, _ds("0", 4)]}], [64, 4]
    ),
    "6-of-130-columns": _gmem_view(
        "float32", [128, 130], [{"op": "at", "index": [None, _ds("0", 6)]}], [128, 6]
    ),
}


def _filled(dtype: str, shape: list[int], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """``v = r.<steps>`` of an output, then ``v[...] = jnp.full(..., 1)``."""
    s = _kernel()
    s["call"]["outputs"]["r"] = {"shape": shape, "dtype": dtype}
    s["call"]["programs"][0]["body"] = [
        {"let": "v", "ref": "r", "transforms": steps},
        {"op": "fill", "dst": "v", "value": 1},
    ]
    return s


# a constant is stored in gcd(64 // bits, size // 128) elements a thread
# (_store_untiled_splat), not the loaded value's vector: a (128, 3) float16 view takes 1,
# which any stride fits (fuzz fz270 of seed 55555: was GPU_WG_STRIDED_SIZE, JAX: valid)
STRIDED.update(
    {
        "fill-3-rows-transposed-float16": _filled("float16", [3, 128], [_t(1, 0)]),
        "fill-6-rows-transposed-float16": _filled("float16", [6, 128], [_t(1, 0)]),
        "fill-pairs-transposed-bfloat16": _filled("bfloat16", [4096], _PAIRS),
        "fill-4-of-129-columns": _filled(
            "float32", [64, 129], [{"op": "at", "index": [None, _ds("0", 4)]}]
        ),
        "copy-3-rows-transposed-float16": _gmem_view("float16", [3, 128], [_t(1, 0)], [128, 3]),
    }
)


@pytest.fixture(scope="module")
def jax_strided() -> dict[str, dict[str, Any]]:
    return answers(STRIDED)


@pytest.mark.parametrize("name", list(STRIDED))
def test_a_strided_views_vectors_fit_its_strides(name: str, jax_strided: dict) -> None:
    assert_agrees(STRIDED[name], jax_strided[name])


# ------------------------------- a reshape past a tile of more dims than the scratch


def _reshaped(use: str) -> dict[str, Any]:
    """``_tiled(use, [8, 8], [256], "int32")`` through ``v = s.reshape(-1)``."""
    s = _tiled(use, [8, 8], [256], "int32")
    body = s["call"]["programs"][0]["body"]
    for st in body:
        for k in ("src", "dst"):
            if st.get(k) == "s":
                st[k] = "v"
    body.insert(0, {"let": "v", "ref": "s", "transforms": [{"op": "reshape", "shape": [-1]}]})
    return s


#: name -> scenario: ``UntilingTransform.commute_reshape`` ends asserting every tile
#: entry was paired with a dim of the ref; a 2-d tile of a 1-d scratch leaves one
#: (``AssertionError``, before the cast's verification; stacks fuzz seed 1357: was
#: GPU_VERIFICATION); without the reshape the cast's verifier is the first
RESHAPED = {
    **{f"reshaped-{use}": _reshaped(use) for use in ("tma_store", "copy_out", "fill", "tma_load")},
    **{f"plain-{use}": _tiled(use, [8, 8], [256], "int32") for use in ("tma_store", "fill")},
}


@pytest.fixture(scope="module")
def jax_reshaped() -> dict[str, dict[str, Any]]:
    return answers(RESHAPED)


@pytest.mark.parametrize("name", list(RESHAPED))
def test_a_reshape_past_an_over_ranked_tile_asserts(name: str, jax_reshaped: dict) -> None:
    assert_agrees(RESHAPED[name], jax_reshaped[name])


# --------------------------- a transpose of a tiled dim with an untiled one, in SMEM


def _transposed_view(
    use: str, shape: list[int], dtype: str, layout: list[dict], perm: list[int], via: str = "method"
) -> dict:
    """``v = s.transpose(perm)`` of an SMEM scratch with ``layout``, used by ``use``."""
    s = _tiled(use, [8, 8], shape, dtype)
    s["call"]["scratch"]["s"]["transforms"] = layout
    body = s["call"]["programs"][0]["body"]
    for st in body:
        for k in ("src", "dst"):
            if st.get(k) == "s":
                st[k] = "v"
    body.insert(
        0, {"let": "v", "ref": "s", "transforms": [{"op": "transpose", "perm": perm, "via": via}]}
    )
    vshape = [shape[p] for p in perm]
    if "y" in s["buffers"]:
        s["buffers"]["y"]["shape"] = vshape
    if s["call"]["outputs"]["r"]["shape"] != [128]:
        s["call"]["outputs"]["r"]["shape"] = vshape
    return s


_TSW = [{"op": "tiling", "tile": [8, 64]}, {"op": "swizzle", "bytes": 128}]
_T32 = [{"op": "tiling", "tile": [8, 32]}]

#: name -> scenario: layout inference gives a view of tiled SMEM the scratch's tiling only
#: while its tiled dims keep the smallest strides (``lowering.tile_strides``' ValueError
#: inside ``_is_valid_smem_layout_assignment``); a transpose of a tiled dim with an
#: untiled one leaves no layout for any access of it (stacks fuzz seed 2468: a TMA store
#: was TMA_GMEM_STRIDES, a swap of the leading dims with a tiled one "valid"); a swap of
#: the tiled dims alone is the TMA's own refusal; a TMA box of more than 5 dims is refused
#: (``Async copies only support striding up to 5 dimensions``: was "valid")
TRANSPOSED = {
    **{
        f"{use}-{name}": _transposed_view(use, shape, dtype, layout, perm, via)
        for use in ("copy_in", "copy_out", "fill", "tma_load", "tma_store")
        for name, shape, dtype, layout, perm, via in (
            ("swizzled-lead-with-tiled", [4, 64, 64], "bfloat16", _TSW, [1, 0, 2], "method"),
            ("tiled-lead-with-tiled", [4, 64, 64], "float32", _T32, [1, 0, 2], "method"),
            ("swizzled-transpose_ref", [4, 64, 64], "bfloat16", _TSW, [1, 0, 2], "transpose_ref"),
        )
    },
    "tma_store-lead-to-minor": _transposed_view(
        "tma_store",
        [8, 64, 64],
        "float16",
        [{"op": "tiling", "tile": [8, 16]}, {"op": "swizzle", "bytes": 32}],
        [1, 2, 0],
    ),
    "tma_store-tiled-dims-swapped": _transposed_view(
        "tma_store",
        [8, 64, 64],
        "float16",
        [{"op": "tiling", "tile": [8, 16]}, {"op": "swizzle", "bytes": 32}],
        [0, 2, 1],
    ),
    **{
        f"{use}-leading-dims-swapped-6-dim-box": _transposed_view(
            use, [2, 4, 64, 64], "float32", _T32, [1, 0, 2, 3]
        )
        for use in ("copy_in", "tma_load", "tma_store")
    },
}


@pytest.fixture(scope="module")
def jax_transposed() -> dict[str, dict[str, Any]]:
    return answers(TRANSPOSED)


@pytest.mark.parametrize("name", list(TRANSPOSED))
def test_a_transpose_out_of_the_tiled_dims_has_no_layout(name: str, jax_transposed: dict) -> None:
    assert_agrees(TRANSPOSED[name], jax_transposed[name])
