"""``mpmd_lab.record.Record`` gives its plain classes what the dataclass they replaced
gave them: the same equality, hash and repr (the expression nodes, Dim, Ix, Env and
DeviceRef are hashed, compared and printed in messages)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from mpmd_lab import expr as E
from mpmd_lab.shapes import Dim


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class Dim_:  # what Dim was: the reference
    start: int
    size: int
    step: int = 1
    axis: tuple[str, Any] | None = None
    stride: int = 0


ints = st.integers(-5, 5)
axes = st.none() | st.tuples(st.sampled_from(["block", "pid"]), st.sampled_from(["x", "y", 0]))


@given(ints, ints, ints, axes, ints, ints, ints, ints, axes, ints)
def test_dim_compares_hashes_and_prints_as_its_dataclass(a, b, c, d, e, f, g, h, i, j):
    x, y = Dim(a, b, c, d, e), Dim(f, g, h, i, j)
    rx, ry = Dim_(a, b, c, d, e), Dim_(f, g, h, i, j)
    assert (x == y) == (rx == ry)
    assert hash(x) == hash(rx)
    assert repr(x) == repr(rx).replace("Dim_(", "Dim(")
    assert x != rx  # another class is never equal, as between two dataclasses


def test_expression_nodes_are_values():
    a = E.BinOp("+", E.Name("i"), E.Const(1))
    b = E.BinOp("+", E.Name("i"), E.Const(1))
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a == E.parse("i + 1") and a != E.parse("i + 2")
    assert E.Const(1) != E.Name("i") and E.Const(1) != 1
    assert repr(a) == "BinOp(op='+', a=Name(id='i'), b=Const(value=1))"


@dataclasses.dataclass(unsafe_hash=True)
class Location_:  # what accesslog.Location was
    memory: str
    buffer: str
    device: int
    block: int | None = None
    kind: str = "input"


@dataclasses.dataclass(eq=False)
class Access_:  # what accesslog.Access was (its spans left out of the repr)
    id: int
    kind: str
    actor: Any
    statement: int
    op: str
    ref: str
    location: Any
    spans: Any = dataclasses.field(repr=False)
    path: str = ""
    field: str = ""


@given(st.sampled_from(["GMEM", "SMEM"]), st.sampled_from(["x", "out"]), ints, st.none() | ints)
def test_records_that_were_dataclasses_behave_as_they_did(memory, buffer, device, block):
    import numpy as np
    from mpmd_lab.accesslog import Access, Actor, Location

    loc, ref = Location(memory, buffer, device, block), Location_(memory, buffer, device, block)
    assert repr(loc) == repr(ref).replace("Location_(", "Location(")
    assert hash(loc) == hash(ref) and loc == Location(memory, buffer, device, block)
    actor = Actor(0, device, 0, 0)
    spans = np.zeros((1, 2), np.int64)
    a = Access(3, "write", actor, 1, "copy", "dst", loc, spans, "p", "dst")
    b = Access_(3, "write", actor, 1, "copy", "dst", loc, spans, "p", "dst")
    assert repr(a) == repr(b).replace("Access_(", "Access(")  # no spans, as field(repr=False)
    twin = Access(3, "write", actor, 1, "copy", "dst", loc, spans, "p", "dst")
    assert a == a and a != twin and len({a, twin}) == 2  # equal only to itself (eq=False)
