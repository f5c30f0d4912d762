"""Your own kernel in the Lab, from a notebook.

    mpmd_lab.show(fn, *args)       # import fn(*args)'s kernel call and open the Lab on it

    %load_ext mpmd_lab
    %%mpmd_lab [NAME] [-o VAR] [--timeout S] [--no-lab]
    ...a cell defining NAME (default ``make``): a function returning (fn, args),
    or the tuple (fn, args) itself...

The cell magic runs the cell (``mpmd_lab.importer.notebook.import_cell``: the cell's
lines kept, the import stored as ``VAR``, default ``imported``) and shows the Lab on it
(``--no-lab``: the import's summary instead).
"""

from __future__ import annotations

from typing import Any

from mpmd_lab.importer.api import DEFAULT_TIMEOUT, Imported, import_call
from mpmd_lab.importer.notebook import import_cell
from mpmd_lab.widgets.lab import Lab


def lab(imported: Imported) -> Lab:
    """The Lab on an import."""
    return Lab(imported)


def show(fn: Any, *args: Any, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: Any) -> Lab:
    """Import ``fn(*args, **kwargs)``'s kernel call (traced, never run) and open the Lab
    on it: the problems at your lines, the graph, simulate, export."""
    return lab(import_call(fn, args, kwargs, timeout=timeout))


def mpmd_lab_cell(line: str, cell: str, shell: Any = None) -> Any:
    """The ``%%mpmd_lab`` cell magic (see the module docstring)."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    imported, show_lab = import_cell(line, cell, shell)
    return lab(imported) if show_lab else imported


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext mpmd_lab``: registers the ``%%mpmd_lab`` cell magic."""

    def magic(line: str, cell: str) -> Any:
        return mpmd_lab_cell(line, cell, ipython)

    ipython.register_magic_function(magic, magic_kind="cell", magic_name="mpmd_lab")


__all__ = ["lab", "load_ipython_extension", "mpmd_lab_cell", "show"]
