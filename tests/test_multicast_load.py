"""The collective (cluster-multicast) TMA load, ``plgpu.copy_gmem_to_smem(src, dst,
barrier, collective_axes=...)`` (issue 29), held against real JAX.

Each block of the cluster along the axes issues a share of the copy and every one of
them receives the whole of it; each block's barrier completes once every share has
landed. Kernels written as JAX's tests write them (tests/kernels/mc_*.py,
sync_multicast_load.py) import faithfully, lower in JAX and simulate to the kernel's
values; the scenario form's export lowers and JAX's GPU interpreter computes what
simulate does; the lowering's errors (an axis the cluster lacks, a load the group
cannot share) agree with JAX's, code, stage, type and message; a block that never
issues its share leaves the others waiting (a deadlock), and a read before the wait
is a race.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
from mpmd_lab import probe, simulate
from mpmd_lab.codegen import generate
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_support import same_bits  # noqa: E402
from test_importer import imported_all  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes

KERNELS = ["sync_multicast_load", "mc_multicast_2x2", "mc_multicast_loop"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, dict]:
    return imported_all(KERNELS, tmp_path_factory.mktemp("mc"))


@pytest.mark.parametrize("name", KERNELS)
def test_a_multicast_load_imports_faithfully_and_simulates_to_the_kernels_values(imported, name):
    r = imported[name]
    imp = r["obj"]
    assert r["lowered"] == "ok"  # real JAX lowers the user's own function for the GPU
    assert imp.faithful and imp.ok, imp.summary()
    loads = [
        st for st in _walk(imp.scenario.call.programs[0].body) if st.kind == "copy_gmem_to_smem"
    ]
    assert loads and all(st.collective_axes is not None for st in loads)
    sim = simulate(imp.scenario)
    assert sim.ok, sim.error
    (got,) = imp.outputs(sim.outputs)
    assert same_bits(np.asarray(got), r["expected"][0])


def _walk(body):
    for st in body:
        yield st
        yield from _walk(getattr(st, "body", None) or [])


def _base(imported) -> dict:
    d = imported["sync_multicast_load"]["obj"].scenario.to_dict()
    d.pop("not_imported", None)
    return d


def test_the_export_lowers_and_jaxs_interpreter_computes_what_simulate_does(imported):
    scenarios = [load_scenario(_base(imported))]
    d = copy.deepcopy(imported["mc_multicast_2x2"]["obj"].scenario.to_dict())
    d.pop("not_imported", None)
    scenarios.append(load_scenario(d))
    for s in scenarios:
        assert "collective_axes=" in generate(s)
    lowered = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    assert [r.ok for r in lowered] == [True, True], [r.message[:200] for r in lowered]
    ran = probe.probe_many(scenarios, ("interpret",), timeout=120)
    for s, r in zip(scenarios, ran, strict=True):
        assert r.ok, (s.name, r.message[:300])
        sim = simulate(s)
        assert sim.ok
        for k, v in r.outputs.items():
            assert same_bits(np.asarray(sim.outputs[k]), np.asarray(v)), (s.name, k)


def _shared(base: dict, n: int, shape: list[int], transforms: list, axes="c") -> dict:
    d = copy.deepcopy(base)
    d["call"]["programs"][0]["mesh"]["cluster"] = {"c": n}
    (out,) = d["call"]["outputs"]
    d["call"]["outputs"][out]["shape"] = [n, *shape]
    (buf,) = d["buffers"]
    d["buffers"][buf]["shape"] = shape
    d["call"]["scratch"]["smem_ref"]["shape"] = shape
    d["call"]["scratch"]["smem_ref"]["transforms"] = transforms
    d["call"]["programs"][0]["body"][0]["collective_axes"] = axes
    return d


TILED = [{"op": "tiling", "tile": [8, 32]}, {"op": "swizzle", "bytes": 128}]


def test_the_lowerings_errors_are_jaxs(imported):
    """An axis the cluster lacks (CLUSTER_REF_UNKNOWN_AXIS, at the field), and loads the
    group cannot share (MULTICAST_LOAD_SHARE: the transformed slice shape JAX prints,
    plain and tiled), next to shapes JAX shares (or refuses for another reason, which
    the check also gives)."""
    base = _base(imported)
    cases = [
        _shared(base, 2, [64, 32], TILED, axes="blocks"),
        _shared(base, 3, [64, 32], []),
        _shared(base, 3, [64, 32], TILED),
        _shared(base, 4, [6, 64], []),
        _shared(base, 4, [2, 64], []),
        _shared(base, 4, [8, 64], []),
        _shared(base, 2, [64, 32], []),
        _shared(base, 2, [8, 32], TILED),
    ]
    scenarios = [load_scenario(c) for c in cases]
    results = probe.probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    codes = []
    for s, r in zip(scenarios, results, strict=True):
        d = first_error(check(s))
        if r.ok:
            assert d is None, d.one_line()
            codes.append(None)
            continue
        assert d is not None, (r.code, r.message[:200])
        assert (d.stage, d.jax.type) == (r.stage, r.error_type), (d.one_line(), r.message)
        assert r.message.startswith(d.jax.message), (d.jax.message, r.message)
        codes.append(d.code)
    assert codes == [
        "CLUSTER_REF_UNKNOWN_AXIS",
        "MULTICAST_LOAD_SHARE",
        "MULTICAST_LOAD_SHARE",
        "MULTICAST_LOAD_SHARE",
        None,
        None,
        None,
        "GPU_LAYOUT_INFERENCE",
    ]
    d = first_error(check(scenarios[0]))
    assert d.path == "call.programs[0].body[0].collective_axes"
    d = first_error(check(scenarios[2]))
    assert "[8, 8, 32]" in d.message  # the tiled slice, its unit dim dropped, as JAX says


def test_a_block_that_never_issues_its_share_leaves_the_others_waiting(imported):
    d = _base(imported)
    body = d["call"]["programs"][0]["body"]
    body[0] = {"op": "when", "cond": "c == 0", "body": [body[0]]}
    s = load_scenario(d)
    codes = [x.code for x in check(s) if x.is_error]
    assert any(c.startswith("DEADLOCK") for c in codes), codes
    sim = simulate(s)
    assert not sim.ok and sim.error.code.startswith("DEADLOCK"), sim.error


def test_reading_before_the_wait_races_with_the_shares(imported):
    d = _base(imported)
    del d["call"]["programs"][0]["body"][1]  # no barrier_wait
    (race,) = [x for x in check(load_scenario(d)) if x.code == "RACE_DETECTED"]
    assert "smem_ref" in race.message


def test_blocks_naming_different_sources_are_said_to_be_unfollowed(imported):
    d = copy.deepcopy(imported["mc_multicast_2x2"]["obj"].scenario.to_dict())
    d.pop("not_imported", None)
    # the group is along x; index the source by x instead of y: the shares differ
    (let,) = [st for st in d["call"]["programs"][0]["body"] if st.get("let") == "x_at"]
    let["transforms"][0]["index"] = ["x"]
    sim = simulate(load_scenario(d))
    assert not sim.ok and sim.error.code == "SIM_UNSUPPORTED"
    assert "different sources" in sim.error.message
