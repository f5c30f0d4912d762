"""The golden dump: what the checker says about every scenario we ship or test.

For each scenario of the gallery, ``tests/scenarios`` and the knowledge base's examples,
the dump holds every diagnostic (code, severity, stage, path, message, JAX's error, the
explanation, every verified fix and what it leaves) and the resolved form (every
argument, binding and statement: the refs it names, its transform steps with the ref
before and after each, its scope and bound names). A refactoring of the core must leave
it identical, or change it only where the commit says why.

``bench/golden.txt`` keeps one line per scenario, ``NAME HASH`` (the hash of its whole
dump), and under it the diagnostics in short (``severity code path``, the number of
fixes kept), so a change shows where it lands. ``tests/test_golden.py`` recomputes it.

    python -m bench.golden            # compare with bench/golden.txt (exit 1 on a change)
    python -m bench.golden --write    # regenerate bench/golden.txt on purpose
    python -m bench.golden --show NAME  # print one scenario's whole dump
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden.txt"


def sources() -> Iterator[tuple[str, Path]]:
    """``(name, file)`` of every scenario the dump covers, in a fixed order."""
    from mpmd_lab import gallery

    for name in gallery.names():
        yield f"gallery/{name}", gallery.path_of(name)
    for sub in ("tests/scenarios", "toolkit/knowledge/examples"):
        for p in sorted((ROOT / sub).rglob("*.json")):
            yield str(p.relative_to(ROOT)), p


def _binding(b: Any) -> str:
    from mpmd_lab.fields import format_path

    if b is None:
        return "None"
    stack = [(format_path(path), t.op) for path, t in b.stack]
    parent = None if b.parent is None else b.parent.name
    return (
        f"Binding({b.name!r}, kind={b.kind}, path={format_path(b.path)}, origin={b.origin}, "
        f"stmt={b.stmt}, "
        f"parent={parent!r}, stack={stack}, info={b.info!r})"
    )


def plan_lines(r: Any) -> list[str]:
    """What the dump shows of a plan (``plan.compile``'s): every argument, binding and
    statement, a line each."""
    from mpmd_lab.fields import format_path

    lines: list[str] = []
    for arg in r.args:  # (the paths as text, as the dump has always shown them)
        lines.append(
            f"arg ArgInfo(index={arg.index!r}, path={format_path(arg.path)!r}, "
            f"leaves={[(x.buffer, x.info) for x in arg.leaves]!r}, steps={arg.steps!r})"
        )
    for name, b in r.params.items():
        lines.append(f"param {name} {_binding(b)}")
    for name, b in r.captures.items():
        lines.append(f"capture {name} {_binding(b)}")
    for key, err in sorted(r.array_errors.items()):
        lines.append(f"array {key} {err!r}")
    for p in r.programs:
        lines.append(f"program {p.index} {format_path(p.path)} trace_failed={p.trace_failed}")
        for st in p.stmts:
            refs = {f: _binding(b) for f, b in st.refs.items()}
            lines.append(
                f"  stmt {st.index} {format_path(st.path)} {st.node!r} ok={st.ok} refs={refs} "
                f"steps={st.steps!r} defines={_binding(st.defines)} "
                f"scope={[format_path(x.path) for x in st.scope]} bound={sorted(st.bound)} "
                f"unbound={st.unbound}"
            )
    return lines


def dump(path: Path) -> tuple[list[str], list[str]]:
    """``(whole dump, short lines)`` of one scenario file."""
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.validate import analyze

    try:
        s = load_scenario(path)
    except Exception as e:  # a file that does not load: its error is the dump
        text = f"load: {type(e).__name__}: {e}"
        return [text], [text.splitlines()[0][:160]]
    a = analyze(s)
    lines: list[str] = []
    short: list[str] = []
    for d in a.diagnostics:
        lines.append("diag " + d.model_dump_json())
        short.append(f"  {d.severity} {d.code} {d.path} fixes={len(d.fixes)}")
    lines += plan_lines(a.plan)
    return lines, short


def compute() -> dict[str, tuple[str, list[str], list[str]]]:
    """name -> (hash, whole dump, short lines), for every scenario."""
    out = {}
    for name, path in sources():
        lines, short = dump(path)
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
        out[name] = (digest, lines, short)
    return out


def render(got: dict[str, tuple[str, list[str], list[str]]]) -> str:
    text = []
    for name, (digest, _, short) in got.items():
        text.append(f"{name} {digest}")
        text.extend(short)
    return "\n".join(text) + "\n"


def read(text: str) -> dict[str, str]:
    """name -> hash, from a golden file's text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith(" "):
            name, digest = line.rsplit(" ", 1)
            out[name] = digest
    return out


def differences(got: dict[str, tuple[str, list[str], list[str]]], committed: str) -> list[str]:
    """What differs from the committed golden file (empty: identical)."""
    want = read(committed)
    out = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            out.append(f"{name}: gone")
        elif name not in want:
            out.append(f"{name}: new")
        elif want[name] != got[name][0]:
            out.append(f"{name}: dump changed ({want[name]} -> {got[name][0]})")
    if not out and render(got) != committed:
        out.append("the short lines differ (same hashes): regenerate")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.golden", description=__doc__)
    ap.add_argument("--write", action="store_true", help="regenerate bench/golden.txt")
    ap.add_argument("--show", metavar="NAME", help="print one scenario's whole dump")
    args = ap.parse_args(argv)
    if args.show:
        for name, path in sources():
            if name == args.show or Path(name).stem == args.show:
                print("\n".join(dump(path)[0]))
                return 0
        print(f"no scenario {args.show!r}", file=sys.stderr)
        return 2
    got = compute()
    if args.write:
        GOLDEN.write_text(render(got), encoding="utf-8")
        print(f"wrote {GOLDEN} ({len(got)} scenarios)")
        return 0
    diff = differences(got, GOLDEN.read_text(encoding="utf-8"))
    print("\n".join(diff) if diff else f"identical ({len(got)} scenarios)")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
