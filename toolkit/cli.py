"""The ``mpmd-lab`` command line (its contract is in SCENARIO.md).

Each subcommand loads a scenario (a file or a gallery name), calls the library and
prints; exit 0 good, 1 problems found or JAX error reported, 2 unusable input.

Start-up is part of the job (``check`` runs in pre-commit hooks and CI): each command
imports only what it needs, inside its function, and the process skips pydantic's
plugin discovery, a scan of every installed package's metadata (set
``PYDANTIC_DISABLE_PLUGINS`` yourself to choose otherwise). The console script's own
process also loads numpy with one BLAS thread for ``check`` (set
``OPENBLAS_NUM_THREADS`` to choose otherwise) and freezes what its imports built, so
the cyclic collector never walks it. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpmd_lab.safetext import clip, safe_streams

# before pydantic builds the first model: ~30 ms of entry-point scanning per process
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _no_plugin_loader() -> None:
    """With every pydantic plugin disabled, its loader finds none: give pydantic a loader
    that says so, instead of one whose import alone (``importlib.metadata``: email,
    zipfile, csv ...) costs a tenth of ``check``'s start-up."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    import types

    loader = types.ModuleType(name, "pydantic's plugin loader when every plugin is disabled")
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[name] = loader


_no_plugin_loader()

if TYPE_CHECKING:
    from mpmd_lab.scenario import Scenario

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2
MAX_PROBLEMS_SHOWN = 50
#: Characters of user input (a path, a query) quoted in a message.
QUOTE = 200


class UsageError(Exception):
    """Bad command-line input: one line, exit 2."""


#: Whether this process is the console script's own (``entry``, not ``main`` called in a
#: program): then it freezes what its imports build (``_startup_imports``) and loads
#: numpy with one BLAS thread (``_one_blas_thread``).
_OWN_PROCESS = False


@contextlib.contextmanager
def _startup_imports() -> Iterator[None]:
    """Around the imports of the model and the check, in the console script's process:
    they build ~60,000 objects that live as long as the process (modules, pydantic's
    classes), over which the cyclic collector made ~75 passes that freed nothing (~35 ms
    CPU of ``check``). The collector is off while they run, and what they built is frozen
    (never scanned again; later passes cost what the command allocates). Only where
    something was imported: a command's own garbage is never frozen."""
    if not _OWN_PROCESS:
        yield
        return
    modules = len(sys.modules)
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > modules:
            gc.freeze()
        if collecting:
            gc.enable()


def _load(source: str) -> Scenario:
    with _startup_imports():
        from mpmd_lab.scenario import load_scenario

    return load_scenario(source)


def _inputs(source: str) -> list[str]:
    """The files a command reads ``source`` from (a path, or a gallery scenario's file):
    an ``-o`` that names one of them is refused."""
    from mpmd_lab import gallery

    paths = [source]
    if gallery.has(source):
        paths.append(str(gallery.path_of(source)))
    return paths


def _say(text: str) -> None:
    """A note about what was written (stderr: stdout may be JSON or a scenario)."""
    print(text, file=sys.stderr)


# ---------------------------------------------------------------- commands


def cmd_gallery(args: argparse.Namespace) -> int:
    from mpmd_lab import gallery

    names = gallery.names()
    if args.name is not None:
        return _gallery_one(args, names)
    if args.output:
        raise UsageError("-o needs a scenario's NAME: mpmd-lab gallery NAME -o FILE")
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {gallery.summary(name)}")
    return EXIT_OK


def _gallery_one(args: argparse.Namespace, names: list[str]) -> int:
    """``gallery NAME [-o FILE]``: a built-in scenario as a file to start from."""
    import difflib

    from mpmd_lab import gallery

    if args.name not in names:
        near = difflib.get_close_matches(args.name, names, n=3)
        hint = (
            f"; did you mean {' or '.join(near)}?" if near else f"; the names: {', '.join(names)}"
        )
        raise UsageError(f"no gallery scenario {clip(args.name, QUOTE)!r}{hint}")
    from mpmd_lab.scenario import save_scenario

    scenario = gallery.load(args.name)
    if not args.output:
        print(scenario.to_json())
        return EXIT_OK
    if os.path.lexists(args.output) and not args.force:
        raise UsageError(f"{clip(args.output, QUOTE)} exists: pass --force to replace it")
    try:  # (exclusive: another process may make the file meanwhile)
        written = save_scenario(
            scenario, args.output, inputs=_inputs(args.name), exclusive=not args.force
        )
    except FileExistsError:
        raise UsageError(f"{clip(args.output, QUOTE)} exists: pass --force to replace it") from None
    _say(f"wrote {written}: gallery scenario {args.name}")  # a real path: bounded
    return EXIT_OK


def _check_sources(items: list[str]) -> list[str]:
    """FILE arguments of ``check``: files and gallery names as given; a folder stands
    for every ``*.json`` entry under it that is not a folder (sorted: a FIFO, a socket
    or a dangling link among them fails to load, said like any bad file, never skipped),
    or, holding none, for itself."""
    out: list[str] = []
    for item in items:
        p = Path(item)
        found = sorted(str(f) for f in p.rglob("*.json") if not f.is_dir()) if p.is_dir() else []
        out += found or [item]  # a folder without scenarios fails to load like any file
    return out


def cmd_check(args: argparse.Namespace) -> int:
    sources = _check_sources(args.file)
    if len(sources) == 1:
        return _check_one(args, sources[0])
    if args.fix or args.output:
        raise UsageError("--fix and -o take one FILE")
    return _check_many(args, sources)


def _one_blas_thread() -> None:
    """In the console script's process, load numpy with one OpenBLAS thread for the
    check: its race check uses numpy for index arithmetic, never a matrix product, and
    OpenBLAS's worker threads cost ~100 ms CPU to start (more than the rest of the check
    after the model). Not for ``main`` called in a program (its numpy is its own), and
    only this process: the variable is put back once numpy is loaded (OpenBLAS reads it
    then), so the processes ``--deep`` starts see the environment as given; a value
    set there wins."""
    if not _OWN_PROCESS or "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def _check_one(args: argparse.Namespace, source: str) -> int:
    scenario = _load(source)  # before importing JAX: bad input fails fast
    with _startup_imports():
        _one_blas_thread()
        from mpmd_lab import validate

    diags = validate.check(scenario)
    if args.deep:
        from mpmd_lab import deep

        diags = deep.deep_check(scenario, timeout=args.timeout, static=diags)
    if args.fix:
        from mpmd_lab import fixes

        fixed, applied = fixes.apply_all(scenario, diags)
        if args.output and not applied:
            _say(f"no fix applies: nothing written to {clip(args.output, QUOTE)}")
        elif args.output:
            from mpmd_lab.scenario import save_scenario

            written = save_scenario(fixed, args.output, inputs=_inputs(source))
            n = len(applied)
            _say(f"wrote {written}: {n} fix{'es' if n != 1 else ''} applied")
        else:
            print(fixed.to_json())
            if not applied:
                _say("no fix applies: the scenario above is unchanged")
        for fix in applied:
            _say(f"fixed: {fix.description}")
        if fixed.name != scenario.name:
            _say(f"renamed {scenario.name!r} -> {fixed.name!r} (its description said broken)")
        diags = validate.check(fixed)
        scenario = fixed  # the verdict below is the fixed scenario's: say its name
    valid = not any(d.is_error for d in diags)
    if args.json:
        import json

        from mpmd_lab.diagnostics import verdict

        out = {
            "valid": valid,
            "verdict": verdict(diags),
            "diagnostics": [d.to_json() for d in diags],
        }
        print(json.dumps(out, indent=2))
    elif not args.fix or args.output:
        from mpmd_lab.report import format_diagnostics

        print(format_diagnostics(scenario.name, diags))
    return EXIT_OK if valid else EXIT_PROBLEMS


def cmd_fix(args: argparse.Namespace) -> int:
    """Apply the best fix of the first error that has one (``--all``: and again, checking
    after each, until valid or no fix is left); print each step: the error, what the fix
    changed, what it left. ``-o`` writes the result. Exit 0 valid, 1 errors left."""
    scenario = _load(args.file)
    with _startup_imports():
        _one_blas_thread()
        from mpmd_lab import fixes

    run = fixes.fix_all(scenario, max_steps=fixes.MAX_STEPS if args.all else 1)
    written = None
    if args.output and run.steps:
        from mpmd_lab.scenario import save_scenario

        written = save_scenario(run.scenario, args.output, inputs=_inputs(args.file))
    if args.json:
        import json

        steps = [
            {"code": st.code, "path": st.path, "fix": st.fix.model_dump(), "left": st.left}
            for st in run.steps
        ]
        doc = {
            "valid": run.valid,
            "stopped": run.stopped,
            "steps": steps,
            "written": None if written is None else str(written),
            "scenario": run.scenario.to_dict(),
        }
        print(json.dumps(doc, indent=2))
        return EXIT_OK if run.valid else EXIT_PROBLEMS
    for k, st in enumerate(run.steps, 1):
        print(f"{k}. {st.describe()}")
        if not st.as_said:
            print(f"   (it said it leaves {', '.join(st.fix.after or []) or 'no error'})")
    print(f"{scenario.name}: {run.stopped}")
    if run.scenario.name != scenario.name:
        print(f"renamed {scenario.name!r} -> {run.scenario.name!r} (its description said broken)")
    if written is not None:
        _say(f"wrote {written}")
    elif args.output:
        _say(f"no fix applies: nothing written to {clip(args.output, QUOTE)}")
    elif run.steps:
        _say("nothing written: -o FIXED.json writes the fixed scenario")
    return EXIT_OK if run.valid else EXIT_PROBLEMS


def _check_many(args: argparse.Namespace, sources: list[str]) -> int:
    """Several scenarios in one process (pre-commit, CI): each reported in turn; exit 2
    if any is unusable, else 1 if any has problems, else 0."""
    import json

    with _startup_imports():
        _one_blas_thread()
        from mpmd_lab import validate
        from mpmd_lab.report import format_diagnostics
        from mpmd_lab.scenario import ScenarioError

    worst, results = EXIT_OK, []
    counts = {"valid": 0, "invalid": 0, "unusable": 0}
    for source in sources:
        try:
            scenario = _load(source)
        except (ScenarioError, OSError) as e:
            problems = getattr(e, "problems", None) or [("", str(e))]
            results.append({"file": source, "valid": False, "unusable": [
                {"path": path, "message": msg} for path, msg in problems]})  # fmt: skip
            if not args.json:
                for path, msg in problems[:MAX_PROBLEMS_SHOWN]:
                    print(f"{source}: {path or '<top>'}: {msg}", file=sys.stderr)
            worst = EXIT_BAD_INPUT
            counts["unusable"] += 1
            continue
        diags = validate.check(scenario)
        if args.deep:
            from mpmd_lab import deep

            diags = deep.deep_check(scenario, timeout=args.timeout, static=diags)
        valid = not any(d.is_error for d in diags)
        counts["valid" if valid else "invalid"] += 1
        if not valid:
            worst = max(worst, EXIT_PROBLEMS)
        if args.json:
            results.append({"file": source, "valid": valid,
                            "diagnostics": [d.to_json() for d in diags]})  # fmt: skip
        else:
            print(f"== {source}")
            print(format_diagnostics(scenario.name, diags))
    if args.json:
        print(json.dumps({"valid": worst == EXIT_OK, "files": results}, indent=2))
    else:
        summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        print(f"checked {len(sources)} scenario file(s): {summary}")
    return worst


def cmd_run(args: argparse.Namespace) -> int:
    scenario = _load(args.file)  # before importing JAX: bad input fails fast
    from mpmd_lab import runtime

    if args.past_lowering and args.backend not in ("auto", "simulate"):
        raise UsageError(
            "--past-lowering runs the simulator past a GPU-lowering error (as JAX's "
            "interpreters run the call): use --backend simulate"
        )
    if args.schedule:
        result = _replay(scenario, args)
    else:
        result = runtime.run(
            scenario,
            backend=args.backend,
            timeout=args.timeout,
            processes=args.processes,
            local_devices=args.local_devices,
            past_lowering=args.past_lowering,
        )
    if args.json:
        import json

        print(json.dumps(result.to_json()))
    else:
        print(result.summary())
    return EXIT_OK if result.status == "ok" else EXIT_PROBLEMS


def _replay(scenario: Any, args: argparse.Namespace) -> Any:
    """``run --schedule FILE``: the simulator in one schedule (a witness of ``check
    --json``, or its ``schedule``)."""
    import json

    if args.backend not in ("auto", "simulate"):
        raise UsageError("--schedule replays a schedule in the simulator: use --backend simulate")
    try:
        data = json.loads(Path(args.schedule).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{clip(args.schedule, QUOTE)}: not a schedule ({e})") from None
    from mpmd_lab.simulator import simulate

    return simulate(
        scenario, schedule=data, max_seconds=args.timeout, past_lowering=args.past_lowering
    )


def cmd_graph(args: argparse.Namespace) -> int:
    scenario = _load(args.file)
    if args.text:
        from mpmd_lab import graph

        print(graph.to_text(graph.build_graph(scenario)))
        return EXIT_OK
    if not args.output:
        raise UsageError("graph needs -o OUT.png or OUT.svg (or --text)")
    fmt = Path(args.output).suffix.lower().lstrip(".")
    if fmt not in {"png", "svg", "pdf"}:
        raise UsageError(
            f"{clip(args.output, QUOTE)}: the picture is written as .png, .svg or .pdf"
        )
    from mpmd_lab import files

    files.target_of(args.output, _inputs(args.file))  # refuse before the drawing's seconds
    from mpmd_lab import draw as plot

    data = plot.render_aliasing(scenario, fmt)
    written = files.write_bytes(args.output, data, _inputs(args.file))
    _say(f"wrote {written}: the aliasing graph of {clip(args.file, QUOTE)}")  # as -o says
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from mpmd_lab.codegen import CodegenError, cpu_limit_of, generate

    scenario = _load(args.file)
    from mpmd_lab.validate import analyze

    analysis = analyze(scenario, fixes=False)
    try:
        source = generate(scenario, analysis=analysis)
    except CodegenError as e:
        where = f"{clip(args.file, QUOTE)}: {e.path or 'call'}"
        print(f"{where}: cannot export: {clip(str(e), 2 * QUOTE)}", file=sys.stderr)
        return EXIT_PROBLEMS
    errors = [d for d in analysis.diagnostics if d.is_error]
    limit = cpu_limit_of(scenario, scenario.run.interpret, analysis)
    if limit is not None:  # what runs where
        _say(
            f"note: on a GPU the exported script runs the kernel; on a CPU it stops with a "
            f"sentence, as JAX's {scenario.run.interpret} interpreter cannot run it "
            f"({limit[0]} at {limit[1]}): here, use `mpmd-lab run {clip(args.file, QUOTE)} "
            "--backend simulate`"
        )
    if errors:  # written all the same (to try it, or to show JAX's error), but said
        first = errors[0]
        more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
        _say(
            f"warning: {clip(args.file, QUOTE)} is not valid: the check finds {first.code} "
            f"[{first.stage}] at {first.path or 'the call'}{more}; the exported script "
            "fails the same way (`mpmd-lab check` says why and how to fix it)"
        )
    if args.output:
        from mpmd_lab import files

        written = files.write_text(args.output, source, _inputs(args.file))
        _say(f"wrote {written}: a self-contained JAX script")
    else:
        sys.stdout.write(source)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from mpmd_lab import knowledge

    card = knowledge.lookup(args.query)
    if card is None:
        print(f"no code or known JAX message matches {clip(args.query, QUOTE)!r}", file=sys.stderr)
        near = knowledge.search(args.query)
        if near:
            print("did you mean:", file=sys.stderr)
            for c in near:
                print(f"  {c.code:<34} {c.title}", file=sys.stderr)
        else:
            import textwrap

            codes = sorted(knowledge.codes())
            print(f"{len(codes)} codes have cards (`mpmd-lab explain CODE`):", file=sys.stderr)
            print(textwrap.fill(" ".join(codes), 88, initial_indent="  ",
                                subsequent_indent="  "), file=sys.stderr)  # fmt: skip
        return EXIT_PROBLEMS
    print(card.to_json() if args.json else card.render())
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Read a JAX function's kernel call into a scenario (in a child process)."""
    from mpmd_lab import files
    from mpmd_lab.importer import child

    if args.output and Path(args.output).suffix.lower() != ".json":
        raise UsageError(f"{args.output}: the scenario is written as .json")
    try:
        module, _ = child.parse_spec(args.spec)
        if args.output:  # refused before the import's seconds: never its own module
            files.target_of(args.output, [module])
        imp = child.run(args.spec, devices=args.devices, timeout=args.timeout)
    except child.SpecError as e:
        raise UsageError(str(e)) from None
    if imp.scenario is not None and args.output:
        files.write_text(args.output, imp.scenario.to_json() + "\n", [module])
    if args.json:
        import json

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


def _devices(text: str) -> int:
    """An import's ``--devices``: 1 to 4096 (JAX makes each one, with its memory)."""
    from mpmd_lab.importer.child import SpecError, check_devices

    try:
        return check_devices(int(text))
    except ValueError as e:
        msg = str(e) if isinstance(e, SpecError) else f"{text!r} is not a number of devices"
        raise argparse.ArgumentTypeError(msg) from None


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


def _count(text: str) -> int:
    """A ``--processes`` / ``--local-devices``: a whole number from 1 to 64."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: give between 1 and 64")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mpmd-lab",
        description="Build, check, run, draw and export Pallas mpmd_map kernel calls.",
        epilog="FILE is a scenario .json file or a gallery name (see `mpmd-lab gallery`).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "gallery", help="list the built-in scenarios, or write one as a file to start from"
    )
    s.add_argument("name", metavar="NAME", nargs="?", help="a scenario: print it (or -o FILE)")
    s.add_argument("-o", "--output", metavar="FILE.json", help="write scenario NAME to FILE")
    s.add_argument("--force", action="store_true", help="with -o: replace an existing FILE")
    s.set_defaults(func=cmd_gallery)

    s = sub.add_parser("check", help="validate scenarios (exit 0 valid, 1 problems, 2 bad input)")
    s.add_argument(
        "file", metavar="FILE", nargs="+", help="scenario files, folders of them, gallery names"
    )
    s.add_argument("--json", action="store_true", help="print the diagnostics as JSON")
    s.add_argument("--deep", action="store_true", help="also trace and lower for the GPU with JAX")
    s.add_argument(
        "--fix",
        action="store_true",
        help="apply fixes, checking after each, until valid or none is left; print the "
        "fixed scenario (or -o)",
    )
    s.add_argument(
        "-o", "--output", metavar="FIXED.json", help="with --fix: write the fixed scenario"
    )
    s.add_argument(
        "--timeout", type=_seconds, default=120.0, help="seconds for --deep (default 120)"
    )
    s.set_defaults(func=cmd_check)

    s = sub.add_parser(
        "fix",
        help="apply the best fix of the first error (--all: until valid), printing each step",
    )
    s.add_argument("file", metavar="FILE", help="a scenario .json file or a gallery name")
    s.add_argument(
        "--all", action="store_true", help="fix and check again until valid or no fix is left"
    )
    s.add_argument("-o", "--output", metavar="FIXED.json", help="write the fixed scenario")
    s.add_argument("--json", action="store_true", help="print the steps and result as JSON")
    s.set_defaults(func=cmd_fix)

    s = sub.add_parser(
        "run", help="run the call: on a GPU, in JAX's CPU interpreter, or in the simulator"
    )
    s.add_argument("file", metavar="FILE", help="a scenario .json file or a gallery name")
    s.add_argument(
        "--backend",
        choices=["auto", "gpu", "interpret", "simulate"],
        default="auto",
        help="auto (the default): a GPU if there is one, else JAX's CPU interpreter if it "
        "can run the call, else mpmd-lab's simulator; the result says which and why",
    )
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        help="seconds before a run is killed (default 120)",
    )
    s.add_argument(
        "--schedule",
        metavar="SCHEDULE.json",
        help="with the simulator: replay this schedule (a race's or deadlock's witness)",
    )
    s.add_argument(
        "--past-lowering",
        action="store_true",
        help="simulate a call the Mosaic GPU lowering refuses (as JAX's interpreters run "
        "it); the lowering error is shown first",
    )
    s.add_argument(
        "--processes",
        type=_count,
        default=1,
        metavar="N",
        help="run as N JAX controller processes on this machine, as a cluster runs one per "
        "host (CPU devices, JAX's HLO interpreter; see docs/CLUSTER.md)",
    )
    s.add_argument(
        "--local-devices",
        type=_count,
        default=None,
        metavar="K",
        help="with --processes: CPU devices per process (default: its share of the call's)",
    )
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("graph", help="draw the aliasing graph")
    s.add_argument("file", metavar="FILE", help="a scenario .json file or a gallery name")
    s.add_argument(
        "-o", "--output", metavar="OUT.png|OUT.svg", help="write the drawing (by its suffix)"
    )
    s.add_argument("--text", action="store_true", help="print the graph as text")
    s.set_defaults(func=cmd_graph)

    s = sub.add_parser("export", help="write the call as a plain JAX script")
    s.add_argument("file", metavar="FILE", help="a scenario .json file or a gallery name")
    s.add_argument(
        "-o", "--output", metavar="OUT.py", help="write the script here (default: print it)"
    )
    s.set_defaults(func=cmd_export)

    s = sub.add_parser(
        "import",
        help="read a JAX function's kernel call into a scenario (MODULE.py:FUNCTION)",
        description="FUNCTION() returns (fn, args); fn(*args) is traced (never run) in a "
        "child process with the device count set before JAX starts. Exit 0: a faithful "
        "scenario JAX accepts; 1: unsupported constructs or errors (reported, each at its "
        "source line); 2: no such module or function.",
    )
    s.add_argument(
        "spec",
        metavar="MODULE.py:FUNCTION",
        help="a file and the function in it that makes the call",
    )
    s.add_argument("-o", "--output", metavar="SCENARIO.json", help="write the scenario here")
    s.add_argument(
        "--devices",
        type=_devices,
        default=None,
        help="CPU devices for JAX, 1 to 4096 (default: the module's DEVICES, else 8)",
    )
    s.add_argument("--json", action="store_true", help="print the whole import as JSON")
    s.add_argument(
        "--timeout", type=_seconds, default=120.0, help="seconds before it is stopped (default 120)"
    )
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("explain", help="explain a diagnostic code or a raw JAX message")
    s.add_argument(
        "query", metavar="CODE-or-MESSAGE", help="a code (MPMD_DUP_REF) or words of JAX's error"
    )
    s.add_argument("--json", action="store_true", help="print the card as JSON")
    s.set_defaults(func=cmd_explain)
    return p


class _NeverRaised(Exception):
    pass


def _scenario_error() -> type[BaseException]:
    """``ScenarioError``, without importing pydantic for commands that never load one."""
    mod = sys.modules.get("mpmd_lab.scenario")
    return mod.ScenarioError if mod is not None else _NeverRaised


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``mpmd-lab`` command line; the exit status."""
    return _run(parser().parse_args(argv))


#: Commands that start no other process: the console script may skip the interpreter's
#: tear-down after them (freeing every module of pydantic and co. costs tens of ms).
QUICK_EXIT = ("gallery", "check", "explain", "export")


def entry() -> None:
    """The ``mpmd-lab`` console script."""
    global _OWN_PROCESS
    _OWN_PROCESS = True
    args = parser().parse_args()
    code = _run(args)
    if args.command in QUICK_EXIT and not getattr(args, "deep", False):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        os._exit(code)
    sys.exit(code)


def _run(args: argparse.Namespace) -> int:
    safe_streams()  # PYTHONIOENCODING=ascii, a C locale: escapes, never a crash
    try:
        return args.func(args)
    except _scenario_error() as err:
        e: Any = err  # a ScenarioError
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
        where = clip(str(e.filename), QUOTE) if e.filename else ""
        print(f"mpmd-lab {args.command}: {where}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    entry()
