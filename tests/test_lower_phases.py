"""The lowering's later phases (``validate.lower.LowerCtx``): of the errors its rules
find for later phases, the one raised is the first, in statement order, of the first
phase that has one (verifying the module, deriving layout constraints, solving them,
assigning the solution, the dialect lowering, verifying the lowered module)."""

from __future__ import annotations

from mpmd_lab import gallery
from mpmd_lab import layout_rules as L
from mpmd_lab.plan import compile
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate.context import Ctx
from mpmd_lab.validate.lower import LowerCtx, _later


def _low() -> LowerCtx:
    s = load_scenario(gallery.path_of("reshape-view").read_text())
    return LowerCtx(Ctx(s, compile(s)))


def test_the_first_error_of_the_first_phase_is_raised() -> None:
    low = _low()
    low.later("p4", "VERIFY", "a", "m")
    low.later("p3", "DIALECT", "a", "m")
    low.later_error("assign", ("ASSIGN", "a", "m", ""))
    low.later_error("unsat", ("UNSAT", "a", "m", ""))
    assert low.first_later()[0] == "UNSAT"
    low.later("p2", "SOLVE_1", "a", "m")
    low.later_error("solve", ("SOLVE_2", "a", "m", ""))
    assert low.first_later()[0] == "SOLVE_1"
    low.later_error("derive", ("DERIVE", "a", "m", ""))
    assert low.first_later()[0] == "DERIVE"
    low.later("p1", "EARLY", "a", "m")
    assert low.first_later()[0] == "EARLY"


def test_a_rule_error_goes_to_its_lowering_phase() -> None:
    """``layout_rules.lowering_phase``'s names (``dialect``, ``verify``) are p3 and p4."""
    low = _low()
    verify = L.JaxError("GPU_VERIFICATION", "ValueError", "'vector.load' op", "gpu-lower")
    dialect = L.JaxError("GPU_GMEM_TRANSFER", "TransferPlanDerivationError", "x", "gpu-lower")
    _later(low, verify, "a")
    low.later("p4", "P4", "a", "m")
    assert low.first_later()[0] == "GPU_VERIFICATION"
    _later(low, dialect, "b")
    low.later("p3", "P3", "a", "m")
    found = low.first_later()
    assert found[0] == "GPU_GMEM_TRANSFER" and found[4] == "TransferPlanDerivationError"
