"""``run`` overhead: the generated call against a hand-written ``pl.kernel`` call.

Both run in this process on the same input, steady state (jitted, warmed up): on a GPU
compiled, else in the Pallas GPU interpreter on the CPU. The Lab's second Run of the
same scenario (``Session.run``: a warm worker, a child process, runs the call it built
before and sends the outputs back) is shown too.
"""

from __future__ import annotations

from typing import Any

from bench.jaxcall import build_and_args, module_of
from bench.table import Row, verdict
from bench.timing import fmt_s, median_seconds

SCENARIO = "two-block-copy"
TARGET = 0.10
#: a second Run of an unchanged scenario (warm worker, cached call) against the jitted call
RUN_AGAIN_TARGET = 2.0


def hand_written(interpret: Any) -> Any:
    """two-block-copy, written by hand: each block copies its half of x into out."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    mesh = plgpu.Mesh(grid=(2,), grid_names=("b",))

    def body(x_ref, o_ref):
        half = pl.ds(lax.axis_index("b") * 128, 128)
        o_ref.at[half][...] = x_ref.at[half][...]

    kernel = pl.kernel(
        body,
        out_type=(jax.ShapeDtypeStruct((256,), jnp.float32),),
        mesh=mesh,
        interpret=interpret,
    )
    return jax.jit(lambda x: kernel(x)[0])


def rows(repeats: int = 9) -> list[Row]:
    import jax
    import numpy as np
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from mpmd_lab import gallery

    on_gpu = any(d.platform == "gpu" for d in jax.devices())
    mode = None if on_gpu else "gpu"
    where = "compiled on the GPU" if on_gpu else "GPU interpreter on CPU"
    s = gallery.load(SCENARIO)
    ns = module_of(s, interpret=mode)
    fn, args = build_and_args(ns, mode)
    hand = hand_written(None if on_gpu else plgpu.InterpretGPUParams())
    ours = fn(*args)["out"]
    theirs = hand(args[0])
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))  # the same call

    def run_ours() -> None:
        jax.block_until_ready(fn(*args))

    def run_hand() -> None:
        jax.block_until_ready(hand(args[0]))

    # interleave the two so drift in machine load hits both alike
    t_ours, t_hand = [], []
    for _ in range(3):
        t_ours.append(median_seconds(run_ours, repeats=repeats // 3 or 1))
        t_hand.append(median_seconds(run_hand, repeats=repeats // 3 or 1))
    a, b = sorted(t_ours)[1], sorted(t_hand)[1]
    out = [
        Row(
            "run overhead",
            f"{SCENARIO}: generated call vs pl.kernel ({where})",
            fmt_s(a),
            fmt_s(b),
            f"{a / b:.3f}",
            f"within {TARGET:.0%}",
            verdict(a / b <= 1 + TARGET),
            value=a,
            unit="s",
            base=b,
        )
    ]
    from mpmd_lab.session import Session

    backend = "gpu" if on_gpu else "interpret"
    # as the Lab's Run button does it: Session.run, which hands runtime.run the analysis
    # the session already holds (no check is run again for an unchanged scenario)
    session = Session(s)
    first = session.run(backend, timeout=600)  # starts the worker
    if not first.ok:
        out.append(Row("run overhead", "runtime.run (warm worker)", f"n/a ({first.summary()})"))
        return out
    again = session.run(backend, timeout=600)  # the second Run of the same scenario
    t_rt = median_seconds(lambda: session.run(backend, timeout=600), repeats=5, warmup=0)
    cached = "cached call" if again.cached else "NOT cached"
    out.append(
        Row(
            "run overhead",
            f"the Lab's Run again (Session.run), unchanged scenario, warm child worker "
            f"({cached}; run+IPC) vs pl.kernel",
            fmt_s(t_rt),
            fmt_s(b),
            f"{t_rt / b:.1f}",
            f"within {RUN_AGAIN_TARGET:g}x",
            verdict(t_rt / b <= RUN_AGAIN_TARGET and again.cached),
            value=t_rt,
            unit="s",
            base=b,
        )
    )
    return out
