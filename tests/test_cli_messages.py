"""The command line's messages lead somewhere (issue 15): near names are suggested,
`explain` matches a message's words, every fix that helps is listed best first with
what it leaves, `check --fix -o` says what it wrote, `export` of an invalid scenario
warns, `run` with auto runs ring-shift on a CPU and says why."""

from __future__ import annotations

import json

from mpmd_lab import cli, gallery


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def ring_with(tmp_path, name: str, change) -> str:
    data = gallery.load("ring-shift").to_dict()
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_unknown_gallery_names_and_files_get_suggestions(capsys):
    rc, _, err = run(capsys, "gallery", "dup-reff")
    assert rc == 2 and "did you mean dup-ref" in err
    rc, _, err = run(capsys, "check", "dup-reff")
    assert rc == 2 and "no such file or gallery scenario; did you mean 'dup-ref'" in err
    rc, _, err = run(capsys, "run", "rign-shift")
    assert rc == 2 and "did you mean 'ring-shift'" in err


def test_a_misspelt_field_names_the_one_meant(tmp_path, capsys):
    data = gallery.load("dup-ref").to_dict()
    data["call"]["args"][0]["tranforms"] = []
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(data))
    rc, _, err = run(capsys, "check", str(path))
    assert rc == 2
    assert "call.args[0].tranforms: unknown field; did you mean 'transforms'?" in err


def test_a_misspelt_axis_says_did_you_mean_and_offers_the_fix(tmp_path, capsys):
    def typo(d):
        d["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = {"devs": {"offset": 1}}

    path = ring_with(tmp_path, "typo.json", typo)
    rc, out, _ = run(capsys, "check", path)
    assert rc == 1
    assert "Found an unbound axis name: devs" in out and "(did you mean 'dev'?)" in out
    assert "fix: use 'dev' (there is no 'devs') -> valid" in out
    fixed = tmp_path / "fixed.json"
    rc, _, err = run(capsys, "check", path, "--fix", "-o", str(fixed))
    assert rc == 0 and f"wrote {fixed}: 1 fix applied" in err
    assert json.loads(fixed.read_text()) == gallery.load("ring-shift").to_dict()


def test_every_fix_that_helps_is_listed_best_first(tmp_path, capsys):
    def multicast(d):
        d["call"]["programs"][0]["body"][0]["transforms"].append(
            {"op": "multicast_ref", "axes": "dev"}
        )

    path = ring_with(tmp_path, "peer-mc.json", multicast)
    rc, out, _ = run(capsys, "check", path)
    assert rc == 1
    lines = [x.strip() for x in out.splitlines() if x.strip().startswith("fix")]
    assert lines == [
        "fix 1 (best): keep the peer view: drop the multicast step (write to one device, "
        "not all) -> valid",
        "fix 2: build the multicast view from the base ref (drop the peer step before it) "
        "-> then MULTICAST_PLAIN_STORE",
    ]
    rc, out, _ = run(capsys, "check", path, "--json")
    (d,) = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    assert [f["after"] for f in d["fixes"]] == [[], ["MULTICAST_PLAIN_STORE"]]
    assert d["fix"] == d["fixes"][0]


def test_check_fix_says_what_it_wrote_and_writes_nothing_without_a_fix(tmp_path, capsys):
    out = tmp_path / "out.json"
    rc, _, err = run(capsys, "check", "transpose-view", "--fix", "-o", str(out))
    assert "no fix applies: nothing written" in err and not out.exists()
    rc, out_text, err = run(capsys, "check", "dup-ref", "--fix", "-o", str(out))
    assert rc == 0 and f"wrote {out}: 1 fix applied" in err and "fixed: drop argument" in err
    # the verdict is the fixed scenario's, under its name: dup-ref itself is not valid
    assert out_text.strip() == "dup-ref-fixed: valid (0 error(s), 0 warning(s))"


def test_explain_matches_the_words_of_a_message(capsys):
    rc, out, _ = run(capsys, "explain", "cannot pass the same ref")
    assert rc == 0 and out.startswith("MPMD_DUP_REF:")
    rc, out, err = run(capsys, "explain", "out of bound")
    assert rc == 1 and "did you mean:" in err
    listed = [x for x in err.splitlines() if x.startswith("  ")]
    assert 1 <= len(listed) <= 5 and any("AT_OOB_SLICE" in x for x in listed)
    rc, out, err = run(capsys, "explain", "MPMD_DUP_REFF")
    assert rc == 1 and "MPMD_DUP_REF " in err and err.count("\n") < 6


def test_export_of_an_invalid_scenario_warns(tmp_path, capsys):
    rc, out, err = run(capsys, "export", "dup-ref")
    assert rc == 0 and "def build(" in out
    assert "warning: dup-ref is not valid: the check finds MPMD_DUP_REF" in err
    rc, out, err = run(capsys, "export", "dup-ref-fixed")
    assert rc == 0 and err == ""


def test_run_auto_runs_ring_shift_on_a_cpu_and_says_why(capsys):
    rc, out, _ = run(capsys, "run", "ring-shift", "--json")
    j = json.loads(out)
    assert rc == 0 and j["status"] == "ok" and j["backend"] == "simulate"
    assert j["reason"].startswith("auto: no GPU here") and "simulator" in j["reason"]
    assert j["wall_seconds"] >= j["seconds"] >= 0 and "startup_seconds" in j
    rc, out, _ = run(capsys, "run", "ring-shift")
    assert rc == 0 and "ok (simulate, 4 devices): simulated" in out
    assert "Traceback" not in out


def test_the_race_card_says_a_gpu_race_raises_nothing(capsys):
    rc, out, _ = run(capsys, "explain", "RACE")
    assert rc == 0 and "on a GPU nothing is raised" in out and "raised by JAX" not in out


def test_jax_internals_are_summarised():
    """JAX's race report (as recorded from the real interpreter) without object
    addresses, vector clocks or repeated lines; the simulator's many races in a few."""
    from mpmd_lab import knowledge, runtime

    recorded = knowledge.card("RACE_DETECTED").recorded
    message = next(r["message"] for r in recorded.values() if r and "clock:" in r["message"])
    short = runtime.summarised(message)
    assert "NpVectorClock" not in short and "clock:" not in short and " at 0x" not in short
    assert "HostAllocationKey" not in short and "buffer #" in short
    assert short.startswith("RACE DETECTED") and len(short.splitlines()) <= 6
    r = runtime.run(gallery.load("multicast-2d"), "simulate")
    assert len(r.races()) > 5  # every device writes every other device's out
    lines = r.race_lines()
    assert len(lines) <= 4 and "write-write races on out" in lines[0]
    assert "races on out" in r.summary() and r.summary().count("e.g.") == 1


def test_the_gallery_list_gives_each_first_sentence_whole(capsys):
    """An ellipsis in a description (``concat(x_0 ... x_3)``) does not end its first
    sentence, and no line ends in a full stop (some did, some did not)."""
    rc, out, _ = run(capsys, "gallery")
    lines = dict(x.split(None, 1) for x in out.splitlines())
    assert rc == 0 and set(lines) == set(gallery.names())
    assert lines["ring-all-gather"].endswith("concat(x_0 ... x_3) on every device")
    assert not [n for n, text in lines.items() if text.endswith(".")]


COMMANDS = ("gallery", "check", "fix", "run", "graph", "export", "import", "explain")


def test_every_argument_of_every_command_says_what_it_is(capsys):
    """``mpmd-lab COMMAND --help`` describes each argument (FILE, --backend, -o ... had
    no words), and run's line names all three places a call runs."""
    import pytest

    for command in COMMANDS:
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        bare = [
            x
            for x in out.split("positional arguments:", 1)[1].splitlines()
            if x.startswith("  ") and not x.startswith("   ") and len(x.split()) == 1
        ]
        # an argument whose help is on the next line is indented the same and continued
        lines = out.split("positional arguments:", 1)[1].splitlines()
        for name in bare:
            nxt = lines[lines.index(name) + 1]
            assert nxt.startswith(" " * 20), (command, name)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "simulator" in capsys.readouterr().out


def test_the_deadlock_fix_says_the_view_before_and_after(capsys):
    """The fix of the ring's deadlock reads as an edit: the signal's view, what it was,
    and which view it now matches (it read "sent = sems.at[i], as arrived is (not ...)")."""
    rc, out, _ = run(capsys, "fix", "ring-all-gather-deadlock")
    assert rc == 0
    assert (
        "waits on: sent = sems.at[i] (was sems.at[0]), the same view as arrived "
        "(leaves no error)" in out
    )


def test_a_machine_limit_is_one_line_in_check(capsys):
    """``check`` of a valid remote kernel gives this CPU interpreter's limit as one note
    line (it printed JAX's interpreter error and a paragraph under it, for every such
    kernel), then the verdict; the card keeps the rest."""
    rc, out, _ = run(capsys, "check", "ring-all-gather")
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 2
    assert "info GPU_INTERP_UNSUPPORTED_TRANSFORM [interpret]: on this machine:" in lines[0]
    assert lines[1] == "ring-all-gather: valid (0 error(s), 0 warning(s), 1 note(s))"
    rc, out, _ = run(capsys, "check", "dup-ref")  # a kernel's own error keeps its lines
    assert "    JAX NotImplementedError:" in out and "    why:" in out


def test_a_cards_try_it_commands_work_from_any_folder(capsys, tmp_path, monkeypatch):
    """The card's "Try it" files are found from where the user is (they were relative to
    the repository root, so from notebooks/ the command said no such file)."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, "explain", "MPMD_DUP_REF")
    tried = [x.split()[2] for x in out.splitlines() if x.startswith("  mpmd-lab check ")]
    assert rc == 0 and len(tried) == 2 and all(Path(p).is_file() for p in tried)
    rc, out, _ = run(capsys, "check", tried[1])
    assert rc == 0 and out.strip().endswith("valid (0 error(s), 0 warning(s))")


def test_graph_and_export_say_what_they_wrote(tmp_path, capsys):
    """``graph -o`` and ``export -o`` say "wrote PATH: what" on stderr, as ``gallery``,
    ``check --fix``, ``fix`` and ``import`` do (they printed the bare path on stdout)."""
    svg, py = tmp_path / "g.svg", tmp_path / "x.py"
    rc, out, err = run(capsys, "graph", "two-block-copy", "-o", str(svg))
    assert rc == 0 and out == "" and f"wrote {svg}: the aliasing graph of two-block-copy" in err
    rc, out, err = run(capsys, "export", "two-block-copy", "-o", str(py))
    assert rc == 0 and out == "" and f"wrote {py}: a self-contained JAX script" in err
    assert svg.read_text().lstrip().startswith("<") and "def build" in py.read_text()
