"""Solver: the compliant-constraint, non-smooth Newton time stepper of seed 001, section IV.

One ``step(state_in, state_out, control, dt)`` advances every world by dt [s] in ``substeps``
substeps. Each substep predicts positions, detects contacts, then runs a fixed number of
Newton iterations; each iteration assembles the rows (kernels/<type>.py), prepares the system
(kernels/rows.py), solves it with a fixed number of Jacobi-preconditioned conjugate residual
iterations (kernels/linear_solver.py) and moves the particles and bodies
(kernels/integration.py). Nothing inside a step reads back to the host, so on a GPU a whole
step can be captured in a CUDA graph; the optional finite-state check runs once per step,
after it.

The launches of a substep are recorded once (``wp.launch(record_cmd=True)``) and replayed every
substep: a launch from Python costs tens of microseconds on the CPU, a replay a few, which is most
of a small model's step. They are recorded again when the substep length, the arrays of the
state or control passed to ``step``, or one of the solver's settings change.
"""

import functools
import math
import time

import numpy as np
import warp as wp

from .constraints import CONSTRAINT_TYPES
from .errors import SimulationError
from .input_checks import InputCheck
from .kernels import checks, integration, linear_solver, multipliers, operator, rows
from .validation import time_step


STANDARD_GRAVITY = 9.80665
"""[m/s^2]"""

PER_WORLD_MAX_ROWS = 1024
"""Above this many rows in one world, "auto" uses the batched linear solver on a GPU."""


PROFILE_PHASES = ("predict", "assemble", "solve", "update", "finish", "check")
"""The phases of a step that ``Solver(profile=True)`` times."""

MAX_SPEED_DEFAULT = 1000.0
"""Default speed [m/s] above which a world counts as blown up: far beyond any robot this engine
simulates, reached within a few steps by a diverging solve."""


class Solver:
    """Non-smooth Newton solver with compliant constraints, many worlds at once.

    Args:
        model: the finalized :class:`softsnake.Model`
        substeps: substeps per ``step`` call (the paper: 2)
        newton_iterations: Newton iterations per substep (the paper: 4)
        linear_iterations: conjugate residual iterations per Newton iteration (the paper: 20)
        contact_margin: distance [m] within which a contact slot becomes active
        linear_solver: "batched" (each conjugate residual operation a kernel over all rows of all
            worlds: best for large worlds on a GPU), "per_world" (one thread runs a whole world's
            solve: best for many small worlds, and on the CPU, where kernel launches dominate), or
            "auto" (per_world on the CPU and on a GPU when no world has more than
            ``PER_WORLD_MAX_ROWS`` rows, batched otherwise). Both give the same iterates.
        warm_start: start every substep's Newton iterations from the previous substep's
            multipliers (rescaled to the new substep length) and the positions they imply,
            x = x~ + M^-1 J^T lambda, instead of lambda = 0. Stiff bodies then keep their stresses
            from substep to substep instead of rebuilding them with a few iterations each time. A
            world whose pressure channels switched actuation rows on or off since the last step
            starts that step cold.
        check_finite: after every step, raise SimulationError if a world has blown up: a position or
            velocity that is NaN or Inf, or a particle or body moving faster than ``max_speed``
            (one small device-to-host copy per step; switch off for CUDA-graph capture)
        max_speed: linear speed [m/s] above which ``check_finite`` reports a world as blown up; a
            diverging solve grows without bound long before it overflows to Inf
        profile: time the phases of every step into ``profile_seconds`` (each phase bracketed by
            ``wp.synchronize``; the results are the same, the step slower)
    """

    def __init__(self, model, *, substeps=2, newton_iterations=4, linear_iterations=20, contact_margin=0.01, linear_solver="auto", warm_start=True, check_finite=True, max_speed=MAX_SPEED_DEFAULT, profile=False):
        for name, value in (("substeps", substeps), ("newton_iterations", newton_iterations), ("linear_iterations", linear_iterations)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if not (math.isfinite(contact_margin) and contact_margin >= 0.0):
            raise ValueError(f"contact_margin must be non-negative, got {contact_margin}")
        if not (math.isfinite(max_speed) and max_speed > 0.0):
            raise ValueError(f"max_speed must be a positive speed [m/s], got {max_speed}")
        if linear_solver not in ("auto", "batched", "per_world"):
            raise ValueError(f"linear_solver must be 'auto', 'batched' or 'per_world', got {linear_solver!r}")
        if linear_solver == "auto":
            largest_world = int(np.max(np.diff(model.row_world_start))) if model.world_count else 0
            small = largest_world <= PER_WORLD_MAX_ROWS
            linear_solver = "per_world" if (model.device.is_cpu or small) else "batched"
        self.linear_solver = linear_solver
        self.model = model
        self.substeps = int(substeps)
        self.newton_iterations = int(newton_iterations)
        self.linear_iterations = int(linear_iterations)
        self.contact_margin = float(contact_margin)
        self.check_finite = bool(check_finite)
        self.max_speed = float(max_speed)
        self.warm_start = bool(warm_start)
        self._previous_h = None
        self.fb_epsilon = 1.0e-9
        """Regularisation of the Fischer-Burmeister corner a = b = 0 [m]."""
        self.contact_regularization = 1.0e-2
        """Proximal compliance of normal rows relative to their J M^-1 J^T (redundant contacts)."""
        self.friction_regularization = 1.0e-2
        """Proximal compliance of friction rows relative to their J M^-1 J^T (redundant contacts)."""
        self.min_stiffness_ratio = 1.0e-3
        """Floor of a nonlinear spring's tangent stiffness, relative to its reference stiffness."""
        self.step_count = 0
        self.profile = bool(profile)
        self.profile_seconds = dict.fromkeys(PROFILE_PHASES, 0.0)
        """Wall time [s] per phase since construction or ``reset_profile`` (``profile=True`` only):
        "predict" (prediction and contact detection), "assemble" (rows, J, J^T, right-hand sides),
        "solve" (the linear solves), "update" (position and multiplier updates), "finish"
        (velocities) and "check" (the blow-up check)."""

        m, dev = model, model.device
        self.entity_count = m.particle_count + m.body_count
        dofs = 3 * m.particle_count + 6 * m.body_count
        rows_n = m.row_count

        zeros = self.zeros
        self.particle_q_prev = zeros(m.particle_count, wp.vec3)
        self.body_q_prev = zeros(m.body_count, wp.transform)
        self.particle_q_pred = zeros(m.particle_count, wp.vec3)
        self.body_q_pred = zeros(m.body_count, wp.transform)
        self.body_inv_inertia_world = zeros(m.body_count, wp.mat33)
        self.displacement = zeros(dofs)
        self.offset = zeros(dofs)
        self.u = zeros(dofs)
        self.u_lambda = zeros(dofs)
        self.J_values = zeros(m.nnz)
        # The solver's J: J itself, or (planar models) its in-plane columns only.
        self.J_solve_values = zeros(m.solve_nnz) if m.solve_compact else self.J_values
        self.JT_values = zeros(m.solve_nnz)
        names = ("row_c", "row_compliance", "row_coupling", "row_damping", "lam", "rhs", "compliance_eff", "coupling_eff",
                 "inv_diagonal", "dlam", "z", "p", "Az", "Ap")
        for name in names:
            setattr(self, name, zeros(rows_n))
        # Per-world solve scratch: live rows (flags and list) and where each column of J^T ends.
        self.row_live = zeros(rows_n, int)
        self.live_rows = zeros(rows_n, int)
        self.JT_live_ends = zeros(dofs, int)
        self.partial = zeros(m.chunk_count)
        self.zAz = zeros(m.world_count)
        self.zAz_start = zeros(m.world_count)
        self.zAz_new = zeros(m.world_count)
        self.ApPAp = zeros(m.world_count)
        self.alpha = zeros(m.world_count)
        self.beta = zeros(m.world_count)
        self.world_cold = wp.zeros(m.world_count, dtype=int, device=dev)
        self.pressure_previous = wp.zeros(max(m.pressure_channel_count, 1), dtype=float, device=dev)
        self.world_flag = wp.zeros(m.world_count, dtype=int, device=dev)
        self.input_check = InputCheck(m)
        self.planar = 1 if m.planar_axis >= 0 else 0
        """1 for a planar model (the kernels' flag), 0 otherwise."""
        self.constraint_types = [t for t in CONSTRAINT_TYPES if getattr(m, f"{t.name}_count")]
        """The constraint types this model has items of, in row order."""
        for ctype in self.constraint_types:
            ctype.allocate(self)
        self._recording_key = None
        self._recording = None

    def zeros(self, n, dtype=float):
        """A zeroed solver array of n entries (at least one, so that empty models launch nothing odd)."""
        return wp.zeros(max(n, 1), dtype=dtype, device=self.model.device)

    # ------------------------------------------------------------------ public
    def step(self, state_in, state_out, control, dt):
        """Advance every world by ``dt`` [s] from ``state_in`` into ``state_out`` (may be the same object).

        ``control`` holds the chamber pressures [Pa] and joint targets [rad]; the external forces
        of ``state_in`` act during the step.
        """
        dt = time_step(dt, self.substeps)
        if state_out is not state_in:
            state_out.assign(state_in)
            wp.copy(state_out.particle_f, state_in.particle_f)
            wp.copy(state_out.body_f, state_in.body_f)
        h = dt / self.substeps
        if self.warm_start and self.model.pressure_channel_count:
            wp.launch(multipliers.flag_pressure_switches, self.model.pressure_channel_count, device=self.model.device, inputs=[
                control.pressure, self.pressure_previous, self.model.pressure_channel_world, self.world_cold])
        recording = self._recorded(state_out, control, h)
        for _ in range(self.substeps):
            self._substep(recording, h)
        self.step_count += 1
        if self.check_finite:
            self._raise_if_blown_up(recording)

    def reset_profile(self):
        """Set every phase time of ``profile_seconds`` back to 0."""
        self.profile_seconds = dict.fromkeys(PROFILE_PHASES, 0.0)

    # ------------------------------------------------------------------ recording
    def record(self, kernel, dim, inputs, outputs=()):
        """A replayable launch of ``kernel`` (called without arguments)."""
        return wp.launch(kernel, dim, inputs=inputs, outputs=outputs, device=self.model.device, record_cmd=True).launch

    def _recorded(self, state, control, h):
        """The recorded launches of a substep of length h [s] on these state and control arrays."""
        arrays = (state.particle_q, state.particle_qd, state.particle_f, state.body_q, state.body_qd, state.body_f,
                  control.pressure, control.joint_target, control.prismatic_rate)
        # The public settings that launches take as arguments: changing one between steps re-records.
        settings = (self.linear_iterations, self.contact_margin, self.fb_epsilon, self.contact_regularization,
                    self.friction_regularization, self.min_stiffness_ratio)
        key = (h, settings, *(id(a) for a in arrays))
        if key != self._recording_key:
            m = self.model
            self._recording = {
                "predict": self._predict_commands(state, h),
                "warm_start": (self._drop_cold_commands() + self._jacobian_commands(state, control, h)
                               + self._balance_commands(state)) if m.row_count else [],
                "newton": self._newton_commands(state, control, h) if m.row_count else {},
                "finish": self._finish_commands(state, 1.0 / h),
                "check": self._check_commands(state) + self.input_check.commands(self, state, control),
                "arrays": arrays,  # keeps the keyed arrays alive, so that their ids stay theirs
            }
            self._recording_key = key
        return self._recording

    def _run(self, commands, phase=None):
        if self.profile and phase is not None:
            wp.synchronize_device(self.model.device)
            start = time.perf_counter()
        for command in commands:
            command()
        if self.profile and phase is not None:
            wp.synchronize_device(self.model.device)
            self.profile_seconds[phase] += time.perf_counter() - start

    # ------------------------------------------------------------------ substep
    def _substep(self, recording, h):
        m = self.model
        self._run(recording["predict"], "predict")
        if m.row_count:
            if self.warm_start and self._previous_h is not None:
                self._start_from_previous_multipliers(recording, h)
            else:
                self.lam.zero_()
                if self.warm_start and m.pressure_channel_count:
                    # This start is cold anyway: the switches flagged for it are spent.
                    self.world_cold.zero_()
            self._previous_h = h
            for _ in range(self.newton_iterations):
                for phase, commands in recording["newton"].items():
                    self._run(commands, phase)
        self._run(recording["finish"], "finish")

    def _predict_commands(self, state, h):
        m = self.model
        commands = []
        if m.particle_count:
            commands.append(self.record(integration.predict_particles, m.particle_count, [
                state.particle_q, state.particle_qd, state.particle_f, m.particle_inv_mass, m.gravity, m.planar_axis, h,
                self.particle_q_prev, self.particle_q_pred]))
        if m.body_count:
            commands.append(self.record(integration.predict_bodies, m.body_count, [
                state.body_q, state.body_qd, state.body_f, m.body_inv_mass, m.body_inertia, m.body_inv_inertia, m.gravity,
                m.planar_axis, h, self.body_q_prev, self.body_q_pred]))
        for ctype in self.constraint_types:
            commands += ctype.predict_commands(self, state, h)
        return commands

    def _finish_commands(self, state, inv_h):
        m = self.model
        commands = []
        if m.particle_count:
            commands.append(self.record(integration.finish_particle_velocities, m.particle_count,
                                         [state.particle_q, self.particle_q_pred, inv_h, state.particle_qd]))
        if m.body_count:
            commands.append(self.record(integration.finish_body_velocities, m.body_count,
                                         [state.body_q, self.body_q_pred, inv_h, state.body_qd]))
        return commands

    def _start_from_previous_multipliers(self, recording, h):
        """lambda <- previous lambda (h / h_prev)^2 (same forces), x <- x~ + M^-1 J(x~)^T lambda.

        Every row of a world where a pressure channel switched its actuation rows on or off since
        the last step starts from 0 instead: a switched row's force appears or vanishes at once, and
        the other rows' previous multipliers, which balanced it, would throw the bodies far out of
        equilibrium (a soft snake blew up within 0.1 s of a chamber switch when warm-started).
        """
        m, dev = self.model, self.model.device
        ratio = h / self._previous_h
        if ratio != 1.0:
            wp.launch(multipliers.scale_multipliers, m.row_count, device=dev, inputs=[self.lam, ratio * ratio])
        self._run(recording["warm_start"], "assemble")

    def _drop_cold_commands(self):
        """Zero the multipliers of the worlds whose pressure channels switched (none without channels)."""
        m = self.model
        if not m.pressure_channel_count:
            return []
        return [self.record(multipliers.drop_cold_multipliers, m.row_count, [self.lam, m.row_world, self.world_cold]),
                self.world_cold.zero_]

    def _newton_commands(self, state, control, h):
        """One Newton iteration's launches by phase: assemble, solve, update."""
        m = self.model
        assemble = [self.record(integration.substep_displacements, self.entity_count, [
            state.particle_q, self.particle_q_prev, self.particle_q_pred, state.body_q, self.body_q_prev,
            self.body_q_pred, m.particle_count], outputs=[self.displacement, self.offset])]
        assemble += self._jacobian_commands(state, control, h)
        assemble.append(self._inverse_mass_transpose_command(self.lam, self.u_lambda))
        assemble.append(self.record(rows.prepare_rows, m.row_count, [
            m.solve_offsets, m.solve_columns, self.J_solve_values, self.row_c, self.row_compliance, self.row_coupling,
            m.row_block_start, self.row_damping, self.lam, self.displacement, self.offset, self.u_lambda,
            m.particle_inv_mass, m.body_inv_mass, self.body_inv_inertia_world, 3 * m.particle_count, self.planar],
            outputs=[self.rhs, self.compliance_eff, self.coupling_eff, self.inv_diagonal]))
        update = [self.record(multipliers.accumulate_multipliers, m.row_count, [self.lam, self.dlam])]
        update += self._balance_commands(state)
        return {"assemble": assemble, "solve": self._solve_commands(), "update": update}

    def _jacobian_commands(self, state, control, h):
        """World inverse inertias, every row at the current positions, and the solver's copies of J and J^T."""
        m = self.model
        commands = []
        if m.body_count:
            commands.append(self.record(integration.update_world_inverse_inertia, m.body_count,
                                         [state.body_q, m.body_inv_inertia, self.body_inv_inertia_world]))
        # Row types other than tetrahedra have no block coupling; it stays zero from allocation
        # except on tetrahedral normal rows, which rewrite it every iteration.
        commands += [ctype.row_command(self, state, control, h) for ctype in self.constraint_types]
        if m.solve_compact:
            commands.append(self.record(rows.gather_solve_values, m.solve_nnz, [
                self.J_values, m.solve_source, m.JT_source, self.J_solve_values, self.JT_values]))
        else:
            commands.append(self.record(rows.gather_values, m.solve_nnz, [self.J_values, m.JT_source, self.JT_values]))
        return commands

    def _balance_commands(self, state):
        """x = x~ + M^-1 J^T lambda: positions in momentum balance with the multipliers (this J)."""
        m = self.model
        return [self._inverse_mass_transpose_command(self.lam, self.u_lambda),
                self.record(integration.positions_from_prediction, self.entity_count, [
                    self.u_lambda, m.particle_count, self.particle_q_pred, self.body_q_pred, state.particle_q,
                    state.body_q])]

    def row_outputs(self):
        """The row arrays every constraint kernel writes, in the order its arguments end with:
        J's offsets and values, the residual c, the compliance alpha and the damping ratio gamma."""
        return [self.model.J_offsets, self.J_values, self.row_c, self.row_compliance, self.row_damping]

    # ------------------------------------------------------------------ linear solve
    def _inverse_mass_transpose_command(self, x, u):
        """u = M^-1 J^T x."""
        m = self.model
        return self.record(operator.apply_inverse_mass_transpose, self.entity_count, [
            m.JT_offsets, m.JT_offsets[1:], m.JT_columns, self.JT_values, x, m.particle_inv_mass, m.body_inv_mass,
            self.body_inv_inertia_world, m.particle_count, self.planar], outputs=[u])

    def _multiply_commands(self, x, y):
        """y = [J M^-1 J^T + E] x."""
        m = self.model
        return [self._inverse_mass_transpose_command(x, self.u),
                self.record(operator.multiply_rows, m.row_count, [
                    m.solve_offsets, m.solve_columns, self.J_solve_values, self.u, x, self.compliance_eff, self.coupling_eff,
                    m.row_block_start], outputs=[y])]

    def _world_dot_commands(self, a, b, result, weight=None):
        m = self.model
        return [self.record(linear_solver.reduce_chunks, m.chunk_count, [
                    a, b, a if weight is None else weight, 0 if weight is None else 1, m.chunk_start, m.chunk_end],
                    outputs=[self.partial]),
                self.record(linear_solver.reduce_worlds, m.world_count, [self.partial, m.world_chunk_start],
                             outputs=[result])]

    def _solve_commands(self):
        """dlam ~= [J M^-1 J^T + E]^-1 rhs by Jacobi-preconditioned conjugate residual, per world."""
        m = self.model
        if self.linear_solver == "per_world":
            return [self.record(linear_solver.cr_solve_per_world, m.world_count, [
                m.row_world_start_device, m.particle_world_start_device, m.body_world_start_device, m.particle_count,
                self.planar, self.linear_iterations, m.solve_offsets, m.solve_columns, self.J_solve_values, m.JT_offsets, m.JT_columns,
                self.JT_values, m.particle_inv_mass, m.body_inv_mass, self.body_inv_inertia_world, self.compliance_eff,
                self.coupling_eff, m.row_block_start, self.rhs, self.inv_diagonal, self.row_live, self.live_rows,
                self.JT_live_ends],
                outputs=[self.u, self.z, self.p, self.Az, self.Ap, self.dlam])]
        n, W = m.row_count, m.world_count
        commands = [self.record(linear_solver.cr_start, n, [self.rhs, self.inv_diagonal], outputs=[self.dlam, self.z, self.p])]
        commands += self._multiply_commands(self.z, self.Az)
        commands.append(functools.partial(wp.copy, self.Ap, self.Az))
        commands += self._world_dot_commands(self.z, self.Az, self.zAz)
        commands.append(functools.partial(wp.copy, self.zAz_start, self.zAz))
        iteration = self._world_dot_commands(self.Ap, self.Ap, self.ApPAp, weight=self.inv_diagonal)
        iteration.append(self.record(linear_solver.cr_step_size, W, [self.zAz, self.zAz_start, self.ApPAp],
                                      outputs=[self.alpha]))
        iteration.append(self.record(linear_solver.cr_update_solution, n, [
            m.row_world, self.alpha, self.p, self.Ap, self.inv_diagonal], outputs=[self.dlam, self.z]))
        iteration += self._multiply_commands(self.z, self.Az)
        iteration += self._world_dot_commands(self.z, self.Az, self.zAz_new)
        iteration.append(self.record(linear_solver.cr_direction_ratio, W, [self.zAz_new, self.zAz_start, self.zAz],
                                      outputs=[self.beta]))
        iteration.append(self.record(linear_solver.cr_update_direction, n, [
            m.row_world, self.beta, self.z, self.Az], outputs=[self.p, self.Ap]))
        return commands + iteration * self.linear_iterations

    # ------------------------------------------------------------------ checks
    def _check_commands(self, state):
        m = self.model
        commands = [self.world_flag.zero_]
        if m.particle_count:
            commands.append(self.record(checks.flag_blown_up_particles, m.particle_count,
                                         [state.particle_q, state.particle_qd, m.particle_world, self.max_speed,
                                          self.world_flag]))
        if m.body_count:
            commands.append(self.record(checks.flag_blown_up_bodies, m.body_count,
                                         [state.body_q, state.body_qd, m.body_world, self.max_speed, self.world_flag]))
        return commands

    def _raise_if_blown_up(self, recording):
        self._run(recording["check"], "check")
        self.input_check.raise_if_flagged(self.step_count)
        flags = self.world_flag.numpy()
        bad = np.flatnonzero(flags)
        if len(bad):
            w = int(bad[0])
            what = "non-finite state" if flags[w] == checks.NONFINITE else f"a speed above {self.max_speed:g} m/s"
            raise SimulationError(
                f"world {w} blew up ({what}) after step {self.step_count} "
                f"({len(bad)} world(s) affected); reduce dt or check the model's parameters",
                world=w, step=self.step_count)
