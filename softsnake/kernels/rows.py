"""The type-independent part of every constraint row.

Each constraint kernel writes, for each of its rows: the residual c, the Jacobian row into the
CSR values of J, the compliance alpha = E / h^2 (and, for the normal strains of a tetrahedron,
the off-diagonal coupling of its 3x3 block), and the damping ratio gamma = beta / h. This module
turns those into the linear system of one Newton step of the implicit-Euler equations

    g = M (x - x~) - J^T lambda = 0                      (momentum; x~ the prediction)
    h = c(x) + gamma J (x - x_n) + alpha lambda = 0       (compliant rows with Rayleigh-type damping)

with the system matrix approximated by M (geometric stiffness dropped) and the momentum residual
g taken as zero (seed 001's scheme, as in XPBD): every iteration moves the positions by
dx = M^-1 J^T dlambda, which keeps g = 0 up to the change of J between iterations. Eliminating dx
from (1 + gamma) J dx + alpha dlambda = -h gives

    [J M^-1 J^T + alpha / (1 + gamma)] dlambda = -(c + gamma J (x - x_n) + alpha lambda) / (1 + gamma).

With ``SolverSettings.momentum_balance`` on, the right-hand side carries g as well: with
d = M^-1 g = x - x~ - M^-1 J^T lambda (the momentum gap, ``kernels.momentum``), dx = M^-1 J^T dlambda - d
gives

    [J M^-1 J^T + alpha / (1 + gamma)] dlambda = -(c + gamma J (x - x_n) + alpha lambda) / (1 + gamma) + J d,

and the update lands on x~ + M^-1 J(x)^T lambda_new: a converged step then solves both equations (the
implicit-Euler step, which ``softsnake.gradients`` differentiates), where the plain iteration keeps the
lag g != 0 that the changing J leaves (``Solver.residual_norms`` measures it). With the geometric
stiffness dropped from the matrix both iterations converge only linearly where stiff, stressed rows
turn (tests/test_momentum_balance.py; experiments/results/convergence.md compares them).

This module writes the right-hand side, the effective compliance and the Jacobi diagonal of the
matrix.
"""

import warp as wp

from .entities import body_generalized_inverse_mass, nonnegative, planar_body_inverse_mass, row_world_held
from .operator import block_coupled, row_dot

# Never on a wp.Tape (softsnake.gradients): no backward code, less to compile (tests/kernels/test_backward_options.py).
wp.set_module_options({"enable_backward": False})


@wp.kernel
def prepare_rows(
    J_offsets: wp.array(dtype=int),
    J_columns: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_coupling: wp.array(dtype=float),
    row_block_start: wp.array(dtype=int),
    row_damping: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    displacement: wp.array(dtype=float),
    momentum_gap: wp.array(dtype=float),
    momentum_balance: int,
    particle_inv_mass: wp.array(dtype=float),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    particle_dof_count: int,
    planar: int,
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    rhs: wp.array(dtype=float),
    compliance_eff: wp.array(dtype=float),
    coupling_eff: wp.array(dtype=float),
    inv_diagonal: wp.array(dtype=float),
):
    """Right-hand side, effective compliance and Jacobi diagonal of every row.

    J is the solver's J (planar models: the in-plane columns only, 3 per body, 2 per particle).
    The out-of-plane entries that planar rows leave zero would add exact zeros to the damping
    term and the diagonal, so the result is the same as over the full J, for a third of the work. The rows of held
    worlds (``Solver.held_worlds``) keep theirs.
    """
    i = nonnegative(wp.tid())
    if row_world_held(row_world, held, i):
        return
    gamma = row_damping[i]
    start = nonnegative(J_offsets[i])
    end = J_offsets[i + 1]

    damping_term = float(0.0)
    if gamma > 0.0:
        damping_term = gamma * row_dot(J_values, J_columns, start, end, displacement)
    gap_term = float(0.0)
    if momentum_balance != 0:
        gap_term = row_dot(J_values, J_columns, start, end, momentum_gap)

    s = 1.0 / (1.0 + gamma)
    alpha = row_compliance[i]
    off = row_coupling[i]
    block = nonnegative(row_block_start[i])
    rhs[i] = -(row_c[i] + damping_term + block_coupled(lam, i, block, alpha, off)) * s + gap_term
    compliance_eff[i] = alpha * s
    coupling_eff[i] = off * s

    diag = float(0.0)
    k = start
    while k < end:
        col = nonnegative(J_columns[k])
        if col < particle_dof_count:
            diag += J_values[k] * J_values[k] * particle_inv_mass[col // 3]
            k += 1
        else:
            b = (col - particle_dof_count) // 6
            if planar != 0:
                diag += planar_body_inverse_mass(body_inv_mass[b], body_inv_inertia_world[b][2, 2], J_values[k],
                                                 J_values[k + 1], J_values[k + 2])
                k += 3
            else:
                lin = wp.vec3(J_values[k], J_values[k + 1], J_values[k + 2])
                ang = wp.vec3(J_values[k + 3], J_values[k + 4], J_values[k + 5])
                diag += body_generalized_inverse_mass(body_inv_mass[b], body_inv_inertia_world[b], lin, ang)
                k += 6
    diag += alpha * s
    if diag > 0.0:
        inv_diagonal[i] = 1.0 / diag
    else:
        inv_diagonal[i] = 0.0


@wp.kernel
def gather_values(J_values: wp.array(dtype=float), source: wp.array(dtype=int), values: wp.array(dtype=float)):
    """Fill the CSR of J^T from J (no atomics), where the solver uses J itself (non-planar models)."""
    k = nonnegative(wp.tid())
    values[k] = J_values[nonnegative(source[k])]


@wp.kernel
def gather_solve_values(
    J_values: wp.array(dtype=float),
    solve_source: wp.array(dtype=int),
    transpose_source: wp.array(dtype=int),
    solve_values: wp.array(dtype=float),
    transpose_values: wp.array(dtype=float),
):
    """Fill the solver's J and its transpose (same entries, other order) from J in one pass."""
    k = nonnegative(wp.tid())
    solve_values[k] = J_values[nonnegative(solve_source[k])]
    transpose_values[k] = J_values[nonnegative(transpose_source[k])]


