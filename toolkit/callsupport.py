"""Support code shared by the runtime and every exported file.

This module depends on numpy and jax alone: ``mpmd_lab.codegen`` copies its source
verbatim into exported files, so an exported call and ``mpmd-lab run`` encode
inputs and outputs with the very same code.
"""

import hashlib
import math

import numpy as np

MAX_VALUES = 1024


def host_array(init, shape, dtype, seed, num_devices):
    """A buffer's global host value (dim 0 times the device count), per SCENARIO.md."""
    import jax.numpy as jnp

    dtype = jnp.dtype(dtype)
    shape = tuple(shape)
    gshape = (shape[0] * num_devices, *shape[1:]) if shape else ()
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
        return value  # the global value: dim 0 split over the devices
    one = value.reshape(shape)
    if not shape:
        return one
    return np.concatenate([one] * num_devices, axis=0)


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
