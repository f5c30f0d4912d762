"""Shipped fixes: after each, check passes and real JAX agrees (traces and lowers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Edit
from mpmd_lab.fixes import apply_all, apply_edit, apply_fix, fix_all, parse_path
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

CODES = Path(__file__).parent / "scenarios" / "codes"
JAX_STAGES = ("build", "trace", "gpu-lower")
FIXABLE = [
    gallery.load("dup-ref"),
    gallery.load("peer-then-multicast"),
    gallery.load("multicast-then-peer"),
    *(
        load_scenario(CODES / f"{c}.json")
        for c in [
            "MPMD_DUP_REF",
            "REF_PEER_TO_MULTICAST",
            "REF_MULTICAST_TO_PEER",
            "TRANSPOSE_RANK",
            "AT_OOB_SLICE",
            "MPMD_GPU_SCRATCH",
            "GPU_TOO_MANY_BARRIERS",
            "MPMD_RETURNS_VALUE",
            "MPMD_CAPTURED_ARRAY",
            "MPMD_GPU_MESH_NOT_COMBINABLE",
            "COLLECTIVE_AXES_NOT_ALL",
            "MESH_CLUSTER_RANK",
            "MESH_THREADS_PAIR",
            "MESH_TOO_MANY_THREADS",
            "TMEM_DTYPE_PACKED",
            "TMEM_ONLY_ARGS",
            "TMEM_NO_TRANSFORMS",
            "TRANSPOSE_REF_RAW_BUG",
            "TRANSPOSE_NEGATIVE_PERM_GPU",
            "AT_TOO_MANY_INDICES",
            "ARG_TRANSFORM_ON_ARRAY",
            "JAX_ASSERTION",
            "MPMD_NOT_MANUAL",
            "MPMD_CLOSED_REF_ALIAS",
        ]
    ),
]


def test_paths() -> None:
    assert parse_path("call.args[1].param") == ("call", "args", 1, "param")
    data = {"a": [1, 2, 3]}
    apply_edit(data, Edit(op="remove", path="a[1]"))
    apply_edit(data, Edit(op="add", path="a[0]", value=9))
    assert data == {"a": [9, 1, 3]}


def test_fixes_make_check_pass_and_jax_agree() -> None:
    """Each fix removes its error; the fixed scenario is valid (or shows the next, different
    problem) and real JAX agrees with the static verdict and first code."""
    fixed = []
    for s in FIXABLE:
        before = first_error(check(s))
        assert before is not None and before.fix is not None, s.name
        after, applied = apply_all(s)
        assert applied, s.name
        assert before.code not in {d.code for d in check(after) if d.is_error}, s.name
        fixed.append(after)
    valid = sum(first_error(check(s)) is None for s in fixed)
    assert valid >= len(fixed) // 2
    results = probe_many(fixed, stages=("build", "trace", "gpu-lower"))
    for s, r in zip(fixed, results, strict=True):
        # JAX is asked to build, trace and lower: what only a GPU run shows (a race, a
        # deadlock) is not its to say
        mine = first_error([d for d in check(s) if d.stage in ("schema", *JAX_STAGES)])
        theirs = r.get("code") if r["stage"] else None
        assert (mine.code if mine else None) == theirs, (s.name, r, mine)


def test_dup_ref_fix_rebinds_parameter() -> None:
    s = gallery.load("dup-ref")
    after, _ = apply_all(s)
    assert [a.param for a in after.call.args] == ["a_ref"]
    body = after.call.programs[0].body[0]
    assert (body.lhs, body.rhs) == ("a_ref", "a_ref")


def test_a_candidate_is_checked_once_by_content() -> None:
    """``recheck.checked`` keeps each candidate's check by content: checking a scenario
    again offers the same fixes without checking its candidates again, and the fixed
    scenario's own check (what applying the fix gives) is the candidate's."""
    from mpmd_lab import fixes, recheck, validate

    fixes.clear_cache()
    first = check(gallery.load("dup-ref"))
    (fix,) = first[0].fixes
    assert len(recheck._CHECKED) == 1
    data = fixes._fixed_data(gallery.load("dup-ref"), fix)
    kept = fixes.checked(data)
    assert kept is not None
    again = check(gallery.load("dup-ref"))
    assert again == first and len(recheck._CHECKED) == 1
    # the fixes' part of a check, in bytecode instructions: checking a candidate again
    # (its rules and race check) costs several times what finding it kept does
    from bench.icount import Counter

    parts: list[dict[str, float]] = []
    for clear in (True, False):
        if clear:
            fixes.clear_cache()
        parts.append({})
        with Counter() as clock:
            validate.analyze(gallery.load("dup-ref"), timings=parts[-1], clock=clock)
    assert parts[1]["fixes"] * 3 < parts[0]["fixes"]
    fixed = fixes.apply_fix(gallery.load("dup-ref"), fix)
    assert tuple(validate.analyze(fixed, fixes=False).diagnostics) == kept
    fixes.clear_cache()
    assert check(gallery.load("dup-ref")) == first  # (the same answer, checked afresh)
    assert fixes.checked({"not": "a scenario"}) is None


FIX_CORPUS = Path(__file__).parent / "fix_corpus"


def test_a_ring_step_past_the_mesh_wraps_with_axis_size() -> None:
    """REMOTE_DEVICE_OOB on ``dev + 1``: the fix wraps it with ``% axis_size(dev)`` in
    every field naming that device (the remote view and the signal), and the ring is
    valid then; ``dev - 1`` adds the axis size first (a negative ``%`` keeps its sign)."""
    s = load_scenario(FIX_CORPUS / "ring-reduce-scatter-right-oob.json")
    d = first_error(check(s))
    assert d is not None and d.code == "REMOTE_DEVICE_OOB" and d.fix is not None
    assert {e.value for e in d.fix.edits} == {"(dev + 1) % axis_size(dev)"}
    assert len(d.fix.edits) == 3 and d.fix.after == []
    assert first_error(check(apply_fix(s, d.fix))) is None
    left = load_scenario(FIX_CORPUS / "ring-reduce-scatter-left-oob.json")
    d = first_error(check(left))
    assert d is not None and d.fix is not None
    assert {e.value for e in d.fix.edits} == {"(dev - 1 + axis_size(dev)) % axis_size(dev)"}
    assert first_error(check(apply_fix(left, d.fix))) is None


def test_a_constant_device_past_the_mesh_wraps_to_a_device() -> None:
    s = load_scenario(CODES / "REMOTE_DEVICE_OOB.json")  # device {"dev": 3} of 2
    d = first_error(check(s))
    assert d is not None and d.fix is not None
    assert [(e.path, e.value) for e in d.fix.edits] == [(d.path, 1)]
    assert "REMOTE_DEVICE_OOB" not in {x.code for x in check(apply_fix(s, d.fix))}


def test_an_out_of_range_slice_keeps_its_size_and_moves_inside() -> None:
    """Not clamped to a smaller slice (which leaves a shape mismatch): the 4 rows stay 4."""
    for name, index in [
        ("slice-past-the-end", [[4, 8]]),
        ("ds-slice-past-the-end", [{"ds": [4, 4]}, [0, 128]]),
    ]:
        s = load_scenario(FIX_CORPUS / f"{name}.json")
        d = first_error(check(s))
        assert d is not None and d.code == "AT_OOB_SLICE" and d.fix is not None
        assert [e.value for e in d.fix.edits] == [index], name
        assert "size 4" in d.fix.description
        assert d.fix.after == [] and first_error(check(apply_fix(s, d.fix))) is None


def test_fix_all_steps_say_what_they_changed_and_left() -> None:
    """``fix_all`` applies best fixes until valid; each step's ``left`` is what the check
    finds after it, and it is what the fix said it leaves; a repaired scenario whose
    description says it is broken is renamed and redescribed."""
    run = fix_all(gallery.load("dup-ref"))
    assert run.valid and run.stopped.startswith("valid")
    assert [(st.code, st.left, st.as_said) for st in run.steps] == [("MPMD_DUP_REF", [], True)]
    assert run.scenario.name == "dup-ref-fixed"
    assert run.scenario.description.startswith("Repaired by mpmd-lab (drop argument 1")
    assert "JAX refuses" in run.scenario.description.split("Before the fix:")[1]
    # a scenario that is valid already: nothing applied, nothing renamed
    ok = fix_all(gallery.load("ring-all-gather"))
    assert ok.steps == [] and ok.valid and ok.scenario == gallery.load("ring-all-gather")
    # an error no fix repairs: it stops there and says so
    s = load_scenario(
        Path(__file__).parents[1] / "toolkit/knowledge/examples/EXPR_ZERO_DIVISION.json"
    )
    stuck = fix_all(s)
    assert not stuck.valid and stuck.stopped.startswith("no fix for EXPR_ZERO_DIVISION")


def test_session_fix_all_is_one_undo_step_and_the_lab_has_a_button() -> None:
    from mpmd_lab.session import Session
    from mpmd_lab.widgets import Lab
    from mpmd_lab.widgets.testing import find, text_of

    st = Session(load_scenario(FIX_CORPUS / "ring-all-gather-right-oob.json"))
    assert not st.valid
    run = st.fix_all()
    assert st.valid and run.valid and len(run.steps) == 1
    assert st.scenario.name == "ring-all-gather-right-oob-fixed"
    assert st.message.startswith("fix all: 1 fix, valid")
    st.undo()
    assert not st.valid and st.scenario.name == "ring-all-gather-right-oob"
    lab = Lab("dup-ref", background=False, graph=False)
    find(lab.problems, "mpl-fix-all").click()
    assert lab.state.valid
    assert "Fix all" in text_of(lab.problems) and "fixed MPMD_DUP_REF" in text_of(lab.problems)


def test_cli_fix_all_prints_the_steps(tmp_path: Path, capsys) -> None:
    from mpmd_lab.cli import main

    src = FIX_CORPUS / "ring-reduce-scatter-left-oob.json"
    out = tmp_path / "fixed.json"
    assert main(["fix", "--all", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("1. fixed REMOTE_DEVICE_OOB at call.programs[0].body[0]")
    assert "(leaves no error)" in text and "valid: no error left" in text
    assert first_error(check(load_scenario(out))) is None
    # without --all: one fix; an error it cannot fix: exit 1
    bad = Path(__file__).parents[1] / "toolkit/knowledge/examples/EXPR_ZERO_DIVISION.json"
    assert main(["fix", "--all", str(bad)]) == 1
    assert "no fix for EXPR_ZERO_DIVISION" in capsys.readouterr().out


def test_a_race_is_said_by_its_kind_in_the_buffers_coordinates() -> None:
    """The message leads with the race's kind, names each actor by what tells them apart
    and gives the region as the buffer indexes it; the card's title says the kind too;
    the write/write race's best fix gives each writer its own tile, and it is valid."""
    from mpmd_lab.catalogue import title

    s = load_scenario(FIX_CORPUS / "two-block-race-2d.json")
    d = first_error(check(s))
    assert d is not None and d.code == "RACE_DETECTED"
    assert d.message.startswith("Write/write race on out[0:8, 64:128] (output) on device 0: ")
    assert "block b=0 writes it" in d.message and "block b=1 writes it" in d.message
    assert "Executors" not in d.message and "elements " not in d.message
    assert title(d.code, d.message).startswith("A write/write race")
    assert d.fix is not None and d.fix.edits[0].value == [[0, 8], {"block": "b", "size": 64}]
    assert first_error(check(apply_fix(s, d.fix))) is None
    ring = load_scenario(Path(__file__).parent / "scenarios/sync/ring_no_wait.json")
    race = next(x for x in check(ring) if x.code == "RACE_DETECTED")
    assert race.message.startswith("Read/write race on out[768:1024] (output) on device 0: ")
    assert "device 3 writes it" in race.message and "device 0 reads it" in race.message
    assert title(race.code, race.message).startswith("A read/write race")


def test_what_the_cpu_interpreter_cannot_run_is_said_once_as_info() -> None:
    """One info per scenario, "on this machine: simulate runs it", naming every limit;
    check still exits 0 on a valid kernel with such a limit."""
    from mpmd_lab.cli import main
    from mpmd_lab.diagnostics import INTERP_CANNOT

    diags = check(gallery.load("ring-all-gather"))
    notes = [d for d in diags if d.code in INTERP_CANNOT]
    assert [(d.severity, d.code) for d in notes] == [("info", "GPU_INTERP_UNSUPPORTED_TRANSFORM")]
    (note,) = notes
    assert note.message.startswith("on this machine: simulate runs it")
    assert "remote_ref views" in note.message and "semaphore scratch" in note.message
    assert not [d for d in diags if d.severity == "warning"]
    assert main(["check", "ring-all-gather"]) == 0


#: the examples whose first error a repair by code (``fixes_for.BY_CODE``) makes valid
REPAIRED = [
    "SWAP_DTYPE_MISMATCH",
    "SWAP_SHAPE_MISMATCH",
    "TMA_DTYPE_MISMATCH",
    "TMA_SHAPE_MISMATCH",
    "TMA_DST_NOT_GMEM",
    "TMA_SRC_NOT_SMEM",
    "TMA_LOAD_NO_BARRIER",
    "BARRIER_NOT_SMEM",
    "SEMAPHORE_NOT_SCALAR",
    "SEMAPHORE_WRONG_TYPE",
    "TILED_SLICE_ALIGN",
    "AT_NEGATIVE_SLICE",
    "MESH_DEVICE_ORDER",
    "SWIZZLE_TRAILING_DIM",
    "DOT_DTYPE_MISMATCH",
    "STORE_TO_ARRAY",
    "DEVICE_ID_RANK",
    "UNBOUND_AXIS",
    "SMEM_TRANSFORMS_ORDER",
    "SEMAPHORE_VIEW_TRANSFORM",
    "DOT_OPERAND_NOT_SMEM",
    "SEMAPHORE_FILL",
    "ARG_VIEW_PLGPU",
    "DEADLOCK_BARRIER",
    "BARRIER_NOT_A_BARRIER",
    "MULTIMEM_PEER_REF",
    "BARRIER_TRANSFORM",
    "TMA_TILING_NO_SWIZZLE",
    "REMOTE_SMEM",
    "TMA_GMEM_TRANSFORM",
    "TMEM_PLAIN_ACCESS",
    "TMEM_RESHAPE",
    "TRANSPOSE_TMEM",
    "SWIZZLED_RESHAPE",
    "TILED_RESHAPE",
    "TILED_INDEX_TYPE",
    "TRACED_BOOL",
    "GPU_GMEM_TRANSFER",
    "MULTICAST_TMA_LOAD",
    "TRANSPOSE_INVALID_PERM_GPU",
    "TMA_SMEM_NOT_CONTIGUOUS",
    "DOT_DTYPE",
    "DOT_INT_ACC",
    "DOT_N_TOO_LARGE",
    "DOT_SHAPE_MISMATCH",
    "DOT_RANK",
    "REF_NOT_A_REF",
    "GPU_8BIT_ARITH",
    "RESHAPE_SIZE",
    "RESHAPE_MINUS_ONE",
    "RESHAPE_NOT_DIVISIBLE",
    "SEMAPHORE_READ_SMEM",
    "ADD_SHAPE_MISMATCH",
    "GPU_LAYOUT_INFERENCE",
    "GPU_TRACED_CONSTANT",
    "MULTIMEM_LOAD_WIDTH",
    "GPU_WG_TRANSFORMS",
    "GPU_TRANSFORMS_UNSUPPORTED",
    "TMA_SRC_TRANSFORM",
    "VALUE_DTYPE",
    "BITCAST_VALUE_BOOL",
    "VALUE_FP8_PROMOTION",
    "GPU_WHERE_BROADCAST",
    "GPU_REDUCE_BOOL",
    "LOOP_PYTHON_NOT_INT",
    "GPU_FLOAT_REM",
    "VALUE_AXIS",
    "GPU_FLOAT8_CAST",
    "GPU_FLOAT8_BF16_CAST",
    "GPU_CAST_BITWIDTH",
]
EXAMPLES = Path(__file__).parents[1] / "toolkit/knowledge/examples"


def test_repairs_by_code_reach_a_valid_kernel_jax_accepts() -> None:
    """Each repair makes its example valid, says so (``after == []``), and real JAX
    builds, traces and lowers the repaired call."""
    fixed = []
    for code in REPAIRED:
        s = load_scenario(EXAMPLES / f"{code}.json")
        d = first_error(check(s))
        assert d is not None and d.code == code and d.fix is not None, code
        assert d.fix.after == [], (code, d.fix)
        after = apply_fix(s, d.fix)
        assert first_error(check(after)) is None, code
        fixed.append(after)
    for s, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_the_corpus_every_fix_leaves_what_it_says() -> None:
    """Over every invalid scenario shipped or tested (``bench.fix_reach``): each applied
    best fix leaves exactly the error codes its ``after`` says, and the share reaching a
    valid scenario within three fixes does not fall below what was measured (371/449,
    83 %; of the fix corpus (newcomer mistakes), 72/73)."""
    from bench.fix_reach import measure

    got = measure()
    assert [r.broken_promises for r in got if r.broken_promises] == []
    assert len(got) >= 449 and sum(r.valid for r in got) >= 371
    mine = [r for r in got if r.name.startswith("tests/fix_corpus/")]
    assert len(mine) == len(list(FIX_CORPUS.glob("*.json")))
    assert sum(r.valid for r in mine) >= 72


def test_a_ring_without_its_signal_gets_the_signal_of_a_ring_step() -> None:
    """DEADLOCK_SEMAPHORE on a wait no signal reaches after a write to the right
    neighbour: the repair signals that neighbour just before the wait, and the ring is
    valid (its output what the gallery's ring gives, by the simulator)."""
    from mpmd_lab.simulator import simulate

    s = load_scenario(FIX_CORPUS / "ring-all-gather-no-signal.json")
    d = first_error(check(s))
    assert d is not None and d.code == "DEADLOCK_SEMAPHORE" and d.fix is not None
    (edit,) = d.fix.edits
    assert edit.op == "add" and edit.path == d.path
    assert edit.value == {
        "op": "semaphore_signal",
        "sem": "arrived",
        "device": "(dev + 1) % axis_size(dev)",
    }
    fixed = apply_fix(s, d.fix)
    assert first_error(check(fixed)) is None
    got = simulate(fixed).outputs["out"]
    want = simulate(gallery.load("ring-all-gather")).outputs["out"]
    assert (got == want).all()


def test_one_fix_that_leaves_no_error_retitles_a_scenario_said_broken() -> None:
    """A name or description saying the scenario is broken is updated by the fix that
    repairs it (the Lab's "Apply fix" too), and undone with it; a fix that leaves
    errors, or a scenario whose words say nothing of it, keeps them."""
    from mpmd_lab.fixes import retitled
    from mpmd_lab.session import Session

    st = Session("dup-ref")
    st.apply_fix(st.diagnostics[0].fix)
    assert st.valid and st.scenario.name == "dup-ref-fixed"
    assert st.scenario.description.startswith("Repaired by mpmd-lab (")
    st.undo()
    assert st.scenario.name == "dup-ref"
    plain = gallery.load("ring-shift")
    fix = check(gallery.load("dup-ref"))[0].fix
    assert fix is not None and retitled(plain, [fix]) == plain


def test_a_cluster_race_meets_at_a_cluster_barrier_jax_accepts() -> None:
    """RACE between two blocks of a cluster (block 1 writes its SMEM, block 0 reads it
    through a cluster view): the repair adds a ``ClusterBarrier`` over the cluster axis
    and arrives and waits on it before the read; the kernel is valid, gives what the
    unordered one meant (x[128:] twice, by the simulator) and real JAX lowers it."""
    import numpy as np
    from mpmd_lab.simulator import simulate

    s = gallery.load("cluster-exchange")
    d = first_error(check(s))
    assert d is not None and d.code == "RACE" and d.fix is not None and d.fix.after == []
    assert [e.value for e in d.fix.edits] == [
        {"kind": "cluster_barrier", "collective_axes": ["c"]},
        {"op": "barrier_arrive", "barrier": "cbar"},
        {"op": "barrier_wait", "barrier": "cbar"},
    ]
    assert [e.path for e in d.fix.edits][1:] == [
        "call.programs[0].body[4]",
        "call.programs[0].body[5]",
    ]
    fixed = apply_fix(s, d.fix)
    assert first_error(check(fixed)) is None
    x = np.arange(256, dtype=np.float32)
    assert (simulate(fixed).outputs["out"] == np.concatenate([x[128:], x[128:]])).all()
    (r,) = probe_many([fixed], stages=JAX_STAGES)
    assert not r["stage"], r


def test_a_swizzle_wider_than_the_trailing_dim_tiles_the_scratch() -> None:
    """SWIZZLE_TRAILING_DIM on an (8, 64) f32 scratch swizzled 128 bytes: the repair tiles
    it (8, 32) before the swizzle (the swizzle stays); a swizzle of 16 bytes becomes 32,
    then is tiled (8, 8). Both are valid and real JAX lowers them."""
    fixed = []
    for code, tiles in (("SWIZZLE_TRAILING_DIM", [[8, 32]]), ("SWIZZLE_VALUE", [[8, 8]])):
        s = load_scenario(CODES / f"{code}.json")
        got = []
        while (d := first_error(check(s))) is not None:
            assert d.fix is not None and len(got) < 3, (code, d)
            s = apply_fix(s, d.fix)
            assert [x.code for x in check(s) if x.is_error] == d.fix.after
            got.append(d.code)
        steps = [t.model_dump(exclude_none=True) for t in s.call.scratch["t"].transforms]
        assert [t["tile"] for t in steps if t["op"] == "tiling"] == tiles, code
        assert steps[-1]["op"] == "swizzle"
        fixed.append(s)
    for s, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_a_ring_without_its_waits_waits_after_each_signal_to_the_peer() -> None:
    """RACE_DETECTED where every wait was left out (collective matmul, ring
    reduce-scatter): one fix adds ``semaphore_wait`` right after each signal to the peer
    (in the loop and the condition too); the kernel is valid, computes what the gallery's
    does (by the simulator) and real JAX lowers it."""
    from mpmd_lab.simulator import simulate

    fixed = []
    for name in ("collective-matmul", "ring-reduce-scatter"):
        s = load_scenario(FIX_CORPUS / f"{name}-no-wait.json")
        d = first_error(check(s))
        assert d is not None and d.code == "RACE_DETECTED" and d.fix is not None
        assert d.fix.after == [] and len(d.fix.edits) == 2, d.fix
        assert all(e.op == "add" and e.value["op"] == "semaphore_wait" for e in d.fix.edits)
        after = apply_fix(s, d.fix)
        assert first_error(check(after)) is None, name
        got, want = simulate(after).outputs, simulate(gallery.load(name)).outputs
        assert all((got[k] == want[k]).all() for k in want), name
        fixed.append(after)
    for s, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_a_flat_device_id_on_a_2d_mesh_becomes_its_coordinates() -> None:
    """DEVICE_ID_RANK: ``3 - (2 * x + y)`` on a (2, 2) mesh becomes ``{x: id // 2 % 2,
    y: id % 2}`` in the remote view and the signal alike; the kernel is valid, each
    device writes to the device its flat id named (by the simulator), and JAX lowers it."""
    import numpy as np
    from mpmd_lab.simulator import simulate

    s = load_scenario(Path(__file__).parent / "scenarios/corpus_errors/err_scalar_id_2d_mesh.json")
    d = first_error(check(s))
    assert d is not None and d.code == "DEVICE_ID_RANK" and d.fix is not None
    assert d.fix.after == [] and len(d.fix.edits) == 2
    want = {"x": "(3 - (2 * x + y)) // 2 % 2", "y": "(3 - (2 * x + y)) % 2"}
    assert all(e.value == want for e in d.fix.edits)
    fixed = apply_fix(s, d.fix)
    assert first_error(check(fixed)) is None
    out = simulate(fixed).outputs["out"]  # (device 3 - k's x lands in shard k)
    assert (out.reshape(4, -1)[::-1].ravel() == np.arange(1024, dtype=np.float32)).all()
    (r,) = probe_many([fixed], stages=JAX_STAGES)
    assert not r["stage"], r


def test_a_wait_that_may_see_the_wrong_signaller_waits_for_all() -> None:
    """RACE_DETECTED where device 2 waits for 1 of the 2 signals, reads, waits again:
    the first wait waits for both and the second goes (whichever half it reads first);
    a read of SMEM no wait orders after its async copy waits on that copy's barrier.
    Each is valid after its one fix, and real JAX lowers it."""
    sched = Path(__file__).parent / "scenarios/schedules"
    fixed = []
    for name in (
        "partial_wait_reads_first_signallers_half",
        "partial_wait_reads_second_signallers_half",
    ):
        s = load_scenario(sched / f"{name}.json")
        d = first_error(check(s))
        assert d is not None and d.code == "RACE_DETECTED" and d.fix is not None
        assert [(e.op, e.path, e.value) for e in d.fix.edits] == [
            ("remove", "call.programs[0].body[11].body[2]", None),
            ("replace", "call.programs[0].body[11].body[0].value", 2),
        ]
        fixed.append(apply_fix(s, d.fix))
    s = load_scenario(sched / "loads_complete_out_of_order.json")
    d = first_error(check(s))
    assert d is not None and d.code == "RACE_DETECTED" and d.fix is not None
    (edit,) = d.fix.edits
    assert (edit.op, edit.path, edit.value) == (
        "add",
        "call.programs[0].body[9]",
        {"op": "barrier_wait", "barrier": "b0"},
    )
    fixed.append(apply_fix(s, d.fix))
    assert [first_error(check(f)) for f in fixed] == [None] * 3
    for f, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (f.name, r)


def test_a_parameter_named_as_an_output_gets_the_buffers_ref_name() -> None:
    """XREF_DUPLICATE_NAME (argument x's parameter called ``out``, as the output is):
    the parameter becomes ``x_ref``, which the body reads; valid, and JAX lowers it."""
    s = load_scenario(CODES / "XREF_DUPLICATE_NAME.json")
    d = first_error(check(s))
    assert d is not None and d.code == "XREF_DUPLICATE_NAME" and d.fix is not None
    (edit,) = d.fix.edits
    assert (edit.path, edit.value, d.fix.after) == ("call.args[0].param", "x_ref", [])
    fixed = apply_fix(s, d.fix)
    assert first_error(check(fixed)) is None
    (r,) = probe_many([fixed], stages=JAX_STAGES)
    assert not r["stage"], r


def test_an_output_written_through_a_peer_view_grows_to_fit() -> None:
    """OOB_WRITE through ``recv``'s peer view (``remote_ref`` keeps the shape) in rings
    whose outputs were halved: the outputs grow back, in two fixes, to what the kernel
    indexes; the kernels then compute what the gallery's do (by the simulator) and real
    JAX lowers them."""
    from mpmd_lab.simulator import simulate

    fixed = []
    for name in ("collective-matmul", "ring-reduce-scatter"):
        s = load_scenario(FIX_CORPUS / f"{name}-out-half.json")
        for _ in range(2):
            d = first_error(check(s))
            assert d is not None and d.fix is not None, name
            s = apply_fix(s, d.fix)
            assert [x.code for x in check(s) if x.is_error] == d.fix.after
        assert first_error(check(s)) is None, name
        got, want = simulate(s).outputs, simulate(gallery.load(name)).outputs
        assert all((got[k] == want[k]).all() for k in want), name
        fixed.append(s)
    for s, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_a_handshake_without_its_signals_gets_them_back() -> None:
    """DEADLOCK_SEMAPHORE in exchange-shards with both signals left out: a wait before
    reading the right neighbour's x is signalled by that neighbour (the ring step back),
    a wait after reading it signals the neighbour read from; two fixes give back the
    gallery's kernel, statement for statement, and real JAX lowers it."""
    s = load_scenario(FIX_CORPUS / "exchange-shards-no-signal.json")
    devices = []
    while (d := first_error(check(s))) is not None:
        assert d.code == "DEADLOCK_SEMAPHORE" and d.fix is not None and len(devices) < 2
        devices.append(d.fix.edits[0].value["device"])
        s = apply_fix(s, d.fix)
    assert devices == ["(dev + axis_size(dev) - 1) % axis_size(dev)", "(dev + 1) % axis_size(dev)"]
    assert s.call.programs[0].body == gallery.load("exchange-shards").call.programs[0].body
    (r,) = probe_many([s], stages=JAX_STAGES)
    assert not r["stage"], r


#: examples whose best fixes reach a valid kernel in a chain: the codes fixed, in order
CHAINS = {
    "SWIZZLED_SLICE": ["SWIZZLED_SLICE", "TMA_SMEM_NOT_CONTIGUOUS"],
    "GPU_CLUSTER_GMEM": ["GPU_CLUSTER_GMEM", "RACE"],
    "MULTIMEM_DST_NOT_GMEM": ["MULTIMEM_DST_NOT_GMEM", "RACE"],
    "MPMD_SCRATCH_CORE_TYPE": ["MPMD_SCRATCH_CORE_TYPE", "RACE"],
    "MULTICAST_NO_DEVICE_MESH": ["MULTICAST_NO_DEVICE_MESH", "RACE"],
    "CLUSTER_REF_MULTI_AXIS": ["CLUSTER_REF_MULTI_AXIS", "RACE"],
    "MULTIMEM_STORE_WIDTH": ["MULTIMEM_STORE_WIDTH", "RACE"],
}
#: the same, on tests/scenarios/codes (where the example's chain differs)
CODE_CHAINS = {"MULTICAST_PLAIN_STORE": ["MULTICAST_PLAIN_STORE", "RACE"]}


def test_chained_repairs_reach_a_valid_kernel_jax_accepts() -> None:
    """A repair that uncovers the next error says so (``after``), that error has its own
    repair, and the chain ends valid: real JAX builds, traces and lowers the result."""
    fixed = []
    chains = [(EXAMPLES / f"{c}.json", c, ch) for c, ch in CHAINS.items()]
    chains += [(CODES / f"{c}.json", c, ch) for c, ch in CODE_CHAINS.items()]
    for path, code, chain in chains:
        s = load_scenario(path)
        steps = []
        while (d := first_error(check(s))) is not None:
            assert d.fix is not None and len(steps) < len(chain), (code, steps, d)
            s = apply_fix(s, d.fix)
            assert [x.code for x in check(s) if x.is_error] == d.fix.after, (code, d.fix)
            steps.append(d.code)
        assert steps == chain, code
        fixed.append(s)
    for s, r in zip(fixed, probe_many(fixed, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_a_barrier_that_completes_before_its_writer_arrives_waits_for_all() -> None:
    """RACE_DETECTED where a barrier of one arrival is arrived on by two threads (the
    reader may pass on the other's arrival): the repair makes it wait for both."""
    s = load_scenario(
        Path(__file__).parent / "scenarios/schedules/barrier_arrivals_in_either_phase.json"
    )
    d = first_error(check(s))
    assert d is not None and d.code == "RACE_DETECTED" and d.fix is not None
    assert d.fix.after == []
    after = apply_fix(s, d.fix)
    assert after.call.scratch["bar"].num_arrivals == 2
    assert first_error(check(after)) is None


def test_rounds_that_share_a_semaphore_get_one_each() -> None:
    """RACE_DETECTED where the second round's signal can end the first round's wait (one
    semaphore for both): the second round signals and waits on a semaphore of its own."""
    path = Path(__file__).parent / "scenarios/schedules/semaphore_reused_across_rounds.json"
    s = load_scenario(path)
    d = first_error(check(s))
    assert d is not None and d.code == "RACE_DETECTED" and d.fix is not None
    after = apply_fix(s, d.fix)
    sems = [st.sem for st in after.call.programs[0].body if hasattr(st, "sem")]
    assert sems == ["s", "s", "s_1", "s_1"]
    assert after.call.scratch["s_1"] == after.call.scratch["s"]
    assert d.fix.after == [] and first_error(check(after)) is None


#: hand-written newcomer mistakes, one per repair kind (tests/fix_corpus)
NEWCOMER = [
    "allreduce-half",
    "loader-and-writer-programs",
    "reshape-into-top-rows",
    "int8-scale-in-registers",
    "negative-part-by-mask",
    "float-bits-of-top-rows",
    "add-bias-too-short",
    "broadcast-without-mesh",
    "cluster-ref-of-output",
    "cluster-ref-two-axes",
    "count-read-from-smem",
    "handoff-one-arrival",
    "int8-sum",
    "matmul-batched-lhs",
    "matmul-float32-operands",
    "matmul-int8-operands",
    "matmul-k-mismatch",
    "matmul-wide-n",
    "multicast-load",
    "multimem-store-into-smem",
    "producer-consumer-programs",
    "remote-view-of-captured",
    "reshape-to-fewer-rows",
    "reshape-two-unknowns",
    "signal-by-rank",
    "small-tile-copy",
    "swizzled-half-columns",
    "tiled-row-fill",
    "tma-store-column-block",
    "tmem-flattened",
    "tmem-zeroed-like-smem",
    "two-rounds-one-semaphore",
]


def test_newcomer_mistakes_jax_refuses_reach_a_kernel_jax_accepts() -> None:
    """Each mistake is what JAX refuses (the static check's first code is JAX's; a race
    only a run shows is the simulator's to say), its best fixes reach a valid scenario
    within three steps, each leaving what it said, and JAX builds, traces and lowers it."""
    before, after = [], []
    for name in NEWCOMER:
        s = load_scenario(FIX_CORPUS / f"{name}.json")
        first = first_error(check(s))
        assert first is not None, name
        before.append((s, first.code))
        for _ in range(3):
            d = first_error(check(s))
            if d is None:
                break
            assert d.fix is not None, (name, d.code)
            s = apply_fix(s, d.fix)
            assert [x.code for x in check(s) if x.is_error] == d.fix.after, (name, d.fix)
        assert first_error(check(s)) is None, name
        after.append(s)
    got = probe_many([s for s, _ in before], stages=JAX_STAGES)
    for (s, code), r in zip(before, got, strict=True):
        assert (r.get("code") if r["stage"] else "RACE_DETECTED") == code, (s.name, r)
    for s, r in zip(after, probe_many(after, stages=JAX_STAGES), strict=True):
        assert not r["stage"], (s.name, r)


def test_a_copy_of_views_no_register_layout_takes_goes_by_tma_through_smem() -> None:
    """GPU_LAYOUT_INFERENCE on plain copies of 16-element rows of views (a cluster
    exchange through GMEM): each copy becomes a TMA load into SMEM of the view's shape
    and a TMA store, and real JAX lowers the result."""
    s = load_scenario(Path(__file__).parent / "scenarios/honesty/cluster_peer_gmem.json")
    steps = []
    while (d := first_error(check(s))) is not None:
        assert d.code == "GPU_LAYOUT_INFERENCE" and d.fix is not None and len(steps) < 2, d
        s = apply_fix(s, d.fix)
        assert [x.code for x in check(s) if x.is_error] == d.fix.after
        steps.append(d.code)
    assert s.call.entry == "plgpu.kernel" and len(steps) == 2
    assert [list(s.call.scratch[k].shape) for k in ("mine_smem", "o_smem")] == [[16], [16]]
    (r,) = probe_many([s], stages=JAX_STAGES)
    assert not r["stage"], r


def test_applying_a_checked_fix_reuses_its_check() -> None:
    """The Lab applying an offered fix (``Session.apply_fix``, which also retitles a
    scenario whose name says it is broken) holds the very analysis the candidate's check
    made: no candidate is checked again, the answer is a fresh check's, and it costs a
    small part of a check."""
    from mpmd_lab import fixes, recheck, validate
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.session import Session

    from bench.icount import Counter

    for name in ("ring-all-gather-deadlock", "multicast-2d"):
        fixes.clear_cache()
        lab = Session(gallery.load(name))
        fix = next(d.fix for d in lab.diagnostics if d.fix is not None)
        checks = recheck.CHECKS
        with Counter() as applying:
            assert lab.apply_fix(fix).ok
        assert recheck.CHECKS == checks
        kept = recheck.known(lab.scenario)
        assert kept is not None and lab.analysis.plan is kept.plan
        fresh = validate.analyze(load_scenario(lab.scenario.to_json()))
        assert lab.analysis.diagnostics == fresh.diagnostics
        with Counter() as checking:
            validate.analyze(load_scenario(lab.scenario.to_json()))
        assert applying.n * 3 < checking.n, (name, applying.n, checking.n)


def test_no_rule_reads_a_scenario_name_or_description() -> None:
    """What lets a retitled fix keep its candidate's check (``recheck.renamed``): every
    scenario of the gallery and tests/scenarios checks the same under another name and
    description."""
    from mpmd_lab.scenario import Scenario, load_scenario

    paths = [gallery.path_of(n) for n in gallery.names()]
    paths += sorted((Path(__file__).parent / "scenarios").rglob("*.json"))
    seen = 0
    for p in paths:
        try:
            s = load_scenario(p.read_text())
        except Exception:  # (a file that tests the loader's refusals)
            continue
        data = s.to_dict()
        data.update(name="renamed-fixed", description="Repaired by mpmd-lab (a fix).")
        other = Scenario.model_validate(data)
        assert check(other) == check(s), p.name
        seen += 1
    assert seen > 100


def test_the_candidate_cache_keeps_one_scenario_per_content_and_forgets_the_oldest() -> None:
    """``recheck`` keeps each content once (a scenario kept again under the same content
    replaces the one before, which is no longer ``known``) and at most ``CACHE_SIZE``."""
    from mpmd_lab import recheck
    from mpmd_lab.scenario import Scenario

    recheck.clear_cache()
    data = gallery.load("dup-ref-fixed").to_dict()
    first = recheck.candidate(data)
    assert first is not None and recheck.known(first.scenario) is first
    assert recheck.candidate(data) is first  # (by content: not checked again)
    renamed = dict(data, name="dup-ref-fixed-again")
    other = recheck.candidate(renamed)
    assert other is not None
    recheck.renamed(other.scenario, Scenario.model_validate(data))  # same content as first
    assert recheck.known(first.scenario) is None
    assert len(recheck._BY_ID) == len([a for a in recheck._CHECKED.values() if a]) == 2
    for k in range(recheck.CACHE_SIZE + 1):
        recheck._keep(f"key {k}", None)
    assert len(recheck._CHECKED) == recheck.CACHE_SIZE and not recheck._BY_ID
    recheck.clear_cache()


def test_a_retitled_fix_shares_its_candidates_plan_and_checks_as_validated_anew() -> None:
    """Applying a fix that retitles (``retitled``: a copy sharing the call and buffers)
    keeps the candidate's check over the candidate's plan (``Plan.of_copy``, not
    compiled again): the scenario equals its JSON validated anew, and its kept check
    equals a fresh check of that, for every gallery scenario with a fix."""
    from mpmd_lab import plan as P
    from mpmd_lab import recheck
    from mpmd_lab.scenario import Scenario
    from mpmd_lab.session import Session
    from mpmd_lab.validate.analysis import analyze_rules

    seen = 0
    for name in gallery.names():
        fix = next((d.fix for d in check(gallery.load(name)) if d.fix is not None), None)
        if fix is None:
            continue
        lab = Session(name)
        before = P.COMPILED
        assert lab.apply_fix(fix).ok, name
        new = lab.scenario
        anew = Scenario.model_validate(new.to_dict())
        assert anew == new, name
        kept = recheck.known(new)
        assert kept is not None and kept.plan.scenario is new, name
        if new.name != gallery.load(name).name:  # (retitled: its plan was shared)
            assert P.COMPILED == before, name
            seen += 1
        assert kept.diagnostics == analyze_rules(anew).diagnostics, name
        with pytest.raises(ValueError):
            kept.plan.of_copy(anew)  # (validated anew: its own call, not this plan's)
    assert seen >= 5


def test_a_fix_whose_path_is_gone_is_refused_with_a_scenario_error() -> None:
    """A remove applied again (its element already gone) or an edit into a missing field
    raises ScenarioError naming the edit's path, not the IndexError/KeyError of the
    JSON form; the Session refuses it as one failed step."""
    from mpmd_lab.diagnostics import Fix
    from mpmd_lab.scenario import ScenarioError
    from mpmd_lab.session import Session

    s = gallery.load("transpose-view")
    n = len(s.call.programs[0].body)
    gone = Fix(description="x", edits=[Edit(op="remove", path=f"call.programs[0].body[{n + 3}]")])
    with pytest.raises(ScenarioError, match=rf"body\[{n + 3}\]"):
        apply_fix(s, gone)
    nowhere = Fix(description="y", edits=[Edit(op="replace", path="call.nowhere.at_all", value=1)])
    with pytest.raises(ScenarioError, match="call.nowhere.at_all"):
        apply_fix(s, nowhere)
    session = Session(s)
    result = session.apply_fix(gone)
    assert not result.ok and session.scenario is s
