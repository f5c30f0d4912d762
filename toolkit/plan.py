"""Resolve once: every name of the call bound, every view propagated, in JAX's order.

``compile(scenario)`` walks the call as JAX evaluates it and records, for each
argument and each program, every statement with the refs it names (a
:class:`Binding`: the ref's type after its transforms, from
:mod:`mpmd_lab.shapes`, and the whole transform stack from the untransformed ref).
Names that do not resolve are ``problems`` (XREF_* codes). The rules, the graph,
the simulator, codegen and the Lab read this one result; none of them binds a name
or propagates a view again.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from operator import eq, is_
from typing import Any

from mpmd_lab import dtypes, sharding
from mpmd_lab import expr as E
from mpmd_lab.fields import Path, format_path, sub_path
from mpmd_lab.ops import Let, Loop, Return
from mpmd_lab.record import Record
from mpmd_lab.scenario import BufferArg, Scenario
from mpmd_lab.shapes import OUTSIDE, RefInfo, Step, base_info, propagate
from mpmd_lab.sharding import ShardSpec


class Stack:
    """A view's transform stack from the untransformed ref, ``(field path, transform)``
    pairs first to last (the path a tuple: :data:`mpmd_lab.fields.Path`), as a tuple
    reads: its source's stack (``parent``) and its own steps, shared rather than
    copied, so a chain of views costs its length once, not once per view (a copy per
    view is quadratic in a long chain)."""

    __slots__ = ("_len", "own", "parent")

    def __init__(
        self, parent: Stack | tuple[tuple[Path, Any], ...], own: tuple[tuple[Path, Any], ...]
    ):
        self.parent = parent
        self.own = own
        self._len = len(parent) + len(own)

    def _segments(self) -> list[tuple[tuple[Path, Any], ...]]:
        out = []
        x: Any = self
        while isinstance(x, Stack):
            out.append(x.own)
            x = x.parent
        out.append(x)
        out.reverse()
        return out

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Any:
        parent = self.parent
        if type(parent) is tuple:  # (the usual stack: one view over a transformed ref)
            return itertools.chain(parent, self.own)
        return itertools.chain.from_iterable(self._segments())

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        n = self._len
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("stack index out of range")
        x: Any = self
        while isinstance(x, Stack):
            start = len(x.parent)
            if i >= start:
                return x.own[i - start]
            x = x.parent
        return x[i]

    def __add__(self, other: tuple[tuple[Path, Any], ...]) -> Stack:
        return Stack(self, tuple(other))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Stack | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Stack({tuple(self)!r})"


class Binding(Record):
    """A name the kernel body can use: ``info`` None when unusable (a failed view, or a
    tuple param itself); ``kind`` arg, leaf, tuple, output, scratch, capture or view;
    ``path`` where it is defined (a tuple, formatted only when reported); ``origin``
    the buffers / outputs / scratch it aliases;
    ``stmt`` the body index of a let; ``stack`` every transform from the untransformed
    ref to this view, as (field path, transform); ``parent`` the binding a let's view
    is made from (its stack is this one's, less the let's own steps): what the rules
    reuse, so a chain of views is checked in linear time; ``root`` what declares the
    untransformed ref (``Plan.root_spec``: an output, a scratch or a buffer of the
    scenario, None: unknown), found once where the name is bound and shared by its
    views."""

    __slots__ = ("name", "info", "kind", "path", "origin", "stmt", "stack", "parent", "root")

    def __init__(
        self,
        name: str,
        info: RefInfo | None,
        kind: str,
        path: Path,
        origin: tuple[str, ...] = (),
        stmt: int = -1,
        stack: tuple[tuple[Path, Any], ...] | Stack = (),
        parent: Binding | None = None,
        root: Any = None,
    ) -> None:
        self.name = name
        self.info = info
        self.kind = kind
        self.path = path
        self.origin = origin
        self.stmt = stmt
        self.stack = stack
        self.parent = parent
        self.root = root


class Stmt(Record):
    """One body statement, resolved at ``path`` (a tuple): ``refs`` field -> binding
    (ops), ``steps`` a let's transform steps, ``ok`` False once a name could not be
    resolved, ``defines`` the view a let names, ``scope`` the control statements
    (loops, conditions) it is inside, outermost first, ``bound`` the names its
    expressions may use (mesh axes, device axes, enclosing loop variables),
    ``unbound`` ``(field, name)`` of the first expression name that is not bound, if
    any; ``loads`` the refs its expressions load from (``ids[0]``,
    ``pl.semaphore_read(sem)``), by name; ``exprs`` every index expression it evaluates,
    as ``(k, field, expression)`` (``k`` the transform of a let it is in, -1 for the
    op's own fields: the field path is ``path`` [``transforms``, k] ``field``), in
    order, and ``calls`` all of their calls (``Expr.calls``), listed once here for every
    rule that asks; ``typed`` every ref it names has a type (``Binding.info``: not a tuple
    used as a ref, nor a failed view), which the trace and the lowering ask before its
    rules."""

    __slots__ = (
        "index", "path", "node", "refs", "steps", "ok", "defines", "scope", "bound", "unbound",
        "loads", "exprs", "calls", "typed",
    )  # fmt: skip

    def __init__(
        self,
        index: int,
        path: Path,
        node: Any,
        refs: dict[str, Binding],
        steps: list[Step],
        ok: bool,
        defines: Binding | None,
        scope: tuple[Stmt, ...],
        bound: frozenset[str],
        unbound: tuple[str, str] | None,
        loads: dict[str, Binding] | None,
        exprs: tuple[tuple[int, str, E.Expr], ...],
        calls: frozenset[str],
        typed: bool,
    ) -> None:
        # (every field given: ``_body`` makes each record whole, its one maker; ``loads``
        # None where a load names nothing)
        self.loads = {} if loads is None else loads
        self.exprs = exprs
        self.calls = calls
        self.typed = typed
        self.index = index
        self.path = path
        self.node = node
        self.refs = refs
        self.steps = steps
        self.ok = ok
        self.defines = defines
        self.scope = scope
        self.bound = bound
        self.unbound = unbound

    def load_dtype(self, name: str) -> str:
        """The dtype of the ref its expressions load by ``name`` (``ids_ref[0]``)."""
        info = self.loads[name].info
        return info.dtype if info is not None else "int32"

    @property
    def loop_vars(self) -> tuple[str, ...]:
        return tuple(s.node.var for s in self.scope if isinstance(s.node, Loop))


class ProgramInfo(Record):
    """One program's resolved statements (``trace_failed``: a trace-time error stops
    this body)."""

    __slots__ = ("index", "path", "stmts", "trace_failed")

    def __init__(
        self, index: int, path: Path, stmts: list[Stmt] | None = None, trace_failed: bool = False
    ) -> None:
        self.index = index
        self.path = path
        self.stmts = [] if stmts is None else stmts
        self.trace_failed = trace_failed


class Problem(Record):
    """A name that does not resolve: its XREF_* ``code``, where (``path``, a tuple) and
    why (``message``)."""

    __slots__ = ("code", "path", "message")

    def __init__(self, code: str, path: Path, message: str) -> None:
        self.code = code
        self.path = path
        self.message = message


class Leaf(Record):
    """One buffer an argument passes: its name and its ref's type after the argument's
    transforms (None: unusable, an unknown buffer or a failed transform)."""

    __slots__ = ("buffer", "info")

    def __init__(self, buffer: str, info: RefInfo | None) -> None:
        self.buffer = buffer
        self.info = info


class ArgInfo(Record):
    """One argument: its leaves (a buffer, or a tuple's) and each leaf's steps."""

    __slots__ = ("index", "path", "leaves", "steps")

    def __init__(
        self,
        index: int,
        path: Path,
        leaves: list[Leaf],
        steps: list[list[Step]],
    ) -> None:
        self.index = index
        self.path = path
        self.leaves = leaves
        self.steps = steps


#: no axis name is bound outside the kernel without shard_map's (immutable: shared)
_OUTSIDE_ONLY = frozenset((OUTSIDE,))


class Plan:
    """A scenario with its names bound and views propagated (see the module docstring)."""

    __slots__ = (
        "s", "args", "params", "captures", "programs", "array_errors", "problems", "_first",
        "bound_outside", "_by_node", "folds",
    )  # fmt: skip

    def __init__(self, scenario: Scenario):
        self.s = scenario
        self.args: list[ArgInfo] = []
        self.params: dict[str, Binding] = {}
        self.captures: dict[str, Binding] = {}
        self.programs: list[ProgramInfo] = []
        #: (argument, leaf) -> what the transforms did to a plain-array argument
        self.array_errors: dict[tuple[int, int], Any] = {}
        #: names that do not resolve (XREF_* codes)
        self.problems: list[Problem] = []
        #: id(statement) -> its record (``by_node``), made when first asked
        self._by_node: dict[int, Stmt] | None = None
        #: first_step's answers and fold per key: (id(binding) -> (binding, answer), step)
        self._first: dict[str, tuple[dict[int, tuple[Binding, Any]], Callable]] = {}
        #: the answers of the rules' folds over the views (``along_chain``'s memos), by
        #: the fold's name (a rule's own key: ``plan.folds["lower.view"]``, made when
        #: first asked), one per plan. A fold's answer is a function of the binding alone
        #: (its stack and root), so a plan compiled ``like`` another starts with the
        #: other's answers (``_answers_of``): the bindings they share are not folded again
        self.folds: defaultdict[str, dict[int, tuple[Binding, Any]]] = defaultdict(dict)
        #: axis names lax.axis_index knows outside the kernel: shard_map's
        self.bound_outside: frozenset[str] = (
            frozenset(scenario.device_mesh) | _OUTSIDE_ONLY
            if scenario.device_mesh and scenario.run.shard_map is not False
            else _OUTSIDE_ONLY
        )

    @property
    def scenario(self) -> Scenario:
        return self.s

    def fits(self, scenario: Scenario) -> bool:
        """Whether this plan is ``scenario``'s as well: the same call, buffers and device
        mesh (a copy with other run options, ``model_copy(update={"run": ...})``, shares
        them), and the one run option a plan reads, ``shard_map``."""
        s = self.s
        return scenario is s or (
            scenario.call is s.call
            and scenario.buffers is s.buffers
            and scenario.device_mesh == s.device_mesh
            and scenario.run.shard_map == s.run.shard_map
        )

    def of_copy(self, scenario: Scenario) -> Plan:
        """This plan as ``scenario``'s, where it ``fits`` (a copy sharing the call and
        buffers, with another name, description or run options): the same records,
        not compiled again, over ``scenario``."""
        if not self.fits(scenario):
            raise ValueError("the plan is another scenario's")
        out = Plan(scenario)
        out.args, out.params, out.captures = self.args, self.params, self.captures
        out.programs, out.array_errors = self.programs, self.array_errors
        out.problems, out._first = self.problems, self._first
        out._by_node, out.folds = self._by_node, self.folds
        return out

    def by_node(self) -> dict[int, Stmt]:
        """Each statement's record by the statement object (its ``id``: the objects are
        this plan's scenario's, which the plan holds, so the ids stay theirs while the
        mapping lives), made once per plan: what ``compile(..., like=)`` looks up."""
        got = self._by_node
        if got is None:
            got = self._by_node = {id(st.node): st for p in self.programs for st in p.stmts}
        return got

    def problem(self, code: str, path: Path, message: str) -> None:
        self.problems.append(Problem(code, path, message))

    def root_spec(self, b: Binding) -> Any:
        """What declares the untransformed ref a binding is a view of: an output, a
        scratch or a buffer of the scenario (None: unknown): ``Binding.root``."""
        return b.root

    def root_shape(self, b: Binding) -> tuple[int, ...] | None:
        """The shape of the untransformed ref a binding is a view of."""
        spec = self.root_spec(b)
        return None if spec is None else tuple(spec.shape)

    def stack(self, b: Binding) -> tuple[tuple[Path, Any], ...] | Stack:
        return b.stack

    def first_step(
        self, b: Binding, key: str, find: Callable[[Any], Any]
    ) -> tuple[Path, Any] | None:
        """``(path, find(transform))`` for the first step of ``b``'s stack where
        ``find`` answers something (not None; None: no step), computed once per binding
        from its parent's answer and its own steps (``key`` names ``find``): linear in a
        chain of views, where walking every view's whole stack is quadratic."""
        hit = self._first.get(key)
        if hit is None:

            def step(y: Binding, found: Any) -> Any:
                if found is None:
                    for path, t in own_steps(y):
                        answer = find(t)
                        if answer is not None:
                            return path, answer
                return found

            hit = self._first[key] = ({}, step)
        return along_chain(hit[0], b, hit[1])

    def chain(self, b: Binding) -> list[str]:
        """The transform ops from the root ref to this view, in order."""
        return [t.op for _, t in b.stack]

    def net_perm(self, b: Binding) -> list[int] | None:
        """Which root dim each view dim is, through at/transpose; None after a reshape."""
        root = self.root_shape(b)
        if root is None:
            return None
        perm = list(range(len(root)))
        for _, t in b.stack:
            dims = t.root_dims(perm)
            if dims is None:
                return None
            perm = dims
        return perm

    def bound_in(self, p: int) -> frozenset[str]:
        """... and inside program ``p``: also its grid, cluster and thread axes."""
        m = self.s.call.programs[p].mesh
        t = m.threads
        names = {*m.grid, *m.cluster, t.name} if t is not None and t.name else {*m.grid, *m.cluster}
        outside = self.bound_outside
        if outside is not _OUTSIDE_ONLY:  # (shard_map's axes)
            names.update(outside)
            names.discard(OUTSIDE)
        return frozenset(names)

    @property
    def mesh_axes(self) -> tuple[str, ...]:
        return tuple(self.s.device_mesh or {})

    def buffer_info(self, name: str, base: str) -> RefInfo | None:
        b = self.s.buffers.get(name)
        if b is None:
            return None
        return base_info(b.shape, b.dtype, "GMEM", base)


def own_steps(b: Binding) -> tuple[tuple[Path, Any], ...] | Stack:
    """The ``(path, transform)`` steps a view adds to its source's stack (all of its
    stack for a name with no source view)."""
    stack = b.stack
    if b.parent is None:
        return stack
    if isinstance(stack, Stack):
        return stack.own
    n = len(b.parent.stack)  # (0 for a let of a plain name: its stack is all its own)
    return stack[n:] if n else stack


def along_chain(
    memo: dict[int, tuple[Binding, Any]], b: Binding, step: Callable[[Binding, Any], Any]
) -> Any:
    """An answer about ``b``'s whole stack, folded down its chain of views once per
    binding: ``step(view, its source's answer)`` (None for a view with no source, or
    whose source's answer is None) gives the view's answer, kept in ``memo`` (by id, the
    binding kept alive with it). Linear in a chain of views, where asking each view's
    whole stack is quadratic; the rules' per-view memos are all this one fold.

    A view of a name with no transform (an empty stack, its sources' too) is folded as
    one with no source, from None: its stack is all its own steps, and each fold here
    answers of a stack from its steps and its root (the same along a chain), so the
    answer is the same without the source's (most views are of a kernel parameter)."""
    hit = memo.get(id(b))
    if hit is not None:
        return hit[1]
    x = b.parent
    if x is None or not x.stack:  # (no source view, or one with no step)
        found = step(b, None)
        memo[id(b)] = (b, found)
        return found
    todo = [b]
    found = None
    while x is not None:
        hit = memo.get(id(x))
        if hit is not None:
            found = hit[1]
            break
        todo.append(x)
        x = x.parent
        if x is not None and not x.stack:
            break  # (folded from None: see above)
    for y in reversed(todo):
        found = step(y, found)
        memo[id(y)] = (y, found)
    return found


#: how many plans this process has compiled (a Session compiles one per scenario version)
COMPILED = 0


def compile(scenario: Scenario, like: Plan | None = None) -> Plan:
    """The scenario's names bound and views propagated (computed once per call).

    ``like``: another scenario's plan whose records are reused where what they are made
    from is the same (a fix's candidate and the original's plan: the candidate keeps
    the original's unchanged objects, ``recheck.edited``). The call's parts are reused
    when its arguments, buffers, outputs, scratch and captures are the very same objects
    (else each binding equal to ``like``'s is ``like``'s object); a statement's whole
    record when it is the same statement object at the same place, inside the same
    records, seeing the same bindings and names; else its index expressions, and a
    let's transform steps when its source's type and bound names are equal. The plan
    is the one compiled without ``like`` (tests/test_plan_reuse.py), only made with less
    work."""
    global COMPILED
    COMPILED += 1
    if like is not None and like.fits(scenario):
        return like.of_copy(scenario)
    r = Plan(scenario)
    _compile_into(r, like)
    if like is not None:
        _answers_of(r, like)
    return r


def _answers_of(r: Plan, like: Plan) -> None:
    """``like``'s fold answers (``first_step``'s, the rules' ``folds``) as ``r``'s first
    answers, copied (each entry holds its binding, so its id is its own while kept): a
    binding ``r`` shares with ``like`` (``compile``'s reuse) is the same view of the same
    root, whose answer is the same; ``like``'s other entries are never asked."""
    r._first = {key: (dict(memo), step) for key, (memo, step) in like._first.items()}
    r.folds = defaultdict(dict, {key: dict(memo) for key, memo in like.folds.items()})


def leaf_name(param: str, i: int) -> str:
    return f"{param}[{i}]"


def _duplicate(ctx: Plan, name: str, path: Path) -> None:
    """Kernel parameter ``name``, defined again at ``path``: where it is defined first
    is its binding's (an argument's at its ``.param``)."""
    first = ctx.params[name]
    where = (*first.path, "param") if first.kind in ("arg", "tuple") else first.path
    ctx.problem(
        "XREF_DUPLICATE_NAME",
        path,
        f"kernel parameter {name!r} is already defined at {format_path(where)}; "
        "Python rejects a function with two parameters of one name",
    )


def _same_head(a: Scenario, b: Scenario) -> bool:
    """Whether the call's own parts of ``a`` and ``b`` (all a plan resolves before the
    programs) are the very same objects, in the same order, with the same device mesh
    and ``shard_map``."""
    ca, cb = a.call, b.call
    return (  # (what a fix edits most first)
        _same_list(ca.args, cb.args)
        and _same_items(ca.scratch, cb.scratch)
        and _same_items(ca.outputs, cb.outputs)
        and _same_list(ca.captures, cb.captures)
        and _same_items(a.buffers, b.buffers)
        and a.device_mesh == b.device_mesh
        and a.run.shard_map == b.run.shard_map
    )


#: where the programs' problems are (the rest are the call's own parts')
_PROGRAMS = ("call", "programs")


def _same_list(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """The same objects in the same order (compared in C: ``map`` of ``is_``)."""
    return a is b or (len(a) == len(b) and all(map(is_, a, b)))


def _same_items(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same keys, in the same order, to the same objects."""
    return a is b or (
        len(a) == len(b) and all(map(is_, a.values(), b.values())) and all(map(eq, a, b))
    )


def _reuse_bindings(new: dict[str, Binding], old: dict[str, Binding]) -> None:
    """Each binding of ``new`` equal to ``old``'s of its name, with the same root, made
    ``old``'s object (so the statements that see it can keep their records)."""
    for name, b in new.items():
        o = old.get(name)
        if o is not None and o is not b and o.root is b.root and o == b:
            new[name] = o


def _compile_into(ctx: Plan, like: Plan | None = None) -> None:
    s = ctx.s
    if like is None:
        _head_into(ctx)
        old = None
    else:
        old = like.by_node()
        if _same_head(like.s, s):
            ctx.args, ctx.params, ctx.captures = like.args, like.params, like.captures
            ctx.array_errors = like.array_errors
            # (the call's own parts' problems: those found before the programs')
            ctx.problems.extend([x for x in like.problems if x.path[:2] != _PROGRAMS])
        else:
            _head_into(ctx)
            _reuse_bindings(ctx.params, like.params)
            _reuse_bindings(ctx.captures, like.captures)
    # the programs: each body sees the parameters and captures
    captures = ctx.captures
    env = {**ctx.params, **captures} if captures else ctx.params
    programs = ctx.programs
    for p, prog in enumerate(s.call.programs):
        path = ("call", "programs", p)
        out = ProgramInfo(p, path)
        _body(ctx, out, prog.body, (*path, "body"), env, ctx.bound_in(p), (), old)
        programs.append(out)


def _global_spec(s: Scenario, ndim: int, buffer: str | None = None) -> ShardSpec:
    """How a global value of ``ndim`` dims the kernel sees without shard_map is sharded
    over the device mesh: buffer ``buffer`` as the call's arguments place it (its
    partition spec), else (a capture) dim 0 over every axis."""
    axes = s.device_mesh or {}
    spec = s.buffer_spec(buffer) if buffer is not None else None
    # (an axis the mesh lacks is the build rule's error, which stops the check first)
    return tuple(
        sharding.part([n for n in e if n in axes]) for e in sharding.entries(spec, ndim, axes)
    )


def _sharded(spec: ShardSpec) -> ShardSpec | None:
    """``spec`` as ``RefInfo.sharded`` holds it: None where no dim is sharded."""
    return None if all(p is None for p in spec) else spec


def _plain_arrays(s: Scenario, a: Any) -> bool:
    """Whether every buffer argument ``a`` passes is a plain array (not a Ref)."""
    for buf in (a.buffer,) if isinstance(a, BufferArg) else a.tuple:
        b = s.buffers.get(buf)
        if b is None or b.as_ref:
            return False
    return True


def _head_into(ctx: Plan) -> None:
    """The call's own parts resolved: its arguments (and their transforms), outputs,
    scratch and captures, as the kernel's parameters and captures."""
    s = ctx.s
    c = s.call
    params = ctx.params  # (a kernel parameter's name -> its binding: defined once)
    outside = ctx.bound_outside
    # no shard_map: the kernel sees the global arrays (dim 0 sharded over the device mesh)
    global_view = bool(s.device_mesh) and s.run.shard_map is False
    # arguments (the call evaluates each argument's transforms first)
    a: Any  # (a BufferArg or a TupleArg: ``single`` tells which)
    for i, a in enumerate(c.args):
        path: Path = ("call", "args", i)
        leaves: list[Leaf] = []
        steps: list[list[Step]] = []
        single = isinstance(a, BufferArg)
        transforms = a.transforms
        for j, buf in enumerate((a.buffer,) if single else a.tuple):
            b = s.buffers.get(buf)
            if b is None:
                ctx.problem(
                    "XREF_UNKNOWN_BUFFER",
                    (*path, "buffer") if single else (*path, "tuple", j),
                    f"argument names buffer {buf!r}, which is not in `buffers`"
                    + (f" (there: {', '.join(sorted(s.buffers))})" if s.buffers else ""),
                )
                leaves.append(Leaf(buf, None))
                steps.append([])
                continue
            shape = b.shape
            spec = sharded = None
            if global_view and shape:
                shape = s.global_shape(buf)
                spec = _global_spec(s, len(shape), buf)
                sharded = _sharded(spec)
            if not b.as_ref and transforms:
                # a plain array: the transforms are array methods (see arrays.py)
                from mpmd_lab.validate.arrays import apply_array

                r = apply_array(
                    tuple(shape),
                    dtypes.canonical(b.dtype),
                    transforms,
                    (*path, "transforms"),
                    outside,
                    spec,
                    s.device_mesh,
                )
                ctx.array_errors[(i, j)] = r
                steps.append([])
                ok = r.error is None and not r.updater
                # the global array's sharding as its array methods left it (JAX's rules)
                kept = None if r.spec is None else _sharded(r.spec)
                info = base_info(r.shape, b.dtype, "GMEM", buf, kept) if ok else None
                leaves.append(Leaf(buf, info))
                continue
            info = base_info(shape, b.dtype, "GMEM", buf, sharded, new_ref=b.as_ref)
            if transforms:
                st = propagate(info, transforms, (*path, "transforms"), outside)
                steps.append(st)
                leaves.append(Leaf(buf, st[-1].after if st else info))
            else:
                steps.append([])
                leaves.append(Leaf(buf, info))
        ctx.args.append(ArgInfo(i, path, leaves, steps))
        for k, t in enumerate(transforms or ()):
            for field, e in t.exprs():
                calls = e.calls()
                if "load" in calls or "semaphore_read" in calls:
                    ctx.problem(
                        "XREF_UNKNOWN_NAME",
                        sub_path(path, "transforms", k, field),
                        f"{e.label()} loads from a kernel's ref, but an argument's view is "
                        "made by the caller, before the kernel runs: no kernel ref is there",
                    )
        # (a plain array's transforms are array methods, made by the caller: the kernel's
        # ref is the new array, whole)
        stack = (
            tuple([((*path, "transforms", k), t) for k, t in enumerate(transforms)])
            if transforms and not _plain_arrays(s, a)
            else ()
        )
        name = a.param
        if name in params:
            _duplicate(ctx, name, (*path, "param"))
        elif single:  # (stmt -1: no let defines it)
            root = s.buffers.get(a.buffer)
            params[name] = Binding(
                name, leaves[0].info, "arg", path, (a.buffer,), -1, stack, None, root
            )
        else:
            root = s.buffers.get(a.tuple[0]) if a.tuple else None
            params[name] = Binding(name, None, "tuple", path, tuple(a.tuple), root=root)
        if not single:
            for j, lf in enumerate(leaves):
                buf, leaf_info = lf.buffer, lf.info
                leaf = leaf_name(name, j)
                params[leaf] = Binding(
                    leaf, leaf_info, "leaf", (*path, "tuple", j), (buf,), -1, stack, None,
                    s.buffers.get(buf),
                )  # fmt: skip
    for name, o in c.outputs.items():
        path = ("call", "outputs", name)
        if name in params:
            _duplicate(ctx, name, path)
            continue
        info = base_info(o.shape, o.dtype, "GMEM", name, None, False)  # (out_type as given)
        params[name] = Binding(name, info, "output", path, ("out:" + name,), -1, (), None, o)
    for name, sc in c.scratch.items():
        path = ("call", "scratch", name)
        if name in params:
            _duplicate(ctx, name, path)
            continue
        info = sc.ref_info(name)
        params[name] = Binding(name, info, "scratch", path, ("scratch:" + name,), root=sc)

    captures = ctx.captures
    for i, cap in enumerate(c.captures):
        path = ("call", "captures", i)
        b = s.buffers.get(cap.buffer)
        if b is None:
            ctx.problem(
                "XREF_UNKNOWN_BUFFER",
                (*path, "buffer"),
                f"capture {cap.name!r} names buffer {cap.buffer!r}, which is not in `buffers`",
            )
            captures[cap.name] = Binding(cap.name, None, "capture", path, (cap.buffer,))
            continue
        space = "GMEM" if b.as_ref else "VALUE"
        shape = list(b.shape)
        sharded = None
        if s.device_mesh and s.run.shard_map is False and shape:
            shape[0] *= s.num_devices  # no shard_map: the kernel closes over the global value
            sharded = _global_spec(s, len(shape))
        info = base_info(shape, b.dtype, space, cap.buffer, sharded, new_ref=b.as_ref)
        captures[cap.name] = Binding(
            cap.name, info, "capture", path, (cap.buffer,), -1, (), None, b
        )  # fmt: skip


def ctx_steps(info: RefInfo, transforms: list, base_path: Path, bound: frozenset[str]) -> list:
    return propagate(info, transforms, base_path, bound) if transforms else []


def _body(
    ctx: Plan,
    out: ProgramInfo,
    body: list[Any],
    base: Path,
    env: dict[str, Binding],
    bound: frozenset[str],
    scope: tuple[Stmt, ...],
    old: dict[int, Stmt] | None = None,
) -> bool:
    """Resolve one body (a program's, a loop's, a condition's) into ``out.stmts`` in
    order; a ``let`` binds its name in ``env`` for the rest of this body only (in the
    body's own copy, made at its first let: ``env`` is the caller's). False once a
    ``return`` ends it. ``old``: another plan's records by statement object
    (``Plan.by_node``): a statement's is kept whole where all it was made from is the
    same (the same place, scope records, bound names, and bindings it sees), else its
    index expressions and a let's steps are reused (``_steps_of``); see ``compile``."""
    stmts = out.stmts
    copied = False
    o = None  # (the statement's record in ``old``, when there is one)
    for j, st in enumerate(body):
        path = (*base, j)
        index = len(stmts)
        if (
            old is not None
            and (o := old.get(id(st))) is not None
            and o.ok
            and o.index == index
            and o.path == path
            and o.bound == bound
            and _same_list(o.scope, scope)
            and _sees_same(o, env)
        ):
            stmt = o  # (the very record)
            defines = o.defines
            if defines is not None:
                if not copied:
                    env = dict(env)
                    copied = True
                env[st.let] = defines
        else:
            refs: dict[str, Binding] = {}
            ok = typed = True
            if isinstance(st, Let):
                # its one ref field (``Let.ref_fields``)
                src = env.get(st.ref)
                if src is None:
                    ok = False
                    ctx.problem(
                        "XREF_UNKNOWN_NAME", (*path, "ref"), _unknown_name(body, j, "ref", st.ref)
                    )
                else:
                    refs["ref"] = src
                    typed = src.info is not None
                info = None
                steps: list[Step] = []
                transforms = st.transforms
                if o is not None:  # (the same statement: the same expressions)
                    exprs, calls = o.exprs, o.calls
                else:
                    exprs, calls = _exprs(st) if transforms else _NO_EXPRS
                if transforms:
                    tpath = (*path, "transforms")
                    if src is not None and src.info is not None:
                        # what an index loads types the view (a gather, At.gathered): its
                        # steps are made again, with the refs it loads from
                        seen = env if "load" in calls else None
                        if (
                            o is None
                            or seen is not None
                            or (kept := _steps_of(o, src.info, path, bound)) is None
                        ):
                            # (a step names an axis only in its index expressions: the
                            # let's, looked at once here; with none unbound, no step has
                            # an axis to check)
                            named = exprs and _unbound(exprs, bound) is not None
                            checked = bound if named else None
                            kept = propagate(src.info, transforms, tpath, checked, seen)
                        steps = kept
                        info = steps[-1].after
                elif src is not None:
                    info = src.info
                if (
                    o is not None
                    and src is not None
                    and (was := o.defines) is not None
                    and was.parent is src
                    and was.info is info
                    and was.stmt == index
                    and was.path == path
                ):
                    defines = was  # (the same view of the same source at the same place)
                else:
                    own: tuple[tuple[Path, Any], ...] = ()
                    if transforms:
                        own = tuple([((*tpath, k), t) for k, t in enumerate(transforms)])
                    if src is not None:
                        origin, stack = src.origin, Stack(src.stack, own) if src.stack else own
                        root = src.root
                    else:
                        origin, stack, root = (), own, None
                    defines = Binding(st.let, info, "view", path, origin, index, stack, src, root)
                if not copied:
                    env = dict(env)
                    copied = True
                env[st.let] = defines
                unbound = None
            else:
                for fname, name, _access in st.ref_fields():
                    b = env.get(name)
                    if b is None:
                        ok = False
                        msg = _unknown_name(body, j, fname, name)
                        ctx.problem("XREF_UNKNOWN_NAME", (*path, fname), msg)
                    else:
                        refs[fname] = b
                        if b.info is None:
                            typed = False
                steps = []
                defines = None
                if o is not None:  # (the same statement: the same expressions)
                    exprs, calls = o.exprs, o.calls
                    if o.bound == bound:
                        unbound = o.unbound
                    else:
                        unbound = _unbound(exprs, bound) if exprs else None
                else:
                    exprs, calls = _exprs(st) if st.HAS_EXPRS else _NO_EXPRS
                    unbound = _unbound(exprs, bound) if exprs else None
            if calls and ("load" in calls or "semaphore_read" in calls):
                loads = _loads(ctx, exprs, path, env)
            else:
                loads = _NO_LOADS
            if loads is None:
                ok = False
            stmt = Stmt(
                index, path, st, refs, steps, ok, defines, scope, bound, unbound, loads, exprs,
                calls, typed,
            )  # fmt: skip
        stmts.append(stmt)
        if defines is not None:
            continue
        if isinstance(st, Return):
            return False  # never executed past here: the body returned
        if st.BODY:
            inner = bound | {st.var} if isinstance(st, Loop) else bound
            if not _body(ctx, out, st.body, (*path, "body"), env, inner, (*scope, stmt), old):
                return False
    return True


def _sees_same(o: Stmt, env: dict[str, Binding]) -> bool:
    """Whether ``env`` binds the very bindings a record ``o`` resolved (its statement's
    refs and the refs its expressions load from: each bound by its own name), so the same
    statement sees them again (a let's loads see its own view, which it keeps)."""
    for b in o.refs.values():
        if env.get(b.name) is not b:
            return False
    own = o.defines
    for b in o.loads.values():
        if b is not own and env.get(b.name) is not b:
            return False
    return True


def _steps_of(o: Stmt, info: RefInfo, path: Path, bound: frozenset[str]) -> list[Step] | None:
    """A let's transform steps from another plan's record ``o`` of it, where they are
    what propagating them from ``info`` would give: its source's type equal, the same
    bound names, and the same path or steps that name none (no error, no note); else
    None."""
    if not o.steps or o.bound != bound:
        return None
    src = o.refs.get("ref")
    if src is None or not (src.info is info or src.info == info):
        return None
    if o.path != path and any(x.error is not None or x.notes for x in o.steps):
        return None
    return o.steps


def expr_ops(st: Any) -> list[tuple[str, Any]]:
    """``(field prefix, op)`` of the ops whose expressions a statement evaluates: the
    statement's own, or a ``let``'s transforms (``transforms[k].``)."""
    if isinstance(st, Let):
        return [(f"transforms[{k}].", t) for k, t in enumerate(st.transforms)]
    return [("", st)]


def expr_fields(st: Any) -> Iterator[tuple[str, E.Expr]]:
    """``(field, expression)`` of every index expression a statement evaluates (a
    ``let``'s: its transforms')."""
    for prefix, op in expr_ops(st):
        for field, e in op.exprs():
            yield prefix + field, e


def _exprs(st: Any) -> tuple[tuple[tuple[int, str, E.Expr], ...], frozenset[str]]:
    """A statement's index expressions as ``Stmt.exprs`` lists them, and all of their
    calls (``Stmt.calls``): one walk of its ops' ``exprs``, for every rule (an op whose
    class has none, ``Op.HAS_EXPRS``, is not asked)."""
    out = []
    calls = _NO_CALLS
    for k, op in enumerate(st.transforms) if type(st) is Let else ((-1, st),):
        if not op.HAS_EXPRS:
            continue
        for field, e in op.exprs():
            out.append((k, field, e))
            c = e.calls()
            if c and not c <= calls:
                calls = calls | c
    return tuple(out), calls


#: no calls (shared)
_NO_CALLS: frozenset[str] = frozenset()
#: a statement with no index expression (shared)
_NO_EXPRS: tuple[tuple[tuple[int, str, E.Expr], ...], frozenset[str]] = ((), _NO_CALLS)


def _loads(
    ctx: Plan, exprs: tuple[tuple[int, str, E.Expr], ...], path: Path, env: dict[str, Binding]
) -> dict[str, Binding] | None:
    """The refs a statement's expressions (``Stmt.exprs``) load from (``ids[0]``), bound
    where it runs; None (and XREF_UNKNOWN_NAME) where one names nothing."""
    out: dict[str, Binding] = _NO_LOADS
    for k, field, e in exprs:
        calls = e.calls()
        if "load" not in calls and "semaphore_read" not in calls:
            continue
        for r in E.data_reads(e):
            b = env.get(r.ref)
            if b is None:
                where = ("transforms", k, field) if k >= 0 else (field,)
                ctx.problem(
                    "XREF_UNKNOWN_NAME",
                    sub_path(path, *where),
                    f"{r.label()} names {r.ref!r}: no parameter, output, scratch or "
                    "earlier view has that name",
                )
                return None
            if out is _NO_LOADS:
                out = {}
            out[r.ref] = b
    return out


#: a statement that loads nothing (shared: never written)
_NO_LOADS: dict[str, Binding] = {}


def _unknown_name(body: list[Any], j: int, fname: str, name: str) -> str:
    """Why statement ``j``'s ``fname`` cannot use ``name``."""
    where = _defined_at(body, name)
    if where is not None and where >= j:
        return (
            f"{fname} names view {name!r}, which is defined later "
            f"(body[{where}]); a statement can only use names defined before it"
        )
    return f"{fname} names {name!r}: no parameter, capture or earlier view has that name"


def _defined_at(body: list[Any], name: str) -> int | None:
    """The index of the first ``let`` of ``name`` in a body (None: none)."""
    return next((j for j, st in enumerate(body) if isinstance(st, Let) and st.let == name), None)


def _unbound(
    exprs: tuple[tuple[int, str, E.Expr], ...], bound: frozenset[str]
) -> tuple[str, str] | None:
    """``(field, name)``: the first name an op's expressions (``Stmt.exprs``) use that is
    not bound where it runs (None: all bound)."""
    for _, field, e in exprs:
        name = e.unbound(bound)
        if name is not None:
            return field, name
    return None


def sharded_operand(plan: Plan, refs: bool = False) -> bool:
    """Whether the call passes an operand sharded over the device mesh (the global
    arrays a kernel sees without shard_map: JAX's avals carry their sharding): a plain
    array as its methods left it, or (``refs``) a Ref."""
    s = plan.s
    for a in plan.args:
        for leaf in a.leaves:
            b = s.buffers.get(leaf.buffer)
            if b is not None and b.as_ref == refs and leaf.info is not None:
                if leaf.info.sharded is not None:
                    return True
    return False
