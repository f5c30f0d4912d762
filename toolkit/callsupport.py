"""Support code shared by the runtime and every exported file.

This module depends on numpy and jax alone: ``mpmd_lab.codegen`` copies its source
verbatim into exported files, so an exported call and ``mpmd-lab run`` encode
inputs and outputs with the very same code.
"""

import hashlib
import math

import numpy as np

MAX_VALUES = 1024


def host_array(init, shape, dtype, seed, num_devices, gshape=None):
    """A buffer's global host value, per SCENARIO.md: ``gshape`` the global shape its
    partition spec makes (None: dim 0 times the device count)."""
    import jax.numpy as jnp

    dtype = jnp.dtype(dtype)
    shape = tuple(shape)
    if gshape is None:
        gshape = (shape[0] * num_devices, *shape[1:]) if shape else ()
    gshape = tuple(gshape)
    if init == "zeros":
        return np.zeros(gshape, dtype)
    if init == "ones":
        return np.ones(gshape, dtype)
    if init == "iota":
        return np.arange(math.prod(gshape)).reshape(gshape).astype(dtype)
    if init == "random":
        return np.random.default_rng(seed).standard_normal(gshape).astype(dtype)
    value = np.asarray(init).astype(dtype)
    if shape and value.shape == gshape and gshape != shape:
        return value  # the global value: split over the devices by the spec
    one = value.reshape(shape)
    if not shape:
        return one
    return np.tile(one, [g // d if d else 1 for g, d in zip(gshape, shape, strict=True)])


def interpret_params(mode, detect_races=False):
    """The ``interpret=`` argument: ``"gpu"``, ``"hlo"`` or ``None`` (compile)."""
    if mode == "gpu":
        from jax.experimental.pallas import mosaic_gpu as plgpu

        return plgpu.InterpretGPUParams(detect_races=bool(detect_races))
    if mode == "hlo":
        return True
    return False


def encode_value(x):
    """A JSON-safe number: NaN and infinities as strings."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def encode_array(a):
    """``{"shape", "dtype", "values" | "sha256"}`` of a global array (C order)."""
    a = np.asarray(a)
    out = {"shape": list(a.shape), "dtype": str(a.dtype)}
    if a.size <= MAX_VALUES:
        flat = a.reshape(-1)
        if flat.dtype.kind not in "biuf":  # bfloat16, float8: through float32
            flat = flat.astype(np.float32)
        out["values"] = [encode_value(v) for v in flat.tolist()]
    else:
        out["sha256"] = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    return out


def encode_outputs(outputs):
    """Every output of a run, by name, in the ``run --json`` form."""
    return {name: encode_array(value) for name, value in outputs.items()}


# ---- one process, or one process per host (multi-controller JAX) ----

#: the variables a launch of several processes sets (``mpmd-lab run --processes`` sets them)
PROCESS_VARIABLES = ("MPMD_LAB_COORDINATOR", "MPMD_LAB_NUM_PROCESSES", "MPMD_LAB_PROCESS_ID")


def launched_processes(environ):
    """How many processes this launch has: ``MPMD_LAB_NUM_PROCESSES``, else the SLURM
    or Open MPI task count JAX detects, else 1."""
    for var in ("MPMD_LAB_NUM_PROCESSES", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        if environ.get(var):
            return max(1, int(environ[var]))
    return 1


def start_processes(environ):
    """``jax.distributed.initialize()`` when launched as several processes: from the
    ``MPMD_LAB_*`` variables, else as JAX detects its launcher (SLURM, Open MPI). CPU
    devices talk through gloo. Returns the process count (1: a plain single process)."""
    import jax

    n = launched_processes(environ)
    if n == 1 or jax.distributed.is_initialized():
        return jax.process_count()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if environ.get("MPMD_LAB_NUM_PROCESSES"):
        address = environ["MPMD_LAB_COORDINATOR"]
        host = address.rpartition(":")[0]
        loopback = host in ("127.0.0.1", "localhost", "[::1]")
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=n,
            process_id=int(environ["MPMD_LAB_PROCESS_ID"]),
            # a coordinator on this machine listens on the loopback only
            coordinator_bind_address=address if loopback else None,
        )
    else:
        jax.distributed.initialize()
    return jax.process_count()


def mesh_devices(num_devices):
    """The devices of the call's device mesh: None (all, as ``jax.make_mesh`` takes
    them) in one process; across processes the first ``num_devices / P`` devices of
    each process, process 0's first, so mesh position ``i`` is on process
    ``i // (num_devices / P)``."""
    import jax

    processes = jax.process_count()
    if processes == 1:
        return None
    per, rest = divmod(num_devices, processes)
    if rest or not per:
        raise ValueError(
            f"the call's {num_devices} devices cannot be split evenly over {processes} "
            "processes; launch a count of processes that divides it"
        )
    chosen = []
    for p in range(processes):
        local = sorted((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
        if len(local) < per:
            raise ValueError(f"process {p} has {len(local)} devices; the mesh needs {per}")
        chosen += local[:per]
    return chosen


def shard(value, sharding):
    """A host value as a global jax array: each process makes only its own shards."""
    import jax

    if jax.process_count() == 1:
        return jax.device_put(value, sharding)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def fetch(array):
    """A (global) jax array as one numpy array on this process (every process must ask:
    across processes the shards are gathered)."""
    import jax

    if getattr(array, "is_fully_addressable", True):
        return np.asarray(jax.device_get(array))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))
