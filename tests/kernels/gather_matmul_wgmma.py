"""gather_matmul_wgmma: 2 devices, out = concat(lhs shards) @ rhs with one WGMMA a step.

Each device holds a [M, K] row block of the lhs and the whole [K, N] rhs. Step 0
multiplies its own block (TMA-loaded into SMEM); then it sends that block to its
peer's landing buffer with a TMA store, signals, waits, and step 1 multiplies the
block that arrived. The product is ``plgpu.wgmma`` into a ``plgpu.ACC`` allocated by
``pl.run_scoped``, stored into the output rows of the block it belongs to (offset
``pl.multiple_of(blk * M, M)``). f16 operands with small integers: exact in f32.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"
M, K, N = 64, 64, 128
LAYOUT = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


def kernel(a_ref, b_ref, o_ref, landing_ref, a_smem, b_smem, loaded, got):
    me = lax.axis_index("dev")
    peer = 1 - me
    plgpu.copy_gmem_to_smem(b_ref, b_smem, loaded.at[0])
    plgpu.barrier_wait(loaded.at[0])

    def multiply(src, blk):
        plgpu.copy_gmem_to_smem(src, a_smem, loaded.at[1])
        plgpu.barrier_wait(loaded.at[1])

        def product(acc):
            plgpu.wgmma(acc, a_smem, b_smem)
            return acc[...]

        o_ref[pl.ds(pl.multiple_of(blk * M, M), M)] = pl.run_scoped(
            product, plgpu.ACC((M, N), jnp.float32)
        )

    multiply(a_ref, me)
    plgpu.copy_smem_to_gmem(a_smem, plgpu.remote_ref(landing_ref, peer))
    plgpu.wait_smem_to_gmem(0)
    pl.semaphore_signal(got, device_id=peer)
    pl.semaphore_wait(got)
    multiply(landing_ref, peer)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:DEVICES], ["dev"])
    call = plgpu.kernel(
        kernel,
        out_type=(
            jax.ShapeDtypeStruct((DEVICES * M, N), jnp.float32),
            jax.ShapeDtypeStruct((M, K), jnp.float16),
        ),
        scratch_types=[
            plgpu.SMEM((M, K), jnp.float16, transforms=LAYOUT),
            plgpu.SMEM((K, N), jnp.float16, transforms=LAYOUT),
            plgpu.Barrier(num_barriers=2),
            plgpu.SemaphoreType.REGULAR,
        ],
    )

    def body(a, b):
        out, _ = call(a, b)
        return out

    fn = jax.jit(
        jax.shard_map(
            body, mesh=mesh, in_specs=(P("dev"), P()), out_specs=P("dev"), check_vma=False
        )
    )
    a = (jnp.arange(DEVICES * M * K) % 7 - 3).astype(jnp.float16).reshape(DEVICES * M, K)
    b = (jnp.arange(K * N) % 5).astype(jnp.float16).reshape(K, N)
    return fn, (a, b)


def expected(a, b):
    prod = a.astype(np.float32) @ b.astype(np.float32)
    # every device computes the whole product; the out_spec stacks the two
    return {"out": np.concatenate([prod] * DEVICES)}
