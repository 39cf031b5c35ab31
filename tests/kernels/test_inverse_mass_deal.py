"""How the block solver deals a world's particles and bodies to its threads (``linear_solver.
world_inverse_mass_transpose``, the bodies continuing the deal where the particles end): every entity to exactly
one thread, so that any block size computes u = M^-1 J^T x to the bit of one thread walking them all.

On the CPU a block is one thread, so the solver itself never deals; here each thread of a plain launch plays
one lane of a block of ``stride`` threads, over a real system (after a few steps of worlds with a soft cube,
hinged rods and a free particle; 3D and planar), with u filled with NaN first: an entity no lane takes stays
NaN, one taken twice or in another order would differ in its bits.
"""

import numpy as np
import pytest
import warp as wp

import softsnake
from softsnake.constraints.tetrahedron import TetrahedronOperator
from softsnake.kernels.linear_solver import world_inverse_mass_transpose
from softsnake.meshing import box_tet_mesh


@wp.kernel
def dealt_inverse_mass_transpose(
    stride: int,
    worlds: int,
    particle_world_start: wp.array(dtype=int),
    body_world_start: wp.array(dtype=int),
    particle_count: int,
    planar: int,
    JT_offsets: wp.array(dtype=int),
    JT_ends: wp.array(dtype=int),
    JT_columns: wp.array(dtype=int),
    JT_values: wp.array(dtype=float),
    tets: TetrahedronOperator,
    x: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    u: wp.array(dtype=float),
):
    lane = wp.tid()
    for w in range(worlds):
        world_inverse_mass_transpose(particle_world_start[w], particle_world_start[w + 1], body_world_start[w],
                                     body_world_start[w + 1], lane, stride, particle_count, planar, JT_offsets,
                                     JT_ends, JT_columns, JT_values, tets, x, particle_inv_mass, body_inv_mass,
                                     body_inv_inertia_world, u)


def world(k, planar):
    """World k: a soft cube (27 particles) or a chain of particles (planar), four hinged rods, a free particle."""
    if planar:
        b = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True)
        b.add_ground(mu=0.5, normal=(0.0, 1.0, 0.0))
        previous = None
        for i in range(7):
            particle = b.add_particle((0.05 * i, 0.05 + 0.01 * k, 0.0), mass=0.1, radius=0.02)
            if previous is not None:
                b.add_distance(previous, particle, compliance=1e-5, damping=0.01)
            previous = particle
        axis, hanging = (0, 0, 1), (0.0, -0.15, 0.0)
    else:
        b = softsnake.ModelBuilder()
        b.add_ground(mu=0.6)
        verts, tets = box_tet_mesh(size=(0.1, 0.1, 0.1), cells=(2, 2, 2))
        b.add_soft_mesh(verts, tets, 1000.0, 2.0e4, 0.4, position=(0.0, 0.0, 0.05 + 0.01 * k), damping=0.01)
        axis, hanging = (0, 1, 0), (0.0, 0.0, -0.15)
    for r in range(4):
        anchor = np.array((0.5 + 0.3 * r, 0.5, 0.0) if planar else (0.5 + 0.3 * r, 0.0, 0.5))
        rod = b.add_body(tuple(anchor + hanging), mass=0.3, inertia=np.diag([2e-3, 2e-3, 2e-3]),
                         angular_velocity=tuple(2.0 * np.array(axis) * (1 + r + k)))
        b.add_hinge(-1, rod, anchor=tuple(anchor), axis=axis)
    b.add_particle((2.0, 0.2, 0.0) if planar else (2.0, 0.0, 0.2), mass=0.1, radius=0.02)
    return b


@pytest.mark.parametrize("planar, operator", [(False, "stored"), (False, "matrix_free"), (True, "stored")],
                         ids=["3d", "3d-matrix-free", "planar"])
def test_every_block_size_deals_each_entity_to_one_lane(planar, operator):
    """Also with the tetrahedra's rows applied matrix-free (``SolverSettings.tetrahedron_operator``): a particle's
    corners are dealt with it."""
    batch = softsnake.ModelBuilder(gravity=(0.0, -9.81, 0.0), planar=True) if planar else softsnake.ModelBuilder()
    for k in range(3):
        batch.add_world(world(k, planar), offset=(0.0, 0.0, 2.0 * k) if planar else (0.0, 2.0 * k, 0.0))
    model = batch.finalize("cpu")
    solver = softsnake.Solver(model, linear_solver="block", capture_graph=False, tetrahedron_operator=operator)
    state, control = model.state(), model.control()
    for _ in range(5):
        solver.step(state, state, control, 1.0 / 60.0)
    T = solver.transpose()
    assert model.body_count == 12 and np.abs(T.values.numpy()).max() > 0.0
    assert T.tets.enabled == (operator == "matrix_free")
    x = wp.array(np.random.default_rng(0).normal(size=model.row_count), dtype=float, device="cpu")

    def dealt(stride):
        u = wp.array(np.full(solver.u.shape, np.nan, dtype=np.float32), dtype=float, device="cpu")
        wp.launch(dealt_inverse_mass_transpose, dim=stride, device="cpu", inputs=[
            stride, model.world_count, model.particle_world_start_device, model.body_world_start_device,
            model.particle_count, int(planar), T.offsets, solver.JT_live_ends, T.columns, T.values, T.tets, x,
            model.particle_inv_mass, model.body_inv_mass, solver.body_inv_inertia_world, u])
        return u.numpy()

    one = dealt(1)
    # The degrees of freedom the solve reads: all of them in 3D; in the plane a particle's x, y, a body's x, y, rz.
    if planar:
        read = np.zeros(one.shape, dtype=bool)
        read[:3 * model.particle_count].reshape(-1, 3)[:, :2] = True
        read[3 * model.particle_count:].reshape(-1, 6)[:, [0, 1, 5]] = True
    else:
        read = np.ones(one.shape, dtype=bool)
    bodies = slice(3 * model.particle_count, None)
    assert np.all(np.isfinite(one[read])) and np.abs(one[bodies][read[bodies]]).max() > 0.0
    # Particles per world: 27 + 1 (or 7 + 1) with 4 bodies after them, so the bodies land on every kind of lane.
    for stride in (2, 3, 5, 8, 29, 32, 128):
        np.testing.assert_array_equal(dealt(stride)[read], one[read], err_msg=f"stride {stride}")
