"""The engine's verification ladder (ENGINE.md): rigid-body and particle dynamics against analytic answers.

Every test states its analytic reference and tolerance. All run on the CPU; on a machine with
a GPU the same tests run on "cuda" too (SOFTSNAKE_TEST_DEVICES=cpu,cuda).
"""

import math

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import run
from softsnake.spatial import quat_from_axis_angle

G = 9.81

PERIOD_TOLERANCE = 5e-4
"""Relative error allowed of a pendulum's period against T (1 + theta0^2 / 16) at theta0 = 0.1 rad, h = 1/240 s.
Implicit Euler lengthens the period by about (omega h)^2 / 3 (1e-4 here) and damps the swing, whose shrinking
amplitude shortens the period by about as much; measured -1.1e-4 to -1.3e-4 (bodies) and -2.7e-4 (particle)."""


def body_position(state):
    return state.body_q.numpy()[0, :3].copy()


def particle_position(state):
    return state.particle_q.numpy()[0].copy()


def test_free_fall_matches_implicit_euler_and_converges(device):
    """Implicit Euler free fall: x_n = x_0 - g h^2 n (n + 1) / 2 (to float32 rounding, 1e-4 m);
    its error g h T / 2 vanishes with h: < 1e-3 m after 1 s at h = 1e-4 s.
    (Float32 rounding of 240 substeps reaches 2e-4 m: the identity is checked to 5e-4 m.)

    Starting at z = 0 keeps float32 positions (and velocities rebuilt from their differences) accurate.
    """
    b = softsnake.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.0), mass=1.0)
    body = b.add_body((1.0, 0.0, 0.0), mass=2.0, inertia=np.eye(3))
    model = b.finalize(device)
    h = 1.0 / 240.0
    state, _ = run(model, 1.0, dt=2 * h)
    n = 240
    expected = -G * h * h * n * (n + 1) / 2
    assert abs(state.particle_q.numpy()[0, 2] - expected) < 5e-4
    assert abs(state.body_q.numpy()[body, 2] - expected) < 5e-4

    state, _ = run(model, 1.0, dt=1e-3, substeps=10)
    analytic = -0.5 * G
    assert abs(state.particle_q.numpy()[0, 2] - analytic) < 1e-3
    assert abs(state.body_q.numpy()[body, 2] - analytic) < 1e-3


def test_free_fall_with_changing_steps_and_states(device):
    """The solver replays recorded launches; a new step length or new state arrays must be honoured.

    Implicit Euler free fall with steps h_k switching between 1/240 and 1/60 s every second step and
    the state passed back and forth between two State objects at every step: v_k = v_(k-1) - g h_k, x_k = x_(k-1) + h_k v_k
    (float64 reference, to float32 rounding: 1e-5 m after 0.5 s).
    """
    b = softsnake.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.0), mass=1.0)
    model = b.finalize(device)
    solver = softsnake.Solver(model, substeps=1)
    states, control = [model.state(), model.state()], model.control()
    x = v = 0.0
    for k in range(12):
        h = 1.0 / 240.0 if (k // 2) % 2 == 0 else 1.0 / 60.0
        solver.step(states[k % 2], states[(k + 1) % 2], control, h)
        v -= G * h
        x += h * v
    assert abs(states[0].particle_q.numpy()[0, 2] - x) < 1e-5


def test_solver_settings_changed_between_steps_take_effect():
    """A setting changed between steps re-records the launches: a double pendulum (two distance rows,
    a 2x2 system that one conjugate-residual iteration does not solve) stepped with 20 linear
    iterations, then with 1, ends bit for bit where a solver built with 1 iteration takes the same
    state (and differs from a second step with 20). Two Newton iterations, so that neither converges
    (converged, both would end on the same implicit-Euler step)."""
    b = softsnake.ModelBuilder()
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    first = b.add_particle((0.3, 0.0, 1.0), mass=0.2)
    second = b.add_particle((0.6, 0.0, 0.9), mass=0.1)
    b.add_distance(pivot, first)
    b.add_distance(first, second)
    model = b.finalize()
    control = model.control()
    changed = softsnake.Solver(model, substeps=1, newton_iterations=2, warm_start=False)
    state = model.state()
    changed.step(state, state, control, 0.02)
    start = model.state()
    start.assign(state)
    unchanged = model.state()
    softsnake.Solver(model, substeps=1, newton_iterations=2, warm_start=False).step(start, unchanged, control, 0.02)
    changed.linear_iterations = 1
    changed.step(state, state, control, 0.02)
    fresh = softsnake.Solver(model, substeps=1, newton_iterations=2, warm_start=False, linear_iterations=1)
    fresh.step(start, start, control, 0.02)
    assert np.array_equal(state.particle_q.numpy(), start.particle_q.numpy())
    assert not np.array_equal(state.particle_q.numpy(), unchanged.particle_q.numpy())


@wp.kernel
def every_world_iterating(retreat: wp.array(dtype=int), world_count: int, iterating: wp.array(dtype=int),
                          unfinished: wp.array(dtype=int), held: wp.array(dtype=int)):
    """``multipliers.flag_iterating_worlds`` for a loop forced to its whole budget (and its end assembly), in which
    no world is skipped as held (``held`` stays 0): every iteration recomputes every world."""
    _block, lane = wp.tid()
    if lane == 0:
        iterating[0] = 1
        unfinished[0] = 1


PENDULUM_VARIANTS = {"pendulums": {}, "pendulums_compensated": {"compensated_positions": True},
                     "pendulums_block": {"linear_solver": "block"}, "pendulums_batched": {"linear_solver": "batched"}}
"""The pendulum worlds' settings beside the loop's tolerance: compensated positions (whose row and displacement
kernels add into the skipped kernels' outputs), and each linear solver (the whole-solve kernels skip a held world,
the batched one runs over all)."""


@pytest.mark.parametrize("scene", ["soft", "bodies", *PENDULUM_VARIANTS])
def test_newton_loop_ending_early_changes_no_bit(device, scene, monkeypatch):
    """The Newton loop of a substep ends once every world holds its converged point (``Solver._substep``: a
    ``wp.capture_while`` on ``Solver.newton_iterating``, which each assembly sets and the budget's counter
    clears). A scene (the soft cantilever with its pressure rows at 20 kPa, bodies of every shape with friction
    and a hinge, or three worlds of a compliant double pendulum swinging at 0.5, 2 and 5 m/s, which converge at
    different iterations; at the default tolerance they never all do, so there it is 1e-3; also with compensated
    positions and with each linear solver: ``PENDULUM_VARIANTS``) stepped 40 times at
    the default budget: the states, velocities and multipliers are bit for bit those of the same run with the
    loop forced to its whole budget (every world flagged as iterating), the forced run ran the whole budget, and
    the loop did end early (otherwise the test would compare nothing). The early run also skips, in its later
    iterations, the items of the worlds that hold their point (``Solver.held_worlds``), which the forced run
    recomputes. Each run steps launch by launch and in a graph (Warp's CPU graph, or a CUDA graph with conditional
    nodes): all four agree bit for bit."""
    from engine_scenes import pendulum_worlds, scene_bodies, scene_soft

    from softsnake.kernels import multipliers

    def build():
        if scene in PENDULUM_VARIANTS:
            return pendulum_worlds()
        return scene_soft() if scene == "soft" else scene_bodies()

    flag = multipliers.flag_iterating_worlds
    steps = 40

    def run_with(forced, capture_graph):
        monkeypatch.setattr(multipliers, "flag_iterating_worlds", every_world_iterating if forced else flag)
        with wp.ScopedDevice(device):
            model = build()
        options = {"newton_tolerance": 1e-3, **PENDULUM_VARIANTS[scene]} if scene in PENDULUM_VARIANTS else {}
        solver = softsnake.Solver(model, capture_graph=capture_graph, **options)
        iterations = {"run": 0, "skipping": 0}
        original = solver._newton_iteration

        def counted(**kwargs):  # called once per iteration by the host's loop; once per capture in a graph
            iterations["run"] += 1
            if not capture_graph:  # an iteration in which some worlds are skipped as held and others iterate
                held = solver.world_held.numpy()
                iterations["skipping"] += int(0 < held.sum() < len(held))
            original(**kwargs)
        monkeypatch.setattr(solver, "_newton_iteration", counted)
        state, control = model.state(), model.control()
        if model.pressure_channel_count:
            control.pressure.assign(np.full(model.pressure_channel_count, 2e4, dtype=np.float32))
        for _ in range(steps):
            solver.step(state, state, control, 1.0 / 120.0)
        arrays = [state.particle_q, state.particle_qd, state.body_q, state.body_qd, state.multipliers]
        return [a.numpy().copy() for a in arrays], iterations, solver

    early, iterations, solver = run_with(False, capture_graph=False)
    full, budget_iterations, _ = run_with(True, capture_graph=False)
    assert budget_iterations["run"] == steps * solver.substeps * solver.newton_iterations
    assert budget_iterations["skipping"] == 0  # the forced loop holds no world
    assert iterations["run"] < budget_iterations["run"]
    if scene in PENDULUM_VARIANTS:  # worlds that converge apart: the early loop did skip some
        assert iterations["skipping"] > 0
    for forced, reference in ((False, early), (True, full)):
        graphed, _, _ = run_with(forced, capture_graph=True)
        for a, b in zip(graphed, reference):
            assert np.array_equal(a, b)
    for a, b in zip(early, full):
        assert np.array_equal(a, b)


def zero_crossing_period(t, signal):
    s = signal - signal.mean()
    idx = np.flatnonzero((s[:-1] < 0) & (s[1:] >= 0))
    times = t[idx] - s[idx] * (t[idx + 1] - t[idx]) / (s[idx + 1] - s[idx])
    return float(np.mean(np.diff(times)))


def test_particle_pendulum_period(device):
    """Particle on a rigid distance constraint: T = 2 pi sqrt(L / g) (1 + theta0^2 / 16) within PERIOD_TOLERANCE."""
    L, theta0 = 0.5, 0.1
    b = softsnake.ModelBuilder()
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    bob = b.add_particle((L * math.sin(theta0), 0.0, 1.0 - L * math.cos(theta0)), mass=0.2)
    b.add_distance(pivot, bob)
    model = b.finalize(device)
    dt = 1.0 / 240.0
    _, xs = run(model, 4.0, dt=dt, record=lambda s: s.particle_q.numpy()[1, 0])
    period = zero_crossing_period(np.arange(1, len(xs) + 1) * dt, xs)
    expected = 2 * math.pi * math.sqrt(L / G) * (1 + theta0**2 / 16)
    assert abs(period / expected - 1) < PERIOD_TOLERANCE, period / expected - 1


@pytest.mark.parametrize("joint", ["hinge", "attachment"])
def test_body_pendulum_period(device, joint):
    """Rigid rod swinging on a hinge (or hanging from an attachment): T = 2 pi sqrt(I_pivot / (m g d)) (1 + theta0^2 /
    16) within PERIOD_TOLERANCE."""
    length, mass, theta0 = 0.6, 0.5, 0.1
    d = length / 2
    I_cm = mass * length**2 / 12
    b = softsnake.ModelBuilder()
    pivot = np.array([0.0, 0.0, 1.0])
    com = pivot + d * np.array([math.sin(theta0), 0.0, -math.cos(theta0)])
    rod = b.add_body(com, quat_from_axis_angle((0, 1, 0), theta0), mass=mass, inertia=np.diag([I_cm, I_cm, 1e-4]))
    if joint == "hinge":
        b.add_hinge(-1, rod, anchor=pivot, axis=(0, 1, 0))
    else:
        anchor = b.add_particle(pivot, kinematic=True)
        b.add_attachment(rod, anchor)
    model = b.finalize(device)
    dt = 1.0 / 240.0
    _, xs = run(model, 5.0, dt=dt, record=lambda s: s.body_q.numpy()[0, 0])
    period = zero_crossing_period(np.arange(1, len(xs) + 1) * dt, xs)
    expected = 2 * math.pi * math.sqrt((I_cm + mass * d * d) / (mass * G * d)) * (1 + theta0**2 / 16)
    assert abs(period / expected - 1) < PERIOD_TOLERANCE, period / expected - 1


def test_planar_body_pendulum_period(device):
    """Rod on a hinge about z in a planar model (two hinge rows), gravity along -y:
    T = 2 pi sqrt(I_pivot / (m g d)) (1 + theta0^2 / 16) within PERIOD_TOLERANCE."""
    length, mass, theta0 = 0.6, 0.5, 0.1
    d = length / 2
    I_cm = mass * length**2 / 12
    b = softsnake.ModelBuilder(gravity=(0.0, -G, 0.0), planar=True)
    pivot = np.array([0.0, 1.0, 0.0])
    com = pivot + d * np.array([math.sin(theta0), -math.cos(theta0), 0.0])
    rod = b.add_body(com, quat_from_axis_angle((0, 0, 1), theta0), mass=mass, inertia=np.diag([I_cm, 1e-4, I_cm]))
    b.add_hinge(-1, rod, anchor=pivot, axis=(0, 0, 1))
    model = b.finalize(device)
    assert model.row_count == 2
    dt = 1.0 / 240.0
    _, xs = run(model, 5.0, dt=dt, record=lambda s: s.body_q.numpy()[0, 0])
    period = zero_crossing_period(np.arange(1, len(xs) + 1) * dt, xs)
    expected = 2 * math.pi * math.sqrt((I_cm + mass * d * d) / (mass * G * d)) * (1 + theta0**2 / 16)
    assert abs(period / expected - 1) < PERIOD_TOLERANCE, period / expected - 1


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_soft_block_sags_under_own_weight(device, mu):
    """A soft block (nu = 0) resting on the ground sags by rho g H^2 / (2 Y) under its own weight, within 2 %.

    Covers soft bodies on frictionless and frictional ground with damping (both once diverged).
    """
    from softsnake.meshing import box_tet_mesh

    H, Y, rho = 0.1, 2.0e4, 1000.0
    verts, tets = box_tet_mesh(size=(0.1, 0.1, H), cells=(2, 2, 2))
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    b.add_soft_mesh(verts, tets, rho, Y, 0.0, position=(0.0, 0.0, H / 2), damping=0.01)
    model = b.finalize(device)
    state, _ = run(model, 2.0, dt=1.0 / 60.0)
    q = state.particle_q.numpy()
    sag = H - q[verts[:, 2] > H / 2 - 1e-9, 2].mean()
    assert abs(sag / (rho * G * H * H / (2 * Y)) - 1) < 0.02
    assert q[:, 2].min() > -1e-4


def test_auto_linear_solver_follows_the_gpu_measurements():
    """"auto" (``solver.auto_linear_solver``): per_world on the CPU; on a GPU one block per world for worlds of
    at most BLOCK_MAX_ROWS rows (an H100: 1024 vines of 240 rows 12.4 ms per step, against 457.5 for one thread
    per world and 54.0 batched), batched for fewer large worlds than multiprocessors, block for more."""
    from types import SimpleNamespace

    from softsnake.solver import BLOCK_MAX_ROWS, auto_linear_solver

    def pick(is_cpu, rows, worlds, multiprocessors=132):
        device = SimpleNamespace(is_cpu=is_cpu, sm_count=multiprocessors)
        return auto_linear_solver(SimpleNamespace(device=device, largest_world_rows=rows, world_count=worlds))

    assert pick(True, 28332, 1) == pick(True, 120, 4096) == "per_world"
    assert pick(False, 120, 1) == pick(False, BLOCK_MAX_ROWS, 1) == pick(False, 240, 4096) == "block"
    assert pick(False, BLOCK_MAX_ROWS + 1, 1) == pick(False, 28332, 128) == "batched"
    assert pick(False, 28332, 132) == pick(False, 28332, 1024) == "block"


def test_block_solver_threads_follow_the_gpu_measurements():
    """``linear_solve.whole_solve_threads``: the block solver's threads per world, whole warps from 32 to 512,
    at the sizes an H100 measured fastest among 32, 128, 256 and 512 (gpu.md, section 9.3): 128 for a vine of
    15 links (240 rows: 0.58 ms per solve of 4096 vines, against 0.88 at 32 and 1.73 at 512), 512 for a
    paper-mesh snake (28 332 rows: 7.0 ms, against 10.4 at 256)."""
    from softsnake.linear_solve import whole_solve_threads

    assert whole_solve_threads(240) == 128 and whole_solve_threads(28332) == 512
    sizes = [whole_solve_threads(rows) for rows in range(1, 3000)]
    assert all(32 <= t <= 512 and t % 32 == 0 for t in sizes) and sizes == sorted(sizes)


def test_block_solver_threads_fit_many_worlds_into_one_wave():
    """With more worlds than a GPU holds at once (1024 threads of the block solver per multiprocessor), the block
    halves down to 128 threads: 1024 coarse snakes (6068 rows) on an H100's 132 multiprocessors at 128 threads
    (at 512 only 264 fit at once); 256 of them still at 512, 512 at 256; never below 128 (4096 vines of 240
    rows), never on the CPU (no multiprocessors: a block is one thread there)."""
    from softsnake.linear_solve import whole_solve_threads

    assert whole_solve_threads(6068, 1024, 132) == 128
    assert whole_solve_threads(6068, 256, 132) == 512 and whole_solve_threads(6068, 512, 132) == 256
    assert whole_solve_threads(28332, 1024, 132) == 128 and whole_solve_threads(28332, 32, 132) == 512
    assert whole_solve_threads(240, 4096, 132) == whole_solve_threads(240) == 128
    assert whole_solve_threads(6068, 1024, 0) == whole_solve_threads(6068) == 512
