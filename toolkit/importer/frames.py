"""Where the user's code is: source lines of equations and exceptions, parameter names.

JAX records, for every equation, the Python traceback that created it
(``eqn.source_info.traceback``); an exception raised while tracing the user's code
has the user's frame in its own traceback, one raised while lowering has it in its
``__cause__`` (a ``JaxStackTraceBeforeTransformation``). A *user frame* is any frame
outside JAX, jaxlib, mpmd-lab itself and Python's standard library.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _dir_of(module: str) -> str | None:
    try:
        mod = __import__(module)
    except ImportError:
        return None
    f = getattr(mod, "__file__", None)
    return str(Path(f).resolve().parent) + os.sep if f else None


@functools.cache
def _internal_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(packages' dirs, the standard library's dirs). numpy is JAX's too: an error JAX
    raises ``from`` numpy's (``np.broadcast_shapes`` of an index's shapes) has only
    numpy's frames in its cause's traceback, and the user's line is the exception's."""
    pkgs = [_dir_of("jax"), _dir_of("jaxlib"), _dir_of("numpy"), _dir_of("ml_dtypes")]
    pkgs.append(str(Path(__file__).resolve().parents[1]) + os.sep)
    std = []
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            std.append(str(Path(p).resolve()) + os.sep)
    return tuple(d for d in pkgs if d), tuple(std)


@functools.cache
def is_user_file(filename: str) -> bool:
    """Whether a frame in ``filename`` is the user's (not JAX's, mpmd-lab's or Python's)."""
    if not filename or filename.startswith("<frozen"):
        return False
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        path = filename
    pkgs, std = _internal_dirs()
    if any(path.startswith(d) for d in pkgs):
        return False
    return not (any(path.startswith(d) for d in std) and "site-packages" not in path)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    start_line: int  # the line of the function's ``def`` (0 when unknown)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def eqn_frames(eqn: Any) -> list[Frame]:
    """The frames that created ``eqn``, outermost first."""
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    if tb is None:
        return []
    try:
        raw = tb.frames
    except Exception:  # pragma: no cover - a jaxlib without frames
        return []
    out = [
        Frame(f.file_name, f.line_num, f.function_name, getattr(f, "function_start_line", 0))
        for f in raw
    ]
    return out[::-1]


def user_frames(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if is_user_file(f.file)]


def eqn_source(eqn: Any) -> str | None:
    """``"FILE:LINE"`` of the innermost user frame that created ``eqn``."""
    users = user_frames(eqn_frames(eqn))
    return users[-1].where if users else None


def exception_source(exc: BaseException) -> str | None:
    """``"FILE:LINE"`` of the user's line an exception points at.

    The ``__cause__`` chain first (a lowering error's user line is only there), then
    the exception's own traceback; the innermost user frame of either."""
    chain: list[BaseException] = []
    c = exc.__cause__
    while c is not None and len(chain) < 5:
        chain.append(c)
        c = c.__cause__
    for e in (*chain, exc):
        tb = e.__traceback__
        if tb is None:
            continue
        frames = [f for f in traceback.extract_tb(tb) if is_user_file(f.filename)]
        if frames:
            return f"{frames[-1].filename}:{frames[-1].lineno}"
    return None


def raised_at(exc: BaseException) -> str | None:
    """``"FILE:LINE"`` of the frame that raised ``exc`` (its traceback's innermost), user
    code or not: where an error no user line points at comes from (a library's op)."""
    tb = exc.__traceback__
    if tb is None:
        return None
    frames = traceback.extract_tb(tb)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def line_text(where: str | None) -> str:
    """The source text of ``"FILE:LINE"`` (stripped; "" when unknown)."""
    if not where or ":" not in where:
        return ""
    file, _, line = where.rpartition(":")
    try:
        return linecache.getline(file, int(line)).strip()
    except (ValueError, OSError):
        return ""


#: notebook cells whose source the import registered (``%%mpmd_lab``): file name ->
#: (the cell's execution count, lines above its code: the magic's own line)
CELLS: dict[str, tuple[int, int]] = {}
#: a terminal IPython cell's file name: ``<ipython-input-3-...>``
_INPUT = re.compile(r"^<ipython-input-(\d+)-")


def name_cell(file: str, number: int, offset: int = 0) -> None:
    """Say that ``file`` holds the code of notebook cell ``[number]`` (``offset`` lines
    of the cell come before it)."""
    CELLS[file] = (number, offset)


def cell_of(file: str) -> tuple[int, int] | None:
    """(execution count, line offset) of the notebook cell ``file`` holds, or None.

    A cell the import registered; a terminal IPython's ``<ipython-input-N-...>``; a
    Jupyter kernel's cell file (not on disk), found among the shell's inputs."""
    if file in CELLS:
        return CELLS[file]
    m = _INPUT.match(file)
    if m:
        return int(m.group(1)), 0
    if os.path.exists(file) or "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except Exception:  # noqa: BLE001 - no IPython to ask
        return None
    if shell is None:
        return None
    text = "".join(linecache.getlines(file)).rstrip()
    inputs = shell.user_ns.get("In") or []
    if not text:
        return None
    for k in range(len(inputs) - 1, 0, -1):
        if str(inputs[k]).rstrip() == text:
            return k, 0
    return None


def display(where: str | None) -> str:
    """``"FILE:LINE"`` as a user reads it: ``cell [3], line 11`` for a notebook cell,
    else the file's name and the line (``kernels.py:11``)."""
    if not where or ":" not in where:
        return "?"
    file, _, line = where.rpartition(":")
    cell = cell_of(file)
    if cell is not None and line.isdigit():
        return f"cell [{cell[0]}], line {int(line) + cell[1]}"
    return f"{file.rsplit('/', 1)[-1]}:{line}"


@functools.lru_cache(maxsize=256)
def _tree(file: str) -> ast.Module | None:
    lines = linecache.getlines(file)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None


def parameters(file: str, def_line: int) -> list[str] | None:
    """The positional parameter names of the function defined at ``file:def_line``.

    ``None`` when the source cannot be read or the function takes ``*args``."""
    tree = _tree(file)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            first = node.lineno
            decos = getattr(node, "decorator_list", [])
            lines = {first, *(d.lineno for d in decos)}
            if def_line in lines:
                a = node.args
                if a.vararg is not None:
                    return None
                return [x.arg for x in (*a.posonlyargs, *a.args)]
    return None


def function_of(eqns: Any, exclude: Frame | None = None, params: int | None = None) -> Frame | None:
    """The user function most of ``eqns`` come from (their innermost user frames),
    other than ``exclude``'s; with ``params``, one whose ``def`` takes that many.

    JAX keeps only the innermost frames of an equation's traceback, so the function
    that made an equation is its innermost user frame, not a walk from the outside."""
    counts: dict[tuple[str, int, str], tuple[int, Frame]] = {}
    for e in eqns:
        users = user_frames(eqn_frames(e))
        if not users:
            continue
        f = users[-1]
        if exclude is not None and (f.file, f.start_line) == (exclude.file, exclude.start_line):
            continue
        key = (f.file, f.start_line, f.function)
        n, first = counts.get(key, (0, f))
        counts[key] = (n + 1, first)
    ranked = sorted(counts.values(), key=lambda nf: -nf[0])
    for _, f in ranked:
        if params is None:
            return f
        names = parameters(f.file, f.start_line) if f.start_line else None
        if names is not None and len(names) == params:
            return f
    return None


__all__ = [
    "CELLS",
    "Frame",
    "cell_of",
    "display",
    "eqn_frames",
    "eqn_source",
    "exception_source",
    "function_of",
    "is_user_file",
    "line_text",
    "name_cell",
    "parameters",
    "raised_at",
    "user_frames",
]
