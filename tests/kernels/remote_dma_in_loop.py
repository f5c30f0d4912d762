"""remote_dma_in_loop: 2 devices, an element-wise exchange with a handshake per loop iteration.

After test_remote_dma_in_loop (tests/pallas/gpu_pallas_distributed_test.py):
a ``lax.fori_loop(0, 128, ..., unroll=False)`` in which iteration i copies
x[0, i] locally, does the ready handshake, writes x[0, i] into the peer's
out[0, i] through a remote ref created once before the loop
(``neighbor_ptr.at[0, i].set(x_ref.at[0, i].get())``, scalar ref get/set), and
does the recv handshake.  256 semaphore round trips in all.
out_d = x_{1-d}.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 2
EXPECT = "valid"


def kernel(x_ref, y_ref, ready_sem, recv_sem):
    other_dev_id = 1 - lax.axis_index("dev")
    neighbor_ptr = plgpu.remote_ref(y_ref, other_dev_id)

    def body(i, _):
        y_ref.at[0, i].set(x_ref.at[0, i].get())
        pl.semaphore_signal(ready_sem, device_id=other_dev_id)
        pl.semaphore_wait(ready_sem)
        neighbor_ptr.at[0, i].set(x_ref.at[0, i].get())
        pl.semaphore_signal(recv_sem, device_id=other_dev_id)
        pl.semaphore_wait(recv_sem)

    lax.fori_loop(0, 128, body, init_val=None, unroll=False)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((1, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(2 * 128, dtype=jnp.float32).reshape(2, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": x[::-1].copy()}
