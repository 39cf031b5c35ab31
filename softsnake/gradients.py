"""Gradients through the engine's constraint rows: the groundwork of differentiating a step.

A converged step solves G(x, lambda; x_n, v_n, p) = 0 (``softsnake.kernels.rows``); its gradient
with respect to the start state and the parameters follows from the implicit function theorem,
which needs products of vectors with the derivatives of G, never a tape of the Newton and
conjugate residual iterations. Those products come from Warp's adjoints of the kernels that
evaluate the rows (every ``ConstraintType.row_command``): ``tape_rows`` runs them once on a
``wp.Tape``, and ``tape.backward`` then gives mu^T dc/dq and mu^T dJ/dq for any seeds mu.

For that, every row kernel is written so that Warp's adjoint is exact: no variable carried from
one iteration of a loop of run-time length to the next (a row counter, a running sum: the adjoint
replays such a loop without the values they took), and a closed-form adjoint where Warp's own is
unstable (the tetrahedron's polar rotation, ``tetrahedron.adj_polar_rotation``).
tests/test_row_gradients.py checks every constraint type against central differences.
"""

import warp as wp


def tape_rows(solver, state, control, h, constraint_types=None):
    """Evaluate the constraint rows of ``state`` on a new ``wp.Tape`` and return the tape.

    solver: the :class:`softsnake.Solver` whose row arrays (``row_c``, ``J_values``,
        ``row_compliance``, ...) receive the rows; arrays that gradients should reach (state
        positions, multipliers, the row arrays) must have been made with ``requires_grad=True``
    state, control: the State and Control to evaluate at; h: the substep length [s]
    constraint_types: the types to evaluate (default: every type of the model, in row order);
        rows of the others keep their values
    The contact rows act on the contacts of the solver's last detection (``detect_contacts`` of its
    last substep).
    """
    types = solver.constraint_types if constraint_types is None else constraint_types
    tape = wp.Tape()
    with solver.launching_now(), tape:
        for ctype in types:
            ctype.row_command(solver, state, control, h)
    return tape
