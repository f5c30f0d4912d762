"""Scenario -> plain JAX source code.

The one way a scenario becomes a real call: ``mpmd-lab export`` writes this source
to a file, and the runtime executes the very same source in a child process (less
``CPU_LIMITS``, which only the file's ``main`` reads), so an exported file always
reproduces what ``run`` did. The file runs as one process, or as one process per host
(multi-controller JAX: ``callsupport.start_processes``), see ``_HEADER``.

Only validated names (ASCII identifiers, never keywords) and numbers reach the
source, each through ``repr``; nothing a scenario holds is evaluated.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Collection
from typing import Any

from mpmd_lab import callsupport, sharding
from mpmd_lab import expr as E
from mpmd_lab.diagnostics import interpreter_limit
from mpmd_lab.dtypes import jnp_expr as dtype_expr
from mpmd_lab.ops import Let
from mpmd_lab.plan import expr_fields
from mpmd_lab.scenario import Program, Scenario, ref_result_keys

#: Names the generated module uses itself; user names equal to one get a ``_`` suffix.
RESERVED = frozenset(
    {
        "np",
        "jnp",
        "jax",
        "lax",
        "pl",
        "plgpu",
        "P",
        "NamedSharding",
        "json",
        "sys",
        "math",
        "hashlib",
        "kernel",
        "call",
        "build",
        "main",
        "make_inputs",
        "place",
        "interp",
        "captured",
        "device_mesh",
        "inputs",
        "outs",
        "result",
        "fn",
        "INTERPRET",
        "DETECT_RACES",
        "NUM_DEVICES",
        "DEVICE_MESH",
        "SHARD_MAP",
        "BUFFERS",
        "ARG_ORDER",
        "OUTPUT_NAMES",
        "CPU_LIMITS",
        "os",
    }
    | {n for n in dir(callsupport) if not n.startswith("__")}
)


class CodegenError(ValueError):
    """The scenario cannot be written as a JAX call (``path``: where)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


#: generated per-program names (``program0``, ``mesh1``): user names like them get a ``_``
_NUMBERED = re.compile(r"^(program|mesh)[0-9]+$")


def py(name: str) -> str:
    """A user name as a safe Python identifier in generated code.

    Names the template uses, and names that start or end with ``_``, get a ``_``
    suffix; so ``jnp`` -> ``jnp_`` and ``jnp_`` -> ``jnp__`` never meet (injective).
    """
    if not name.isidentifier() or not name.isascii():
        raise CodegenError("", f"{name!r} is not an identifier")
    clash = name in RESERVED or name.startswith("_") or name.endswith("_")
    return f"{name}_" if clash or _NUMBERED.match(name) else name


def ref_expr(name: str) -> str:
    """A body ref name (``param`` or tuple leaf ``param[i]``) as an expression."""
    if name.endswith("]") and "[" in name:
        head, _, idx = name[:-1].partition("[")
        return f"{py(head)}[{int(idx)}]"
    return py(name)


class Source(E.Writer):
    """What an op's ``source`` method writes with: names, expressions, bodies.

    Axis names become ``lax.axis_index(name)``, loop variables their Python names,
    ``axis_size`` of a device-mesh axis its literal size (under shard_map). ``body``
    writes a nested body (a loop's, a condition's) in its own scope; ``fresh`` makes a
    new local name.
    """

    def __init__(self, scenario: Scenario, path: str = "", bound: set[str] | None = None):
        self.scenario = scenario
        self.path = path
        self.loop_vars: set[str] = set()
        self.bound: set[str] = set() if bound is None else set(bound)
        self._fresh = 0
        self._refs: set[str] | None = None
        #: a nested body's lets that re-bind a name of an outer scope, by their Python
        #: names (``statements``)
        self.renamed: dict[str, str] = {}

    # names and expressions
    def name(self, n: str) -> str:
        return self.name_of(n) if n in self.loop_vars else f"lax.axis_index({n!r})"

    def name_of(self, var: str) -> str:
        """A loop variable's Python name: its own, or ``_NAME_i`` where a ref, a view or
        a capture has that name (the two are apart in a scenario, one scope in Python;
        ``py`` never makes a name that starts with ``_`` and does not end with one)."""
        if var in self._ref_names():
            return f"_{var}_i"
        return py(var)

    def _ref_names(self) -> set[str]:
        """Every parameter, capture and view name of the scenario (once per writer)."""
        if self._refs is None:
            c = self.scenario.call
            self._refs = set(params_of(self.scenario)) | {cap.name for cap in c.captures}
            for p in c.programs:
                self._refs |= _lets(p.body)
        return self._refs

    def axis_size(self, n: str) -> str:
        # (a device-mesh axis is bound only under shard_map: without it JAX's
        # lax.axis_size raises, and so must the generated call)
        s = self.scenario
        size = (s.device_mesh or {}).get(n) if s.run.shard_map is not False else None
        return repr(size) if size else f"lax.axis_size({n!r})"

    def expr(self, e: E.Expr) -> str:
        return e.source(self)

    def ref(self, name: str) -> str:
        return self.renamed.get(name) or ref_expr(name)

    def axes(self, axes: str | list[str]) -> str:
        return repr(axes) if isinstance(axes, str) else repr(tuple(axes))

    def fresh(self, prefix: str) -> str:
        self._fresh += 1
        return f"_{prefix}{self._fresh}"

    def fail(self, message: str) -> None:
        raise CodegenError(self.path, message)

    def statements(
        self, body: list[Any], base: str, nested: bool = False, shared_scope: bool = False
    ) -> list[str]:
        """A body's lines; its lets are names of this body only. In a ``nested`` body (a
        loop's or a condition's) a let that re-binds a name of an outer scope gets a
        fresh Python name, which the rest of the body reads it by, where the same name
        would mean another view: in a function (a condition's, ``pl.loop``'s,
        ``fori_loop``'s) read before the let (Python makes the name local to the whole
        function: UnboundLocalError), and always in a ``for`` (``shared_scope``: the
        next trip and the code after the loop would see the inner view)."""
        outer_bound, outer_path, outer_renamed = set(self.bound), self.path, dict(self.renamed)
        lines: list[str] = []
        try:
            for j, st in enumerate(body):
                self.path = f"{base}[{j}]"
                for _f, name, _a in st.ref_fields():
                    if name.partition("[")[0] not in self.bound:
                        raise CodegenError(self.path, f"no parameter or view named {name!r}")
                if isinstance(st, Let):
                    view = self.stack(self.ref(st.ref), st.transforms)
                    if (
                        nested
                        and st.let in outer_bound
                        and (shared_scope or _reads(body[:j], st.let))
                    ):
                        self.renamed[st.let] = f"{self.fresh('let')}_{py(st.let).strip('_')}"
                    else:
                        self.renamed.pop(st.let, None)
                    lines.append(f"{self.ref(st.let)} = {view}")
                    self.bound.add(st.let)
                else:
                    lines += st.source(self)
        finally:
            self.bound, self.path, self.renamed = outer_bound, outer_path, outer_renamed
        return lines

    def body(
        self, body: list[Any], loop_var: str | None = None, shared_scope: bool = False
    ) -> list[str]:
        """A nested body (a loop's or a condition's) written by its op's ``source``
        (``shared_scope``: a Python ``for``'s, in the scope around it)."""
        had = loop_var in self.loop_vars if loop_var else True
        if loop_var:
            self.loop_vars.add(loop_var)
        try:
            return self.statements(body, f"{self.path}.body", True, shared_scope)
        finally:
            if loop_var and not had:
                self.loop_vars.discard(loop_var)

    def stack(self, base: str, transforms: list[Any]) -> str:
        out, path = base, self.path
        for i, t in enumerate(transforms):
            self.path = f"{path}.transforms[{i}]"
            out = t.source(out, self)
        self.path = path
        return out


def stack_expr(base: str, transforms: list[Any], scenario: Scenario, path: str) -> str:
    """``base`` with a transform stack applied, as an expression."""
    return Source(scenario, path).stack(base, transforms)


def _mesh_kwargs(p: Program) -> list[str]:
    """The Mosaic GPU mesh of a program as keyword arguments (``plgpu.Mesh`` / ``plgpu.kernel``)."""
    m = p.mesh
    kw = [
        f"grid={tuple(m.grid.values())!r}",
        f"grid_names={tuple(m.grid)!r}",
        f"cluster={tuple(m.cluster.values())!r}",
        f"cluster_names={tuple(m.cluster)!r}",
    ]
    if m.threads is not None:
        kw += [f"num_threads={m.threads.count!r}", f"thread_name={m.threads.name!r}"]
    return kw


def _mesh_expr(p: Program) -> str:
    return "plgpu.Mesh(" + ", ".join(_mesh_kwargs(p)) + ")"


def _scratch_expr(s: Any) -> str:
    for t in s.transforms:
        if not t.SCRATCH_ONLY:
            raise CodegenError("", f"scratch transforms are tiling or swizzle, not {t.op}")
    return s.source()


def params_of(scenario: Scenario) -> list[str]:
    """Kernel parameter names in order: arguments, outputs, scratch."""
    c = scenario.call
    return [a.param for a in c.args] + list(c.outputs) + list(c.scratch)


def transform_expr(base: str, t: Any, scenario: Scenario, path: str = "") -> str:
    """``base`` with one transform applied, as an expression."""
    return t.source(base, Source(scenario, path))


def _reads(body: list[Any], name: str) -> bool:
    """Whether a statement of ``body`` (or of a body nested in one) may read the view
    ``name``: names it as a ref or a let's source, or as a word of an index expression
    (a load from it; a loop variable of the same name counts too: it only costs a fresh
    name)."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for st in body:
        heads = [n.partition("[")[0] for _f, n, _a in st.ref_fields()]
        if name in heads or (isinstance(st, Let) and st.ref.partition("[")[0] == name):
            return True
        if any(word.search(e.label()) for _f, e in expr_fields(st)):
            return True
        if getattr(st, "BODY", False) and _reads(st.body, name):
            return True
    return False


def _lets(body: list[Any]) -> set[str]:
    """The view names a body's lets make (nested bodies too)."""
    out: set[str] = set()
    for st in body:
        if isinstance(st, Let):
            out.add(st.let)
        elif getattr(st, "BODY", False):
            out |= _lets(st.body)
    return out


def _kernel_scratch(scenario: Scenario) -> dict[str, Any]:
    """The scratch the kernel takes as operands (``scratch_types``), in order."""
    return {n: x for n, x in scenario.call.scratch.items() if x.alloc == "scratch_types"}


def _allocating(i: int, scenario: Scenario) -> list[str]:
    """``program{i}`` when the body allocates scratch itself: it gets its ``pl.get_global``
    semaphores and its ``pl.run_scoped`` scratch and calls ``program{i}_body`` with every
    parameter (empty: the kernel passes them all)."""
    c = scenario.call
    own = [n for n, x in c.scratch.items() if x.alloc != "scratch_types"]
    if not own:
        return []
    outer = [n for n in params_of(scenario) if n not in own]
    lines = [f"def program{i}({', '.join(py(n) for n in outer)}):"]
    for n, x in c.scratch.items():
        if x.alloc == "get_global":
            lines.append(f"    {py(n)} = pl.get_global({_scratch_expr(x)})")
    call = f"program{i}_body({', '.join(py(n) for n in params_of(scenario))})"
    scoped = [n for n, x in c.scratch.items() if x.alloc == "run_scoped"]
    if not scoped:
        return [*lines, f"    {call}"]
    types = ", ".join(_scratch_expr(c.scratch[n]) for n in scoped)
    names = ", ".join(py(n) for n in scoped)
    return [*lines, f"    pl.run_scoped(lambda {names}: {call}, {types})"]


def _program_fn(i: int, p: Program, scenario: Scenario) -> list[str]:
    c = scenario.call
    params = ", ".join(py(n) for n in params_of(scenario))
    wrapper = _allocating(i, scenario)
    lines = [f"def program{i}{'_body' if wrapper else ''}({params}):"]
    for cap in c.captures:
        lines.append(f"    {py(cap.name)} = captured[{cap.name!r}]")
    bound = set(params_of(scenario)) | {cap.name for cap in c.captures}
    writer = Source(scenario, bound=bound)
    lines += [
        "    " + line if line else ""
        for line in writer.statements(p.body, f"call.programs[{i}].body")
    ]
    if len(lines) == 1 + len(c.captures):
        lines.append("    pass")
    return lines + wrapper


def _out_types(scenario: Scenario) -> str:
    items = [
        f"jax.ShapeDtypeStruct({tuple(o.shape)!r}, {dtype_expr(o.dtype)})"
        for o in scenario.call.outputs.values()
    ]
    return "(" + "".join(f"{x}, " for x in items) + ")"


def output_names(scenario: Scenario) -> list[str]:
    """Result keys in order: the outputs, then each as_ref buffer's final value."""
    c = scenario.call
    refs = [b for b in _input_names(scenario) if scenario.buffers[b].as_ref]
    return list(c.outputs) + list(ref_result_keys(c.outputs, refs).values())


def _input_names(scenario: Scenario) -> list[str]:
    """Buffers the call takes, in first-use order (arguments, then captures)."""
    seen: list[str] = []
    for a in scenario.call.args:
        for b in [a.buffer] if hasattr(a, "buffer") else a.tuple:
            if b not in seen:
                seen.append(b)
    for cap in scenario.call.captures:
        if cap.buffer not in seen:
            seen.append(cap.buffer)
    return [b for b in seen if b in scenario.buffers]


def generate(
    scenario: Scenario,
    *,
    interpret: str | None = None,
    detect_races: bool | None = None,
    analysis: Any = None,
    cpu_limits: bool = True,
) -> str:
    """Self-contained JAX source for the scenario's call (see module docstring).

    ``cpu_limits``: find what JAX's CPU interpreter cannot run of the call (from
    ``analysis``, computed when not given), so that the script refuses on a CPU with a
    sentence instead of crashing; the runtime, which never calls ``main``, skips it."""
    s = scenario
    c = s.call
    if interpret is None:
        interpret = s.run.interpret
    if detect_races is None:
        detect_races = s.run.detect_races
    cpu_limits_ = {
        mode: cpu_limit_of(s, mode, analysis) if cpu_limits else None
        for mode in dict.fromkeys([interpret, "hlo"])
        if mode is not None
    }
    names = params_of(s) + [cap.name for cap in c.captures]
    for name in names:
        if names.count(name) > 1:
            raise CodegenError("call", f"two kernel parameters or captures named {name!r}")
    if c.entry == "plgpu.kernel" and len(c.programs) != 1:
        raise CodegenError("call.programs", "plgpu.kernel takes exactly one program (one mesh)")
    for i, a in enumerate(c.args):
        for b in [a.buffer] if hasattr(a, "buffer") else a.tuple:
            if b not in s.buffers:
                raise CodegenError(f"call.args[{i}]", f"no buffer {b!r}")
    for i, cap in enumerate(c.captures):
        if cap.buffer not in s.buffers:
            raise CodegenError(f"call.captures[{i}]", f"no buffer {cap.buffer!r}")

    inputs = _input_names(s)
    ndev = s.num_devices
    use_shard_map = s.device_mesh is not None and s.run.shard_map is not False
    axes = tuple(s.device_mesh or {})
    refs = [b for b in inputs if s.buffers[b].as_ref]

    L: list[str] = []
    L += [
        f'"""{_safe_doc(s.name)}: a Pallas mpmd call exported by mpmd-lab.',
        "",
        *_HEADER,
        '"""',
        "",
        "import json",
        "import os",
        "import sys",
        "",
        "# ---- support code (toolkit/callsupport.py) ----",
        _support_source(),
        _device_count_preamble(ndev, s.device_mesh is not None),
        "import jax",
        "import jax.numpy as jnp",
        "from jax import lax",
        "from jax.experimental import pallas as pl",
        "from jax.experimental.pallas import mosaic_gpu as plgpu",
        "from jax.sharding import NamedSharding",
        "from jax.sharding import PartitionSpec as P",
        "",
        "# ---- the scenario ----",
        f"NUM_DEVICES = {ndev!r}",
        f"DEVICE_MESH = {dict(s.device_mesh or {})!r}",
        f"SHARD_MAP = {use_shard_map!r}",
        f"INTERPRET = {interpret!r}  # 'gpu', 'hlo', or None to compile for a GPU",
        f"DETECT_RACES = {bool(detect_races)!r}",
        "# by CPU interpreter: what it cannot run of this call (code, field path), or None",
        f"CPU_LIMITS = {cpu_limits_!r}",
        "# outputs in declared order, then the final values of as_ref buffers",
        f"OUTPUT_NAMES = {output_names(s)!r}",
        "",
        "",
        "def make_inputs():",
        '    """Host values of the buffers the call takes (global shapes), in call order."""',
        "    return {",
    ]
    for b in inputs:
        buf = s.buffers[b]
        init = buf.init if isinstance(buf.init, str) else buf.init
        L.append(
            f"        {b!r}: host_array({init!r}, {tuple(buf.shape)!r}, {buf.dtype!r}, "
            f"{buf.seed!r}, NUM_DEVICES, {tuple(s.global_shape(b))!r}),"
        )
    L += ["    }", "", ""]

    L += [
        "def build(interpret=INTERPRET, detect_races=DETECT_RACES):",
        '    """(function, device mesh): the jitted call and the jax mesh it runs on (or None)."""',
        "    interp = interpret_params(interpret, detect_races)",
        "    captured = {}",
    ]
    for i, p in enumerate(c.programs):
        L.append(f"    mesh{i} = {_mesh_expr(p)}")
    kernel_scratch = _kernel_scratch(s)
    scratch = "[" + ", ".join(_scratch_expr(x) for x in kernel_scratch.values()) + "]"
    for i, p in enumerate(c.programs):
        L += ["", *("    " + line for line in _program_fn(i, p, s))]
    L.append("")
    if c.entry == "plgpu.kernel":
        kw = _mesh_kwargs(c.programs[0])
        L += [
            "    kernel = plgpu.kernel(",
            "        program0,",
            f"        out_type={_out_types(s)},",
            f"        scratch_types={scratch},",
            f"        {', '.join(kw)},",
            "        interpret=interp,",
            "    )",
        ]
    else:
        n = len(c.programs)
        bodies = "program0" if n == 1 else "[" + ", ".join(f"program{i}" for i in range(n)) + "]"
        meshes = "mesh0" if n == 1 else "[" + ", ".join(f"mesh{i}" for i in range(n)) + "]"
        L += [
            "    kernel = pl.kernel(",
            f"        {bodies},",
            f"        out_type={_out_types(s)},",
            f"        mesh={meshes},",
        ]
        if kernel_scratch:
            L.append(f"        scratch_types={scratch},")
        L += ["        interpret=interp,", "    )"]

    # the traced function: inputs -> outputs (and final values of Refs)
    L += ["", f"    def call({', '.join(py(b) for b in inputs)}):"]
    for b in refs:
        L.append(f"        {py(b)} = jax.new_ref({py(b)})")
    for cap in c.captures:
        L.append(f"        captured[{cap.name!r}] = {py(cap.buffer)}")
    call_args = []
    for a in c.args:
        if hasattr(a, "buffer"):
            call_args.append(stack_expr(py(a.buffer), a.transforms, s, "call.args"))
        else:
            leaves = [stack_expr(py(b), a.transforms, s, "call.args") for b in a.tuple]
            call_args.append("(" + "".join(f"{x}, " for x in leaves) + ")")
    L.append(f"        outs = kernel({', '.join(call_args)})")
    L.append("        result = {}")
    for j, name in enumerate(c.outputs):
        L.append(f"        result[{name!r}] = outs[{j}]")
    ref_keys = ref_result_keys(c.outputs, refs)
    for b in refs:
        L.append(f"        result[{ref_keys[b]!r}] = {py(b)}[...]")
    L.append("        return result")
    L.append("")
    if s.device_mesh is not None:
        if s.device_order is not None:  # the device ids in the user's order
            L += [
                f"    devices = [jax.devices()[k] for k in {list(s.device_order)!r}]",
                "    device_mesh = jax.sharding.Mesh("
                f"np.array(devices).reshape({tuple(s.device_mesh.values())!r}), {axes!r})",
            ]
        else:
            L += [
                "    device_mesh = jax.make_mesh(",
                f"        {tuple(s.device_mesh.values())!r},",
                f"        {axes!r},",
                "        devices=mesh_devices(NUM_DEVICES),",
                "    )",
            ]
        if use_shard_map:
            in_specs = "(" + "".join(f"{_in_spec(s, b)}, " for b in inputs) + ")"
            specs = {k: _spec(o.spec, o.shape, s) for k, o in c.outputs.items()}
            for b in refs:
                specs[ref_keys[b]] = _in_spec(s, b)
            out_specs = "{" + ", ".join(f"{k!r}: {v}" for k, v in specs.items()) + "}"
            L += [
                "    fn = jax.shard_map(",
                "        call,",
                "        mesh=device_mesh,",
                f"        in_specs={in_specs},",
                f"        out_specs={out_specs},",
                "        check_vma=False,",
                "    )",
                "    return jax.jit(fn), device_mesh",
            ]
        else:
            L.append("    return jax.jit(call), device_mesh")
    else:
        L.append("    return jax.jit(call), None")
    L += [
        "",
        "",
        "def place(inputs, device_mesh):",
        '    """Inputs as jax arrays, each sharded by its partition spec."""',
        "    if device_mesh is None:",
        "        return [jnp.asarray(v) for v in inputs.values()]",
        "    specs = {",
        *(f"        {b!r}: {_in_spec(s, b)}," for b in inputs),
        "    }",
        "    return [shard(v, NamedSharding(device_mesh, specs[k])) for k, v in inputs.items()]",
        "",
        "",
        *_MAIN,
        "",
    ]
    return "\n".join(L)


def _spec(spec: Any, shape: list[int], s: Scenario) -> str:
    """A partition spec as the source that makes it (None: dim 0 over every axis)."""
    return sharding.text(spec, len(shape), s.device_mesh or {})


def _in_spec(s: Scenario, buf: str) -> str:
    return _spec(s.buffer_spec(buf), s.buffers[buf].shape, s)


def _safe_doc(name: str) -> str:
    return "".join(ch for ch in name if ch.isalnum() or ch in "-_")


def _support_source() -> str:
    src = inspect.getsource(callsupport)
    body = src.split('"""', 2)[2]  # drop the module docstring
    return body.strip() + "\n\n"


def _device_count_preamble(ndev: int, has_mesh: bool) -> str:
    """Simulated CPU devices must be requested before jax is imported: all of the
    mesh's in one process, an even share in each of several; a count already set is kept."""
    if not has_mesh or ndev <= 1:
        return ""
    return (
        "# Simulated CPU devices for the device mesh (set before jax starts): one process\n"
        "# has them all, each of several processes its share; a count already set is kept.\n"
        'if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):\n'
        '    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + (\n'
        '        " --xla_force_host_platform_device_count="\n'
        f"        + str(max(1, {int(ndev)} // launched_processes(os.environ)))\n"
        "    )\n\n"
    )


def cpu_limit_of(scenario: Scenario, interpret: str | None, analysis: Any = None) -> Any:
    """``(code, field path)`` of the first thing JAX's CPU interpreter ``interpret``
    (``"gpu"``, ``"hlo"``) cannot run of the call, or None (it can; or None: compiled).
    ``analysis``: the scenario's, when the caller has it (for its own interpreter)."""
    if interpret is None:
        return None
    if analysis is None or interpret != scenario.run.interpret:
        from mpmd_lab.validate.analysis import analyze_rules

        run = scenario.run.model_copy(update={"interpret": interpret})
        other = scenario.model_copy(update={"run": run})
        # (the plan does not read the interpreter: the analysis's serves, not compiled again)
        plan = analysis.plan if analysis is not None and analysis.plan.fits(other) else None
        analysis = analyze_rules(other, plan=plan)
    d = next((d for d in analysis.diagnostics if interpreter_limit(d)), None)
    return None if d is None else (d.code, d.path or "call")


#: the exported file's docstring after its first line: how to run it, alone or per host
_HEADER = """\
Run it as one process (every device of this machine; CPU devices are simulated):

    python this_file.py [--json] [--compile | --interpret] [--expect RUN.json]

On a GPU the kernel is compiled and run; on a CPU it runs in JAX's Pallas interpreter
(--compile, --interpret choose). Where JAX's CPU interpreter cannot run the call
(CPU_LIMITS below) the file says so on a CPU and exits 2: there, simulate the scenario
with `mpmd-lab run SCENARIO.json --backend simulate`. --expect compares the outputs
with a `mpmd-lab run --json` result (or this file's own --json output): exit 1 when
they differ.

Or as one process per host (multi-controller JAX): the call's devices are split
evenly over the processes, process 0's first; every process runs the call on the
global mesh and process 0 gathers the outputs and prints them. On a GPU cluster:

    srun --nodes=2 --ntasks-per-node=1 python this_file.py --json    (SLURM)
    mpirun -n 2 -H host0,host1 python this_file.py --json            (Open MPI)

JAX finds the coordinator itself. Without a launcher, on each host i of N:

    MPMD_LAB_COORDINATOR=host0:PORT MPMD_LAB_NUM_PROCESSES=N MPMD_LAB_PROCESS_ID=i \\
        python this_file.py

On one machine with CPU devices: `mpmd-lab run SCENARIO.json --processes 2`, or the
line above twice with MPMD_LAB_COORDINATOR=127.0.0.1:PORT (CPU devices talk through
gloo; across processes the file runs JAX's HLO interpreter, as JAX's GPU interpreter
hung there).
See docs/CLUSTER.md in mpmd-lab.""".splitlines()

#: the exported file's ``main``
_MAIN = """\
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    processes = start_processes(os.environ)
    compiled = "--compile" in argv or (jax.default_backend() == "gpu" and "--interpret" not in argv)
    # across processes JAX's GPU interpreter hangs (jax 0.12, CPU): its HLO interpreter runs
    mode = None if compiled else INTERPRET if processes == 1 else "hlo"
    if mode is not None and CPU_LIMITS.get(mode) is not None:
        print(
            "JAX's %s interpreter cannot run this call (%s at %s)" % (mode, *CPU_LIMITS[mode])
            + ": run this file on a GPU, or simulate the scenario on this machine: "
            "mpmd-lab run SCENARIO.json --backend simulate",
            file=sys.stderr,
        )
        return 2
    if processes > 1 and not DEVICE_MESH:
        print("this call runs on one device: launch it as one process", file=sys.stderr)
        return 2
    fn, device_mesh = build(mode)
    outputs = fn(*place(make_inputs(), device_mesh))
    outputs = {k: fetch(outputs[k]) for k in OUTPUT_NAMES}  # every process takes part
    if jax.process_index() != 0:
        return 0
    if "--json" in argv:
        print(json.dumps(encode_outputs(outputs)))
    else:
        for name, value in outputs.items():
            print(f"{name}: shape={value.shape} dtype={value.dtype}")
            print(value)
    if "--expect" in argv:
        with open(argv[argv.index("--expect") + 1]) as f:
            expected = json.load(f)
        expected = expected["outputs"] if "status" in expected else expected
        got = encode_outputs(outputs)
        differ = [k for k in OUTPUT_NAMES if got[k] != expected.get(k)]
        if differ:
            print("outputs differ from the expected ones: " + ", ".join(differ), file=sys.stderr)
            return 1
        print("outputs equal the expected ones", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
""".splitlines()


def global_shape(shape: list[int], num_devices: int) -> tuple[int, ...]:
    """A per-device shape's global shape: dim 0 times the device count."""
    return (shape[0] * num_devices, *shape[1:]) if shape else ()


__all__ = [
    "CodegenError",
    "generate",
    "global_shape",
    "output_names",
    "params_of",
    "py",
    "math",
]


def statement_line(
    scenario: Scenario, stmt: Any, path: str = "", loop_vars: Collection[str] = ()
) -> str:
    """One statement on one line, as the kernel's source writes it (``x = recv.at[0]``,
    ``pl.semaphore_wait(sem)``; ``loop_vars``: the loops' variables in scope); a loop
    or a condition by its head alone (its body is its own statements'). A statement
    the source writes in several lines gives its kind and label (``dot: c <- a @ b``),
    one it cannot write its label."""
    g = Source(scenario, path)
    g.loop_vars |= set(loop_vars)
    try:
        if isinstance(stmt, Let):
            return f"{py(stmt.let)} = {g.stack(ref_expr(stmt.ref), stmt.transforms)}"
        if getattr(stmt, "BODY", False):
            lines = stmt.model_copy(update={"body": []}).source(g)
            head = [x for x in lines if x and not x[0].isspace()]
            if head and head[0].startswith("@"):  # a decorated function: the two lines
                return " ".join(head[:2])
            return head[0] if head and head[0].startswith("for ") else head[-1]
        lines = [x for x in stmt.source(g) if x.strip()]
        return lines[0] if len(lines) == 1 else f"{stmt.kind}: {stmt.label()}"
    except (CodegenError, ValueError, KeyError, IndexError):
        return stmt.label()
