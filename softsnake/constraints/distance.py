"""Distance rows between two particles: c = |x_i - x_j| - r s.

s = 1 for structural rows. For actuation rows (a pressure channel is set) s = eps(p) = 1 + p / Y
(seed 001, eqs. 3-4) with p the channel's pressure; an actuation row whose chamber is not
pressurised (p <= 0) is not driven at all, so the passive side of a bending link is free.
"""

import numpy as np
import warp as wp

from softsnake.kernels.entities import nonnegative, row_world_held, write_neutral_row, write_particle_block
from softsnake.errors import ModelError
from softsnake.validation import index_value, length_value, non_negative_value, positive_value

from .base import ConstraintType, Field


@wp.kernel
def eval_distance_rows(
    particle_q: wp.array(dtype=wp.vec3),
    distance_particles: wp.array(dtype=wp.vec2i),
    distance_rest_length: wp.array(dtype=float),
    distance_compliance: wp.array(dtype=float),
    distance_damping: wp.array(dtype=float),
    distance_pressure_channel: wp.array(dtype=int),
    distance_youngs_modulus: wp.array(dtype=float),
    distance_row: wp.array(dtype=int),
    pressure: wp.array(dtype=float),
    inv_h: float,
    inv_h2: float,
    row_world: wp.array(dtype=int),
    held: wp.array(dtype=int),
    J_offsets: wp.array(dtype=int),
    J_values: wp.array(dtype=float),
    row_c: wp.array(dtype=float),
    row_compliance: wp.array(dtype=float),
    row_damping: wp.array(dtype=float),
):
    tid = nonnegative(wp.tid())
    if row_world_held(row_world, held, distance_row[tid]):
        return  # a held world's rows stand as they are
    row = nonnegative(distance_row[tid])
    nz = nonnegative(J_offsets[row])
    ij = distance_particles[tid]
    d = particle_q[nonnegative(ij[0])] - particle_q[nonnegative(ij[1])]
    length = wp.length(d)

    scale = float(1.0)
    unpressurised = int(0)
    # channel is -1 for a structural row: tested before it indexes the pressures.
    channel = distance_pressure_channel[tid]
    if channel >= 0:
        p = pressure[nonnegative(channel)]
        if p <= 0.0:
            unpressurised = 1
        else:
            scale = 1.0 + p / distance_youngs_modulus[tid]

    # A branch, not an early return: Warp's adjoint ran the code after a return inside a branch.
    if unpressurised != 0:
        write_particle_block(J_values, nz, wp.vec3(0.0))
        write_particle_block(J_values, nz + 3, wp.vec3(0.0))
        write_neutral_row(row, row_c, row_compliance, row_damping)
    else:
        n = wp.vec3(0.0)
        if length > 0.0:
            n = d / length
        write_particle_block(J_values, nz, n)
        write_particle_block(J_values, nz + 3, -n)
        row_c[row] = length - distance_rest_length[tid] * scale
        row_compliance[row] = distance_compliance[tid] * inv_h2
        row_damping[row] = distance_damping[tid] * inv_h


class Distance(ConstraintType):
    name = "distance"
    tries_carried_multipliers = True
    label = "distance"
    fields = (
        Field("particles", wp.vec2i, "", "the two particles (i, j)", index="particle"),
        Field("rest_length", float, "m", "rest length r"),
        Field("compliance", float, "m/N", "inverse stiffness (0: rigid)"),
        Field("damping", float, "s", "stiffness-proportional damping time"),
        Field("pressure_channel", int, "", "pressure channel of an actuation row, -1 for a structural row",
              index="pressure_channel", optional=True),
        Field("youngs_modulus", float, "Pa", "Young's modulus Y of an actuation row's material (1 for structural rows)"),
    )

    def rows_per_item(self, planar):
        return 1

    def item_entities(self, columns, particle_count):
        return np.asarray(columns["particles"], dtype=np.int64).reshape(-1, 2)

    def row_command(self, solver, state, control, h):
        m = solver.model
        return solver.record(eval_distance_rows, m.distance_count, [
            state.particle_q, m.distance_particles, m.distance_rest_length, m.distance_compliance, m.distance_damping,
            m.distance_pressure_channel, m.distance_youngs_modulus, m.distance_row, control.pressure, 1.0 / h,
            1.0 / (h * h), *solver.row_skip_inputs(), *solver.row_outputs()])


DISTANCE = Distance()


class DistanceBuilder:
    """``ModelBuilder.add_distance``."""

    @property
    def distance_count(self):
        return self.item_count(DISTANCE)

    def add_distance(self, i, j, rest_length=None, *, compliance=0.0, damping=0.0, pressure_channel=-1, youngs_modulus=None):
        """Distance row c = |x_i - x_j| - r s between two particles; returns its index.

        Args:
            rest_length: r [m]; default: the current distance
            compliance: inverse stiffness [m/N] (0: rigid)
            damping: stiffness-proportional damping time [s]
            pressure_channel: for actuation rows, the channel whose pressure p sets
                s = 1 + p / Y (seed 001, eq. 4); the row is inactive while p <= 0
            youngs_modulus: Y [Pa] of the actuated material (required with a pressure channel)
        """
        what = f"distance {self.distance_count}"
        i = self.check_particle(i, what)
        j = self.check_particle(j, what)
        if i == j:
            raise ModelError(f"{what} connects particle {i} to itself")
        if rest_length is None:
            rest_length = float(np.linalg.norm(self.particle_q[i] - self.particle_q[j]))
        rest_length = length_value(rest_length, f"{what} rest_length")
        channel = index_value(pressure_channel, f"{what} pressure_channel")
        if channel >= 0:
            if channel >= self.pressure_channel_count:
                raise ModelError(f"{what}: pressure channel {channel} out of range [0, {self.pressure_channel_count})")
            if youngs_modulus is None:
                raise ModelError(f"{what}: an actuation row needs youngs_modulus")
            youngs_modulus = positive_value(youngs_modulus, f"{what} youngs_modulus")
        return self.append_item(DISTANCE, {
            "particles": (i, j), "rest_length": rest_length,
            "compliance": non_negative_value(compliance, f"{what} compliance"),
            "damping": non_negative_value(damping, f"{what} damping"), "pressure_channel": max(channel, -1),
            "youngs_modulus": youngs_modulus if channel >= 0 else 1.0})
