"""The layering holds (docs/ARCHITECTURE.md, "Layers"): the library's import graph has no
cycle, nothing under toolkit/ imports the widgets, and no module imports from a layer
above its own.

The graph is read with ``ast`` from the sources, every ``import`` counted wherever it
stands (a function-level import is an edge like any other); only imports under ``if
TYPE_CHECKING:`` are left out (they never run). ``from pkg import name`` is an edge to
``pkg.name`` when that is a module, else to ``pkg`` (its ``__init__``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> import name
PACKAGES = {"toolkit": "mpmd_lab", "widgets": "mpmd_lab.widgets"}

#: The layers, bottom first (docs/ARCHITECTURE.md): a module imports only from its own
#: layer and those below. Names are under ``mpmd_lab.``; ``x`` is the module or package
#: ``x`` and everything in it; the longest name that fits places a module. A new module
#: is placed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "_multihost_child",
            "_probe_child",
            "accesslog",
            "callsupport",
            "catalogue",
            "diagnostics",
            "dtypes",
            "engine.clocks",
            "engine.explore",
            "engine.shadow",
            "engine.sync",
            "expr",
            "fields",
            "files",
            "gallery.index",
            "importer.frames",
            "knowledge",
            "ladder",
            "layout_rules",
            "memory",
            "palette",
            "record",
            "report",
            "safetext",
            "scenario_json",
            "sharding",
            "shapes",
            "smem_transfer",
            "suggest",
            "timeline",
            "validate.witness",
            "workers",
        ),
    ),
    ("language", ("gallery", "ops", "scenario")),
    ("plan", ("engine", "plan", "validate.arrays")),
    (
        "rules",
        (
            "validate.analysis",
            "validate.build",
            "validate.context",
            "validate.devices",
            "validate.fixes_for",
            "validate.imported",
            "validate.interp",
            "validate.lower",
            "validate.runtime",
            "validate.stepfix",
            "validate.symmetry",
            "validate.sync",
            "validate.trace",
        ),
    ),
    ("fixes", ("fixes", "recheck", "repairs")),
    ("check", ("validate",)),
    (
        "views",
        (
            "codegen",
            "deep",
            "draw",
            "engine.child",
            "exercise_data",
            "graph",
            "importer",
            "knowledge.jaxrun",
            "knowledge.verify",
            "layout",
            "multihost",
            "probe",
            "puzzle_data",
            "runtime",
            "scene",
            "simulator",
        ),
    ),
    ("front ends", ("mpmd_lab", "cli", "exercises", "gpucheck", "puzzles", "session")),
    ("ui", ("widgets",)),
)


def _modules() -> dict[str, tuple[Path, bool]]:
    """import name -> (file, is a package's __init__)."""
    out = {}
    for folder, name in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [name, *path.relative_to(ROOT / folder).with_suffix("").parts]
            is_init = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    return skip


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import} (a copy of the
    graph read once per test process: a test may change it)."""
    return {module: dict(edges) for module, edges in _read_graph().items()}


@functools.cache
def _read_graph() -> dict[str, dict[str, int]]:
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for mod, (path, is_init) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _type_checking_only(tree)
        package = mod if is_init else mod.rpartition(".")[0]
        edges = graph.setdefault(mod, {})
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
                targets = subs + ([source] if len(subs) < len(node.names) else [])
            else:
                continue
            for target in targets:
                found = known(target)
                if found is not None and found != mod:
                    edges.setdefault(found, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(graph: dict[str, dict[str, int]], comp: list[str]) -> str:
    inside = set(comp)
    edges = [
        f"  {a} -> {b} (line {line})"
        for a in comp
        for b, line in sorted(graph[a].items())
        if b in inside
    ]
    return f"cycle of {len(comp)} modules:\n" + "\n".join(edges)


def layer_of(module: str) -> tuple[int, str] | None:
    """(index, name) of ``module``'s layer, or None when LAYERS does not place it."""
    best: tuple[int, int, str] | None = None
    for i, (name, members) in enumerate(LAYERS):
        for m in members:
            full = m if m == "mpmd_lab" else f"mpmd_lab.{m}"
            fits = module == full or (m != "mpmd_lab" and module.startswith(full + "."))
            if fits and (best is None or len(full) > best[0]):
                best = (len(full), i, name)
    return None if best is None else (best[1], best[2])


def test_the_graph_is_read() -> None:
    graph = import_graph()
    # known edges, function-level ones included: the reader sees what the code imports
    assert "mpmd_lab.scenario" in graph["mpmd_lab.validate"]
    assert "mpmd_lab.fixes" in graph["mpmd_lab.validate"]  # inside analyze()
    assert "mpmd_lab.widgets.lab" in graph["mpmd_lab.widgets.notebook"]


def test_a_back_edge_is_found() -> None:
    graph = import_graph()
    graph["mpmd_lab.scenario"] = {**graph["mpmd_lab.scenario"], "mpmd_lab.validate": 1}
    found = cycles(graph)
    assert any({"mpmd_lab.scenario", "mpmd_lab.validate"} <= set(c) for c in found)


def test_no_import_cycle() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "\n".join(_describe(graph, c) for c in found)


def test_the_library_does_not_import_the_widgets() -> None:
    graph = import_graph()
    back = [
        f"{a} -> {b} (line {line})"
        for a, edges in graph.items()
        if not a.startswith("mpmd_lab.widgets")
        for b, line in edges.items()
        if b.startswith("mpmd_lab.widgets")
    ]
    assert not back, "the library imports the UI:\n" + "\n".join(back)


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in import_graph() if layer_of(m) is None)
    assert not unplaced, f"place these in LAYERS (and docs/ARCHITECTURE.md): {unplaced}"


def test_no_module_imports_from_a_layer_above() -> None:
    up = []
    for a, edges in import_graph().items():
        la = layer_of(a)
        for b, line in sorted(edges.items()):
            lb = layer_of(b)
            if la is not None and lb is not None and lb[0] > la[0]:
                up.append(f"{a} ({la[1]}) -> {b} ({lb[1]}), line {line}")
    assert not up, "imports from a layer above:\n" + "\n".join(up)
