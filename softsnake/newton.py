"""The recorded launches of a substep: prediction, the Newton iterations with their line search, and
the velocities (the linear solve is ``softsnake.linear_solve``).

One Newton iteration (``softsnake.kernels.rows`` derives its system):

1. assemble at the current positions x: the displacements x - x_n and x - x~, every constraint
   type's rows (``softsnake.constraints``), the solver's J and J^T, u = M^-1 J^T lambda, and the
   right-hand side, effective compliance and Jacobi diagonal D of every row;
2. judge the last step: the merit r^T D^-1 r of each world, r the rows' own residuals (the
   right-hand side, times d phi/d a for complementarity rows), against the merit where the world
   last stood; a world whose merit rose halves its last step instead of taking a new one
   (``kernels.multipliers.judge_newton_steps``);
3. solve the linear system (``softsnake.linear_solve``);
4. update: lambda += dlambda and x += M^-1 J^T dlambda where the world accepted, back by half its
   last step (multipliers and positions) where it retreats.

After the last iteration one more assembly judges the last step: a world that has not converged and whose
merit ends above ``SolverSettings.wander_limit`` times the least it visited goes back to that point
(``least_merit_end_commands``); with the line search that assembly judges the last step the same way as the
others instead (``final_check``), so that no substep ends on a step that raised its world's residual. The velocities v = (x - x_n) / h
follow, less what a contact moved a particle or a body out of a penetration the substep began with
(``finish_commands``).
"""

import functools

import warp as wp

from .kernels import compensated, integration, momentum, multipliers, rows, world_frame
from .linear_solve import inverse_mass_transpose_command, world_dot_commands

FLAG_THREADS = 256
"""Threads of the one block that flags whether some world still iterates (``multipliers.flag_iterating_worlds``)."""


def enter_frame_commands(solver, state):
    """Each world into its substep's frame (``kernels.world_frame``): its shift chosen, its positions moved."""
    m, s = solver.model, solver
    return [s.record(world_frame.world_bounds, s.entity_count, [
                m.particle_count, m.particle_world, m.body_world, state.particle_q, state.body_q],
                outputs=[s.world_lower, s.world_upper]),
            s.record(world_frame.choose_world_frames, m.world_count, [],
                     outputs=[s.world_lower, s.world_upper, s.frame_shift]),
            s.record(world_frame.enter_world_frames, s.entity_count, [
                m.particle_count, m.particle_world, m.body_world, s.frame_shift],
                outputs=[state.particle_q, state.body_q, s.particle_q_stored, s.body_q_stored])]


def leave_frame_commands(solver, state):
    """Each world's stored positions moved by its substep's displacement, the substep's points kept between
    substeps (x_n, x~, the constraint types' own) back in the model's frame, and the shifts back to zero."""
    m, s = solver.model, solver
    return [s.record(world_frame.leave_world_frames, s.entity_count, [
                m.particle_count, m.particle_world, m.body_world, s.frame_shift, s.particle_q_stored, s.body_q_stored],
                outputs=[state.particle_q, state.body_q, s.particle_q_prev, s.particle_q_pred, s.body_q_prev,
                         s.body_q_pred, *compensation(s, state, "leave")]),
            *(command for ctype in s.constraint_types for command in ctype.leave_frame_commands(s)),
            s.frame_shift.zero_]


def predict_commands(solver, state, h):
    """Each world into its substep's frame; x~ = x + h v + h^2 M^-1 f, the substep's start x_n kept; then contact
    detection."""
    m, s = solver.model, solver
    commands = enter_frame_commands(s, state)
    if m.particle_count:
        commands.append(s.record(integration.predict_particles, m.particle_count, [
            state.particle_q, state.particle_qd, state.particle_f, m.particle_inv_mass, m.gravity, m.planar_axis, h,
            s.particle_q_prev, s.particle_q_pred, *compensation(s, state, "predict_particles")]))
    if m.body_count:
        commands.append(s.record(integration.predict_bodies, m.body_count, [
            state.body_q, state.body_qd, state.body_f, m.body_inv_mass, m.body_inertia, m.body_inv_inertia, m.gravity,
            m.planar_axis, h, s.body_q_prev, s.body_q_pred, *compensation(s, state, "predict_bodies")]))
    for ctype in s.constraint_types:
        commands += ctype.predict_commands(s, state, h)
    return commands


def jacobian_commands(solver, state, control, h):
    """World inverse inertias, every row at the current positions, and the solver's copies of J and J^T."""
    m, s = solver.model, solver
    commands = []
    if m.body_count:
        commands.append(s.record(integration.update_world_inverse_inertia, m.body_count,
                                 [state.body_q, m.body_inv_inertia, m.body_world, s.held_worlds()],
                                 outputs=[s.body_inv_inertia_world]))
    # Row types other than tetrahedra have no block coupling; it stays zero from allocation
    # except on tetrahedral normal rows, which rewrite it every iteration.
    commands += [ctype.row_command(s, state, control, h) for ctype in s.constraint_types]
    if s.compensating:
        # Each row's residual moved from the values to the pairs (kernels.compensated).
        commands += [s.record(compensated.remainder_vectors, s.entity_count, [
                         state.particle_q_low, s.particle_q_prev_low, state.body_q_low, s.body_q_prev_low,
                         m.particle_count], outputs=[s.remainder, s.remainder_since_start]),
                     s.record(compensated.add_remainders_to_rows, m.row_count, [
                         m.J_offsets, m.J_columns, s.J_values, s.row_from_start, s.row_reads_remainders, s.remainder,
                         s.remainder_since_start, *s.row_skip_inputs()], outputs=[s.row_c])]
    T = s.transpose()
    if m.solve_compact and not T.tets.enabled:
        commands.append(s.record(rows.gather_solve_values, m.solve_nnz, [
            s.J_values, m.solve_source, T.source, s.J_solve_values, T.values]))
    else:
        if m.solve_compact:
            commands.append(s.record(rows.gather_values, m.solve_nnz, [s.J_values, m.solve_source, s.J_solve_values]))
        commands.append(s.record(rows.gather_values, T.nnz, [s.J_values, T.source, T.values]))
    return commands


def balance_commands(solver, state):
    """x = x~ + M^-1 J^T lambda: positions in momentum balance with the multipliers (this J)."""
    m, s = solver.model, solver
    return [inverse_mass_transpose_command(s, state.multipliers, s.u_lambda),
            s.record(integration.positions_from_prediction, s.entity_count, [
                s.u_lambda, m.particle_count, s.particle_q_pred, s.body_q_pred, state.particle_q, state.body_q,
                *compensation(s, state, "position")])]


def warm_start_commands(solver, state, control, h):
    """After the prediction and the contact detection: the rows there, the carried multipliers (those
    of the contact rows: ``ConstraintType.carries_multipliers``) fitted to the prediction where a type
    fits them (``ConstraintType.warm_start_commands``, which read u = M^-1 J^T lambda), then
    x = x~ + M^-1 J^T lambda."""
    fits = [command for ctype in solver.constraint_types for command in ctype.warm_start_commands(solver, state)]
    if fits:
        fits.insert(0, inverse_mass_transpose_command(solver, state.multipliers, solver.u_lambda))
    return jacobian_commands(solver, state, control, h) + fits + balance_commands(solver, state)


def copy_command(target, source):
    """A replayable ``wp.copy`` of ``source`` into ``target`` (a device copy: a CUDA graph captures it as it
    captures the launches)."""
    return functools.partial(wp.copy, target, source)


def elastic_start_commands(solver, state, control, h):
    """``SolverSettings.elastic_warm_start``, after ``warm_start_commands`` (the first start: the contact rows'
    multipliers carried and fitted, every other row from zero): a second start that also carries the soft
    body rows' multipliers (``ConstraintType.tries_carried_multipliers``, kept in ``solver.lam_carried``),
    x = x~ + M^-1 J^T lambda; each world keeps the second start unless its merit (r^T D^-1 r, the line search's)
    begins more than ``multipliers.SECOND_START_MARGIN`` times the first's (``multipliers.keeps_second_start``).
    At rest the carried start is the last substep's solution, so a short budget no longer leaves its residual
    in the resting state; where a stiff row's force changed sign since, the first start wins. The margin:
    a substep's end can have a few times the merit of the first start (zero soft multipliers), and a world
    that always kept the lower would then never leave the first start's biased rest (a stand at 8 x 100). A
    world whose chamber pressures changed since the last substep (``multipliers.stale_second_starts``, against
    ``state.multiplier_pressure``) keeps the second start only where it begins lower: its carried forces
    balanced other rest lengths."""
    m, s = solver.model, solver
    merit = [system_commands(s, state, control, h)
             + world_dot_commands(s, s.residual, s.residual, target, weight=s.inv_diagonal)
             for target in (s.merit_start_first, s.merit_start_second)]
    return (merit[0]
            + [copy_command(s.lam_start_first, state.multipliers),
               copy_command(s.particle_q_start_first, state.particle_q),
               copy_command(s.body_q_start_first, state.body_q),
               *remainder_copy_commands(s, (s.particle_q_start_first_low, s.body_q_start_first_low),
                                        (state.particle_q_low, state.body_q_low)),
               copy_command(state.multipliers, s.lam_carried)]
            + balance_commands(s, state) + merit[1]
            + [s.record(multipliers.stale_second_starts, m.world_count, [
                   m.pressure_channel_world_start_device, control.pressure, state.multiplier_pressure],
                   outputs=[s.start_stale]),
               copy_command(state.multiplier_pressure, control.pressure),
               s.record(multipliers.choose_first_start, m.world_count, [
                   s.merit_start_first, s.merit_start_second, s.start_stale], outputs=[s.world_taken])]
            + copy_where_commands(s, s.lam_start_first, (s.particle_q_start_first, s.body_q_start_first,
                                                         s.particle_q_start_first_low, s.body_q_start_first_low),
                                  state.multipliers, positions(state)))


def displacement_commands(solver, state):
    """x - x_n (``solver.displacement``) and x - x~ (``solver.offset``) of every degree of freedom."""
    s = solver
    m = s.model
    skip = [m.particle_world, m.body_world, s.held_worlds()]
    if s.compensating:
        return [s.record(compensated.compensated_displacements, s.entity_count, [
            state.particle_q, s.particle_q_prev, s.particle_q_pred, state.particle_q_low, s.particle_q_prev_low,
            s.particle_q_pred_low, state.body_q, s.body_q_prev, s.body_q_pred, state.body_q_low, s.body_q_prev_low,
            s.body_q_pred_low, m.particle_count, *skip], outputs=[s.displacement, s.offset])]
    return [s.record(integration.substep_displacements, s.entity_count, [
        state.particle_q, s.particle_q_prev, s.particle_q_pred, state.body_q, s.body_q_prev, s.body_q_pred,
        m.particle_count, *skip], outputs=[s.displacement, s.offset])]


def system_commands(solver, state, control, h):
    """Step 1 of an iteration: the linear system at the current positions, and the rows' own residuals
    (``solver.residual``)."""
    m, s = solver.model, solver
    commands = displacement_commands(s, state) + jacobian_commands(s, state, control, h)
    if s.balances_momentum:
        # Only the balanced entities' u_lambda: the gap is 0 below them ("bodies": the particles' share skipped).
        commands += [inverse_mass_transpose_command(s, state.multipliers, s.u_lambda, s.momentum_first_entity),
                     s.record(momentum.momentum_gaps, len(s.offset), [
                         s.offset, s.u_lambda, s.momentum_first_dof, m.particle_count, m.particle_world, m.body_world,
                         s.held_worlds()], outputs=[s.momentum_gap])]
    commands.append(s.record(rows.prepare_rows, m.row_count, [
        m.solve_offsets, m.solve_columns, s.J_solve_values, s.row_c, s.row_compliance, s.row_coupling,
        m.row_block_start, s.row_damping, state.multipliers, s.displacement, s.momentum_gap, int(s.balances_momentum),
        m.particle_inv_mass, m.body_inv_mass, s.body_inv_inertia_world, 3 * m.particle_count, s.planar,
        *s.row_skip_inputs()], outputs=[s.rhs, s.compliance_eff, s.coupling_eff, s.inv_diagonal]))
    commands.append(s.record(multipliers.scale_residuals, m.row_count, [s.rhs, s.row_residual_scale,
                                                                        *s.row_skip_inputs()], outputs=[s.residual]))
    return commands


def round_off_commands(solver, state):
    """What float32's rounding of the positions alone leaves in each world's merit (``solver.merit_floor``):
    the rows' share (``multipliers.row_round_off``) and, where the iteration balances momentum with float32
    positions, the gap's (compensated, the gap carries no rounding: ``momentum.add_momentum_round_off``)."""
    m, s = solver.model, solver
    commands = [s.record(multipliers.row_round_off, m.row_count, [
        m.solve_offsets, m.solve_columns, s.J_solve_values, state.particle_q, state.body_q, m.particle_count,
        int(s.compensating), s.row_residual_scale], outputs=[s.row_floor])]
    commands += world_dot_commands(s, s.row_floor, s.row_floor, s.merit_floor, weight=s.inv_diagonal)
    if s.balances_momentum and not s.compensating:
        commands.append(s.record(momentum.add_momentum_round_off, m.world_count, [
            m.particle_world_start_device, m.body_world_start_device, int(s.momentum_first_entity == 0),
            state.particle_q, m.particle_inv_mass,
            state.body_q, m.body_inv_mass, m.body_inertia], outputs=[s.merit_floor]))
    return commands


def assemble_commands(solver, state, control, h, round_off=True):
    """Steps 1 and 2 of an iteration: the linear system at the current positions and the judged last step.

    round_off: estimate the merit's round-off floor here (``newton_floor`` > 0). The substep's first assembly
    does, the later ones of its Newton loop keep that estimate: it scales with the coordinates and J's entries,
    which a substep's iterates move by millimetres and small turns, far less than its own spread (0.016 to 1.25
    times the floor observed): the golden states and command outputs are bit for bit the same, the vine scenes'
    warm runs too (``vine_solver_settings.py --budgets default``; two cold runs moved by at most 0.0006 tube
    diameters). It saves a row kernel and a reduction per iteration: 256 vines of 15 links 0.199 against 0.231 ms
    per vine-step, one 30-body vine 0.318 against 0.328 ms per step (this 2-core CPU, medians of 3 alternated)."""
    m, s = solver.model, solver
    commands = system_commands(s, state, control, h)
    commands += world_dot_commands(s, s.residual, s.residual, s.merit, weight=s.inv_diagonal)
    if s.balances_momentum:
        commands.append(s.record(momentum.add_momentum_merit, m.world_count, [
            m.particle_world_start_device, m.body_world_start_device, m.particle_count, int(s.momentum_first_entity == 0),
            s.momentum_gap, m.particle_inv_mass, state.body_q, m.body_inv_mass, m.body_inertia, s.held_worlds()],
            outputs=[s.merit]))
    if s.newton_floor > 0.0 and round_off:
        commands += round_off_commands(s, state)
    commands.append(s.record(multipliers.judge_newton_steps, m.world_count, [
        s.merit, int(s.line_search), 0.5 ** s.line_search_halvings, s.newton_tolerance * s.newton_tolerance,
        s.newton_floor * s.newton_floor, s.newton_floor_stall, s.merit_floor], outputs=[s.merit_ref, s.merit_first, s.step_scale, s.retreat]))
    if s.keeps_least_merit:
        commands += least_merit_note_commands(s, state)
    commands.append(s.record(multipliers.hold_converged_rows, m.row_count, [m.row_world, s.retreat], outputs=[s.rhs]))
    commands.append(s.record(integration.remember_accepted_points, s.entity_count, [
        s.offset, m.particle_count, m.particle_world, m.body_world, s.retreat], outputs=[s.offset_ref]))
    commands.append(s.record(multipliers.flag_iterating_worlds, 1, [s.retreat, m.world_count],
                             outputs=[s.newton_iterating, s.newton_unfinished, s.world_held],
                             block_threads=FLAG_THREADS))
    return commands


def update_commands(solver, state, take_step=True):
    """Step 4: the multipliers (the new step, or a retreat), then the positions: moved by
    M^-1 J^T dlambda, or back along the retreating world's last step."""
    m, s = solver.model, solver
    return [s.record(multipliers.update_multipliers, m.row_count, [
        m.row_world, s.retreat, s.step_scale, int(take_step), s.dlam], outputs=[state.multipliers, s.dlam_taken]),
        inverse_mass_transpose_command(s, s.dlam, s.u_lambda),
        s.record(integration.positions_after_update, s.entity_count, [
            s.u_lambda, s.momentum_gap, int(s.balances_momentum), int(take_step), m.particle_count, m.particle_world, m.body_world, s.retreat, s.step_scale,
            s.offset_ref, s.particle_q_pred, s.body_q_pred], outputs=[s.offset_full, state.particle_q, state.body_q,
                                                                      *compensation(s, state, "position")])]


def finish_commands(solver, state, h):
    """v = v~ + (x - x~) / h for particles and bodies (rotation: the rotation vector from q~ to q), then
    the velocities corrected by u = M^-1 J^T dlambda of the constraint types' velocity corrections
    (``ConstraintType.velocity_correction_commands``: what a contact moved a point out of a penetration
    the substep began with, taken back): a particle's whole, a body's scaled to its share
    (``ConstraintType.body_velocity_limit_commands``) and to at most the step that removes the most of its
    kinetic energy along u (``integration.add_body_velocities``), so that the correction never adds any; last,
    each world leaves its substep's frame (``leave_frame_commands``)."""
    m, s = solver.model, solver
    commands = []
    if m.particle_count:
        commands.append(s.record(integration.finish_particle_velocities, m.particle_count,
                                 [state.particle_q, s.particle_q_pred, 1.0 / h,
                                  *compensation(s, state, "particle_velocities"), state.particle_qd]))
    if m.body_count:
        commands.append(s.record(integration.finish_body_velocities, m.body_count,
                                 [state.body_q, s.body_q_pred, 1.0 / h, *compensation(s, state, "body_velocities"),
                                  state.body_qd]))
    corrections = [command for ctype in s.constraint_types
                   for command in ctype.velocity_correction_commands(s, state, h)]
    if corrections:
        commands += [s.dlam.zero_, *corrections, inverse_mass_transpose_command(s, s.dlam, s.u_lambda)]
        if m.particle_count:
            commands.append(s.record(integration.add_particle_velocities, m.particle_count, [s.u_lambda],
                                     outputs=[state.particle_qd]))
        if m.body_count:
            commands += [*(command for ctype in s.constraint_types
                           for command in ctype.body_velocity_limit_commands(s, state, h)),
                         s.record(integration.add_body_velocities, m.body_count, [
                             s.u_lambda, s.body_correction_scale, state.body_q, m.body_inv_mass, m.body_inertia,
                             m.particle_count], outputs=[state.body_qd])]
    return commands + leave_frame_commands(s, state)


def start_line_search_commands(solver):
    """Every world begins its substep with no step to judge (and, ``Solver.keeps_least_merit``, no point visited)."""
    commands = [solver.record(multipliers.start_line_search, solver.model.world_count, [], outputs=[solver.step_scale])]
    if solver.keeps_least_merit:
        commands.append(solver.record(multipliers.start_least_merit, solver.model.world_count, [],
                                      outputs=[solver.merit_least]))
    return commands


def copy_where_commands(solver, lam_source, q_source, lam_target, q_target):
    """Multipliers and positions from the ``source`` arrays into the ``target`` ones in the worlds with
    ``solver.world_taken`` = 1 (``q_*``: (particle_q, body_q, particle_q_low, body_q_low): ``positions``): the elastic
    warm start's first start put back, the wander limit's point of least merit kept aside or gone back to."""
    m, s = solver.model, solver
    return [s.record(multipliers.copy_rows_where, m.row_count, [m.row_world, s.world_taken, lam_source],
                     outputs=[lam_target]),
            s.record(integration.copy_positions_where, s.entity_count, [
                m.particle_count, m.particle_world, m.body_world, s.world_taken, *q_source, int(s.compensating)],
                outputs=list(q_target))]


def positions(state):
    """A state's positions with their remainders, as ``copy_where_commands`` takes them."""
    return state.particle_q, state.body_q, state.particle_q_low, state.body_q_low


def least_positions(solver):
    """The wander limit's point of least merit, as ``copy_where_commands`` takes it."""
    s = solver
    return s.particle_q_least, s.body_q_least, s.particle_q_least_low, s.body_q_least_low


def remainder_copy_commands(solver, targets, sources):
    """Copies of the remainders (``Solver.compensating``; off: none)."""
    if not solver.compensating:
        return []
    return [copy_command(target, source) for target, source in zip(targets, sources)]


def compensation(solver, state, kernel):
    """The trailing arguments of an integration or frame kernel for ``Solver.compensating``
    (``kernels.compensated``): the flag, then the remainders that kernel reads and writes."""
    s = solver
    flag = int(s.compensating)
    return {
        "predict_particles": (flag, state.particle_q_low, s.particle_q_prev_low, s.particle_q_pred_low,
                              state.particle_qd_low),
        "predict_bodies": (flag, state.body_q_low, s.body_q_prev_low, s.body_q_pred_low, state.body_qd_low),
        "position": (flag, s.particle_q_pred_low, s.body_q_pred_low, state.particle_q_low, state.body_q_low),
        "particle_velocities": (flag, state.particle_q_low, s.particle_q_pred_low, state.particle_qd_low),
        "body_velocities": (flag, state.body_q_low, s.body_q_pred_low, state.body_qd_low),
        "leave": (flag, state.particle_q_low, s.particle_q_prev_low, s.particle_q_pred_low, state.body_q_low,
                  s.body_q_prev_low, s.body_q_pred_low),
    }[kernel]


def least_merit_note_commands(solver, state):
    """``SolverSettings.wander_limit``, after each judgement: a world whose current point has the least merit
    of its substep so far keeps it aside (multipliers and positions)."""
    s = solver
    return [s.record(multipliers.note_least_merit, s.model.world_count, [s.merit, s.merit_least],
                     outputs=[s.world_taken])] + copy_where_commands(
        s, state.multipliers, positions(state), s.lam_least, least_positions(s))


def least_merit_end_commands(solver, state, control, h):
    """``SolverSettings.wander_limit``, after the Newton loop: one more assembly judges the point the budget
    stopped at (the loop's last step is otherwise never judged), and a world that has not converged and ends above
    ``wander_limit`` times the least merit it visited goes back to that point."""
    s = solver
    return (assemble_commands(s, state, control, h, round_off=False)
            + [s.record(multipliers.choose_least_merit, s.model.world_count, [s.merit_least, s.retreat, s.wander_limit],
                        outputs=[s.merit, s.world_taken, s.world_wander_returns])]
            + copy_where_commands(s, s.lam_least, least_positions(s), state.multipliers, positions(state)))
