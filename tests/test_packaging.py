"""The wheel holds every package and data file of the source tree (Binder installs it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_dirs() -> dict[str, Path]:
    out = {}
    for name, folder in CONFIG["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            out[".".join([name, *rel.parts]) if rel.parts else name] = init.parent
    return out


def test_every_package_of_the_tree_is_listed():
    listed = set(CONFIG["packages"])
    found = set(_package_dirs())
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed <= found, f"listed but absent: {sorted(listed - found)}"


def test_every_data_file_is_matched_by_package_data():
    from fnmatch import fnmatch

    data = CONFIG["package-data"]
    for name, folder in _package_dirs().items():
        for f in folder.iterdir():
            if f.is_dir() and not (f / "__init__.py").exists() and f.name != "__pycache__":
                for inner in f.rglob("*"):
                    if inner.is_file():
                        rel = str(inner.relative_to(folder))
                        pats = data.get(name, [])
                        assert any(fnmatch(rel, p) for p in pats), f"{name}: {rel} not shipped"
            elif f.is_file() and f.suffix not in (".py", ".pyc"):
                assert any(fnmatch(f.name, p) for p in data.get(name, [])), f"{name}: {f.name}"
