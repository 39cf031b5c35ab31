"""The adjoint's tapes are recorded once per gradient and replayed for every substep (``gradients._StepEquations``):
what a substep's Jacobian comes out as must not depend on the substeps replayed before it, nor on whether the
replays run as graphs.

The scene drops a particle and a box with friction onto the ground, so that their contacts are inactive in the
first substeps and active in the last: a value one substep's replay left in an array the next one reads (a
contact's normal or anchor, a Jacobian entry of a row that became inactive, a gradient not zeroed) would show.
Tolerance on the CPU: none, the same bits (the same kernels on the same values in the same order). On a GPU 1e-5 of
the largest entry: Warp's backward kernels add each read's adjoint atomically, in an order a GPU does not fix
(test_rollout_gradients.py, the planar adjoint).
"""

import numpy as np
import pytest
import warp as wp

import softsnake
from softsnake import gradients
from softsnake.gradients import record_rollout, rollout_gradient

DT = 1.0 / 60.0
STEPS = 16
OPTIONS = {"substeps": 1, "newton_iterations": 30, "linear_iterations": 60, "newton_tolerance": 0.0,
           "linear_tolerance": 0.0}


def dropped(capture_graph=True):
    """A particle and a box falling onto a frictional ground for STEPS steps: the solver and the records."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.4)
    b.add_particle((0.0, 0.0, 0.2), velocity=(1.0, 0.2, 0.0), mass=0.3, radius=0.02)
    box = b.add_body((0.5, 0.0, 0.15), (0.0, 0.1, 0.0, 0.995), velocity=(0.5, 0.0, 0.0))
    b.add_shape_box(box, (0.05, 0.04, 0.03), density=800.0)
    model = b.finalize()
    solver = softsnake.Solver(model, capture_graph=capture_graph, **OPTIONS)
    records = record_rollout(solver, model.state(), model.control(), DT, STEPS)
    return solver, records


def assert_same(got, expected):
    """Equal to the bit on the CPU, to 1e-5 of the largest magnitude on a GPU."""
    got, expected = np.asarray(got), np.asarray(expected)
    bound = 0.0 if wp.get_device().is_cpu else 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0.0, atol=bound)


def step_jacobian(solver, records, order):
    """dG/dy of the last record of ``order``, the records loaded in that order into one ``_StepEquations``."""
    m = solver.model
    eq = gradients._StepEquations(solver, m.state(), m.control(), records[order[0]].h,
                                  gradients._JacobianPattern(m))
    for k in order:
        eq.load(records[k])
    return eq.jacobian()


def test_the_scene_changes_its_contacts():
    """The premise: a substep of the first few has no active contact, the last has."""
    solver, records = dropped()
    first, last = step_jacobian(solver, records, [1]), step_jacobian(solver, records, [STEPS - 1])
    assert first.nnz == last.nnz  # one pattern for every substep
    assert np.count_nonzero(first.data) < np.count_nonzero(last.data)


@pytest.mark.parametrize("capture_graph", [True, False], ids=["graphs", "launches"])
def test_a_step_jacobian_does_not_depend_on_the_steps_replayed_before(capture_graph):
    solver, records = dropped(capture_graph)
    alone = step_jacobian(solver, records, [2])
    after_others = step_jacobian(solver, records, [STEPS - 1, 7, 2])
    assert_same(after_others.toarray(), alone.toarray())
    again = step_jacobian(solver, records, [2, STEPS - 1])
    assert_same(again.toarray(), step_jacobian(solver, records, [STEPS - 1]).toarray())


def test_graphs_and_launches_give_the_same_gradient():
    results = []
    for capture_graph in (True, False):
        solver, records = dropped(capture_graph)
        seed = np.random.default_rng(4).normal(size=(1, 7))
        results.append(rollout_gradient(solver, records, {"body_q": seed, "particle_q": np.ones((1, 3))},
                                        {"mass": solver.model.body_inv_mass}))
    (adjoint_a, grads_a), (adjoint_b, grads_b) = results
    for name in adjoint_a:
        assert_same(adjoint_a[name], adjoint_b[name])
    assert_same(grads_a["mass"], grads_b["mass"])
    assert np.abs(adjoint_a["particle_qd"]).max() > 0.0 and np.abs(grads_a["mass"]).max() > 0.0
