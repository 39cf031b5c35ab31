"""Bad input to the engine gets a clear ModelError naming the item, before anything runs."""

import math

import numpy as np
import pytest

import softsnake
from softsnake import ModelError

TET_VERTS = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def add_tet(tets=((0, 1, 2, 3),), verts=TET_VERTS, **kw):
    options = dict(density=1000.0, youngs_modulus=1e5, poisson_ratio=0.3)
    options.update(kw)
    softsnake.ModelBuilder().add_soft_mesh(verts, np.asarray(tets), **options)


def test_inverted_tet():
    with pytest.raises(ModelError, match=r"tet 0 \[0, 2, 1, 3\] is inverted"):
        add_tet(tets=((0, 2, 1, 3),))


def test_zero_volume_tet():
    flat = TET_VERTS.copy()
    flat[3] = [0.5, 0.5, 0.0]
    with pytest.raises(ModelError, match=r"tet 0 .* has zero volume"):
        add_tet(verts=flat)


def test_tet_index_out_of_range():
    with pytest.raises(ModelError, match=r"tet 0 has vertex index \[0, 1, 2, 7\] out of range"):
        add_tet(tets=((0, 1, 2, 7),))


@pytest.mark.parametrize("nu", [0.5, -0.1, 0.7, math.nan])
def test_poisson_ratio_outside_range(nu):
    with pytest.raises(ModelError, match="poisson_ratio must lie in"):
        add_tet(poisson_ratio=nu)


@pytest.mark.parametrize("name", ["youngs_modulus", "density"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan])
def test_non_positive_material(name, value):
    with pytest.raises(ModelError, match=f"soft mesh {name} must be positive"):
        add_tet(**{name: value})


def test_nan_vertex():
    verts = TET_VERTS.copy()
    verts[2, 1] = math.nan
    with pytest.raises(ModelError, match="vertices contain NaN"):
        add_tet(verts=verts)


@pytest.mark.parametrize("mass", [0.0, -2.0, math.nan])
def test_particle_mass(mass):
    with pytest.raises(ModelError, match="particle 0 mass must be positive"):
        softsnake.ModelBuilder().add_particle((0, 0, 0), mass=mass)


def test_nan_particle_position():
    with pytest.raises(ModelError, match=r"particle 0 position contains NaN"):
        softsnake.ModelBuilder().add_particle((0, math.nan, 0))


def test_distance_index_out_of_range():
    b = softsnake.ModelBuilder()
    b.add_particle((0, 0, 0))
    with pytest.raises(ModelError, match=r"distance 0: particle index 5 out of range \[0, 1\)"):
        b.add_distance(0, 5)


def test_negative_compliance_and_stiffness():
    b = softsnake.ModelBuilder()
    b.add_particle((0, 0, 0))
    b.add_particle((1, 0, 0))
    with pytest.raises(ModelError, match="distance 0 compliance must be non-negative"):
        b.add_distance(0, 1, compliance=-1.0)
    body = b.add_body((0, 0, 0), mass=1.0, inertia=np.eye(3))
    with pytest.raises(ModelError, match="angular spring 0 stiffness must be positive"):
        b.add_angular_spring(-1, body, (0, 0, 1), stiffness=0.0)


def test_body_without_mass_fails_at_finalize():
    b = softsnake.ModelBuilder()
    b.add_body((0, 0, 0))
    with pytest.raises(ModelError, match="body 0 has zero mass"):
        b.finalize()


def test_hinge_body_out_of_range():
    b = softsnake.ModelBuilder()
    with pytest.raises(ModelError, match=r"hinge 0: body index 3 out of range"):
        b.add_hinge(-1, 3, anchor=(0, 0, 0), axis=(0, 0, 1))


def test_unknown_device():
    b = softsnake.ModelBuilder()
    b.add_particle((0, 0, 0))
    with pytest.raises(ModelError, match=r"unknown device 'tpu:7'; available devices: cpu"):
        b.finalize("tpu:7")


def test_bad_time_step_and_solver_options():
    b = softsnake.ModelBuilder()
    b.add_particle((0, 0, 0))
    model = b.finalize()
    with pytest.raises(ValueError, match="newton_iterations must be a positive integer"):
        softsnake.Solver(model, newton_iterations=0)
    with pytest.raises(ValueError, match="runaway_speed must be positive and finite, got -1.0"):
        softsnake.Solver(model, runaway_speed=-1.0)
    solver = softsnake.Solver(model)
    state = model.state()
    with pytest.raises(ValueError, match="dt must be a positive finite time step"):
        solver.step(state, state, model.control(), math.nan)


@pytest.mark.parametrize("joint, message", [
    ("hinge", r"hinge 0 of a planar model: its axis must be the plane normal \(0, 0, 1\)"),
    ("spring", r"angular spring 0 of a planar model: its axis must be the plane normal"),
    ("prismatic", r"prismatic 0 of a planar model: its axis must lie in the plane z = const"),
    ("tilted", r"body 1 of a planar model must be rotated about z only"),
    ("inertia", r"body 1 of a planar model needs z as a principal axis of inertia"),
])
def test_planar_model_rejects_motion_out_of_its_plane(joint, message):
    b = softsnake.ModelBuilder(planar=True)
    a = b.add_body((0, 0, 0), mass=1.0, inertia=np.eye(3))
    rotation = (0.0, math.sin(0.1), 0.0, math.cos(0.1)) if joint == "tilted" else (0, 0, 0, 1)
    inertia = [[1.0, 0.0, 0.2], [0.0, 1.0, 0.0], [0.2, 0.0, 1.0]] if joint == "inertia" else np.eye(3)
    c = b.add_body((1, 0, 0), rotation, mass=1.0, inertia=inertia)
    if joint == "hinge":
        b.add_hinge(a, c, anchor=(0.5, 0, 0), axis=(1, 0, 0))
    elif joint == "spring":
        b.add_angular_spring(a, c, (0, 1, 0), stiffness=1.0)
    elif joint == "prismatic":
        b.add_prismatic(a, c, anchor=(0.5, 0, 0), axis=(0, 0, 1))
    with pytest.raises(ModelError, match=message):
        b.finalize()


# ---------------------------------------------------------------------- transactional builder
def list_lengths(builder):
    """Every per-item list's length, by name: what a rejected add must leave as it was."""
    return {name: len(value) for name, value in vars(builder).items() if isinstance(value, list)}


def two_bodies():
    b = softsnake.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0))
    b.add_body((0, 0, 1), mass=1.0, inertia=np.eye(3))
    b.add_body((1, 0, 1), mass=1.0, inertia=np.eye(3))
    return b


REJECTED_ADDS = [
    # (what to call on two_bodies(), the message): each fails after some of its checks have passed.
    (lambda b: b.add_soft_mesh(TET_VERTS, np.array([[0, 1, 2, 3]]), 1000.0, 1e5, 0.3, position=(9999.5, 0, 0)),
     r"soft mesh vertex 1 \(particle 2\) position .* lies beyond 10000 m"),
    (lambda b: b.add_soft_mesh(TET_VERTS, np.array([[0, 1, 2, 3]]), 1000.0, 1e5, 0.3, velocity=(0, math.inf, 0)),
     r"soft mesh vertex 0 \(particle 1\) velocity contains NaN or Inf"),
    (lambda b: b.add_shape_sphere(0, 1.0, density=3e38), r"shape 0 \(sphere\): body 0 mass with the shape's overflows"),
    (lambda b: b.add_shape_box(1, (0.1, -0.1, 0.1), density=1000.0), r"shape 0 \(box\) half_extents must be positive"),
    (lambda b: b.add_distance(0, 0), "distance 0 connects particle 0 to itself"),
    (lambda b: b.add_hinge(0, 1, (0, 0, 1), (0, 0, 0)), "hinge 0 axis is zero"),
    (lambda b: b.add_prismatic(0, 1, (0, 0, 1), (1, 0, 0), rate=math.nan), "prismatic 0 rate contains NaN"),
    (lambda b: b.add_angular_spring(0, 1, (0, 0, 1), moment_curve=([0.0, 1.0], [0.0, "x"])),
     "angular spring 0 moment_curve needs"),
    (lambda b: b.add_attachment(1, 0, local_position=(0, 0, 1e39)), "attachment 0 local_position overflows float32"),
    (lambda b: b.add_obstacle_cylinder((0, 0, 0), 0.1, -1.0), r"obstacle 0 \(cylinder\) half_height must be positive"),
    (lambda b: b.add_ground(normal=(0, 0, 0)), r"obstacle 0 \(ground\) normal is zero"),
    (lambda b: b.add_world(softsnake.ModelBuilder()), "already holds items of world 0"),
    (lambda b: b.replicate(softsnake.ModelBuilder(), 1.5), "replicate count must be an integer"),
    (lambda b: b.replicate(softsnake.ModelBuilder(), 2, first=-1), "replicate first must be at least 0"),
]


def test_replicate_from_first_places_copies_as_in_the_longer_row():
    """``replicate(..., first=3)`` places its copies where copies 3 and 4 of one longer row stand (a worker's
    share of a row), and they are simulated in their own frames as any copy."""
    world = softsnake.ModelBuilder()
    world.add_particle((0.0, 0.0, 1.0), mass=1.0)
    row, share = softsnake.ModelBuilder(), softsnake.ModelBuilder()
    row.replicate(world, 5, spacing=(0.0, 0.7, 0.0))
    share.replicate(world, 2, spacing=(0.0, 0.7, 0.0), first=3)
    assert np.array_equal(share.world_offsets(), row.world_offsets()[3:5])
    assert np.array_equal(share.finalize().particle_q.numpy(), row.finalize().particle_q.numpy()[3:5])


@pytest.mark.parametrize("add, message", REJECTED_ADDS)
def test_rejected_add_leaves_no_trace_and_the_builder_goes_on(add, message):
    """A rejected add_* call changes none of the builder's lists (nor a body's mass), so a user who
    catches the error and goes on building gets a model that finalizes and steps."""
    b = two_bodies()
    before, masses = list_lengths(b), list(b.body_mass)
    with pytest.raises(ModelError, match=message):
        add(b)
    assert list_lengths(b) == before and b.body_mass == masses
    b.add_particle((1.0, 0.0, 1.0))
    b.add_distance(0, 1)
    b.add_hinge(0, 1, (0.5, 0, 1), (0, 0, 1))
    model = b.finalize()
    state = model.state()
    softsnake.Solver(model).step(state, state, model.control(), 0.01)
    assert np.all(np.isfinite(state.particle_q.numpy())) and np.all(np.isfinite(state.body_q.numpy()))


def test_world_is_added_whole_or_not_at_all():
    """An offset beyond the position bound adds nothing: add_world refuses it, and replicate refuses a
    batch whose last copy lies beyond it before adding the first copy (no half-added batch)."""
    world = two_bodies()
    scene = softsnake.ModelBuilder()
    scene.add_world(world)
    before = list_lengths(scene)
    with pytest.raises(ModelError, match=r"world offset \[10001.0, 0.0, 0.0\] lies beyond 10000 m"):
        scene.add_world(world, offset=(10001.0, 0.0, 0.0))
    with pytest.raises(ModelError, match=r"replicate offset of copy 3 \[12000.0, 0.0, 0.0\] lies beyond 10000 m"):
        scene.replicate(world, 4, spacing=(4000.0, 0.0, 0.0))
    assert list_lengths(scene) == before and scene.world_count == 1


def test_worlds_keep_their_own_coordinates():
    """Worlds are simulated in their own frames: add_world keeps positions and anchors to the static world
    as the world's builder holds them and records the offset. (It used to add the offset to them, so a
    world 9999.5 m out, whose body then lay beyond the position bound, was refused.)"""
    world = two_bodies()
    world.add_hinge(-1, 1, (1.0, 0.0, 2.0), (0.0, 1.0, 0.0))
    world.add_ground()
    scene = softsnake.ModelBuilder()
    scene.add_world(world)
    scene.add_world(world, offset=(9999.5, -20.0, 3.0))
    assert np.array_equal(scene.particle_q[1], world.particle_q[0])
    assert np.array_equal(scene.body_q[3][0], world.body_q[1][0])
    assert np.array_equal(scene.hinge_anchor_a[1], world.hinge_anchor_a[0])
    assert np.array_equal(scene.obstacle_pos[1], world.obstacle_pos[0])
    assert np.array_equal(scene.world_offsets(), [[0.0, 0.0, 0.0], [9999.5, -20.0, 3.0]])
    model = scene.finalize()
    assert model.world_offset.dtype == np.float64 and np.array_equal(model.world_offset, scene.world_offsets())
    state = model.state()
    assert np.array_equal(model.scene_particle_q(state)[1], [9999.5, -20.0, 4.0])
    assert np.array_equal(model.scene_body_q(state)[3], [10000.5, -20.0, 4.0, 0.0, 0.0, 0.0, 1.0])
    single = two_bodies().finalize()
    assert np.array_equal(single.world_offset, np.zeros((1, 3)))


def test_add_world_refuses_a_builder_of_worlds():
    """A builder that holds worlds has a frame per world: merged into one world they would overlap."""
    inner = softsnake.ModelBuilder()
    inner.add_world(two_bodies(), offset=(0.0, 1.0, 0.0))
    scene = softsnake.ModelBuilder()
    with pytest.raises(ModelError, match="holds worlds of its own"):
        scene.add_world(inner)
    assert scene.world_count == 0


@pytest.mark.parametrize("corrupt, message", [
    (lambda b: b.particle_q.append(np.zeros(3)), r"corrupt builder: particle_q has 2 values for 1 particle items"),
    (lambda b: b.body_mass.pop(), r"corrupt builder: body_mass has 1 values for 2 body items"),
    (lambda b: b.hinge_body_b.__setitem__(0, 7), r"corrupt builder: hinge 0: body index 7 outside \[0, 2\)"),
    (lambda b: b.hinge_body_a.__setitem__(0, -2), r"corrupt builder: hinge 0: body index -2 outside -1 or \[0, 2\)"),
    (lambda b: b.body_world.__setitem__(1, 3), r"corrupt builder: body 1 belongs to world 3, outside \[0, 1\)"),
    (lambda b: b.hinge_body_a.__setitem__(0, 0.5), "corrupt builder: hinge_body_a holds values that are not integers"),
    (lambda b: b.shape_kind.__setitem__(0, 9), "corrupt builder: shape 0 has unknown kind 9"),
    (lambda b: b.body_mass.__setitem__(0, 1e46), r"body 0 mass \[1e\+46\] is not finite in float32"),
])
def test_finalize_refuses_a_corrupt_builder(corrupt, message):
    """Lists changed behind the builder's back (the half-added items of older code) are refused by
    finalize with a ModelError, before any kernel could read past an array's end (a crash)."""
    b = two_bodies()
    b.add_hinge(0, 1, (0.5, 0, 1), (0, 0, 1))
    b.add_shape_sphere(0, 0.1)
    corrupt(b)
    with pytest.raises(ModelError, match=message):
        b.finalize()


def test_items_must_stay_in_their_world():
    """A constraint of one world that refers to another world's particle is refused (the per-world solve
    would read outside its world's rows)."""
    scene = softsnake.ModelBuilder()
    for _ in range(2):
        world = softsnake.ModelBuilder()
        world.add_particle((0, 0, 1))
        world.add_particle((1, 0, 1))
        world.add_distance(0, 1)
        scene.add_world(world)
    scene.distance_particles[1] = (0, 3)
    with pytest.raises(ModelError, match="corrupt builder: distance 1 of world 1 refers to particle 0 of world 0"):
        scene.finalize()


# ---------------------------------------------------------------------- float32 limits
@pytest.mark.parametrize("add, message", [
    (lambda b: b.add_particle((0, 0, 0), mass=1e46), r"particle 0 mass overflows float32"),
    (lambda b: b.add_particle((0, 0, 0), mass=1e38), r"particle 0 mass 1e\+38 kg is too large for float32.*its inverse 1e-38 would become 0"),
    (lambda b: b.add_particle((0, 0, 0), mass=1e-40), r"particle 0 mass underflows float32"),
    (lambda b: b.add_particle((1e39, 0, 0)), r"particle 0 position overflows float32"),
    (lambda b: b.add_particle((2e4, 0, 0)), r"particle 0 position \[20000.0, 0.0, 0.0\] lies beyond 10000 m"),
    (lambda b: b.add_body((0, 0, 0), mass=1e38), r"body 0 mass 1e\+38 kg is too large for float32.*as if it were kinematic"),
    (lambda b: b.add_body((0, 0, 0), mass=1.0, inertia=np.eye(3) * 1e-300), "body 0 inertia underflows float32"),
    (lambda b: b.add_body((0, 0, 0), mass=1.0, inertia="x"), "body 0 inertia must be 9 numbers"),
    (lambda b: b.add_shape_sphere(b.add_body(), 1e300), r"shape 0 \(sphere\) radius overflows float32"),
    (lambda b: b.add_shape_sphere(b.add_body(), 1e30), r"shape 0 \(sphere\) radius 1e\+30 m exceeds 10000 m"),
    (lambda b: b.add_obstacle_box((0, 0, 0), (1e5, 1, 1)), r"obstacle 0 \(box\) half_extents .* lies beyond 10000 m"),
    (lambda b: b.add_distance(b.add_particle((0, 0, 0)), b.add_particle((1, 0, 0)), compliance=1e39),
     "distance 0 compliance overflows float32"),
    (lambda b: b.add_soft_mesh(TET_VERTS * 1e-14, np.array([[0, 1, 2, 3]]), 1000.0, 1e-2, 0.3),
     r"soft mesh tet 0 \[0, 1, 2, 3\]: volume .* times youngs_modulus .* is outside float32"),
    (lambda b: b.add_particle((0, 0, 0), mass="heavy"), "particle 0 mass must be a number, got 'heavy'"),
    (lambda b: b.add_particle((0, 0, 0), mass=True), "particle 0 mass must be a number, got True"),
])
def test_values_float32_cannot_hold_are_refused(add, message):
    """Values finite in float64 but not in float32 (in which the model is simulated) are refused with a
    message that names the item and says why: a mass of 1e46 used to become inverse mass 0 (a particle
    hanging in the air), a position of 1e39 Inf, and a sphere radius of 1e300 an OverflowError."""
    with pytest.raises(ModelError, match=message):
        add(softsnake.ModelBuilder())


def test_body_too_heavy_from_its_shapes_is_refused_at_finalize():
    b = softsnake.ModelBuilder()
    body = b.add_body()
    b.add_shape_sphere(body, 0.5, density=3e38)  # 1.6e38 kg: float32 holds it, but not its inverse
    with pytest.raises(ModelError, match=r"body 0 mass 1.57\d*e\+38 kg is too large for float32.*its inverse .* would become 0"):
        b.finalize()


def test_fractional_and_nan_indices_are_refused():
    b = softsnake.ModelBuilder()
    b.add_particle((0, 0, 0))
    b.add_particle((1, 0, 0))
    with pytest.raises(ModelError, match=r"distance 0: particle index must be an integer index, got 1.5"):
        b.add_distance(0, 1.5)
    with pytest.raises(ModelError, match=r"distance 0: particle index must be an integer index, got nan"):
        b.add_distance(math.nan, 1)
    assert b.add_distance(0, 1.0) == 0  # a whole float is an index


# ---------------------------------------------------------------------- worlds
@pytest.mark.parametrize("world_options, message", [
    ({"gravity": (0.0, 0.0, 0.0)}, r"add_world: the world's gravity \[0.0, 0.0, 0.0\] m/s\^2 differs from this scene's"),
    ({"planar": True}, r"add_world: the world's builder has planar=True, this scene planar=False"),
])
def test_add_world_refuses_another_gravity_or_plane(world_options, message):
    """add_world used to drop the world's gravity and planar flag silently (the scene's won)."""
    world = softsnake.ModelBuilder(**world_options)
    world.add_particle((0, 0, 1))
    scene = softsnake.ModelBuilder()
    with pytest.raises(ModelError, match=message):
        scene.add_world(world)
    assert scene.world_count == 0 and scene.particle_count == 0


def test_model_beyond_int32_indices_is_refused():
    """J's nonzeros are indexed by Warp's int32: a model with more (8192 paper-mesh snakes: ~2.7e9) is refused
    with a one-line ModelError naming the count, before any array is made; the limit itself is accepted."""
    from softsnake.layout import INDEX_LIMIT, check_index_range
    check_index_range(INDEX_LIMIT, "nonzeros of J")
    with pytest.raises(ModelError, match=r"the model has 2147483648 nonzeros of J, more than Warp's int32 indices"):
        check_index_range(INDEX_LIMIT + 1, "nonzeros of J")
