"""Verdicts for meshes too big to run whole, by symmetry (mpmd_lab.validate.symmetry):
the gallery's ring collectives grown to 64, 256 and 1,024 devices and the collective
matmul at JAX's real size (132 blocks x 3 warpgroups x 4 devices) get the verdict the
engine gives the small mesh; where the symmetry does not hold, the check says why and
gives no verdict."""

from __future__ import annotations

import json

import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import step_estimate
from mpmd_lab.validate import analyze
from mpmd_lab.validate.sync import MAX_STEPS

from bench.sync_scale import RINGS, RINGS_MORE, SIZES, real_matmul, scaled

#: what the verdict is made of: the errors and the balance warning, by code and path
VERDICT = {
    "RACE",
    "RACE_DETECTED",
    "DEADLOCK_SEMAPHORE",
    "DEADLOCK_BARRIER",
    "SEMAPHORE_IMBALANCE",
}


def verdict(data: dict) -> tuple[set[tuple[str, str]], dict[str, str]]:
    diags = analyze(load_scenario(data), fixes=False).diagnostics
    return {(d.code, d.path) for d in diags if d.code in VERDICT}, {
        d.code: d.message for d in diags if d.code.startswith("SYNC_")
    }


@pytest.fixture(scope="module")
def small() -> dict[str, set[tuple[str, str]]]:
    """The engine's own verdict on each gallery ring (4 devices: every actor run)."""
    out = {}
    for name in RINGS + RINGS_MORE:
        data = scaled(name, 4)
        assert step_estimate(load_scenario(data)) <= MAX_STEPS
        out[name], notes = verdict(data)
        assert not notes, notes  # judged whole, no reduction
    return out


def test_the_gallery_rings_have_the_verdicts_they_describe(small):
    assert {c for c, _ in small["ring-all-gather"]} == set()
    assert {c for c, _ in small["ring-reduce-scatter"]} == set()
    assert "RACE_DETECTED" in {c for c, _ in small["ring-all-gather-no-wait"]}
    assert {c for c, _ in small["ring-all-gather-deadlock"]} == {"DEADLOCK_SEMAPHORE"}


@pytest.mark.parametrize("devices", SIZES)
@pytest.mark.parametrize("name", RINGS + RINGS_MORE)
def test_a_big_ring_gets_the_small_rings_verdict(small, name, devices):
    data = scaled(name, devices)
    assert data["device_mesh"] == {"dev": devices}
    assert step_estimate(load_scenario(data)) > MAX_STEPS  # the engine alone would stop
    found, notes = verdict(data)
    assert found == small[name]
    assert "SYNC_NOT_CHECKED" not in notes, notes["SYNC_NOT_CHECKED"]
    note = notes["SYNC_BY_SYMMETRY"]
    assert "uniform in 'dev'" in note and "dev + 1" in note
    assert f"judged at D'=4 and 5 for all {devices} devices" in note


def test_the_racy_ring_fails_the_check_at_every_size(cli, tmp_path):
    """The issue's case: the all-gather without its wait exited 0 past 32 devices."""
    for devices in (32, 64, 1024):
        path = tmp_path / f"no-wait-{devices}.json"
        path.write_text(json.dumps(scaled("ring-all-gather-no-wait", devices)))
        r = cli("check", str(path))
        assert r.returncode != 0, r.stdout
        assert "RACE_DETECTED" in r.stdout


def test_a_ring_that_singles_out_a_device_is_not_reduced():
    data = scaled("ring-all-gather", 64)
    loop = data["call"]["programs"][0]["body"][3]
    loop["body"] = [{"op": "when", "cond": "dev != 0", "body": loop["body"]}]
    found, notes = verdict(data)
    assert "SYNC_BY_SYMMETRY" not in notes
    msg = notes["SYNC_NOT_CHECKED"]
    assert "symmetry does not reduce it" in msg and "depends on the device" in msg
    assert "races, deadlocks and semaphore balance are not checked" in msg


def test_a_constant_standing_for_the_ring_size_is_not_reduced():
    """A loop written for 64 devices as ``range(63)``: on a smaller ring it would run a
    different kernel, so the check does not pretend it is the same."""
    data = scaled("ring-all-gather", 64)
    data["call"]["programs"][0]["body"][3]["stop"] = 63
    _, notes = verdict(data)
    assert "SYNC_BY_SYMMETRY" not in notes
    assert "the constant 63" in notes["SYNC_NOT_CHECKED"]


def test_a_device_id_off_the_ring_is_not_reduced():
    data = scaled("ring-all-gather", 64)
    body = data["call"]["programs"][0]["body"]
    body[2]["transforms"][0]["device"] = "(2 * dev + 1) % axis_size(dev)"
    _, notes = verdict(data)
    assert "SYNC_BY_SYMMETRY" not in notes
    assert "not dev + c modulo the ring" in notes["SYNC_NOT_CHECKED"]


def _drop_loader_wait(data: dict) -> dict:
    """The matmul's loader no longer waits until both consumers are done with the tile."""
    loader = data["call"]["programs"][0]["body"][3]["body"]
    assert loader[3]["body"][0] == {"op": "barrier_wait", "barrier": "consumed"}
    del loader[3]["body"][0]
    return data


@pytest.mark.parametrize("mutate", [lambda d: d, _drop_loader_wait], ids=["as-is", "no-wait"])
def test_the_collective_matmul_at_its_real_size(mutate):
    """132 blocks x 3 warpgroups x 4 devices, judged on two and three blocks: the verdict
    of the same kernel at two blocks, which the engine runs whole."""
    big = mutate(real_matmul(4, 132))
    two = mutate(real_matmul(4, 2))
    assert step_estimate(load_scenario(big)) > MAX_STEPS >= step_estimate(load_scenario(two))
    found, notes = verdict(big)
    want, small_notes = verdict(two)
    assert not small_notes
    assert found == want
    assert "SYNC_NOT_CHECKED" not in notes
    assert (
        "symmetric blocks along b (132 blocks): judged on blocks 0 and 1"
        in (notes["SYNC_BY_SYMMETRY"])
    )


def test_the_collective_matmul_model_is_clean_and_its_mutant_is_not():
    assert verdict(real_matmul(4, 2))[0] == set()
    codes = {c for c, _ in verdict(_drop_loader_wait(real_matmul(4, 2)))[0]}
    assert "RACE_DETECTED" in codes


def test_blocks_that_steer_by_their_index_are_not_reduced():
    data = real_matmul(4, 132)
    body = data["call"]["programs"][0]["body"]
    body[4]["cond"] = "wg < 2 and b < 131"
    _, notes = verdict(data)
    assert "SYNC_BY_SYMMETRY" not in notes
    assert "uses the block index b in its cond" in notes["SYNC_NOT_CHECKED"]


def test_a_race_at_one_step_only_is_kept_on_the_small_rings():
    """The wait skipped at step 6 alone: the race is at step 7, which forwards the chunk
    not waited for, so the small rings must run past it (D'=10 and 11: a ring of 8
    runs steps 0..6 only and is clean, one of 9 races; the check would then see the two
    small rings disagree and give no verdict)."""

    def skip_wait_at_6(devices: int) -> dict:
        data = scaled("ring-all-gather", devices)
        body = data["call"]["programs"][0]["body"][3]["body"]
        assert body[-1]["op"] == "semaphore_wait"
        body[-1] = {"op": "when", "cond": "i != 6", "body": [body[-1]]}
        return data

    whole, notes = verdict(skip_wait_at_6(16))  # the engine runs every device
    assert not notes
    assert "RACE_DETECTED" in {c for c, _ in whole}
    found, notes = verdict(skip_wait_at_6(256))
    assert found == whole
    assert "judged at D'=10 and 11 for all 256 devices" in notes["SYNC_BY_SYMMETRY"]


@pytest.mark.slow
def test_a_small_mesh_still_too_big_gives_no_verdict():
    """The card's relay (999 rounds on 8 devices) is judged on rings of 4 and 5; with
    2,999 rounds even a ring of 4 is past the bound, and the check says so."""
    from mpmd_lab.knowledge import EXAMPLES

    data = json.loads((EXAMPLES / "SYNC_BY_SYMMETRY.json").read_text())
    found, notes = verdict(data)
    assert found == set() and set(notes) == {"SYNC_BY_SYMMETRY"}
    data["call"]["programs"][0]["body"][1]["stop"] = 2999
    found, notes = verdict(data)
    assert found == set() and "SYNC_BY_SYMMETRY" not in notes
    assert "even the small mesh is too big to run whole" in notes["SYNC_NOT_CHECKED"]
