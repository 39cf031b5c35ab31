"""Corotational linear tetrahedra as compliant constraints (seed 001, eq. 5).

Six rows per tetrahedron: the strain sym(R^T F) - I in Voigt order (xx, yy, zz, yz, xz, xy),
F = Ds Dm^-1 and R the rotation of the polar decomposition of F, held constant over a Newton
iteration. The shear rows carry tensor shear strains (eps_yz, not gamma_yz = 2 eps_yz), so the
energy 1/2 c^T E^-1 c equals the linear-elastic energy only with shear compliance (1 + nu) / (2 Y V):
the normal block [[1, -nu, -nu], [-nu, 1, -nu], [-nu, -nu, 1]] / (Y V) is the inverse of the
isotropic normal stiffness and stays finite (and singular only in the volumetric direction,
i.e. incompressible) as nu -> 0.5.
"""

import warp as wp

from .entities import nonnegative, write_particle_block


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


@wp.func
def strain_gradient(R: wp.mat33, B: wp.mat33, a: int, i: int, j: int):
    """d eps_ij / d x_a for node a = 1..3 (node 0 is minus their sum); B = Dm^-1."""
    ri = wp.vec3(R[0, i], R[1, i], R[2, i])
    rj = wp.vec3(R[0, j], R[1, j], R[2, j])
    return (ri * B[a - 1, j] + rj * B[a - 1, i]) * 0.5


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
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_coupling: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    t = nonnegative(wp.tid())
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

    for k in range(6):
        i = int(k)
        j = int(k)
        if k == 3:
            i = 1
            j = 2
        elif k == 4:
            i = 0
            j = 2
        elif k == 5:
            i = 0
            j = 1
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
