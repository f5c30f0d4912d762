"""Hostile inputs, second round (issue 32), each made in the test and held to a bound:
a loop whose body is empty (or trivial) counts its trips toward the step and time
bounds in every walk; ``import`` and Save keep to the safe-write rules; index and
semaphore arithmetic is JAX's (int32, wraparound, bounds)."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import analyze

ROOT = Path(__file__).resolve().parents[1]
RS = gallery.load("ring-shift").to_dict()
INT32_MAX = 2**31 - 1


def _cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mpmd-lab")
    return subprocess.run(
        [str(exe), *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _body(data: dict, body: list) -> dict:
    data = copy.deepcopy(data)
    data["call"]["programs"][0]["body"] = body
    return data


FILL = {"op": "fill", "dst": "out", "value": 0.0}


def _empty_loop(stop: object = INT32_MAX) -> dict:
    return _body(RS, [FILL, {"op": "loop", "var": "i", "stop": stop, "body": []}])


def _nested_empty(n: int, depth: int) -> dict:
    body: list = []
    for k in range(depth):
        body = [{"op": "loop", "var": f"i{k}", "stop": n, "body": body}]
    return _body(RS, [FILL, *body])


# ------------------------------------------------------------ 1. empty loops


@pytest.mark.parametrize("cmd", ["check", "graph", "export", "run"])
def test_an_empty_loop_of_2_31_trips_answers_every_command(cmd, tmp_path):
    """The engine counted a step only when a statement yielded: an empty body yields
    nothing, so neither bound fired and every command hung (~11 minutes a block)."""
    f = tmp_path / "empty.json"
    f.write_text(json.dumps(_empty_loop()))
    argv = {
        "check": ["check", str(f)],
        "graph": ["graph", str(f), "--text"],
        "export": ["export", str(f), "-o", str(tmp_path / "x.py")],
        "run": ["run", str(f), "--backend", "simulate", "--timeout", "20"],
    }[cmd]
    p = _cli(*argv, timeout=90)
    assert "Traceback" not in p.stderr, p.stderr
    if cmd == "check":
        assert "SYNC_NOT_CHECKED" in p.stdout, p.stdout  # said, not silently valid
    if cmd == "run":
        assert "SIM_TOO_LARGE" in p.stdout + p.stderr, (p.stdout, p.stderr)


def test_the_estimate_counts_an_empty_bodys_trips():
    """The up-front estimate counted a loop as trips x statements of its body: 0 for an
    empty one, so simulate ran it instead of refusing it."""
    from mpmd_lab.simulator import step_estimate

    # 4 devices x (fill + loop + its 2**31 - 1 trips)
    assert step_estimate(load_scenario(_empty_loop())) == 4 * (2 + INT32_MAX)
    assert step_estimate(load_scenario(_nested_empty(1000, 2))) == 4 * (2 + 1000 * (1 + 1000))


def test_an_empty_loop_with_a_dynamic_bound_is_stopped_at_the_step_bound():
    """A bound only the devices know is counted once up front; the engine counts its
    trips as it meets them (all at once: nothing runs in them)."""
    from mpmd_lab import simulate

    s = load_scenario(_empty_loop(f"{INT32_MAX} - dev"))
    t0 = time.perf_counter()
    res = simulate(s)
    assert time.perf_counter() - t0 < 30
    assert res.error is not None and res.error.code == "SIM_TOO_LARGE", res
    a = analyze(s)
    assert "stopped after" in " ".join(
        d.message for d in a.diagnostics if d.code == "SYNC_NOT_CHECKED"
    )


def test_empty_loops_nested_in_others_check_and_edit_at_once():
    """An empty innermost loop inside others took every check (and so every Lab edit)
    to the 10 s time bound; deeper, forever. Now the trips count toward the step bound."""
    from mpmd_lab.session import Session

    s = load_scenario(_nested_empty(INT32_MAX, 3))
    t0 = time.perf_counter()
    a = analyze(s)
    assert "SYNC_NOT_CHECKED" in {d.code for d in a.diagnostics}
    sess = Session("ring-shift")
    sess.replace(s, "nested empty loops")
    assert sess.edit(("replace", "call.programs[0].body[1].stop", 1000)).ok
    assert "SYNC_NOT_CHECKED" in {d.code for d in sess.diagnostics}
    assert time.perf_counter() - t0 < 30


# ------------------------------------------------------------ 2, 3. the import child

KERNELS = ROOT / "tests" / "kernels"
EXCHANGE = KERNELS / "exchange_2dev.py"  # DEVICES = 2


def _module(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(
        f"import sys\nsys.path.insert(0, {str(KERNELS)!r})\n" + textwrap.dedent(text),
        encoding="utf-8",
    )
    return p


def _import_children(root: psutil.Process) -> list[psutil.Process]:
    out = []
    for k in root.children(recursive=True):
        try:
            if any("mpmd_lab.importer.child" in part for part in k.cmdline()):
                out.append(k)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def _gone(procs: list[psutil.Process], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for p in procs:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_import_o_refuses_a_link_onto_its_own_module(tmp_path):
    """Every other ``-o`` refused its input; ``import -o link.json`` (a symlink onto the
    module) replaced the user's source by JSON, exit 0. Refused before any import."""
    mod = tmp_path / "k.py"
    mod.write_bytes(EXCHANGE.read_bytes())
    (tmp_path / "link.json").symlink_to(mod)
    t0 = time.monotonic()
    p = _cli("import", f"{mod}:make", "-o", str(tmp_path / "link.json"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "is the input file" in p.stderr
    assert mod.read_bytes() == EXCHANGE.read_bytes()
    assert time.monotonic() - t0 < 30  # (refused before JAX started)


@pytest.mark.parametrize("n", ["100000", "-5", "0"])
def test_import_devices_out_of_range_is_refused_clearly(n):
    """``--devices 100000`` was accepted (6.2 GB, 90 s); ``-5`` gave JAX's
    "vector::reserve"."""
    p = _cli("import", f"{EXCHANGE}:make", f"--devices={n}", timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"--devices {n}: give between 1 and 4096 devices" in p.stderr
    from mpmd_lab.importer import child

    with pytest.raises(child.SpecError, match="between 1 and 4096"):
        child.run(f"{EXCHANGE}:make", devices=int(n))


@pytest.mark.serial  # a timing bound: run with the machine to itself
def test_the_parent_reads_only_a_bounded_head_of_the_module(tmp_path):
    """The parent parsed the whole module for its ``DEVICES = n`` before any bound: a
    5 MB module took 2.4 GB and 10.7 s in-process."""
    import tracemalloc

    from mpmd_lab.importer.child import module_devices

    big = tmp_path / "big.py"
    rows = "\n".join(f"x{i} = [{', '.join(['1'] * 200)}]" for i in range(8000))
    big.write_text(f"DEVICES = 2\n{rows}\nDEVICES = 4  # the last one wins\n")
    assert big.stat().st_size > 4_000_000
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        found = module_devices(big)
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == 2  # (past the head: the child's business)
    assert peak < 8 * 2**20 and took < 5, (peak, took)
    small = tmp_path / "small.py"
    small.write_text("import x\nDEVICES = 2\ndef f():\n    DEVICES = 9\nDEVICES = 4  # last\n")
    assert module_devices(small) == 4


@pytest.mark.slow
def test_import_time_bound_starts_with_the_users_code(tmp_path):
    """A ``make()`` spinning (or blocked in C) held ``--timeout 3`` to 63 s: the parent
    waited timeout + 60 s. The child's start has its own bound; the user's code has
    the timeout from when it begins."""
    from mpmd_lab.importer import child

    mod = _module(tmp_path, "spin", "def make():\n    while True:\n        pass\n")
    t0 = time.monotonic()
    imp = child.run(f"{mod}:make", devices=1, timeout=3)
    took = time.monotonic() - t0
    assert [d.code for d in imp.diagnostics] == ["IMPORT_TIMEOUT"]
    assert took < 3 + 45, took  # JAX's start (~5-10 s here) + 3 s + 2 s of grace


def test_a_background_process_of_the_users_code_holds_no_import(tmp_path):
    """A process the user's function starts inherited the child's stdout: a finished
    import waited for it to the timeout and was thrown away as IMPORT_TIMEOUT. Now it
    answers at once, and the process is killed with the child's group."""
    from mpmd_lab.importer import child

    pidfile = tmp_path / "bg.pid"
    mod = _module(
        tmp_path,
        "bg",
        f"""
        import subprocess
        from exchange_2dev import make as _make

        def make():
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            open({str(pidfile)!r}, "w").write(str(p.pid))
            return _make()
        """,
    )
    t0 = time.monotonic()
    imp = child.run(f"{mod}:make", devices=2, timeout=100)
    took = time.monotonic() - t0
    assert imp.scenario is not None, imp.summary()
    assert took < 60, took
    assert _gone([psutil.Process(int(pidfile.read_text()))]), "the background process lived on"


@pytest.mark.slow
def test_the_import_child_has_a_memory_bound(tmp_path):
    """The child grew to 6.4 GB (at 50 GB an outside limit stopped it, the message
    blaming numpy's line). Its address space is bounded past JAX's start."""
    from mpmd_lab.importer import child

    mod = _module(
        tmp_path,
        "hog",
        """
        import numpy as np

        def make():
            xs = []
            while True:
                xs.append(np.ones(1 << 24))
        """,
    )
    with pytest.raises(child.SpecError, match=r"ran past its memory limit \(0.5 GiB"):
        child.run(f"{mod}:make", devices=1, timeout=60, memory=2**29)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_import_leaves_no_child_and_no_temp_file(tmp_path, sig):
    """The import child was the one worker without a parent-death watch: killing the
    CLI left it running (parent 1, ~97 % CPU) and its temp file behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mod = _module(tmp_path, "spin", "def make():\n    while True:\n        pass\n")
    exe = Path(sys.executable).with_name("mpmd-lab")
    proc = subprocess.Popen(
        [str(exe), "import", f"{mod}:make", "--devices", "1", "--timeout", "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        kids: list[psutil.Process] = []
        while not kids and time.monotonic() < deadline:
            kids = _import_children(psutil.Process(proc.pid))
            time.sleep(0.2)
        assert kids, "the import child never started"
        time.sleep(1.0)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _gone(kids), "the import child outlived the CLI"
        assert sorted(os.listdir(tmp)) == [], "temp files left behind"
    finally:
        proc.kill()


# ------------------------------------------------------------ 4. Save


def _saved_session(tmp_path: Path):
    from mpmd_lab.session import Session

    f = tmp_path / "mine.json"
    f.write_text(gallery.load("ring-shift").to_json())
    sess = Session(str(f))
    assert sess.edit(("replace", "description", "my edit")).ok
    return f, sess


def test_save_refuses_a_file_changed_since_it_was_loaded(tmp_path):
    """Save overwrote what another process wrote since loading (nothing of what was
    loaded was kept). Now it refuses, asks, and replaces only with overwrite=True."""
    f, sess = _saved_session(tmp_path)
    theirs = json.loads(f.read_text())
    theirs["description"] = "their edit"
    f.write_text(json.dumps(theirs))
    r = sess.save()
    assert not r.ok and "changed by another program" in r.message(), r.message()
    assert "confirm to replace" in r.message()
    assert json.loads(f.read_text())["description"] == "their edit"
    assert sess.save(overwrite=True).ok
    assert json.loads(f.read_text())["description"] == "my edit"
    # once saved, what is on disk is ours: the next save goes through
    assert sess.edit(("replace", "description", "again")).ok and sess.save().ok
    os.utime(f)  # touched, same bytes: not a change
    assert sess.edit(("replace", "description", "more")).ok and sess.save().ok


def test_save_resolves_its_target_again(tmp_path):
    """A symlink or a folder swapped in at the session's path after loading was
    written through."""
    f, sess = _saved_session(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("precious")
    f.unlink()
    f.symlink_to(elsewhere)
    r = sess.save(overwrite=True)
    assert not r.ok and "now leads to" in r.message(), r.message()
    assert elsewhere.read_text() == "precious"
    f.unlink()
    f.mkdir()
    r = sess.save(overwrite=True)
    assert not r.ok and "is a directory" in r.message(), r.message()
    assert f.is_dir()


def test_the_lab_asks_before_replacing_a_changed_file(tmp_path):
    """The Lab's Save shows "Replace it" for the session's own file changed elsewhere."""
    from mpmd_lab.widgets.lab import Lab

    f = tmp_path / "mine.json"
    f.write_text(gallery.load("ring-shift").to_json())
    lab = Lab(str(f))
    assert lab.state.edit(("replace", "description", "my edit")).ok
    f.write_text(f.read_text().replace("Each device", "Their device"))
    lab.save()
    assert "Their device" in f.read_text()
    assert lab.replace_button.layout.display is None  # shown: the user is asked
    lab.confirm_replace()
    assert json.loads(f.read_text())["description"] == "my edit"


# ------------------------------------------------------------ 5. int32 index arithmetic


def _two_block_dst(start: str) -> dict:
    data = gallery.load("two-block-copy").to_dict()
    data["name"] = "int32-" + "".join(ch for ch in start if ch.isalnum())[:40]
    data["call"]["programs"][0]["body"][1]["transforms"][0]["index"] = [{"ds": [start, 128]}]
    return data


INT32_CASES = {
    # in bounds in Python (b = 1: 128), out of bounds in int32 (-128)
    "wraps": "(b * 65536 * 32768) // 16777216",
    # in bounds in both: the model is not simply "too big is wrong"
    "in-range": "(b * 65536) // 512",
    # a traced value divided by zero: jax.numpy's int32 value (-1 at 0), not an error
    "dynamic-zero-division": "(b // 0 + 1) * 128",
}


@pytest.fixture(scope="module")
def int32_interpreted() -> dict[str, dict]:
    sys.path.insert(0, str(Path(__file__).parent))
    from jaxprobe import probe_many

    cases = [_two_block_dst(e) for e in INT32_CASES.values()]
    res = probe_many(cases, stages=("build", "trace", "gpu-lower", "interpret"))
    return dict(zip(INT32_CASES, res, strict=True))


@pytest.mark.parametrize("name", list(INT32_CASES))
def test_index_arithmetic_is_jaxs_int32(name, int32_interpreted):
    """Index arithmetic was Python's: ``(b * 65536 * 32768) // 16777216`` was 128 (in
    bounds: check valid, simulate ok) where JAX's int32 wraps to -128 and its
    interpreter raises OOB_WRITE; a traced ``b // 0`` surfaced as XREF_UNKNOWN_NAME.
    The check and the simulator now agree with JAX's interpreter."""
    from mpmd_lab import simulate

    s = load_scenario(_two_block_dst(INT32_CASES[name]))
    jax_says = int32_interpreted[name]
    errors = [d for d in analyze(s).diagnostics if d.is_error]
    ours = errors[0].code if errors else None
    assert ours == jax_says.get("code"), (ours, jax_says)
    sim = simulate(s)
    assert "XREF_UNKNOWN_NAME" not in str(sim.error and sim.error.code)
    assert (sim.error is None) == (jax_says["stage"] is None), (sim.error, jax_says)


def test_int32_wraparound_in_the_expression_model():
    from mpmd_lab import expr as E

    env = E.Env({"b": 1}, {"dev": 4})
    assert E.parse("b * 65536 * 32768").eval(env) == -(2**31)
    assert E.parse("(b * 65536 * 32768) // 16777216").eval(env) == -128
    assert E.parse("-(b * 65536 * 32768)").eval(env) == -(2**31)
    # Python ints (no traced value) stay Python's: JAX never sees them as int32
    assert E.parse("65536 * 32768 // 16777216").eval(env) == 128
    assert E.parse("b // 0").eval(E.Env({"b": 0}, {})) == -1
    assert E.parse("b // 0").eval(env) == -2 and E.parse("b % 0").eval(env) == 0
    with pytest.raises(E.ExprZeroDivision, match="integer modulo by zero"):
        E.parse("b * (axis_size(dev) % 0)").eval(env)


# ------------------------------------------------------------ 6. semaphore indices


def _sems_past(kind: str) -> dict:
    data = gallery.load("ring-all-gather").to_dict()  # sems: a [3] semaphore array
    loop = data["call"]["programs"][0]["body"][3]
    if kind == "static":  # sems.at[5]
        for k in (3, 5):
            loop["body"][k]["transforms"][0]["index"] = [5]
    else:  # the loop's i runs to 3
        loop["stop"] = "axis_size(dev)"
    data["name"] = f"sems-past-{kind}"
    return data


@pytest.mark.parametrize("kind", ["static", "loop"])
def test_a_semaphore_index_outside_its_array_is_reported(kind):
    """``sems.at[5]`` on a [3] semaphore array (or a loop running past it) checked valid,
    and the simulator invented the missing semaphores. JAX checks it neither at trace
    nor in the lowering (held below), and its interpreter cannot run semaphores: the
    check says OOB_INDEX at gpu-run, the simulator refuses it."""
    from mpmd_lab import simulate

    s = load_scenario(_sems_past(kind))
    found = [d for d in analyze(s).diagnostics if d.code == "OOB_INDEX"]
    assert found and found[0].stage == "gpu-run", found
    assert "semaphore index" in found[0].message and "out of bounds for size 3" in found[0].message
    sim = simulate(s)
    assert sim.error is not None and sim.error.code == "OOB_INDEX", sim.error


def test_jax_checks_no_semaphore_index_at_trace_or_lowering():
    sys.path.insert(0, str(Path(__file__).parent))
    from jaxprobe import probe_many

    for r in probe_many([_sems_past("static"), _sems_past("loop")]):
        assert r["stage"] is None, r  # build, trace and the Mosaic GPU lowering pass


@pytest.mark.parametrize(
    "start,message",
    [
        ("b * (128 // (2 - 2))", "integer division or modulo by zero"),
        ("b * (axis_size(b) % 0)", "integer modulo by zero"),
    ],
)
def test_a_constant_division_by_zero_is_pythons_error_at_trace(start, message):
    """A ``1 // 0`` of Python ints checked valid while JAX's trace raises Python's
    ZeroDivisionError (the card's example holds it against JAX)."""
    s = load_scenario(_two_block_dst(start))
    (d,) = [d for d in analyze(s).diagnostics if d.is_error]
    assert (d.code, d.stage, d.jax.type, d.jax.message) == (
        "EXPR_ZERO_DIVISION",
        "trace",
        "ZeroDivisionError",
        message,
    )
    assert d.path == "call.programs[0].body[1].transforms[0].index[0]"


# ------------------------------------------------------------ 7. the low ones


def test_a_negative_ds_size_is_not_a_scenario(tmp_path):
    """``{"ds": [start, -1]}`` loaded and checked valid; SCENARIO.md says exit 2."""
    data = _two_block_dst("b * 128")
    data["call"]["programs"][0]["body"][1]["transforms"][0]["index"] = [{"ds": ["b * 128", -1]}]
    f = tmp_path / "neg.json"
    f.write_text(json.dumps(data))
    p = _cli("check", str(f))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "the size of pl.ds must not be negative (got -1)" in p.stderr


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 0.0, -1.0])
def test_infinite_or_nan_timeouts_are_refused_clearly(bad):
    """``timeout=inf`` had no bound; ``nan`` left a stray exception that surfaced later
    in unrelated code."""
    from mpmd_lab import runtime, simulate
    from mpmd_lab.importer import child

    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        runtime.run(gallery.load("ring-shift"), "simulate", timeout=bad)
    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        simulate("ring-shift", max_seconds=bad)
    with pytest.raises(child.SpecError, match="positive, finite number of seconds"):
        child.run(f"{EXCHANGE}:make", timeout=bad)


def test_an_exclusive_write_never_replaces_a_file_made_meanwhile(tmp_path):
    """Concurrent ``gallery -o`` without --force overwrote each other: the check for an
    existing file came before a write that renamed over whatever was there by then."""
    from mpmd_lab import files

    target = tmp_path / "g.json"

    def racing(f):  # another process makes the file while this one writes
        target.write_text("theirs")
        f.write(b"ours")

    with pytest.raises(FileExistsError):
        files.write_with(target, racing, exclusive=True)
    assert target.read_text() == "theirs"
    assert sorted(os.listdir(tmp_path)) == ["g.json"]  # no temp file left
    procs = [
        subprocess.Popen(
            [str(Path(sys.executable).with_name("mpmd-lab")), "gallery", name, "-o", str(target)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ["ring-shift", "two-block-copy"] * 3
    ]
    target.unlink()
    outs = [p.communicate(timeout=120) for p in procs]
    assert sum("exists: pass --force" in err for _, err in outs) >= 5
    assert json.loads(target.read_text())["name"] in ("ring-shift", "two-block-copy")


def _ring_inc(inc: int, twice: bool = False) -> dict:
    data = gallery.load("ring-all-gather").to_dict()
    body = data["call"]["programs"][0]["body"][3]["body"]
    body[4]["inc"] = inc
    if twice:
        body.insert(5, dict(body[4]))
    return data


@pytest.mark.parametrize(
    "data,what",
    [
        (_ring_inc(-1), "a negative semaphore increment (-1)"),
        (_ring_inc(2**31 - 1, twice=True), "a semaphore value past int32"),
    ],
    ids=["negative-increment", "past-int32"],
)
def test_what_the_simulator_refuses_the_check_does_not_call_checked(data, what):
    """A negative increment passed check while simulate refused it; semaphore values
    past int32 (a GPU's wraps) were not modelled. Both now say the same: simulate
    refuses, the check says where its run stopped (never a silent pass)."""
    from mpmd_lab import simulate

    s = load_scenario(data)
    (w,) = [
        d
        for d in analyze(s).diagnostics
        if d.code == "SYNC_NOT_CHECKED" and "stopped at" in d.message
    ]
    assert what in w.message and w.path.startswith("call.programs[0].body[3].body["), w
    sim = simulate(s)
    assert sim.error is not None and sim.error.code == "SIM_UNSUPPORTED"
    assert what in sim.error.message


def test_check_folder_reports_fifos_sockets_and_dangling_links(tmp_path):
    """``check FOLDER`` silently skipped them (only regular files were listed)."""
    import socket

    (tmp_path / "ok.json").write_text(gallery.load("ring-shift").to_json())
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock.json"))
        p = _cli("check", str(tmp_path), timeout=60)
    finally:
        sock.close()
    assert p.returncode == 2, p.stdout + p.stderr
    assert "checked 4 scenario file(s): 1 valid, 3 unusable" in p.stdout
    assert "fifo.json: <top>: a FIFO" in p.stderr and "sock.json: <top>: a socket" in p.stderr
    assert "dangling.json" in p.stderr


def test_a_loop_variable_named_like_a_ref_exports_a_script_jax_runs():
    """A loop variable ``out`` checked valid, but the exported script's loop function
    took ``out`` as its index and the body's ``out.at[...]`` indexed an int."""
    sys.path.insert(0, str(Path(__file__).parent))
    from jaxprobe import probe_many
    from mpmd_lab.codegen import generate

    data = gallery.load("two-block-copy").to_dict()
    data["name"] = "loop-var-named-out"
    body = data["call"]["programs"][0]["body"]
    view = {"op": "at", "index": [{"ds": ["b * 128 + out * 0", 128]}]}
    data["call"]["programs"][0]["body"] = [
        body[0],
        {
            "op": "loop",
            "var": "out",
            "stop": 2,
            "body": [{"let": "dst", "ref": "out", "transforms": [view]}, body[2]],
        },
    ]
    s = load_scenario(data)
    assert not [d for d in analyze(s).diagnostics if d.is_error]
    assert "def _loop1(_out_i, " in generate(s)
    (r,) = probe_many([data], stages=("build", "trace", "gpu-lower", "interpret"))
    assert r["stage"] is None, r


def test_result_keys_stay_distinct_when_outputs_take_the_ref_names():
    """Two outputs ``x`` and ``x_ref`` and an as_ref buffer ``x``: the buffer's final
    value was keyed ``x_ref`` too, overwriting the output (export and simulator)."""
    from mpmd_lab import simulate
    from mpmd_lab.codegen import generate, output_names

    data = gallery.load("ring-shift").to_dict()
    data["buffers"]["x"]["as_ref"] = True
    data["call"]["args"][0]["param"] = "xin"
    data["call"]["programs"][0]["body"][1]["src"] = "xin"
    data["call"]["outputs"]["x"] = {"shape": [256], "dtype": "float32"}
    data["call"]["outputs"]["x_ref"] = {"shape": [256], "dtype": "float32"}
    s = load_scenario(data)
    names = output_names(s)
    assert names == ["out", "x", "x_ref", "x_ref2"]
    src = generate(s)
    assert "result['x_ref'] = outs[2]" in src and "result['x_ref2'] = x[...]" in src
    sim = simulate(s)
    assert sim.error is None and list(sim.outputs) == names
