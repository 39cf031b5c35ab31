"""Corotational linear tetrahedra as compliant constraints (seed 001, eq. 5).

Six rows per tetrahedron: the strain sym(R^T F) - I in Voigt order (xx, yy, zz, yz, xz, xy),
F = Ds Dm^-1 and R the rotation of the polar decomposition of F, held constant over a Newton
iteration. The shear rows carry tensor shear strains (eps_yz, not gamma_yz = 2 eps_yz), so the
energy 1/2 c^T E^-1 c equals the linear-elastic energy only with shear compliance (1 + nu) / (2 Y V):
the normal block [[1, -nu, -nu], [-nu, 1, -nu], [-nu, -nu, 1]] / (Y V) is the inverse of the
isotropic normal stiffness and stays finite (and singular only in the volumetric direction,
i.e. incompressible) as nu -> 0.5.

The rows' kernel also keeps each element's R, from which the linear solve can apply the rows of J and J^T
without reading their stored entries (``TetrahedronOperator``; ``SolverSettings.tetrahedron_operator``).
"""

import math
import numbers

import numpy as np
import warp as wp

from softsnake.errors import ModelError
from softsnake.kernels.entities import nonnegative, row_world_held, write_particle_block
from softsnake.spatial import quat_to_matrix
from softsnake.validation import (FLOAT32_MAX, FLOAT32_TINY, bounded_vector, non_negative_value, positive_value,
                                  unit_quaternion, vector)
from softsnake.validation import position as checked_position

from .base import ConstraintType, Field


@wp.func
def polar_rotation(F: wp.mat33):
    """Rotation of the polar decomposition, valid for near-degenerate and inverted F."""
    U = wp.mat33()
    sigma = wp.vec3()
    V = wp.mat33()
    wp.svd3(F, U, sigma, V)
    if wp.determinant(U * wp.transpose(V)) < 0.0:
        # Reflect the direction of the smallest singular value: the closest rotation.
        k = int(0)
        if sigma[1] < sigma[k]:
            k = 1
        if sigma[2] < sigma[k]:
            k = 2
        for r in range(3):
            U[r, k] = -U[r, k]
    return U * wp.transpose(V)


@wp.func_grad(polar_rotation)
def adj_polar_rotation(F: wp.mat33, adj_R: wp.mat33):
    """The adjoint of ``polar_rotation`` in closed form (Warp's adjoint of ``svd3`` divides by differences
    of singular values, which vanish near the rest shape).

    With F = R S (S = R^T F symmetric) and dR = R [w]x, the skew part of R^T dF is [w]x S + S [w]x, whose
    axial vector is (tr(S) I - S) w; so w = K^-1 axial(R^T dF - dF^T R) with K = tr(S) I - S. Pulling
    <adj_R, dR> back through this gives adj_F = R [c]x, c = K^-1 axial(A - A^T), A = R^T adj_R (axial of
    a skew matrix M: (M_21, M_02, M_10)). K is singular only where two singular values of F sum to
    zero (an element inverted to a plane). Checked against central differences in
    tests/test_row_gradients.py.
    """
    R = polar_rotation(F)
    S = wp.transpose(R) * F
    K = wp.identity(n=3, dtype=float) * (S[0, 0] + S[1, 1] + S[2, 2]) - S
    A = wp.transpose(R) * adj_R
    a = wp.vec3(A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1])
    c = wp.inverse(K) * a
    wp.adjoint[F] += R * wp.skew(c)


@wp.func
def strain_gradient(R: wp.mat33, B: wp.mat33, a: int, i: int, j: int):
    """d eps_ij / d x_a for node a = 1..3 (node 0 is minus their sum); B = Dm^-1."""
    ri = wp.vec3(R[0, i], R[1, i], R[2, i])
    rj = wp.vec3(R[0, j], R[1, j], R[2, j])
    return (ri * B[a - 1, j] + rj * B[a - 1, i]) * 0.5


@wp.func
def voigt_pair(k: int):
    """The strain component (i, j) of row k of a tetrahedron, Voigt order xx, yy, zz, yz, xz, xy."""
    if k == 3:
        return wp.vec2i(1, 2)
    if k == 4:
        return wp.vec2i(0, 2)
    if k == 5:
        return wp.vec2i(0, 1)
    return wp.vec2i(k, k)


@wp.struct
class TetrahedronOperator:
    """What the linear solve needs to apply the tetrahedra's rows of J and J^T without storing them
    (``SolverSettings.tetrahedron_operator`` "matrix_free"; ``enabled`` 0: the stored J and J^T hold them).

    Row k of tetrahedron t is J_k dx = sym(R^T dDs B)_k with dDs = [dx1 - dx0, dx2 - dx0, dx3 - dx0]
    (``strain_row_times``), and its transpose sends the rows' values y to the nodes as f_a = R S B^T e_a
    (``strain_rows_transpose_times``): 88 bytes per tetrahedron (R, B, four indices) where its stored
    rows take 6 x 12 entries of J and as many of J^T, each a value and an index."""

    enabled: int
    row_tet: wp.array(dtype=int)
    """The tetrahedron of every row of the model, -1 for the rows of other types."""
    particles: wp.array(dtype=wp.vec4i)
    first_row: wp.array(dtype=int)
    inv_rest: wp.array(dtype=wp.mat33)
    rotation: wp.array(dtype=wp.mat33)
    """R of every tetrahedron at the last assembly (``eval_tetrahedron_rows``)."""
    corner_offsets: wp.array(dtype=int)
    """Particle p's corners are corners[corner_offsets[p] : corner_offsets[p + 1]]."""
    corners: wp.array(dtype=int)
    """4 t + a for corner a of tetrahedron t, by particle, and within a particle by tetrahedron."""


@wp.func
def strain_row_times(op: TetrahedronOperator, t: int, k: int, u: wp.array(dtype=float)):
    """J_k u for row k of tetrahedron t, from its nodes' entries of u: with dF = [u1 - u0, u2 - u0, u3 - u0] B,
    the row's strain component of sym(R^T dF), (r_i . dF_j + r_j . dF_i) / 2 (J's entries, ``strain_gradient``,
    are its derivatives)."""
    idx = op.particles[t]
    p0 = 3 * nonnegative(idx[0])
    p1 = 3 * nonnegative(idx[1])
    p2 = 3 * nonnegative(idx[2])
    p3 = 3 * nonnegative(idx[3])
    u0 = wp.vec3(u[p0], u[p0 + 1], u[p0 + 2])
    d1 = wp.vec3(u[p1], u[p1 + 1], u[p1 + 2]) - u0
    d2 = wp.vec3(u[p2], u[p2 + 1], u[p2 + 2]) - u0
    d3 = wp.vec3(u[p3], u[p3 + 1], u[p3 + 2]) - u0
    ij = voigt_pair(k)
    i = ij[0]
    j = ij[1]
    R = op.rotation[t]
    B = op.inv_rest[t]
    dF_j = d1 * B[0, j] + d2 * B[1, j] + d3 * B[2, j]
    r_i = wp.vec3(R[0, i], R[1, i], R[2, i])
    if i == j:
        return wp.dot(r_i, dF_j)
    dF_i = d1 * B[0, i] + d2 * B[1, i] + d3 * B[2, i]
    r_j = wp.vec3(R[0, j], R[1, j], R[2, j])
    return 0.5 * (wp.dot(r_i, dF_j) + wp.dot(r_j, dF_i))


@wp.func
def strain_rows_transpose_times(op: TetrahedronOperator, corner: int, y: wp.array(dtype=float)):
    """The six rows of J^T y at one corner (4 t + a) of tetrahedron t: sum_k y_k d eps_k / d x_a = R S b_a,
    S the symmetric matrix of the rows' values (shear values halved: each is eps_ij and eps_ji at once) and
    b_a row a - 1 of B (node 0: minus the sum of the three rows)."""
    t = corner // 4
    a = corner - 4 * t
    r = nonnegative(op.first_row[t])
    S = wp.mat33(y[r], 0.5 * y[r + 5], 0.5 * y[r + 4],
                 0.5 * y[r + 5], y[r + 1], 0.5 * y[r + 3],
                 0.5 * y[r + 4], 0.5 * y[r + 3], y[r + 2])
    B = op.inv_rest[t]
    b = wp.vec3(0.0)
    if a == 0:
        b = -(wp.vec3(B[0, 0], B[0, 1], B[0, 2]) + wp.vec3(B[1, 0], B[1, 1], B[1, 2]) + wp.vec3(B[2, 0], B[2, 1], B[2, 2]))
    else:
        b = wp.vec3(B[a - 1, 0], B[a - 1, 1], B[a - 1, 2])
    return op.rotation[t] * (S * b)


@wp.func
def particle_strain_transpose_sums(op: TetrahedronOperator, p: int, first: int, stride: int, y: wp.array(dtype=float)):
    """J^T y at particle p over its tetrahedra's rows, its corners first, first + stride, ... in their order."""
    s = wp.vec3(0.0)
    c = nonnegative(op.corner_offsets[p] + first)
    end = op.corner_offsets[p + 1]
    while c < end:
        s += strain_rows_transpose_times(op, nonnegative(op.corners[c]), y)
        c += stride
    return s


@wp.kernel
def eval_tetrahedron_rows(
    particle_q: wp.array(dtype=wp.vec3),
    tet_particles: wp.array(dtype=wp.vec4i),
    tet_inv_rest: wp.array(dtype=wp.mat33),
    tet_volume: wp.array(dtype=float),
    tet_youngs_modulus: wp.array(dtype=float),
    tet_poisson_ratio: wp.array(dtype=float),
    tet_damping: wp.array(dtype=float),
    tet_row: wp.array(dtype=int),
    inv_h: float,
    inv_h2: float,
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
    row_coupling: wp.array(dtype=float),
    rotation: wp.array(dtype=wp.mat33),
):
    t = nonnegative(wp.tid())
    if row_world_held(row_world, held, tet_row[t]):
        return  # a held world's rows stand as they are
    idx = tet_particles[t]
    x0 = particle_q[nonnegative(idx[0])]
    x1 = particle_q[nonnegative(idx[1])]
    x2 = particle_q[nonnegative(idx[2])]
    x3 = particle_q[nonnegative(idx[3])]
    Ds = wp.matrix_from_cols(x1 - x0, x2 - x0, x3 - x0)
    B = tet_inv_rest[t]
    F = Ds * B
    R = polar_rotation(F)
    S = wp.transpose(R) * F
    eps = (S + wp.transpose(S)) * 0.5

    scale = inv_h2 / (tet_youngs_modulus[t] * tet_volume[t])
    nu = tet_poisson_ratio[t]
    gamma = tet_damping[t] * inv_h
    row0 = nonnegative(tet_row[t])

    rotation[t] = R  # for the matrix-free operator (TetrahedronOperator)
    for k in range(6):
        ij = voigt_pair(k)
        i = ij[0]
        j = ij[1]
        row = row0 + k
        nz = nonnegative(J_offsets[row])
        g1 = strain_gradient(R, B, 1, i, j)
        g2 = strain_gradient(R, B, 2, i, j)
        g3 = strain_gradient(R, B, 3, i, j)
        write_particle_block(J_values, nz, -(g1 + g2 + g3))
        write_particle_block(J_values, nz + 3, g1)
        write_particle_block(J_values, nz + 6, g2)
        write_particle_block(J_values, nz + 9, g3)
        if k < 3:
            row_c[row] = eps[i, j] - 1.0
            row_compliance[row] = scale
            row_coupling[row] = -nu * scale
        else:
            row_c[row] = eps[i, j]
            row_compliance[row] = (1.0 + nu) * 0.5 * scale
            row_coupling[row] = 0.0
        row_damping[row] = gamma


class Tetrahedron(ConstraintType):
    name = "tet"
    tries_carried_multipliers = True
    label = "tetrahedron"
    fields = (
        Field("particles", wp.vec4i, "", "the four vertices, positively oriented", index="particle"),
        Field("inv_rest", wp.mat33, "1/m", "Dm^-1, the inverse of the rest edge matrix [x1-x0, x2-x0, x3-x0]"),
        Field("volume", float, "m^3", "rest volume V"),
        Field("youngs_modulus", float, "Pa", "Young's modulus Y"),
        Field("poisson_ratio", float, "", "Poisson's ratio nu in [0, 0.5)"),
        Field("damping", float, "s", "stiffness-proportional damping time beta"),
    )

    def rows_per_item(self, planar):
        return 6

    def block_rows(self, planar):
        # The three normal strain rows share one 3x3 compliance block; the shear rows stand alone.
        return [0, 0, 0, None, None, None]

    def item_entities(self, columns, particle_count):
        return np.asarray(columns["particles"], dtype=np.int64).reshape(-1, 4)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_tetrahedron_rows, m.tet_count, [
            state.particle_q, m.tet_particles, m.tet_inv_rest, m.tet_volume, m.tet_youngs_modulus, m.tet_poisson_ratio,
            m.tet_damping, m.tet_row, 1.0 / h, 1.0 / (h * h), *solver.row_skip_inputs(), *solver.row_outputs(),
            solver.row_coupling, solver.tet_rotation])

    def allocate(self, solver):
        """``solver.tet_rotation``: R of every tetrahedron at the last assembly (``TetrahedronOperator``)."""
        solver.tet_rotation = solver.zeros(solver.model.tet_count, wp.mat33)


TETRAHEDRON = Tetrahedron()


class TetrahedronBuilder:
    """``ModelBuilder.add_soft_mesh``."""

    @property
    def tet_count(self):
        return self.item_count(TETRAHEDRON)

    def add_soft_mesh(
        self,
        vertices,
        tets,
        density,
        youngs_modulus,
        poisson_ratio,
        *,
        position=(0.0, 0.0, 0.0),
        rotation=(0.0, 0.0, 0.0, 1.0),
        velocity=(0.0, 0.0, 0.0),
        damping=0.0,
        particle_radius=0.0,
        collide="surface",
    ):
        """Add a tetrahedral mesh of corotational linear elements (seed 001, eq. 5).

        Each tetrahedron adds six compliant strain rows with compliance S / V (S the isotropic
        compliance, V the rest volume); particle masses are lumped (a quarter of every adjacent
        element's mass).

        Args:
            vertices: rest positions (n, 3) [m] in the mesh frame
            tets: vertex indices (m, 4), positively oriented (det[x1-x0, x2-x0, x3-x0] > 0)
            density: mass density [kg/m^3]
            youngs_modulus: Young's modulus Y [Pa]
            poisson_ratio: nu in [0, 0.5)
            position, rotation: placement of the mesh frame [m], quaternion (x, y, z, w)
            velocity: initial velocity of every vertex [m/s]
            damping: stiffness-proportional damping time beta [s] (damping force = beta K v)
            particle_radius: contact radius of the vertices [m]
            collide: "surface" (boundary vertices collide), "all" or "none"

        Returns:
            the index of the mesh's first particle (its vertices are consecutive).
        """
        try:
            verts = np.asarray(vertices, dtype=np.float64)
            t = np.asarray(tets)
        except (TypeError, ValueError, OverflowError):
            raise ModelError("soft mesh vertices and tets must be arrays of numbers") from None
        if verts.ndim != 2 or verts.shape[1] != 3 or len(verts) == 0:
            raise ModelError(f"soft mesh vertices must have shape (n, 3), got {verts.shape}")
        if not np.all(np.isfinite(verts)):
            raise ModelError("soft mesh vertices contain NaN or Inf")
        bounded_vector(verts.ravel(), verts.size, "soft mesh vertices")
        if t.ndim != 2 or t.shape[1] != 4 or len(t) == 0:
            raise ModelError(f"soft mesh tets must have shape (m, 4), got {t.shape}")
        if not np.issubdtype(t.dtype, np.integer):
            raise ModelError(f"soft mesh tets must be integer indices, got dtype {t.dtype}")
        bad = np.argwhere((t < 0) | (t >= len(verts)))
        if len(bad):
            k = bad[0][0]
            raise ModelError(f"soft mesh tet {k} has vertex index {t[k].tolist()} out of range [0, {len(verts)})")
        density = positive_value(density, "soft mesh density")
        youngs_modulus = positive_value(youngs_modulus, "soft mesh youngs_modulus")
        real = isinstance(poisson_ratio, numbers.Real) and not isinstance(poisson_ratio, bool)
        nu = float(poisson_ratio) if real else math.nan
        if not (0.0 <= nu < 0.5):
            raise ModelError(f"soft mesh poisson_ratio must lie in [0, 0.5), got {poisson_ratio}")
        damping = non_negative_value(damping, "soft mesh damping")
        if not isinstance(collide, str) or collide not in ("surface", "all", "none"):
            raise ModelError(f"soft mesh collide must be 'surface', 'all' or 'none', got {collide!r}")

        Dm = np.stack([verts[t[:, 1]] - verts[t[:, 0]], verts[t[:, 2]] - verts[t[:, 0]], verts[t[:, 3]] - verts[t[:, 0]]], axis=2)
        det = np.linalg.det(Dm)
        scale = np.max(np.ptp(verts, axis=0)) ** 3
        tiny = np.argwhere(np.abs(det) <= 1e-12 * scale)
        if len(tiny):
            k = tiny[0][0]
            raise ModelError(f"soft mesh tet {k} {t[k].tolist()} has zero volume")
        inverted = np.argwhere(det < 0)
        if len(inverted):
            k = inverted[0][0]
            raise ModelError(f"soft mesh tet {k} {t[k].tolist()} is inverted (negative volume); reorder its vertices")
        volume = det / 6.0
        stiffness = volume * youngs_modulus
        outside = np.argwhere((stiffness < FLOAT32_TINY) | (stiffness > FLOAT32_MAX))
        if len(outside):
            k = outside[0][0]
            raise ModelError(f"soft mesh tet {k} {t[k].tolist()}: volume {volume[k]:.3g} m^3 times youngs_modulus "
                             f"{youngs_modulus:.3g} Pa is outside float32 [{FLOAT32_TINY:.2g}, {FLOAT32_MAX:.2g}], "
                             "in which the model computes the element's compliance")
        inv_rest = np.linalg.inv(Dm)
        vector(inv_rest.ravel(), inv_rest.size, "soft mesh inverse rest shapes (1 / edge lengths)")

        mass = np.zeros(len(verts))
        np.add.at(mass, t.ravel(), np.repeat(volume * density / 4.0, 4))
        orphan = np.argwhere(mass == 0)
        if len(orphan):
            raise ModelError(f"soft mesh vertex {orphan[0][0]} belongs to no tetrahedron")

        if collide == "surface":
            faces = np.sort(np.concatenate([t[:, [0, 1, 2]], t[:, [0, 1, 3]], t[:, [0, 2, 3]], t[:, [1, 2, 3]]]), axis=1)
            uniq, counts = np.unique(faces, axis=0, return_counts=True)
            on_surface = np.zeros(len(verts), dtype=bool)
            on_surface[uniq[counts == 1].ravel()] = True
        else:
            on_surface = np.full(len(verts), collide == "all")

        R = quat_to_matrix(unit_quaternion(rotation, "soft mesh rotation"))
        world_verts = verts @ R.T + checked_position(position, "soft mesh position")
        start = self.particle_count
        self.current_world()
        # Every particle is checked before the first is added, so that a rejected mesh leaves nothing.
        particles = [self.particle_values(f"soft mesh vertex {k} (particle {start + k})", world_verts[k], velocity,
                                          mass[k], particle_radius, bool(on_surface[k]), False) for k in range(len(verts))]
        for values in particles:
            self.append_particle(values)
        for k in range(len(t)):
            self.append_item(TETRAHEDRON, {
                "particles": tuple(int(i) + start for i in t[k]), "inv_rest": inv_rest[k], "volume": volume[k],
                "youngs_modulus": youngs_modulus, "poisson_ratio": nu, "damping": damping})
        return start
