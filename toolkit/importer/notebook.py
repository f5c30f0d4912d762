"""Your own kernel from a notebook cell: what the ``%%mpmd_lab`` cell magic does
before the Lab shows it (the magic and ``mpmd_lab.show`` are the Lab's:
:mod:`mpmd_lab.widgets.notebook`; a library module never imports the widgets).

    %%mpmd_lab [NAME] [-o VAR] [--timeout S] [--no-lab]
    ...a cell defining NAME (default ``make``): a function returning (fn, args),
    or the tuple (fn, args) itself...

:func:`import_cell` runs the cell in the notebook's namespace (its source registered
like any cell's, so every statement keeps its line), imports the kernel call and stores
the :class:`~mpmd_lab.importer.Imported` as ``VAR`` (default ``imported``).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from mpmd_lab.importer import frames as F
from mpmd_lab.importer.api import DEFAULT_TIMEOUT, Imported, import_call


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%mpmd_lab", add_help=False)
    p.add_argument("name", nargs="?", default="make")
    p.add_argument("-o", "--output", default="imported")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    p.add_argument("--no-lab", action="store_true")
    return p


def unpack(made: Any, what: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``(fn, args)`` or ``(fn, args, kwargs)``, checked."""
    if not isinstance(made, tuple) or len(made) not in (2, 3) or not callable(made[0]):
        raise ValueError(f"{what} must be (fn, args) or (fn, args, kwargs), or make them")
    args = made[1] if isinstance(made[1], tuple | list) else (made[1],)
    kwargs = made[2] if len(made) == 3 else {}
    return made[0], tuple(args), dict(kwargs)


def import_cell(line: str, cell: str, shell: Any) -> tuple[Imported, bool]:
    """Run a ``%%mpmd_lab`` cell and import its kernel call: ``(imported, show the Lab)``
    (``--no-lab``: False). The import is stored in the notebook as ``-o VAR``."""
    try:
        opts = _parser().parse_args(shlex.split(line))
    except SystemExit:
        raise ValueError("usage: %%mpmd_lab [NAME] [-o VAR] [--timeout S] [--no-lab]") from None
    ns = shell.user_ns
    number = _cell_number(shell)
    # in linecache: the lines show where they are, named by the cell (the magic's line
    # is the cell's first: the code starts on its second)
    filename = shell.compile.cache(cell, number)
    if number:
        F.name_cell(filename, number, 1)
    exec(shell.compile(cell, filename, "exec"), ns)  # noqa: S102 - the user's own cell
    target = ns.get(opts.name)
    if target is None:
        raise NameError(f"the cell defines no {opts.name!r} (a function returning (fn, args))")
    made = target() if callable(target) else target
    fn, args, kwargs = unpack(made, opts.name)
    imported = import_call(fn, args, kwargs, timeout=opts.timeout)
    ns[opts.output] = imported
    return imported, not opts.no_lab


def _cell_number(shell: Any) -> int:
    """The ``In [N]`` of the cell running now: a cell kept in the history is stored,
    and the count moved on to the next, before it runs (0: not known)."""
    count = int(getattr(shell, "execution_count", 0) or 0)
    inputs = shell.user_ns.get("In") or []
    if count and len(inputs) == count and "mpmd_lab" in str(inputs[-1]):
        return count - 1
    return count


__all__ = ["import_cell", "unpack"]
