"""experiments/time_step_convergence.py: the changes between runs at halved steps, their observed order, and the
travel extrapolated to h -> 0 that the time-step pages report."""

import importlib.util
import math
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "time_step_convergence.py"


def load_script():
    spec = importlib.util.spec_from_file_location("time_step_convergence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_order_rows(budget, limit, constant, substeps):
    """Travels T(h) = limit - constant * h of an exactly first-order method, h = 1/120 s / substeps."""
    return [{"budget": budget, "substeps": s, "forward_m": limit - constant / (120.0 * s)} for s in substeps]


def test_a_first_order_sequence_shows_order_one_and_extrapolates_to_its_limit():
    script = load_script()
    rows = first_order_rows("16x160", 0.8636, 6.4, [2, 4, 8, 16])
    summary = script.add_extrapolation(rows)
    assert [round(row["change_mm"], 6) for row in rows[1:]] == pytest.approx([13.333333, 6.666667, 3.333333])
    assert "order" not in rows[1] and rows[2]["order"] == pytest.approx(1.0) and rows[3]["order"] == pytest.approx(1.0)
    assert summary[0]["limit_m"] == pytest.approx(0.8636, abs=1e-12) and summary[0]["how"] == "Richardson"


def test_changes_of_opposite_sign_or_a_skipped_halving_have_no_order():
    script = load_script()
    rows = [{"budget": "8x40", "substeps": s, "forward_m": t} for s, t in ((2, 0.837), (4, 0.846), (8, 0.845),
                                                                             (32, 0.850))]
    script.add_changes(rows, "budget")
    assert all("order" not in row for row in rows)  # 4 -> 8 turned round; 8 -> 32 is not one halving
    assert rows[3]["change_mm"] == pytest.approx(5.0)


def test_orders_are_per_group():
    script = load_script()
    rows = first_order_rows("a", 1.0, 1.0, [1, 2, 4]) + [
        {"budget": "b", "substeps": s, "forward_m": 1.0 - (1.0 / (120.0 * s)) ** 2} for s in (1, 2, 4)]
    groups = dict(script.add_changes(rows, "budget"))
    assert groups["a"][2]["order"] == pytest.approx(1.0)
    assert groups["b"][2]["order"] == pytest.approx(2.0)
    assert math.isclose(groups["b"][1]["change_mm"], 1e3 * 0.75 / 120.0 ** 2)
