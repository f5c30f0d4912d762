"""Where the built-in scenarios lie (``toolkit/gallery/*.json``): names and files only.

The loader (:mod:`mpmd_lab.scenario`) reads gallery names through this module, below it;
:func:`mpmd_lab.gallery.load` returns one as a Scenario, above it.
"""

from __future__ import annotations

import json
from pathlib import Path


def _dir() -> Path:
    # the package's own folder (the data ships next to this file in every install:
    # the wheel, an editable install, binder); importlib.resources would import zipfile
    # and friends, a measurable share of ``mpmd-lab check``'s start-up
    return Path(__file__).resolve().parent


def names() -> list[str]:
    """Every gallery scenario's name, sorted."""
    return sorted(p.stem for p in _dir().glob("*.json"))


def has(name: str) -> bool:
    return name in names()


def path_of(name: str) -> Path:
    """The file of a gallery scenario."""
    if not has(name):
        raise KeyError(f"no gallery scenario {name!r}; try one of: {', '.join(names())}")
    return _dir() / f"{name}.json"


def summary(name: str) -> str:
    """The first sentence of a gallery scenario's description, without its full stop
    (an ellipsis, ``x_0 ... x_3``, does not end it)."""
    import re

    data = json.loads(path_of(name).read_text(encoding="utf-8"))
    first = re.split(r"(?<!\.)\.(?:\s+|$)(?!\.)", data.get("description", ""), maxsplit=1)[0]
    return first.strip()
