"""A gradient depends on its rollout alone: not on the substeps replayed before a substep, not on whether the replays
run as graphs, not on NumPy's global random state.

The adjoint's tapes are recorded once per gradient and replayed for every substep (``gradients._StepEquations``).
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


def test_the_condition_estimate_does_not_depend_on_the_random_state():
    """``gradients._condition_estimate`` decides between the LU and least squares, so it must not draw on NumPy's
    global random state (SciPy's ``onenormest`` does: on these matrices its estimate varied by up to 30 % with it,
    and a coarse snake's 46-step gradient changed by 1.3e-4 from run to run). The caller's state is left as it
    was."""
    import scipy.sparse
    import scipy.sparse.linalg

    for seed in range(4):
        rng = np.random.default_rng(seed)
        random = scipy.sparse.random(200, 200, density=0.03, random_state=seed, data_rvs=rng.standard_normal)
        matrix = scipy.sparse.csc_matrix(random + 0.3 * scipy.sparse.identity(200))
        lu = scipy.sparse.linalg.splu(matrix)
        estimates = set()
        for state in range(6):
            np.random.seed(state)
            before = np.random.get_state()[1].copy()
            estimates.add(float(gradients._condition_estimate(matrix, lu)))
            np.testing.assert_array_equal(np.random.get_state()[1], before)
        assert len(estimates) == 1, estimates


def test_the_condition_estimate_is_a_close_lower_bound():
    """kappa_1 = ||A||_1 ||A^-1||_1 estimated (``gradients._inverse_one_norm``, Hager-Higham) against the exact value
    from A^-1's columns: never above it (every estimate is ||A^-1 x||_1 / ||x||_1 of some x; 1e-12 for rounding),
    and within 0.75 of it (measured: 0.83 to 1.0) on random sparse matrices, a 1-D Laplacian and a diagonal spanning
    eight decades (exact there: 1e8), where the decision it makes (kappa_1 against n / SINGULAR_CUTOFF) needs the
    order of magnitude."""
    import scipy.sparse
    import scipy.sparse.linalg

    matrices = []
    for seed in range(12):
        rng = np.random.default_rng(seed)
        random = scipy.sparse.random(200, 200, density=0.03, random_state=seed, data_rvs=rng.standard_normal)
        matrices.append(random + 0.3 * scipy.sparse.identity(200))
    n = 100
    matrices.append(scipy.sparse.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]))
    matrices.append(scipy.sparse.diags(np.logspace(-8.0, 0.0, 50)))
    for matrix in matrices:
        matrix = scipy.sparse.csc_matrix(matrix)
        lu = scipy.sparse.linalg.splu(matrix)
        exact = np.abs(matrix).sum(axis=0).max() * np.abs(lu.solve(np.eye(matrix.shape[0]))).sum(axis=0).max()
        ratio = gradients._condition_estimate(matrix, lu) / exact
        assert 0.75 <= ratio <= 1.0 + 1e-12, (matrix.shape, exact, ratio)
