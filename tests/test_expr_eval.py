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


@pytest.mark.parametrize(
    "text",
    [
        "dev * 2147483647 + i",  # traced: wraps at each op, as the walk does
        "-(dev * 1073741824 * 2)",
        "(dev + axis_size(dev) - i) % axis_size(dev) * 256",
        "2147483647 * 2 + 1",  # a Python int: no wrap
        "dev // (i + 2)",  # a traced division by zero: jax.numpy's value
        "not dev or (i < 0 and dev > 2)",
        "program_id(0) * num_programs(1) - program_id(2)",
    ],
)
def test_the_compiled_function_is_the_walk(text: str) -> None:
    """``compiled`` (the tree as one Python expression) gives what the walk gives, for
    each traced and Python int, and where the Python expression fails the walk's value
    or error (a traced division by zero; a missing name or axis, a constant division)."""
    e = E.parse(text)
    for values in ({"dev": 3, "i": -2}, {"dev": -7, "i": 5}, {"dev": 0, "i": 0}):
        env = E.Env(values, {"dev": 4}, pids=(5, 1), npids=(6, 2))
        assert E.compiled(e)(env) == E.walked(e)(env) == e.eval(env)
    for bad in ("k + dev", "axis_size(y) * 2", "dev + 4 // 0"):
        tree = E.parse(bad)
        with pytest.raises(E.ExprError) as walk:
            E.walked(tree)(ENV)
        with pytest.raises(E.ExprError) as fast:
            E.compiled(tree)(ENV)
        assert type(fast.value) is type(walk.value) and str(fast.value) == str(walk.value)


def test_equal_trees_share_one_compiled_function() -> None:
    """A tree made again (not parsed: ``scaled``) shares the function of its text, which
    computes for it what its own walk does."""
    a, b = E.scaled(E.Name("b"), 128), E.scaled(E.Name("b"), 128)
    assert a is not b and E.compiled(a) is E.compiled(b)
    env = E.Env({"b": 3}, {})
    assert E.compiled(b)(env) == E.walked(b)(env) == 384
    # another tree (another constant, another name) has its own function
    for other in (E.scaled(E.Name("b"), 129), E.scaled(E.Name("c"), 128)):
        assert E.compiled(other) is not E.compiled(a)
        env = E.Env({"b": 3, "c": 5}, {})
        assert E.compiled(other)(env) == E.walked(other)(env) != E.compiled(a)(env)


def test_the_compiled_function_wraps_as_the_walk_over_random_trees() -> None:
    """Random trees of + - * // % and negation over traced names and large constants:
    the compiled function (one int32 wrap where a chain of + - * ends) gives the walk's
    value or error for every environment."""
    import random

    rng = random.Random(7)
    leaves = ("dev", "i", "3", "2147483647", "65536", "axis_size(dev)", "0")

    def tree(depth: int) -> str:
        if depth == 0 or rng.random() < 0.25:
            return rng.choice(leaves)
        if rng.random() < 0.1:
            return f"-({tree(depth - 1)})"
        op = rng.choice(("+", "-", "*", "*", "//", "%"))
        return f"({tree(depth - 1)} {op} {tree(depth - 1)})"

    for _ in range(2000):
        text = tree(4)
        if len(text) > E.MAX_TEXT:
            continue
        e = E.parse(text)
        for dev, i in ((3, -2), (2**31 - 1, 2**31 - 1), (-(2**31), 12345), (0, 0)):
            env = E.Env({"dev": dev, "i": i}, {"dev": 4})
            try:
                want: object = E.walked(e)(env)
            except E.ExprError as err:
                want = (type(err), str(err))
            try:
                got: object = E.compiled(e)(env)
            except E.ExprError as err:
                got = (type(err), str(err))
            assert got == want, e.label()


def test_an_int_parses_to_one_shared_constant() -> None:
    """``parse`` of an int (a loop's start, an index) gives one tree per int, equal to a
    fresh ``Const``; a boolean is still refused."""
    assert E.parse(7) is E.parse(7) and E.parse(7) == E.Const(7)
    assert E.parse(-3).eval(ENV) == -3 and E.parse(7) is not E.parse(8)
    with pytest.raises(E.ExprError):
        E.parse(True)
