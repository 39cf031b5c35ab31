"""How far a step's end point is from solving its Newton system: per-world residual norms by kind.

``Solver.residual_norms(state, control, dt)`` evaluates, after ``Solver.step``, the equations of the
step's last substep (``softsnake.kernels.rows``) once more at the end point (positions x and
multipliers lambda of ``state``), with that substep's prediction x~, start x_n and contacts, which
the solver still holds. It runs nothing in ``step`` and changes nothing the next step reads: it is
a measurement, off the hot path (it reads a few arrays back to the host).

Every norm is a weighted 2-norm whose square has the unit kg m^2, so the kinds can be compared
with each other and across models:

- ``momentum``: sqrt(g^T M^-1 g) with g = M (x - x~) - J(x)^T lambda, i.e. the M-norm of the
  position error d = x - x~ - M^-1 J(x)^T lambda (particles: m |d|^2; bodies: m |d_lin|^2 +
  d_ang^T I_world d_ang, d_ang the rotation vector from q~ to q minus the angular part of
  M^-1 J^T lambda; kinematic particles and bodies count 0). Each Newton iteration moves x by
  M^-1 J^T dlambda with J of the iterate it starts from, so g = 0 up to the change of J along the
  iteration: this norm measures that lag (it is part of the merit only with
  the balanced iteration, ``SolverSettings.momentum_balance``, which drives it to zero; otherwise the merit takes g = 0).
- ``compliant``: sqrt(sum r_i^2 / D_ii) over the rows of every constraint type other than contacts
  (tetrahedra, distance and pressure rows, attachments, hinges, prismatic joints, angular springs),
  with r_i = -(c_i + gamma_i J_i (x - x_n) + (alpha lambda)_i) / (1 + gamma_i) the row's own
  residual (its Newton right-hand side; with the balanced iteration that right-hand side also carries
  J_i d, d the momentum gap above, over the entities it balances: ``kernels.rows``) and
  D_ii = J_i M^-1 J_i^T + alpha_i / (1 + gamma_i) the Jacobi diagonal of the Newton matrix.
- ``normal``: the same over contact normal rows, with the row's own residual r = -phi, phi the
  Fischer-Burmeister function of the gap and w lambda_n [m] (``constraints.contact``), D its
  diagonal including the row's complementarity compliance and the proximal floor.
- ``friction``: the same over friction rows, r = the friction rows' right-hand side times
  d phi/d a (along the force direction: -phi of the friction complementarity [m]).

The three row norms are the rows' shares of the solver's merit r^T D^-1 r (the line search's
measure: ``rows`` squared equals the merit the solver would compute at this point). Weighting by
D^-1 makes a row's share independent of how the row is scaled (a strain row and a length row count
alike), and it is the squared M-norm of the Jacobi estimate of the correction the row still asks
for: roughly, sum of m |dx|^2 over what the row would move. Divide by the substep length h for
sqrt(kg) m/s (a norm squared over 2 h^2 is then the kinetic energy [J] of that velocity error).

Inactive contact slots and frictionless contacts are neutral rows: their residual is their
multiplier, which any solve drives to 0.
"""

import dataclasses

import numpy as np

from . import newton
from .constraints import CONTACT_SLOT
from .linear_solve import inverse_mass_transpose_command

KINDS = ("momentum", "compliant", "normal", "friction")
"""The kinds of ``ResidualNorms``, in the order of its fields."""

ROW_KINDS = KINDS[1:]


@dataclasses.dataclass(frozen=True)
class ResidualNorms:
    """Per-world residual norms of a step's Newton system at its end point (``softsnake.residuals``).

    Every field is a float64 NumPy array of shape (world_count,) [sqrt(kg) m]; ``h`` is the length
    of the substep they belong to [s].
    """

    momentum: np.ndarray
    compliant: np.ndarray
    normal: np.ndarray
    friction: np.ndarray
    h: float

    @property
    def rows(self):
        """sqrt(compliant^2 + normal^2 + friction^2): the root of the solver's merit [sqrt(kg) m]."""
        return np.sqrt(self.compliant ** 2 + self.normal ** 2 + self.friction ** 2)

    def as_dict(self):
        """{kind: array (world_count,)} for every kind of ``KINDS``, and "rows"."""
        return {**{kind: getattr(self, kind) for kind in KINDS}, "rows": self.rows}


def row_kinds(model):
    """Index into ``ROW_KINDS`` of every row of ``model`` (host int array, shape (row_count,))."""
    kind = np.zeros(model.row_count, dtype=np.int64)
    if model.contact_slot_count:
        first = model.contact_slot_row.numpy().astype(np.int64)
        rows_per_slot = CONTACT_SLOT.rows_per_item(model.planar_axis >= 0)
        kind[first] = 1
        for k in range(1, rows_per_slot):
            kind[first + k] = 2
    return kind


def residual_commands(solver, state, control, h):
    """The launches that assemble every row at the current point (as a Newton iteration does, without
    judging or solving) and u_lambda = M^-1 J^T lambda: they write only the solver's scratch arrays."""
    s = solver
    if not s.model.row_count:
        return newton.displacement_commands(s, state)
    commands = newton.system_commands(s, state, control, h)
    if not s.balances_momentum or s.momentum_first_entity:  # a full balance's assembly computes all of u_lambda
        commands.append(inverse_mass_transpose_command(s, state.multipliers, s.u_lambda))
    return commands


def momentum_squares(solver):
    """Per entity, the squared M-norm of x - x~ - M^-1 J^T lambda (float64, shape (entity_count,))."""
    m, s = solver.model, solver
    d = s.offset.numpy().astype(np.float64)
    if m.row_count:
        d = d - s.u_lambda.numpy().astype(np.float64)
    squares = np.zeros(s.entity_count)
    P = m.particle_count
    if P:
        dp = d[:3 * P].reshape(P, 3)
        squares[:P] = m.particle_mass_numpy() * np.einsum("pk,pk->p", dp, dp)
    if m.body_count:
        db = d[3 * P:3 * P + 6 * m.body_count].reshape(m.body_count, 6)
        moving = m.body_inv_mass.numpy() > 0.0
        lin, ang = db[moving, :3], db[moving, 3:]
        inertia = np.linalg.pinv(s.body_inv_inertia_world.numpy()[:m.body_count][moving].astype(np.float64))
        body = m.body_mass_numpy[moving] * np.einsum("bk,bk->b", lin, lin) + np.einsum("bk,bkl,bl->b", ang, inertia, ang)
        squares[P + np.flatnonzero(moving)] = body
    return squares


def residual_norms(solver, h):
    """``Solver.residual_norms`` once the solver has re-assembled its last substep (of length h [s]) at the
    end point (``residual_commands``): the norms from its arrays (see the module docstring)."""
    m = solver.model
    W = m.world_count
    entity_world = np.concatenate([np.repeat(np.arange(W), np.diff(m.particle_world_start)),
                                   np.repeat(np.arange(W), np.diff(m.body_world_start))])
    momentum = np.bincount(entity_world, weights=momentum_squares(solver), minlength=W)
    squares = np.zeros((W, len(ROW_KINDS)))
    if m.row_count:
        row_world = np.repeat(np.arange(W), np.diff(m.row_world_start))
        r = solver.residual.numpy()[:m.row_count].astype(np.float64)
        weighted = r * r * solver.inv_diagonal.numpy()[:m.row_count].astype(np.float64)
        squares = np.bincount(row_world * len(ROW_KINDS) + row_kinds(m), weights=weighted,
                              minlength=W * len(ROW_KINDS)).reshape(W, len(ROW_KINDS))
    return ResidualNorms(np.sqrt(momentum), *(np.sqrt(squares[:, k]) for k in range(len(ROW_KINDS))), h=float(h))
