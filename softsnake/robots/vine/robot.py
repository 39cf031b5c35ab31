"""The multi-link vine robot of seed 000 (Jitosho et al., sec. II-B to II-F) built on the engine.

A vine of ``link_count`` links is a chain of ``2 link_count`` rigid bodies in the plane z = 0
(seed 000 Fig. 2), base first. Each link is a pair of bodies joined by a driven prismatic joint
(its extension is the link's growth); consecutive links are joined end to end by pin joints
(hinges about z), and the first body is pinned to the origin. Every pin carries a torsional
spring-damper (linear, seed 000 eq. 7, or the wrinkling moment of seed 003 eqs. 1-2) whose rest
angle is the steering input. Each link has one contact sphere of the tube radius at the distal
end of its second body (the next pin, or the tip), as in the reference rollouts. The number of
bodies never changes while the vine grows: growth only opens the prismatic joints, so the state
has a fixed size (seed 000 sec. II, the reason for the prismatic joints).

Geometry. Every body has half-length d. By default the vine starts straight along ``heading``;
when ``length`` exceeds the bodies end to end (2 d per body), the difference is shared equally by
the prismatic joints as an initial gap between the two bodies of each link. A vine may also start
from given body poses (a bent shape from a video); its springs still rest in the straight shape
along ``heading``. The joints' extension is measured from the initial gap; a link's length (pin
to pin) is 4 d + gap + extension.
"""

import math
from dataclasses import dataclass

import numpy as np

from softsnake.builder import ModelBuilder
from softsnake.errors import ModelError
from softsnake.spatial import quat_from_axis_angle

from . import stiffness as stiffness_models
from .scene import ObstacleCircle, ObstacleRectangle, ObstacleWall

OBSTACLE_HALF_HEIGHT = 1.0
"""Half height of the obstacle boxes and cylinders along z [m]; the vine lives at z = 0."""

WALL_THICKNESS = 0.002
"""Thickness of the box that stands for a wall segment [m] (a segment has none)."""

MOMENT_CURVE_SAMPLES = 48
"""Samples of the wrinkling moment curve on each side of zero [-]."""

MOMENT_CURVE_MAX_ANGLE = 0.95 * math.pi
"""Largest sampled bending angle [rad]; beyond it the engine extrapolates the last slope (the curve
flattens to zero slope at pi, which a strictly increasing sample set cannot hold)."""

Z_AXIS = (0.0, 0.0, 1.0)


@dataclass(frozen=True)
class VineHandle:
    """Indices of one vine's parts inside the builder it was added to (before ``add_world``).

    bodies: body indices, base first (2 per link)
    pins: (body_a, body_b) of every pin joint, base pin first (body_a = -1: the world origin)
    springs: angular spring index at every pin, base first
    prismatics: prismatic joint index of every link, base first
    link_gaps: (links,) initial gap between the two bodies of every link [m]
    rest_targets: (pins,) spring target of the straight rest shape at every pin, relative to the
        build pose [rad] (zero for a vine built straight)
    half_length: body half-length d [m]
    heading: heading of the rest shape at the base [rad]
    """

    bodies: tuple
    pins: tuple
    springs: tuple
    prismatics: tuple
    link_gaps: np.ndarray
    rest_targets: np.ndarray
    half_length: float
    heading: float

    @property
    def link_count(self):
        """Number of links (pin + prismatic pairs) [-]."""
        return len(self.prismatics)

    @property
    def body_count(self):
        """Number of rigid bodies [-]."""
        return len(self.bodies)

    def link_lengths(self, extension):
        """Pin-to-pin length of every link for prismatic ``extension`` (..., links) [m]."""
        return 4.0 * self.half_length + self.link_gaps + np.asarray(extension, dtype=float)


def sampled_moment_curve(moment, *, samples=MOMENT_CURVE_SAMPLES, max_angle=MOMENT_CURVE_MAX_ANGLE, extra_angles=()):
    """Samples (angles [rad], moments [N m]) of an odd restoring moment for ``add_angular_spring``.

    The angles are spaced evenly in sqrt(|theta|) up to ``max_angle`` so that small angles (the
    wrinkling onset, a few degrees) are resolved, mirrored to negative angles, with 0 and the
    positive ``extra_angles`` up to ``max_angle`` among them.
    moment: callable, moment(angles array) -> moments [N m]
    Raises ModelError unless the sampled moments increase strictly (the engine's condition).
    """
    positive = np.linspace(0.0, math.sqrt(max_angle), samples) ** 2
    positive = np.unique(np.concatenate([positive[1:], np.asarray(extra_angles, dtype=float)]))
    positive = positive[(positive > 0.0) & (positive <= max_angle)]
    angles = np.concatenate([-positive[::-1], [0.0], positive])
    moments = np.asarray(moment(angles), dtype=float)
    if moments.shape != angles.shape or not np.all(np.isfinite(moments)) or np.any(np.diff(moments) <= 0.0):
        raise ModelError("a sampled moment curve must be finite and strictly increasing in the angle "
                         "(a saturated or decreasing moment model cannot be an angular spring)")
    return angles, moments


def wrinkling_moment_curve(pressure, radius, *, samples=MOMENT_CURVE_SAMPLES, max_angle=MOMENT_CURVE_MAX_ANGLE):
    """Samples (angles [rad], moments [N m]) of the seed 003 wrinkling moment, odd and strictly increasing.

    The angles are spaced evenly in sqrt(|theta|) so that the onset of wrinkling (a few degrees) is
    resolved; the wrinkling onset itself is always a sample.
    pressure: internal pressure [Pa]; radius: tube radius [m]
    """
    onset = float(stiffness_models.wrinkling_onset_angle(pressure))
    return sampled_moment_curve(lambda angles: stiffness_models.wrinkling_moment(angles, pressure, radius),
                                samples=samples, max_angle=max_angle, extra_angles=[onset])


def mlp_moment_curve(model, *, samples=MOMENT_CURVE_SAMPLES, max_angle=MOMENT_CURVE_MAX_ANGLE):
    """Samples (angles [rad], moments [N m]) of an ``stiffness.MlpMoment`` for the pins' springs
    (``add_vine(moment_curve=...)``, ``VineSpec.moment_curve``); ModelError if it has saturated to a
    flat curve within ``max_angle``."""
    return sampled_moment_curve(model, samples=samples, max_angle=max_angle)


def pin_spring_options(vine, moment_curve=None):
    """Keyword arguments of ``ModelBuilder.add_angular_spring`` for the pins of ``vine`` (VineParams);
    ``moment_curve`` (angles, moments), when given, replaces the vine's stiffness model."""
    if moment_curve is not None:
        return {"moment_curve": moment_curve, "damping": vine.damping}
    if vine.stiffness_model == "wrinkling":
        return {"moment_curve": wrinkling_moment_curve(vine.pressure, vine.tube_radius), "damping": vine.damping}
    return {"stiffness": vine.stiffness, "damping": vine.damping}


def straight_poses(vine, heading):
    """Body centres and angles (B, 3) [m, rad] of a straight vine of ``vine.length`` along ``heading``.

    The length beyond the bodies end to end is shared equally as gaps inside the links.
    Raises ModelError when ``vine.length`` is shorter than the bodies end to end.
    """
    d, links = vine.body_half_length, vine.link_count
    closed_length = 4.0 * d * links
    if vine.length < closed_length * (1.0 - 1e-9):
        raise ModelError(
            f"vine.length {vine.length:g} m is shorter than its {2 * links} bodies end to end "
            f"({closed_length:g} m = 4 body_half_length link_count)")
    gap = max(vine.length - closed_length, 0.0) / links
    centre = np.arange(2 * links) * 2.0 * d + d + np.repeat(np.arange(links), 2) * gap + np.tile([0.0, gap], links)
    return np.column_stack([centre * math.cos(heading), centre * math.sin(heading), np.full(2 * links, heading)])


def _check_poses(poses, vine, tolerance):
    """Gaps of the links of an initial configuration (B, 3); ModelError if it is not a vine."""
    d, links = vine.body_half_length, vine.link_count
    if poses.shape != (2 * links, 3) or not np.all(np.isfinite(poses)):
        raise ModelError(f"initial poses must be {2 * links} finite rows (x, y, theta), got shape {poses.shape}")
    direction = np.stack([np.cos(poses[:, 2]), np.sin(poses[:, 2])], axis=1)
    proximal, distal = poses[:, :2] - d * direction, poses[:, :2] + d * direction
    if np.linalg.norm(proximal[0]) > tolerance:
        raise ModelError(f"initial poses: the base body does not start at the origin (off by "
                         f"{np.linalg.norm(proximal[0]):.3g} m)")
    pin_error = np.linalg.norm(distal[1:-1:2] - proximal[2::2], axis=1)
    if len(pin_error) and pin_error.max() > tolerance:
        raise ModelError(f"initial poses: link {int(np.argmax(pin_error)) + 1} is off its pin by {pin_error.max():.3g} m")
    offset = poses[1::2, :2] - poses[0::2, :2]
    along = np.sum(offset * direction[0::2], axis=1)
    across = np.abs(offset[:, 0] * direction[0::2, 1] - offset[:, 1] * direction[0::2, 0])
    twist = np.abs(np.angle(np.exp(1j * (poses[1::2, 2] - poses[0::2, 2]))))
    if across.max() > tolerance or twist.max() * d > tolerance or np.any(along < 2.0 * d - tolerance):
        raise ModelError("initial poses: the two bodies of a link must be collinear and not overlap")
    return np.maximum(along - 2.0 * d, 0.0)


def add_vine(builder, vine, *, heading=None, initial_poses=None, initial_velocities=None, friction=0.0, stall_force=None,
             moment_curve=None, tolerance=1e-4):
    """Add the bodies, joints, springs and contact spheres of one vine to ``builder``.

    builder: a ModelBuilder for one world (planar, no gravity: the papers' horizontal vines)
    vine: the VineParams of the scene
    heading: heading of the rest shape at the base [rad]; default ``vine.heading``
    initial_poses: optional (B, 3) body centres and angles [m, rad] to start from (e.g. a bent
        vine from a video), base body at the origin; default: straight along ``heading``,
        ``vine.length`` long. The springs still rest in the straight shape along ``heading``.
    initial_velocities: optional (B, 3) body velocities vx, vy [m/s] and angular rates [rad/s];
        default: at rest
    friction: friction coefficient of the contact spheres (0: frictionless, as seed 000)
    stall_force: axial tip load that stops the growth [N] (the growth drives slow down linearly with
        the load they carry, a controller of finite gain); None: the growth rate is met exactly
        (seed 000). Every drive of the chain carries the tip load, so each one's mobility is
        (growth_rate / link_count) / stall_force.
    moment_curve: optional (angles [rad], moments [N m]) of every pin's spring (an MLP's, say:
        ``mlp_moment_curve``), in place of ``vine.stiffness_model``
    tolerance: how far the joints of ``initial_poses`` may be from closing [m]
    Returns a VineHandle. Raises ModelError for a vine that cannot be built.
    """
    heading = float(vine.heading if heading is None else heading)
    if not math.isfinite(heading):
        raise ModelError(f"vine heading must be finite, got {heading}")
    if moment_curve is None and vine.stiffness_model == "linear" and vine.stiffness <= 0.0:
        raise ModelError("vine.stiffness must be positive for the linear stiffness model")
    if stall_force is not None and not (math.isfinite(stall_force) and stall_force > 0.0):
        raise ModelError(f"growth stall force must be positive [N], got {stall_force}")
    d, links = vine.body_half_length, vine.link_count
    if initial_poses is None:
        poses = straight_poses(vine, heading)
    else:
        poses = np.asarray(initial_poses, dtype=float)
    gaps = _check_poses(poses, vine, tolerance)
    velocities = np.zeros_like(poses) if initial_velocities is None else np.asarray(initial_velocities, dtype=float)
    if velocities.shape != poses.shape or not np.all(np.isfinite(velocities)):
        raise ModelError(f"initial velocities must be {len(poses)} finite rows (vx, vy, omega), "
                         f"got shape {velocities.shape}")
    mobility = 0.0 if stall_force is None else vine.growth_rate / links / stall_force
    inertia = np.eye(3) * vine.body_inertia
    spring_options = pin_spring_options(vine, moment_curve)
    direction = np.stack([np.cos(poses[:, 2]), np.sin(poses[:, 2]), np.zeros(len(poses))], axis=1)
    # Straight rest shape: the base pin rests at the heading, the others at zero relative angle.
    rest_targets = -np.angle(np.exp(1j * np.diff(np.concatenate([[heading], poses[0::2, 2]]))))

    bodies, pins, springs, prismatics = [], [], [], []
    for i, (x, y, angle) in enumerate(poses):
        vx, vy, omega = velocities[i]
        body = builder.add_body((x, y, 0.0), quat_from_axis_angle(Z_AXIS, angle), mass=vine.body_mass, inertia=inertia,
                                velocity=(vx, vy, 0.0), angular_velocity=(0.0, 0.0, omega))
        if i % 2 == 0:
            # The pin at the link's proximal end: to the world origin or to the previous link.
            parent = bodies[-1] if bodies else -1
            builder.add_hinge(parent, body, anchor=(x, y, 0.0) - d * direction[i], axis=Z_AXIS)
            pins.append((parent, body))
            springs.append(builder.add_angular_spring(parent, body, Z_AXIS, target=rest_targets[i // 2], **spring_options))
        else:
            builder.add_shape_sphere(body, vine.tube_radius, position=(d, 0.0, 0.0), mu=friction)
            anchor = (x, y, 0.0) - (d + 0.5 * gaps[i // 2]) * direction[i]
            prismatics.append(builder.add_prismatic(bodies[-1], body, anchor=anchor, axis=direction[i], drive=True,
                                                    rate=vine.growth_rate / links, drive_mobility=mobility))
        bodies.append(body)
    return VineHandle(bodies=tuple(bodies), pins=tuple(pins), springs=tuple(springs), prismatics=tuple(prismatics),
                      link_gaps=gaps, rest_targets=rest_targets, half_length=d, heading=heading)


def add_obstacles(builder, obstacles, *, friction=0.0):
    """Add scene obstacles as static engine obstacles of ``builder``'s world.

    Circles become vertical cylinders, rectangles boxes rotated about z, walls thin boxes along
    their segment (``WALL_THICKNESS`` thick). ``friction``: their friction coefficient (seed 000:
    frictionless). Returns the obstacle indices.
    """
    indices = []
    for obstacle in obstacles:
        if isinstance(obstacle, ObstacleCircle):
            indices.append(builder.add_obstacle_cylinder((*obstacle.center, 0.0), obstacle.radius, OBSTACLE_HALF_HEIGHT,
                                                         mu=friction))
        elif isinstance(obstacle, ObstacleRectangle):
            half = (0.5 * obstacle.size[0], 0.5 * obstacle.size[1], OBSTACLE_HALF_HEIGHT)
            indices.append(builder.add_obstacle_box((*obstacle.center, 0.0), half,
                                                    rotation=quat_from_axis_angle(Z_AXIS, obstacle.angle), mu=friction))
        elif isinstance(obstacle, ObstacleWall):
            start, end = np.asarray(obstacle.start), np.asarray(obstacle.end)
            along = end - start
            half = (0.5 * float(np.linalg.norm(along)), 0.5 * WALL_THICKNESS, OBSTACLE_HALF_HEIGHT)
            angle = math.atan2(along[1], along[0])
            indices.append(builder.add_obstacle_box((*(0.5 * (start + end)), 0.0), half,
                                                    rotation=quat_from_axis_angle(Z_AXIS, angle), mu=friction))
        else:
            raise ModelError(f"unknown obstacle {obstacle!r}")
    return indices


def vine_world(vine, obstacles, **vine_options):
    """A planar, gravity-free ModelBuilder holding one vine and its obstacles; returns (builder, VineHandle).

    vine_options: keyword arguments of add_vine
    """
    builder = ModelBuilder(gravity=(0.0, 0.0, 0.0), planar=True)
    handle = add_vine(builder, vine, **vine_options)
    add_obstacles(builder, obstacles, friction=vine_options.get("friction", 0.0))
    return builder, handle


def pin_rest_angles(handle, curvature, extension):
    """Rest angle of every pin for a rest curvature, relative to the straight rest shape [rad].

    A constant curvature kappa turns the chain by kappa times the arc length between the
    midpoints of the two links a pin joins (half the first link for the base pin).
    handle: the VineHandle; curvature: (..., pins) rest curvature at every pin [1/m];
    extension: (..., links) prismatic extensions [m]
    """
    lengths = handle.link_lengths(extension)
    spans = 0.5 * lengths
    spans[..., 1:] += 0.5 * lengths[..., :-1]
    return np.asarray(curvature, dtype=float) * spans
