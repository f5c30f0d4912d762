"""Simulate what JAX's interpreter runs: a call the Mosaic GPU lowering refuses (here
GPU_LAYOUT_INFERENCE: 16-element loads) is still simulated when asked
(``simulate(..., past_lowering=True)``), its lowering error kept first, so its races are
found, as JAX's GPU interpreter finds them (racy and race-free variants of two cluster
blocks exchanging rows through GMEM behind a cluster barrier, as in JAX's
test_cluster_barrier_peer_communication_through_gmem).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import probe
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate

HERE = Path(__file__).resolve().parent / "scenarios" / "honesty"
RACY = HERE / "cluster_peer_gmem_racy.json"
SAFE = HERE / "cluster_peer_gmem.json"


def test_the_lowering_error_is_real_jaxs():
    r = probe.probe(load_scenario(RACY), ("build", "trace", "gpu-lower"), timeout=300)
    assert not r.ok and r.stage == "gpu-lower"
    assert "Failed to infer a possible set of layouts" in (r.message or "")


@pytest.mark.parametrize("path,racy", [(RACY, True), (SAFE, False)])
def test_simulated_past_the_lowering_error(path, racy):
    s = load_scenario(path)
    stopped = simulate(s)  # by default a GPU-lowering error stops it, as a GPU compile does
    assert not stopped.ok and stopped.error.code == "GPU_LAYOUT_INFERENCE"
    r = simulate(s, past_lowering=True)
    assert r.ok and r.lowering is not None and r.lowering.code == "GPU_LAYOUT_INFERENCE"
    diags = r.diagnostics()
    assert diags[0] is r.lowering  # the lowering error at the top
    assert r.summary().startswith("GPU lowering: error GPU_LAYOUT_INFERENCE")
    assert r.to_json()["lowering_error"]["code"] == "GPU_LAYOUT_INFERENCE"
    assert bool(r.races) is racy
    assert ("RACE" in [d.code for d in diags]) is racy
    x = np.arange(32, dtype=np.int32).reshape(2, 16)
    np.testing.assert_array_equal(r.outputs["out"], x[::-1])


JAX_RACES = textwrap.dedent(
    """
    import json
    import jax, jax.numpy as jnp
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jax._src.pallas.mosaic_gpu.interpret import interpret_pallas_call as interp

    out = {}
    for wait in (False, True):
        def body(x_ref, s_ref, o_ref, cb):
            c = jax.lax.axis_index("c")
            s_ref[c, :] = x_ref[c, :]
            plgpu.barrier_arrive(cb)
            if wait:
                plgpu.barrier_wait(cb)
            o_ref[c, :] = s_ref[1 - c, :]

        x = jnp.arange(32, dtype=jnp.int32).reshape(2, 16)
        call = plgpu.kernel(
            body,
            out_type=jax.ShapeDtypeStruct((2, 16), jnp.int32),
            scratch_types=[plgpu.ClusterBarrier(collective_axes=("c",), num_arrivals=1)],
            cluster=(2,),
            cluster_names=("c",),
            interpret=plgpu.InterpretGPUParams(detect_races=True),
        )

        def run(x):
            s = jax.new_ref(jnp.zeros((2, 16), jnp.int32))
            return call(x, s)

        try:  # JAX's interpreter raises on the race it detects
            got = jax.jit(run)(x).tolist()
            raced = bool(interp.get_races().races_found)
        except Exception as e:
            got, raced = None, "RACE DETECTED" in str(e)
        out[str(wait)] = [raced, got]
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.slow
def test_jaxs_interpreter_agrees_on_the_race():
    done = subprocess.run(
        [sys.executable, "-c", JAX_RACES], capture_output=True, text=True, timeout=300
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["False"][0] is True and out["True"][0] is False  # racy, race-free
    assert out["True"][1] == np.arange(32).reshape(2, 16)[::-1].tolist()
    for path, wait in ((RACY, "False"), (SAFE, "True")):
        r = simulate(load_scenario(path), past_lowering=True)
        assert bool(r.races) is out[wait][0]
    safe = simulate(load_scenario(SAFE), past_lowering=True)
    np.testing.assert_array_equal(safe.outputs["out"], np.asarray(out["True"][1]))


def test_cli_run_simulates_past_the_lowering_error(capsys):
    """``mpmd-lab run --backend simulate --past-lowering``: the races, the lowering error
    first; without the flag the lowering error stops it and says how to go past."""
    from mpmd_lab.cli import main

    cli = ["run", str(RACY), "--backend", "simulate"]
    assert main(cli) == 1
    out = capsys.readouterr().out
    assert "GPU_LAYOUT_INFERENCE" in out and "--past-lowering" in out
    assert main([*cli, "--past-lowering", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["status"] == "ok" and got["backend"] == "simulate"
    assert got["lowering_error"]["code"] == "GPU_LAYOUT_INFERENCE"
    assert got["races"]
    assert main([*cli, "--past-lowering"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("cluster-peer-gmem-racy: GPU lowering error")
    assert main(["run", str(RACY), "--backend", "interpret", "--past-lowering"]) == 2
    assert "use --backend simulate" in capsys.readouterr().err


def test_lab_run_offers_and_shows_the_simulation_past_lowering():
    from mpmd_lab.session import Session
    from mpmd_lab.widgets.run_panel import RunPanel

    panel = RunPanel(Session(load_scenario(RACY)), background=False)
    panel.backend.value = "simulate"
    panel.run()
    assert panel.outcome is not None and panel.outcome.status == "error"
    past = [
        b
        for box in panel.results.children
        for b in getattr(box, "children", ())
        if "mpl-past-lowering" in getattr(b, "_dom_classes", ())
    ]
    assert len(past) == 1
    past[0].click()
    o = panel.outcome
    assert o.status == "ok" and o.backend == "simulate" and o.races
    assert o.lowering is not None and o.lowering.code == "GPU_LAYOUT_INFERENCE"
    first = panel.results.children[0]
    assert "mpl-run-lowering" in first._dom_classes  # the lowering error on top
