"""Many worlds: batch independence, determinism, and the non-finite state check."""


import numpy as np
import pytest

import softsnake
from softsnake.meshing import box_tet_mesh
from softsnake.memory import array_bytes

from engine_scenes import scene_soft


def world_builder(k):
    """World k: a small soft cube dropped at a k-dependent height and speed, a hinged rod, a particle."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.6)
    verts, tets = box_tet_mesh(size=(0.1, 0.1, 0.1), cells=(2, 2, 2))
    b.add_soft_mesh(verts, tets, 1000.0, 2.0e4, 0.4, position=(0.0, 0.0, 0.05 + 0.01 * k),
                    velocity=(0.1 * (k % 4), 0.0, 0.0), damping=0.01)
    rod = b.add_body((0.5, 0.0, 0.5 - 0.15), mass=0.3, inertia=np.diag([2e-3, 2e-3, 1e-4]),
                     angular_velocity=(0.0, 0.2 * k, 0.0))
    b.add_hinge(-1, rod, anchor=(0.5, 0.0, 0.5), axis=(0, 1, 0))
    b.add_particle((1.0, 0.0, 0.2 + 0.02 * k), velocity=(0.0, 0.05 * k, 0.0), mass=0.1, radius=0.02)
    return b


def simulate(builder, device, seconds=1.0, dt=1.0 / 60.0):
    model = builder.finalize(device)
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, dt)
    return model, state


def test_batch_worlds_match_worlds_alone(device):
    """16 different worlds in one batch give, world by world, the trajectories of each world alone (< 1e-5 m after 1 s)."""
    batch = softsnake.ModelBuilder()
    for k in range(16):
        batch.add_world(world_builder(k), offset=(0.0, 2.0 * k, 0.0))
    model, state = simulate(batch, device)
    particles = state.particle_q.numpy()
    bodies = state.body_q.numpy()
    worst = 0.0
    for k in (0, 5, 15):
        alone = softsnake.ModelBuilder()
        alone.add_world(world_builder(k), offset=(0.0, 2.0 * k, 0.0))
        _, single = simulate(alone, device)
        p = particles[model.world_slice("particle", k)]
        b = bodies[model.world_slice("body", k)]
        worst = max(worst, np.abs(p - single.particle_q.numpy()).max(), np.abs(b[:, :3] - single.body_q.numpy()[:, :3]).max())
    assert worst < 1e-5
    # The worlds really differ from each other (the comparison is not vacuous); each is simulated in its
    # own frame, so world 15's positions are comparable with world 0's as they are.
    first = particles[model.world_slice("particle", 0)]
    last = particles[model.world_slice("particle", 15)]
    assert np.abs(first - last).max() > 1e-2


def test_runs_are_bit_identical(device):
    """Two runs of the same batch on one device give bit-identical states (fixed-order reductions, no
    atomics in the step: determinism by construction, on a GPU too)."""
    results = []
    for _ in range(2):
        batch = softsnake.ModelBuilder()
        batch.replicate(world_builder(3), 4, spacing=(0.0, 2.0, 0.0))
        _, state = simulate(batch, device, seconds=0.5)
        results.append((state.particle_q.numpy(), state.body_q.numpy(), state.particle_qd.numpy()))
    for a, b in zip(*results):
        assert np.array_equal(a, b)


def test_nonfinite_state_raises_naming_world_and_step():
    """A NaN velocity in world 2 of 4 raises SimulationError naming world 2 and the step."""
    batch = softsnake.ModelBuilder()
    for k in range(4):
        w = softsnake.ModelBuilder()
        w.add_particle((0.0, 0.0, 1.0), mass=1.0)
        batch.add_world(w)
    model = batch.finalize()
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    solver.step(state, state, control, 0.01)
    velocities = state.particle_qd.numpy()
    velocities[2, 0] = np.nan
    state.particle_qd.assign(velocities)
    with pytest.raises(softsnake.SimulationError, match=r"world 2 blew up \(a non-finite state\) in step 2") as info:
        solver.step(state, state, control, 0.01)
    assert info.value.world == 2 and info.value.step == 2
    # Switched off, the same step runs without the check.
    quiet = softsnake.Solver(model, check_finite=False)
    quiet.step(state, state, control, 0.01)


def test_runaway_speed_raises_before_it_overflows():
    """A finite but runaway state (a particle at 2 km/s, as a diverging solve produces long before Inf)
    raises SimulationError naming the world; 900 m/s stays under the default bound of 1000 m/s."""
    batch = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    for speed in (900.0, 2000.0):
        w = softsnake.ModelBuilder(gravity=(0.0, 0.0, 0.0))
        w.add_particle((0.0, 0.0, 1.0), velocity=(speed, 0.0, 0.0), mass=1.0)
        batch.add_world(w)
    model = batch.finalize()
    state, control = model.state(), model.control()
    with pytest.raises(softsnake.SimulationError, match=r"world 1 blew up \(a speed above 1000 m/s\)") as info:
        softsnake.Solver(model).step(state, state, control, 0.001)
    assert info.value.world == 1
    # A higher bound lets the same state through.
    softsnake.Solver(model, max_speed=5000.0).step(state, state, control, 0.001)
    with pytest.raises(ValueError, match="max_speed"):
        softsnake.Solver(model, max_speed=0.0)


def assert_batched_matches_per_world(batched, per_world, device):
    """On the CPU the batched solver's inner products add in the per-world solver's order (a thread block is one
    thread): bit-identical. On a GPU they add in a tree over a block's threads: within 1e-4 m (the bound of the
    block solver's test below; round-off carried through contacts for 0.5 s)."""
    if device == "cpu":
        assert np.array_equal(batched, per_world)
    else:
        assert np.abs(batched - per_world).max() < 1e-4


@pytest.mark.parametrize("budget", [{}, {"linear_iterations": 7}], ids=["default", "odd_budget"])
def test_per_world_and_batched_linear_solvers_agree(device, budget):
    """The one-thread-per-world solve and the batched kernels compute the same iterates (0.5 s of soft cubes of two
    reduction chunks each, rods, particles): bit-identical on the CPU, to round-off on a GPU
    (``assert_batched_matches_per_world``). At the default budget and at 7 iterations (the batched iterations
    alternate two arrays for z.Az; an odd count ends on the first, before the worlds have converged)."""
    batched, per_world = (three_world_positions(device, linear_solver=solver, **budget)
                          for solver in ("batched", "per_world"))
    assert_batched_matches_per_world(batched, per_world, device)


def planar_world_builder(k):
    """Planar world k (gravity -y, ground y = 0): a particle pair on a damped distance row, a rod on a hinge about z,
    a ball rolling with friction, at k-dependent speeds."""
    b = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True)
    b.add_ground(mu=0.5, normal=(0.0, 1.0, 0.0))
    first = b.add_particle((0.0, 0.05 + 0.01 * k, 0.0), velocity=(0.1 * k, 0.0, 0.0), mass=0.1, radius=0.02)
    second = b.add_particle((0.1, 0.1, 0.0), mass=0.2, radius=0.02)
    b.add_distance(first, second, compliance=1e-5, damping=0.01)
    rod = b.add_body((0.5, 0.5 - 0.15, 0.0), mass=0.3, inertia=np.diag([2e-3, 1e-4, 2e-3]),
                     angular_velocity=(0.0, 0.0, 2.0 + 0.5 * k))
    b.add_hinge(-1, rod, anchor=(0.5, 0.5, 0.0), axis=(0, 0, 1))
    ball = b.add_body((1.0, 0.06, 0.0), velocity=(0.2 + 0.1 * k, 0.0, 0.0))
    b.add_shape_sphere(ball, 0.05, density=500.0)
    return b


def three_world_positions(device, planar=False, push_at=None, ping_pong=False, **solver_options):
    """Positions (particles, then body origins; flat) after 30 steps of 1/60 s of three worlds of
    ``world_builder`` (or ``planar_world_builder``) side by side; ``push_at``: the step from which each
    world's free particle (its last) is pushed by a constant force; ``ping_pong``: two states stepped in
    turn (``step(state_0, state_1)``, then the other way round) instead of one stepped in place."""
    batch = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True) if planar else softsnake.ModelBuilder()
    for k in range(3):
        world = planar_world_builder(k) if planar else world_builder(k)
        batch.add_world(world, offset=(0.0, 0.0, 2.0 * k) if planar else (0.0, 2.0 * k, 0.0))
    model = batch.finalize(device)
    solver = softsnake.Solver(model, **solver_options)
    states, control = [model.state(), model.state()] if ping_pong else [model.state()] * 2, model.control()
    for step in range(30):
        if step == push_at:
            forces = np.zeros((model.particle_count, 3), dtype=np.float32)
            forces[np.asarray(model.particle_world_start[1:]) - 1] = (0.3, 0.0, 0.5)
            states[0].particle_f.assign(forces)
        solver.step(states[0], states[1], control, 1.0 / 60.0)
        states.reverse()
    state = states[0]
    return np.concatenate([state.particle_q.numpy().ravel(), state.body_q.numpy()[:, :3].ravel()])


def test_per_world_and_batched_linear_solvers_agree_in_planar_models(device):
    """Planar models (in-plane solve, planar shortcuts of the per-world solve): the per-world and batched solvers
    compute the same iterates (0.5 s of particles, a hinged rod and a rolling ball on the ground; bit-identical on
    the CPU, to round-off on a GPU)."""
    results = []
    for linear_solver in ("batched", "per_world"):
        batch = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True)
        for k in range(3):
            batch.add_world(planar_world_builder(k), offset=(0.0, 0.0, 2.0 * k))
        model = batch.finalize(device)
        solver = softsnake.Solver(model, linear_solver=linear_solver)
        state, control = model.state(), model.control()
        start = state.body_q.numpy().copy()
        for _ in range(30):
            solver.step(state, state, control, 1.0 / 60.0)
        results.append((state.particle_q.numpy(), state.body_q.numpy()))
    for batched, per_world in zip(*results):
        assert_batched_matches_per_world(batched, per_world, device)
    # The run is not vacuous: every world's particles fell to the ground, its rod swung, its ball rolled.
    particles, bodies = results[1]
    assert np.all(np.abs(particles[:, 1] - 0.02) < 1e-3)
    assert np.all(np.abs(bodies[0::2, 5] - start[0::2, 5]) > 1e-2)
    assert np.all(bodies[1::2, 0] > 1.05)


def test_memory_grows_by_one_world_per_world(device):
    """The arrays of model, state, control and solver grow exactly linearly with the world count (the
    per-world footprint the benchmarks report), and a shared array counts once."""
    footprint = {}
    for count in (1, 2, 4):
        scene = softsnake.ModelBuilder()
        scene.replicate(world_builder(0), count, spacing=(0.0, 2.0, 0.0))
        model = scene.finalize(device)
        solver = softsnake.Solver(model)
        state, control = model.state(), model.control()
        footprint[count] = array_bytes(model, state, control, solver)
    per_world = footprint[2] - footprint[1]
    assert per_world > 0
    # Per-world arrays grow by one world each; the few fixed-size ones (gravity, starts) stay.
    # 64 B of slack: world-start arrays hold world_count + 1 ints.
    assert abs(footprint[4] - footprint[2] - 2 * per_world) <= 64
    assert array_bytes(state, state) == array_bytes(state)


def sliding_boxes(count=2):
    """``count`` worlds, each a cube sliding on frictional ground (carried contact multipliers)."""
    batch = softsnake.ModelBuilder()
    batch.add_ground(mu=0.5)
    for k in range(count):
        world = softsnake.ModelBuilder()
        cube = world.add_body((0.0, 0.0, 0.05), velocity=(1.0 + 0.5 * k, 0.0, 0.0))
        world.add_shape_box(cube, (0.05, 0.05, 0.05), density=1000.0)
        batch.add_world(world, offset=(0.0, float(k), 0.0))
    return batch.finalize()


def steps(solver, state, control, count, dt=1.0 / 120.0):
    for _ in range(count):
        solver.step(state, state, control, dt)
    return state.body_q.numpy().copy()


def test_a_fresh_state_on_a_used_solver_matches_a_fresh_solver():
    """The carried multipliers live in the State: a new State stepped by a solver that has run another
    State is bit-identical to the same State stepped by a new solver."""
    model = sliding_boxes()
    used = softsnake.Solver(model)
    steps(used, model.state(), model.control(), 20)
    again = steps(used, model.state(), model.control(), 20)
    fresh = steps(softsnake.Solver(model), model.state(), model.control(), 20)
    assert np.array_equal(again, fresh)


def test_a_state_goes_on_the_same_under_a_new_solver():
    """Everything a step carries into the next lives in the State: a pressurised soft cantilever stepped 3 steps,
    then copied and handed to a new solver, goes on bit for bit as with the solver that stepped it (the carried
    multipliers, their substep length and the chamber pressures they were computed under, which the elastic
    warm start compares with the current ones; before the pressures moved into the State, the new solver took
    them as 0 and the copy ended 3.4e-8 m away 15 steps after the hand-over)."""
    model = scene_soft()
    dt = 1.0 / 120.0
    first, state, control = softsnake.Solver(model), model.state(), model.control()
    control.pressure.fill_(3.0e4)
    for _ in range(3):
        first.step(state, state, control, dt)
    handed = model.state()
    handed.assign(state)
    second = softsnake.Solver(model)
    for _ in range(12):
        first.step(state, state, control, dt)
        second.step(handed, handed, control, dt)
    for name in ("particle_q", "particle_qd", "body_q", "multipliers", "multiplier_pressure"):
        assert np.array_equal(getattr(state, name).numpy(), getattr(handed, name).numpy()), name


def test_reset_restarts_the_chosen_worlds_only():
    """``Solver.reset(state, world_mask)``: world 1 starts again from the model's initial state (its
    next steps are bit-identical to a fresh run's) while world 0 goes on as if nothing happened."""
    model = sliding_boxes()
    solver, state, control = softsnake.Solver(model), model.state(), model.control()
    steps(solver, state, control, 15)
    reference = model.state()
    reference_solver = softsnake.Solver(model)
    steps(reference_solver, reference, control, 15)
    solver.reset(state, world_mask=[False, True])
    after = steps(solver, state, control, 10)
    fresh = steps(softsnake.Solver(model), model.state(), control, 10)
    going_on = steps(reference_solver, reference, control, 10)
    assert np.array_equal(after[1], fresh[1])
    assert np.array_equal(after[0], going_on[0])
    with pytest.raises(softsnake.ConfigError, match="world_mask must hold 2 booleans"):
        solver.reset(state, world_mask=[True])


def test_state_of_another_model_is_refused():
    """Stepping a State or Control made by another model raises ConfigError naming the mismatch."""
    model, other = sliding_boxes(2), sliding_boxes(3)
    solver = softsnake.Solver(model)
    with pytest.raises(softsnake.ConfigError, match="state_in belongs to another model"):
        solver.step(other.state(), model.state(), model.control(), 0.01)
    with pytest.raises(softsnake.ConfigError, match="control must be a State or Control"):
        solver.step(model.state(), model.state(), None, 0.01)


@pytest.mark.parametrize("planar", [False, True])
def test_block_linear_solver_matches_per_world(device, planar):
    """The one-block-per-world solve (``linear_solver="block"``) computes the per-world solve's iterates up to
    float round-off (its inner products add in a tree): after 0.5 s of the scenes above, every position within
    1e-4 m (on the CPU, where a block is one thread: 4.8e-6 m for the soft cubes, which carry round-off through
    their contacts, and 0 for the planar scene; on a GPU 32 threads share a world)."""
    results = [three_world_positions(device, planar, linear_solver=solver) for solver in ("per_world", "block")]
    difference = np.abs(results[0] - results[1]).max()
    assert difference < 1e-4, difference


def test_graph_steps_match_plain_launches(device):
    """A step replayed from a graph (``capture_graph``, the default: a CUDA graph, or Warp's CPU graph) computes what
    the same launches compute one by one: bit-identical states after 30 steps of soft cubes, rods and particles,
    warm-started, with external forces switched on halfway (new values in an array the replayed graph reads)."""
    graph, plain = (three_world_positions(device, push_at=15, capture_graph=flag) for flag in (True, False))
    assert np.array_equal(graph, plain)


def test_states_stepped_in_turn_keep_their_recordings(device, monkeypatch):
    """Two states stepped in turn (Newton's ``step(state_0, state_1)``, then swapped) compute what one state
    stepped in place computes, bit for bit, and each keeps its recording (and CUDA graphs): a step's launches are
    recorded once per set of arrays, not again at every step (a Solver keeps ``RECORDINGS_KEPT`` recordings; with
    one, every step of the pair recorded all its launches again: a soft beam's step took 1.45x its time in place
    on the CPU, and on a GPU no graph was replayed)."""
    recorded = []
    predict_commands = softsnake.newton.predict_commands
    monkeypatch.setattr(softsnake.newton, "predict_commands",
                        lambda solver, state, h: recorded.append(id(state)) or predict_commands(solver, state, h))
    in_turn = three_world_positions(device, push_at=15, ping_pong=True)
    assert len(recorded) == 2 and len(set(recorded)) == 2, recorded
    assert np.array_equal(in_turn, three_world_positions(device, push_at=15))


def test_blow_up_check_reads_every_check_interval_steps(device):
    """With ``check_interval=3`` a NaN entering world 1 in step 2 is reported after step 3, naming the world and
    the steps since the last read; the check never misses a step (its flags keep the worst finding)."""
    batch = softsnake.ModelBuilder()
    for _ in range(3):
        w = softsnake.ModelBuilder()
        w.add_particle((0.0, 0.0, 1.0), mass=1.0)
        batch.add_world(w)
    model = batch.finalize(device)
    solver = softsnake.Solver(model, check_interval=3)
    state, control = model.state(), model.control()
    solver.step(state, state, control, 0.01)
    velocities = state.particle_qd.numpy()
    velocities[1, 2] = np.inf
    state.particle_qd.assign(velocities)
    solver.step(state, state, control, 0.01)  # step 2: flagged on the device, not read yet
    with pytest.raises(softsnake.SimulationError, match=r"world 1 blew up \(a non-finite state\) in steps 1\.\.3"):
        solver.step(state, state, control, 0.01)
    with pytest.raises(ValueError, match="check_interval"):
        softsnake.Solver(model, check_interval=0)
