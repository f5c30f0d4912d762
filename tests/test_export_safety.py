"""Export never emits code that a name can change (a property over generated scenarios).

For any loadable scenario, the exported source parses and compiles, and:
- inside ``build`` (the only scope where user names are bound) every identifier is
  either a template identifier from ``BUILD_TEMPLATE`` or ``codegen.py(name)`` of one of
  the scenario's validated names, and the two sets never meet (no shadowing);
- outside ``build`` only template and support-code identifiers appear;
- no user name is ever an attribute or a keyword argument;
- every string literal is template text or exactly one of the scenario's names/values
  (so user text only reaches the file through ``repr``).
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from mpmd_lab import callsupport, codegen, gallery
from mpmd_lab.diagnostics import INTERP_CANNOT
from mpmd_lab.dtypes import DTYPES
from mpmd_lab.scenario import Scenario, load_scenario
from scenario_strategies import scenarios

#: identifiers codegen's template uses inside ``build`` (program0, mesh0, ... by pattern)
BUILD_TEMPLATE = {
    "build", "interpret", "detect_races", "interp", "interpret_params", "captured", "plgpu",
    "pl", "jax", "jnp", "lax", "kernel", "call", "outs", "result", "fn", "device_mesh", "P",
    "INTERPRET", "DETECT_RACES", "NUM_DEVICES", "mesh_devices",
}  # fmt: skip
NUMBERED = re.compile(r"^(program|mesh)\d+$")
#: local names an op's source makes itself (``Source.fresh``: a loop's body function, a
#: condition's, a dot's accumulator): ``_`` + a word + a number, which no user name is;
#: and a nested body's let that re-binds an outer name (``_let3_v``: it does not end in
#: ``_``, which a user name starting with ``_`` does)
FRESH = re.compile(r"^_(loop|when|mma|acc|k|carry)\d+$|^_let\d+_\w*[^_]$")
#: identifiers of the module outside ``build`` (imports, constants, make_inputs, place, main);
#: a new template name in codegen.py belongs here (or in BUILD_TEMPLATE) after review
MODULE_TEMPLATE = {
    "os", "json", "sys", "jax", "jnp", "lax", "pl", "plgpu", "NamedSharding", "P",
    "NUM_DEVICES", "DEVICE_MESH", "SHARD_MAP", "INTERPRET", "DETECT_RACES", "OUTPUT_NAMES",
    "make_inputs",
    "host_array", "build", "place", "inputs", "device_mesh", "axes", "specs", "v", "main", "argv",
    "fn", "outputs", "k", "encode_outputs", "name", "value", "print", "__name__",
    "CPU_LIMITS",
}  # fmt: skip
KEYWORDS = {
    "out_type", "mesh", "scratch_types", "interpret", "grid", "grid_names", "cluster",
    "cluster_names", "num_threads", "thread_name", "transforms", "packed", "collective",
    "in_specs", "out_specs", "check_vma",
    "device_id", "collective_axes", "reduction_op", "vec_size", "num_arrivals", "num_barriers",
    "decrement", "commit_group", "step", "devices",
}  # fmt: skip
ATTRIBUTES = {
    "at", "bitcast", "reshape", "transpose", "transpose_ref", "remote_ref", "multicast_ref",
    "cluster_ref", "ds", "axis_index", "axis_size", "program_id", "full", "shape", "dtype",
    "commit_smem", "copy_smem_to_gmem", "wait_smem_to_gmem", "multimem_store", "Mesh", "kernel",
    "semaphore_signal", "semaphore_wait", "semaphore_signal_multicast", "SemaphoreType",
    "REGULAR", "Barrier", "ClusterBarrier", "barrier_wait", "barrier_arrive",
    "copy_gmem_to_smem", "wgmma", "run_scoped", "ACC", "layout_cast", "multimem_load_reduce",
    "Layout", "WG_STRIDED", "atomic_add", "when", "loop", "fori_loop", "logical_not",
    "num_programs",
    "ShapeDtypeStruct", "SMEM", "GMEM", "TMEM", "TilingTransform", "SwizzleTransform",
    "new_ref", "make_mesh", "shard_map", "jit", "asarray", "device_put", "axis_names", "ndim",
    "values", "device_get", "items", "dumps", "argv", "environ", "get", "bool_",
    *DTYPES,
}  # fmt: skip
STRINGS = {
    "", "XLA_FLAGS", "--compile", "--json", "__main__", ": shape=", " dtype=", "gpu", "hlo",
    "zeros", "ones", "iota", "random", *DTYPES,
}  # fmt: skip
DEVICE_COUNT = re.compile(r"^ --xla_force_host_platform_device_count=\d+$")


def _support(source: str) -> tuple[set[str], set[str], set[str]]:
    """Identifiers, attributes and strings of fixed template code (not user input)."""
    tree = ast.parse(source)
    ids, attrs, strs = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            ids.add(node.id)
        elif isinstance(node, ast.arg):
            ids.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            ids.add(node.name)
        elif isinstance(node, ast.alias):
            ids.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Attribute):
            attrs.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            ids.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strs.add(node.value)
    return ids, attrs, strs


#: the inlined support code, the exported file's ``main`` and its device-count preamble:
#: fixed text, the same for every scenario
SUPPORT_IDS, SUPPORT_ATTRS, SUPPORT_STRS = (
    a | b
    for a, b in zip(
        _support(inspect.getsource(callsupport)),
        _support("\n".join(codegen._MAIN) + codegen._device_count_preamble(4, True)),
        strict=True,
    )
)


def user_names(s: Scenario) -> tuple[set[str], set[str]]:
    """(names bound as identifiers, every string a user wrote that may reach the file)."""
    c = s.call
    bound = set(s.buffers) | set(c.outputs) | set(c.scratch)
    bound |= {a.param for a in c.args} | {cap.name for cap in c.captures}
    texts = set(bound) | {cap.buffer for cap in c.captures}
    texts |= set(s.device_mesh or {}) | {f"{b}_ref" for b in s.buffers}
    for p in c.programs:
        texts |= set(p.mesh.grid) | set(p.mesh.cluster)
        if p.mesh.threads is not None and p.mesh.threads.name:
            texts.add(p.mesh.threads.name)
        for st in _walk(p.body):
            if hasattr(st, "let"):
                bound.add(st.let)
            if getattr(st, "op", None) == "loop":
                bound.add(st.var)
            texts |= set(_strings(st.model_dump()))
    for a in c.args:
        texts |= set(_strings([t.model_dump() for t in a.transforms]))
    return bound, texts


def _walk(body: list[Any]) -> list[Any]:
    """Every statement of a body, nested bodies (loops, conditions) included."""
    out = []
    for st in body:
        out.append(st)
        out += _walk(getattr(st, "body", []) or [])
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in [k, *_strings(v)]]
    if isinstance(value, list):
        return [x for v in value for x in _strings(v)]
    return []


def _names_in(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            out.add(node.name)
    return out


def assert_export_is_safe(s: Scenario) -> None:
    try:
        source = codegen.generate(s)
    except codegen.CodegenError:
        return  # refused with a message: nothing written
    compile(source, "<export>", "exec")  # also catches duplicate parameters
    tree = ast.parse(source)
    bound, texts = user_names(s)
    user_ids = {codegen.py(n) for n in bound}
    assert len(user_ids) == len(bound), "two user names became one identifier"

    build = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build")
    template_in_build = {n for n in BUILD_TEMPLATE if n in user_ids} | {
        n for n in user_ids if NUMBERED.match(n)
    }
    assert not template_in_build, f"user names shadow generated ones: {template_in_build}"
    stray = {
        n
        for n in _names_in(build)
        if n not in BUILD_TEMPLATE | user_ids and not NUMBERED.match(n) and not FRESH.match(n)
    }
    assert not stray, f"identifiers in build that are neither template nor user: {stray}"

    tree.body.remove(build)  # the rest of the module
    outside = _names_in(tree) - MODULE_TEMPLATE - SUPPORT_IDS - {"build"}
    assert not outside, f"identifiers outside build: {outside}"

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            assert node.attr in ATTRIBUTES | SUPPORT_ATTRS, node.attr
        elif isinstance(node, ast.keyword) and node.arg is not None:
            assert node.arg in KEYWORDS | SUPPORT_IDS, node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            ok = v in STRINGS or v in SUPPORT_STRS or v in texts or DEVICE_COUNT.match(v)
            ok = ok or _is_template_doc(v, s) or _is_cpu_limit(v)
            assert ok, f"string literal not from the template nor a user name: {v!r}"


#: a field path as ``CPU_LIMITS`` names one (made of the scenario's structure, no name)
FIELD_PATH = re.compile(r"^call(\.[a-z_]+|\[\d+\])*$")


def _is_cpu_limit(v: str) -> bool:
    """A ``CPU_LIMITS`` entry: the code of an interpreter limit, or its field path."""
    return v in INTERP_CANNOT or bool(FIELD_PATH.match(v))


def _is_template_doc(v: str, s: Scenario) -> bool:
    docs = [
        f"{codegen._safe_doc(s.name)}: a Pallas mpmd call exported by mpmd-lab.",
        "Host values of the buffers the call takes",
        "(function, device mesh): the jitted call",
        "Inputs as jax arrays, each sharded by its partition spec",
    ]
    return any(v.startswith(d) for d in docs)


@pytest.mark.parametrize("name", gallery.names())
def test_gallery_exports_pass_the_safety_check(name):
    assert_export_is_safe(gallery.load(name))


@pytest.mark.fuzz
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(scenarios())
def test_export_never_lets_a_name_change_the_code(data):
    assert_export_is_safe(load_scenario(data))


def test_names_equal_to_generated_identifiers_do_not_collide():
    data = gallery.load("two-block-copy").to_dict()
    data["buffers"] = {"jnp": data["buffers"]["x"], "jnp_": data["buffers"]["x"]}
    data["call"]["args"] = [
        {"buffer": "jnp", "param": "kernel"},
        {"buffer": "jnp_", "param": "kernel_"},
    ]
    data["call"]["programs"][0]["body"][0]["ref"] = "kernel_"
    assert_export_is_safe(load_scenario(data))
