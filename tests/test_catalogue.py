"""The catalogue classifies what JAX really prints, however it reaches us.

The messages come from ``toolkit/knowledge/recorded.json``: what jax 0.12.0.1 and
0.11.2 printed for each card's example (``python -m mpmd_lab.knowledge.verify --record``);
``tests/test_knowledge.py`` checks the examples against the installed JAX live.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpmd_lab import catalogue
from mpmd_lab.knowledge import RECORDED

RECORDS = json.loads(RECORDED.read_text())
#: (code, version, record) for every message JAX raised for an example.
RAISED = [
    (code, version, r)
    for code, by_version in sorted(RECORDS.items())
    for version, r in sorted(by_version.items())
    if r is not None
]
#: Codes whose example JAX rejects with another code, by design of the card.
OTHER_CODE = {
    "OOB_INDEX": "OOB_READ",
    "INTERP_LIMIT": "GPU_INTERP_UNSUPPORTED_TRANSFORM",
}
IDS = [f"{c}@{v}" for c, v, _ in RAISED]


def expected(code: str) -> str:
    return OTHER_CODE.get(code, code)


def wrapped(type_: str, message: str) -> str:
    """A JaxRuntimeError's text around an inner error, as the GPU interpreter prints it."""
    return (
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "/x/site-packages/jax/_src/callback.py", line 829, in _wrapped_callback\n'
        '  File "/x/site-packages/jax/_src/pallas/mosaic_gpu/interpret/gpu_callbacks.py", '
        "line 604, in _validate_transforms\n"
        f"{type_}: {message}"
    )


def traceback_text(type_: str, message: str) -> str:
    """A whole traceback as a user pastes it, JAX's filtered-frames footer included."""
    tail = f"{type_}: {message}" if message else type_
    return (
        "Traceback (most recent call last):\n"
        '  File "/home/me/kernel.py", line 12, in <module>\n'
        "    out = f(x)\n"
        "          ^^^^\n"
        '  File "/home/me/kernel.py", line 7, in body\n'
        f"{tail}\n"
        "--------------------\n"
        "For simplicity, JAX has removed its internal frames from the traceback of the "
        "following exception. Set JAX_TRACEBACK_FILTERING=off to include these.\n"
    )


def test_records_cover_every_jax_code_with_an_example():
    jax_codes = {e.code for e in catalogue.ENTRIES}
    assert jax_codes <= set(RECORDS), sorted(jax_codes - set(RECORDS))
    assert {"0.11.2", "0.12.0.1"} <= {v for by in RECORDS.values() for v in by}


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_recorded_message(code, version, r):
    assert catalogue.classify(r["type"], r["message"]) == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_text_pasted_with_prefix(code, version, r):
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    assert catalogue.classify_text(text) == expected(code)
    assert catalogue.classify_text(f"jax.errors.{text}") == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_inside_jax_runtime_error(code, version, r):
    if not r["message"]:
        pytest.skip("an empty message cannot be told apart inside a wrapper")
    inner = wrapped(r["type"], r["message"])
    assert catalogue.classify("JaxRuntimeError", inner) == expected(code)
    assert catalogue.classify_text(f"jax.errors.JaxRuntimeError: {inner}") == expected(code)


@pytest.mark.parametrize("code,version,r", RAISED, ids=IDS)
def test_classify_whole_traceback(code, version, r):
    assert catalogue.classify_text(traceback_text(r["type"], r["message"])) == expected(code)


def test_unwrap_prefers_the_real_error_over_the_computation_failed_wrapper():
    text = (
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "a.py", line 1, in f\n'
        "RuntimeError: Computation failed on Warpgroup(device_id=0, cluster_id=0, "
        "block_id=0, warpgroup_id=0) with exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in g\n'
        "AttributeError: 'MulticastRef' object has no attribute 'indices'\n"
    )
    assert catalogue.unwrap("JaxRuntimeError", text) == (
        "AttributeError",
        "'MulticastRef' object has no attribute 'indices'",
    )
    assert catalogue.classify("JaxRuntimeError", text) == "GPU_INTERP_MULTICAST"


def test_generic_messages_need_their_exception_type():
    assert catalogue.classify("IndexError", "tuple index out of range") == "TRANSPOSE_BAD_AXIS"
    assert catalogue.classify("IndexError", "list index out of range") == (
        "BITCAST_1D_SAME_WIDTH_BUG"
    )
    assert catalogue.classify("KeyError", "tuple index out of range") is None
    # an array's transpose says it specifically, as a ValueError
    assert catalogue.classify("ValueError", "axis 2 is out of bounds for array of dimension 2") == (
        "TRANSPOSE_BAD_AXIS"
    )
    assert catalogue.classify("NotImplementedError", "") == "MPMD_GPU_MESH_NOT_COMBINABLE"
    assert catalogue.classify("ValueError", "") is None
    assert catalogue.classify("", "") is None
    assert catalogue.classify_text("") is None


def test_a_zero_size_vector_from_any_statement_is_the_zero_size_access():
    """MLIR's type check names a vector of a size-0 dim, whichever op made it (a fill's
    broadcast, a constant): mpmd-lab's GPU_ZERO_SIZE_ACCESS (stacks fuzz seed 7676)."""
    for op in ("broadcast_in_dim", "arith.constant"):
        text = (
            f'Invalid type:\nerror: "{op}:"("{op}"("<mpmd_lab_scenario>":239:17)): vector '
            "types must have positive constant sizes but got 0"
        )
        assert catalogue.classify("ValueError", text) == "GPU_ZERO_SIZE_ACCESS"
        assert catalogue.classify_text(f"ValueError: {text}") == "GPU_ZERO_SIZE_ACCESS"


def test_array_method_outside_jit():
    """Outside jit an array is an ``ArrayImpl``, not a tracer: the same mistake."""
    text = "AttributeError: 'jaxlib._jax.ArrayImpl' object has no attribute 'bitcast'"
    assert catalogue.classify_text(text) == "ARRAY_NO_METHOD"


def test_unknown_messages_are_unknown():
    assert catalogue.classify("ValueError", "something JAX never says") is None
    assert catalogue.classify_text("ZeroDivisionError: division by zero") is None


def test_a_code_with_more_than_one_message_knows_each():
    """Messages a code's card lists besides the recorded one (bench/fuzz_values.py found
    JAX raising them unclassified): layout inference out of tries, Python's float
    division by zero."""
    out_of_tries = (
        "Layout inference failed to find a solution. Consider adding layout annotations "
        "to your program to guide the search."
    )
    assert catalogue.classify("ValueError", out_of_tries) == "GPU_LAYOUT_INFERENCE"
    for message in ("float floor division by zero", "float division by zero", "float modulo"):
        assert catalogue.classify("ZeroDivisionError", message) == "EXPR_ZERO_DIVISION"


def test_every_code_is_unique_and_has_a_compiling_pattern():
    codes = [e.code for e in catalogue.ENTRIES]
    assert len(codes) == len(set(codes))
    assert not set(codes) & set(catalogue.OWN)
    for e in (*catalogue.ENTRIES, *catalogue.OWN_PATTERNS):
        re.compile(e.pattern)
        if e.loose:
            re.compile(e.loose)
            assert e.pattern.startswith("^"), e.code  # loose is for generic entries only
        assert e.stage in {"schema", "build", "trace", "gpu-lower", "interpret", "gpu-run"}
    assert {e.code for e in catalogue.OWN_PATTERNS} <= set(catalogue.OWN)


def test_specific_patterns_do_not_match_each_others_records():
    """Each recorded message matches its own entry's pattern and no earlier one."""
    for code, _version, r in RAISED:
        hits = [
            e.code
            for e in catalogue.ENTRIES
            if not e.pattern.startswith("^") and re.search(e.pattern, r["message"])
        ]
        assert hits in ([], [expected(code)]), (code, hits)


@given(st.text(max_size=300))
def test_classify_never_raises(text):
    catalogue.classify_text(text)
    catalogue.classify("JaxRuntimeError", text)
    catalogue.classify("", text)


@given(st.sampled_from(RAISED), st.text(alphabet=" \n\t", max_size=5))
def test_classify_ignores_surrounding_whitespace(item, pad):
    code, _version, r = item
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    assert catalogue.classify_text(pad + text + pad) == expected(code)


# ------------------------------------------------------- codes the sources emit

ROOT = Path(__file__).resolve().parents[1]
#: Where mpmd-lab emits diagnostic codes.
SOURCES = sorted((*(ROOT / "toolkit").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")))
CODE_SHAPE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")


def _codes_in(node: ast.AST | None) -> set[str]:
    """Code-shaped string literals anywhere in an expression (``x or "CODE"``, ``a if c
    else b``)."""
    if node is None:
        return set()
    return {
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and CODE_SHAPE.match(n.value)
    }


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _code_params(trees: list[ast.Module]) -> dict[str, int]:
    """Every function (class, for an ``__init__``) with a ``code`` parameter: the
    position of that parameter in a call."""
    out: dict[str, int] = {}
    for tree in trees:
        for node in ast.walk(tree):
            defs = []
            if isinstance(node, ast.FunctionDef):
                defs.append((node.name, node))
            elif isinstance(node, ast.ClassDef):
                defs += [
                    (node.name, d)
                    for d in node.body
                    if isinstance(d, ast.FunctionDef) and d.name == "__init__"
                ]
            for name, fn in defs:
                args = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
                if args and args[0] in ("self", "cls"):
                    args = args[1:]
                if "code" in args:
                    out[name] = args.index("code")
    return out


def emitted_codes(sources: dict[str, str]) -> dict[str, set[str]]:
    """The diagnostic codes source files emit, each with where: literals passed as
    ``code=``, as the ``code`` argument of a function that takes one (``SimError(CODE,
    ...)``, ``ctx.add(CODE, ...)``), as the value of a ``"code"`` key, or assigned to
    ``code`` / ``*_CODE``."""
    trees = {name: ast.parse(text, name) for name, text in sources.items()}
    params = _code_params(list(trees.values()))
    found: dict[str, set[str]] = {}
    for name, tree in trees.items():
        for node in ast.walk(tree):
            hits: set[str] = set()
            if isinstance(node, ast.Call):
                hits |= {c for k in node.keywords if k.arg == "code" for c in _codes_in(k.value)}
                i = params.get(_callee(node))
                if i is not None and i < len(node.args):
                    hits |= _codes_in(node.args[i])
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "code":
                        hits |= _codes_in(v)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(
                    isinstance(t, ast.Name) and (t.id == "code" or t.id.endswith("_CODE"))
                    for t in targets
                ):
                    hits |= _codes_in(node.value)
            for code in hits:
                found.setdefault(code, set()).add(f"{name}:{node.lineno}")
    return found


#: Modules whose only upper-case string literals are codes (the rules keep codes in
#: tuples and tables too, out of reach of the patterns above).
RULE_MODULES = (
    "toolkit/validate/",
    "toolkit/ops/",
    "toolkit/shapes.py",
    "toolkit/simulate.py",
    "toolkit/fixes",
)


def rule_module_codes(sources: dict[str, str]) -> dict[str, set[str]]:
    """Every ``WORD_WORD`` string literal of the rule modules, with where."""
    found: dict[str, set[str]] = {}
    for name, text in sources.items():
        if name.startswith(RULE_MODULES):
            tree = ast.parse(text, name)
            exported = {  # the names in ``__all__`` are names, not codes
                id(c)
                for a in tree.body
                if isinstance(a, ast.Assign)
                and any(getattr(t, "id", "") == "__all__" for t in a.targets)
                for c in ast.walk(a.value)
            }
            for n in ast.walk(tree):
                if id(n) in exported:
                    continue
                for code in _codes_in(n) if isinstance(n, ast.Constant) else ():
                    if "_" in code:
                        found.setdefault(code, set()).add(f"{name}:{n.lineno}")
    return found


_TEXTS = {str(p.relative_to(ROOT)): p.read_text() for p in SOURCES}
EMITTED = emitted_codes(_TEXTS)
for _code, _where in rule_module_codes(_TEXTS).items():
    EMITTED.setdefault(_code, set()).update(_where)


def test_the_scan_finds_codes_however_they_are_emitted():
    src = """
class Oops(Exception):
    def __init__(self, code, path): ...
def report(where, code): ...
def f(e, ok):
    Diagnostic(code=e.get("code") or "A_CODE", stage="trace")
    raise Oops("B_CODE" if ok else "C", "path")
    report("NOT_A_CODE_ARG", "D_CODE")
    x = {"code": "E", "type": "ValueError", "stage": "TRACE_STAGE_IS_NOT_HERE"}
    code = "F_CODE"
    OTHER_CODE = "G"
    os.environ["XLA_FLAGS"] = "lowercase"
"""
    assert set(emitted_codes({"x.py": src})) == {"A_CODE", "B_CODE", "C", "D_CODE", "E"} | {
        "F_CODE",
        "G",
    }
    # each way mpmd-lab's own sources emit a code is seen
    for code in ("RUN_TIMEOUT", "SIM_TOO_LARGE", "GPU_UNAVAILABLE", "CODEGEN", "OOB_WRITE"):
        assert code in EMITTED, code
    # and the codes the validate rules keep in tuples for later
    for code in ("MULTIMEM_STORE_WIDTH", "GPU_SPLAT_STORE"):
        assert any(w.startswith(("toolkit/validate/", "toolkit/ops/")) for w in EMITTED[code])
    assert "RUN_ERROR" in EMITTED  # widgets/


def test_every_emitted_code_has_a_catalogue_entry_and_a_card():
    from mpmd_lab import knowledge

    known = set(catalogue.BY_CODE) | set(catalogue.OWN)
    missing = {c: sorted(w) for c, w in EMITTED.items() if c not in known}
    assert not missing, f"emitted but not in the catalogue (ENTRIES or OWN): {missing}"
    no_card = sorted(set(EMITTED) - set(knowledge.codes()))
    assert not no_card, f"emitted but without a card in toolkit/knowledge/cards: {no_card}"
