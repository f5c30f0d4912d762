"""The static check of a long chain of views (issue 16) is linear in its length, and
no less correct: each view's rules are computed once from its source view's answer
(``Plan.first_step``, ``validate.lower.LowerCtx.view``), and agree with walking every
view's whole stack from its buffer. The chains are generated here, not committed."""

from __future__ import annotations

import copy
import json
import random
import time

from mpmd_lab import layout_rules as L
from mpmd_lab.plan import compile
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check
from mpmd_lab.validate.context import Ctx
from mpmd_lab.validate.lower import LowerCtx

from bench.scaling import chain_of_views


def test_the_issue_chain_is_checked_and_valid() -> None:
    """800 lets x 64 transforms x 800 copies: the file that took minutes. (The time is
    the bench's row; the bound here only says it did not go quadratic again.)"""
    text = json.dumps(chain_of_views(800), separators=(",", ":"))
    assert len(text) > 1_400_000
    t0 = time.perf_counter()
    diags = check(load_scenario(text))
    took = time.perf_counter() - t0
    # every view is valid; the only note is the CPU interpreter's (it runs no reshape)
    assert [(d.code, d.severity) for d in diags] == [("GPU_INTERP_UNSUPPORTED_TRANSFORM", "info")]
    assert diags[0].path == "call.programs[0].body[0].transforms[0]"
    assert took < 120, f"{took:.0f} s"


def test_an_error_deep_in_the_chain_is_found_where_it_is() -> None:
    """A negative slice start in the last of 300 views (19,200 steps from the buffer):
    the lowering's rule finds it there, through the chain."""
    d = chain_of_views(300, copies=1)
    body = d["call"]["programs"][0]["body"]
    body[299]["transforms"][-1] = {"op": "at", "index": [{"ds": [-4, 8]}]}
    body[300] = {"op": "copy", "src": "v299", "dst": "out"}
    d["call"]["outputs"]["out"]["shape"] = [8, 64]
    diags = check(load_scenario(d))
    errors = [(x.code, x.path) for x in diags if x.is_error]
    assert errors[0] == ("AT_NEGATIVE_SLICE", "call.programs[0].body[299].transforms[63].index[0]")


def test_a_bad_reshape_deep_in_the_chain_is_found_where_it_is() -> None:
    """A transpose then a reshape that folds non-contiguous dims, in view 150 of 200: the
    memref walk continued from view 149's reaches it at its own position."""
    d = chain_of_views(200, copies=200)
    body = d["call"]["programs"][0]["body"]
    body[150]["transforms"] = [
        {"op": "reshape", "shape": [16, 64]},
        {"op": "transpose", "perm": [1, 0]},
        {"op": "reshape", "shape": [1024]},
    ]
    plain = check(load_scenario(chain_of_views(200, copies=200)))
    diags = check(load_scenario(d))
    found = [(x.code, x.path) for x in diags if x.is_error]
    assert found, [x.one_line() for x in diags]
    assert found[0][1].startswith("call.programs[0].body[150].transforms[2]"), found
    assert not any(x.is_error for x in plain)


_STEPS = [
    {"op": "reshape", "shape": [16, 64]},
    {"op": "reshape", "shape": [1024]},
    {"op": "reshape", "shape": [32, 32]},
    {"op": "transpose", "perm": [1, 0]},
    {"op": "at", "index": [[0, 16]]},
    {"op": "at", "index": [[0, 32], [0, 16]]},
]


def _random_chain(rng: random.Random, lets: int) -> dict:
    """Views of views through random steps (some invalid: the walks must agree there too)."""
    d = chain_of_views(lets, transforms=1, copies=lets)
    for st in d["call"]["programs"][0]["body"][:lets]:
        st["transforms"] = copy.deepcopy(rng.choices(_STEPS, k=rng.randint(0, 4)))
    return d


def _moved(t) -> bool:
    """A step the lowering moves the others past: a transpose or a bitcast."""
    return t.op in ("transpose", "bitcast")


def test_the_incremental_memref_is_the_whole_walk() -> None:
    """For every view of random chains: the memref (and the first reshape it cannot
    make) computed from the source view's equals ``view_memref`` over the whole stack,
    and so do its first step that may stop the lowering, whether a step is moved and
    whether the view is tangled."""
    rng = random.Random(16)
    compared = 0
    for _ in range(30):
        s = load_scenario(_random_chain(rng, 12))
        ctx = Ctx(s, compile(s))
        low = LowerCtx(ctx)
        for st in ctx.programs[0].stmts:
            for b in [*st.refs.values(), *([st.defines] if st.defines else [])]:
                root = low.root_view(b).root
                if root is None or b.info is None:
                    continue
                view = [t for _, t in b.stack]
                _root, moved, tangled, rules, stop, reshape = low.view(b)
                assert low.memref(b) == L.view_memref(root.shape, view), [t.op for t in view]
                assert stop == next((k for k, t in enumerate(view) if t.stops_access()), None)
                assert reshape == any(t.op == "reshape" for t in view)
                assert moved == any(_moved(t) for t in view)
                # tangled: a bitcast, or a step after a moved one that is not a transpose
                first = next((k for k, t in enumerate(view) if _moved(t)), len(view))
                assert tangled == any(
                    t.op == "bitcast" or (k > first and t.op != "transpose")
                    for k, t in enumerate(view)
                )
                # rules: anything for _view_rules to check (SMEM, TMEM, a layout, tangled)
                assert rules == (root[2] != "GMEM" or bool(root[3]) or tangled)
                compared += 1
    assert compared > 300


def test_first_step_is_the_first_along_the_whole_stack() -> None:
    rng = random.Random(17)
    for _ in range(20):
        s = load_scenario(_random_chain(rng, 10))
        r = compile(s)
        for st in r.programs[0].stmts:
            for b in st.refs.values():
                for op in ("transpose", "at", "reshape"):
                    want = next(((p, t) for p, t in b.stack if t.op == op), None)
                    found = r.first_step(b, op, lambda t, op=op: t if t.op == op else None)
                    assert found == want


def test_reshaping_an_untransformed_ref_is_the_general_rule() -> None:
    """``memref_reshape``'s short cut for an untransformed (identity) memref gives what
    the general fold / unfold walk gives."""
    rng = random.Random(18)
    for _ in range(500):
        dims = [rng.choice([1, 2, 3, 4, 8]) for _ in range(rng.randint(0, 4))]
        n = 1
        for d in dims:
            n *= d
        target: list[int] = []
        left = n
        while left > 1 and len(target) < 4:
            f = rng.choice([f for f in (1, 2, 3, 4, 8, left) if left % f == 0])
            target.append(f)
            left //= f
        if left > 1 or not target:
            target.append(left)
        m = L.Memref(tuple(dims), L.contiguous_strides(dims), True)
        assert L.memref_reshape(m, target) == L._memref_reshape(m, target)[:2], (dims, target)


def test_the_interpreters_first_view_is_the_whole_walk() -> None:
    """``validate.interp._views`` (the first transform with a limit found first, then
    each view folded from its source's answer) names the first view step that walking
    every statement's refs' whole stacks finds, for both interpreters."""
    from pathlib import Path

    from mpmd_lab import gallery
    from mpmd_lab.fields import format_path
    from mpmd_lab.ops import Let
    from mpmd_lab.validate import interp

    root = Path(__file__).resolve().parent / "scenarios"
    texts = [gallery.path_of(n).read_text() for n in gallery.names()]
    texts += [p.read_text() for p in sorted(root.rglob("*.json"))]
    rng = random.Random(23)
    texts += [_random_chain(rng, 6) for _ in range(10)]
    compared = 0
    for text in texts:
        try:
            s = load_scenario(text)
        except Exception:
            continue
        for mode in ("gpu", "hlo"):
            s2 = s.model_copy(update={"run": s.run.model_copy(update={"interpret": mode})})
            ctx = Ctx(s2, compile(s2))
            want = None
            for prog in ctx.programs:
                for st in prog.stmts:
                    if type(st.node) is Let or want is not None:
                        continue
                    for b in st.refs.values():
                        hit = next(
                            ((p, lim) for p, t in b.stack if (lim := t.interpret_limit(mode))),
                            None,
                        )
                        if hit is not None:
                            want = (hit[1].code, format_path(hit[0]))
                            break
            got = interp._views(ctx)
            assert (None if got is None else (got.code, got.path)) == want
            compared += want is not None
    assert compared > 5
