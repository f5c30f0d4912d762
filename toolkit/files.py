"""The one way mpmd-lab writes a user's file: ``-o``, ``save_scenario``, the Lab's Save.

``write_bytes(path, data, inputs=(src,))`` replaces ``path`` whole or not at all:

- the data goes to a temp file in the target's own folder, which is renamed over the
  target; on Linux the temp file has no name until it is complete (``O_TMPFILE``), so
  even a SIGKILL leaves nothing behind; elsewhere it is a ``.NAME.XXXX.tmp`` removed on
  any exception and on SIGTERM/SIGHUP/SIGINT (the signal is re-raised afterwards);
- anything that is not a regular file (a directory, a character or block device, a
  FIFO, a socket) is refused, never replaced; a symlink is followed explicitly (its
  target is written, the link stays); a read-only file is refused;
- a path that is one of ``inputs`` (the same inode: the same name, a hard link or a
  symlink) is refused: ``export s.json -o s.json`` never replaces the scenario;
- an existing file keeps its mode (and owner, where allowed); a new file gets the
  user's umask (``0o666 & ~umask``), like any program's output.

A refusal is a ``RefusedWrite``, an ``OSError`` whose ``strerror`` says why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

#: Signals that, arriving mid-write, first remove the temp file (then act as usual).
CLEANUP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
#: Whether to try an unnamed temp file (``O_TMPFILE``, linked in when complete).
USE_TMPFILE = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
#: File systems (``st_dev``) where an unnamed temp file could not be linked in (some
#: sandboxes refuse ``linkat`` through /proc with EXDEV): named temp files there.
_NO_LINK: set[int] = set()

PathLike = str | os.PathLike[str]


class RefusedWrite(OSError):
    """A write mpmd-lab will not do (``filename`` the path, ``strerror`` the reason)."""

    def __init__(self, code: int, reason: str, path: PathLike):
        super().__init__(code, reason, os.fspath(path))


def kind_of(mode: int) -> str:
    """What a file-system object is, in words (``a FIFO``, ``a directory``...)."""
    for test, words in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def target_of(
    path: PathLike, inputs: Iterable[PathLike] = ()
) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``path`` replaces (symlinks followed) and its stat (None if new).

    Raises RefusedWrite for anything that must not be replaced.
    """
    raw = os.fspath(path)
    if not raw or "\0" in raw:
        raise RefusedWrite(errno.EINVAL, "not a usable file name", raw.replace("\0", "\\0"))
    given = Path(raw)
    real = Path(os.path.realpath(given))  # a symlink: write its target, keep the link
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise RefusedWrite(
                errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL,
                f"is {kind_of(st.st_mode)}: refusing to replace it with a file",
                given,
            )
        if not os.access(real, os.W_OK):
            raise RefusedWrite(errno.EACCES, "is read-only: refusing to replace it", given)
        for src in inputs:
            try:
                src_st = os.stat(src)
            except (OSError, ValueError):
                continue
            if _same_file(st, src_st):
                raise RefusedWrite(
                    errno.EEXIST,
                    f"is the input file {os.fspath(src)!s}: write the output to another path",
                    given,
                )
    return real, st


class _Signalled(BaseException):
    """Raised by the temporary handler: unwinds a write so its temp file goes."""


class _SignalGuard:
    """While inside: SIGTERM/SIGHUP (where at their default action) raise ``_Signalled``,
    so the write's cleanup runs; once ``quiet`` they are only recorded. On the way out
    the old handlers come back and a signal that arrived is delivered again (the
    process then ends the way it was asked to)."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self.quiet = False
        self.named: Path | None = None  # a named temp file to remove if the write fails
        self._saved: dict[int, object] = {}

    def _handler(self, signum: int, frame: object) -> None:
        self.got.append(signum)
        if not self.quiet:
            raise _Signalled

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in CLEANUP_SIGNALS:
                with contextlib.suppress(ValueError, OSError):
                    if signal.getsignal(sig) is signal.SIG_DFL:
                        self._saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: object) -> bool:
        self.quiet = True
        if not self._saved:
            return False
        sigs = set(self._saved)
        signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        try:
            for sig, old in self._saved.items():
                signal.signal(sig, old)  # type: ignore[arg-type]
        finally:  # a signal still pending now gets its default action when unblocked
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        if self.got:
            signal.raise_signal(self.got[0])
        return isinstance(exc, _Signalled)


def _temp_name(real: Path) -> Path:
    stem = real.name[:180]
    return real.with_name(f".{stem}.{os.urandom(4).hex()}.tmp")


def _open_temp(real: Path) -> tuple[int, Path | None]:
    """A writable temp file beside ``real``: ``(fd, name)``, name None while unnamed."""
    folder = os.fspath(real.parent)
    if USE_TMPFILE and os.stat(folder).st_dev not in _NO_LINK:
        try:
            return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o666), None
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
                raise
            _NO_LINK.add(os.stat(folder).st_dev)
    return _open_named(real)


def _open_named(real: Path) -> tuple[int, Path]:
    """A new ``.NAME.XXXX.tmp`` beside ``real``, created with the umask's mode."""
    for _ in range(100):
        name = _temp_name(real)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            return os.open(name, flags, 0o666), name  # the umask applies (not mkstemp's 0600)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temp file name", os.fspath(real.parent))


def _link_in(fd: int, real: Path, guard: _SignalGuard) -> Path:
    """Give an unnamed temp file a name in its folder (or copy it to a named one where
    the system refuses the link)."""
    for _ in range(100):
        name = _temp_name(real)
        try:
            os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
            return name
        except FileExistsError:
            continue
        except OSError:
            _NO_LINK.add(os.fstat(fd).st_dev)
            break
    out, name = _open_named(real)
    guard.named = name
    try:
        meta = os.fstat(fd)
        os.fchmod(out, stat.S_IMODE(meta.st_mode))
        with contextlib.suppress(OSError):
            os.fchown(out, meta.st_uid, meta.st_gid)
        offset, size = 0, meta.st_size
        while offset < size:
            chunk = os.pread(fd, min(1 << 20, size - offset), offset)
            if not chunk:
                break
            os.write(out, chunk)  # a regular file: short writes only on errors, which raise
            offset += len(chunk)
        os.fsync(out)
    finally:
        os.close(out)
    return name


def write_with(
    path: PathLike,
    write: Callable[[BinaryIO], object],
    inputs: Iterable[PathLike] = (),
    exclusive: bool = False,
) -> Path:
    """``write(f)`` into a temp file (binary), then put it in place of ``path``.

    Returns the path written (a symlink's target). The old file stays whole if
    anything fails, and no temp file is left (see the module's doc). ``exclusive``:
    only a new file (FileExistsError if ``path`` exists, also one another process made
    while this one wrote: the temp file is linked in, never renamed over it).
    """
    real, st = target_of(path, inputs)
    if exclusive and st is not None:
        raise FileExistsError(errno.EEXIST, "exists: refusing to replace it", os.fspath(path))
    with _SignalGuard() as guard:
        fd, name = _open_temp(real)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                write(f)
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
                with contextlib.suppress(OSError):
                    os.fchown(fd, st.st_uid, st.st_gid)
            os.fsync(fd)
            if name is None:
                name = _link_in(fd, real, guard)
            if exclusive:  # (the temp name goes below)
                try:
                    os.link(name, real)
                except FileExistsError:
                    raise FileExistsError(
                        errno.EEXIST, "exists: refusing to replace it", os.fspath(path)
                    ) from None
            else:
                os.replace(name, real)
                name = guard.named = None
        finally:
            guard.quiet = True  # from here a signal waits until the temp file is gone
            os.close(fd)
            for leftover in {name, guard.named} - {None}:
                with contextlib.suppress(OSError):
                    os.unlink(leftover)  # type: ignore[arg-type]
    return real


def write_bytes(
    path: PathLike, data: bytes, inputs: Iterable[PathLike] = (), exclusive: bool = False
) -> Path:
    """Write ``data`` to ``path`` (see ``write_with``)."""
    return write_with(path, lambda f: f.write(data), inputs, exclusive)


def write_text(
    path: PathLike, text: str, inputs: Iterable[PathLike] = (), exclusive: bool = False
) -> Path:
    """Write ``text`` as UTF-8 to ``path`` (see ``write_with``)."""
    return write_bytes(path, text.encode("utf-8"), inputs, exclusive)


__all__ = ["RefusedWrite", "kind_of", "target_of", "write_bytes", "write_text", "write_with"]
