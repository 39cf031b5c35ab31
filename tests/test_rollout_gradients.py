"""Gradients of short rollouts by the adjoint method (``softsnake.gradients``) against central differences.

Each case runs a small model for 20 steps with a tight budget (the implicit gradient is that of the
converged step), takes a loss L = s . x_end (s fixed, x_end the final positions) and compares
dL/d(initial velocity) and dL/d(a model parameter) with central differences of whole rollouts,
Richardson-extrapolated from two step sizes (the rollouts run in float32: smaller steps drown in
rounding). Tolerances: 1 % of the largest derivative for the cases whose step the engine solves
exactly (particles, contact with and without friction, frictionless bodies; measured: at most
2.9e-3, the pendulum's compliance, where the central differences themselves vary by that much with
the step); 3 % for the hinged chain (measured 2.9e-3), whose converged steps keep a small momentum
lag (the engine moves bodies by M^-1 J^T dlambda with the J of each Newton iteration, so a
rotating body's end point is not exactly x~ + M^-1 J(x)^T lambda; ``Solver.residual_norms``
reports it), which the gradient of the implicit step does not see; 1 % for the same chain and for a
sphere rolling with friction with ``momentum_balance``, whose converged steps are the implicit step
(measured 1.1e-3 and 5.4e-5; the sphere without it: 3.8e-2). The box rests on a face: its
four corners share the load in a way the solve leaves open (dG/dy is singular there, and the
adjoint takes the least-squares solution), which does not change the motion. A clamped pneumatic
beam (tetrahedra, actuation rows, attachments: a snake link's physics) is checked for the chamber
pressure and its material's Young's modulus and Poisson's ratio, to 1 % of each. The pendulum and the
sliding particle also run with two substeps per step (recorded and differentiated substep by substep),
to the same 1 % (measured 1.5e-3 and 6.3e-4; with one substep 1.4e-3 and 2.0e-4). Not covered, and
off by about 10 % when measured: a box sliding on a face with friction (the unloaded corners sit on
the kink of the friction cone at zero load).
"""

import math

import numpy as np
import pytest

import softsnake
from engine_scenes import BEAM_MODULUS, BEAM_PRESSURE, chain, pneumatic_beam
from softsnake import gradients
from softsnake.gradients import record_rollout, rollout_gradient

DT = 1.0 / 60.0
STEPS = 20
TIGHT = {"substeps": 1, "newton_iterations": 30, "linear_iterations": 60, "newton_tolerance": 0.0,
         "linear_tolerance": 0.0}


def pendulum():
    """A bob on a compliant, damped spring under gravity (distance row)."""
    b = softsnake.ModelBuilder()
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    bob = b.add_particle((0.3, 0.0, 0.6), mass=0.2, velocity=(0.0, 0.4, 0.0))
    b.add_distance(pivot, bob, 0.5, compliance=1e-2, damping=0.01)
    return b.finalize(), "particle", 1, "distance_compliance"


def sliding_particle():
    """A particle sliding on ground with friction (mu 0.4): contact normal and friction rows."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.4)
    b.add_particle((0.0, 0.0, 0.05), velocity=(1.5, 0.3, 0.0), mass=0.3, radius=0.05)
    return b.finalize(), "particle", 0, None


def box_on_slope():
    """A box sliding down a frictionless 35 degree slope: contact rows on a body."""
    angle = math.radians(35.0)
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.0, normal=(math.sin(angle), 0.0, math.cos(angle)))
    box = b.add_body((0.05 * math.sin(angle), 0.0, 0.05 * math.cos(angle)),
                     (0.0, math.sin(0.5 * angle), 0.0, math.cos(0.5 * angle)), velocity=(-0.5, 0.2, 0.0))
    b.add_shape_box(box, (0.05, 0.05, 0.05), density=1000.0)
    return b.finalize(), "body", 0, None


def rolling_sphere():
    """A sphere rolling on ground with friction (mu 0.5), turning within every step: the case whose
    gradient the momentum lag puts off without momentum balance."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    r = 0.05
    body = b.add_body((0.0, 0.0, r), velocity=(1.0, 0.3, 0.0), angular_velocity=(-0.3 / r, 1.0 / r, 0.0))
    b.add_shape_sphere(body, r, density=500.0)
    return b.finalize(), "body", 0, None


def hinged_chain():
    """The planar chain of tests/engine_scenes.py (driven prismatic base, hinges, angular springs)."""
    return chain(True).finalize(), "body", 2, "spring_stiffness"


BALANCED = {"momentum_balance": True}
CASES = {"pendulum": (pendulum, 0.01, {}), "sliding_particle": (sliding_particle, 0.01, {}),
         "box_on_slope": (box_on_slope, 0.01, {}), "hinged_chain": (hinged_chain, 0.03, {}),
         "hinged_chain_balanced": (hinged_chain, 0.01, BALANCED),
         "rolling_sphere_balanced": (rolling_sphere, 0.01, BALANCED),
         "pendulum_two_substeps": (pendulum, 0.01, {"substeps": 2}),
         "sliding_particle_two_substeps": (sliding_particle, 0.01, {"substeps": 2})}


def rollout(make, velocity=None, parameter=None, options=None, steps=STEPS):
    model, kind, _, parameter_name = make()
    solver = softsnake.Solver(model, **{**TIGHT, **(options or {})})
    state, control = model.state(), model.control()
    if model.spring_count:
        control.joint_target.assign(np.full(control.joint_target.shape, 0.3, dtype=np.float32))
    if velocity is not None:
        getattr(state, f"{kind}_qd").assign(velocity.astype(np.float32))
    if parameter is not None:
        getattr(model, parameter_name).assign(parameter.astype(np.float32))
    records = record_rollout(solver, state, control, DT, steps)
    return model, solver, records, getattr(state, f"{kind}_q").numpy().astype(np.float64)


def central(loss, values, index, step):
    plus, minus = values.copy(), values.copy()
    plus[index] += step
    minus[index] -= step
    return (loss(plus) - loss(minus)) / (2.0 * step)


def richardson(loss, values, index, step):
    return (4.0 * central(loss, values, index, 0.5 * step) - central(loss, values, index, step)) / 3.0


@pytest.mark.parametrize("case", list(CASES))
def test_rollout_gradient_matches_central_differences(case):
    make, tolerance, options = CASES[case]
    model, solver, records, end = rollout(make, options=options)
    _, kind, entity, parameter_name = make()
    seed = np.zeros_like(end)
    seed[:, :3] = np.random.default_rng(3).normal(size=(end.shape[0], 3))
    if model.planar_axis >= 0:
        seed[:, model.planar_axis] = 0.0
    parameters = {parameter_name: getattr(model, parameter_name)} if parameter_name else {}
    adjoint, grads = rollout_gradient(solver, records, {f"{kind}_q": seed}, parameters)

    velocity0 = getattr(model, f"{kind}_qd").numpy().astype(np.float64)
    checks = []
    for k in range(velocity0.shape[1]):
        if model.planar_axis >= 0 and k not in (0, 1, 5):
            continue
        difference = richardson(lambda v: float((rollout(make, velocity=v, options=options)[3] * seed).sum()), velocity0, (entity, k), 0.02)
        checks.append((f"d/d {kind}_qd[{entity}, {k}]", adjoint[f"{kind}_qd"][entity, k], difference))
    if parameter_name:
        values = getattr(model, parameter_name).numpy().astype(np.float64)
        for j in range(len(values)):
            step = 0.05 * max(abs(values[j]), 1e-3)
            difference = richardson(lambda p: float((rollout(make, parameter=p, options=options)[3] * seed).sum()), values, j, step)
            checks.append((f"d/d {parameter_name}[{j}]", grads[parameter_name][j], difference))
    largest = max(abs(d) for _, _, d in checks)
    assert largest > 0.0
    for what, gradient, difference in checks:
        assert abs(gradient - difference) <= tolerance * largest, (
            f"{case}: {what}: adjoint {gradient:.6g}, central differences {difference:.6g}")


@pytest.mark.parametrize("least_squares", ["dense", "sparse"])
@pytest.mark.parametrize("steps", [14, 17])
def test_box_gradient_where_its_adjoint_is_nearly_singular(steps, least_squares, monkeypatch):
    """The box of ``box_on_slope`` rests on four coplanar corners, so its adjoint system is singular or
    nearly so in many steps. At 14 and 17 steps the LU's exact solution of a nearly singular system
    (kappa_1 7e8) amplified the float32 rounding of its entries (``gradients._condition_estimate`` now
    sends such systems to least squares). Reference: Richardson-extrapolated central differences;
    tolerance 0.1 % of the largest derivative (0.60 and 0.72; measured: within 3e-5); the LU alone
    missed by 0.0040 and 0.0012 (0.7 % and 0.2 %). "sparse": the least squares of worlds above
    ``DENSE_SOLVE_LIMIT`` unknowns (``_regularized_least_squares``) on this small world, the limit set
    to 0 (with it the whole of this file passes, 51 singular steps)."""
    if least_squares == "sparse":
        monkeypatch.setattr(gradients, "DENSE_SOLVE_LIMIT", 0)
    model, solver, records, end = rollout(box_on_slope, steps=steps)
    seed = np.zeros_like(end)
    seed[:, :3] = np.random.default_rng(3).normal(size=(end.shape[0], 3))
    adjoint, _ = rollout_gradient(solver, records, {"body_q": seed})
    velocity0 = model.body_qd.numpy().astype(np.float64)
    differences = [richardson(lambda v: float((rollout(box_on_slope, velocity=v, steps=steps)[3] * seed).sum()),
                           velocity0, (0, k), 0.02) for k in range(6)]
    largest = max(abs(d) for d in differences)
    for k, difference in enumerate(differences):
        assert abs(adjoint["body_qd"][0, k] - difference) <= 1e-3 * largest, (k, adjoint["body_qd"][0, k], difference)


def test_an_adjoint_that_blows_up_is_reported(monkeypatch):
    """An adjoint that grows without bound backward in time is stopped with a SimulationError naming the
    world and the substep, not returned as NaN. Found in a video fit (linear model, rollout loss, Adam's
    sixth evaluation): the adjoint of one vine grew 20 to 70 times per step backward from substep 370 of
    its rollout and left float32's range at substep 338; the NaN gradient then made Adam's next point
    NaN and the fit stopped with "vine.body_mass: must be finite". Here a step's adjoint solve is made to
    return an overflowing answer at the third substep from the end (of 20)."""
    model, solver, records, end = rollout(pendulum)
    solve, calls = gradients._solve_transposed, []

    def overflowing(jacobian, rhs):
        calls.append(1)
        return solve(jacobian, rhs) * (np.inf if len(calls) == 3 else 1.0)

    monkeypatch.setattr(gradients, "_solve_transposed", overflowing)
    with pytest.raises(softsnake.SimulationError, match="adjoint of world 0 is not finite at substep 17 "):
        rollout_gradient(solver, records, {"particle_q": np.ones_like(end)})


def test_a_planar_adjoint_keeps_to_the_plane(monkeypatch):
    """The planar chain (``hinged_chain``) over 60 steps, its loss seeded in the plane and, a second time, also
    out of it (z and the tilt quaternion components of every body, 1e-3): the start adjoint's in-plane
    components and the spring stiffness gradient are the same to the digit, whether the out-of-plane
    adjoint is kept or dropped every step (``gradients._in_plane``): a planar step keeps every state in the
    plane, so it never flows back. Dropped, the start's out-of-plane adjoint is zero; kept, it grew to
    1.1e-2 here, and in a video fit's vines, seeded by round-off (1e-15), by 3 to 70 times per substep
    until it overflowed float32 and came back as NaN (7 of 80 rollout-loss evaluations failed before the
    nineteenth session). On a GPU "to the digit" becomes float32 round-off (1e-5 of the largest component):
    Warp's backward kernels add each read's adjoint atomically, in an order a GPU does not fix (measured on
    an H100: 4.8e-7 of 0.58)."""
    model, solver, records, end = rollout(hinged_chain, steps=60)
    in_plane = np.zeros_like(end)
    in_plane[:, :2] = np.random.default_rng(5).normal(size=(end.shape[0], 2))
    both = in_plane.copy()
    both[:, 2:5] = 1e-3
    parameters = {"spring_stiffness": model.spring_stiffness}
    reference, reference_grads = rollout_gradient(solver, records, {"body_q": in_plane}, parameters)

    def out_of_plane(adjoint):
        return max(np.abs(adjoint["body_q"][:, 2:5]).max(), np.abs(adjoint["body_qd"][:, 2:5]).max())

    for keep in (False, True):
        if keep:
            monkeypatch.setattr(gradients, "_in_plane", lambda adj, axis: adj)
        adjoint, grads = rollout_gradient(solver, records, {"body_q": both}, parameters)
        assert (out_of_plane(adjoint) > 1e-3) if keep else (out_of_plane(adjoint) == 0.0)
        for got, expected in ((adjoint["body_q"][:, [0, 1, 5, 6]], reference["body_q"][:, [0, 1, 5, 6]]),
                              (grads["spring_stiffness"], reference_grads["spring_stiffness"])):
            bound = 0.0 if model.device.is_cpu else 1e-5 * np.abs(expected).max()
            np.testing.assert_allclose(got, expected, rtol=0.0, atol=bound)


def beam_rollout(pressure=BEAM_PRESSURE, youngs_modulus=None, poisson_ratio=None):
    """20 steps of the beam at a constant pressure [Pa], the elements' modulus and ratio set on the model."""
    model = pneumatic_beam()
    for name, value in (("tet_youngs_modulus", youngs_modulus), ("tet_poisson_ratio", poisson_ratio)):
        if value is not None:
            getattr(model, name).assign(np.full(model.tet_count, value, dtype=np.float32))
    solver = softsnake.Solver(model, **TIGHT)
    state, control = model.state(), model.control()
    control.pressure.assign(np.array([pressure], dtype=np.float32))
    records = record_rollout(solver, state, control, DT, STEPS)
    return model, solver, records, state.particle_q.numpy().astype(np.float64)


def test_pneumatic_beam_gradient_matches_central_differences():
    """The soft beam's loss L = s . x_end (s fixed, random) differentiated by the adjoint with respect to the
    chamber pressure (a Control field: the gradient sums over the 20 steps, the derivative along a constant
    pressure) and to every element's Young's modulus and Poisson's ratio (summed: the derivative along one
    material for the whole beam), against Richardson-extrapolated central differences of whole rollouts.
    Tolerance 1 % of each derivative (measured on the CPU: pressure 0.19 %, modulus 0.08 %, ratio 0.02 %). The
    parameters' arrays are left without gradient arrays, as they were given."""
    model, solver, records, end = beam_rollout()
    assert model.distance_count == 6 and end[:, 2].min() < -0.0105  # six actuation rows; the pressure bends it
    seed = np.random.default_rng(3).normal(size=end.shape)
    _, grads = rollout_gradient(solver, records, {"particle_q": seed}, {
        "pressure": "pressure", "youngs_modulus": model.tet_youngs_modulus, "poisson_ratio": model.tet_poisson_ratio})
    # The model's arrays are left as they were: no gradient array on them (the solver's recorded steps hold them so).
    assert not model.tet_youngs_modulus.requires_grad and model.tet_youngs_modulus.grad is None

    def loss(**values):
        return float((beam_rollout(**values)[3] * seed).sum())

    def derivative(name, value, step):
        central = [(loss(**{name: value + s}) - loss(**{name: value - s})) / (2.0 * s) for s in (0.5 * step, step)]
        return (4.0 * central[0] - central[1]) / 3.0

    checks = [("pressure", grads["pressure"][0], derivative("pressure", BEAM_PRESSURE, 2.0e3)),
              ("youngs_modulus", grads["youngs_modulus"].sum(), derivative("youngs_modulus", BEAM_MODULUS, 5.0e3)),
              ("poisson_ratio", grads["poisson_ratio"].sum(), derivative("poisson_ratio", 0.45, 0.01))]
    for what, gradient, difference in checks:
        assert abs(gradient - difference) <= 0.01 * abs(difference), (
            f"d/d {what}: adjoint {gradient:.6g}, central differences {difference:.6g}")


def ramped_beam_rollout(bump_step=None, bump=0.0):
    """The beam under a pressure ramping up over the 20 steps (step k: (k + 1) / 20 of BEAM_PRESSURE), two
    substeps per step; ``bump`` [Pa] added to step ``bump_step``'s pressure alone."""
    model = pneumatic_beam()
    solver = softsnake.Solver(model, **{**TIGHT, "substeps": 2})
    state, control = model.state(), model.control()
    pressures = BEAM_PRESSURE * (np.arange(STEPS) + 1.0) / STEPS
    if bump_step is not None:
        pressures[bump_step] += bump

    def set_pressure(k, control):
        control.pressure.assign(np.array([pressures[k]], dtype=np.float32))

    records = record_rollout(solver, state, control, DT, STEPS, before_step=set_pressure)
    return solver, records, state.particle_q.numpy().astype(np.float64)


def test_per_step_gradients_of_a_changing_input():
    """``rollout_gradient(..., per_step=True)``: dL/d(the pressure during step k) of the beam under a ramped pressure
    (two substeps per step), against Richardson-extrapolated central differences that change step k's pressure alone,
    at three of the last steps; tolerance 1 % (measured on the CPU: 0.09 %, 0.37 %, 0.05 % at steps 15, 18, 19). The
    beam follows its pressure with a short lag, so the loss depends on when a pressure acts: the last step's moves the
    end 59 times as much as step 15's (earlier steps' effects, below 1e-11, are under the rollouts' own noise). The
    per-step gradients sum to the total the default returns (1e-12 relative: another order of the same float64
    terms)."""
    solver, records, end = ramped_beam_rollout()
    seed = np.random.default_rng(3).normal(size=end.shape)
    _, per_step = rollout_gradient(solver, records, {"particle_q": seed}, {"pressure": "pressure"}, per_step=True)
    _, total = rollout_gradient(solver, records, {"particle_q": seed}, {"pressure": "pressure"})
    assert per_step["pressure"].shape == (STEPS, 1)
    np.testing.assert_allclose(per_step["pressure"].sum(axis=0), total["pressure"], rtol=1e-12)

    def loss(step, bump):
        return float((ramped_beam_rollout(step, bump)[2] * seed).sum())

    for step in (STEPS - 5, STEPS - 2, STEPS - 1):
        central = [(loss(step, b) - loss(step, -b)) / (2.0 * b) for b in (1.0e3, 2.0e3)]
        difference = (4.0 * central[0] - central[1]) / 3.0
        gradient = per_step["pressure"][step, 0]
        assert abs(gradient - difference) <= 0.01 * abs(difference), (
            f"d/d pressure of step {step}: adjoint {gradient:.6g}, central differences {difference:.6g}")
    late = per_step["pressure"][[STEPS - 5, STEPS - 2, STEPS - 1], 0]
    assert 0.0 < late[0] < late[1] < late[2] and late[2] > 30.0 * late[0]


def test_a_rollout_records_every_substep_as_the_solver_steps():
    """``record_rollout`` with a solver of 3 substeps: 3 records per step, each of dt / 3, the last of each
    step ending where ``Solver.step`` of a fresh model ends (bit for bit: the same launches in the same
    order), and the solver back to its 3 substeps."""
    model, _, _, _ = sliding_particle()
    solver = softsnake.Solver(model, **{**TIGHT, "substeps": 3})
    state, control = model.state(), model.control()
    records = record_rollout(solver, state, control, DT, 4)
    assert solver.substeps == 3
    assert [r.step for r in records] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert all(r.h == pytest.approx(DT / 3.0, rel=1e-12) for r in records)
    assert all(np.array_equal(a.end["particle_q"], b.start["particle_q"]) for a, b in zip(records[:-1], records[1:]))
    fresh_model = sliding_particle()[0]
    fresh = softsnake.Solver(fresh_model, **{**TIGHT, "substeps": 3})
    fresh_state = fresh_model.state()
    for k in range(4):
        fresh.step(fresh_state, fresh_state, fresh_model.control(), DT)
        last = records[3 * k + 2].end
        assert np.array_equal(last["particle_q"], fresh_state.particle_q.numpy())
        assert np.array_equal(last["particle_qd"], fresh_state.particle_qd.numpy())
