"""The solver's count of how each world's Newton loops ended (``Solver.newton_counts``)."""

import numpy as np
import pytest

import softsnake
from engine_scenes import pendulum_worlds
from softsnake.kernels.multipliers import HOLD
from softsnake.newton_counts import NewtonCounts

STEPS = 30
"""Steps of 1/120 s of the pendulum worlds (``engine_scenes.pendulum_worlds``: at a tolerance of 1e-3 and a budget
of 3 they converge in different substeps, and some substeps end at the budget)."""


def test_without_a_tolerance_every_substep_ends_at_the_budget(device):
    """newton_tolerance and newton_floor 0: every world takes the whole budget in every substep, and the budget ends every
    substep unconverged (counts exact); ``reset_newton_counts`` starts them from zero."""
    model = pendulum_worlds(device)
    solver = softsnake.Solver(model, newton_tolerance=0.0, newton_floor=0.0, newton_iterations=5)
    state, control = model.state(), model.control()
    for _ in range(STEPS):
        solver.step(state, state, control, 1.0 / 120.0)
    counts = solver.newton_counts()
    substeps = STEPS * solver.substeps
    assert counts.substeps.tolist() == [substeps] * 3
    assert counts.newton_steps.tolist() == [substeps * 5] * 3
    assert counts.budget_ends.tolist() == [substeps] * 3
    assert (counts.unconverged_ends <= counts.budget_ends).all()
    solver.reset_newton_counts()
    solver.step(state, state, control, 1.0 / 120.0)
    assert solver.newton_counts().substeps.tolist() == [solver.substeps] * 3


@pytest.mark.parametrize("capture_graph", [False, True])
def test_counts_match_the_iterations_each_world_took(device, capture_graph):
    """Per world, the Newton steps and the substeps that ended at the budget equal a count made on the host from
    the solver's own judgement before every iteration (a world steps unless it holds its converged point) and at
    the substep's end (a substep ends at the budget where the world took the whole budget and the end assembly,
    ``SolverSettings.wander_limit``'s, did not find its last step converged), stepped launch by launch; the
    same steps replayed as graphs (a conditional Newton loop) count the same. The case is mixed: some substeps
    converge and some end at the budget, in every world differently."""
    budget = 3

    def run(graph, observe):
        model = pendulum_worlds(device)
        solver = softsnake.Solver(model, newton_tolerance=1e-3, newton_iterations=budget, capture_graph=graph)
        per_substep, ended_iterating = [], []
        if observe:
            substep, iteration = solver._substep, solver._newton_iteration

            def counted_substep(*args):
                per_substep.append(np.zeros(model.world_count, dtype=np.int64))
                substep(*args)
                ended_iterating.append(solver.retreat.numpy()[:model.world_count] != HOLD)

            def counted_iteration(**kwargs):  # launch by launch: the host runs every iteration
                per_substep[-1] += solver.retreat.numpy()[:model.world_count] != HOLD
                iteration(**kwargs)
            solver._substep, solver._newton_iteration = counted_substep, counted_iteration
        state, control = model.state(), model.control()
        for _ in range(STEPS):
            solver.step(state, state, control, 1.0 / 120.0)
        return solver.newton_counts(), np.array(per_substep), np.array(ended_iterating)

    counts, taken, ended_iterating = run(False, observe=True)
    assert taken.shape == (STEPS * 2, 3)
    assert counts.newton_steps.tolist() == taken.sum(axis=0).tolist()
    assert counts.budget_ends.tolist() == ((taken == budget) & ended_iterating).sum(axis=0).tolist()
    assert ((taken == budget) & ~ended_iterating).any()  # some last steps converged: the end assembly told them
    assert counts.substeps.tolist() == [STEPS * 2] * 3
    assert 0 < counts.budget_ends.sum() < counts.substeps.sum()  # mixed: the counts can fail both ways
    assert len(set(counts.budget_ends.tolist())) >= 2  # and per world (CPU 3 different counts, an H200 [2, 2, 0])
    assert (counts.unconverged_ends <= counts.budget_ends).all()
    if capture_graph:
        graphed, _, _ = run(True, observe=False)
        for name in NewtonCounts.COUNTS:
            assert np.array_equal(getattr(graphed, name), getattr(counts, name)), name


@pytest.mark.parametrize("budget", [1, 16])
def test_an_end_at_the_round_off_floor_is_told_from_an_unconverged_one(budget):
    """Without the stop at the floor (newton_floor 0), at the default budget the pendulums never reach the
    tolerance (1e-5 of the start's merit lies below float32's round-off; one substep of the fastest meets it), but
    every substep ends with the merit near the round-off floor: budget ends, none unconverged, and the summary says
    every world converged. With one iteration only the substep's end assembly (``SolverSettings.wander_limit``'s)
    judges the one step: two of the pendulums end all but 5 and 11 of their 60 substeps converged or near the floor
    after it, the third 53 above it (2, 3 and 51 before each substep ran in its world's frame, whose floor counts a
    row's coordinates at their size there plus the row's spread: ``kernels.multipliers.row_round_off``), and the
    summary names that one; without that assembly (``wander_limit`` 0) no step is judged and every
    substep is an unconverged end."""
    model = pendulum_worlds("cpu")
    solver = softsnake.Solver(model, newton_iterations=budget, newton_floor=0.0)
    state, control = model.state(), model.control()
    for _ in range(STEPS):
        solver.step(state, state, control, 1.0 / 120.0)
    counts = solver.newton_counts()
    substeps = [STEPS * solver.substeps] * 3
    if budget == 16:
        assert min(counts.budget_ends) >= substeps[0] - 1
        assert counts.unconverged_ends.tolist() == [0] * 3
        assert counts.summary("pendulum").endswith("(within 2 times its estimate): every pendulum converged")
    else:
        assert min(counts.budget_ends) > 0.9 * substeps[0]
        assert counts.unconverged_ends[:2].max() < 0.25 * substeps[0] < 0.8 * substeps[0] < counts.unconverged_ends[2]
        assert "ended unconverged (most: pendulum 2" in counts.summary("pendulum")
        unjudged = softsnake.Solver(model, newton_iterations=budget, newton_floor=0.0, wander_limit=0.0)
        state = model.state()
        for _ in range(STEPS):
            unjudged.step(state, state, control, 1.0 / 120.0)
        assert unjudged.newton_counts().unconverged_ends.tolist() == substeps
        assert "these numbers are the budget's answer" in unjudged.newton_counts().summary()


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


def counts(substeps, steps, ends, unconverged, tolerance=1e-5, floor=0.0, balanced=True):
    return NewtonCounts(np.array(substeps), np.array(steps), np.array(ends), np.array(unconverged), budget=8,
                        tolerance=tolerance, floor=floor, balanced=balanced)


def test_summary_says_whether_the_answer_is_the_budgets():
    """The one-line summary a command prints, in its cases."""
    assert counts([10, 10], [30, 34], [0, 0], [0, 0]).summary("vine") == (
        "Newton, budget 8 iterations (3.2 per substep): 100.0 % of substeps reached the stop (merit down by 1e-05): "
        "every vine converged")
    none = counts([10, 10], [80, 80], [10, 10], [10, 10]).summary("snake", study="README")
    assert none.startswith("Newton, budget 8 iterations (8.0 per substep): no substep converged (merit down by 1e-05, "
                           "nor near float32's round-off floor)")
    assert none.endswith("not a converged one (how far apart: README)")
    with_floor = counts([10], [80], [10], [10], floor=2.0).summary()
    assert "no substep converged (merit down by 1e-05 or within 2 of its round-off floor): these" in with_floor
    some = counts([10, 10], [40, 60], [1, 5], [0, 4], floor=2.0, balanced=False).summary("vine")
    assert some.startswith("Newton, budget 8 iterations (5.0 per substep): 70.0 % of substeps reached the stop (merit "
                           "down by 1e-05 or within 2 of its round-off floor), 10.0 % ended near float32's round-off floor")
    assert "20.0 % ended unconverged (most: vine 1, 4 of 10;" in some
    assert some.endswith("the plain iteration (momentum not balanced) keeps the lag of its path even where it converged")
    bodies = counts([10, 10], [40, 60], [1, 5], [0, 4], floor=2.0, balanced="bodies").summary("snake")
    assert bodies.endswith("momentum balanced for the bodies only: the particles keep the lag of their path even where "
                           "they converged")
    rare = counts([2000], [2000], [1], [1]).summary()
    assert "99.9 % of substeps reached the stop" in rare and "0.1 % ended unconverged" in rare  # never rounded away
    joined = NewtonCounts.joined([counts([1], [2], [0], [0]), counts([3, 4], [5, 6], [1, 0], [1, 0])])
    assert joined.substeps.tolist() == [1, 3, 4] and joined.unconverged_ends.tolist() == [0, 1, 0]


def test_one_worlds_counts_and_joined_back():
    """``NewtonCounts.world(w)`` holds world w's counts alone, with the same settings; joined in order the worlds
    give the batch's counts back (a mixed case: the worlds' counts differ)."""
    model = pendulum_worlds("cpu")
    solver = softsnake.Solver(model, newton_tolerance=1e-3, newton_iterations=3)
    state, control = model.state(), model.control()
    for _ in range(STEPS):
        solver.step(state, state, control, 1.0 / 120.0)
    counts = solver.newton_counts()
    worlds = [counts.world(w) for w in range(model.world_count)]
    for w, one in enumerate(worlds):
        assert [getattr(one, name).tolist() for name in NewtonCounts.COUNTS] == [
            [getattr(counts, name)[w]] for name in NewtonCounts.COUNTS]
        assert (one.budget, one.tolerance, one.floor, one.balanced) == (3, 1e-3, counts.floor, counts.balanced)
    joined = NewtonCounts.joined(worlds)
    assert all(np.array_equal(getattr(joined, name), getattr(counts, name)) for name in NewtonCounts.COUNTS)
    assert len(set(counts.budget_ends.tolist())) > 1


def test_counts_saved_before_the_wander_limit_are_added_as_none_went_back():
    """A resume point saved before the twenty-sixth session has no ``wander_returns``: its other counts are added,
    and none of its substeps counts as gone back."""
    model = pendulum_worlds("cpu")
    solver = softsnake.Solver(model)
    earlier = {name: np.full(model.world_count, 3) for name in NewtonCounts.COUNTS if name != "wander_returns"}
    solver.add_newton_counts(earlier)
    counts = solver.newton_counts()
    assert counts.substeps.tolist() == [3] * model.world_count
    assert counts.wander_returns.tolist() == [0] * model.world_count
