"""Small builders of scenario JSON: the dicts a scenario file holds (docs/SCENARIO.md),
for data written in Python (the workshop's exercises, the puzzles, tests). Each returns
plain JSON data; ``load_scenario`` checks it."""

from typing import Any


def scenario(
    name: str,
    description: str,
    *,
    buffers: dict[str, dict[str, Any]],
    args: list[dict[str, Any]],
    outputs: dict[str, dict[str, Any]],
    body: list[dict[str, Any]],
    grid: dict[str, int] | None = None,
    device_mesh: dict[str, int] | None = None,
    entry: str = "pl.kernel",
    scratch: dict[str, dict[str, Any]] | None = None,
    captures: dict[str, str] | None = None,
    interpret: str = "gpu",
    detect_races: bool = False,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "description": description,
        "buffers": buffers,
        "call": {
            "entry": entry,
            "args": args,
            "outputs": outputs,
            "programs": [
                {
                    "mesh": {"grid": grid or {"b": 1}, "cluster": {}, "threads": None},
                    "body": body,
                }
            ],
        },
        "run": {"interpret": interpret, "detect_races": detect_races},
    }
    if device_mesh:
        data["device_mesh"] = device_mesh
    if scratch:
        data["call"]["scratch"] = scratch
    if captures:
        data["call"]["captures"] = [{"name": n, "buffer": b} for n, b in captures.items()]
    return data


def buffer(
    shape: list[int], dtype: str = "float32", init: Any = "iota", **kw: Any
) -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype, "init": init, **kw}


def output(shape: list[int], dtype: str = "float32") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype}


def arg(buffer: str, param: str, *transforms: dict[str, Any]) -> dict[str, Any]:
    return {"buffer": buffer, "param": param, "transforms": list(transforms)}


def let(name: str, ref: str, *transforms: dict[str, Any]) -> dict[str, Any]:
    return {"let": name, "ref": ref, "transforms": list(transforms)}


def copy(src: str, dst: str) -> dict[str, Any]:
    return {"op": "copy", "src": src, "dst": dst}


def add(dst: str, lhs: str, rhs: str) -> dict[str, Any]:
    return {"op": "add", "dst": dst, "lhs": lhs, "rhs": rhs}


def at(*index: Any) -> dict[str, Any]:
    return {"op": "at", "index": list(index)}


def peer(offset: int, axis: str = "dev") -> dict[str, Any]:
    return {"op": "remote_ref", "device": {axis: {"offset": offset}}}


def multicast(axes: str | list[str] = "dev") -> dict[str, Any]:
    return {"op": "multicast_ref", "axes": axes}
