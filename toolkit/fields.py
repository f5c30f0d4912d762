"""The building blocks every schema class uses: the base model, names, sizes, limits.

The op classes (:mod:`mpmd_lab.ops`) and the scenario's containers
(:mod:`mpmd_lab.scenario`) are both made of these, so a name or a size means the
same wherever it appears. A field path is kept as a :data:`Path`, a tuple of names
and indices (``('call', 'programs', 0, 'body')``), extended by ``sub_path`` and made
text (``call.programs[0].body``) by ``format_path`` only where it is reported; text is
read back by ``parse_path`` / ``get_path``.
"""

import functools
import keyword
import re
from typing import Annotated, Any

from mpmd_lab import expr as _expr
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt

#: Limits that keep a scenario within what any machine (and the UI) can hold.
MAX_RANK = 8
MAX_DIM = 2**31 - 1
MAX_BYTES_PER_ARRAY = 2**34  # 16 GiB per device
MAX_TRANSFORMS = 64
MAX_STATEMENTS = 10_000
MAX_ARGS = 10_000
MAX_DEVICES = 4096
MAX_BLOCKS = 2**31 - 1
MAX_FILE_BYTES = 64 * 2**20
MAX_NAME_LEN = 128
MAX_ITEMS = 10_000  # the longest list or mapping any field takes
MAX_INIT_VALUES = 2**18  # an explicit init is typed by hand: 512 x 512 at most
MAX_NESTING = 16  # loops and conditions inside each other


def check_identifier(name: str) -> str:
    """An ASCII Python identifier that is no keyword (a kernel parameter must be one)."""
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ValueError(f"{name!r} is not an ASCII Python identifier")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise ValueError(f"{name!r} is a Python keyword")
    if len(name) > MAX_NAME_LEN:
        raise ValueError(f"name longer than {MAX_NAME_LEN} characters")
    return name


def check_ref_name(name: str) -> str:
    """A body name: an identifier, or a tuple leaf ``param[i]``."""
    if isinstance(name, str) and name.endswith("]") and "[" in name:
        head, _, idx = name[:-1].partition("[")
        check_identifier(head)
        if not idx.isdigit() or not idx.isascii() or len(idx) > 6:
            raise ValueError(f"{name!r}: a tuple leaf is written param[index]")
        return name
    return check_identifier(name)


def check_mapping_names(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        check_identifier(key)
    return value


def check_axes(v: str | list[str]) -> str | list[str]:
    for name in [v] if isinstance(v, str) else v:
        check_identifier(name)
    return v


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LEN)]
Ident = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_LEN), AfterValidator(check_identifier)
]
RefName = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_LEN), AfterValidator(check_ref_name)
]
Size = Annotated[StrictInt, Field(ge=1, le=MAX_DIM)]
Shape = Annotated[list[Size], Field(max_length=MAX_RANK)]
SmallInt = Annotated[StrictInt, Field(ge=-MAX_DIM, le=MAX_DIM)]
#: an index expression: an int, or a string of :mod:`mpmd_lab.expr`
IntExpr = SmallInt | Annotated[str, Field(min_length=1, max_length=_expr.MAX_TEXT)]
AxisNames = Annotated[
    Annotated[str, Field(min_length=1)] | Annotated[list[str], Field(max_length=8)],
    AfterValidator(check_axes),
]


def check_expr(value: Any) -> Any:
    """A field validator: a string must parse as an index expression."""
    if isinstance(value, str):
        try:
            _expr.parse(value)
        except _expr.ExprError as e:
            raise ValueError(f"{value!r}: {e}") from None
    return value


Expr = Annotated[IntExpr, AfterValidator(check_expr)]


class Model(BaseModel):
    """Base: unknown fields are an error, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)


def axes_tuple(axes: str | list[str]) -> tuple[str, ...]:
    """An ``axes`` field (a name or a list) as a tuple of names."""
    return (axes,) if isinstance(axes, str) else tuple(axes)


#: a field path: names and list indices, outermost first (``('call', 'args', 1)``)
Path = tuple[str | int, ...]


@functools.lru_cache(maxsize=4096)
def format_path(loc: tuple[Any, ...]) -> str:
    """``('call', 'programs', 0, 'body')`` -> ``call.programs[0].body``.

    Kept per path (a path is a tuple, hashable): the check of a scenario reports at
    the same paths as its last version's, and each candidate fix's check at its
    original's, so a Lab edit or a fix's check formats only the paths it has not yet
    reported."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (str(part).isidentifier() and str(part).isascii()):
            out += f"[{str(part)[:80]!r}]"  # a user's key, quoted: no raw control characters
        else:
            out += ("." if out else "") + str(part)
    return out


_PART = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


@functools.lru_cache(maxsize=4096)
def parse_path(path: str) -> Path:
    """``call.args[1].param`` -> ``('call', 'args', 1, 'param')`` (a tuple: kept per
    text, as ``format_path`` keeps its text per path)."""
    out: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _PART.match(path, pos)
        if not m:
            raise ValueError(f"bad field path {path!r} at {pos}")
        out.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return tuple(out)


def sub_path(path: Path, *more: str | int) -> Path:
    """``path`` extended by ``more``: names and indices, or a relative path as text
    (``'index[1]'``, ``'block.x'``: a sub-field of an op, as ``StepError.field`` gives it);
    an empty name adds nothing."""
    out = list(path)
    for part in more:
        if isinstance(part, int):
            out.append(part)
        elif part.isidentifier():
            out.append(part)
        elif part:
            out.extend(parse_path(part))
    return tuple(out)


def get_path(obj: Any, path: str | Path) -> Any:
    """The value at a field path of a scenario (model or JSON form)."""
    cur = obj
    for part in parse_path(path) if isinstance(path, str) else path:
        if isinstance(part, int):
            cur = cur[part]
        elif isinstance(cur, dict):
            cur = cur[part]
        else:
            cur = getattr(cur, part)
    return cur
