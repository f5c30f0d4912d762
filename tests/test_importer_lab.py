"""An imported kernel in the Lab: the Session and the Lab open on an ``Imported``, the
problems show the user's line, an edit exports back to plain JAX; ``%%mpmd_lab`` and
``mpmd_lab.show`` in an IPython shell."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mpmd_lab.importer import child
from mpmd_lab.session import Session

pytestmark = pytest.mark.slow  # imports kernels through real JAX in child processes

KERNELS = Path(__file__).resolve().parent / "kernels"


@pytest.fixture(scope="module")
def ring():
    return child.run(f"{KERNELS / 'ring_shift_sem.py'}:make", timeout=120)


@pytest.fixture(scope="module")
def seed():
    return child.run(f"{KERNELS / 'err_peer_to_multicast.py'}:make", timeout=120)


def _line(name: str, text: str) -> int:
    lines = (KERNELS / f"{name}.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line and '"""' not in line)


def test_session_on_an_import_keeps_the_users_lines(ring):
    s = Session(ring)
    assert s.scenario == ring.scenario and s.imported is ring
    body = s.scenario.call.programs[0].body
    copy = next(i for i, st in enumerate(body) if st.kind == "copy")
    want = _line("ring_shift_sem", "plgpu.remote_ref(o_ref, right)[...] = x_ref[...]")
    assert s.source_of(f"call.programs[0].body[{copy}]") == f"{KERNELS}/ring_shift_sem.py:{want}"
    # every diagnostic the check finds carries the line of the statement it is about
    for d in s.diagnostics:
        if d.path.startswith("call.programs[0].body["):
            assert d.source is not None, d.one_line()
    # once the statements change, the old lines no longer describe them
    r = s.edit(("remove", f"call.programs[0].body[{copy}]", None))
    assert r.ok
    assert s.source_of(f"call.programs[0].body[{copy}]") is None
    # the edited kernel exports back to plain JAX
    source = s.export()
    assert "pl.semaphore_signal(" in source and "plgpu.kernel(" in source
    compile(source, "<exported>", "exec")


def test_session_on_a_failed_import_shows_jaxs_error(seed):
    """JAX rejects the kernel at trace: the session opens on what was traced (the
    statements before and around the rejected one), never valid, with JAX's error at
    its line first."""
    s = Session(seed)
    assert seed.scenario is not None and not seed.faithful and not s.valid
    kinds = [st.kind for st in s.scenario.call.programs[0].body]
    assert kinds[:2] == ["copy", "commit_smem"] and "semaphore_wait" in kinds
    (d,) = [d for d in s.diagnostics if d.code == "REF_PEER_TO_MULTICAST"]
    line = _line("err_peer_to_multicast", "plgpu.multicast_ref(plgpu.remote_ref(")
    assert d.source == f"{KERNELS}/err_peer_to_multicast.py:{line}"
    assert seed.diagnostics[0] == d


def test_lab_shows_the_problem_at_the_users_line(seed):
    from mpmd_lab.widgets import Lab

    lab = Lab(seed, background=False, graph=False)
    html = " ".join(
        getattr(k, "value", "")
        for box in lab.problems.section.children
        for k in [box, *getattr(box, "children", ())]
    )
    assert "REF_PEER_TO_MULTICAST" in html
    assert "▶" in html and "plgpu.multicast_ref(plgpu.remote_ref(o_ref, other)" in html
    assert "JAX would reject this" in lab.title.value


def test_lab_on_a_faithful_import(ring):
    from mpmd_lab.widgets import Lab

    lab = Lab(ring, background=False, graph=False)
    assert lab.state.scenario.name == ring.scenario.name
    assert "Not imported" not in " ".join(
        getattr(k, "value", "") for k in lab.problems.section.children
    )


def test_lab_on_a_partial_import_says_so_first():
    from mpmd_lab.widgets import Lab

    part = child.run(f"{KERNELS / 'exp_partial.py'}:make", timeout=120)
    assert not part.faithful
    lab = Lab(part, background=False, graph=False)
    texts = [
        getattr(k, "value", "")
        for box in lab.problems.section.children
        for k in [box, *getattr(box, "children", ())]
    ]
    texts = [t for t in texts if t]
    assert "Partial import" in texts[0] and "exp_partial.py:" in texts[0]
    assert not any("no problems found" in t for t in texts)
    assert "partial import: 1 construct(s) not imported" in lab.title.value
    assert "valid" not in lab.title.value.replace("not imported", "")
    assert not lab.state.valid


SHELL = textwrap.dedent(
    '''
    import json, os
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mpmd_lab")
    KERNEL = """
    import jax, jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def kernel(x_ref, o_ref, sem):
        other = 1 - lax.axis_index("dev")
        plgpu.remote_ref(o_ref, other)[...] = x_ref[...]
        pl.semaphore_signal(sem, device_id=other)
        pl.semaphore_wait(sem)

    def make():
        mesh = jax.make_mesh((2,), ("dev",))
        call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                            scratch_types=[plgpu.SemaphoreType.REGULAR])
        fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=jax.P("dev"),
                                   out_specs=jax.P("dev"), check_vma=False))
        x = jax.device_put(jnp.arange(256.0), jax.NamedSharding(mesh, jax.P("dev")))
        return fn, (x,)
    """
    out = {}
    r = ip.run_cell("%%mpmd_lab --no-lab -o imp\\n" + KERNEL)
    imp = ip.user_ns["imp"]
    out["faithful"] = [r.success, imp.faithful, imp.scenario.name]
    bad = KERNEL.replace(
        "plgpu.remote_ref(o_ref, other)[...]",
        "plgpu.remote_ref(plgpu.multicast_ref(o_ref, 'dev'), other)[...]",
    )
    r = ip.run_cell("%%mpmd_lab\\n" + bad)
    lab = r.result
    seed = ip.user_ns["imported"]
    d = seed.diagnostics[0]
    out["seed"] = [type(lab).__name__, d.code, d.source.rpartition(":")[2]]
    from mpmd_lab.importer import frames as F
    out["seed_opened"] = [
        F.display(d.source),
        seed.scenario is not None and bool(seed.scenario.call.programs[0].body),
        seed.faithful,
        [F.display(x.source) for x in seed.scenario.not_imported],
        lab.state.scenario.name,
    ]
    r = ip.run_cell("import mpmd_lab; lab2 = mpmd_lab.show(*make())")
    out["show"] = [r.success, type(ip.user_ns["lab2"]).__name__]
    partial = KERNEL.replace(
        "plgpu.remote_ref(o_ref, other)[...] = x_ref[...]", "o_ref[...] = jnp.exp(x_ref[...])"
    )
    n = ip.execution_count
    r = ip.run_cell("%%mpmd_lab --no-lab -o part\\n" + partial, store_history=True)
    imp = ip.user_ns["part"]
    d = next(d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED")
    out["magic_partial"] = [n, imp.faithful, imp.ok, d.message]
    n = ip.execution_count
    ip.run_cell(partial.lstrip(), store_history=True)  # the cell as typed: code on line 1
    ip.run_cell("fn, args = make(); imp3 = mpmd_lab.from_jax(fn, *args)", store_history=True)
    imp = ip.user_ns["imp3"]
    d = next(d for d in imp.diagnostics if d.code == "IMPORT_UNSUPPORTED")
    out["cell_partial"] = [n, imp.faithful, d.message]
    r = ip.run_cell("%%mpmd_lab nothing_here\\nx = 1")
    out["missing"] = [r.success, type(r.error_in_exec).__name__]
    print("RESULT " + json.dumps(out))
    '''
)


def test_cell_magic_and_show_in_an_ipython_shell():
    done = subprocess.run(
        [sys.executable, "-c", SHELL],
        capture_output=True,
        text=True,
        timeout=300,
        env=child.child_env(2),
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["faithful"] == [True, True, "kernel"]
    # line 9 of the cell's body (the magic line aside) is the remote_ref(multicast_ref(..)) store
    assert out["seed"] == ["Lab", "REF_MULTICAST_TO_PEER", "9"]
    # the Lab opens on what was traced: the rejected store left out, at the user's cell
    where, traced, faithful, left, opened = out["seed_opened"]
    assert (traced, faithful, opened) == (True, False, "kernel")
    assert where.startswith("cell [") and where.endswith(", line 10"), where
    assert left == [where], left
    assert out["show"] == [True, "Lab"]
    assert out["missing"] == [False, "NameError"]
    # a construct left out is named at the cell and line the user sees, with their text
    n, faithful, ok, message = out["magic_partial"]
    assert (faithful, ok) == (False, False)
    assert message.endswith(f"at cell [{n}], line 10: o_ref[...] = jnp.exp(x_ref[...])"), message
    n, faithful, message = out["cell_partial"]
    assert not faithful
    assert message.endswith(f"at cell [{n}], line 8: o_ref[...] = jnp.exp(x_ref[...])"), message
