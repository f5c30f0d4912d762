"""Built-in scenarios shipped as package data (``toolkit/gallery/*.json``)."""

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
    """The first sentence of a gallery scenario's description."""
    data = json.loads(path_of(name).read_text(encoding="utf-8"))
    return data.get("description", "").split(". ")[0].strip()


def load(name: str):  # -> Scenario (import kept lazy to avoid a cycle)
    """A gallery scenario as a Scenario."""
    from mpmd_lab.scenario import load_scenario

    return load_scenario(path_of(name))
