"""Kinematics and obstacle interaction of an actuated vine robot (seed 004, Selvaggio et al.,
Sect. II), in numpy: what the planner (``planner.py``) builds its plans from.

Kinematics (Sect. II-A, eqs. 1-2)
    A constant-curvature (CCD) arc of curvature ``kappa`` [1/m] and length ``l`` [m] ends at
    ``x = 2 sin(theta/2) cos(theta/2) / kappa``, ``y = 2 sin(theta/2)^2 / kappa`` with heading
    ``theta = kappa l``: the chord of length ``l sinc(theta/2)`` leaves at half the tip angle,
    which is eq. (1)'s ``R(theta/2) T(chord) R(theta/2)``. Eq. (1) as printed puts the chord on
    the y axis and turns by ``-theta/2``; we use the frame in which the paper's inverse kinematics
    eq. (2) holds and its experiment coordinates are given: the arc leaves along +x and positive
    curvature turns it counterclockwise. The inverse kinematics is eq. (2) with ``n = 0`` (the
    shortest arc), written as ``l = rho / sinc(phi)``, ``kappa = 2 sin(phi) / rho`` with ``rho``
    the chord length and ``phi = atan2(y, x)``, which is exact and finite at ``y = 0`` (straight
    robot), where eq. (2) divides by zero. Arcs with ``n > 0`` turn by more than 2 pi and cross
    themselves, so they are never used.

Obstacle interaction (Sect. II-B, eqs. 3-4) and the assumptions made where the paper is vague (those
of the plans' feasibility are in ``planner.py``)
    * Obstacles are points: the contact is at the obstacle's centre and on the robot's mid-line
      (the paper assumes ``r_o << r`` and neglects the body radius). Circle obstacles are the
      interaction candidates; rectangles and walls only forbid space (collision check).
    * The part of the robot between its base (or the previous contact) and the obstacle is a
      passive, unactuated cantilever, straight when unloaded and clamped with the heading the
      robot has there. Eqs. (3)-(4) hold for a straight beam, and seed 004 assumes the free part
      beyond the contact can be actuated on its own. The contact abscissa ``a`` is the obstacle's
      projection on that straight line and ``d`` its signed lateral offset (positive to the left).
    * Critical deflection ``t_c = m_c a^2 / (3 EI)``: the deflection at ``a`` under the critical
      force ``f_c = m_c / a`` (eq. 3 at ``s = a``). If ``|d| <= t_c`` the beam only bends, with
      ``f = 3 EI d / a^3`` and the section rotates by ``theta(a) = 3 d / (2 a)``. Otherwise it
      bends under ``f_c`` (rotation ``m_c a / (2 EI)``) and wrinkles at its base by
      ``phi = arctan((|d| - t_c) / a)``, both with the sign of ``d``. In the small-displacement
      frame of eqs. (3)-(4) the wrinkle adds ``s tan(phi)`` to the deflection, so the deformed
      section reaches the obstacle exactly; the robot continues from the obstacle with heading
      ``start + theta(a) + phi``.
    * Length of a passive section. Eqs. (3)-(4) keep ``x = s``, so the deformed section
      ``(s, w(s))`` is longer than ``a``; an inextensible robot spends the length of that shape,
      ``integral_0^a sqrt(1 + w'(s)^2) ds`` (never shorter than the chord to the obstacle), and
      this length is what the limits and totals use. Seed 004 calls ``a`` the section length,
      which is the same to first order in ``d / a`` but not for the large wrinkle angles of the
      navigation scene (0.21 m against 0.78 m for the second section of O1 > O2).
    * Wrapping direction (Fig. 6). The robot goes counterclockwise around obstacle j when the
      curvature needed to reach the next point (next obstacle or target) from the section start
      exceeds the one needed to reach obstacle j, clockwise when it is smaller. A contact can
      only push, so a counterclockwise wrap (obstacle on the robot's left) needs the obstacle to
      push the section to the right (``d < 0``) and a clockwise wrap needs ``d > 0``. A plan
      whose wrap direction contradicts the side of the obstacle is infeasible (the obstacle
      would have to pull); an obstacle on the straight line (``d = 0``) suits either.
"""

import math
from dataclasses import dataclass

import numpy as np


def forward_kinematics(curvature, length):
    """Tip pose of a constant-curvature arc in its base frame (seed 004 eq. 1).

    curvature: arc curvature kappa [1/m], positive turns counterclockwise (arrays broadcast)
    length: arc length l [m]
    Returns (x [m], y [m], heading [rad]) of the tip; the arc leaves the origin along +x.
    """
    curvature = np.asarray(curvature, dtype=float)
    length = np.asarray(length, dtype=float)
    heading = curvature * length
    chord = length * np.sinc(heading / (2.0 * np.pi))
    return chord * np.cos(0.5 * heading), chord * np.sin(0.5 * heading), heading


def inverse_kinematics(x, y):
    """Shortest constant-curvature arc from the origin (heading +x) to (x, y) (seed 004 eq. 2, n = 0).

    x, y: tip position in the base frame [m] (arrays broadcast)
    Returns (curvature [1/m], length [m]). The origin gives (0, 0); points straight behind the
    base (y = 0, x < 0) need an infinitely long arc and give length inf.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    chord = np.hypot(x, y)
    half_angle = np.arctan2(y, x)
    with np.errstate(divide="ignore", invalid="ignore"):
        length = chord / np.sinc(half_angle / np.pi)
        curvature = np.where(chord > 0.0, 2.0 * np.sin(half_angle) / chord, 0.0)
    return curvature, np.where(chord > 0.0, length, 0.0)


@dataclass(frozen=True)
class Pose:
    """A planar pose.

    x, y: position [m]
    heading: direction of the robot's tangent from the world x axis [rad]
    """

    x: float
    y: float
    heading: float

    def to_local(self, x, y):
        """World points (x, y) [m] in this pose's frame (x along the heading) [m]."""
        dx, dy = np.asarray(x, dtype=float) - self.x, np.asarray(y, dtype=float) - self.y
        cos, sin = math.cos(self.heading), math.sin(self.heading)
        return cos * dx + sin * dy, -sin * dx + cos * dy

    def to_world(self, x, y):
        """Points (x, y) [m] of this pose's frame in the world frame [m]."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        cos, sin = math.cos(self.heading), math.sin(self.heading)
        return self.x + cos * x - sin * y, self.y + sin * x + cos * y


def cantilever_deflection(force, load_abscissa, abscissa, *, flexural_rigidity):
    """Small-displacement cantilever under a point load (seed 004 eqs. 3-4).

    force: load f normal to the beam, positive along +y of the beam frame [N]
    load_abscissa: where the load acts, a > 0 [m]
    abscissa: where to evaluate, s >= 0 [m] (arrays broadcast)
    flexural_rigidity: EI [N m^2]
    Returns (deflection w(s) [m], rotation theta(s) [rad]).
    """
    force = np.asarray(force, dtype=float)
    a = np.asarray(load_abscissa, dtype=float)
    s = np.asarray(abscissa, dtype=float)
    inside = s <= a
    deflection = np.where(inside, force * s**2 * (3.0 * a - s), force * a**2 * (3.0 * s - a))
    deflection = deflection / (6.0 * flexural_rigidity)
    rotation = np.where(inside, force * s * (2.0 * a - s), force * a**2) / (2.0 * flexural_rigidity)
    return deflection, rotation


@dataclass(frozen=True)
class Deformation:
    """How a passive section deforms to pass through a contact (arrays or scalars).

    force: contact force normal to the undeformed section, signed like the deflection [N]
    base_moment: moment about the section's base, signed like the deflection [N m]
    critical_deflection: t_c, the deflection the critical moment produces at the contact [m]
    bend_angle: rotation of the section at the contact from bending [rad]
    wrinkle_angle: rotation of the whole section about its base from wrinkling [rad]
    """

    force: np.ndarray
    base_moment: np.ndarray
    critical_deflection: np.ndarray
    bend_angle: np.ndarray
    wrinkle_angle: np.ndarray


def bend_or_wrinkle(contact_abscissa, deflection, *, flexural_rigidity, critical_moment):
    """Bending and wrinkling of a straight cantilever forced through a lateral offset (Sect. II-B).

    contact_abscissa: a, distance of the contact from the section base along the section, > 0 [m]
    deflection: d, lateral offset of the contact from the undeformed section, positive to the
        left [m] (arrays broadcast)
    flexural_rigidity: EI [N m^2]
    critical_moment: m_c, the base moment at which the section wrinkles [N m]
    Returns a ``Deformation``: if ``|d| <= t_c = m_c a^2 / (3 EI)`` the section only bends
    (``f = 3 EI d / a^3``, base moment ``f a < m_c``, rotation ``3 d / (2 a)``); otherwise the
    force stays at ``m_c / a``, the base moment at ``m_c`` and the section also wrinkles at its
    base by ``arctan((|d| - t_c) / a)``.
    """
    a = np.asarray(contact_abscissa, dtype=float)
    d = np.asarray(deflection, dtype=float)
    sign = np.sign(d)
    critical = critical_moment * a**2 / (3.0 * flexural_rigidity)
    wrinkles = np.abs(d) > critical
    force = np.where(wrinkles, sign * critical_moment / a, 3.0 * flexural_rigidity * d / a**3)
    _, bend_angle = cantilever_deflection(force, a, a, flexural_rigidity=flexural_rigidity)
    wrinkle_angle = np.where(wrinkles, sign * np.arctan((np.abs(d) - critical) / a), 0.0)
    return Deformation(force=force, base_moment=force * a, critical_deflection=critical, bend_angle=bend_angle,
                       wrinkle_angle=wrinkle_angle)


@dataclass(frozen=True)
class Interaction:
    """A passive section leaning on one obstacle.

    start: pose of the section's base (robot base or previous contact)
    obstacle_point: (x, y) of the contact, the obstacle's centre [m]
    contact_abscissa: a, the obstacle's projection on the undeformed section: the contact's
        material abscissa in eqs. (3)-(4) [m]
    deflection: d, lateral offset of the obstacle from the undeformed section, + to the left [m]
    deformation: force, moment and angles of the bent (and wrinkled) section
    contact: pose of the robot at the contact after the interaction
    flexural_rigidity: EI used [N m^2]
    """

    start: Pose
    obstacle_point: tuple
    contact_abscissa: float
    deflection: float
    deformation: Deformation
    contact: Pose
    flexural_rigidity: float

    @property
    def wrinkled(self):
        """Whether the base moment reached the critical moment."""
        return bool(self.deformation.wrinkle_angle != 0.0)

    @property
    def length(self):
        """Length of the deformed section from its base to the contact [m] (see module doc)."""
        a = self.contact_abscissa
        # Gauss-Legendre quadrature: the integrand is smooth on [0, a], so 64 nodes are exact to
        # rounding for any deflection the model produces.
        nodes, weights = np.polynomial.legendre.leggauss(64)
        s = 0.5 * a * (nodes + 1.0)
        slope = (float(self.deformation.force) * s * (2.0 * a - s) / (2.0 * self.flexural_rigidity)
                 + math.tan(float(self.deformation.wrinkle_angle)))
        return float(0.5 * a * np.sum(weights * np.sqrt(1.0 + slope**2)))

    @property
    def wrap(self):
        """Direction the robot goes around the obstacle: "cw" (obstacle on the robot's right,
        pushing it left, d > 0), "ccw" (d < 0) or "none" (d = 0, no contact force)."""
        return "cw" if self.deflection > 0.0 else ("ccw" if self.deflection < 0.0 else "none")

    def shape(self, abscissa):
        """World points (x, y) [m] of the deformed section at material abscissae s in [0, a] [m]."""
        s = np.asarray(abscissa, dtype=float)
        bend, _ = cantilever_deflection(self.deformation.force, self.contact_abscissa, s,
                                        flexural_rigidity=self.flexural_rigidity)
        lateral = bend + s * math.tan(float(self.deformation.wrinkle_angle))
        return self.start.to_world(s, lateral)


def obstacle_interaction(start, obstacle_point, *, flexural_rigidity, critical_moment):
    """The passive section from ``start`` leaning on the obstacle at ``obstacle_point`` (Sect. II-B).

    start: Pose of the section base
    obstacle_point: (x, y) of the obstacle centre [m]
    flexural_rigidity: EI [N m^2]
    critical_moment: m_c [N m]
    Returns an ``Interaction``, or None when the obstacle is not ahead of the section (a <= 0).
    """
    a, d = (float(value) for value in start.to_local(*obstacle_point))
    if a <= 0.0:
        return None
    deformation = bend_or_wrinkle(a, d, flexural_rigidity=flexural_rigidity, critical_moment=critical_moment)
    heading = start.heading + float(deformation.bend_angle) + float(deformation.wrinkle_angle)
    contact = Pose(float(obstacle_point[0]), float(obstacle_point[1]), heading)
    return Interaction(start=start, obstacle_point=(float(obstacle_point[0]), float(obstacle_point[1])),
                       contact_abscissa=a, deflection=d, deformation=deformation, contact=contact,
                       flexural_rigidity=flexural_rigidity)


def required_wrap(start, obstacle_point, next_x, next_y):
    """Wrap direction around an obstacle that leads to the next point (seed 004 Fig. 6).

    start: Pose of the section base
    obstacle_point: (x, y) of the obstacle [m]
    next_x, next_y: the next point (next obstacle or target) [m] (arrays broadcast)
    Returns an integer array: +1 counterclockwise (the next point needs more curvature than the
    obstacle), -1 clockwise, 0 equal curvatures.
    """
    obstacle_curvature, _ = inverse_kinematics(*start.to_local(*obstacle_point))
    next_curvature, _ = inverse_kinematics(*start.to_local(next_x, next_y))
    return np.sign(next_curvature - obstacle_curvature).astype(int)


def wrap_consistent(interaction, wrap):
    """Whether the obstacle pushes the robot the way the wrap direction needs (see module doc).

    interaction: the Interaction
    wrap: required direction from ``required_wrap`` (+1 ccw, -1 cw, 0 either; arrays broadcast)
    """
    side = np.sign(interaction.deflection)
    wrap = np.asarray(wrap)
    return (side == 0) | (wrap == 0) | (wrap == -side)


def wrapped_angle_error(angle, target):
    """|target - angle| wrapped into [0, pi] [rad]."""
    return np.abs((np.asarray(target, dtype=float) - angle + np.pi) % (2.0 * np.pi) - np.pi)
