"""Point the README's Binder badge at your copy of the repository.

    python binder/badge.py            # the owner from `git remote get-url origin`
    python binder/badge.py OWNER      # or named

The badge in README.md links to ``https://mybinder.org/v2/gh/OWNER/REPO/HEAD?…``;
mybinder.org builds the repository it names, so ``OWNER`` must be the GitHub account
(or organisation) that hosts the copy you publish. ``make binder-badge`` runs this.
Standard library only: it runs before any environment exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(r"(https://mybinder\.org/v2/gh/)([^/\s)]+)/([^/\s)]+)(/HEAD)")
_GITHUB = re.compile(r"github\.com[:/]([^/\s]+)/([^/\s]+?)(?:\.git)?/?$")


def owner_repo(remote: str) -> tuple[str, str]:
    """``(owner, repo)`` of a GitHub remote URL (https or ssh form)."""
    m = _GITHUB.search(remote.strip())
    if not m:
        raise ValueError(f"not a GitHub remote: {remote!r}")
    return m.group(1), m.group(2)


def set_badge(text: str, owner: str, repo: str | None = None) -> str:
    """``text`` (the README) with its Binder badge pointing at ``owner``/``repo``."""
    if not BADGE.search(text):
        raise ValueError("no Binder badge (https://mybinder.org/v2/gh/OWNER/REPO/HEAD) found")
    return BADGE.sub(lambda m: f"{m.group(1)}{owner}/{repo or m.group(3)}{m.group(4)}", text, 1)


def main(argv: list[str]) -> int:
    readme = ROOT / "README.md"
    if argv:
        owner, repo = argv[0], None
    else:
        try:
            remote = subprocess.run(
                ["git", "-C", str(ROOT), "remote", "get-url", "origin"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            print("no git remote 'origin': give the owner, python binder/badge.py OWNER")
            return 2
        owner, repo = owner_repo(remote)
    readme.write_text(set_badge(readme.read_text(), owner, repo))
    print(f"README.md: the Binder badge now builds github.com/{owner}/{repo or 'mpmd-lab'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
