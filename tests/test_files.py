"""Writes that respect what is there (``mpmd_lab.files``, used by every ``-o``, by
``save_scenario`` and so by the Lab's Save): devices, FIFOs, sockets and directories are
refused, a symlink is followed, the input is never the output, modes are kept, new files
get the umask, and no temp file survives an exception or a signal mid-write.

Every hostile target is made here: a FIFO, a Unix socket, /dev/null, hard and symbolic
links, a writer that fails or is signalled while it writes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpmd_lab import cli, files, gallery
from mpmd_lab.scenario import load_scenario, save_scenario

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

ROOT = Path(__file__).resolve().parents[1]


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _umask(mask: int) -> int:
    return os.umask(mask)


# ---------------------------------------------------------------- what is there


def test_a_new_file_gets_the_umask_and_an_existing_file_keeps_its_mode(tmp_path):
    old = _umask(0o027)
    try:
        new = files.write_text(tmp_path / "new.txt", "one")
    finally:
        _umask(old)
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0o666 & ~0o027, not mkstemp's 0600
    kept = tmp_path / "kept.sh"
    kept.write_text("#!/bin/sh\n")
    kept.chmod(0o751)
    files.write_text(kept, "#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o751
    assert kept.read_text() == "#!/bin/sh\necho hi\n"
    assert _names(tmp_path) == ["kept.sh", "new.txt"]


def _unix_socket(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    return s


def test_devices_fifos_sockets_and_directories_are_refused_not_replaced(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    sock_path = tmp_path / "s.sock"
    sock = _unix_socket(sock_path)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    try:
        cases = {
            "/dev/null": "a character device",
            str(fifo): "a FIFO",
            str(sock_path): "a socket",
            str(folder): "a directory",
        }
        for target, kind in cases.items():
            before = os.lstat(target)
            with pytest.raises(files.RefusedWrite) as info:
                save_scenario(gallery.load("dup-ref"), target)
            assert kind in info.value.strerror and info.value.filename == target
            after = os.lstat(target)
            assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode), target
            assert after.st_ino == before.st_ino, f"{target} was replaced"
        assert os.path.getsize("/dev/null") == 0
    finally:
        sock.close()
    assert _names(tmp_path) == ["folder.json", "pipe.json", "s.sock"]


def test_a_symlink_is_followed_to_its_target_and_stays_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    written = save_scenario(gallery.load("dup-ref"), link)
    assert written == real.resolve()
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert load_scenario(real).name == "dup-ref"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("made-by-the-write.json")
    save_scenario(gallery.load("dup-ref"), dangling)
    assert dangling.is_symlink() and load_scenario(tmp_path / "made-by-the-write.json")


def test_the_input_is_never_the_output_by_name_hard_link_or_symlink(tmp_path):
    src = tmp_path / "s.json"
    save_scenario(gallery.load("dup-ref"), src)
    before = src.read_bytes()
    (tmp_path / "hard.py").hardlink_to(src)
    (tmp_path / "soft.py").symlink_to(src)
    for out in (src, tmp_path / "hard.py", tmp_path / "soft.py", tmp_path / "." / "s.json"):
        with pytest.raises(files.RefusedWrite, match="is the input file"):
            files.write_text(out, "print('hi')\n", inputs=[src])
    assert src.read_bytes() == before


def test_a_failing_writer_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def half_then_fail(f):
        f.write(b"half of it")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        files.write_with(target, half_then_fail)
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == ["out.bin"]


# ---------------------------------------------------------------- signals mid-write

SLOW_WRITER = r"""
import signal, sys, time
from mpmd_lab import files
# the dispositions a terminal gives, whatever this test inherited (``nohup`` ignores
# SIGHUP, a background job SIGINT): the signals below must reach the writer
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)
if sys.argv[2] == "named":
    files.USE_TMPFILE = False  # the fallback: a named .tmp beside the target
def slow(f):
    f.write(b"partial contents " * 1000)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
try:
    files.write_with(sys.argv[1], slow)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _signal_mid_write(tmp_path: Path, sig: int, mode: str) -> tuple[int, str]:
    target = tmp_path / "out.png"
    target.write_bytes(b"old picture")
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(target), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout.readline().strip() == "writing", proc.stderr.read()
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert target.read_bytes() == b"old picture"
    return proc.returncode, err


@pytest.mark.parametrize("mode", ["unnamed", "named"])
@pytest.mark.parametrize(
    "sig,rc",
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP), (signal.SIGINT, 130)],
)
def test_a_signal_mid_write_removes_the_temp_file_then_acts(tmp_path, sig, rc, mode):
    code, err = _signal_mid_write(tmp_path, sig, mode)
    assert code == rc, err  # the process still ends the way the signal asks
    assert _names(tmp_path) == ["out.png"], "a temp file was left behind"


def test_sigkill_mid_write_leaves_nothing_where_the_temp_file_is_unnamed(tmp_path):
    fd = os.open(tmp_path, os.O_TMPFILE | os.O_WRONLY, 0o600)  # this file system has them
    os.close(fd)
    code, err = _signal_mid_write(tmp_path, signal.SIGKILL, "unnamed")
    assert code == -signal.SIGKILL
    assert _names(tmp_path) == ["out.png"], "a temp file was left behind"


def test_graph_killed_while_it_writes_leaves_the_old_file_or_the_new_one(tmp_path):
    """``mpmd-lab graph`` as a user runs it, SIGTERMed at growing delays: every time the
    old picture is whole or the new one is, and nothing else is in the folder."""
    exe = Path(sys.executable).with_name("mpmd-lab")
    out = tmp_path / "g.png"
    out.write_bytes(b"old picture")
    endings = []
    for delay in (0.5, 2.0, 4.0, 6.0, 9.0):
        proc = subprocess.Popen(
            [str(exe), "graph", "ring-shift", "-o", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert b"Traceback" not in err, err.decode()
        endings.append(proc.returncode)
        data = out.read_bytes()
        assert data == b"old picture" or data.startswith(b"\x89PNG"), data[:20]
        assert _names(tmp_path) == ["g.png"]
        if proc.returncode == 0:
            break
    assert -signal.SIGTERM in endings, endings


# ---------------------------------------------------------------- the command line


def test_cli_outputs_refuse_the_input_devices_and_fifos(tmp_path, capsys):
    src = tmp_path / "s.json"
    save_scenario(gallery.load("dup-ref"), src)
    before = src.read_bytes()
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    t0 = time.perf_counter()
    cases = [
        (["export", str(src), "-o", str(src)], "is the input file"),
        (["check", str(src), "--fix", "-o", str(src)], "is the input file"),
        (["export", str(src), "-o", "/dev/null"], "a character device"),
        (["graph", str(src), "-o", str(fifo)], "a FIFO"),
        (["export", "dup-ref", "-o", str(gallery.path_of("dup-ref"))], "is the input file"),
    ]
    for argv, words in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (argv, err)
    assert time.perf_counter() - t0 < 60  # the FIFO is refused before drawing, not opened
    assert src.read_bytes() == before
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert gallery.load("dup-ref").name == "dup-ref"


def test_gallery_name_o_file_starts_a_scenario_file(tmp_path, capsys):
    out = tmp_path / "mine.json"
    assert cli.main(["gallery", "ring-shift", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    assert load_scenario(out) == gallery.load("ring-shift")
    out.write_text('{"my": "work"}')
    assert cli.main(["gallery", "dup-ref", "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == '{"my": "work"}'
    assert cli.main(["gallery", "dup-ref", "-o", str(out), "--force"]) == 0
    assert load_scenario(out).name == "dup-ref"
    assert cli.main(["gallery", "dup-reff"]) == 2
    assert "did you mean dup-ref" in capsys.readouterr().err
    assert cli.main(["gallery", "two-block-copy"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "two-block-copy"


def test_check_fix_o_says_what_it_wrote_and_writes_nothing_without_a_fix(tmp_path, capsys):
    out = tmp_path / "fixed.json"
    assert cli.main(["check", "dup-ref", "--fix", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {out}: 1 fix applied" in err, err
    # (its description said JAX refuses it: the repaired one says what repaired it)
    assert load_scenario(out).name == "dup-ref-fixed"
    assert "renamed 'dup-ref' -> 'dup-ref-fixed'" in err
    again = tmp_path / "again.json"
    assert cli.main(["check", str(out), "--fix", "-o", str(again)]) == 0
    assert "no fix applies: nothing written" in capsys.readouterr().err
    assert not again.exists()


def test_the_labs_save_refuses_what_is_not_a_file_and_keeps_modes(tmp_path):
    from mpmd_lab.session import Session

    state = Session(gallery.load("dup-ref"))
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    result = state.save(fifo)
    assert not result.ok and "FIFO" in result.message(), result.problems
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not state.save("/dev/null").ok and os.path.getsize("/dev/null") == 0
    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    mine.chmod(0o640)
    assert not state.save(mine).ok  # a file the session did not load: only when confirmed
    assert state.save(mine, overwrite=True).ok
    assert stat.S_IMODE(mine.stat().st_mode) == 0o640
    assert load_scenario(mine).name == "dup-ref"
    assert _names(tmp_path) == ["mine.json", "pipe.json"]
