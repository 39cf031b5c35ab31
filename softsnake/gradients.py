"""Gradients through the engine: the adjoint of converged steps, and the tape of the constraint rows.

A converged step solves G(u, lambda; x~, x_n, p) = 0 for the position offset u = x - x~ and the
multipliers lambda (``softsnake.kernels.adjoint`` states G); by the implicit function theorem its
gradient with respect to the start state and the parameters needs only products of vectors with
the derivatives of G at the solution, never a tape of the Newton and conjugate residual
iterations: nothing here depends on the iteration counts, and the memory is one step's arrays
on top of what ``record_rollout`` keeps (the start and end state and the multipliers of every
step). ``rollout_gradient`` runs the adjoint backwards over a recorded rollout.

The products come from Warp's adjoints of the kernels that evaluate the rows (every
``ConstraintType.row_command``) and of the contact detection, run once per step on a ``wp.Tape``
(``tape_rows`` does this for the rows alone). For that every row kernel is written so that Warp's
adjoint is exact: no variable carried from one iteration of a loop of run-time length to the next
(a row counter, a running sum: the adjoint replays such a loop without the values they took), and
a closed-form adjoint where Warp's own is unstable (the tetrahedron's polar rotation,
``tetrahedron.adj_polar_rotation``). tests/test_row_gradients.py checks every constraint type's
rows against central differences, tests/test_rollout_gradients.py whole rollouts.

A solver with several substeps per step is recorded and differentiated substep by substep (each
substep is one implicit step of its own length).

The tapes are recorded once per gradient and substep length and replayed for every substep
(``_StepEquations``: the forward passes and the Jacobian's backward passes as graphs where the solver
captures its steps). Limits: dG/dy is assembled from one backward per colour of its sparsity pattern (26
for a vine of any length) and solved by a sparse LU on the host, so a step's adjoint costs several forward
steps (experiments/vine_gradient_cost.py) and its solve runs on the host whatever the device (a Krylov solve
preconditioned by the engine's own Schur operator, on the device, would be the way to large worlds and
to the GPU; not built). The gradient is that of the
implicit step G = 0, which the engine's converged step meets exactly only with the balanced iteration
(``SolverSettings.momentum_balance``: the default from 16 Newton iterations) and a converged budget; the
plain iteration keeps a momentum lag
(``Solver.residual_norms``): exact for particles and for bodies that do not turn much within a step,
10-30 % off for a sphere rolling at dt = 1/60 s. Contacts at zero load with friction sit on a kink of
the friction cone (a box sliding on a face with friction: about 10 % off). A singular dG/dy is solved by
least squares: dense up to ``DENSE_SOLVE_LIMIT`` unknowns, above it sparse and regularised
(``_regularized_least_squares``: a coarse snake, 7118 unknowns, singular with its wheels' friction, whose
gradient then meets central differences: experiments/snake_gradient.py). A particle that
a substep pushes out of a penetration it began with (its velocity keeps none of the push:
``contact.depenetration_multipliers``) is differentiated as if it kept it; a converged rollout that
starts outside every obstacle has no such substep.

Each entry of a row's Jacobian is written once per kernel: Warp's adjoint replays
a kernel's stores, so an entry written twice (a value, then zero) would hold the first after a
backward pass, and the next backward would see it.
"""

import contextlib
import dataclasses

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import warp as wp

from .constraints import CONTACT_SLOT
from .errors import SimulationError
from .kernels import adjoint, integration, jacobian_colours
from .model import Control
from .residuals import row_kinds
from .validation import time_step


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


# ---------------------------------------------------------------------- rollout gradients

CONTROL_ARRAYS = tuple(name for name, _ in Control.ARRAYS)
"""The Control's arrays, recorded per step (a controller may change them between steps)."""


@dataclasses.dataclass
class StepRecord:
    """What the gradient of one substep needs (``record_rollout``): NumPy copies, O(state) per substep.

    start, end: {"particle_q", "particle_qd", "body_q", "body_qd"} at the substep's start and end;
    forces: the external forces of the step; control: the Control's arrays during the step;
    multipliers: the converged multipliers (contacts are detected again from the start and the
    prediction, as the substep did); h: the substep's length [s]; step: the index of the step it belongs
    to (a solver with n substeps records n of them per step).
    """

    start: dict
    end: dict
    forces: dict
    control: dict
    multipliers: np.ndarray
    h: float
    step: int


STATE_ARRAYS = ("particle_q", "particle_qd", "body_q", "body_qd")


def _copies(obj, names):
    return {name: getattr(obj, name).numpy().copy() for name in names if getattr(obj, name, None) is not None}


def record_rollout(solver, state, control, dt, steps, before_step=None):
    """Step ``state`` ``steps`` times by ``dt`` [s] and return the StepRecords a gradient needs, one per substep.

    before_step(k, control): optional, sets the Control of step k before it runs. A solver with n
    substeps runs each step as n steps of dt / n with one substep (the same launches in the same order,
    so the states are those of ``solver.step``; its blow-up check then judges every substep), and
    returns to its n substeps. The records hold no Newton or linear iteration.
    """
    substeps = solver.substeps
    h = time_step(dt, substeps) / substeps
    records = []
    solver.substeps = 1
    try:
        for k in range(steps):
            if before_step is not None:
                before_step(k, control)
            forces = _copies(state, ("particle_f", "body_f"))
            inputs = _copies(control, CONTROL_ARRAYS)
            for _ in range(substeps):
                start = _copies(state, STATE_ARRAYS)
                solver.step(state, state, control, h)
                records.append(StepRecord(start, _copies(state, STATE_ARRAYS), forces, inputs,
                                          state.multipliers.numpy().copy(), h, k))
    finally:
        solver.substeps = substeps
    return records


class _StepEquations:
    """One substep's equations G(u, lambda; x~, x_n, parameters) = 0 and its outputs, for every substep of length
    ``h`` [s] of a recorded rollout.

    Three Warp tapes (the prediction, the outputs x and v, the equations) are recorded once, on arrays kept for the
    whole gradient; every record then loads its values into those arrays and replays the tapes' forward passes (one
    graph each where the solver captures its steps, ``SolverSettings.capture_graph``: a CUDA graph, or Warp's CPU
    graph) and their backward passes from recorded adjoint launches (``_ReplayedBackward``); the Jacobian's backward
    pass of one colour is one more graph, which reads its colour from the device (``kernels.jacobian_colours``) and
    is replayed once per colour, so that capturing it costs one pass, not 26. Recording a step's tapes and launching
    its backward passes one by one from Python cost the CPU more than the kernels themselves
    (experiments/vine_gradient_cost.py). Every array a step's kernels write is zeroed before its forward pass and
    every gradient after its backward, as the fresh arrays of a step of its own were: the same launches on the same
    values, so the same bits.
    """

    SOLVER_ARRAYS = ("body_inv_inertia_world", "row_c", "J_values", "row_compliance", "row_damping", "row_coupling")
    """The solver's row arrays the equations write, replaced by arrays of their own that gradients reach."""

    def __init__(self, solver, state, control, h, pattern):
        m, d = solver.model, solver.model.device
        self.solver, self.model, self.state, self.control, self.h = solver, m, state, control, h
        self.pattern = pattern
        self.dofs = 3 * m.particle_count + 6 * m.body_count
        offsets = m.J_offsets.numpy()
        self.J_rows = wp.array(np.repeat(np.arange(m.row_count), np.diff(offsets[:m.row_count + 1])).astype(np.int32),
                               dtype=int, device=d)
        # Unknowns of each world: its degrees of freedom, then its rows.
        P = m.particle_count
        particle_dofs = [np.arange(3 * a, 3 * b) for a, b in zip(m.particle_world_start[:-1], m.particle_world_start[1:])]
        body_dofs = [3 * P + np.arange(6 * a, 6 * b) for a, b in zip(m.body_world_start[:-1], m.body_world_start[1:])]
        rows = [np.arange(a, b) for a, b in zip(m.row_world_start[:-1], m.row_world_start[1:])]
        self.world_unknowns = [np.concatenate([p, b, self.dofs + r]) for p, b, r in zip(particle_dofs, body_dofs, rows)]
        self.blocks = pattern.world_block_indices(self.world_unknowns)
        is_contact = np.zeros(max(m.row_count, 1), dtype=np.int32)
        is_contact[:m.row_count] = row_kinds(m) > 0  # contact normal and friction rows
        self.row_is_contact = wp.array(is_contact, dtype=int, device=d)

        # A record's values: the start and end states, the external forces, the multipliers.
        self.start = {name: wp.zeros_like(getattr(state, name), requires_grad=True) for name in STATE_ARRAYS}
        self.end = {name: wp.zeros_like(getattr(state, name)) for name in ("particle_q", "body_q")}
        self.forces = {name: wp.zeros_like(getattr(state, name)) for name in ("particle_f", "body_f")
                       if getattr(state, name, None) is not None}
        self.lam = wp.zeros_like(state.multipliers, requires_grad=True)
        # The prediction x~, v~ and the offset u = x - x~ (bodies: translation and rotation vector).
        self.predicted = {"particle_q": self.zeros(m.particle_count, wp.vec3),
                          "particle_qd": self.zeros(m.particle_count, wp.vec3),
                          "body_q": self.zeros(m.body_count, wp.transform),
                          "body_qd": self.zeros(m.body_count, wp.spatial_vector)}
        self.u = self.zeros(self.dofs, float)
        self.u_scratch = wp.zeros_like(self.u, requires_grad=False)
        # The outputs x = x~ (+) u, v = v~ + u / h.
        self.outs = {"particle_q": self.zeros(m.particle_count, wp.vec3), "body_q": self.zeros(m.body_count, wp.transform),
                     "particle_qd": self.zeros(m.particle_count, wp.vec3),
                     "body_qd": self.zeros(m.body_count, wp.spatial_vector)}
        # The equations' own arrays: the solver's row arrays and contacts, the positions at (u, lambda), G1, G2.
        self.rows = {name: wp.zeros_like(getattr(solver, name), requires_grad=True) for name in self.SOLVER_ARRAYS}
        self.rows["row_residual_scale"] = wp.zeros_like(solver.row_residual_scale, requires_grad=True)
        # What the constraint types detect each substep (contacts' points, normals); int flags need no gradient.
        self.detected = {name: wp.zeros_like(getattr(solver, name), requires_grad=getattr(solver, name).dtype != wp.int32)
                         for ctype in solver.constraint_types for name in ctype.detected_arrays}
        self.x = {"particle_q": self.zeros(m.particle_count, wp.vec3), "body_q": self.zeros(m.body_count, wp.transform)}
        self.displacement = self.zeros(self.dofs, float)
        self.unused = wp.zeros_like(self.displacement, requires_grad=True)
        self.J_d = self.zeros(m.row_count, float)
        self.JT_lam = self.zeros(self.dofs, float)
        self.G1 = self.zeros(self.dofs, float)
        self.G2 = self.zeros(m.row_count, float)
        self.equation_colour = wp.array(pattern.colour.astype(np.int32), dtype=int, device=d)
        self.colour = wp.zeros(1, dtype=int, device=d)
        self.stacked = wp.zeros(max(pattern.colour_count * pattern.size, 1), dtype=float, device=d)
        self._solver_residual_scale = solver.row_residual_scale
        self.graphs = solver.capture_graph
        self._graph = {}
        self.built = False

    def zeros(self, n, dtype):
        """A zeroed array of n entries (at least one) that gradients reach."""
        return wp.zeros(max(n, 1), dtype=dtype, device=self.model.device, requires_grad=True)

    # ------------------------------------------------------------------ the forward passes
    def _predict(self):
        """x~, v~ from the step's start (on the prediction's tape); then u from the step's end (on no tape)."""
        m, d = self.model, self.model.device
        inputs, outputs, forces = self.start, self.predicted, self.forces
        with self._taped(self.predict_tape):
            if m.particle_count:
                wp.launch(adjoint.predict_particles_into, m.particle_count, device=d, inputs=[
                    inputs["particle_q"], inputs["particle_qd"], forces["particle_f"], m.particle_inv_mass, m.gravity,
                    m.planar_axis, self.h], outputs=[outputs["particle_q"], outputs["particle_qd"]])
            if m.body_count:
                wp.launch(adjoint.predict_bodies_into, m.body_count, device=d, inputs=[
                    inputs["body_q"], inputs["body_qd"], forces["body_f"], m.body_inv_mass, m.body_inertia,
                    m.body_inv_inertia, m.gravity, m.planar_axis, self.h], outputs=[outputs["body_q"], outputs["body_qd"]])
        wp.launch(integration.substep_displacements, self.solver.entity_count, device=d, inputs=[
            self.end["particle_q"], outputs["particle_q"], outputs["particle_q"], self.end["body_q"], outputs["body_q"],
            outputs["body_q"], m.particle_count, m.particle_world, m.body_world, self.solver.no_world_held],
            outputs=[self.u_scratch, self.u])

    def _taped(self, tape):
        """``tape`` while the first record's forward passes record it (``_build``), afterwards nothing."""
        return contextlib.nullcontext() if self.built else tape

    def _forward_passes(self):
        """(name, function) of the three forward passes, in their order."""
        return (("predict", self._predict), ("outputs", self._outputs), ("equations", self._equations))

    @property
    def no_remainders(self):
        """``positions_from_prediction``'s trailing arguments with compensation off: the float32 step is the one
        differentiated (``SolverSettings.compensated_positions`` changes it at round-off only); the remainders are
        the solver's zero arrays (``Solver.zero_remainders``)."""
        particles, bodies = self.solver.zero_remainders
        return 0, particles, bodies, particles, bodies

    def _positions(self, x_p, x_b):
        """x = x~ (+) u into x_p, x_b."""
        m = self.model
        wp.launch(integration.positions_from_prediction, self.solver.entity_count, device=m.device, inputs=[
            self.u, m.particle_count, self.predicted["particle_q"], self.predicted["body_q"]],
            outputs=[x_p, x_b, *self.no_remainders])

    def _outputs(self):
        """x = x~ (+) u and v = v~ + u / h (on the outputs' tape)."""
        m, outs = self.model, self.outs
        with self._taped(self.outputs_tape):
            self._positions(outs["particle_q"], outs["body_q"])
            wp.launch(adjoint.velocities_from_offsets, self.solver.entity_count, device=m.device, inputs=[
                self.u, m.particle_count, self.predicted["particle_qd"], self.predicted["body_qd"], 1.0 / self.h],
                outputs=[outs["particle_qd"], outs["body_qd"]])

    @contextlib.contextmanager
    def _solver_arrays(self):
        """The solver and the state read and write the equations' arrays within this block."""
        s, state = self.solver, self.state
        swapped = {**self.rows, **self.detected, "particle_q_prev": self.start["particle_q"],
                   "body_q_prev": self.start["body_q"]}
        saved = {name: getattr(s, name) for name in swapped}
        saved_state = {name: getattr(state, name) for name in ("particle_q", "body_q", "multipliers")}
        try:
            for name, array in swapped.items():
                setattr(s, name, array)
            yield
        finally:
            for name, array in saved.items():
                setattr(s, name, array)
            for name, array in saved_state.items():
                setattr(state, name, array)

    def _equations(self):
        """G1 (per degree of freedom) and G2 (per row) at (u, lambda) (on the equations' tape), from arrays zeroed
        first (the residual scale: the solver's, ones where no contact row writes its own)."""
        s, m, d, state = self.solver, self.model, self.model.device, self.state
        for array in (*self.rows.values(), *self.detected.values(), *self.x.values(), self.displacement, self.unused,
                      self.J_d, self.JT_lam, self.G1, self.G2):
            array.zero_()
        with self._solver_arrays():
            wp.copy(s.row_residual_scale, self._solver_residual_scale)
            with self._taped(self.equations_tape):
                # Contact detection at the prediction, as the step did: the contacts' normals, surface
                # points and start points move with x~ and x_n.
                state.particle_q, state.body_q = self.predicted["particle_q"], self.predicted["body_q"]
                with s.launching_now():
                    for ctype in s.constraint_types:
                        ctype.predict_commands(s, state, self.h)
                x_p, x_b = self.x["particle_q"], self.x["body_q"]
                self._positions(x_p, x_b)
                state.particle_q, state.body_q, state.multipliers = x_p, x_b, self.lam
                if m.body_count:
                    wp.launch(integration.update_world_inverse_inertia, m.body_count, device=d,
                              inputs=[x_b, m.body_inv_inertia, m.body_world, s.no_world_held],
                              outputs=[s.body_inv_inertia_world])
                with s.launching_now():
                    for ctype in s.constraint_types:
                        ctype.row_command(s, state, self.control, self.h)
                wp.launch(integration.substep_displacements, s.entity_count, device=d, inputs=[
                    x_p, self.start["particle_q"], self.predicted["particle_q"], x_b, self.start["body_q"],
                    self.predicted["body_q"], m.particle_count, m.particle_world, m.body_world, s.no_world_held],
                    outputs=[self.displacement, self.unused])
                if m.row_count:
                    wp.launch(adjoint.jacobian_products, m.nnz, device=d, inputs=[
                        s.J_values, self.J_rows, m.J_columns, self.displacement, self.lam], outputs=[self.J_d, self.JT_lam])
                    wp.launch(adjoint.row_equations, m.row_count, device=d, inputs=[
                        s.row_c, s.row_compliance, s.row_coupling, m.row_block_start, s.row_damping, s.row_residual_scale,
                        self.row_is_contact, self.J_d, self.lam],
                        outputs=[self.G2])
                wp.launch(adjoint.momentum_equations, s.entity_count, device=d, inputs=[
                    self.u, self.JT_lam, m.particle_count, m.particle_inv_mass, m.body_inv_mass, s.body_inv_inertia_world],
                    outputs=[self.G1])

    def _colour(self):
        """The backward pass of the equations of one colour (``colour[0]``): its seeds, the pass, its row of (u, lambda)
        gradients into ``stacked`` (read back once per step), the gradients zeroed, the next colour."""
        d, size = self.model.device, self.pattern.size
        wp.launch(jacobian_colours.seed_colour, size, device=d, inputs=[self.equation_colour, self.colour, self.dofs],
                  outputs=[self.G1.grad, self.G2.grad])
        self.equations_back.run()
        wp.launch(jacobian_colours.store_colour, size, device=d, inputs=[
            self.u.grad, self.lam.grad, self.colour, self.dofs, size], outputs=[self.stacked])
        self.equations_back.zero()
        wp.launch(jacobian_colours.next_colour, 1, device=d, outputs=[self.colour])

    def _run(self, name, function):
        """Run ``function``'s launches: as its graph once captured, else from Python."""
        graph = self._graph.get(name)
        if graph is not None:
            wp.capture_launch(graph)
        else:
            function()

    def _build(self):
        """Record the three tapes (the first record's forward passes, from Python: they load the kernels' modules,
        which a capture cannot), their backward launches, and the graphs of the forward passes and of the colours."""
        self.predict_tape, self.outputs_tape, self.equations_tape = wp.Tape(), wp.Tape(), wp.Tape()
        for _, function in self._forward_passes():
            function()
        self.predict_back = _ReplayedBackward(self.predict_tape)
        self.outputs_back = _ReplayedBackward(self.outputs_tape)
        self.equations_back = _ReplayedBackward(self.equations_tape)
        self.built = True
        if self.graphs:
            for name, function in (*self._forward_passes(), ("colour", self._colour)):
                with wp.ScopedCapture(device=self.model.device, force_module_load=False) as capture:
                    function()
                self._graph[name] = capture.graph

    # ------------------------------------------------------------------ one record
    def load(self, record):
        """Put a record's values into the arrays the tapes read and run the three forward passes at them."""
        for name, values in record.control.items():
            getattr(self.control, name).assign(values)
        for name in STATE_ARRAYS:
            self.start[name].assign(record.start[name])
        for name in self.end:
            self.end[name].assign(record.end[name])
        for name, values in record.forces.items():
            self.forces[name].assign(values)
        self.lam.assign(record.multipliers)
        if not self.built:
            self._build()
            return
        for name, function in self._forward_passes():
            self._run(name, function)

    def jacobian(self):
        """dG/dy at the loaded record's converged point, assembled from one backward pass per colour."""
        self.colour.zero_()
        self.equations_back.zero()
        for _ in range(self.pattern.colour_count):
            self._run("colour", self._colour)
        p = self.pattern
        by_color = self.stacked.numpy().astype(np.float64).reshape(-1, p.size)
        return scipy.sparse.csr_matrix((by_color[p.entry_color, p.cols], p.cols, p.indptr), shape=(p.size, p.size))

    def world_blocks(self, jacobian):
        """Each world's diagonal block of ``jacobian`` (``jacobian()``), in its unknowns' order (no entry couples
        two worlds), from the pattern's indices: no sparse indexing per step."""
        return [scipy.sparse.csr_matrix((jacobian.data[entries], indices, indptr), shape=(len(indptr) - 1,) * 2)
                for entries, indices, indptr in self.blocks]


class _JacobianPattern:
    """Which unknowns each equation of a step depends on, and a colouring of the equations such that no
    two of one colour share an unknown: one tape backward seeded with every equation of a colour then
    gives all their rows of dG/dy at once (compressed Jacobian). Unknowns and equations share one
    numbering: the degrees of freedom (u, G1), then the rows (lambda, G2).

    G2 of a row depends on the degrees of freedom of the entities it touches and on the multipliers of
    its group (the row; a tetrahedron's three normal rows; a contact slot's normal and friction rows);
    G1 of an entity on its own degrees of freedom (x and its world inertia), and on the multipliers
    and the entities' degrees of freedom of every row touching it (J^T lambda).
    """

    def __init__(self, model):
        m = model
        P, R = m.particle_count, m.row_count
        entities = P + m.body_count
        dofs = 3 * P + 6 * m.body_count
        self.size = size = dofs + R
        offsets, columns = m.J_offsets.numpy()[:R + 1], m.J_columns.numpy()

        def incidence(rows, cols, shape):
            """The 0/1 sparse matrix with ones at (rows, cols) (repeats count once)."""
            matrix = scipy.sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
            matrix.data[:] = 1.0
            return matrix

        # Entity -> its degrees of freedom; row -> the entities it touches; row -> its own multiplier.
        entity_of_dof = np.concatenate([np.repeat(np.arange(P), 3), P + np.repeat(np.arange(m.body_count), 6)])
        entity_dof = incidence(entity_of_dof, np.arange(dofs), (entities, size))
        entry_row = np.repeat(np.arange(R), np.diff(offsets))
        row_entity = incidence(entry_row, entity_of_dof[columns[:len(entry_row)]], (R, entities))
        row_self = incidence(np.arange(R), dofs + np.arange(R), (R, size))
        # Row -> the multipliers of its group: a row outside a block is its own block start, a block's three rows
        # name its first; a contact slot's rows are one group.
        first, count = np.arange(R), np.ones(R, dtype=np.int64)
        block = m.row_block_start.numpy()[:R].astype(np.int64)
        in_block = block != np.arange(R)
        in_block[block[in_block]] = True
        first[in_block], count[in_block] = block[in_block], 3
        if m.contact_slot_count:
            per_slot = CONTACT_SLOT.rows_per_item(m.planar_axis >= 0)
            slot_rows = (m.contact_slot_row.numpy().astype(np.int64)[:, None] + np.arange(per_slot)).ravel()
            first[slot_rows], count[slot_rows] = np.repeat(slot_rows[::per_slot], per_slot), per_slot
        within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        row_group = incidence(np.repeat(np.arange(R), count), dofs + np.repeat(first, count) + within, (R, size))
        # G1 of an entity: its own degrees of freedom, the multipliers of the rows touching it and those rows'
        # entities' degrees of freedom (J^T lambda), the same for each of its degrees of freedom; G2 of a row: its
        # group's multipliers and its entities' degrees of freedom.
        entity_row = row_entity.T.tocsr()
        entity_deps = entity_dof + entity_row @ row_self + (entity_row @ row_entity) @ entity_dof
        deps = scipy.sparse.vstack([entity_deps[entity_of_dof], row_group + row_entity @ entity_dof]).tocsr()
        deps.sum_duplicates()
        # Greedy colouring, equations in order: each takes the least colour no equation sharing an unknown with it
        # has taken yet.
        conflicts = (deps @ deps.T).tocsr()
        color = np.full(size, -1)
        for o in range(size):
            taken = color[conflicts.indices[conflicts.indptr[o]:conflicts.indptr[o + 1]]]
            taken = taken[taken >= 0]
            free = np.ones(len(taken) + 1, dtype=bool)
            free[taken[taken <= len(taken)]] = False
            color[o] = int(np.argmax(free))
        # Each equation's colour, and how many colours.
        self.colour = color
        self.colour_count = int(color.max()) + 1 if size else 0
        # The entries of dG/dy: row (equation), column (unknown), and the colour whose backward gives them.
        self.indptr = deps.indptr.astype(np.int64)
        self.cols = deps.indices.astype(np.int64)
        self.entry_color = color[np.repeat(np.arange(size), np.diff(deps.indptr))]

    def world_block_indices(self, world_unknowns):
        """Per world (its unknowns, increasing): the positions of its diagonal block's entries among dG/dy's (CSR
        order) and the block's own CSR column indices and row starts. Raises if an entry couples two worlds."""
        local = np.full(self.size, -1, dtype=np.int64)
        blocks = []
        for unknowns in world_unknowns:
            local[unknowns] = np.arange(len(unknowns))
            starts, counts = self.indptr[unknowns], np.diff(self.indptr)[unknowns]
            indptr = np.concatenate([[0], np.cumsum(counts)])
            entries = np.repeat(starts - indptr[:-1], counts) + np.arange(indptr[-1])
            indices = local[self.cols[entries]]
            if len(indices) and (indices < 0).any():
                raise RuntimeError("dG/dy has an entry between two worlds")  # the pattern's construction forbids it
            blocks.append((entries, indices, indptr))
            local[unknowns] = -1
        return blocks


class _ReplayedBackward:
    """The backward pass of a recorded tape as recorded adjoint launches, replayed for many seeds.

    ``wp.Tape.backward`` launches every adjoint kernel from Python, which on the CPU costs more than
    the kernels themselves (tens of microseconds per argument-rich launch): a step's Jacobian takes a
    few dozen backward passes over the same launches. Recording them once (``record_cmd=True``) and
    replaying the records runs the same adjoint kernels on the same arrays, as ``Tape.backward`` would.
    """

    def __init__(self, tape):
        self.tape = tape
        self.commands = []
        for launch in reversed(tape.launches):
            kernel, dim, max_blocks, inputs, outputs, device, block_dim = launch[:7]
            self.commands.append(wp.launch(
                kernel, dim, inputs=inputs, outputs=outputs, adj_inputs=[tape.get_adjoint(a) for a in inputs],
                adj_outputs=[tape.get_adjoint(a) for a in outputs], device=device, adjoint=True, max_blocks=max_blocks,
                block_dim=block_dim, record_cmd=True))
        self.gradients = list(tape.gradients.values())

    def backward(self, seeds):
        """Run the backward pass from the seeds {output array: its adjoint (NumPy, or a Warp array of its
        shape, copied on the device)}; gradients accumulate."""
        for array, values in seeds.items():
            if isinstance(values, wp.array):
                wp.copy(array.grad, values)
            else:
                array.grad.assign(values.astype(np.float32))
        self.run()

    def run(self):
        """Run the backward pass from the adjoints the outputs hold."""
        for command in self.commands:
            command.launch()

    def zero(self):
        """Zero every gradient the backward pass touches."""
        for grad in self.gradients:
            grad.zero_()


def _split(vector, dofs):
    """A vector over (degrees of freedom, rows) as the two arrays G1 and G2 hold (at least one entry each)."""
    first, second = vector[:dofs], vector[dofs:]
    return (first if len(first) else np.zeros(1)), (second if len(second) else np.zeros(1))


DENSE_SOLVE_LIMIT = 2000
"""The most unknowns of a world whose singular adjoint system is solved by dense least squares."""

SINGULAR_CUTOFF = 1.0e-6
"""Relative singular value below which an equilibrated dG/dy counts as singular [-]: its entries come
from float32 kernels (about 1e-7 relative), so smaller singular values are rounding."""


SPARSE_REGULARIZATION = 1.0e-11
"""epsilon of ``_regularized_least_squares`` (relative to the equilibrated dG/dy's unit rows) [-]. Far below
``SINGULAR_CUTOFF``: a large world's dG/dy has legitimately small singular values that a cut at 1e-6 drops.
The coarse snake (7118 unknowns, 46 balanced steps of 1/240 s from rest, chambers at +-8 psi, loss the
modules' x + y), d/d(element modulus factor) by epsilon: 1e-6 -> -1.9e-4 m, 1e-8 -> +1.0e-3, 1e-9 ->
+1.26e-4, 1e-10 -> +6.95e-5, 1e-12 -> +6.93e-5, against central differences +6.5e-5 .. +7.2e-5 (steps
0.3-3 %): a plateau from 1e-10 down, where the augmented system's LU (condition about 1 / epsilon) is
still accurate in float64."""


CONDITION_ESTIMATE_ITERATIONS = 5
"""The iteration limit of ``_inverse_one_norm`` (LAPACK's ITMAX for the same estimator) [-]: at most 4 columns of A^-1
after the first climb, so at most 6 solves with A and 5 with A^T in all."""


def _condition_estimate(matrix, lu):
    """The 1-norm condition number kappa_1 = ||A||_1 ||A^-1||_1 of a square sparse matrix A from its LU factors:
    ||A||_1 exactly, ||A^-1||_1 estimated (``_inverse_one_norm``). A nearly singular dG/dy (a box's coplanar
    corners, whose load the float32 rows split almost arbitrarily: kappa_1 7e8 to 1e25 in the box-on-slope gradient
    test) is solved exactly by the LU, but the rounding of its float32 entries then moves the answer by up to
    kappa times 1e-7 (that test's adjoint was 13 % off at 20 steps and 1.5 % at 14; its angular entries
    0.002 where central differences give 1e-5). The least-squares fallback takes over where kappa_2 >= kappa_1 / n
    exceeds 1 / SINGULAR_CUTOFF, where it surely drops a direction; a chain's legitimately stiff system stays with
    the LU (a vine pressed on a wall: kappa_1 up to 1.4e6 for n of 30 to 200, whose truncation put its mass
    derivative 7.6 % off)."""
    return float(abs(matrix).sum(axis=0).max()) * _inverse_one_norm(lu, matrix.shape[0])


def _inverse_one_norm(lu, n):
    """A lower bound on ||A^-1||_1 from a few solves with A and A^T (``lu``: SciPy's SuperLU of A), by Hager's
    method as Higham refined it (LAPACK's xLACN2, which xGECON uses; Higham, ACM TOMS 14, 1988): climb from the
    uniform vector to the column of A^-1 its sign pattern points at, then try an alternating vector that defeats the
    climb's known failures. Deterministic: SciPy's ``onenormest`` (block version, two columns) starts its second
    column from NumPy's global random state, and a coarse snake's substep estimated so at 6.9e9 to 7.2e9 against the
    threshold of 7.1e9 took the LU in one run and least squares in the next. On the video fits' dG/dy (n 260) both
    estimates lie within 0.57 of the exact norm, this one in a quarter of the time (0.16 against 0.63 ms), and over
    the gradient tests' 4 216 solves the two never decide differently."""
    x = np.full(n, 1.0 / n)
    y = lu.solve(x)
    estimate = np.abs(y).sum()
    if n == 1:
        return estimate
    signs = np.where(y >= 0.0, 1.0, -1.0)
    z = lu.solve(signs, trans="T")
    j = int(np.argmax(np.abs(z)))
    for _ in range(CONDITION_ESTIMATE_ITERATIONS - 1):
        unit = np.zeros(n)
        unit[j] = 1.0
        y = lu.solve(unit)  # column j of A^-1
        previous, estimate = estimate, np.abs(y).sum()
        new_signs = np.where(y >= 0.0, 1.0, -1.0)
        if estimate <= previous or np.array_equal(new_signs, signs):
            estimate = max(estimate, previous)
            break
        signs = new_signs
        z = lu.solve(signs, trans="T")
        last, j = j, int(np.argmax(np.abs(z)))
        if np.abs(z[last]) == np.abs(z[j]):
            break
    alternating = np.where(np.arange(n) % 2 == 0, 1.0, -1.0) * (1.0 + np.arange(n) / (n - 1))
    return max(estimate, 2.0 * np.abs(lu.solve(alternating)).sum() / (3.0 * n))


def _solve_transposed(jacobian, rhs):
    """mu with jacobian^T mu = rhs by sparse LU, rows and columns scaled to unit norm first (degrees of
    freedom in m, multipliers in N s^2: unscaled, a chain's dG/dy has a condition number of 1e6). Where
    the LU's answer is not finite, huge or does not solve the system, dG/dy is singular (the coplanar corners of a box resting on a face share its load in a way the solve
    leaves open, which does not change the motion), the least-squares solution without its singular
    directions."""
    # A = jacobian^T, equilibrated: its rows are the jacobian's columns, and its CSC arrays are the jacobian's CSR ones.
    J = scipy.sparse.csr_matrix(jacobian)
    J.sort_indices()
    n = J.shape[0]
    entry_row = np.repeat(np.arange(n), np.diff(J.indptr))
    squares = J.data * J.data
    row_norm = np.sqrt(np.bincount(J.indices, squares, minlength=n))
    col_norm = np.sqrt(np.bincount(entry_row, squares, minlength=n))
    Dr = 1.0 / np.where(row_norm > 0.0, row_norm, 1.0)
    Dc = 1.0 / np.where(col_norm > 0.0, col_norm, 1.0)
    scaled = scipy.sparse.csc_matrix((J.data * Dr[J.indices] * Dc[entry_row], J.indices, J.indptr), shape=(n, n))
    b = Dr * rhs
    bound = max(np.abs(b).max(), 1e-300) / SINGULAR_CUTOFF
    try:
        lu = scipy.sparse.linalg.splu(scaled)
        z = lu.solve(b)
        if np.all(np.isfinite(z)) and np.abs(z).max() <= bound and \
                np.abs(scaled @ z - b).max() <= 1e-9 * max(np.abs(b).max(), 1e-300) and \
                _condition_estimate(scaled, lu) * SINGULAR_CUTOFF < scaled.shape[0]:
            return Dc * z
    except RuntimeError:
        pass
    if n > DENSE_SOLVE_LIMIT:
        return Dc * _regularized_least_squares(scaled, b, SPARSE_REGULARIZATION)
    return Dc * np.linalg.lstsq(scaled.toarray(), b, rcond=SINGULAR_CUTOFF)[0]


def _regularized_least_squares(matrix, rhs, epsilon):
    """z minimising |matrix z - rhs|^2 + epsilon^2 |z|^2 for a sparse square ``matrix`` (rows and columns
    of unit norm): directions of singular values well above epsilon solved, those well below dropped
    (a Tikhonov filter; ``SPARSE_REGULARIZATION`` sets epsilon far below the dense fallback's truncation),
    by one sparse LU of the augmented symmetric system
    [[epsilon I, A^T], [A, -epsilon I]] [z; t] = [0; rhs] (t = (A z - rhs) / epsilon), whose condition
    number is about 1 / epsilon, not the 1 / epsilon^2 of the normal equations. Where a large world's
    dG/dy is singular (the snake's wheels: redundant sticking friction rows), this is its adjoint."""
    n = matrix.shape[0]
    identity = scipy.sparse.identity(n, format="csc")
    augmented = scipy.sparse.bmat([[epsilon * identity, matrix.T], [matrix, -epsilon * identity]], format="csc")
    solution = scipy.sparse.linalg.splu(augmented).solve(np.concatenate([np.zeros(n), rhs]))
    if not np.all(np.isfinite(solution)):
        raise SimulationError(f"the adjoint of a step is singular in a world of {n} unknowns and its regularised "
                              "least-squares solve is not finite")
    return solution[:n]


def _in_plane(adj, axis):
    """The state adjoint ``adj`` without its out-of-plane components (a planar model's, ``axis`` its normal;
    -1: unchanged): positions and velocities along the normal, and a body's quaternion components and angular
    velocity about the in-plane axes.

    A planar model's forward step keeps every state in the plane exactly (its prediction projects the
    velocities), so no parameter and no in-plane state moves the out-of-plane components to first order,
    and their adjoint never flows back into the in-plane one or into a parameter's gradient: dropping it
    changes no gradient. Kept, it grew without bound backward in time in a vine's bodies' out-of-plane
    components (their tilt and their offset along the normal, 3 to 70 times per substep in the video fits)
    until it left float32's range and came back as NaN, inf times the zero sensitivities: 7 of 80
    rollout-loss evaluations of the video fits failed so (nineteenth session)."""
    if axis < 0:
        return adj
    adj = {name: array.copy() for name, array in adj.items()}
    others = [k for k in range(3) if k != axis]
    for name in ("particle_q", "particle_qd"):
        adj[name][:, axis] = 0.0
    adj["body_q"][:, axis] = 0.0
    adj["body_q"][:, [3 + k for k in others]] = 0.0
    adj["body_qd"][:, axis] = 0.0
    adj["body_qd"][:, [3 + k for k in others]] = 0.0
    return adj


def _accumulate(target, arrays, sign=1.0):
    for key, array in arrays.items():
        if array.grad is not None:
            target[key] = target.get(key, 0.0) + sign * array.grad.numpy().astype(np.float64)


def rollout_gradient(solver, records, adjoint_end, parameters=None, adjoint_after_step=None, *, per_step=False):
    """Gradient of a loss of the last state of a recorded rollout (``record_rollout``) by the adjoint method.

    Every substep is differentiated at its converged point by the implicit function theorem: with
    y = (u, lambda) and G(y; x~, x_n, p) = 0 (``kernels.adjoint``), the step's adjoint solves
    (dG/dy)^T mu = dL/dy and passes -mu^T dG/d(x~, x_n, p) on; the prediction's adjoint then gives
    the start state's. dG/dy is assembled from one tape backward per colour of its sparsity pattern
    (``_JacobianPattern``: a few dozen for a chain of bodies, whatever its length; all worlds at once)
    and solved per world (``_solve_transposed``); nothing depends on the Newton or linear iteration counts, and
    the memory is one step's arrays on top of the records.

    solver: the Solver that ran the rollout (its State's arrays are left as they were)
    records: the StepRecords (one per substep, each with its length ``h``)
    adjoint_end: {"particle_q", "particle_qd", "body_q", "body_qd"}: dL/d(last state), NumPy arrays
        shaped like the State's (body_q: 7 numbers per body, as Warp's transform); missing: zero
    parameters: {name: a Warp array of the model read by the step's kernels (made to require
        gradients), or the name of a Control field ("prismatic_rate", "joint_target", "pressure"): its
        gradient sums over the steps}
    adjoint_after_step(k): optional, dL/d(state after step k) of a loss over the whole rollout (a dict
        like adjoint_end, or None), added to adjoint_end's for the last step
    per_step: return each parameter's gradient per step, (steps, *its shape), the terms of that step's substeps
        summed, instead of the sum over all steps: dL/d(the value a Control field held during step k), for inputs
        that change from step to step (a gait's pressures; ``softsnake.robots.snake.gait_gradient``)
    Returns (dL/d(first state) as a dict like adjoint_end, {name: dL/d(parameter)} as NumPy arrays).
    """
    m = solver.model
    state, control = m.state(), m.control()
    # A Control field named by a string is the gradient's own Control array, which every step's
    # recorded values are copied into.
    parameters = {name: getattr(control, array) if isinstance(array, str) else array
                  for name, array in (parameters or {}).items()}
    untracked = [array for array in parameters.values() if not array.requires_grad]
    for array in parameters.values():
        array.requires_grad = True
    try:
        return _rollout_gradient(solver, records, adjoint_end, parameters, adjoint_after_step, state, control,
                                 per_step)
    finally:
        # The caller's arrays as they were: no gradient array left on them (a solver's recorded steps hold its
        # model's arrays as they were recorded, without one: softsnake.robots.vine.simulation.VineBatch.restart).
        for array in untracked:
            array.requires_grad = False


def _rollout_gradient(solver, records, adjoint_end, parameters, adjoint_after_step, state, control, per_step):
    """``rollout_gradient`` with its parameters' gradient arrays allocated."""
    m = solver.model
    shapes = {name: getattr(state, name).numpy().shape for name in STATE_ARRAYS}
    adj = {name: np.asarray(adjoint_end.get(name, np.zeros(shapes[name])), dtype=np.float64).reshape(shapes[name])
           for name in STATE_ARRAYS}
    adj = _in_plane(adj, m.planar_axis)
    grads, by_step = {}, {}  # the sums over all substeps; per_step: step -> {name: its substeps' terms}
    pattern = _JacobianPattern(m)
    equations = {}  # per substep length [s]
    for k in range(len(records) - 1, -1, -1):
        record = records[k]
        ends_its_step = k == len(records) - 1 or records[k + 1].step != record.step
        targets = (grads, by_step.setdefault(record.step, {})) if per_step else (grads,)
        extra = adjoint_after_step(record.step) if adjoint_after_step is not None and ends_its_step else None
        for name, values in (extra or {}).items():
            adj[name] = adj[name] + np.asarray(values, dtype=np.float64).reshape(shapes[name])
        adj = _in_plane(adj, m.planar_axis)
        eq = equations.get(record.h)
        if eq is None:
            eq = equations[record.h] = _StepEquations(solver, state, control, record.h, pattern)
        eq.load(record)
        n_dofs, u, predicted, start = eq.dofs, eq.u, eq.predicted, eq.start
        # Outputs: x = x~ (+) u, v = v~ + u / h.
        eq.outputs_back.backward({eq.outs[name]: adj[name] for name in STATE_ARRAYS
                                  if eq.outs[name].shape[0] == adj[name].shape[0]})
        u_bar = u.grad.numpy().astype(np.float64)
        pred_bar = {name: predicted[name].grad.numpy().astype(np.float64) for name in STATE_ARRAYS}
        eq.outputs_back.zero()
        u.grad.zero_()
        # The step's equations and their Jacobian: one backward per colour of the pattern.
        jacobian = eq.jacobian()
        y_bar = np.concatenate([u_bar[:n_dofs], np.zeros(m.row_count)])
        mu = np.zeros(pattern.size)
        for world, (unknowns, block) in enumerate(zip(eq.world_unknowns, eq.world_blocks(jacobian))):
            mu[unknowns] = _solve_transposed(block, y_bar[unknowns])
            if not (np.all(np.isfinite(y_bar[unknowns])) and np.all(np.isfinite(mu[unknowns]))):
                raise SimulationError(
                    f"the gradient blew up: the adjoint of world {world} is not finite at substep {k} (step "
                    f"{record.step}); it grew without bound backward in time from there")
        mu_dofs, mu_rows = _split(mu, n_dofs)
        g_back = eq.equations_back
        g_back.backward({eq.G1: mu_dofs, eq.G2: mu_rows})
        for name in ("particle_q", "body_q"):
            pred_bar[name] -= predicted[name].grad.numpy().astype(np.float64)
        start_bar = {name: -start[name].grad.numpy().astype(np.float64) if start[name].grad is not None
                     else np.zeros(shapes[name]) for name in STATE_ARRAYS}
        for target in targets:
            _accumulate(target, parameters, -1.0)
        g_back.zero()
        for array in parameters.values():
            array.grad.zero_()
        for name in STATE_ARRAYS:
            predicted[name].grad.zero_()
            start[name].grad.zero_()
        # The prediction.
        eq.predict_back.backward({predicted[name]: pred_bar[name] for name in STATE_ARRAYS})
        adj = {name: start_bar[name].reshape(shapes[name]) + start[name].grad.numpy().astype(np.float64).reshape(shapes[name])
               for name in STATE_ARRAYS}
        for target in targets:
            _accumulate(target, parameters, 1.0)
        eq.predict_back.zero()
        for array in parameters.values():
            array.grad.zero_()
    if per_step:
        steps = max(by_step, default=-1) + 1
        return adj, {name: np.stack([by_step.get(k, {}).get(name, np.zeros(array.shape)) for k in range(steps)])
                     for name, array in parameters.items()}
    return adj, grads
