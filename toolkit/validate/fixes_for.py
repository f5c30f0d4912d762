"""Fix constructors: each returns a :class:`Fix` (edits of the scenario's JSON form)."""

from __future__ import annotations

from typing import Any

from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.ops import Let
from mpmd_lab.scenario import BufferArg, Scenario, TupleArg


def _rename_in_body(s: Scenario, old: str, new: str) -> list[Edit]:
    """Edits that make every body statement naming ``old`` name ``new`` instead."""
    edits: list[Edit] = []
    for p, prog in enumerate(s.call.programs):
        for j, st in enumerate(prog.body):
            path = f"call.programs[{p}].body[{j}]"
            fields = ("ref",) if isinstance(st, Let) else ("src", "dst", "lhs", "rhs")
            for f in fields:
                v = getattr(st, f) if f in type(st).model_fields else None
                if v is None:
                    continue
                if v == old:
                    edits.append(Edit(op="replace", path=f"{path}.{f}", value=new))
                elif old.endswith("]") is False and v.startswith(old + "["):
                    pass
            if isinstance(st, Let) and st.let == old:
                return edits  # shadowed from here on
    return edits


def dup_ref(s: Scenario, i: int, j: int | None, first: tuple[int, int | None]) -> Fix:
    """Drop the duplicate argument and rebind its parameter to the first one."""
    a = s.call.args[i]
    fi, fj = first
    fa = s.call.args[fi]
    target = fa.param if fj is None else f"{fa.param}[{fj}]"
    if j is None:
        # a plain argument: remove it, body uses of its param name the first one
        assert isinstance(a, BufferArg)
        edits = _rename_in_body(s, a.param, target)
        if fa.transforms or a.transforms:
            # two views of one Ref: pass the Ref once, make each view in the body
            return _views_into_body(s, i, first)
        edits.append(Edit(op="remove", path=f"call.args[{i}]"))
        return Fix(
            description=f"drop argument {i} (a second {a.buffer!r} Ref) and use "
            f"{target!r} for its parameter {a.param!r}",
            edits=edits,
        )
    # a tuple leaf: remove the leaf, rename later leaves
    assert isinstance(a, TupleArg)
    leaves = list(a.tuple)
    edits = _rename_in_body(s, f"{a.param}[{j}]", target)
    for k in range(j + 1, len(leaves)):
        edits += _rename_in_body(s, f"{a.param}[{k}]", f"{a.param}[{k - 1}]")
    new_leaves = leaves[:j] + leaves[j + 1 :]
    if new_leaves:
        edits.append(Edit(op="replace", path=f"call.args[{i}].tuple", value=new_leaves))
    else:
        edits.append(Edit(op="remove", path=f"call.args[{i}]"))
    return Fix(
        description=f"drop {a.param}[{j}] (a second {leaves[j]!r} Ref) and use {target!r} instead",
        edits=edits,
    )


def _views_into_body(s: Scenario, i: int, first: tuple[int, int | None]) -> Fix:
    """Two views of one Ref passed as arguments: pass the Ref once, build views in the body."""
    fi, _ = first
    fa, a = s.call.args[fi], s.call.args[i]
    assert isinstance(a, BufferArg)
    base = f"{fa.param}_base" if fa.transforms else fa.param
    edits: list[Edit] = []
    lets = []
    if fa.transforms:
        assert isinstance(fa, BufferArg)  # (a tuple argument has no one buffer to pass)
        lets.append(_view_let(fa.param, base, fa.transforms))
        edits.append(
            Edit(op="replace", path=f"call.args[{fi}]", value={"buffer": fa.buffer, "param": base})
        )
    lets.append(_view_let(a.param, base, a.transforms))
    for p in range(len(s.call.programs)):
        for k, let in enumerate(lets):
            edits.append(Edit(op="add", path=f"call.programs[{p}].body[{k}]", value=let))
    edits.append(Edit(op="remove", path=f"call.args[{i}]"))
    return Fix(
        description=f"pass Ref {a.buffer!r} once and make both views inside the kernel body",
        edits=edits,
    )


def capture_to_arg(s: Scenario, i: int) -> Fix:
    """Pass a captured array as an argument instead."""
    cap = s.call.captures[i]
    return Fix(
        description=f"pass {cap.buffer!r} as an argument named {cap.name!r} "
        "instead of capturing it",
        edits=[
            Edit(
                op="add",
                path=f"call.args[{len(s.call.args)}]",
                value={"buffer": cap.buffer, "param": cap.name},
            ),
            Edit(op="remove", path=f"call.captures[{i}]"),
        ],
    )


def drop_capture(s: Scenario, i: int) -> Fix:
    """A captured Ref that is also an argument: use the argument's parameter."""
    cap = s.call.captures[i]
    param = None
    for a in s.call.args:
        if isinstance(a, BufferArg) and a.buffer == cap.buffer and not a.transforms:
            param = a.param
            break
    if param is None:
        return None  # type: ignore[return-value]
    edits = _rename_in_body(s, cap.name, param)
    edits.append(Edit(op="remove", path=f"call.captures[{i}]"))
    return Fix(
        description=f"use argument {param!r} instead of capturing {cap.buffer!r}", edits=edits
    )


def step_fix(s: Scenario, tpath: str, err: Any, before: Any) -> Fix | list[Fix] | None:
    """A fix for a failing transform (``tpath`` is ``...transforms[k]``)."""
    from mpmd_lab.validate.stepfix import fix_step

    try:
        return fix_step(s, tpath, err, before)
    except (LookupError, AttributeError, ValueError, TypeError):
        return None


def loaded_as_int32(s: Scenario, e: Any, loads: dict[str, Any], bad: Any) -> Fix | None:
    """Make each ref ``e`` loads from whose dtype ``bad(dtype)`` refuses an int32 (the
    buffer, output or scratch it is a view of; a buffer's values converted as the loader
    converts them), or None where a loaded ref is none of those."""
    from mpmd_lab import expr as E

    edits: list[Edit] = []
    names: list[str] = []
    for r in E.data_reads(e):
        b = loads.get(r.ref)
        if not isinstance(r, E.Load) or b is None or b.info is None or not bad(b.info.dtype):
            continue
        for o in b.origin:
            kind, _, name = o.rpartition(":")
            path = {"": "buffers", "out": "call.outputs", "scratch": "call.scratch"}.get(kind)
            if path is None:
                return None
            edit = Edit(op="replace", path=f"{path}.{name}.dtype", value="int32")
            if edit not in edits:
                edits.append(edit)
                names.append(name)
    if not edits:
        return None
    return Fix(
        description=f"hold {', '.join(names)} as int32 (what it loads is an index)", edits=edits
    )


def counted(s: Scenario, fields: list[tuple[Any, Any]]) -> Fix | None:
    """Count each truth value of ``fields`` (``(path, expression)``: a comparison as a
    device id or a loop bound, a bool to JAX) as an int32: ``(e) * 1`` (a bool with a
    Python int is a weak int32, which JAX takes; its value, 0 or 1, the one the check
    follows). None where no field holds expression text."""
    from mpmd_lab import expr as E
    from mpmd_lab.fields import format_path, get_path

    edits: list[Edit] = []
    for path, e in fields:
        where = format_path(path) if not isinstance(path, str) else path
        if isinstance(get_path(s, where), str):
            edits.append(Edit(op="replace", path=where, value=E.BinOp("*", e, E.Const(1)).label()))
    if not edits:
        return None
    shown = list(dict.fromkeys(e.label() for _, e in fields))
    said = ", ".join(shown[:3]) + (", ..." if len(shown) > 3 else "")
    return Fix(description=f"count {said} as an int32 (times 1)", edits=edits)


def index_loads(s: Scenario, fields: list[tuple[Any, Any, Any]]) -> Fix | None:
    """Index each load that has fewer indices than its ref has dims at 0 in the dims
    left over (``off_ref[...]`` of a 1-D table -> ``off_ref[0]``: the scalar JAX wants)
    in each of ``fields`` (``(path, expression, shape of a loaded ref by name)``; the
    first is the one reported, the others the kernel's other uses). None where no load
    is short, or the reported field holds no expression text."""
    from mpmd_lab import expr as E
    from mpmd_lab.fields import format_path, get_path

    short: list[str] = []

    def pad(x: Any, shape_of: Any) -> Any:
        if isinstance(x, E.Load):
            x = E.Load(x.ref, tuple(pad(i, shape_of) for i in x.index))
            shape = shape_of(x.ref)
            if shape is None or len(x.index) >= len(shape):
                return x
            one = E.Load(x.ref, x.index + (E.Const(0),) * (len(shape) - len(x.index)))
            said = f"{one.label()} for {x.label()}"
            if said not in short:
                short.append(said)
            return one
        if isinstance(x, E.Neg | E.Not):
            return type(x)(pad(x.a, shape_of))
        if isinstance(x, E.BinOp | E.Compare):
            return type(x)(x.op, pad(x.a, shape_of), pad(x.b, shape_of))
        if isinstance(x, E.BoolOp):
            return type(x)(x.op, tuple(pad(y, shape_of) for y in x.items))
        return x

    edits: list[Edit] = []
    for path, e, shape_of in fields:
        new = pad(e, shape_of)
        if new == e:
            continue
        where = format_path(path) if not isinstance(path, str) else path
        held = get_path(s, where)
        if isinstance(held, str):
            edit = Edit(op="replace", path=where, value=new.label())
        elif isinstance(getattr(held, "ds", None), list):
            edit = Edit(op="replace", path=f"{where}.ds[0]", value=new.label())
        elif not edits:
            return None  # (the reported field: no text to edit)
        else:
            continue
        if edit not in edits:
            edits.append(edit)
    if not edits:
        return None
    return Fix(description=f"load one element: {', '.join(short)}", edits=edits)


def _view_let(name: str, base: str, transforms: list[Any]) -> dict[str, Any]:
    """The JSON form of ``name = base`` through ``transforms``, a ``let`` of the body."""
    return {"let": name, "ref": base, "transforms": [t.model_dump(mode="json") for t in transforms]}


def view_into_body(s: Scenario, i: int) -> Fix | None:
    """Pass argument ``i``'s Ref whole and make its view (its transforms) at the top of
    every kernel body, under the parameter's own name. None for a tuple argument."""
    a = s.call.args[i]
    if not isinstance(a, BufferArg) or not a.transforms:
        return None
    base = f"{a.param}_base"
    let = _view_let(a.param, base, a.transforms)
    edits = [Edit(op="replace", path=f"call.args[{i}]", value={"buffer": a.buffer, "param": base})]
    for p in range(len(s.call.programs)):
        edits.append(Edit(op="add", path=f"call.programs[{p}].body[0]", value=let))
    return Fix(
        description=f"pass {a.buffer!r} whole and make {a.param!r} inside the kernel body",
        edits=edits,
    )
