"""The kernel call inside a traced function: where it is, what it is given, what comes out.

The function's jaxpr is walked through ``jit``, ``shard_map``, ``custom_vmap_call``
(``plgpu.kernel``'s wrapper) and the other call primitives to the ``mpmd_map``
equation. Along the way each value is tracked back to where it came from (an
argument, a constant, a ``jax.new_ref``) and the ``shard_map`` that encloses the
kernel gives the device mesh and each operand's partition spec. Then the kernel's
inputs become buffers holding the arguments' values, each device's shard exactly as
the user's spec cuts it, and the function's results are traced forward from the
kernel's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab import dtypes, sharding
from mpmd_lab.fields import MAX_INIT_VALUES
from mpmd_lab.importer import frames as F

# ---------------------------------------------------------------- origins


@dataclass(frozen=True)
class Arg:
    index: int  # the flattened argument


@dataclass(frozen=True)
class Value:
    array: Any  # a host constant (numpy)


@dataclass(frozen=True)
class NewRef:
    of: Any


@dataclass(frozen=True)
class Frozen:
    ref: Any


@dataclass(frozen=True)
class KernelOut:
    index: int


@dataclass(frozen=True)
class Computed:
    primitive: str
    inputs: tuple[Any, ...]
    where: str | None = None


@dataclass(frozen=True)
class Shard:
    """Inside a ``shard_map``: ``of`` split by ``spec`` over ``mesh``."""

    of: Any
    spec: Any
    mesh: Any


@dataclass(frozen=True)
class Unshard:
    """Out of a ``shard_map``: the shards of ``of`` put together by ``spec``."""

    of: Any
    spec: Any
    mesh: Any


@dataclass
class Found:
    """The kernel equation and its context."""

    eqn: Any
    inputs: list[Any]  # origins of its operands
    entry: str  # "pl.kernel" | "plgpu.kernel"
    mesh: Any = None  # the shard_map's mesh (None: no shard_map)
    where: str | None = None


@dataclass
class Walk:
    found: Found | None = None
    others: list[str] = field(default_factory=list)  # unsupported things around it
    kernels: int = 0
    #: the user's line (``FILE:LINE``) of each of ``others``
    where_of: dict[str, str | None] = field(default_factory=dict)

    def other(self, text: str, where: str | None) -> None:
        """An unsupported thing around the kernel call, at the user's line ``where``."""
        self.others.append(text)
        self.where_of.setdefault(text, where)


_CALLS = (
    "jit",
    "pjit",
    "closed_call",
    "core_call",
    "named_call",
    "remat",
    "checkpoint",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
)


def _sub(eqn: Any) -> Any:
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr", "call"):
        j = eqn.params.get(key)
        if j is not None and hasattr(j, "eqns"):
            return j
    return None


def walk(
    jaxpr: Any,
    env: dict[Any, Any],
    w: Walk,
    *,
    vmap: bool = False,
    mesh: Any = None,
    where: str | None = None,
) -> None:
    """Follow values through ``jaxpr`` to the kernel equation (recorded in ``w``).

    ``where``: the user's line of the enclosing equation (JAX keeps an equation's
    frames only up to the nearest ``jit``, so an inner one may have none of its own)."""
    outer = where
    for c, v in zip(jaxpr.constvars, jaxpr.consts, strict=False):
        env.setdefault(c, _const(v))
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [_origin(env, a) for a in eqn.invars]
        where = F.eqn_source(eqn) or outer
        if name == "mpmd_map":
            w.kernels += 1
            if w.found is None:
                entry = "plgpu.kernel" if vmap else "pl.kernel"
                w.found = Found(eqn, ins, entry, mesh, where)
                for k, o in enumerate(eqn.outvars):
                    env[o] = KernelOut(k)
            else:
                w.other(
                    f"a second kernel call (at {_short(where)}): only the first is imported",
                    where,
                )
                for o in eqn.outvars:
                    env[o] = Computed(name, tuple(ins), where)
            continue
        if name == "pallas_call":
            if where is None:  # called by JAX (shard_map): the kernel's def is the line
                where = _def_line(eqn.params.get("jaxpr"))
            as_kernel, why = pallas_call_as_kernel(eqn)
            if as_kernel is not None and w.found is None:
                w.kernels += 1
                w.found = Found(as_kernel, ins, "plgpu.kernel", mesh, where)
                for k, o in enumerate(eqn.outvars):
                    env[o] = KernelOut(k)
                w.other(f"pallas_call (at {_short(where)}): {PALLAS_CALL_DOES_NOT_LOWER}", where)
                continue
            if as_kernel is not None:
                w.kernels += 1
                why = "a second kernel call: only the first is imported"
            w.other(f"pallas_call (at {_short(where)}): {why}", where)
            for o in eqn.outvars:
                env[o] = Computed(name, tuple(ins), where)
            continue
        inner = _sub(eqn)
        if name == "shard_map" and inner is not None:
            m = eqn.params["mesh"]
            in_specs = eqn.params["in_specs"]
            out_specs = eqn.params["out_specs"]
            sub_env: dict[Any, Any] = {}
            for v, o, spec in zip(inner.invars, ins, in_specs, strict=False):
                sub_env[v] = Shard(o, spec, m)
            walk(inner, sub_env, w, vmap=vmap, mesh=m, where=where)
            for o, v, spec in zip(eqn.outvars, inner.outvars, out_specs, strict=False):
                env[o] = Unshard(_origin(sub_env, v), spec, m)
            continue
        if (name in _CALLS or name == "custom_vmap_call") and inner is not None:
            sub_env = {}
            for v, o in zip(inner.invars, ins, strict=False):
                sub_env[v] = o
            walk(inner, sub_env, w, vmap=vmap or name == "custom_vmap_call", mesh=mesh, where=where)
            for o, v in zip(eqn.outvars, inner.outvars, strict=False):
                env[o] = _origin(sub_env, v)
            continue
        if name == "new_ref":
            env[eqn.outvars[0]] = NewRef(ins[0])
            continue
        if name == "freeze":
            env[eqn.outvars[0]] = Frozen(ins[0])
            continue
        value = _host_eval(eqn, ins)
        for k, o in enumerate(eqn.outvars):
            env[o] = value[k] if value is not None else Computed(name, tuple(ins), where)


@dataclass(frozen=True)
class KernelEqn:
    """A ``pl.pallas_call`` equation read as the ``plgpu.kernel`` (``mpmd_map``) equation
    it equals: the parameters the builder reads, one program on a bare ``plgpu.Mesh()``
    (what JAX's own testing shim, ``jax._src.pallas.mosaic_gpu.pallas_call``, makes of
    such a call)."""

    params: dict[str, Any]
    invars: list[Any]
    outvars: list[Any]


#: what a Mosaic GPU ``pl.pallas_call`` is in JAX 0.12, and what the import holds instead
PALLAS_CALL_DOES_NOT_LOWER = (
    "JAX 0.12 has no Mosaic GPU lowering for pl.pallas_call with plgpu.CompilerParams (its "
    "GPU lowering stops at an AssertionError in pallas_call.py's gpu_lowering: no rule for "
    "the parameters); without a grid and with every operand a whole array in GMEM it is "
    "one block of one warpgroup over the operands, the kernel plgpu.kernel(kernel, "
    "out_type=..., scratch_types=[...]) makes, which lowers and which the scenario holds"
)


def pallas_call_as_kernel(eqn: Any) -> tuple[KernelEqn | None, str]:
    """The ``plgpu.kernel`` equation a ``pallas_call`` equation equals, or (None, why not).

    A Mosaic GPU ``pallas_call`` with no grid, no scalar prefetch and every input and output
    a whole array left in GMEM runs its body once, on one block of one warpgroup, over the
    operands themselves: what ``plgpu.kernel`` does with the same body. A grid, or a block
    spec that copies through SMEM or tiles the array, pipelines the body: not that."""
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from mpmd_lab.importer import kernel as K

    p = eqn.params
    if not isinstance(p.get("compiler_params"), plgpu.CompilerParams):
        return None, (
            "a pl.pallas_call without plgpu.CompilerParams lowers through Triton, not Mosaic "
            "GPU: mpmd-lab imports Mosaic GPU kernels (plgpu.kernel, pl.kernel)"
        )
    gm = p.get("grid_mapping")
    jaxpr = p.get("jaxpr")
    if gm is None or jaxpr is None or p.get("mesh") is not None:
        return None, "a pallas_call mpmd-lab cannot read (no grid mapping)"
    if tuple(gm.grid):
        return None, (
            f"JAX 0.12 has no Mosaic GPU lowering for pl.pallas_call, and its grid "
            f"{tuple(gm.grid)} pipelines the body over blocks: write it as plgpu.kernel (the "
            "blocks are its mesh's grid)"
        )
    if gm.num_index_operands or gm.vmapped_dims:
        return None, (
            "JAX 0.12 has no Mosaic GPU lowering for pl.pallas_call, and mpmd-lab cannot "
            "carry its scalar prefetch or vmap"
        )
    no_rule = "JAX 0.12 has no Mosaic GPU lowering for pl.pallas_call, and "
    n_io = gm.num_inputs + gm.num_outputs
    for k, (bm, v) in enumerate(zip(gm.block_mappings, jaxpr.invars[:n_io], strict=False)):
        what = f"input {k}" if k < gm.num_inputs else f"output {k - gm.num_inputs}"
        sizes = [getattr(b, "block_size", b) for b in bm.block_shape]
        space = K._aval_info(v.aval)[2]
        if space != "GMEM":
            return None, no_rule + (
                f"the block spec of {what} puts it in {space} (pl.pallas_call copies it "
                "there around the body): mpmd-lab imports operands left in GMEM, "
                "pl.BlockSpec(memory_space=plgpu.GMEM)"
            )
        if sizes != list(bm.array_aval.shape) or bm.transforms:
            return None, no_rule + f"the block spec of {what} tiles or transforms the array"
    params = {
        "jaxprs": [jaxpr],
        "meshes": [plgpu.Mesh()],
        "out_avals": tuple(p["out_avals"]),
        "compiler_params": p.get("compiler_params"),
        "input_output_aliases": p.get("input_output_aliases"),
    }
    return KernelEqn(params, list(eqn.invars), list(eqn.outvars)), ""


def _def_line(body: Any) -> str | None:
    """``FILE:LINE`` of the ``def`` of the user function a kernel body comes from."""
    kf = F.function_of(getattr(body, "eqns", ()))
    return f"{kf.file}:{kf.start_line or kf.line}" if kf is not None else None


def _origin(env: dict[Any, Any], atom: Any) -> Any:
    if type(atom).__name__ == "Literal":
        return Value(np.asarray(atom.val))
    return env.get(atom, Computed("?", ()))


def _const(v: Any) -> Any:
    try:
        return Value(np.asarray(v))
    except Exception:  # noqa: BLE001 - a tracer or an opaque object
        return Computed("constant", ())


#: the few primitives a host evaluates to give a constant the kernel is passed
_HOST: dict[str, Callable[..., Any]] = {
    "iota": lambda p, *a: np.broadcast_to(
        np.arange(p["shape"][p["dimension"]]).reshape(
            [-1 if i == p["dimension"] else 1 for i in range(len(p["shape"]))]
        ),
        p["shape"],
    ).astype(dtypes.np_dtype(str(p["dtype"]))),
    "broadcast_in_dim": lambda p, x: np.broadcast_to(
        x.reshape(
            [
                x.shape[p["broadcast_dimensions"].index(i)] if i in p["broadcast_dimensions"] else 1
                for i in range(len(p["shape"]))
            ]
        ),
        p["shape"],
    ).copy(),
    "convert_element_type": lambda p, x: x.astype(dtypes.np_dtype(str(p["new_dtype"]))),
    "reshape": lambda p, x: x.reshape(p["new_sizes"]),
    "add": lambda p, x, y: (x + y).astype(np.result_type(x, y)),
    "sub": lambda p, x, y: (x - y).astype(np.result_type(x, y)),
    "mul": lambda p, x, y: (x * y).astype(np.result_type(x, y)),
    "rem": lambda p, x, y: np.fmod(x, y).astype(np.result_type(x, y)),
}


def _host_eval(eqn: Any, ins: list[Any]) -> list[Any] | None:
    fn = _HOST.get(eqn.primitive.name)
    if fn is None or not all(isinstance(o, Value) for o in ins) or len(eqn.outvars) != 1:
        return None
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(fn(eqn.params, *(o.array for o in ins)))
    except Exception:  # noqa: BLE001 - not evaluable here: the value stays computed
        return None
    aval = eqn.outvars[0].aval
    want = getattr(aval, "shape", None)
    if want is not None and tuple(out.shape) != tuple(want):
        return None
    return [Value(out)]


def _short(where: str | None) -> str:
    """The user's line as they read it (``cell [3], line 11``, ``kernels.py:11``)."""
    return F.display(where)


# ---------------------------------------------------------------- meshes and specs


def mesh_axes(mesh: Any) -> dict[str, int]:
    """A jax mesh's axes, in order, with their sizes."""
    names = tuple(mesh.axis_names)
    sizes = getattr(mesh, "axis_sizes", None)
    if sizes is None:
        shape = mesh.shape
        sizes = tuple(shape[n] for n in names)
    return {str(n): int(s) for n, s in zip(names, sizes, strict=True)}


def mesh_device_order(mesh: Any) -> tuple[list[int] | None, str | None]:
    """(the scenario's ``device_order`` of a jax mesh: None when its ids are row-major
    ``0 .. n-1``; why it cannot be said, or None). A mesh over other ids than the first
    n devices (``jax.devices()[4:8]``) has no scenario form."""
    devices = getattr(mesh, "devices", None)
    if devices is None:
        return None, None
    try:
        ids = [int(d.id) for d in np.asarray(devices).flat]
    except Exception:  # noqa: BLE001 - an abstract mesh
        return None, None
    if ids == list(range(len(ids))):
        return None, None
    if sorted(ids) == list(range(len(ids))):
        return ids, None
    return None, (
        f"a device mesh over the device ids {ids[:16]}, not the first {len(ids)} devices "
        "(the scenario's device mesh holds devices 0 .. n-1, in some order)"
    )


def shard_slices(
    spec: Any, axes: dict[str, int], gshape: tuple[int, ...]
) -> list[tuple[slice, ...]]:
    """For each device (row-major over the mesh), the slices of the global array it holds."""
    return sharding.shard_slices(_spec_list(spec), axes, gshape)


def spec_is_default(spec: Any, axes: dict[str, int], ndim: int) -> bool:
    """Whether ``spec`` is the scenario's convention: dim 0 over every axis in order."""
    return sharding.is_default(_spec_list(spec), ndim, axes)


def shards_of(value: np.ndarray, spec: Any, axes: dict[str, int]) -> list[np.ndarray]:
    return sharding.shards_of(value, _spec_list(spec), axes)


def assemble(shards: list[np.ndarray], spec: Any, axes: dict[str, int]) -> np.ndarray:
    """The global array whose shards (row-major over the mesh) these are, per ``spec``."""
    return sharding.assemble(shards, _spec_list(spec), axes)


def _spec_list(spec: Any) -> list[Any]:
    """A user's ``PartitionSpec`` (None: not split, ``P()``) as a list of entries."""
    return [] if spec is None else list(spec)


# ---------------------------------------------------------------- buffer values


def init_of(
    shards: list[np.ndarray], dtype: str, glob: np.ndarray | None = None
) -> tuple[Any, str | None]:
    """The scenario ``init`` whose host value is ``glob`` split into these per-device
    shards (``glob`` None: the shards stacked on dim 0), and a note when it is not exact."""
    dt = dtypes.np_dtype(dtype)
    shards = [np.asarray(s) for s in shards]
    if glob is None:
        glob = np.concatenate(shards, axis=0) if shards[0].ndim else shards[0]
    if not glob.size or not np.any(glob):
        return "zeros", None
    if np.all(glob == 1):
        return "ones", None
    iota = np.arange(glob.size).reshape(glob.shape).astype(dt)
    bits = np.ascontiguousarray(glob.astype(dt)).reshape(-1)  # (a 0-d array has no byte view)
    if np.array_equal(iota.reshape(-1).view(np.uint8), bits.view(np.uint8)):
        return "iota", None
    same = all(np.array_equal(s, shards[0]) for s in shards[1:])
    value = shards[0] if same else glob
    if value.size > MAX_INIT_VALUES:
        return "zeros", (
            f"values: {glob.size} numbers that are not zeros, ones or iota, more than the "
            f"{MAX_INIT_VALUES} an explicit init holds (the scenario starts it at zeros)"
        )
    if dtype.startswith(("float", "bfloat")) and not np.all(np.isfinite(value.astype(np.float64))):
        return "zeros", "values: NaN or infinite numbers, which an explicit init cannot hold"
    return _tolist(value, dtype), None


def _tolist(a: np.ndarray, dtype: str) -> Any:
    if dtype == "bool":
        return a.astype(bool).tolist()
    if dtype.startswith(("int", "uint")):
        return a.astype(np.int64).tolist()
    return a.astype(np.float64).tolist()


__all__ = [
    "Arg",
    "Computed",
    "Found",
    "Frozen",
    "KernelEqn",
    "KernelOut",
    "NewRef",
    "Shard",
    "Unshard",
    "Value",
    "Walk",
    "assemble",
    "init_of",
    "pallas_call_as_kernel",
    "mesh_axes",
    "mesh_device_order",
    "shard_slices",
    "shards_of",
    "spec_is_default",
    "walk",
]
