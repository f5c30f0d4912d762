"""The ``mpmd-lab`` command line (its contract is in SCENARIO.md).

Each subcommand loads a scenario (a file or a gallery name), calls the library and
prints; exit 0 good, 1 problems found or JAX error reported, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario, save_scenario

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2
MAX_PROBLEMS_SHOWN = 50


class UsageError(Exception):
    """Bad command-line input: one line, exit 2."""


def _load(source: str) -> Scenario:
    return load_scenario(source)


def _write_atomic(path: str, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` to a temp file beside ``path`` (same suffix), then rename it over
    ``path``: a failure leaves the old file whole and no temp file behind."""
    import tempfile

    target = Path(path)
    fd, tmp = tempfile.mkstemp(
        dir=target.parent or ".", prefix=f".{target.name}.", suffix=target.suffix or ".tmp"
    )
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_text(path: str, text: str) -> None:
    """Write a text file atomically."""
    _write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


# ---------------------------------------------------------------- commands


def cmd_gallery(args: argparse.Namespace) -> int:
    from mpmd_lab import gallery

    names = gallery.names()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {gallery.summary(name)}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    scenario = _load(args.file)  # before importing JAX: bad input fails fast
    from mpmd_lab import validate

    diags = validate.check(scenario)
    if args.deep:
        from mpmd_lab import deep

        diags = deep.deep_check(scenario, timeout=args.timeout, static=diags)
    if args.fix:
        from mpmd_lab import fixes

        fixed, applied = fixes.apply_all(scenario, diags)
        if args.output:
            save_scenario(fixed, args.output)
        else:
            print(fixed.to_json())
        for fix in applied:
            print(f"fixed: {fix.description}", file=sys.stderr)
        diags = validate.check(fixed)
    valid = not any(d.is_error for d in diags)
    if args.json:
        print(json.dumps({"valid": valid, "diagnostics": [d.to_json() for d in diags]}, indent=2))
    elif not args.fix or args.output:
        from mpmd_lab.report import format_diagnostics

        print(format_diagnostics(scenario.name, diags))
    return EXIT_OK if valid else EXIT_PROBLEMS


def cmd_run(args: argparse.Namespace) -> int:
    scenario = _load(args.file)  # before importing JAX: bad input fails fast
    from mpmd_lab import runtime

    result = runtime.run(scenario, backend=args.backend, timeout=args.timeout)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(result.summary())
    return EXIT_OK if result.status == "ok" else EXIT_PROBLEMS


def cmd_graph(args: argparse.Namespace) -> int:
    scenario = _load(args.file)
    if args.text:
        from mpmd_lab import graph

        print(graph.to_text(graph.build_graph(scenario)))
        return EXIT_OK
    if not args.output:
        raise UsageError("graph needs -o OUT.png or OUT.svg (or --text)")
    if Path(args.output).suffix.lower() not in {".png", ".svg", ".pdf"}:
        raise UsageError(f"{args.output}: the picture is written as .png, .svg or .pdf")
    from mpmd_lab import draw as plot

    _write_atomic(args.output, lambda tmp: plot.save_aliasing(scenario, tmp))
    print(args.output)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from mpmd_lab.codegen import CodegenError, generate

    scenario = _load(args.file)
    try:
        source = generate(scenario)
    except CodegenError as e:
        print(f"{args.file}: {e.path or 'call'}: cannot export: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    if args.output:
        _write_text(args.output, source)
        print(args.output)
    else:
        sys.stdout.write(source)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from mpmd_lab import knowledge

    card = knowledge.lookup(args.query)
    if card is None:
        print(f"no code or known JAX message matches {args.query!r}", file=sys.stderr)
        print("codes: " + ", ".join(knowledge.codes()), file=sys.stderr)
        return EXIT_PROBLEMS
    print(card.to_json() if args.json else card.render())
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Read a JAX function's kernel call into a scenario (in a child process)."""
    from mpmd_lab.importer import child

    if args.output and Path(args.output).suffix.lower() != ".json":
        raise UsageError(f"{args.output}: the scenario is written as .json")
    try:
        imp = child.run(args.spec, devices=args.devices, timeout=args.timeout)
    except child.SpecError as e:
        raise UsageError(str(e)) from None
    if imp.scenario is not None and args.output:
        save_scenario(imp.scenario, args.output)
    if args.json:
        print(json.dumps(imp.to_json(), indent=2))
    else:
        print(imp.summary())
        if imp.scenario is not None and args.output:
            print(f"wrote {args.output}")
        elif imp.scenario is not None:
            print(imp.scenario.to_json())
    good = imp.scenario is not None and not imp.unsupported
    good = good and not any(d.is_error for d in imp.diagnostics)
    return EXIT_OK if good else EXIT_PROBLEMS


# ---------------------------------------------------------------- parser


def _seconds(text: str) -> float:
    """A ``--timeout``: a positive, finite number of seconds (``inf`` or ``nan`` would hang)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= 86_400):
        raise argparse.ArgumentTypeError(f"{text!r}: give between 0 and 86400 seconds")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mpmd-lab",
        description="Build, check, run, draw and export Pallas mpmd_map kernel calls.",
        epilog="FILE is a scenario .json file or a gallery name (see `mpmd-lab gallery`).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("gallery", help="list the built-in scenarios")
    s.set_defaults(func=cmd_gallery)

    s = sub.add_parser("check", help="validate a scenario (exit 0 valid, 1 problems, 2 bad input)")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--json", action="store_true", help="print the diagnostics as JSON")
    s.add_argument("--deep", action="store_true", help="also trace and lower for the GPU with JAX")
    s.add_argument("--fix", action="store_true", help="apply every known fix")
    s.add_argument(
        "-o", "--output", metavar="FIXED.json", help="with --fix: write the fixed scenario"
    )
    s.add_argument(
        "--timeout", type=_seconds, default=120.0, help="seconds for --deep (default 120)"
    )
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("run", help="run the call on a GPU or a CPU interpreter")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--backend", choices=["auto", "gpu", "interpret", "simulate"], default="auto")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--timeout", type=_seconds, default=120.0, help="seconds before a run is killed")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("graph", help="draw the aliasing graph")
    s.add_argument("file", metavar="FILE")
    s.add_argument("-o", "--output", metavar="OUT.png|OUT.svg")
    s.add_argument("--text", action="store_true", help="print the graph as text")
    s.set_defaults(func=cmd_graph)

    s = sub.add_parser("export", help="write the call as a plain JAX script")
    s.add_argument("file", metavar="FILE")
    s.add_argument("-o", "--output", metavar="OUT.py")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser(
        "import",
        help="read a JAX function's kernel call into a scenario (MODULE.py:FUNCTION)",
        description="FUNCTION() returns (fn, args); fn(*args) is traced (never run) in a "
        "child process with the device count set before JAX starts. Exit 0: a faithful "
        "scenario JAX accepts; 1: unsupported constructs or errors (reported, each at its "
        "source line); 2: no such module or function.",
    )
    s.add_argument("spec", metavar="MODULE.py:FUNCTION")
    s.add_argument("-o", "--output", metavar="SCENARIO.json", help="write the scenario here")
    s.add_argument(
        "--devices",
        type=int,
        default=None,
        help="CPU devices for JAX (default: the module's DEVICES, else 8)",
    )
    s.add_argument("--json", action="store_true", help="print the whole import as JSON")
    s.add_argument("--timeout", type=_seconds, default=120.0, help="seconds before it is stopped")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("explain", help="explain a diagnostic code or a raw JAX message")
    s.add_argument("query", metavar="CODE-or-MESSAGE")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_explain)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mpmd-lab`` command."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as e:
        for path, msg in e.problems[:MAX_PROBLEMS_SHOWN]:
            print(f"{e.source}: {path or '<top>'}: {msg}", file=sys.stderr)
        if len(e.problems) > MAX_PROBLEMS_SHOWN:
            more = len(e.problems) - MAX_PROBLEMS_SHOWN
            print(f"{e.source}: ... and {more} more problem(s)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UsageError as e:
        print(f"mpmd-lab {args.command}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader went away (`mpmd-lab explain X | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        print(f"mpmd-lab {args.command}: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
