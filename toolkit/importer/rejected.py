"""What JAX traced before it rejected a kernel: the user's function traced again with
the statement JAX rejected (and the statements after it that use what it made) left out.

When tracing raises at a line of the user's code, :func:`retrace` finds the function
that holds the line (the outermost user frame of the exception's traceback whose code
spans it: the kernel body, or the function that defines it), rewrites that function's
source with the statement replaced by ``pass`` (line numbers kept), and, in the same
block, each later statement that reads a name it assigned (and so on). It swaps the
function's code for the rewritten one while JAX traces the user's function again, then
puts the code back and clears JAX's caches, so the rewritten trace never serves a later
call. Nothing is run but the trace. Where no rewrite can be made (no source, a line
outside any function, a closure the rewrite would change), or the trace fails again
past a few rounds, there is nothing to show: None.
"""

from __future__ import annotations

import ast
import gc
import linecache
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpmd_lab.importer import frames as F

#: rewrites tried (each leaves out the statement the previous trace was rejected at)
MAX_ROUNDS = 3


@dataclass(frozen=True)
class LeftOut:
    """A statement of the user's function left out of the retrace."""

    where: str  # "FILE:LINE" of its first line
    text: str  # that line, stripped
    why: str  # JAX's rejection, or the name it reads that a left-out statement made


@dataclass
class Retraced:
    traced: Any  # the traced function (``jax.stages.Traced``)
    left_out: list[LeftOut]
    #: JAX's errors of the rounds after the first (each at its own line)
    errors: list[BaseException]


def retrace(trace_fn: Callable[[], Any], exc: BaseException) -> Retraced | None:
    """``trace_fn()`` again with the statements JAX rejected left out (see the module
    docstring); None when nothing can be shown."""
    errors: list[BaseException] = []
    rejected: dict[int, str] = {}  # line JAX rejected -> why
    target: tuple[types.FunctionType, ...] = ()
    current = exc
    for _ in range(MAX_ROUNDS):
        found = _site(current)
        if found is None:
            return None
        funcs, line = found
        if (target and funcs != target) or line in rejected:
            return None  # another function, or a line the rewrite did not remove
        target = funcs
        rejected[line] = _why(current)
        code = funcs[0].__code__
        rewrite = _rewrite(code, set(rejected))
        if rewrite is None:
            return None
        new, dropped = rewrite
        left = [
            LeftOut(
                f"{code.co_filename}:{ln}",
                F.line_text(f"{code.co_filename}:{ln}"),
                rejected.get(ln) or why,
            )
            for ln, why in sorted(dropped)
        ]
        try:
            traced = _with_code(funcs, new, trace_fn)
        except Exception as e:  # noqa: BLE001 - JAX's next rejection: the next round
            errors.append(e)
            current = e
            continue
        return Retraced(traced, left, errors)
    return None


def _why(exc: BaseException) -> str:
    head = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"JAX rejected it ({type(exc).__name__}: {head[:200]})"


def _site(exc: BaseException) -> tuple[tuple[types.FunctionType, ...], int] | None:
    """The functions to rewrite (every function object of one code) and the line JAX
    rejected in it: the innermost user frame's line, in the outermost user frame that
    spans it."""
    frames = [(f, ln) for f, ln in traceback.walk_tb(exc.__traceback__)]
    user = [(f, ln) for f, ln in frames if F.is_user_file(f.f_code.co_filename)]
    if not user:
        return None
    inner, line = user[-1]
    file = inner.f_code.co_filename
    for f, _ln in user:
        code = f.f_code
        if code.co_filename != file or not _spans(code, line):
            continue
        funcs = tuple(
            o
            for o in gc.get_referrers(code)
            if isinstance(o, types.FunctionType) and o.__code__ is code
        )
        if funcs:
            return funcs, line
    return None


def _spans(code: types.CodeType, line: int) -> bool:
    """Whether ``line`` is in the function's source (its nested functions' included)."""
    return code.co_firstlineno <= line <= _last_line(code)


def _last_line(code: types.CodeType) -> int:
    own = [ln for _s, _e, ln in code.co_lines() if ln is not None]
    nested = [_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType)]
    return max([code.co_firstlineno, *own, *nested])


def _rewrite(
    code: types.CodeType, lines: set[int]
) -> tuple[types.CodeType, list[tuple[int, str]]] | None:
    """The function's code with the statements at ``lines`` (and those that read what
    they assigned) replaced by ``pass``; the first lines of the statements left out,
    each with why."""
    source = "".join(linecache.getlines(code.co_filename))
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    fdef = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name == code.co_name
            and min([n.lineno, *(d.lineno for d in n.decorator_list)]) == code.co_firstlineno
        ),
        None,
    )
    if fdef is None:
        return None
    dropped: list[tuple[int, str]] = []
    for line in sorted(lines):
        spot = _statement_at(fdef.body, line)
        if spot is None:
            return None
        block, i = spot
        _drop(block, i, dropped, "")
    freevars = code.co_freevars
    # the closure's names as locals of an enclosing function: the rewritten code takes
    # them from cells too, in the same order (checked below)
    body: list[ast.stmt] = [
        ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None)) for v in freevars
    ]
    body += [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
    no_args = ast.arguments([], [], None, [], [], None, [])
    outer = ast.FunctionDef("__mpmd_lab_outer__", no_args, body, [], None, None, [])
    module = ast.Module([outer], [])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, code.co_filename, "exec")
    except (SyntaxError, ValueError):
        return None
    new = _find_code(compiled, code.co_name, code.co_firstlineno)
    if new is None or new.co_freevars != freevars:
        return None  # a closure the rewrite changed: it could not be swapped in
    return new, dropped


def _statement_at(block: list[ast.stmt], line: int) -> tuple[list[ast.stmt], int] | None:
    """The innermost statement holding ``line``: its block and index."""
    for i, st in enumerate(block):
        if not st.lineno <= line <= (st.end_lineno or st.lineno):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(st, name, None)
            if isinstance(inner, list) and inner and inner[0].lineno <= line:
                found = _statement_at(inner, line)
                if found is not None:
                    return found
        for h in getattr(st, "handlers", []) or []:
            found = _statement_at(h.body, line)
            if found is not None:
                return found
        return block, i
    return None


def _drop(block: list[ast.stmt], i: int, dropped: list[tuple[int, str]], why: str) -> None:
    """``block[i]`` becomes ``pass``; so does each later statement of the block that
    reads a name it (or another dropped one) assigned."""
    made = _assigned(block[i])
    dropped.append((block[i].lineno, why))
    block[i] = ast.copy_location(ast.Pass(), block[i])
    for j in range(i + 1, len(block)):
        st = block[j]
        if isinstance(st, ast.Pass):
            continue
        used = {
            n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        hit = sorted(used & made)
        if hit:
            made |= _assigned(st)
            dropped.append((st.lineno, f"it reads {hit[0]!r}, which a statement left out made"))
            block[j] = ast.copy_location(ast.Pass(), st)


def _assigned(st: ast.stmt) -> set[str]:
    names = {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        names.add(st.name)
    return names


def _find_code(code: types.CodeType, name: str, first: int) -> types.CodeType | None:
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if c.co_name == name and c.co_firstlineno == first:
                return c
            found = _find_code(c, name, first)
            if found is not None:
                return found
    return None


def _with_code(
    funcs: tuple[types.FunctionType, ...], new: types.CodeType, fn: Callable[[], Any]
) -> Any:
    """``fn()`` with each of ``funcs`` running ``new``; their code and JAX's caches are
    restored after (a trace of the rewrite must not serve the user's later calls)."""
    import jax

    old = [f.__code__ for f in funcs]
    try:
        for f in funcs:
            f.__code__ = new
        return fn()
    finally:
        for f, c in zip(funcs, old, strict=True):
            f.__code__ = c
        jax.clear_caches()


__all__ = ["LeftOut", "Retraced", "retrace"]
