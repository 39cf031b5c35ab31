"""Rotations and inertias on the host (float64 NumPy), shared by the builder and the robots.

Quaternions are (x, y, z, w), Warp's order; rotation matrices act on column vectors; inertia
tensors are about the centre of mass in the body frame [kg m^2].
"""

import math

import numpy as np


def quat_to_matrix(q):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_multiply(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def quat_inverse(q):
    return np.array([-q[0], -q[1], -q[2], q[3]])


def quat_from_axis_angle(axis, angle):
    """Quaternion (x, y, z, w) of a rotation by ``angle`` [rad] about ``axis``."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    s = math.sin(0.5 * angle)
    return np.array([a[0] * s, a[1] * s, a[2] * s, math.cos(0.5 * angle)])


def quat_between(u, v):
    """Shortest rotation taking unit vector u to unit vector v."""
    u = np.asarray(u, float) / np.linalg.norm(u)
    v = np.asarray(v, float) / np.linalg.norm(v)
    c = float(np.dot(u, v))
    if c < -1.0 + 1e-12:
        perp = np.cross(u, [1.0, 0.0, 0.0])
        if np.linalg.norm(perp) < 1e-6:
            perp = np.cross(u, [0.0, 1.0, 0.0])
        return quat_from_axis_angle(perp, math.pi)
    axis = np.cross(u, v)
    q = np.array([axis[0], axis[1], axis[2], 1.0 + c])
    return q / np.linalg.norm(q)


def perpendicular_pair(axis):
    """Two unit vectors completing ``axis`` to a right-handed orthonormal basis."""
    a = axis / np.linalg.norm(axis)
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = t - a * np.dot(t, a)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(a, e1)


def box_inertia(mass, half_extents):
    hx, hy, hz = half_extents
    return np.diag([(hy * hy + hz * hz), (hx * hx + hz * hz), (hx * hx + hy * hy)]) * (mass / 3.0)


def cylinder_inertia(mass, radius, half_height):
    """Solid cylinder about its centre, axis local z."""
    ixx = mass * (3.0 * radius * radius + 4.0 * half_height * half_height) / 12.0
    return np.diag([ixx, ixx, 0.5 * mass * radius * radius])


def capsule_volume(radius, half_height):
    """Volume [m^3] of a capsule: a cylinder of ``radius`` and length 2 ``half_height`` and two half-spheres."""
    return math.pi * radius * radius * (2.0 * half_height + 4.0 / 3.0 * radius)


def capsule_inertia(mass, radius, half_height):
    """Solid capsule of ``mass`` about its centre, axis local z [kg m^2]: the cylinder's inertia plus the two
    half-spheres', the mass shared by volume. A half-sphere of mass m_h has 2/5 m_h r^2 about any axis through its flat
    face's centre and its centroid 3 r / 8 from that face; moved by the parallel-axis theorem to the capsule's centre,
    a distance half_height + 3 r / 8 away, the two together (mass m_s, a whole sphere's) give
    m_s (2/5 r^2 + h^2 + 3 h r / 4) about a transverse axis and 2/5 m_s r^2 about z."""
    r, h = radius, half_height
    spheres_mass = mass * (4.0 / 3.0 * r) / (2.0 * h + 4.0 / 3.0 * r)
    ends = spheres_mass * np.diag([0.4 * r * r + h * h + 0.75 * h * r] * 2 + [0.4 * r * r])
    return cylinder_inertia(mass - spheres_mass, r, h) + ends
