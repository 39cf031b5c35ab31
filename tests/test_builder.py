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
        b.finalize("cpu")


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
    model = b.finalize("cpu")
    with pytest.raises(ValueError, match="newton_iterations must be a positive integer"):
        softsnake.Solver(model, newton_iterations=0)
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
        b.finalize("cpu")
