"""The retrace of a rejected kernel (``importer/rejected.py``) touches nothing of the
user's: it traces fresh copies of their function and of what reaches it, so their
functions keep their code (another thread calling them meanwhile runs their own code),
their compiled calls stay compiled (no ``jax.clear_caches()``), and the kernel is
reached through ``jax.jit``, ``plgpu.kernel``, a closure, the module's globals or its
own name; where only a change to the user's objects could reach it, nothing is shown.

Each case is a kernel JAX rejects at trace (an int32 value stored into a float32 ref),
imported by ``from_jax`` in a child process (real JAX, one CPU device)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mpmd_lab.importer.child import child_env

pytestmark = pytest.mark.slow  # imports kernels through real JAX in a child process

HERE = Path(__file__).resolve().parent

HEAD = """
import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

N = 256
OUT = jax.ShapeDtypeStruct((N,), jnp.float32)
SEEN = []  # the user's kernel's code, as each trace of the body saw it
"""

#: the kernel reached through jax.jit and plgpu.kernel's closure (built at import time)
VIA_CLOSURE = """
def kernel(x_ref, o_ref):
    SEEN.append(USER[0].__code__)
    o_ref[...] = x_ref[...] * 2.0
    o_ref[...] = x_ref[...].astype(jnp.int32)


USER = [kernel]


def make():
    return jax.jit(plgpu.kernel(kernel, out_type=OUT)), (jnp.arange(N, dtype=jnp.float32),)
"""

#: the kernel reached through the module's globals of a plain function
VIA_GLOBALS = """
def kernel(x_ref, o_ref):
    SEEN.append(USER[0].__code__)
    o_ref[...] = x_ref[...] * 2.0
    bad = x_ref[...].astype(jnp.int32)
    o_ref[...] = bad


USER = [kernel]


def run(x):
    return plgpu.kernel(kernel, out_type=OUT)(x)


def make():
    return run, (jnp.arange(N, dtype=jnp.float32),)
"""

#: the kernel calls itself by name: its own frame must reach the rewritten one too
RECURSIVE = """
def kernel(x_ref, o_ref, depth=2):
    SEEN.append(USER[0].__code__)
    if depth:
        return kernel(x_ref, o_ref, depth - 1)
    o_ref[...] = x_ref[...] * 2.0
    o_ref[...] = x_ref[...].astype(jnp.int32)


USER = [kernel]


def make():
    return jax.jit(plgpu.kernel(kernel, out_type=OUT)), (jnp.arange(N, dtype=jnp.float32),)
"""

#: two statements JAX rejects, the second inside a pl.when body: two retraces
TWO_ROUNDS = """
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    SEEN.append(USER[0].__code__)
    o_ref[...] = x_ref[...] * 2.0
    o_ref[...] = x_ref[...].astype(jnp.int32)

    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = x_ref[...].astype(jnp.int16)


USER = [kernel]


def make():
    call = plgpu.kernel(kernel, out_type=OUT, grid=(1,), grid_names=("b",))
    return jax.jit(call), (jnp.arange(N, dtype=jnp.float32),)
"""

#: pl.kernel as a decorator: the kernel in the (mesh, body) list of mpmd_map's closure
DECORATED = """
import functools
from jax.experimental import pallas as pl

USER = []


def keep(f):
    USER.append(f)
    return f


@functools.partial(pl.kernel, out_type=OUT, mesh=plgpu.Mesh())
@keep
def kernel(x_ref, o_ref):
    SEEN.append(USER[0].__code__)
    o_ref[...] = x_ref[...] * 2.0
    o_ref[...] = x_ref[...].astype(jnp.int32)


def make():
    return jax.jit(kernel), (jnp.arange(N, dtype=jnp.float32),)
"""

#: the kernel held by an object's attribute: reached only by changing the user's object
VIA_OBJECT = """
def kernel(x_ref, o_ref):
    SEEN.append(USER[0].__code__)
    o_ref[...] = x_ref[...] * 2.0
    o_ref[...] = x_ref[...].astype(jnp.int32)


USER = [kernel]


class Holder:
    def __init__(self):
        self.body = kernel

    def __call__(self, x):
        return plgpu.kernel(self.body, out_type=OUT)(x)


def make():
    return jax.jit(Holder()), (jnp.arange(N, dtype=jnp.float32),)
"""

CASES = {
    "via_closure": VIA_CLOSURE,
    "via_globals": VIA_GLOBALS,
    "recursive": RECURSIVE,
    "via_object": VIA_OBJECT,
    "decorated": DECORATED,
    "two_rounds": TWO_ROUNDS,
}

CHILD = """
import importlib.util, json, sys, types
import jax, jax.numpy as jnp
from jax import monitoring
from mpmd_lab.importer import from_jax

compiles = []
monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiles.append(event)
    if event == "/jax/core/compile/backend_compile_duration" else None
)
made = []
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    made.append((name, mod, *mod.make()))  # (making a mesh changes jit's cache key)
# the user's own jitted function, compiled before the imports
double = jax.jit(lambda x: x * 2)
x = jnp.arange(8.0)
double(x).block_until_ready()
before = (double._cache_size(), len(compiles))

out = {}
for name, mod, fn, args in made:
    funcs = {k: v for k, v in vars(mod).items() if isinstance(v, types.FunctionType)}
    codes = {k: f.__code__ for k, f in funcs.items()}
    user, user_code = mod.USER[0], mod.USER[0].__code__  # the kernel as the user wrote it
    module_dict = dict(vars(mod))
    imp = from_jax(fn, *args)
    out[name] = {
        "diagnostics": [d.code for d in imp.diagnostics],
        "left_out": [n.source.rsplit(":", 1)[1] for n in imp.scenario.not_imported]
        if imp.scenario is not None else None,
        "kinds": [st.kind for st in imp.scenario.call.programs[0].body]
        if imp.scenario is not None else None,
        "code_kept": user.__code__ is user_code
        and all(f.__code__ is codes[k] for k, f in funcs.items()),
        "globals_kept": all(vars(mod).get(k) is v for k, v in module_dict.items()),
        "seen": [c is user_code for c in mod.SEEN],
    }
    try:  # the user's kernel is rejected again, as before the import
        fn(*args) if not hasattr(fn, "trace") else fn.trace(*args)
    except ValueError as e:
        out[name]["again"] = "Invalid dtype for `swap`" in str(e)
    else:
        out[name]["again"] = False
double(x).block_until_ready()
out["compiled"] = [before, (double._cache_size(), len(compiles))]
print("RESULT " + json.dumps(out))
"""


def _line(source: str, text: str) -> str:
    """The line of ``text`` in a case's module (HEAD first)."""
    lines = (HEAD + source).splitlines()
    (i,) = [i for i, s in enumerate(lines) if text in s]
    return str(i + 1)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("retrace")
    paths = []
    for name, source in CASES.items():
        p = tmp / f"{name}.py"
        p.write_text(HEAD + source)
        paths.append(str(p))
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), *paths],
        env=child_env(1),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
    )
    lines = [s for s in r.stdout.splitlines() if s.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_the_users_compiled_calls_stay_compiled(results):
    """The user's jitted function, compiled before four imports of rejected kernels,
    is neither dropped from its cache nor compiled again by them."""
    (size, compiles), after = results["compiled"]
    assert size == 1 and compiles >= 1
    assert after == [size, compiles]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_users_functions_and_globals_are_untouched(results, name):
    """Every function of the user's module keeps its code object, every global its
    value; each trace of the body (JAX's and the retrace's) saw the user's kernel with
    its own code; and the kernel is rejected again after the import."""
    r = results[name]
    assert r["code_kept"] and r["globals_kept"] and r["again"]
    assert r["seen"] and all(r["seen"]), r["seen"]
    assert r["diagnostics"][0] == "SWAP_DTYPE_MISMATCH"


@pytest.mark.parametrize(
    "name,texts",
    [
        ("via_closure", ["o_ref[...] = x_ref[...].astype(jnp.int32)"]),
        ("via_globals", ["o_ref[...] = bad"]),
        ("recursive", ["o_ref[...] = x_ref[...].astype(jnp.int32)"]),
        ("decorated", ["o_ref[...] = x_ref[...].astype(jnp.int32)"]),
    ],
)
def test_the_kernel_is_reached_without_changing_the_users_objects(results, name, texts):
    """Through jax.jit and plgpu.kernel's closure, a plain function's globals, the
    kernel's own name, and pl.kernel's list of (mesh, body): what was traced opens,
    the rejected store left out at its line (the recursive kernel's inner calls run
    the rewritten body too, else JAX would reject the same line again and nothing
    would show)."""
    r = results[name]
    assert r["left_out"] == [_line(CASES[name], t) for t in texts]
    assert r["kinds"] == ["compute"], r["kinds"]
    assert r["diagnostics"][1] == "IMPORT_UNSUPPORTED"
    # JAX's trace, then the retrace: three more calls of the recursive kernel's body
    assert len(r["seen"]) == (6 if name == "recursive" else 2)


def test_a_kernel_reached_only_through_an_object_shows_nothing(results):
    """Held by an object's attribute, the kernel could be reached only by changing the
    user's object: JAX's rejection alone, as for a kernel without source."""
    r = results["via_object"]
    assert r["left_out"] is None and r["diagnostics"] == ["SWAP_DTYPE_MISMATCH"]
    assert r["seen"] == [True]  # JAX's trace only: no retrace ran


def test_a_second_rejection_is_traced_past_too(results):
    """The retrace's own rejection (in a nested pl.when body of the rewritten kernel)
    is found in the user's kernel it was made from, and left out in a second round."""
    r = results["two_rounds"]
    src = CASES["two_rounds"]
    lines = [_line(src, t) for t in ("astype(jnp.int32)", "astype(jnp.int16)")]
    assert r["left_out"] == lines
    assert r["diagnostics"][:2] == ["SWAP_DTYPE_MISMATCH"] * 2
    assert r["seen"] == [True] * 3  # JAX's trace and two retraces: the user's kernel unchanged
