"""Compensated positions (``SolverSettings.compensated_positions``, ``softsnake.kernels.compensated``): each position a
float32 pair, the value and the remainder its rounding dropped, so that steps too small for float32's spacing still
resolve the motion.

Against exact arithmetic (the pair's addition), against motion that float32 rounds to nothing (a slow particle far
out), against the analytic stopping distance below the step where float32 positions end its first-order
convergence, and against the off switch (bit for bit the float32 step; the golden states hold that too).
"""

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import HINGED_BAR_HALF_EXTENTS, HINGED_BAR_PIVOT, hinged_bar, run
from softsnake.kernels.compensated import pair_add, rotated_pair, rotation_between_pairs
from softsnake.spatial import box_inertia
from test_friction import G, sliding_particle


@wp.kernel
def add_pairs(hi: wp.array(dtype=wp.vec3), lo: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3),
              out_hi: wp.array(dtype=wp.vec3), out_lo: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    a, b = pair_add(hi[i], lo[i], d[i])
    out_hi[i] = a
    out_lo[i] = b


def test_pair_addition_is_exact_to_the_pair_precision(device):
    """(hi, lo) + d for 30 000 random float32 triples (positions up to 1 km, remainders within half their spacing,
    steps from 1e-9 m to 10 m, and a hundred pairs whose remainder exceeds their value): the pair's sum hi' + lo' (in
    float64) is the exact sum to 2^-46 of the operands' size |hi| + |lo| + |d| (float32's own rounding is 2^-24 of it;
    measured: 2^-48). Where the remainder exceeds the value, to one float32 rounding of the remainder, 2^-23 |lo|
    (the remainder being at most half the spacing of the model frame's coordinate, that is still 2^-47 of the
    coordinate). And |lo'| is at most half of hi''s spacing: the pair comes out renormalised."""
    rng = np.random.default_rng(0)
    n = 10_000
    hi = (rng.uniform(-1000.0, 1000.0, (n, 3)) * 10.0 ** rng.integers(-3, 1, (n, 1))).astype(np.float32)
    lo = (rng.uniform(-0.5, 0.5, (n, 3)) * np.spacing(np.abs(hi))).astype(np.float32)
    d = (rng.choice([-1.0, 1.0], (n, 3)) * 10.0 ** rng.uniform(-9.0, 1.0, (n, 3))).astype(np.float32)
    # In a world's frame a value can lie near the frame's origin while its remainder is the model frame's: pairs
    # whose remainder exceeds the value (the last hundred rows: values 0 or below 1e-9 m, remainders to 1e-7 m).
    hi[-100:] = (rng.uniform(-1e-9, 1e-9, (100, 3)) * (rng.random((100, 3)) < 0.5)).astype(np.float32)
    lo[-100:] = rng.uniform(-1e-7, 1e-7, (100, 3)).astype(np.float32)
    out_hi, out_lo = (wp.zeros(n, dtype=wp.vec3, device=device) for _ in range(2))
    wp.launch(add_pairs, n, inputs=[wp.array(hi, dtype=wp.vec3, device=device), wp.array(lo, dtype=wp.vec3, device=device),
                                    wp.array(d, dtype=wp.vec3, device=device)], outputs=[out_hi, out_lo], device=device)
    got_hi, got_lo = out_hi.numpy(), out_lo.numpy()
    exact = hi.astype(np.float64) + lo.astype(np.float64) + d.astype(np.float64)
    error = np.abs(got_hi.astype(np.float64) + got_lo.astype(np.float64) - exact)
    size = np.abs(hi).astype(np.float64) + np.abs(lo) + np.abs(d)
    assert np.all(error[:-100] <= 2.0**-46 * size[:-100]), np.max(error[:-100] / size[:-100])
    assert np.all(error[-100:] <= 2.0**-23 * np.abs(lo[-100:]) + 2.0**-46 * size[-100:])
    assert np.all(np.abs(got_lo) <= 0.5 * np.spacing(np.abs(got_hi)))


def drifting_particle(device, x0):
    """A 1 kg particle at x = ``x0`` [m] of its world, no gravity, drifting along +x at 1 mm/s."""
    b = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((x0, 0.0, 0.0), velocity=(1.0e-3, 0.0, 0.0))
    return b.finalize(device)


@pytest.mark.parametrize("compensated", [False, True], ids=["float32", "compensated"])
def test_slow_drift_far_out(device, compensated):
    """A particle drifting at 1 mm/s, 1 km from its world's origin, for 1 s of 1 ms steps (2 substeps each): a
    substep moves it 0.5 um, below float32's spacing there (61 um). Float32 positions round every move to nothing
    and it stays where it started (its velocity intact); compensated, it travels 1 mm to 1e-9 m."""
    model = drifting_particle(device, 1000.0)
    state, _ = run(model, 1.0, dt=1.0e-3, compensated_positions=compensated)
    x = float(state.particle_q.numpy()[0, 0]) + float(state.particle_q_low.numpy()[0, 0])
    assert state.particle_qd.numpy()[0, 0] == pytest.approx(1.0e-3, rel=1e-6)
    if compensated:
        assert x - 1000.0 == pytest.approx(1.0e-3, abs=1e-9)
    else:
        assert x == 1000.0


@pytest.mark.parametrize("start", [{"warm_start": True}, {"warm_start": False, "newton_tolerance": 1e-8}],
                         ids=["warm", "cold"])
@pytest.mark.parametrize("compensated", [
    pytest.param(False, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
        "float32 positions and velocities leave implicit Euler's answer (at 1/3840 s -0.110 mm warm, -0.097 cold, "
        "against -0.130): experiments/results/convergence.md, 'Contacts at small steps'"))),
    True], ids=["float32", "compensated"])
def test_stopping_distance_is_implicit_eulers_to_small_steps(device, compensated, start):
    """The particle of ``test_friction.test_stopping_distance_converges_at_first_order`` (2 m/s, mu 0.3) at frames of
    1/960 to 1/7680 s (substeps h of half the frame): compensated, its stopping distance is implicit Euler's own,
    v0^2 / (2 mu g) - v0 h / 2 (the sum of the substeps' h v_k with v_k = v0 - k mu g h), within 0.002 mm at every
    step, warm and cold (measured: warm -0.5212 / -0.2609 / -0.1302 / -0.0646 mm, cold -0.5205 / -0.2601 / -0.1299 /
    -0.0644, against -0.5208 / -0.2604 / -0.1302 / -0.0651). What it takes (convergence.md, "Contacts at small
    steps"): the ground's gap measured from the plane moved out by the radius (``shapes.obstacle_gap``), the contact
    rows reading the positions' remainders themselves (``ConstraintType.reads_remainders``), velocities kept as pairs
    too (``State.particle_qd_low``) and a sliding friction row's Fischer-Burmeister function without cancellation
    (``contact.friction_rows``); before them the slide ended +0.18 mm long at 1/7680 s, warm and cold. With float32
    positions and velocities the error at 1/3840 s is -0.110 mm warm, -0.097 cold. The cold start runs to a Newton
    tolerance of 1e-8."""
    v0, mu = 2.0, 0.3
    exact = v0 * v0 / (2 * mu * G)
    for dt in (1.0 / 960.0, 1.0 / 1920.0, 1.0 / 3840.0, 1.0 / 7680.0):
        state, _ = run(sliding_particle(device, mu, v0), 1.2 * v0 / (mu * G), dt=dt, compensated_positions=compensated,
                       **start)
        x = float(state.particle_q.numpy()[0, 0]) + float(state.particle_q_low.numpy()[0, 0])
        implicit_euler = exact - v0 * (dt / 2) / 2
        assert abs(x - implicit_euler) < 2e-6, (dt, x - exact, implicit_euler - exact)


def test_a_saved_state_without_remainders_loads_with_zero_remainders():
    """``State.assign_numpy`` of a state saved before the remainders existed (no ``particle_q_low``, ``body_q_low``):
    the positions are the saved float32 values, the remainders zero; any other array missing is an error."""
    model = drifting_particle("cpu", 1.0)
    state = model.state()
    run_state, _ = run(model, 0.01, dt=1.0e-3, compensated_positions=True)
    saved = run_state.numpy()
    assert np.any(saved["particle_q_low"] != 0.0)
    old = {k: v for k, v in saved.items() if k not in ("particle_q_low", "body_q_low")}
    state.particle_q_low.fill_(1.0)
    state.assign_numpy(old)
    assert np.array_equal(state.particle_q.numpy(), saved["particle_q"])
    assert not np.any(state.particle_q_low.numpy())
    del old["particle_qd"]
    with pytest.raises(softsnake.ConfigError, match="state array particle_qd is missing"):
        state.assign_numpy(old)


def test_rows_see_the_remainders(device):
    """A row's residual at the pair (hi + r) is c(hi) + J r (``compensated.add_remainders_to_rows``): a rod's row
    moves by r along it (r = 2e-8 m on a free end 0.5 m out, a third of float32's spacing there). A contact's
    friction row measures the slip since the substep's start and reads the remainders itself
    (``ConstraintType.reads_remainders``): not at all where the remainder did not change over the substep, by
    r - r_n where it did, here within 1 % (a sticking contact holding its weight, b = mu g h^2 = 5e-6 m: the
    Fischer-Burmeister row's slope in the slip is 1 to a / b). With compensation off the remainders are not read."""
    b = softsnake.ModelBuilder()
    pivot = b.add_particle((0.0, 0.0, 0.0), kinematic=True)
    end = b.add_particle((0.5, 0.0, 0.0))
    b.add_distance(pivot, end)
    b.add_ground(mu=0.5)
    foot = b.add_particle((2.0, 0.0, 0.01), radius=0.01)  # resting on the ground
    model = b.finalize(device)
    friction_row = int(model.contact_slot_row.numpy()[list(model.contact_slot_entity.numpy()).index(foot)]) + 1

    def residuals(compensated, r, r_n):
        solver = softsnake.Solver(model, compensated_positions=compensated)
        state, control = model.state(), model.control()
        solver.step(state, state, control, 1.0e-3)
        low = np.zeros((model.particle_count, 3), dtype=np.float32)
        low[end] = low[foot] = r
        state.particle_q_low.assign(low)
        low[end] = low[foot] = r_n
        solver.particle_q_prev_low.assign(low)
        solver.residual_norms(state, control, 1.0e-3)
        return solver.row_c.numpy()[[0, friction_row]].astype(np.float64)

    along = np.array([2e-8, 0.0, 0.0], dtype=np.float32)
    base = residuals(True, 0.0 * along, 0.0 * along)
    assert residuals(False, along, 0.0 * along) == pytest.approx(residuals(False, 0.0 * along, 0.0 * along), abs=0.0)
    rod, friction = residuals(True, along, along) - base
    assert rod == pytest.approx(2e-8, rel=1e-3) and friction == pytest.approx(0.0, abs=1e-12)
    rod, friction = residuals(True, along, 0.0 * along) - base
    assert rod == pytest.approx(2e-8, rel=1e-3) and abs(friction) == pytest.approx(2e-8, rel=1e-2)


def test_rows_see_a_bodys_rotation_remainder(device):
    """A body's rotation remainder delta (``State.body_q_low``'s bottom) turns its points by delta x lever, and the
    rows see it as they see a centre's remainder: a body resting on three spheres 0.5 m out, one along x, with a
    light particle attached 0.5 m out along x, delta = 4e-8 rad about z (two thirds of a quaternion's spacing near
    0.7): the attachment's y row moves by 2e-8 m (0.5 delta) within 1e-3 (``add_remainders_to_rows``, the angular degrees of
    freedom taking delta), the contact's friction rows by 2e-8 m within 1 % where delta changed over the substep and
    not at all where it did not (``body_point_remainder`` in the contact kernel; the sphere on x), the normal row not
    at all."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.5)
    body = b.add_body((0.0, 0.0, 0.01), mass=1.0, inertia=np.eye(3) * 0.01)
    for angle in (0.0, 2.0 * np.pi / 3.0, -2.0 * np.pi / 3.0):  # a tripod, each foot carrying a third of the weight
        b.add_shape_sphere(body, 0.01, position=(0.5 * np.cos(angle), 0.5 * np.sin(angle), 0.0))
    b.add_attachment(body, b.add_particle((0.5, 0.0, 0.2), mass=1.0e-3), local_position=(0.5, 0.0, 0.19))
    model = b.finalize(device)
    slot = int(np.flatnonzero(model.contact_slot_entity.numpy() == model.particle_count + body)[0])
    normal_row = int(model.contact_slot_row.numpy()[slot])

    def residuals(delta, delta_n):
        solver = softsnake.Solver(model, compensated_positions=True)
        state, control = model.state(), model.control()
        solver.step(state, state, control, 1.0e-3)
        for target, value in ((state.body_q_low, delta), (solver.body_q_prev_low, delta_n)):
            target.assign(np.array([[0.0, 0.0, 0.0, *value]], dtype=np.float32))
        solver.residual_norms(state, control, 1.0e-3)
        return solver.row_c.numpy()[[1, normal_row, normal_row + 1, normal_row + 2]].astype(np.float64)

    zero, turn = (0.0, 0.0, 0.0), (0.0, 0.0, 4.0e-8)
    base = residuals(zero, zero)
    attachment_y, normal, *friction = residuals(turn, turn) - base
    assert abs(attachment_y) == pytest.approx(2e-8, rel=1e-3)
    assert normal == pytest.approx(0.0, abs=1e-12) and np.abs(friction).max() < 1e-12
    attachment_y, normal, *friction = residuals(turn, zero) - base
    assert abs(attachment_y) == pytest.approx(2e-8, rel=1e-3) and normal == pytest.approx(0.0, abs=1e-12)
    assert np.linalg.norm(friction) == pytest.approx(2e-8, rel=1e-2)


def test_a_state_saved_with_centre_remainders_only_loads():
    """A state saved before rotations had remainders (``body_q_low`` of shape (body_count, 3), the centres' alone)
    loads with those centres' remainders and zero rotation remainders; another shape is the one-line error."""
    model = hinged_bar(0.02)
    state = model.state()
    saved = state.numpy()
    saved["body_q_low"] = np.full((1, 3), 1.0e-9, dtype=np.float32)
    state.assign_numpy(saved)
    assert np.array_equal(state.body_q_low.numpy(), np.array([[1e-9, 1e-9, 1e-9, 0.0, 0.0, 0.0]], dtype=np.float32))
    saved["body_q_low"] = np.zeros((1, 4), dtype=np.float32)
    with pytest.raises(softsnake.ConfigError, match="state array body_q_low has shape"):
        state.assign_numpy(saved)


def test_auto_compensates_from_substeps_of_1_600_s():
    """``compensated_positions="auto"`` (the default) pairs positions for substeps of at most 1/600 s (from 8 substeps
    of a 1/120 s frame), where float32's rounding shows in the resting snake; True and False force it; anything else
    is a one-line error naming the setting."""
    settings = softsnake.SolverSettings()
    assert settings.compensated_positions == "auto"
    assert not settings.compensates_positions(1.0 / 240.0) and not settings.compensates_positions(1.0 / 480.0)
    assert settings.compensates_positions(1.0 / 960.0) and settings.compensates_positions(1.0 / 1920.0)
    assert softsnake.SolverSettings(compensated_positions=True).compensates_positions(1.0 / 60.0)
    assert not softsnake.SolverSettings(compensated_positions=False).compensates_positions(1.0e-5)
    with pytest.raises(softsnake.ConfigError, match="compensated_positions must be True, False or 'auto'"):
        softsnake.SolverSettings(compensated_positions="yes")


@pytest.mark.parametrize("substeps, compensated, within", [(2, True, 1e-6), (10, True, 1e-6), (20, True, 1e-6),
                                                           (40, True, 1e-6), (2, False, 5e-6)])
def test_a_hinged_body_swings_at_small_substeps(substeps, compensated, within):
    """A 0.4 m bar (0.3 kg) hinged at one end, released from rest 0.02 rad off the vertical (its frame turned a
    quarter turn about the hinge: quaternion components near 0.7, float32's spacing there 6e-8). From rest it turns by
    about h^2 g theta / d per substep, 3e-9 rad at 1/9600 s: a float32 quaternion rounds that away (the bar stayed
    at its release at 40 substeps, lost 5 % of its swing at 20 and gained 7 % under the plain iteration at 10), the
    rotation's remainder (``State.body_q_low``) keeps it. Compensated at 2, 10, 20 and 40 substeps of 1/240 s (the
    default solver; forced at 2): after 62 frames, just short of a quarter period, the centre's x is the
    small-amplitude pendulum's -d sin(theta_0 cos(omega t)) within ``within`` (1e-3 mm, a quarter of a thousandth of
    the 4 mm swing; measured within 3e-4 mm), and its largest swing to +x over the first 0.6 s (past half a
    period) is the release's times implicit Euler's decay exp(-omega^2 h t / 2) at half a period, within 2e-3
    (measured 0.980, 0.996, 0.998, 0.999 against 0.980, 0.996, 0.998, 0.999). Float32 at 2 substeps, the gait's:
    within 5e-3 mm, float32's velocity resolution (a turn's rounding, 6e-8 rad, over h is 3e-5 rad/s, which the
    bar's 0.2 m lever carries 1.6e-6 m in a quarter period; measured 1.6e-3 mm)."""
    tilt, frame = 0.02, 1.0 / 240.0
    half = HINGED_BAR_HALF_EXTENTS
    mass = 0.3
    model = hinged_bar(tilt, mass=mass)
    pivot_inertia = box_inertia(mass, half)[1, 1] + mass * half[0] ** 2
    omega = np.sqrt(mass * 9.81 * half[0] / pivot_inertia)
    solver = softsnake.Solver(model, substeps=substeps, compensated_positions=compensated)
    state, control = model.state(), model.control()
    xs = []
    for _ in range(round(0.6 / frame)):
        solver.step(state, state, control, frame)
        xs.append(float(state.body_q.numpy()[0, 0]) - HINGED_BAR_PIVOT[0])
    quarter = 62
    exact = -half[0] * np.sin(tilt * np.cos(omega * quarter * frame))
    assert abs(xs[quarter - 1] - exact) < within, (xs[quarter - 1], exact)
    decay = np.exp(-omega ** 2 * (frame / substeps) * (np.pi / omega) / 2.0)
    assert abs(max(xs) / (half[0] * np.sin(tilt)) - decay) < 2.0e-3, (max(xs) / (half[0] * np.sin(tilt)), decay)


@wp.kernel
def turn_pairs(q: wp.array(dtype=wp.quat), turn: wp.vec3d, count: int, out_q: wp.array(dtype=wp.quat),
               out_delta: wp.array(dtype=wp.vec3), out_between: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    hi = q[i]
    delta = wp.vec3(0.0)
    for _ in range(count):
        hi, delta = rotated_pair(hi, delta, turn)
    out_q[i] = hi
    out_delta[i] = delta
    out_between[i] = rotation_between_pairs(hi, delta, q[i], wp.vec3(0.0))


def test_rotation_pairs_keep_turns_below_the_quaternions_spacing(device):
    """``compensated.rotated_pair``: 10 000 turns of 1e-9 rad about a fixed axis, each far below the spacing of a
    quaternion's components (6e-8 near 0.7), from 64 random rotations: the pair (q, delta) ends turned by 1e-5 rad to
    5e-12 rad (each turn's split keeps delta to float32's precision, ~2e-15 rad, and these roundings add up; measured
    1.8e-12), where turning a float32 quaternion rounds every turn away; ``rotation_between_pairs`` measures the
    turn between the pairs to the same 5e-12 rad (its float32 result's own rounding: 4e-13 rad), and |delta| stays
    within the float32 rounding of q's components."""
    rng = np.random.default_rng(1)
    q = rng.normal(size=(64, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    count, step = 10_000, 1.0e-9
    q_in = wp.array(q.astype(np.float32), dtype=wp.quat, device=device)
    out_q, out_delta, out_between = (wp.zeros(64, dtype=t, device=device) for t in (wp.quat, wp.vec3, wp.vec3))
    turn = (axis * step).astype(np.float32)
    wp.launch(turn_pairs, 64, [q_in, wp.vec3d(*turn), count], [out_q, out_delta, out_between], device=device)
    total = turn.astype(np.float64) * count
    assert np.abs(out_between.numpy() - total).max() < 5.0e-12
    assert np.linalg.norm(out_delta.numpy(), axis=1).max() < 1.0e-7
    # The end pair against the start turned once by the whole angle (float64 quaternions, x y z w).
    def product(a, b):
        (ax, ay, az, aw), (bx, by, bz, bw) = a, b
        return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                         aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])
    for i in range(64):
        start = q_in.numpy()[i].astype(np.float64)
        start /= np.linalg.norm(start)
        angle = np.linalg.norm(total)
        expected = product(np.append(np.sin(angle / 2) * total / angle, np.cos(angle / 2)), start)
        hi = out_q.numpy()[i].astype(np.float64)
        hi /= np.linalg.norm(hi)
        d = out_delta.numpy()[i].astype(np.float64)
        a = np.linalg.norm(d)
        end = product(np.append(np.sin(a / 2) * d / a if a > 0 else d / 2, np.cos(a / 2)), hi)
        assert min(np.abs(end - expected).max(), np.abs(end + expected).max()) < 5.0e-12, i
