"""The tetrahedra's rows applied matrix-free (``SolverSettings.tetrahedron_operator`` "matrix_free") against the
stored J and J^T: the same operator to float32 round-off, the same steps to the solve's tolerance, and the same
bits wherever a model has no tetrahedra."""

import numpy as np
import pytest
import warp as wp
from engine_scenes import add_soft_cantilever

import softsnake
from softsnake import newton
from softsnake.errors import ConfigError
from softsnake.linear_solve import multiply_commands

PRODUCT_TOLERANCE = 1e-6
"""Largest difference of the two operators' products, relative to the largest entry [-]: float32 (2^-23 = 1.2e-7)
rounding of sums of up to ~100 terms in another order."""


def soft_worlds(device, pressures=(0.0, 1e4, 2e4)):
    """The soft cantilever of ``scene_soft`` (tetrahedra, attachments to a body, pressure rows, ground contact)
    in one world per pressure [Pa], so that the worlds converge at different Newton iterations."""
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=0.8)
    for k, _ in enumerate(pressures):
        world = softsnake.ModelBuilder()
        add_soft_cantilever(world)
        builder.add_world(world, offset=(0.0, 0.5 * k, 0.0))
    model = builder.finalize(device)
    return model, np.asarray(pressures, dtype=np.float32)


def run(model, pressures, steps, **options):
    solver = softsnake.Solver(model, **options)
    state, control = model.state(), model.control()
    control.pressure.assign(pressures)
    for _ in range(steps):
        solver.step(state, state, control, 1.0 / 120.0)
    return solver, state, control


def products(solver, state, control, operator, x):
    """u = M^-1 J^T x and y = (J M^-1 J^T + E) x with ``operator``, J assembled at ``state``."""
    solver.tetrahedron_operator = operator
    x_device = wp.array(x, dtype=float, device=solver.model.device)
    y = wp.zeros_like(x_device)
    with solver.launching_now():
        for command in newton.assemble_commands(solver, state, control, 1.0 / 240.0):
            command()
        for command in multiply_commands(solver, x_device, y):
            command()
    return solver.u.numpy().copy(), y.numpy()


def test_matrix_free_products_match_stored(device):
    """After 30 steps of the bent cantilevers (contacts on the ground active), M^-1 J^T x and the operator's
    product agree with the stored J and J^T within ``PRODUCT_TOLERANCE`` of their largest entry, for random x
    and for x = e_k on every tetrahedron row of world 1 (each row's entries alone)."""
    model, pressures = soft_worlds(device)
    solver, state, control = run(model, pressures, 30)
    rng = np.random.default_rng(3)
    first = model.tet_row.numpy()
    world_tets = np.flatnonzero(model.tet_world.numpy() == 1)
    probes = [rng.standard_normal(model.row_count)]
    for t in world_tets[:4]:
        for k in range(6):
            e = np.zeros(model.row_count)
            e[first[t] + k] = 1.0
            probes.append(e)
    for x in probes:
        u_stored, y_stored = products(solver, state, control, "stored", x)
        u_free, y_free = products(solver, state, control, "matrix_free", x)
        assert np.abs(u_free - u_stored).max() <= PRODUCT_TOLERANCE * np.abs(u_stored).max()
        assert np.abs(y_free - y_stored).max() <= PRODUCT_TOLERANCE * np.abs(y_stored).max()
        assert np.abs(u_stored).max() > 0.0


@pytest.mark.parametrize("linear_solver, compensated", [("per_world", False), ("batched", False), ("block", False),
                                                         ("per_world", True)])
def test_matrix_free_steps_agree_with_stored(device, linear_solver, compensated):
    """Three soft cantilevers at 0, 10 and 20 kPa, 60 steps (0.5 s) at the default budget (each world stops at its
    tolerance or round-off floor, so the later iterations skip the worlds that converged first): the matrix-free
    operator ends within 1e-6 m of the stored one in every world (the cantilevers bend by centimetres; float32
    positions near 0.2 m round at 1.5e-8 m), launch by launch and as graphs alike. On the CPU the three linear
    solvers give the matrix-free run the same bits, as they do the stored one. Also with compensated positions (the
    rows then read the positions' remainders through the stored J)."""
    model, pressures = soft_worlds(device)
    options = {"linear_solver": linear_solver, "compensated_positions": compensated}
    _, stored, _ = run(model, pressures, 60, **options)
    _, free, _ = run(model, pressures, 60, **options, tetrahedron_operator="matrix_free")
    _, free_launched, _ = run(model, pressures, 60, **options, tetrahedron_operator="matrix_free", capture_graph=False)
    q_stored, q_free = stored.particle_q.numpy(), free.particle_q.numpy()
    assert np.abs(q_free - q_stored).max() < 1e-6
    start = model.state().particle_q.numpy()
    assert np.abs(q_stored - start).max() > 0.01  # the cantilevers did move
    assert np.array_equal(free_launched.particle_q.numpy(), q_free)
    if wp.get_device(device).is_cpu and linear_solver != "per_world":
        _, per_world, _ = run(model, pressures, 60, linear_solver="per_world", compensated_positions=compensated,
                              tetrahedron_operator="matrix_free")
        assert np.array_equal(per_world.particle_q.numpy(), q_free)


def test_matrix_free_changes_no_bit_without_tetrahedra(device):
    """A model without tetrahedra (a rod pendulum and a box on the ground) stores every row either way: the same
    bits after 30 steps."""
    with wp.ScopedDevice(device):
        builder = softsnake.ModelBuilder()
        builder.add_ground(mu=0.5)
        pivot = builder.add_particle((0.0, 0.0, 1.0), kinematic=True)
        bob = builder.add_particle((0.3, 0.0, 0.6), mass=0.2)
        builder.add_distance(pivot, bob)
        box = builder.add_body((1.0, 0.0, 0.06), velocity=(0.5, 0.0, 0.0))
        builder.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
        model = builder.finalize()
    none = np.zeros(0, dtype=np.float32)
    _, stored, _ = run(model, none, 30)
    _, free, _ = run(model, none, 30, tetrahedron_operator="matrix_free")
    for name in ("particle_q", "particle_qd", "body_q", "body_qd", "multipliers"):
        assert np.array_equal(getattr(free, name).numpy(), getattr(stored, name).numpy()), name


def test_tetrahedron_operator_setting_is_checked():
    with pytest.raises(ConfigError, match="tetrahedron_operator must be one of stored, matrix_free, got 'free'"):
        softsnake.SolverSettings(tetrahedron_operator="free")


def test_gradients_through_matrix_free_steps():
    """The pneumatic beam's rollout gradient (20 steps, ``tests/test_rollout_gradients.py``'s beam; the adjoint reads
    the stored J, which every assembly still writes) of a random linear loss of its end positions, with respect to
    the pressure and the elements' modulus: the forward rollouts with either operator end within 1e-6 m, and their
    gradients agree within 1e-4 of each other (measured 3e-7 and 2.4e-6), far inside the 1 % that central
    differences check."""
    from engine_scenes import BEAM_PRESSURE, pneumatic_beam
    from test_rollout_gradients import DT, STEPS, TIGHT

    from softsnake.gradients import record_rollout, rollout_gradient

    results = {}
    for operator in ("stored", "matrix_free"):
        model = pneumatic_beam()
        solver = softsnake.Solver(model, **TIGHT, tetrahedron_operator=operator)
        state, control = model.state(), model.control()
        control.pressure.assign(np.array([BEAM_PRESSURE], dtype=np.float32))
        records = record_rollout(solver, state, control, DT, STEPS)
        end = state.particle_q.numpy().astype(np.float64)
        seed = np.random.default_rng(3).normal(size=end.shape)
        _, grads = rollout_gradient(solver, records, {"particle_q": seed},
                                    {"pressure": "pressure", "youngs_modulus": model.tet_youngs_modulus})
        results[operator] = end, grads["pressure"][0], grads["youngs_modulus"].sum()
    (end_s, p_s, y_s), (end_f, p_f, y_f) = results["stored"], results["matrix_free"]
    assert np.abs(end_f - end_s).max() < 1e-6
    assert abs(p_f - p_s) <= 1e-4 * abs(p_s) and abs(y_f - y_s) <= 1e-4 * abs(y_s)


def test_solvers_of_one_model_share_its_matrix_free_layout(device):
    """The host lays out J^T without the tetrahedra once per model (``linear_solve.matrix_free_layout``): a second
    solver of the model takes the same arrays, with its own rotations."""
    model, _ = soft_worlds(device, pressures=(0.0,))
    first, second = (softsnake.Solver(model, tetrahedron_operator="matrix_free") for _ in range(2))
    a, b = first.transpose(), second.transpose()
    assert a.offsets is b.offsets and a.columns is b.columns and a.tets.corners is b.tets.corners
    assert a.values is not b.values and a.tets.rotation is not b.tets.rotation
