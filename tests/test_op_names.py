"""No op-name string switch outside ``toolkit/ops/`` (issue 27): an op's meaning is asked
of its class (a ClassVar fact or hook of ``ops/base.py``, or ``isinstance``), never read
off its name.

The sources of ``toolkit/`` and ``widgets/`` are read with ``ast``; a comparison (``==``,
``!=``, ``in``, ``not in``) of an op's name (``x.op``, ``x.kind``, ``getattr(x, "op")``,
a local ``op``/``kind``, JSON's ``x["op"]``, or a list of those) against a registered op
name (a string, or a module-level tuple/set/dict of them), and a lookup of an op's name
in a dict literal keyed by op names, fail the test naming the line. Writing JSON
(``{"op": "at", ...}``) is not a switch and is not looked at.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mpmd_lab.ops import BY_OP

ROOT = Path(__file__).resolve().parents[1]
OP_NAMES = frozenset(BY_OP)

#: ``(file, attribute)`` whose ``.op``/``.kind`` is not a scenario op's, -> the words it
#: may be compared with (a registered op name among them is a coincidence of words)
NOT_AN_OP = {
    # an Edit's op: replace, remove, add
    ("toolkit/diagnostics.py", "op"): frozenset({"replace", "remove", "add"}),
    # a JAX transform record's kind (``_T``): the LOWERS_AS vocabulary and the undo steps
    ("toolkit/layout_rules.py", "kind"): frozenset(
        {"index", "reshape", "transpose", "bitcast", "tiling", "swizzle", "other", "int"}
        | {"untile", "unswizzle"}
    ),
}


def _name_attr(n: ast.AST) -> str | None:
    """``"op"``/``"kind"`` when ``n`` reads an op's name, else None."""
    if isinstance(n, ast.Attribute) and n.attr in ("op", "kind"):
        return n.attr
    if isinstance(n, ast.Name) and n.id in ("op", "kind"):  # a name read into a local
        return n.id
    if (
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "getattr"
        and len(n.args) >= 2
        and isinstance(n.args[1], ast.Constant)
        and n.args[1].value in ("op", "kind")
    ):
        return str(n.args[1].value)
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
        return "op" if n.slice.value == "op" else None
    if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _name_attr(n.elt)
    return None


def _strings(n: ast.AST, tables: dict[str, set[str]]) -> set[str]:
    """The string constants in ``n``, a module-level table's named by it included."""
    out = {c.value for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    for c in ast.walk(n):
        if isinstance(c, ast.Name) and c.id in tables:
            out |= tables[c.id]
    return out


def switches(source: str, path: str = "<src>") -> list[str]:
    """``path:line: what`` for every op-name switch in ``source``."""
    tree = ast.parse(source)
    tables = {
        t.id: _strings(node.value, {})
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            attrs = {a for a in map(_name_attr, sides) if a}
            if not attrs:
                continue
            words = set().union(*(_strings(s, tables) for s in sides if not _name_attr(s)))
            allowed = frozenset().union(*(NOT_AN_OP.get((path, a), frozenset()) for a in attrs))
            hit = (words & OP_NAMES) - allowed
            if hit:
                found.append(f"{path}:{n.lineno}: compares an op's name with {sorted(hit)}")
        elif isinstance(n, ast.Subscript) and _name_attr(n.slice):
            keys = n.value.keys if isinstance(n.value, ast.Dict) else []
            if isinstance(n.value, ast.Name) and n.value.id in tables:
                keys = [ast.Constant(k) for k in tables[n.value.id]]
            hit = {k.value for k in keys if isinstance(k, ast.Constant)} & OP_NAMES
            if hit:
                found.append(f"{path}:{n.lineno}: looks an op's name up among {sorted(hit)}")
    return found


def test_no_op_name_switch_outside_ops() -> None:
    found = []
    for folder in ("toolkit", "widgets"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith("toolkit/ops/"):
                continue
            found += switches(p.read_text(), rel)
    assert not found, "ask the op class (ops/base.py), not its name:\n" + "\n".join(found)


def test_the_finder_finds_each_form() -> None:
    src = """
ELSEWHERE = ("remote_ref", "cluster_ref")
def f(t, st, step, v):
    if t.op == "remote_ref": pass
    if getattr(st, "op", None) != "fill": pass
    if st.kind in ("copy", "loop"): pass
    if [x.op for x in t] != ["at"]: pass
    if step["op"] in ELSEWHERE: pass
    tag = {"multicast_ref": "mc"}[v.op]
    if v.op == "neg" or t.op == "+": pass
    op = t.op
    if op == "remote_ref" and v: pass
    out = {"op": "at", "index": [0]}
"""
    lines = sorted((s.split(":")[1] for s in switches(src)), key=int)
    assert lines == ["4", "5", "6", "7", "8", "9", "12"]


def test_an_edit_op_is_not_a_scenario_op() -> None:
    src = 'def apply(edit):\n    if edit.op == "add": pass\n'
    assert switches(src, "toolkit/diagnostics.py") == []
    assert len(switches(src, "toolkit/other.py")) == 1
