"""The scenario: one Pallas MPMD kernel call as plain, JSON-serialisable data.

The field names and meanings are the contract of ``docs/SCENARIO.md``
(``"schema": "mpmd-lab/scenario@1"``). This module only says what *is* a
scenario (exit 2 when not); what JAX would reject is the validator's business.
"""

import json
import math
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from mpmd_lab.dtypes import DTYPES, nbytes
from mpmd_lab.fields import (
    MAX_ARGS,
    MAX_BLOCKS,
    MAX_BYTES_PER_ARRAY,
    MAX_DEVICES,
    MAX_FILE_BYTES,
    MAX_INIT_VALUES,
    MAX_ITEMS,
    MAX_NAME_LEN,
    MAX_RANK,
    MAX_STATEMENTS,
    Model,
    Name,
    Shape,
    format_path,
)
from mpmd_lab.fields import check_identifier as _check_identifier
from mpmd_lab.fields import check_mapping_names as _check_mapping_names
from mpmd_lab.ops import STATEMENT_OPS, TRANSFORM_OPS, Scratch, Statement, Transforms
from mpmd_lab.ops.scratch import SCRATCH_KINDS
from mpmd_lab.sharding import global_shape
from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

SCHEMA: Final = "mpmd-lab/scenario@1"

Dtype = Literal[DTYPES]  # type: ignore[valid-type]

# ---------------------------------------------------------------- buffers

Scalar = StrictInt | StrictFloat | StrictBool
#: a fill, or an explicit value: the nested list of the buffer's shape, which for a
#: rank-0 buffer is a bare number (``np.zeros(()).tolist()`` is ``0.0``)
Init = Literal["zeros", "ones", "iota", "random"] | Scalar | list[Any]


def _check_size(shape: list[int], dtype: str) -> None:
    if nbytes(shape, dtype) > MAX_BYTES_PER_ARRAY:
        raise ValueError(
            f"shape {shape} of {dtype} needs {nbytes(shape, dtype) / 2**30:.0f} GiB, "
            f"more than the {MAX_BYTES_PER_ARRAY // 2**30} GiB any one device holds"
        )


def _nested_shape(value: Any, depth: int = 0) -> list[int]:
    if isinstance(value, list):
        if depth > MAX_RANK:
            raise ValueError("explicit init nested deeper than the maximum rank")
        if not value:
            return [0]
        inner = [_nested_shape(v, depth + 1) for v in value]
        if any(s != inner[0] for s in inner):
            raise ValueError("explicit init is ragged: rows of different lengths")
        return [len(value), *inner[0]]
    if isinstance(value, bool | int | float) and not isinstance(value, str):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("explicit init holds a non-finite number")
        if isinstance(value, int) and not -(2**64) < value < 2**64:
            raise ValueError("explicit init holds an integer wider than 64 bits")
        return []
    raise ValueError(f"explicit init holds {type(value).__name__}, not a number")


class Buffer(Model):
    shape: Shape
    dtype: Dtype
    init: Init = "zeros"
    seed: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] = 0
    as_ref: StrictBool = False

    @model_validator(mode="after")
    def _consistent(self) -> "Buffer":
        _check_size(self.shape, self.dtype)
        if not isinstance(self.init, str):
            from mpmd_lab.layout_rules import init_fits

            got = _nested_shape(self.init)  # the numbers themselves (finite, 64-bit)
            shape = list(self.shape)
            # one device's value (repeated on every device) or the global value (each dim a
            # multiple: the scenario checks it is the one its partition spec makes)
            glob = bool(
                shape
                and len(got) == len(shape)
                and got != shape
                and all(g % d == 0 if d else g == 0 for g, d in zip(got, shape, strict=True))
            )
            if not init_fits(self.shape, self.init) and not glob:
                hint = (
                    " (a rank-0 buffer's value is a bare number)"
                    if not self.shape
                    else " (a bare number is the value of a rank-0 buffer)"
                    if not got
                    else ""
                )
                raise ValueError(f"explicit init has shape {got}, the buffer {shape}{hint}")
        return self

    def init_shape(self) -> list[int]:
        """The shape of an explicit init (the buffer's own for a fill)."""
        if not isinstance(self.init, list):
            return list(self.shape)
        return _nested_shape(self.init)


#: a ``jax.sharding.PartitionSpec`` as JSON (mpmd_lab.sharding): per dimension ``null``,
#: an axis name or a list of them; absent: dim 0 over every device-mesh axis
PartitionSpec = Annotated[
    list[Name | list[Name] | None],
    Field(max_length=MAX_RANK + 1),
]


class OutputSpec(Model):
    shape: Shape
    dtype: Dtype
    #: ``jax.shard_map``'s out spec of this output (None: dim 0 over every axis)
    spec: PartitionSpec | None = None

    @model_validator(mode="after")
    def _size(self) -> "OutputSpec":
        _check_size(self.shape, self.dtype)
        return self


# ---------------------------------------------------------------- call


class BufferArg(Model):
    buffer: Name
    param: Name
    transforms: Transforms = []
    #: ``jax.shard_map``'s in spec of the buffer (None: dim 0 over every axis)
    spec: PartitionSpec | None = None

    _p = field_validator("param")(classmethod(lambda cls, v: _check_identifier(v)))
    _b = field_validator("buffer")(classmethod(lambda cls, v: _check_identifier(v)))


class TupleArg(Model):
    tuple: Annotated[list[Name], Field(min_length=1, max_length=64)]
    param: Name
    transforms: Transforms = []
    #: the in spec of every leaf, as a pytree prefix (None: dim 0 over every axis)
    spec: PartitionSpec | None = None

    _p = field_validator("param")(classmethod(lambda cls, v: _check_identifier(v)))

    @field_validator("tuple")
    @classmethod
    def _leaves(cls, v: list[str]) -> list[str]:
        for name in v:
            _check_identifier(name)
        return v


def _arg_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        if "tuple" in v:
            return "tuple"
        return "buffer" if "buffer" in v or "tuple" not in v and "param" not in v else None
    return "tuple" if isinstance(v, TupleArg) else "buffer"


Arg = Annotated[
    Annotated[BufferArg, Tag("buffer")] | Annotated[TupleArg, Tag("tuple")],
    Discriminator(
        _arg_kind,
        custom_error_type="argument_kind",
        custom_error_message="an argument names a buffer (`buffer`) or a pytree of them (`tuple`)",
    ),
]


class Capture(Model):
    name: Name
    buffer: Name

    _n = field_validator("name", "buffer")(classmethod(lambda cls, v: _check_identifier(v)))


class Threads(Model):
    name: Name | None
    count: Annotated[StrictInt, Field(ge=1, le=4096)]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else _check_identifier(v)


AxisSizes = Annotated[
    dict[str, Annotated[StrictInt, Field(ge=1, le=MAX_BLOCKS)]], Field(max_length=8)
]


class KernelMesh(Model):
    grid: AxisSizes = {}
    cluster: AxisSizes = {}
    threads: Threads | None = None

    _v = field_validator("grid", "cluster")(classmethod(lambda cls, v: _check_mapping_names(v)))


class Program(Model):
    mesh: KernelMesh = KernelMesh()
    body: Annotated[list[Statement], Field(max_length=MAX_STATEMENTS)] = []


class Call(Model):
    entry: Literal["pl.kernel", "plgpu.kernel"] = "pl.kernel"
    args: Annotated[list[Arg], Field(max_length=MAX_ARGS)] = []
    captures: Annotated[list[Capture], Field(max_length=MAX_ARGS)] = []
    outputs: Annotated[dict[str, OutputSpec], Field(max_length=MAX_ARGS)] = {}
    scratch: Annotated[dict[str, Scratch], Field(max_length=MAX_ARGS)] = {}
    programs: Annotated[list[Program], Field(max_length=64)] = []

    _v = field_validator("outputs", "scratch")(classmethod(lambda cls, v: _check_mapping_names(v)))


class RunOptions(Model):
    interpret: Literal["gpu", "hlo"] = "gpu"
    detect_races: StrictBool = False
    shard_map: StrictBool | None = None


class NotImported(Model):
    """Something of a JAX kernel that ``mpmd_lab.from_jax`` could not carry into the
    scenario: the scenario is partial, and every check, run and simulation says so."""

    what: Annotated[str, Field(min_length=1, max_length=2000)]
    #: ``"FILE:LINE"`` of the user's line it is at (None: unknown)
    source: Annotated[str, Field(max_length=4096)] | None = None
    #: the field path of the body (or part of the call) where it belongs
    path: Annotated[str, Field(max_length=1000)] = ""


class Scenario(Model):
    """One Pallas MPMD kernel call (SCENARIO.md)."""

    schema_: Literal["mpmd-lab/scenario@1"] = Field(SCHEMA, alias="schema")
    name: Annotated[
        str, Field(min_length=1, max_length=MAX_NAME_LEN, pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    ]
    description: Annotated[str, Field(max_length=100_000)] = ""
    device_mesh: (
        Annotated[dict[str, Annotated[StrictInt, Field(ge=1, le=MAX_DEVICES)]], Field(max_length=8)]
        | None
    ) = None
    #: the device ids in the device mesh's row-major order, as ``jax.sharding.Mesh(
    #: np.array(devices)[order].reshape(sizes), axes)`` lists them (None: ``0 .. n-1``,
    #: ``jax.make_mesh``'s)
    device_order: (
        Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(max_length=MAX_DEVICES)] | None
    ) = None
    buffers: Annotated[dict[str, Buffer], Field(max_length=MAX_ARGS)] = {}
    call: Call
    run: RunOptions = RunOptions()
    #: what an import left out (``from_jax``): empty for a scenario written whole
    not_imported: Annotated[list[NotImported], Field(max_length=MAX_ITEMS)] = []

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    _v = field_validator("buffers")(classmethod(lambda cls, v: _check_mapping_names(v)))

    @field_validator("device_mesh")
    @classmethod
    def _mesh(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        if v is not None:
            _check_mapping_names(v)
            if math.prod(v.values()) > MAX_DEVICES:
                raise ValueError(f"more than {MAX_DEVICES} devices")
        return v

    @model_validator(mode="after")
    def _global_inits(self) -> "Scenario":
        n = self.num_devices
        order = self.device_order
        if order is not None and sorted(order) != list(range(n)):
            raise ValueError(
                f"device_order: {order[:16]} is not an order of the {n} device id(s) "
                f"0 .. {n - 1} of the device mesh (each once)"
            )
        if self.device_mesh is None:
            parts = [(f"call.args[{i}]", a.spec) for i, a in enumerate(self.call.args)]
            parts += [(f"call.outputs.{k}", o.spec) for k, o in self.call.outputs.items()]
            given = next((where for where, spec in parts if spec is not None), None)
            if given is not None:
                raise ValueError(
                    f"{given}.spec: a partition spec splits a value over the device mesh, and "
                    "this scenario has none (add `device_mesh`, or drop the spec)"
                )
        specs: dict[str, tuple[str, Any]] = {}
        for i, a in enumerate(self.call.args):
            for buf in [a.buffer] if isinstance(a, BufferArg) else a.tuple:
                where, spec = specs.setdefault(buf, (f"call.args[{i}]", a.spec))
                if spec != a.spec:
                    raise ValueError(
                        f"call.args[{i}].spec: buffer {buf!r} is passed with the spec "
                        f"{a.spec!r} here and {spec!r} at {where}: a buffer's shape is per "
                        "device under one spec (pass a second buffer)"
                    )
        for name, b in self.buffers.items():
            got = b.init_shape()
            if got != list(b.shape) and got != self.global_shape(name):
                raise ValueError(
                    f"buffers.{name}.init: an explicit init holds one device's value "
                    f"(shape {list(b.shape)}) or the global value (shape "
                    f"{self.global_shape(name)} over the {n} device(s)), not shape {got}"
                )
        return self

    # ------------------------------------------------------------ helpers

    @property
    def num_devices(self) -> int:
        """Devices the call runs on: the device mesh's size, else 1."""
        return math.prod(self.device_mesh.values()) if self.device_mesh else 1

    def buffer_spec(self, name: str) -> list[Any] | None:
        """The partition spec the call's arguments give buffer ``name`` (None: the
        default, dim 0 over every device-mesh axis)."""
        for a in self.call.args:
            if name in ([a.buffer] if isinstance(a, BufferArg) else a.tuple):
                return a.spec
        return None

    def global_shape(self, name: str) -> list[int]:
        """The global shape of buffer ``name`` (its ``shape`` is one device's)."""
        shape = list(self.buffers[name].shape)
        if not self.device_mesh:
            return shape
        return global_shape(shape, self.buffer_spec(name), self.device_mesh)

    def output_global_shape(self, name: str) -> list[int]:
        """The global shape of output ``name`` under its out spec."""
        o = self.call.outputs[name]
        if not self.device_mesh:
            return list(o.shape)
        return global_shape(o.shape, o.spec, self.device_mesh)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field, ``schema`` first (``device_order`` only when
        given, ``not_imported`` only when an import left something out, a ``spec``
        only where one is given)."""
        out = self.model_dump(mode="json", by_alias=True, exclude_none=False)
        for part in [*out["call"]["args"], *out["call"]["outputs"].values()]:
            if part.get("spec", 0) is None:
                del part["spec"]
        if not out.get("not_imported"):
            out.pop("not_imported", None)
        if out.get("device_order") is None:
            out.pop("device_order", None)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def copy_with(self, data: dict[str, Any]) -> "Scenario":
        return Scenario.model_validate(data)


# ---------------------------------------------------------------- loading


#: Characters of a path or a label quoted in a message (twice that for a message).
MAX_QUOTE = 200


class ScenarioError(ValueError):
    """Input that is not a scenario; ``problems`` lists ``(path, message)``."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        from mpmd_lab.safetext import clip

        # user input (a 5 MB key, a 100 KB path) is quoted cut: no message is unbounded
        self.source = clip(source, MAX_QUOTE)
        self.problems = [(clip(p, MAX_QUOTE), clip(m, 2 * MAX_QUOTE)) for p, m in problems]
        problems = self.problems
        lines = [f"{source}: not a scenario ({len(problems)} problem(s))"]
        lines += [f"  {path or '<top>'}: {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


#: pydantic's own location labels (``function-after[...]``, ``list[...]``), not user keys
_PYDANTIC_LABEL = re.compile(
    r"^(function-[a-z]+|list|dict|union|tagged-union|nullable|json-or-python|lax-or-strict"
    r"|chain|model|default|literal|constrained-[a-z]+)\["
)


#: mappings keyed by user names: the part after them in a location is a key
_USER_KEYED = frozenset(
    {"buffers", "outputs", "scratch", "device_mesh", "grid", "cluster", "block"}
)


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union/tag labels from a location, keep field names and indices."""
    keep: list[Any] = []
    for i, part in enumerate(loc):
        before = loc[i - 1] if i else None
        if i >= 2 and loc[i - 2] == "scratch" and part in SCRATCH_KINDS:
            continue  # the scratch kind's tagged-union label, after the user's key
        if before in _USER_KEYED or (isinstance(before, str) and before.startswith("dict[")):
            keep.append(part)  # a user's key (a buffer named ``int``), never a label
            continue
        if (
            part in {"buffer", "tuple", "let", "op"}
            and i
            and isinstance(loc[i - 1], int)
            and keep
            and isinstance(keep[-1], int)
        ):
            # a tagged-union label right after a list index (not the field of that name)
            continue
        if isinstance(part, str) and (
            _PYDANTIC_LABEL.match(part)
            or part
            in {
                *TRANSFORM_OPS,
                *STATEMENT_OPS,
                "int",
                "str",
                "list",
                "dict",
                "none",
                "DsIndex",
                "BlockIndex",
                "PidIndex",
                "Offset",
                "literal['zeros','ones','iota','random']",
                "constrained-int",
                "constrained-str",
                "float",
                "bool",
            }
        ):
            continue
        keep.append(part)
    return tuple(keep)


def problems_of(err: ValidationError) -> list[tuple[str, str]]:
    """Every problem of a pydantic error as ``(field path, message)``, deduplicated."""
    seen: dict[str, list[str]] = {}
    # our own validators' messages first: in a union they say what the entry meant, the
    # other members only that it is not them
    errors = sorted(err.errors(include_url=False), key=lambda e: e["type"] != "value_error")
    for e in errors:
        path = format_path(_clean_loc(tuple(e["loc"])))
        if path.startswith("schema_"):
            path = "schema" + path[len("schema_") :]
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        seen.setdefault(path, [])
        if msg not in seen[path]:
            seen[path].append(msg)
    out = []
    for path, msgs in seen.items():
        out.append((path, msgs[0] if len(msgs) == 1 else " | ".join(msgs[:3])))
    return out


def load_scenario(source: str | os.PathLike[str] | dict[str, Any] | Scenario) -> Scenario:
    """A scenario from a dict, a JSON string, a path, or a gallery name.

    Raises ScenarioError (every problem, each with its field path) when the
    input is not a scenario. A first walk over the data (``_precheck``: linear in its
    size) rejects duplicate keys, unknown fields and over-long lists before pydantic
    sees them, so an oversized file costs about one read and one parse.
    """
    if isinstance(source, Scenario):
        return source
    import gc

    # parsing and validating allocate many small acyclic objects: the cyclic collector's
    # passes over them meanwhile only cost time, growing with the file (quadratic in all)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(source)
    finally:
        if collecting:
            gc.enable()


def _load(source: str | os.PathLike[str] | dict[str, Any]) -> Scenario:
    label = "<dict>"
    if isinstance(source, dict):
        data: Any = source
    else:
        text, label = _read_text(source)
        try:
            data = json.loads(text, object_pairs_hook=_pairs)
        except json.JSONDecodeError as e:
            raise ScenarioError(
                label, [("", f"not JSON: {e.msg} at line {e.lineno} column {e.colno}")]
            ) from None
        except ValueError as e:  # e.g. an integer literal of more than 4300 digits
            raise ScenarioError(label, [("", f"not JSON: {e}")]) from None
        except RecursionError:
            raise ScenarioError(label, [("", "not JSON: nested too deeply")]) from None
    if not isinstance(data, dict):
        raise ScenarioError(
            label, [("", f"a scenario is a JSON object, not {type(data).__name__}")]
        )
    early, unknown, too_long = _precheck(data)
    if too_long:
        raise ScenarioError(label, early)
    try:
        scenario = Scenario.model_validate(_without(data, unknown) if unknown else data)
    except ValidationError as e:
        raise ScenarioError(label, _merge(early, problems_of(e))) from None
    except RecursionError:
        raise ScenarioError(label, [*early, ("", "nested too deeply")]) from None
    if early:
        raise ScenarioError(label, early)
    return scenario


class _DupKeys(dict[str, Any]):
    """A JSON object that named some key more than once (``dups``: those keys)."""

    dups: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook: a dict, marked when a key came twice (JSON keeps the
    last one silently; a scenario must not)."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    dups: dict[str, None] = {}  # (ordered, once each)
    for k, _ in pairs:
        if k in seen:
            dups[k] = None
        seen.add(k)
    marked = _DupKeys(out)
    marked.dups = tuple(dups)
    return marked


# -- the shape of the schema, from the models: what keys each position takes

_Spec = tuple[tuple[Any, ...], ...]  # alternatives: ("model", cls) ("list", spec) ("dict", spec)
_LEAF: _Spec = (("leaf",),)
_ANY: _Spec = (("any",),)


def _spec(tp: Any) -> _Spec:
    """The alternatives a value of type ``tp`` may take (models, lists, mappings, leaves)."""
    import types
    import typing

    from pydantic import BaseModel

    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _spec(get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        alts: list[tuple[Any, ...]] = []
        for member in get_args(tp):
            alts += [a for a in _spec(member) if a not in alts]
        return tuple(alts)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return (("model", tp),)
    if origin is list:
        (item,) = get_args(tp) or (Any,)
        return (("list", _spec(item)),)
    if origin is dict:
        return (("dict", _spec(get_args(tp)[1])),)
    if tp is Any:
        return _ANY
    return _LEAF


_FIELDS: dict[type, dict[str, _Spec]] = {}


def _fields(cls: Any) -> dict[str, _Spec]:
    """The keys a model takes (names and aliases), each with its value's spec."""
    if cls not in _FIELDS:
        out: dict[str, _Spec] = {}
        for name, info in cls.model_fields.items():
            out[name] = _spec(info.annotation)
            if info.alias:
                out[info.alias] = out[name]
        _FIELDS[cls] = out
    return _FIELDS[cls]


_KEY_SPECS: dict[tuple[_Spec, str], _Spec | None] = {}


def _key_spec(models: _Spec, key: str) -> _Spec | None:
    """The spec of ``key`` in an object that is one of ``models`` (None: no model has it)."""
    if (models, key) not in _KEY_SPECS:
        alts: list[tuple[Any, ...]] = []
        found = False
        for _, cls in models:
            sub = _fields(cls).get(key)
            if sub is not None:
                found = True
                alts += [a for a in sub if a not in alts]
        _KEY_SPECS[(models, key)] = tuple(alts) if found else None
    return _KEY_SPECS[(models, key)]


_OBJECT_SPECS: dict[_Spec, tuple[_Spec, _Spec]] = {}
_SUB_SPECS: dict[tuple[_Spec, str], Any] = {}


def _object_spec(spec: _Spec) -> tuple[_Spec, _Spec]:
    """The models an object at ``spec`` may be, and the values' spec where it may be a
    mapping (once per spec: the walk meets the same few specs many times)."""
    hit = _OBJECT_SPECS.get(spec)
    if hit is None:
        models = tuple(a for a in spec if a[0] == "model")
        mapping = tuple(a for sub in (a[1] for a in spec if a[0] == "dict") for a in sub)
        hit = _OBJECT_SPECS[spec] = (models, mapping)
    return hit


def _sub_spec(models: _Spec, mapping: _Spec, key: str) -> _Spec | None:
    """The spec of ``key``'s value in an object that is one of ``models`` or a mapping of
    ``mapping`` (None: an unknown field)."""
    key_spec = _key_spec(models, key)
    if key_spec is None and not mapping:
        return None
    return tuple(dict.fromkeys((*(key_spec or ()), *mapping)))


def _precheck(
    data: dict[str, Any],
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]], bool]:
    """One walk over the data, guided by the models: ``(problems, unknown_locs, too_long)``.

    Problems: duplicate keys, unknown fields (never walked into: a 60 MB list in an
    unknown field costs nothing here), lists and mappings longer than any field allows
    (``too_long``: then pydantic is not asked at all), an explicit ``init`` of more than
    MAX_INIT_VALUES numbers.
    """
    problems: list[tuple[str, str]] = []
    unknown: list[tuple[Any, ...]] = []
    too_long = False
    stack: list[tuple[tuple[Any, ...], Any, _Spec]] = [((), data, _spec(Scenario))]
    while stack and len(problems) < 100:
        loc, value, spec = stack.pop()
        if isinstance(value, list):
            lists = [a[1] for a in spec if a[0] == "list"]
            if _ANY in lists:  # an explicit init: numbers, nested
                if _more_values_than(value, MAX_INIT_VALUES):
                    problems.append(
                        (
                            format_path(loc),
                            f"an explicit init holds at most {MAX_INIT_VALUES} values; "
                            "use iota, random, zeros or ones for large buffers",
                        )
                    )
                    too_long = True
                continue
            if len(value) > MAX_ITEMS:
                problems.append((format_path(loc), f"{len(value)} items; at most {MAX_ITEMS}"))
                too_long = True
                continue
            item: _Spec = tuple(a for sub in lists for a in sub) or _LEAF
            if item != _LEAF:
                stack.extend((loc + (i,), value[i], item) for i in reversed(range(len(value))))
            continue
        if not isinstance(value, dict):
            continue
        if len(value) > MAX_ITEMS:
            problems.append((format_path(loc), f"{len(value)} items; at most {MAX_ITEMS}"))
            too_long = True
            continue
        for key in getattr(value, "dups", ()):
            problems.append(
                (format_path(loc + (key,)), "given twice in one object (JSON keeps the last)")
            )
        models, mapping = _object_spec(spec)
        children = []
        for key, sub in value.items():
            if models:
                sub_spec = _SUB_SPECS.get((spec, key), False) if isinstance(key, str) else None
                if sub_spec is False:
                    sub_spec = _SUB_SPECS[(spec, key)] = _sub_spec(models, mapping, key)
                if sub_spec is None:
                    problems.append((format_path(loc + (key,)), _unknown(models, key)))
                    unknown.append(loc + (key,))
                    continue
            else:
                sub_spec = mapping
            if sub_spec and sub_spec != _LEAF and isinstance(sub, dict | list):
                children.append((loc + (key,), sub, sub_spec))
        stack.extend(reversed(children))
    return problems, unknown, too_long


def _unknown(models: _Spec, key: Any) -> str:
    """``unknown field``, and the field meant where one is spelt nearly like it."""
    from mpmd_lab.suggest import hint

    if not isinstance(key, str):
        return "unknown field"
    names = [name for _, cls in models for name in _fields(cls)]
    near = hint(key, names)
    return f"unknown field; {near}" if near else "unknown field"


def _without(data: Any, locs: list[tuple[Any, ...]]) -> Any:
    """``data`` less the keys at ``locs``: containers on their way copied, the input kept."""
    out = dict(data)
    copied: set[tuple[Any, ...]] = {()}
    for loc in locs:
        node = out
        for depth, part in enumerate(loc[:-1]):
            here = loc[: depth + 1]
            child = node[part]
            if here not in copied:
                child = list(child) if isinstance(child, list) else dict(child)
                node[part] = child
                copied.add(here)
            node = child
        node.pop(loc[-1], None)
    return out


def _merge(first: list[tuple[str, str]], then: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Two problem lists as one, each (path, message) once."""
    return list(dict.fromkeys([*first, *then]))


def _more_values_than(value: list[Any], limit: int) -> bool:
    """Whether a nested list holds more than ``limit`` entries (stops counting past it)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += len(item) if isinstance(item, list) else 0
        if count > limit:
            return True
        stack.extend(v for v in item if isinstance(v, list))
    return False


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except (OSError, ValueError):  # missing, a name too long, a NUL byte, a symlink loop
        return None


#: File systems whose "regular" files are kernel interfaces: reading one may block for
#: ever (``/proc/kmsg``), never end, or have side effects. Their mount points:
_PSEUDO_MOUNTS = ("/proc", "/sys", "/dev", "/sys/kernel/debug", "/sys/kernel/tracing")


def _pseudo_devices() -> set[int]:
    out = set()
    for mount in _PSEUDO_MOUNTS:
        try:
            out.add(os.stat(mount).st_dev)
        except OSError:
            pass
    return out


def _not_a_file_to_read(st: os.stat_result) -> str | None:
    """Why a stat'ed path must not be opened as a scenario (None: read it)."""
    if not stat.S_ISREG(st.st_mode):
        from mpmd_lab.files import kind_of

        return f"{kind_of(st.st_mode)}, not a regular file: a scenario is a .json file"
    if st.st_dev in _pseudo_devices():
        return "a kernel pseudo-file (procfs, sysfs, devtmpfs): a scenario is a .json file"
    if st.st_size > MAX_FILE_BYTES:
        return f"file larger than {MAX_FILE_BYTES // 2**20} MiB"
    return None


def _read_text(source: str | os.PathLike[str]) -> tuple[str, str]:
    """The text of a scenario file (or JSON text, or a gallery name's file) and its label.

    Never blocks and never reads without bound: what is not a regular file, or is a
    kernel pseudo-file, is refused before it is opened; the file is opened with
    O_NONBLOCK (a FIFO swapped in meanwhile is caught by an fstat of the open file) and
    read to at most MAX_FILE_BYTES.
    """
    is_text = isinstance(source, str) and source.lstrip().startswith(("{", "["))
    if isinstance(source, str) and is_text:
        if len(source) > 4096 or "\n" in source or _stat(Path(source)) is None:
            return source, "<json>"
    from mpmd_lab.gallery import index as gallery

    path = Path(source)
    label = os.fspath(source)
    st = _stat(path)
    if st is None and isinstance(source, str) and gallery.has(source):
        path = gallery.path_of(source)
        st = _stat(path)
    if st is None:
        from mpmd_lab.suggest import hint

        near = hint(label, gallery.names()) if isinstance(source, str) else ""
        raise ScenarioError(
            label, [("", "no such file or gallery scenario" + (f"; {near}" if near else ""))]
        )
    if why := _not_a_file_to_read(st):
        raise ScenarioError(label, [("", why)])
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ScenarioError(label, [("", f"cannot read: {e.strerror or e}")]) from None
    try:
        now = os.fstat(fd)
        if why := _not_a_file_to_read(now):
            raise ScenarioError(label, [("", why)])
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:  # the file may grow meanwhile: stop past the limit
            chunk = os.read(fd, min(1 << 22, MAX_FILE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except BlockingIOError:
        raise ScenarioError(label, [("", "would block on read: not a scenario file")]) from None
    except OSError as e:
        raise ScenarioError(label, [("", f"cannot read: {e.strerror or e}")]) from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(label, [("", f"file larger than {MAX_FILE_BYTES // 2**20} MiB")])
    try:
        return raw.decode("utf-8-sig"), label
    except UnicodeDecodeError as e:
        raise ScenarioError(
            label, [("", f"not UTF-8 text: byte {e.start} is {raw[e.start]:#04x}")]
        ) from None


def ref_result_keys(outputs: Iterable[str], buffers: Iterable[str]) -> dict[str, str]:
    """The result key of each ``as_ref`` buffer's final value (after the outputs): its
    name, or ``NAME_ref`` when an output has that name (``NAME_ref2``, ... when that is
    taken too): every key distinct, whatever the names."""
    taken = set(outputs)
    keys: dict[str, str] = {}
    for b in buffers:
        key, k = (b if b not in taken else f"{b}_ref"), 2
        while key in taken:
            key, k = f"{b}_ref{k}", k + 1
        taken.add(key)
        keys[b] = key
    return keys


def save_scenario(
    scenario: Scenario,
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]] = (),
    exclusive: bool = False,
) -> Path:
    """Write the scenario as JSON, whole or not at all (``mpmd_lab.files``: never over a
    device, a FIFO or a directory; a symlink's target; an existing file keeps its mode;
    a path among ``inputs`` is refused; ``exclusive``: only a new file). Returns the
    file written."""
    from mpmd_lab import files

    text = scenario.to_json() + "\n"
    return files.write_text(path, text, inputs, exclusive)
