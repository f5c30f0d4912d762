"""Index expressions evaluate as their grammar says (mpmd_lab.expr): each tree is made
once into a function of an Env (``compiled``), which must give the tree's meaning:
Python's floor division and modulo, int32 wraparound of traced values only, jax.numpy's
values for a traced division by zero, Python's ZeroDivisionError for constants."""

from __future__ import annotations

import itertools

import pytest
from mpmd_lab import expr as E

ENV = E.Env({"dev": 3, "i": -2, "b": 1}, {"dev": 4, "x": 8}, pids=(5, 1), npids=(6, 2))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("(dev + 1) % 4", 0),
        ("i // 3", -1),  # floors, as jax.numpy's // on traced ints
        ("i % 3", 1),
        ("-i", 2),
        ("7 - dev * 2", 1),
        ("program_id(0) * 128 + program_id(1)", 641),
        ("program_id(2)", 0),  # a dim past the grid's (two dims)
        ("num_programs(1)", 2),
        ("num_programs(2)", 1),
        ("axis_size(dev) * axis_size(x)", 32),
        ("dev == 3 and i < 0", 1),
        ("dev != 3 or i >= 0", 0),
        ("not dev", 0),
        ("dev > 2", 1),
        ("dev <= 2", 0),
        ("b * 65536 * 32768", -(2**31)),  # traced: int32 wraps
        ("65536 * 32768", 2**31),  # Python ints do not
        ("dev // 0", -2),  # jax.numpy's int32 value
        ("(dev - 3) // 0", -1),
        ("dev % 0", 0),
    ],
)
def test_an_expression_has_its_meaning(text: str, want: int) -> None:
    e = E.parse(text)
    assert e.eval(ENV) == want
    assert E.compiled(e)(ENV) == want


def test_a_constant_division_by_zero_is_pythons_error() -> None:
    for text, message in (
        ("4 // 0", "integer division or modulo by zero"),
        ("4 % 0", "integer modulo by zero"),
    ):
        with pytest.raises(E.ExprZeroDivision) as got:
            E.parse(text).eval(ENV)
        assert got.value.message == message


def test_an_unbound_name_or_axis_is_an_expression_error() -> None:
    with pytest.raises(E.ExprError, match="'k' has no value here"):
        E.parse("k + 1").eval(ENV)
    with pytest.raises(E.ExprError, match="no axis named 'y'"):
        E.parse("axis_size(y)").eval(ENV)


def test_the_function_agrees_with_python_over_a_range() -> None:
    """Every + - * // % of two small operands, one traced and one constant, against
    Python's own arithmetic (no wrap at these sizes; a divisor of 0 skipped)."""
    for op, x, y in itertools.product(("+", "-", "*", "//", "%"), range(-5, 6), range(-5, 6)):
        if op in ("//", "%") and y == 0:
            continue
        env = E.Env({"v": x}, {})
        assert E.parse(f"v {op} {y}").eval(env) == eval(f"{x} {op} {y}")  # noqa: S307
        if x or op not in ("//", "%"):
            assert E.parse(f"{y} {op} v").eval(env) == eval(f"{y} {op} {x}")  # noqa: S307
