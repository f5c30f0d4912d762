"""datadep_smem_table: 2 devices; each device copies its table of peers into SMEM
(a TMA load completed on a barrier), loads its peer from there (``table[1]``) and
writes its x into `out` on that peer, with a signal and a wait. The peer comes from
memory the kernel itself wrote: the check cannot know it before the kernel runs (it
says so), the simulator follows it.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 2
EXPECT = "valid"
N = 128


def kernel(x_ref, ids_ref, o_ref, table, barrier, sem):
    plgpu.copy_gmem_to_smem(ids_ref, table, barrier)
    plgpu.barrier_wait(barrier)
    peer = table[1]
    plgpu.remote_ref(o_ref, peer)[...] = x_ref[...]
    pl.semaphore_signal(sem, device_id=peer)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((N,), jnp.float32),
        scratch_types=[
            plgpu.SMEM((4,), jnp.int32),
            plgpu.Barrier(),
            plgpu.SemaphoreType.REGULAR,
        ],
    )
    fn = jax.jit(
        jax.shard_map(
            call, mesh=mesh, in_specs=(P("dev"), P("dev")), out_specs=P("dev"), check_vma=False
        )
    )
    spec = jax.NamedSharding(mesh, P("dev"))
    x = jax.device_put(jnp.arange(DEVICES * N, dtype=jnp.float32), spec)
    ids = jax.device_put(jnp.array([0, 1, 0, 0, 0, 0, 0, 0], jnp.int32), spec)
    return fn, (x, ids)


def expected(x, ids):
    shards = np.split(x, DEVICES)
    return {"out": np.concatenate([shards[1], shards[0]])}
