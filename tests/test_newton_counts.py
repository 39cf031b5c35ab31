"""The solver's count of how each world's Newton loops ended (``Solver.newton_counts``)."""

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import chain_builder
from softsnake.kernels.multipliers import HOLD
from softsnake.newton_counts import NewtonCounts

STEPS = 30


def pendulums(device):
    """Three worlds of a compliant double pendulum swinging at 0.5, 2 and 5 m/s: at a tolerance of 1e-3 and a
    budget of 3 they converge in different substeps, and some substeps end at the budget."""
    worlds = softsnake.ModelBuilder()
    for speed in (0.5, 2.0, 5.0):
        worlds.add_world(chain_builder(1e-4, speed))
    with wp.ScopedDevice(device):
        return worlds.finalize()


def test_without_a_tolerance_every_substep_ends_at_the_budget(device):
    """newton_tolerance 0: every world takes the whole budget in every substep, and the budget ends every
    substep unconverged (counts exact); ``reset_newton_counts`` starts them from zero."""
    model = pendulums(device)
    solver = softsnake.Solver(model, newton_tolerance=0.0, newton_iterations=5)
    state, control = model.state(), model.control()
    for _ in range(STEPS):
        solver.step(state, state, control, 1.0 / 120.0)
    counts = solver.newton_counts()
    substeps = STEPS * solver.substeps
    assert counts.substeps.tolist() == [substeps] * 3
    assert counts.newton_steps.tolist() == [substeps * 5] * 3
    assert counts.budget_ends.tolist() == [substeps] * 3
    assert counts.converged_fraction.tolist() == [0.0] * 3
    solver.reset_newton_counts()
    solver.step(state, state, control, 1.0 / 120.0)
    assert solver.newton_counts().substeps.tolist() == [solver.substeps] * 3


@pytest.mark.parametrize("capture_graph", [False, True])
def test_counts_match_the_iterations_each_world_took(device, capture_graph):
    """Per world, the Newton steps and the substeps that ended at the budget equal a count made on the host from
    the solver's own judgement before every iteration (a world steps unless it holds its converged point; a
    substep ends at the budget exactly where the world took the whole budget), stepped launch by launch; the
    same steps replayed as graphs (a conditional Newton loop) count the same. The case is mixed: some substeps
    converge and some end at the budget, in every world differently."""
    budget = 3

    def run(graph, observe):
        model = pendulums(device)
        solver = softsnake.Solver(model, newton_tolerance=1e-3, newton_iterations=budget, capture_graph=graph)
        per_substep = []
        if observe:
            substep, iteration = solver._substep, solver._newton_iteration

            def counted_substep(*args):
                per_substep.append(np.zeros(model.world_count, dtype=np.int64))
                substep(*args)

            def counted_iteration(**kwargs):  # launch by launch: the host runs every iteration
                per_substep[-1] += solver.retreat.numpy()[:model.world_count] != HOLD
                iteration(**kwargs)
            solver._substep, solver._newton_iteration = counted_substep, counted_iteration
        state, control = model.state(), model.control()
        for _ in range(STEPS):
            solver.step(state, state, control, 1.0 / 120.0)
        return solver.newton_counts(), np.array(per_substep)

    counts, taken = run(False, observe=True)
    assert taken.shape == (STEPS * 2, 3)
    assert counts.newton_steps.tolist() == taken.sum(axis=0).tolist()
    assert counts.budget_ends.tolist() == (taken == budget).sum(axis=0).tolist()
    assert counts.substeps.tolist() == [STEPS * 2] * 3
    assert 0 < counts.budget_ends.sum() < counts.substeps.sum()  # mixed: the counts can fail both ways
    assert len(set(counts.budget_ends.tolist())) == 3  # and every world differently
    if capture_graph:
        graphed, _ = run(True, observe=False)
        for name in ("substeps", "newton_steps", "budget_ends"):
            assert np.array_equal(getattr(graphed, name), getattr(counts, name)), name


def test_a_model_without_rows_counts_no_substep():
    """A falling particle has no rows and no Newton loop: nothing is counted, and the summary says so."""
    builder = softsnake.ModelBuilder()
    builder.add_particle((0.0, 0.0, 1.0), mass=0.1)
    model = builder.finalize("cpu")
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    solver.step(state, state, control, 1.0 / 60.0)
    counts = solver.newton_counts()
    assert counts.substeps.tolist() == [0] and counts.converged_fraction.tolist() == [1.0]
    assert counts.summary() == "Newton: no substep had constraint rows to solve"


def counts(substeps, steps, ends, tolerance=1e-5, floor=0.0):
    return NewtonCounts(np.array(substeps), np.array(steps), np.array(ends), budget=8, tolerance=tolerance, floor=floor)


def test_summary_says_whether_the_answer_is_the_budgets():
    """The one-line summary a command prints, in its three cases."""
    assert counts([10, 10], [30, 34], [0, 0]).summary("vine") == (
        "Newton: every substep of every vine converged (merit down by 1e-05) within its budget of 8 iterations, "
        "3.2 on average")
    none = counts([10, 10], [80, 80], [10, 10]).summary("snake", study="README")
    assert none.startswith("Newton: no substep converged (merit down by 1e-05) within the budget of 8 iterations")
    assert "not a converged one (how far apart: README)" in none
    some = counts([10, 10], [40, 60], [1, 4], floor=2.0).summary("vine")
    assert some.startswith("Newton: 75.0 % of substeps converged (merit down by 1e-05 or within 2 of its round-off "
                           "floor) within the budget of 8 iterations, 5.0 on average; 5 of 20 ended at the budget")
    assert "(most: vine 1, 4 of 10;" in some
    joined = NewtonCounts.joined([counts([1], [2], [0]), counts([3, 4], [5, 6], [1, 0])])
    assert joined.substeps.tolist() == [1, 3, 4] and joined.budget_ends.tolist() == [0, 1, 0]
