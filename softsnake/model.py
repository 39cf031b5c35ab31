"""The finalized simulation model, its state and its control inputs.

All arrays are flat across worlds: every particle, body, constraint row and contact slot
carries a world index, and the rows of one world are contiguous (``row_world_start``), so each
world's linear system is one diagonal block of the batch's system.

Body velocities are ``wp.spatial_vector(linear, angular)`` in the world frame, about the
centre of mass; body poses are ``wp.transform(position, rotation)`` with quaternions in Warp's
(x, y, z, w) order; body forces ``body_f`` are ``wp.spatial_vector(force, torque)``.
"""

import numpy as np
import warp as wp

from .constraints import field_docs
from .errors import ConfigError
from .spatial import quat_to_matrix


class State:
    """Positions, velocities and external forces of every particle and body, all worlds."""

    def __init__(self, model):
        self.particle_q: wp.array = wp.clone(model.particle_q)
        """Particle positions [m], vec3, shape (particle_count,)."""
        self.particle_qd: wp.array = wp.clone(model.particle_qd)
        """Particle velocities [m/s], vec3, shape (particle_count,)."""
        self.particle_f: wp.array = wp.zeros_like(model.particle_qd)
        """External particle forces [N], vec3, shape (particle_count,); act during the next step."""
        self.body_q: wp.array = wp.clone(model.body_q)
        """Body poses (centre of mass [m], rotation), transform, shape (body_count,)."""
        self.particle_q_low: wp.array = wp.zeros_like(model.particle_qd)
        """What float32 rounding dropped of each particle position [m], vec3, shape (particle_count,): the position is
        particle_q + particle_q_low, |particle_q_low| at most half particle_q's spacing. Written only by substeps that
        compensate (``SolverSettings.compensated_positions``: "auto" from substeps of 1/600 s on), kept as it is by
        the others; a position assigned from outside keeps a stale remainder of at most that size."""
        self.body_q_low: wp.array = wp.zeros(model.body_count, dtype=wp.spatial_vector, device=model.device)
        """What float32 rounding dropped of each body's pose, spatial_vector, shape (body_count,): of its centre of
        mass [m] (top, as ``particle_q_low``), and of its rotation as a rotation vector delta [rad] (bottom, world
        frame: the rotation is exp(delta) q / |q| of the float32 quaternion q, |delta| about q's spacing, 6e-8)."""
        self.body_qd: wp.array = wp.clone(model.body_qd)
        """Body velocities (linear [m/s], angular [rad/s]), world frame, spatial_vector, shape (body_count,)."""
        self.particle_qd_low: wp.array = wp.zeros_like(model.particle_qd)
        """What float32 rounding dropped of each particle velocity [m/s], vec3, shape (particle_count,), as
        ``particle_q_low`` for the positions: a substep's velocity change is small beside the velocity at small steps
        (mu g h = 8e-4 m/s beside a slide's 2 m/s at 1/3840 s), and float32 rounds the same change of the same
        velocity the same way every substep, a bias of up to half the velocity's spacing each time. Written only by
        substeps that compensate; a velocity assigned from outside keeps a stale remainder of at most that size."""
        self.body_qd_low: wp.array = wp.zeros(model.body_count, dtype=wp.spatial_vector, device=model.device)
        """What float32 rounding dropped of each body's velocity, spatial_vector, shape (body_count,): linear [m/s]
        (top, as ``particle_qd_low``) and angular [rad/s] (bottom): a body spinning at 10 rad/s (spacing 9.5e-7
        rad/s) under a torque of 0.01 rad/s^2 gains 1e-6 rad/s per substep at 1/9600 s, which float32 rounds the
        same way every substep."""
        self.body_f: wp.array = wp.zeros_like(model.body_qd)
        """External body wrenches (force [N], torque [N m]), world frame, spatial_vector, shape (body_count,)."""
        self.multipliers: wp.array = wp.zeros(max(model.row_count, 1), dtype=float, device=model.device)
        """Constraint multipliers of the last substep [N s^2] (a row's force is lambda / h^2), float,
        shape (row_count,): the solver's warm start, carried with the state so that a state restarts
        the same way whichever solver steps it (``Solver.reset`` clears chosen worlds)."""
        self.multiplier_step: float = 0.0
        """Substep length [s] the multipliers belong to; 0 when there are none (the next substep starts cold)."""
        self.multiplier_pressure: wp.array = wp.zeros(max(model.pressure_channel_count, 1), dtype=float,
                                                      device=model.device)
        """Chamber pressure of every pressure channel the multipliers were computed under [Pa], float, shape
        (pressure_channel_count,): the elastic warm start keeps carried soft-body forces more cautiously in a
        world whose pressures changed since (``Solver``'s ``elastic_warm_start``), so a state carries them too."""

    CARRIED = ("particle_q", "particle_qd", "body_q", "body_qd", "multipliers", "multiplier_pressure", "particle_q_low",
               "body_q_low", "particle_qd_low", "body_qd_low")
    """The arrays a step carries into the next (``assign`` copies them, with ``multiplier_step``)."""
    REMAINDERS = ("particle_q_low", "body_q_low", "particle_qd_low", "body_qd_low")
    """The arrays that a saved state may lack (``assign_numpy`` sets them to zero)."""
    ARRAYS = CARRIED + ("particle_f", "body_f")
    """The names of a state's arrays: everything a step reads from the state, with ``multiplier_step``."""

    def assign(self, other):
        """Copy positions, velocities and carried multipliers (not forces) from another state of the same model."""
        for name in self.CARRIED:
            wp.copy(getattr(self, name), getattr(other, name))
        self.multiplier_step = other.multiplier_step

    def numpy(self):
        """Every array of the state (``ARRAYS``) as a NumPy copy, and ``multiplier_step`` [s]: what a run needs to
        go on later from here, bit for bit (``assign_numpy``; ``Solver.step`` keeps nothing else between steps
        that changes a trajectory)."""
        arrays = {name: getattr(self, name).numpy().copy() for name in self.ARRAYS}
        arrays["multiplier_step"] = np.float64(self.multiplier_step)
        return arrays

    def assign_numpy(self, arrays):
        """Set the whole state from ``numpy()``'s dictionary (a state of the same model); ConfigError naming the
        first array that is missing or has another shape or type, before anything is set."""
        for name in self.ARRAYS:
            target = getattr(self, name)
            value = arrays.get(name)
            expected = target.numpy()
            if value is None and name in self.REMAINDERS:
                continue  # a state saved before remainders were kept: its positions are the float32 values
            if value is None:
                raise ConfigError(f"state array {name} is missing")
            value = self._current_layout(name, np.asarray(value))
            if value.shape != expected.shape or value.dtype != expected.dtype:
                raise ConfigError(f"state array {name} has shape {value.shape} and type {value.dtype}, this model's "
                                  f"{expected.shape} and {expected.dtype}")
        if "multiplier_step" not in arrays:
            raise ConfigError("state value multiplier_step is missing")
        for name in self.ARRAYS:
            if name in arrays:
                getattr(self, name).assign(self._current_layout(name, np.asarray(arrays[name])))
            else:
                getattr(self, name).zero_()
        self.multiplier_step = float(arrays["multiplier_step"])

    @staticmethod
    def _current_layout(name, value):
        """A saved array in this version's layout: ``body_q_low`` and ``body_qd_low`` saved with the linear remainders
        alone (body_count, 3), before rotations and angular velocities had one, get zero angular remainders."""
        if name in ("body_q_low", "body_qd_low") and value.ndim == 2 and value.shape[1] == 3:
            return np.concatenate([value, np.zeros_like(value)], axis=1)
        return value


class Control:
    """Actuation inputs, per world, flat."""

    ARRAYS = (("pressure", "pressure_channel"), ("joint_target", "spring"), ("prismatic_rate", "prismatic"))
    """Every input array: (its name, the model's item kind it holds one value per: ``<kind>_count``, ``<kind>_world``).
    The solver's checks, its recordings and the gradients read the Control through this list."""

    def __init__(self, model):
        self.pressure: wp.array = wp.zeros(max(model.pressure_channel_count, 1), dtype=float, device=model.device)
        """Chamber pressure of every pressure channel [Pa], float, shape (pressure_channel_count,)
        (``ModelBuilder.add_pressure_channel``)."""
        self.joint_target: wp.array = wp.clone(model.spring_target)
        """Target angle of every angular spring, relative to its rest pose [rad], float, shape (spring_count,)."""
        self.prismatic_rate: wp.array = wp.clone(model.prismatic_rate)
        """Commanded extension rate of every prismatic joint [m/s], float, shape (prismatic_count,)
        (driven joints only)."""


class Model:
    """Immutable description of everything simulated; made by ``ModelBuilder.finalize``.

    Besides the fields declared in ``__init__``, every constraint type adds its arrays, named
    ``<type>_<field>`` as in ``softsnake.constraints`` (each type's ``fields``), its count
    ``<type>_count``, ``<type>_row`` (each item's first row) and, for the types a builder holds,
    ``<type>_world_start`` (host, the first item of each world, then the count) and ``<type>_world``
    (device, the world of each item; the solver's check of non-finite inputs names it):

    """

    def __init__(self, device):
        self.device = device
        """The Warp device every array lives on."""

        # Sizes.
        self.world_count: int = 0
        """Number of independent worlds."""
        self.particle_count: int = 0
        """Number of particles, all worlds."""
        self.body_count: int = 0
        """Number of rigid bodies, all worlds."""
        self.shape_count: int = 0
        """Number of collision shapes on bodies."""
        self.obstacle_count: int = 0
        """Number of entries of the obstacle arrays: every world's own static obstacles and its copy of each
        obstacle shared by all worlds (``world_obstacles``), so a shared obstacle counts once per world."""
        self.pressure_channel_count: int = 0
        """Number of pressure channels (``Control.pressure`` entries)."""
        self.row_count: int = 0
        """Number of scalar constraint rows, all worlds."""
        self.gravity: wp.vec3 = None
        """Gravitational acceleration [m/s^2], the same in every world. Assign a new ``wp.vec3`` between
        steps to change it (a tilting floor is gravity turning in the floor's frame)."""
        self.planar_axis: int = -1
        """2 for a planar model (motion in z = const), -1 otherwise."""
        self.world_offset: np.ndarray = None
        """Where the scene places each world's frame [m], float64, shape (world_count, 3), on the host
        (``ModelBuilder.add_world``'s offset; zeros for a model built without worlds). Every world is
        simulated in its own frame, so positions in states, the model and its obstacle arrays are
        world-local; ``scene_particle_q`` and ``scene_body_q`` add the offset."""

        # Particles.
        self.particle_q: wp.array = None
        """Initial particle positions [m], vec3, shape (particle_count,)."""
        self.particle_qd: wp.array = None
        """Initial particle velocities [m/s], vec3, shape (particle_count,)."""
        self.particle_inv_mass: wp.array = None
        """Inverse particle masses [1/kg] (0: kinematic), float, shape (particle_count,)."""
        self.particle_radius: wp.array = None
        """Particle contact radii [m], float, shape (particle_count,)."""
        self.particle_world: wp.array = None
        """World of each particle, int, shape (particle_count,)."""

        # Bodies.
        self.body_q: wp.array = None
        """Initial body poses (centre of mass [m], rotation), transform, shape (body_count,)."""
        self.body_qd: wp.array = None
        """Initial body velocities (linear [m/s], angular [rad/s]), spatial_vector, shape (body_count,)."""
        self.body_inv_mass: wp.array = None
        """Inverse body masses [1/kg] (0: kinematic), float, shape (body_count,)."""
        self.body_inertia: wp.array = None
        """Body inertias about the centre of mass, body frame [kg m^2], mat33, shape (body_count,)."""
        self.body_inv_inertia: wp.array = None
        """Inverse body inertias, body frame [1/(kg m^2)] (0: kinematic), mat33, shape (body_count,)."""
        self.body_world: wp.array = None
        """World of each body, int, shape (body_count,)."""
        self.body_mass_numpy: np.ndarray = None
        """Body masses [kg], float64, on the host, shape (body_count,)."""

        # Obstacles: world after world, each world's own and its copies of the shared ones (obstacle_count).
        self.obstacle_kind: wp.array = None
        """``ObstacleKind`` of each static obstacle, int, shape (obstacle_count,)."""
        self.obstacle_transform: wp.array = None
        """Obstacle poses (centre [m], rotation) in their world's frame, transform, shape (obstacle_count,)."""
        self.obstacle_size: wp.array = None
        """Box half extents, cylinder (radius, half height, 0), plane 0 [m], vec3, shape (obstacle_count,)."""
        self.obstacle_world: wp.array = None
        """World that sees each obstacle, int, shape (obstacle_count,)."""

        # Worlds: index ranges (host, int64, shape (world_count + 1,)) and their device copies.
        self.particle_world_start: np.ndarray = None
        """First particle of each world, then particle_count."""
        self.body_world_start: np.ndarray = None
        """First body of each world, then body_count."""
        self.row_world_start: np.ndarray = None
        """First row of each world, then row_count."""
        self.pressure_channel_world_start: np.ndarray = None
        """First pressure channel of each world, then pressure_channel_count."""
        self.particle_world_start_device: wp.array = None
        """``particle_world_start`` on the device, int."""
        self.body_world_start_device: wp.array = None
        """``body_world_start`` on the device, int."""
        self.row_world_start_device: wp.array = None
        """``row_world_start`` on the device, int."""
        self.pressure_channel_world_start_device: wp.array = None
        """``pressure_channel_world_start`` on the device, int."""
        self.pressure_channel_world: wp.array = None
        """World of each pressure channel, int, shape (pressure_channel_count,)."""

        # Rows and sparse topology (see softsnake.layout).
        self.row_world: wp.array = None
        """World of each row, int, shape (row_count,)."""
        self.row_block_start: wp.array = None
        """First row of the compliance block of each row (the row itself if uncoupled), int, shape (row_count,)."""
        self.nnz: int = 0
        """Nonzeros of J."""
        self.J_offsets: wp.array = None
        """CSR row offsets of J, int, shape (row_count + 1,)."""
        self.J_columns: wp.array = None
        """CSR column of each nonzero of J (degree of freedom: 3 per particle, then 6 per body), int, shape (nnz,)."""
        self.solve_nnz: int = 0
        """Nonzeros of the solver's J (planar models: in-plane columns only)."""
        self.solve_compact: bool = False
        """Whether the solver's J leaves out columns of J (planar models)."""
        self.solve_offsets: wp.array = None
        """CSR row offsets of the solver's J, int, shape (row_count + 1,) (``J_offsets`` itself unless compact)."""
        self.solve_columns: wp.array = None
        """Columns of the solver's J, int, shape (solve_nnz,) (``J_columns`` itself unless compact)."""
        self.solve_source: wp.array = None
        """Index into J's values of each entry of the solver's J, int, shape (solve_nnz,); empty unless compact."""
        self.JT_offsets: wp.array = None
        """CSR offsets of J^T (one row per degree of freedom), int, shape (dofs + 1,)."""
        self.JT_columns: wp.array = None
        """Constraint row of each entry of J^T, int, shape (solve_nnz,)."""
        self.JT_source: wp.array = None
        """Index into J's values of each entry of J^T, int, shape (solve_nnz,)."""
        self.chunk_count: int = 0
        """Number of reduction chunks (fixed-size pieces of a world's rows)."""
        self.chunk_start: wp.array = None
        """First row of each reduction chunk, int, shape (chunk_count,)."""
        self.chunk_end: wp.array = None
        """One past the last row of each reduction chunk, int, shape (chunk_count,)."""
        self.world_chunk_start: wp.array = None
        """First chunk of each world, then chunk_count, int, shape (world_count + 1,)."""

    def state(self):
        """A new State holding the model's initial positions and velocities."""
        return State(self)

    def control(self):
        """A new Control with zero pressures and the rest joint targets."""
        return Control(self)

    @property
    def largest_world_rows(self):
        """Rows of the model's largest world [-] (0 without worlds): what sizes a per-world solve."""
        return int(np.max(np.diff(self.row_world_start))) if self.world_count else 0

    def world_slice(self, kind, world):
        """Index range of ``kind`` ("particle", "body", "row", "pressure_channel", or a constraint type's name such
        as "distance", "spring") in one world."""
        starts = getattr(self, f"{kind}_world_start")
        return slice(int(starts[world]), int(starts[world + 1]))

    def scene_particle_q(self, state):
        """Particle positions of ``state`` in scene coordinates [m], float64, shape (particle_count, 3): each
        world's local positions plus its ``world_offset``, added in float64."""
        q = state.particle_q.numpy().astype(np.float64).reshape(-1, 3)
        return q + self._offset_per_item("particle")

    def scene_body_q(self, state):
        """Body poses of ``state`` in scene coordinates, float64, shape (body_count, 7): (centre of mass [m],
        rotation quaternion (x, y, z, w)), each world's local centre of mass plus its ``world_offset``
        (worlds are not rotated, so rotations are as simulated)."""
        q = state.body_q.numpy().astype(np.float64).reshape(-1, 7)
        q[:, :3] += self._offset_per_item("body")
        return q

    def _offset_per_item(self, kind):
        """``world_offset`` of the world of every item of ``kind`` ("particle", "body") [m], (count, 3)."""
        return self.world_offset[self._world_per_item(kind)]

    def kinetic_energy(self, state):
        """Kinetic energy of every world in ``state`` [J], float64, shape (world_count,), on the host: 1/2 m |v|^2
        of its moving particles and bodies, and 1/2 omega^T R I R^T omega of its bodies' rotation (omega in
        the world frame, I about the centre of mass in the body frame); kinematic items count nothing."""
        energy = np.zeros(self.world_count)
        if self.particle_count:
            v = state.particle_qd.numpy().astype(np.float64)
            np.add.at(energy, self._world_per_item("particle"), 0.5 * self.particle_mass_numpy() * (v * v).sum(axis=1))
        if self.body_count:
            q, qd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
            moving = self.body_inv_mass.numpy() > 0.0
            rotation = quat_to_matrix(q[:, 3:].T)  # (3, 3, bodies)
            local = np.einsum("jib,bj->bi", rotation, qd[:, 3:])  # R^T omega
            body = self.body_mass_numpy * (qd[:, :3] ** 2).sum(axis=1)
            body += np.einsum("bi,bij,bj->b", local, self.body_inertia.numpy().astype(np.float64), local)
            np.add.at(energy, self._world_per_item("body"), np.where(moving, 0.5 * body, 0.0))
        return energy

    def _world_per_item(self, kind):
        """The world of every item of ``kind`` ("particle", "body"), int, (count,)."""
        return np.repeat(np.arange(self.world_count), np.diff(getattr(self, f"{kind}_world_start")))

    def particle_mass_numpy(self):
        """Particle masses [kg] (0 for kinematic particles)."""
        w = self.particle_inv_mass.numpy()
        return np.where(w > 0, 1.0 / np.where(w > 0, w, 1.0), 0.0)


Model.__doc__ += "\n".join(f"    - ``{line.split(':', 1)[0]}``:{line.split(':', 1)[1]}" for line in field_docs()) + "\n"
