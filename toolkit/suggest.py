"""Did you mean …? Near names for a misspelt axis, ref, buffer, field or gallery name.

``near(word, names)`` is the closest few of ``names`` (``difflib``, case-insensitive);
``hint(word, names)`` the sentence a message ends with (``"did you mean 'dev'?"``).
``for_diagnostic(scenario, d)`` reads the name a diagnostic says is unknown (an axis
``lax.axis_index`` cannot find, a ref or buffer no one defines) and returns the hint and
the fixes that rename it at the diagnostic's path (an axis: also throughout its
program); ``mpmd_lab.fixes.offer`` keeps a fix only if the check after it is better.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, Edit, Fix, apply_edit
from mpmd_lab.fields import get_path

#: how alike two names must be (``difflib`` ratio) to be offered
CUTOFF = 0.6


def near(word: str, names: Iterable[str], n: int = 3, cutoff: float = CUTOFF) -> list[str]:
    """The names in ``names`` closest to ``word`` (best first), ``word`` itself excluded."""
    pool = [x for x in dict.fromkeys(names) if isinstance(x, str) and x and x != word]
    if not word or not pool:
        return []
    by_lower: dict[str, str] = {}
    for x in pool:
        by_lower.setdefault(x.lower(), x)
    exact = by_lower.get(word.lower())
    hits = difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=cutoff)
    out = [by_lower[h] for h in hits]
    if exact is not None and exact not in out:
        out.insert(0, exact)
    return out[:n]


def hint(word: str, names: Iterable[str]) -> str:
    """``"did you mean 'dev'?"`` (or ``'a' or 'b'``), or "" when nothing is near."""
    hits = near(word, names)
    if not hits:
        return ""
    return "did you mean " + " or ".join(repr(h) for h in hits) + "?"


# ---------------------------------------------------------------- diagnostics

_UNBOUND = re.compile(r"Found an unbound axis name: ([A-Za-z_][A-Za-z0-9_]*)")
_DEVICE_AXES = re.compile(r"Unrecognized axes in device_id: \{'([^']+)'")
_CLUSTER_AXIS = re.compile(r"Unknown cluster axis ([A-Za-z_][A-Za-z0-9_]*)")
_NAMES = re.compile(r"names (?:buffer |view )?'([^']+)'")

_PROGRAM = re.compile(r"^call\.programs\[(\d+)\]")
#: unknown-axis codes: with one axis in scope, it is the one meant
_AXIS_CODES = frozenset({"UNBOUND_AXIS", "DEVICE_ID_UNKNOWN_AXIS", "CLUSTER_REF_UNKNOWN_AXIS"})
#: unknown names where the only candidate is the one meant (an axis, a buffer)
_ONLY_CODES = _AXIS_CODES | {"XREF_UNKNOWN_BUFFER"}


def _axes(s: Any, path: str, cluster_only: bool = False) -> list[str]:
    """The axis names in scope at ``path``: its program's grid, cluster and warpgroup
    axes, and the device mesh's (every program's when the path is not in one)."""
    m = _PROGRAM.match(path)
    progs = s.call.programs
    picked = [progs[int(m.group(1))]] if m and int(m.group(1)) < len(progs) else list(progs)
    out: list[str] = []
    for p in picked:
        mesh = p.mesh
        if cluster_only:
            out += list(mesh.cluster)
            continue
        out += [*mesh.grid, *mesh.cluster]
        if mesh.threads is not None and mesh.threads.name:
            out.append(mesh.threads.name)
    if not cluster_only:
        out += list(s.device_mesh or {})
    return out


def _ref_names(s: Any, path: str) -> list[str]:
    """Names a body statement may use: parameters, tuple leaves, captures, outputs,
    scratch, and the program's views."""
    c = s.call
    out: list[str] = []
    for a in c.args:
        leaves = getattr(a, "tuple", None)
        out += [f"{a.param}[{i}]" for i in range(len(leaves))] if leaves else [a.param]
    out += [cap.name for cap in c.captures]
    out += [*c.outputs, *c.scratch]
    m = _PROGRAM.match(path)
    progs = [c.programs[int(m.group(1))]] if m and int(m.group(1)) < len(c.programs) else []
    for p in progs:
        stack = list(p.body)
        while stack:
            st = stack.pop(0)
            if getattr(st, "let", None):
                out.append(st.let)
            stack += list(getattr(st, "body", None) or [])
    return out


def unknown_name(s: Any, d: Diagnostic) -> tuple[str, list[str]] | None:
    """The unknown name a diagnostic is about, and the names that were meant."""
    text = d.jax.message if d.jax is not None else d.message
    if d.code == "UNBOUND_AXIS" and (m := _UNBOUND.search(text)):
        return m.group(1), _axes(s, d.path)
    if d.code == "DEVICE_ID_UNKNOWN_AXIS" and (m := _DEVICE_AXES.search(text)):
        return m.group(1), list(s.device_mesh or {})
    if d.code == "CLUSTER_REF_UNKNOWN_AXIS" and (m := _CLUSTER_AXIS.search(text)):
        return m.group(1), _axes(s, d.path, cluster_only=True)
    if d.code == "XREF_UNKNOWN_BUFFER" and (m := _NAMES.search(d.message)):
        return m.group(1), list(s.buffers)
    if d.code == "XREF_UNKNOWN_NAME" and (m := _NAMES.search(d.message)):
        return m.group(1), _ref_names(s, d.path)
    return None


def renamed(node: Any, old: str, new: str) -> Any:
    """``node`` (JSON) with the name ``old`` made ``new``: mapping keys, whole strings,
    and identifiers inside index expressions (``"(devs + 1) % 4"``)."""
    word = re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)")
    if isinstance(node, str):
        return new if node == old else word.sub(new, node)
    if isinstance(node, list):
        return [renamed(x, old, new) for x in node]
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "op":  # an op's kind is never a name
                out[k] = v
                continue
            out[new if k == old else k] = renamed(v, old, new)
        return out
    return copy.deepcopy(node)


def for_diagnostic(s: Any, d: Diagnostic) -> tuple[str, list[Fix]] | None:
    """``(hint, fixes)`` for a diagnostic about an unknown name with a near one, or None.

    The fixes rename the name in the value at the diagnostic's path and, for an axis
    (named wherever its index is taken, maybe further up than the statement), throughout
    its program; none when the name is not there to rename. ``fixes.offer`` keeps those
    that check better, the smaller first when both do."""
    found = unknown_name(s, d)
    if found is None:
        return None
    word, names = found
    hits = near(word, names)
    only = [x for x in dict.fromkeys(names) if x and x != word]
    if not hits and len(only) == 1 and d.code in _ONLY_CODES:
        hits = only  # (the only axis or buffer there is: what else could it be)
    if not hits:
        return None
    text = hint(word, names) or f"the only one here is {hits[0]!r}"
    data = s.to_dict()
    out: list[Fix] = []
    try:
        node = get_path(data, d.path) if d.path else None
    except (KeyError, IndexError, TypeError, ValueError):
        node = None
    if node is not None and (new := renamed(node, word, hits[0])) != node:
        out.append(
            Fix(
                description=f"use {hits[0]!r} (there is no {word!r})",
                edits=[Edit(op="replace", path=d.path, value=new)],
            )
        )
    m = _PROGRAM.match(d.path)
    if m is not None and d.code in _AXIS_CODES:
        where = m.group(0)
        prog = get_path(data, where)
        local = copy.deepcopy(data)
        for fix in out:
            apply_edit(local, fix.edits[0])
        # (only when the name is also elsewhere in the program than at the path)
        if (new := renamed(prog, word, hits[0])) != get_path(local, where):
            out.append(
                Fix(
                    description=f"use {hits[0]!r} (there is no {word!r}) throughout "
                    f"program {m.group(1)}",
                    edits=[Edit(op="replace", path=where, value=new)],
                )
            )
    return text, out


__all__ = ["for_diagnostic", "hint", "near", "renamed", "unknown_name"]
