"""What JAX traced before it rejected a kernel: the user's function traced again with
the statement JAX rejected (and the statements after it that use what it made) left out.

When tracing raises at a line of the user's code, :func:`retrace` finds the function
that holds the line (the outermost user frame of the exception's traceback whose code
spans it: the kernel body, or the function that defines it), rewrites that function's
source with the statement replaced by ``pass`` (line numbers kept), and, in the same
block, each later statement that reads a name it assigned (and so on). The user's call
is then traced again through fresh copies (:class:`_Fresh`): the rewritten function
built anew, and every wrapper, closure cell and globals mapping on the way from the
user's callable to it copied to hold the fresh one. Nothing of the user's is changed
(no ``__code__`` swapped, no cache cleared): another thread calling their function
meanwhile runs their code, and their compiled calls stay compiled; JAX's caches are
keyed by the fresh objects, so the rewritten trace serves no later call. Nothing is run
but the trace. Where no rewrite can be made (no source, a line outside any function, a
closure the rewrite would change), the rewritten function cannot be reached without
changing the user's objects (say, through an object's attribute or a module), or the
trace fails again past a few rounds, there is nothing to show: None.
"""

from __future__ import annotations

import ast
import functools
import linecache
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab.importer import frames as F

#: rewrites tried (each leaves out the statement the previous trace was rejected at)
MAX_ROUNDS = 3
#: objects the search for the rewritten function may visit from the user's callable
#: (wrappers, closure cells, defaults, globals: a few dozen for a jitted kernel call)
MAX_REACH = 5000
#: a list, tuple or dict longer than this is not looked into
MAX_ITEMS = 256
#: the rewritten function's name while it is compiled
_REWRITTEN = "__mpmd_lab_rewritten__"


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


def retrace(trace: Callable[[Any], Any], fn: Any, exc: BaseException) -> Retraced | None:
    """``trace(fn)`` again with the statements JAX rejected left out (see the module
    docstring), through fresh copies of ``fn`` and what it reaches; None when nothing
    can be shown."""
    errors: list[BaseException] = []
    rejected: dict[int, str] = {}  # line JAX rejected -> why
    target: types.CodeType | None = None
    rewrites: dict[types.CodeType, types.CodeType] = {}  # a rewrite -> the user's code
    current = exc
    for _ in range(MAX_ROUNDS):
        found = _site(current, rewrites)
        if found is None:
            return None
        code, line = found
        if (target is not None and code is not target) or line in rejected:
            return None  # another function, or a line the rewrite did not remove
        target = code
        rejected[line] = _why(current)
        rewrite = _rewrite(code, set(rejected))
        if rewrite is None:
            return None
        new, dropped = rewrite
        rewrites[new] = code
        left = [
            LeftOut(
                f"{code.co_filename}:{ln}",
                F.line_text(f"{code.co_filename}:{ln}"),
                rejected.get(ln) or why,
            )
            for ln, why in sorted(dropped)
        ]
        fresh = _Fresh.of_call(fn, code, new)
        if fresh is None:
            return None  # reached only through what a copy cannot stand in for
        try:
            traced = trace(fresh)
        except Exception as e:  # noqa: BLE001 - JAX's next rejection: the next round
            errors.append(e)
            current = e
            continue
        return Retraced(traced, left, errors)
    return None


def _why(exc: BaseException) -> str:
    head = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"JAX rejected it ({type(exc).__name__}: {head[:200]})"


def _site(
    exc: BaseException, rewrites: dict[types.CodeType, types.CodeType]
) -> tuple[types.CodeType, int] | None:
    """The user's code to rewrite and the line JAX rejected in it: the innermost user
    frame's line, in the outermost user frame that spans it (a frame running one of
    ``rewrites`` stands for the user's code it was made from)."""
    frames = [(f, ln) for f, ln in traceback.walk_tb(exc.__traceback__)]
    user = [(f, ln) for f, ln in frames if F.is_user_file(f.f_code.co_filename)]
    if not user:
        return None
    inner, line = user[-1]
    file = inner.f_code.co_filename
    for f, _ln in user:
        code = rewrites.get(f.f_code, f.f_code)
        if code.co_filename == file and _spans(code, line):
            return code, line
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
    # them from cells too, in the same order (checked below); the function is renamed
    # there, so its own name (a recursive call) stays the global it is in the original
    body: list[ast.stmt] = [
        ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None)) for v in freevars
    ]
    fdef.name = _REWRITTEN
    body += [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
    no_args = ast.arguments([], [], None, [], [], None, [])
    outer = ast.FunctionDef("__mpmd_lab_outer__", no_args, body, [], None, None, [])
    module = ast.Module([outer], [])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, code.co_filename, "exec")
    except (SyntaxError, ValueError):
        return None
    new = _find_code(compiled, _REWRITTEN, code.co_firstlineno)
    if new is None or new.co_freevars != freevars:
        return None  # a closure the rewrite changed: it could not stand in for it
    return new.replace(co_name=code.co_name, co_qualname=code.co_qualname), dropped


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


# ---------------------------------------------------------------- fresh copies


def _names(code: types.CodeType) -> set[str]:
    """The global (and attribute) names ``code`` and its nested functions read."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _pjit_type() -> Any:  # jaxlib's PjitFunction, or None
    try:
        from jax._src.lib import _jax

        return _jax.PjitFunction
    except (ImportError, AttributeError):  # pragma: no cover - another jaxlib
        return None


def _custom_vmap_type() -> Any:  # jax.custom_batching.custom_vmap, or None
    try:
        from jax.custom_batching import custom_vmap

        return custom_vmap
    except ImportError:  # pragma: no cover - another JAX
        return None


class _Cycle(Exception):
    """A wrapper (not a function or a cell) reached again while it is being copied."""


@dataclass
class _Fresh:
    """Fresh copies of what a call reaches on its way to the function being rewritten.

    The objects followed are the ones a call goes through: functions (their closure
    cells, defaults, attributes, and, for the user's own functions, the globals their
    code calls by name), closure cells, ``functools.partial``, bound methods, plain lists,
    tuples and dicts, ``jax.jit``'s wrapper and ``custom_vmap`` (``plgpu.kernel``'s).
    An object that reaches (one of) the user's functions running ``code`` is *dirty*:
    it is copied, each copy holding its children's copies; the functions running
    ``code`` are rebuilt to run ``new``; everything else is shared as it is. A globals
    mapping holding a dirty name is copied for the copied functions that read it (a
    recursive function's own frame sees its fresh self); the module's dict is not
    touched.
    """

    code: types.CodeType
    new: types.CodeType
    dirty: set[int]
    #: the objects visited, by id (kept alive while the copies are made)
    nodes: dict[int, Any]
    copies: dict[int, Any] = field(default_factory=dict)
    #: the copied globals mappings, by the id of the module's dict they copy
    module_dicts: dict[int, dict[str, Any]] = field(default_factory=dict)
    busy: set[int] = field(default_factory=set)
    #: the fills of functions and cells made before their children (cycles)
    pending: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def of_call(cls, fn: Any, code: types.CodeType, new: types.CodeType) -> Any | None:
        """A fresh copy of ``fn`` whose calls run ``new`` where ``fn`` runs ``code``;
        None when no function running ``code`` is reached through what can be copied."""
        nodes: dict[int, Any] = {id(fn): fn}
        parents: dict[int, list[int]] = {}
        todo = [fn]
        while todo:
            obj = todo.pop()
            for child in _children(obj):
                parents.setdefault(id(child), []).append(id(obj))
                if id(child) not in nodes:
                    if len(nodes) >= MAX_REACH:
                        return None
                    nodes[id(child)] = child
                    todo.append(child)
        targets = [
            i for i, o in nodes.items() if isinstance(o, types.FunctionType) and o.__code__ is code
        ]
        dirty = set(targets)
        while targets:
            for p in parents.get(targets.pop(), ()):
                if p not in dirty:
                    dirty.add(p)
                    targets.append(p)
        if id(fn) not in dirty:
            return None
        fresh = cls(code, new, dirty, nodes)
        try:
            out = fresh.copy(fn)
            while fresh.pending:
                fresh.pending.pop()()
        except _Cycle:
            return None
        return out

    def copy(self, obj: Any) -> Any:
        """The copy of ``obj`` (itself when it reaches nothing rewritten)."""
        key = id(obj)
        if key not in self.dirty:
            return obj
        if key in self.copies:
            return self.copies[key]
        if key in self.busy:
            raise _Cycle
        self.busy.add(key)
        out = self._copy(obj)
        self.copies[key] = out
        return out

    def _copy(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType):
            return self._function(obj)
        if isinstance(obj, types.CellType):
            cell = types.CellType()
            self.copies[id(obj)] = cell  # before its content: a cycle comes back here

            def fill() -> None:
                cell.cell_contents = self.copy(obj.cell_contents)

            self.pending.append(fill)
            return cell
        if isinstance(obj, functools.partial):
            return functools.partial(
                self.copy(obj.func), *self.copy(obj.args), **self.copy(obj.keywords)
            )
        if isinstance(obj, types.MethodType):
            return types.MethodType(self.copy(obj.__func__), obj.__self__)
        if type(obj) is list:
            return [self.copy(x) for x in obj]
        if type(obj) is tuple:
            return tuple(self.copy(x) for x in obj)
        if type(obj) is dict:
            return {k: self.copy(v) for k, v in obj.items()}
        if (vmap := _custom_vmap_type()) is not None and isinstance(obj, vmap):
            out = vmap(self.copy(obj.fun))
            if obj.vmap_rule is not None:
                out.def_vmap(self.copy(obj.vmap_rule))
            return out
        from jax._src import pjit

        # jax.jit's wrapper made again around the copy, with the user's jit options
        return pjit._cpp_pjit(self.copy(obj._fun), obj._jit_info)

    def _function(self, f: types.FunctionType) -> types.FunctionType:
        """A new function object like ``f`` (running ``new`` if ``f`` runs ``code``),
        made before its closure cells, defaults and globals are filled in."""
        names = [n for n, v in _globals_of(f) if id(v) in self.dirty]
        glob = f.__globals__
        if names:
            glob = self.module_dicts.setdefault(id(glob), dict(glob))
        closure = tuple(self.copy(c) for c in f.__closure__) if f.__closure__ else None
        code = self.new if f.__code__ is self.code else f.__code__
        out = types.FunctionType(code, glob, f.__name__, None, closure)
        self.copies[id(f)] = out

        def fill() -> None:
            for n in names:
                glob[n] = self.copy(f.__globals__[n])
            out.__defaults__ = self.copy(f.__defaults__)
            if f.__kwdefaults__ is not None:
                out.__kwdefaults__ = dict(self.copy(f.__kwdefaults__))
            out.__dict__.update(self.copy(f.__dict__))
            out.__qualname__ = f.__qualname__
            out.__module__ = f.__module__
            out.__doc__ = f.__doc__
            out.__type_params__ = f.__type_params__

        self.pending.append(fill)
        return out


def _followed(obj: Any) -> bool:
    """Whether a call may go through ``obj`` to a function (see :class:`_Fresh`)."""
    if isinstance(obj, types.FunctionType | types.CellType | functools.partial | types.MethodType):
        return True
    if type(obj) in (list, tuple, dict):
        return 0 < len(obj) <= MAX_ITEMS
    vmap, pjit = _custom_vmap_type(), _pjit_type()
    return (vmap is not None and isinstance(obj, vmap)) or (
        pjit is not None and isinstance(obj, pjit)
    )


def _globals_of(f: types.FunctionType) -> Iterator[tuple[str, Any]]:
    """The globals a user's function calls through (by name), each with its value: the
    callables its code names; a module-level list or dict it reads is the user's data,
    seen as it is."""
    if not F.is_user_file(f.__code__.co_filename):
        return
    glob = f.__globals__
    for n in sorted(_names(f.__code__)):
        v = glob.get(n)
        if type(v) not in (list, tuple, dict) and _followed(v):
            yield n, v


def _children(obj: Any) -> list[Any]:
    """What a call through ``obj`` may go through next (see :class:`_Fresh`)."""
    if isinstance(obj, types.FunctionType):
        out: list[Any] = list(obj.__closure__ or ())
        out += [obj.__defaults__, obj.__kwdefaults__, obj.__dict__]
        out += [v for _n, v in _globals_of(obj)]
    elif isinstance(obj, types.CellType):
        try:
            out = [obj.cell_contents]
        except ValueError:  # an empty cell
            return []
    elif isinstance(obj, functools.partial):
        out = [obj.func, obj.args, obj.keywords]
    elif isinstance(obj, types.MethodType):
        out = [obj.__func__]
    elif type(obj) in (list, tuple):
        out = list(obj)
    elif type(obj) is dict:
        out = list(obj.values())
    elif (vmap := _custom_vmap_type()) is not None and isinstance(obj, vmap):
        out = [obj.fun, obj.vmap_rule]
    elif (pjit := _pjit_type()) is not None and isinstance(obj, pjit):
        out = [obj._fun]
    else:
        return []
    return [c for c in out if _followed(c)]


__all__ = ["LeftOut", "Retraced", "retrace"]
