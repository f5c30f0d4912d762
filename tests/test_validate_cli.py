"""`mpmd-lab check`: exit 0 valid, 1 problems, 2 unusable input; check never raises."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpmd_lab.cli import main
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check


def test_exit_codes(tmp_path, capsys) -> None:
    assert main(["check", "two-block-copy"]) == 0
    assert main(["check", "dup-ref", "--json"]) == 1
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "call": {"args": 3}}')
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "call.args" in err and "Traceback" not in err


def test_json_output(capsys) -> None:
    assert main(["check", "peer-then-multicast", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False
    d = data["diagnostics"][0]
    assert d["code"] == "REF_PEER_TO_MULTICAST"
    assert d["path"] == "call.programs[0].body[0].transforms[1]"
    assert d["jax"]["message"] == "Can't make a peer reference into a multicast reference."


def test_fix_writes_fixed_file(tmp_path) -> None:
    out = tmp_path / "fixed.json"
    assert main(["check", "dup-ref", "--fix", "-o", str(out)]) == 0
    assert check(load_scenario(out)) == []


T = st.sampled_from(
    [
        {"op": "at", "index": [[0, 4]]},
        {"op": "at", "index": [1]},
        {"op": "at", "index": [{"ds": [2, 3]}]},
        {"op": "at", "index": [{"block": "b", "size": 2}]},
        {"op": "bitcast", "dtype": "int16"},
        {"op": "reshape", "shape": [-1]},
        {"op": "transpose", "perm": [1, 0]},
        {"op": "remote_ref", "device": {"dev": 1}},
        {"op": "multicast_ref", "axes": "dev"},
        {"op": "cluster_ref", "block": {"c": 0}},
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ts=st.lists(T, max_size=4),
    shape=st.lists(st.integers(1, 8), min_size=1, max_size=3),
    grid=st.integers(1, 3),
    as_ref=st.booleans(),
    twice=st.booleans(),
)
def test_check_never_raises(ts, shape, grid, as_ref, twice) -> None:
    args = [{"buffer": "x", "param": "a"}] + ([{"buffer": "x", "param": "b"}] if twice else [])
    s = load_scenario(
        {
            "name": "h",
            "device_mesh": {"dev": 2},
            "buffers": {"x": {"shape": shape, "dtype": "float32", "as_ref": as_ref}},
            "call": {
                "args": args,
                "outputs": {"out": {"shape": shape, "dtype": "float32"}},
                "programs": [
                    {
                        "mesh": {"grid": {"b": grid}},
                        "body": [
                            {"let": "v", "ref": "a", "transforms": ts},
                            {"op": "copy", "src": "v", "dst": "out"},
                        ],
                    }
                ],
            },
        }
    )
    diags = check(s)
    assert all(d.code and d.stage for d in diags)


def test_check_takes_several_files_and_folders(tmp_path, capsys) -> None:
    import shutil

    from mpmd_lab import gallery

    folder = tmp_path / "scenarios"
    (folder / "deeper").mkdir(parents=True)
    shutil.copy(gallery.path_of("two-block-copy"), folder / "a.json")
    shutil.copy(gallery.path_of("ring-shift"), folder / "deeper" / "b.json")
    assert main(["check", str(folder)]) == 0  # every *.json under the folder, all valid
    out = capsys.readouterr().out
    assert "checked 2 scenario file(s): 2 valid" in out and "deeper/b.json" in out
    assert main(["check", str(folder), "dup-ref"]) == 1  # one has problems
    capsys.readouterr()
    (folder / "broken.json").write_text('{"name": 3}')
    assert main(["check", "dup-ref", str(folder), "--json"]) == 2  # one is unusable
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and [f["valid"] for f in data["files"]] == [
        False, True, False, True,
    ]  # fmt: skip
    assert data["files"][0]["diagnostics"][0]["code"] == "MPMD_DUP_REF"
    assert data["files"][2]["unusable"][0]["path"] == "name"
    assert main(["check", "dup-ref", "ring-shift", "--fix"]) == 2  # --fix takes one FILE
    assert "take one FILE" in capsys.readouterr().err


def test_check_imports_only_what_it_needs() -> None:
    """`check` needs no JAX or matplotlib; `gallery` not even pydantic. numpy it does
    need: the static check runs the simulation engine data-free (validate/sync.py), whose
    views are numpy arrays of offsets (bench row `startup` holds the time to 200 ms). Nor
    ``importlib.metadata``: pydantic's plugin scan is off in the command line. Nor what
    other commands use: the file writer, --deep's prober, export, drawing, the Lab."""
    import subprocess
    import sys

    heavy = (
        "jax", "numpy", "matplotlib", "pydantic", "importlib.metadata", "ml_dtypes",
        "mpmd_lab.files", "mpmd_lab.deep", "mpmd_lab.probe", "mpmd_lab.codegen",
        "mpmd_lab.draw", "mpmd_lab.session", "mpmd_lab.importer",
    )  # fmt: skip
    probe = (
        "import sys; from mpmd_lab import cli; rc = cli.main(sys.argv[1:]); "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    for argv, loaded in ((["check", "ring-shift"], "['numpy', 'pydantic']"), (["gallery"], "[]")):
        r = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == loaded, (argv, r.stdout)


def test_check_loads_numpy_with_one_blas_thread() -> None:
    """The console script's `check` uses numpy for index arithmetic only: OpenBLAS
    starts no worker threads (on a 2-core machine they cost more CPU than the rest of
    the check after the model), and the processes it starts see the environment as given
    (a value set there wins). `cli.main` called in a program leaves its numpy alone."""
    import os
    import subprocess
    import sys

    if not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2:
        return  # threads counted in /proc (Linux); one core: OpenBLAS starts none anyway
    report = (
        "import os, sys; real_exit = os._exit; "
        "os._exit = lambda code: (print(len(os.listdir('/proc/self/task')), "
        "os.environ.get('OPENBLAS_NUM_THREADS'), flush=True), real_exit(code)); "
    )
    console = (
        report
        + "sys.argv = ['mpmd-lab', 'check', 'ring-shift']; from mpmd_lab import cli; cli.entry()"
    )
    library = report + "from mpmd_lab import cli; cli.main(['check', 'ring-shift']); os._exit(0)"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for probe, value, threads, seen in (
        (console, None, "1", "None"),
        (console, "2", "2", "2"),
        (library, None, "many", "None"),  # OpenBLAS's default: a thread per core
    ):
        run_env = env if value is None else {**env, "OPENBLAS_NUM_THREADS": value}
        r = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=run_env
        )
        assert r.returncode == 0, r.stderr
        n, var = r.stdout.strip().splitlines()[-1].split()
        assert var == seen and (int(n) > 1 if threads == "many" else n == threads), r.stdout


def test_check_start_up_spares_the_collector() -> None:
    """The console script's `check` imports the model and the check with the cyclic
    collector off and freezes what they built: its passes over those objects (75 of them
    before, ~35 ms CPU) are gone, a few remain for what the check allocates. `cli.main`
    called in a program freezes nothing."""
    import subprocess
    import sys

    probe = (
        "import gc, sys; gc.callbacks.append(lambda phase, info: phase == 'stop' and "
        "print('collector pass', file=sys.stderr)); sys.argv = ['mpmd-lab', *sys.argv[1:]]; "
        "from mpmd_lab import cli; cli.entry()"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, "check", "ring-shift"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "ring-shift: valid" in r.stdout
    assert r.stderr.count("collector pass") <= 25, r.stderr.count("collector pass")
    library = (
        "import gc, sys; from mpmd_lab import cli; n = gc.get_freeze_count(); "
        "cli.main(['check', 'ring-shift']); print(gc.get_freeze_count() - n)"
    )
    r = subprocess.run([sys.executable, "-c", library], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "0"


def test_model_annotations_are_objects_not_strings() -> None:
    """Every model class of the scenario (the ~60 that `check` builds at start-up) gives
    pydantic its field types as objects: a string annotation (``from __future__ import
    annotations`` in a model module) costs a compile and an eval per field per class, ~35
    ms of `check`'s import. Only the recursive references are strings (a body's statements,
    a scratch's transforms), resolved when the schema is built."""
    import mpmd_lab.diagnostics
    import mpmd_lab.scenario  # noqa: F401
    from pydantic import BaseModel

    def models(cls: type) -> set[type]:
        out: set[type] = set()
        for sub in cls.__subclasses__():
            out |= {sub, *models(sub)}
        return out

    modules = ("mpmd_lab.scenario", "mpmd_lab.fields", "mpmd_lab.diagnostics", "mpmd_lab.ops")
    ours = [c for c in models(BaseModel) if c.__module__.startswith(modules)]
    assert len(ours) > 50
    strings = sorted(
        (c.__qualname__, name)
        for c in ours
        for name, ann in vars(c).get("__annotations__", {}).items()
        if isinstance(ann, str)
    )
    assert strings == [("ArrayScratch", "transforms"), ("Loop", "body"), ("When", "body")]
