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


class State:
    """Positions, velocities and external forces of every particle and body, all worlds.

    Attributes:
        particle_q: particle positions [m], ``wp.array(dtype=wp.vec3)``
        particle_qd: particle velocities [m/s]
        particle_f: external particle forces [N] (applied during the next step)
        body_q: body poses (centre-of-mass position [m], rotation)
        body_qd: body velocities (linear [m/s], angular [rad/s]), world frame
        body_f: external body wrenches (force [N], torque [N m]), world frame
    """

    def __init__(self, model):
        self.particle_q = wp.clone(model.particle_q)
        self.particle_qd = wp.clone(model.particle_qd)
        self.particle_f = wp.zeros_like(model.particle_qd)
        self.body_q = wp.clone(model.body_q)
        self.body_qd = wp.clone(model.body_qd)
        self.body_f = wp.zeros_like(model.body_qd)

    def assign(self, other):
        """Copy positions and velocities (not forces) from another state of the same model."""
        for name in ("particle_q", "particle_qd", "body_q", "body_qd"):
            wp.copy(getattr(self, name), getattr(other, name))


class Control:
    """Actuation inputs, per world, flat.

    Attributes:
        pressure: chamber pressure of every pressure channel [Pa] (``ModelBuilder.add_pressure_channel``)
        joint_target: target angle of every angular spring [rad], relative to its rest pose
        prismatic_rate: commanded extension rate of every prismatic joint [m/s] (driven joints only)
    """

    def __init__(self, model):
        self.pressure = wp.zeros(max(model.pressure_channel_count, 1), dtype=float, device=model.device)
        self.joint_target = wp.clone(model.spring_target)
        self.prismatic_rate = wp.clone(model.prismatic_rate)


class Model:
    """Immutable description of everything simulated; made by ``ModelBuilder.finalize``.

    Counts: ``world_count``, ``particle_count``, ``body_count``, ``distance_count``,
    ``tet_count``, ``attachment_count``, ``hinge_count``, ``prismatic_count``, ``spring_count``, ``obstacle_count``,
    ``contact_slot_count``, ``row_count``, ``pressure_channel_count``. Host-side copies of the
    index maps (``*_world_start`` numpy arrays) let users slice per-world results.
    """

    def __init__(self, device):
        self.device = device

    def state(self):
        """A new State holding the model's initial positions and velocities."""
        return State(self)

    def control(self):
        """A new Control with zero pressures and the rest joint targets."""
        return Control(self)

    def world_slice(self, kind, world):
        """Index range of ``kind`` in {"particle", "body", "row", "pressure_channel", "spring", "prismatic"} for one world."""
        starts = getattr(self, f"{kind}_world_start")
        return slice(int(starts[world]), int(starts[world + 1]))

    def particle_mass_numpy(self):
        """Particle masses [kg] (0 for kinematic particles)."""
        w = self.particle_inv_mass.numpy()
        return np.where(w > 0, 1.0 / np.where(w > 0, w, 1.0), 0.0)
