"""Built-in scenarios shipped as package data (``toolkit/gallery/*.json``).

Names and files: :mod:`mpmd_lab.gallery.index` (the loader reads it); ``load`` here
returns one as a Scenario.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpmd_lab.gallery.index import has, names, path_of, summary

if TYPE_CHECKING:
    from mpmd_lab.scenario import Scenario


def load(name: str) -> Scenario:
    """A gallery scenario as a Scenario."""
    from mpmd_lab.scenario import load_scenario  # the loader imports gallery.index

    return load_scenario(path_of(name))


__all__ = ["has", "load", "names", "path_of", "summary"]
