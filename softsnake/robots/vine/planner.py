"""Obstacle-interaction planner for actuated vine robots (seed 004, Selvaggio et al., Sect. III), in numpy.

The robot is planar. It starts at the origin of the world frame with heading ``base_heading``
and is made of sections joined at obstacle contacts: a passive section from the base (or the
previous contact) to each obstacle it leans on, and an actuated constant-curvature section from
the last contact to the tip. The planner enumerates the obstacle sequences, computes each plan
and returns them all with the best feasible one (least tip orientation error).

The kinematics and the obstacle interaction (Sect. II-A and II-B, the assumptions made where the
paper is vague) are in ``kinematics.py``.

Plans (Alg. 1) and the assumptions made where the paper is vague
    * Feasibility (Alg. 1 ``isFeasible``): every section's length lies in ``length_range`` and
      the actuated section's curvature in ``curvature_range`` (the passive sections are not
      actuated, so only their length is checked). Seed 004 checks the limits per section (its
      navigation plans through obstacle 1 need more than 2 m in all, by the triangle inequality),
      so the total length is limited only when ``total_length_max`` is given. The robot's
      mid-line must not enter an obstacle except near its own contacts (within two obstacle radii
      plus two samples along the robot) and must not cross itself; these two checks run only on
      plans within the limits (the reasons of the others list the limits they break).
    * The orientation error is ``|theta_d - theta|`` wrapped into [0, pi].

Planner (Sect. III, Algorithms 1-2)
    Every ordered sequence of distinct circle obstacles (all lengths up to
    ``sequence_length_max``, the empty sequence being the base IK solution) is one candidate.
    Because a contact pose depends only on the sequence before it, contact poses are cached per
    prefix and reused across sequences (the dynamic programming of Sect. III).

Workspaces (Sect. II-C, eqs. 5-7)
    ``reach_mask`` rasterises the set of tip positions a sequence reaches within the limits (no
    collision or self-intersection test), ``workspace_levels`` combines the zero- and
    one-obstacle sets into ``W^1, W^2, ...`` by eq. (7).
"""

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from softsnake.errors import ConfigError
from softsnake.validation import positive_number

from .kinematics import (Interaction, Pose, forward_kinematics, inverse_kinematics, obstacle_interaction, required_wrap,
                         wrap_consistent, wrapped_angle_error)
from .scene import ObstacleCircle, PlanProblem, obstacle_signed_distance

SEQUENCE_COUNT_MAX = 5000
"""Most candidate sequences ``plan_paths`` enumerates before asking for ``sequence_length_max``."""


@dataclass(frozen=True)
class Section:
    """One section of a planned robot.

    obstacle: index of the obstacle the section ends on (in the obstacle list), None for the
        actuated tip section
    length: material length [m]
    curvature: actuated curvature [1/m]; 0 for the passive sections, which are unactuated
    rotation: heading change from the section's start to its end, deformation included [rad]
    start: pose at the section's start
    end: pose at the section's end
    interaction: the Interaction of a passive section, None for the tip section
    points: world points (N, 2) along the section for plotting [m]
    """

    obstacle: int | None
    length: float
    curvature: float
    rotation: float
    start: Pose
    end: Pose
    interaction: Interaction | None = None
    points: np.ndarray = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Plan:
    """One candidate plan.

    sequence: indices of the obstacles leaned on, in order (empty: the base IK solution)
    sections: the Sections from base to tip (empty if the plan could not be built)
    tip: tip pose, None if the plan could not be built
    orientation_error: |theta_d - theta| wrapped into [0, pi] [rad], None without a tip
    reasons: why the plan is infeasible (empty when feasible)
    """

    sequence: tuple
    sections: tuple
    tip: Pose | None
    orientation_error: float | None
    reasons: tuple

    @property
    def feasible(self):
        """Whether the plan satisfies every limit and check."""
        return not self.reasons

    @property
    def label(self):
        """Readable name: "base" or the obstacles in order, 1-based as in seed 004 ("O1 > O2")."""
        return " > ".join(f"O{index + 1}" for index in self.sequence) or "base"

    @property
    def total_length(self):
        """Sum of the section lengths [m]."""
        return sum(section.length for section in self.sections)

    def points(self):
        """World points (N, 2) along the whole robot, base to tip [m]."""
        if not self.sections:
            return np.zeros((0, 2))
        return np.concatenate([self.sections[0].points[:1]] + [section.points[1:] for section in self.sections])

    def to_dict(self):
        """The plan as plain JSON-ready data (SI units, angles in rad)."""
        sections = []
        for section in self.sections:
            entry = {"obstacle": section.obstacle, "length": section.length, "curvature": section.curvature,
                     "rotation": section.rotation, "end": [section.end.x, section.end.y, section.end.heading]}
            if section.interaction is not None:
                deformation = section.interaction.deformation
                entry.update(deflection=section.interaction.deflection, wrap=section.interaction.wrap,
                             force=float(deformation.force), base_moment=float(deformation.base_moment),
                             bend_angle=float(deformation.bend_angle),
                             wrinkle_angle=float(deformation.wrinkle_angle), wrinkled=section.interaction.wrinkled)
            sections.append(entry)
        return {"label": self.label, "sequence": list(self.sequence), "feasible": self.feasible,
                "tip": None if self.tip is None else [self.tip.x, self.tip.y],
                "orientation": None if self.tip is None else self.tip.heading,
                "orientation_error": self.orientation_error, "total_length": self.total_length,
                "reasons": list(self.reasons), "sections": sections}


@dataclass(frozen=True)
class PlanResult:
    """All candidate plans and the best feasible one.

    plans: every candidate Plan, base first, then by sequence length
    best: the feasible plan with the least orientation error (fewest obstacles on ties), None
        if no plan is feasible
    """

    plans: tuple
    best: Plan | None


def _sample_count(length, spacing):
    return max(2, int(math.ceil(length / spacing)) + 1)


def _arc_points(start, curvature, length, spacing):
    x, y, _ = forward_kinematics(curvature, np.linspace(0.0, length, _sample_count(length, spacing)))
    return np.stack(start.to_world(x, y), axis=1)


def polyline_self_intersects(points):
    """Whether a polyline (N, 2) crosses itself (segments sharing an end point do not count) [m]."""
    points = np.asarray(points, dtype=float)
    start, end = points[:-1], points[1:]
    count = len(start)
    if count < 3:
        return False
    first, second = np.triu_indices(count, k=2)
    p, r = start[first], end[first] - start[first]
    q, s = start[second], end[second] - start[second]
    cross = r[:, 0] * s[:, 1] - r[:, 1] * s[:, 0]
    gap = q - p
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (gap[:, 0] * s[:, 1] - gap[:, 1] * s[:, 0]) / cross
        u = (gap[:, 0] * r[:, 1] - gap[:, 1] * r[:, 0]) / cross
    # Parallel segments (cross = 0) are skipped: overlapping collinear pieces do not occur on
    # the smooth shapes drawn here.
    hit = (cross != 0.0) & (t >= 0.0) & (t <= 1.0) & (u >= 0.0) & (u <= 1.0)
    return bool(np.any(hit))


def _limit_reasons(name, length, curvature, problem):
    reasons = []
    low, high = problem.length_range
    if not low <= length <= high:
        reasons.append(f"{name}: length {length:.4g} m outside [{low:g}, {high:g}] m")
    if curvature is not None:
        low, high = problem.curvature_range
        if not low <= curvature <= high:
            reasons.append(f"{name}: curvature {curvature:.4g} 1/m outside [{low:g}, {high:g}] 1/m")
    return reasons


def _collision_reasons(plan_points, sections, obstacles, spacing):
    """Obstacles the robot's mid-line enters away from its own contacts."""
    arc_lengths = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(plan_points, axis=0), axis=1))])
    contact_position = {}
    position = 0.0
    for section in sections:
        position += float(np.sum(np.linalg.norm(np.diff(section.points, axis=0), axis=1)))
        if section.obstacle is not None:
            contact_position[section.obstacle] = position
    reasons = []
    for index, obstacle in enumerate(obstacles):
        distance, _ = obstacle.signed_distance(plan_points)
        inside = distance < 0.0
        if index in contact_position:
            window = 2.0 * obstacle.radius + 2.0 * spacing
            inside &= np.abs(arc_lengths - contact_position[index]) > window
        if np.any(inside):
            reasons.append(f"enters O{index + 1}")
    return reasons


def _check_inputs(problem, obstacles, base_heading):
    if not isinstance(problem, PlanProblem):
        raise ConfigError(f"problem: expected a PlanProblem, got {type(problem).__name__}")
    for index, obstacle in enumerate(obstacles):
        if not hasattr(obstacle, "signed_distance"):
            raise ConfigError(f"obstacles[{index}]: expected a scene obstacle, got {type(obstacle).__name__}")
    if not (isinstance(base_heading, (int, float)) and math.isfinite(base_heading)):
        raise ConfigError(f"base_heading: must be a finite angle in rad, got {base_heading!r}")


def candidate_sequences(obstacles, *, sequence_length_max=None):
    """Every ordered sequence of distinct circle obstacles (indices), shortest first, with ().

    obstacles: the scene's obstacles; only circles are interaction candidates
    sequence_length_max: longest sequence; None: all circles
    Raises ConfigError if there would be more than SEQUENCE_COUNT_MAX sequences.
    """
    circles = [index for index, obstacle in enumerate(obstacles) if isinstance(obstacle, ObstacleCircle)]
    longest = len(circles) if sequence_length_max is None else min(sequence_length_max, len(circles))
    count = sum(math.perm(len(circles), k) for k in range(longest + 1))
    if count > SEQUENCE_COUNT_MAX:
        raise ConfigError(f"{len(circles)} circle obstacles give {count} sequences (more than "
                          f"{SEQUENCE_COUNT_MAX}); limit them with sequence_length_max")
    return [sequence for k in range(longest + 1) for sequence in itertools.permutations(circles, k)]


class _ContactCache:
    """Interactions per obstacle-sequence prefix, computed once and reused (Sect. III)."""

    def __init__(self, problem, obstacles, base):
        self.problem = problem
        self.obstacles = obstacles
        self.base = base
        self.interactions = {}

    def start(self, prefix):
        """Pose after leaning on the obstacles of ``prefix`` in order (the base for an empty
        prefix); None if one of them is not ahead of the robot."""
        if not prefix:
            return self.base
        interaction = self.interaction(prefix)
        return None if interaction is None else interaction.contact

    def interaction(self, prefix):
        """The Interaction with the last obstacle of ``prefix``; None if it cannot be built."""
        if prefix not in self.interactions:
            start = self.start(prefix[:-1])
            self.interactions[prefix] = None if start is None else obstacle_interaction(
                start, self.obstacles[prefix[-1]].center, flexural_rigidity=self.problem.flexural_rigidity,
                critical_moment=self.problem.critical_moment)
        return self.interactions[prefix]


def _passive_section(index, interaction, spacing):
    abscissa = np.linspace(0.0, interaction.contact_abscissa, _sample_count(interaction.length, spacing))
    points = np.stack(interaction.shape(abscissa), axis=1)
    return Section(obstacle=index, length=interaction.length, curvature=0.0,
                   rotation=interaction.contact.heading - interaction.start.heading, start=interaction.start,
                   end=interaction.contact, interaction=interaction, points=points)


def _build_plan(sequence, cache, problem, obstacles, spacing):
    """One candidate plan: its sections, tip, orientation error and infeasibility reasons."""
    target_x, target_y = problem.target
    interactions = []
    reasons = []
    for position, index in enumerate(sequence):
        name = f"O{index + 1}"
        interaction = cache.interaction(sequence[:position + 1])
        if interaction is None:
            return Plan(sequence=sequence, sections=(), tip=None, orientation_error=None,
                        reasons=(f"{name}: not ahead of the robot",))
        if position + 1 < len(sequence):
            next_x, next_y = obstacles[sequence[position + 1]].center
            next_name = f"O{sequence[position + 1] + 1}"
        else:
            next_x, next_y, next_name = target_x, target_y, "the target"
        wrap = int(required_wrap(interaction.start, interaction.obstacle_point, next_x, next_y))
        if not wrap_consistent(interaction, wrap):
            reasons.append(f"{name}: on the wrong side to wrap {'ccw' if wrap > 0 else 'cw'} toward {next_name}")
        reasons += _limit_reasons(name, interaction.length, None, problem)
        interactions.append(interaction)
    start = cache.start(sequence)
    curvature, length = (float(value) for value in inverse_kinematics(*start.to_local(target_x, target_y)))
    reasons += _limit_reasons("tip section", length, curvature, problem)
    if not math.isfinite(length):
        return Plan(sequence=sequence, sections=(), tip=None, orientation_error=None, reasons=tuple(reasons))
    total = length + sum(interaction.length for interaction in interactions)
    if problem.total_length_max is not None and total > problem.total_length_max:
        reasons.append(f"total length {total:.4g} m exceeds {problem.total_length_max:g} m")
    # A plan within the limits is drawn at the sample spacing and checked for collisions and
    # self-intersections; one beyond them is already infeasible and is drawn coarser (at most
    # about 200 points per section) for plotting only, since its length is unbounded.
    checked = not reasons

    def section_spacing(section_length):
        return spacing if checked else max(spacing, section_length / 200)

    tip = Pose(target_x, target_y, start.heading + curvature * length)
    sections = [_passive_section(index, interaction, section_spacing(interaction.length))
                for index, interaction in zip(sequence, interactions)]
    sections.append(Section(obstacle=None, length=length, curvature=curvature, rotation=curvature * length,
                            start=start, end=tip,
                            points=_arc_points(start, curvature, length, section_spacing(length))))
    sections = tuple(sections)
    if checked:
        plan_points = Plan(sequence=sequence, sections=sections, tip=tip, orientation_error=None, reasons=()).points()
        reasons += _collision_reasons(plan_points, sections, obstacles, spacing)
        if polyline_self_intersects(plan_points):
            reasons.append("crosses itself")
    error = float(wrapped_angle_error(tip.heading, problem.orientation))
    return Plan(sequence=sequence, sections=sections, tip=tip, orientation_error=error, reasons=tuple(reasons))


def plan_paths(problem, obstacles, *, base_heading=0.0, sequence_length_max=None, sample_spacing=0.01):
    """Every obstacle-interaction plan to the target and the best feasible one (Algorithms 1-2).

    problem: the PlanProblem (target pose, limits, EI, m_c)
    obstacles: the scene's obstacles; circles are leaned on, all of them are avoided
    base_heading: heading of the robot at its base, at the world origin [rad]
    sequence_length_max: most obstacles per plan; None: all circles
    sample_spacing: distance between the points drawn along the robot for the collision and
        self-intersection checks and for plotting [m]
    Returns a PlanResult. Raises ConfigError for bad input.
    """
    obstacles = tuple(obstacles)
    _check_inputs(problem, obstacles, base_heading)
    positive_number("sample_spacing", sample_spacing, unit="m")
    if sequence_length_max is not None and (isinstance(sequence_length_max, bool) or not isinstance(
            sequence_length_max, int) or sequence_length_max < 0):
        raise ConfigError(f"sequence_length_max: must be a non-negative integer, got {sequence_length_max!r}")
    cache = _ContactCache(problem, obstacles, Pose(0.0, 0.0, float(base_heading)))
    plans = tuple(_build_plan(sequence, cache, problem, obstacles, float(sample_spacing))
                  for sequence in candidate_sequences(obstacles, sequence_length_max=sequence_length_max))
    feasible = [plan for plan in plans if plan.feasible]
    best = min(feasible, key=lambda plan: (plan.orientation_error, len(plan.sequence)), default=None)
    return PlanResult(plans=plans, best=best)


def reach_mask(problem, obstacles, sequence, x, y, *, base_heading=0.0):
    """Tip positions a sequence of obstacle interactions reaches within the limits (eqs. 5-6).

    problem: the PlanProblem (its target is not used)
    obstacles: the scene's obstacles
    sequence: indices of the circle obstacles leaned on, in order (() for the free workspace W)
    x, y: candidate tip positions [m] (arrays of one shape)
    base_heading: heading of the robot at its base [rad]
    Returns a boolean array of the shape of x: the wrap directions are consistent and every
    section's length (and the tip section's curvature) is within the limits. Points inside an
    obstacle are not removed here, and there is no collision or self-intersection test.
    """
    obstacles = tuple(obstacles)
    _check_inputs(problem, obstacles, base_heading)
    for index in sequence:
        if not (isinstance(index, (int, np.integer)) and 0 <= index < len(obstacles)
                and isinstance(obstacles[index], ObstacleCircle)):
            raise ConfigError(f"sequence: {index!r} is not the index of a circle obstacle")
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    cache = _ContactCache(problem, obstacles, Pose(0.0, 0.0, float(base_heading)))
    mask = np.ones(x.shape, dtype=bool)
    total = np.zeros(x.shape)
    low, high = problem.length_range
    for position, index in enumerate(sequence):
        interaction = cache.interaction(tuple(sequence[:position + 1]))
        if interaction is None:
            return np.zeros(x.shape, dtype=bool)
        if position + 1 < len(sequence):
            next_x, next_y = obstacles[sequence[position + 1]].center
        else:
            next_x, next_y = x, y
        mask &= wrap_consistent(interaction, required_wrap(interaction.start, interaction.obstacle_point,
                                                           next_x, next_y))
        mask &= low <= interaction.length <= high
        total += interaction.length
    curvature, length = inverse_kinematics(*cache.start(tuple(sequence)).to_local(x, y))
    mask &= (length >= low) & (length <= high)
    mask &= (curvature >= problem.curvature_range[0]) & (curvature <= problem.curvature_range[1])
    if problem.total_length_max is not None:
        mask &= total + length <= problem.total_length_max
    return mask


def workspace_levels(problem, obstacles, x, y, *, base_heading=0.0):
    """Workspaces by number of reachable orientations, W^1, W^2, ... (seed 004 eq. 7).

    problem: the PlanProblem (its target is not used)
    obstacles: the scene's obstacles; circles are leaned on one at a time
    x, y: candidate tip positions [m] (arrays of one shape)
    base_heading: heading of the robot at its base [rad]
    Returns a list of boolean arrays [W^1, ..., W^(n+1)] for n circle obstacles:
    ``W^1 = W minus O``, ``W_i^2 = W_i and W^1``, ``W_i^p = union over j > i of (W_i^(p-1) and
    W_j^(p-1))``, ``W^p = union over i of W_i^p``, with ``W_i`` the positions reached by leaning
    on obstacle i alone (``reach_mask``).
    """
    obstacles = tuple(obstacles)
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    distance, _ = obstacle_signed_distance(obstacles, np.stack([x.ravel(), y.ravel()], axis=1))
    level = reach_mask(problem, obstacles, (), x, y, base_heading=base_heading) & (distance.reshape(x.shape) >= 0.0)
    levels = [level]
    circles = [index for index, obstacle in enumerate(obstacles) if isinstance(obstacle, ObstacleCircle)]
    per_obstacle = [reach_mask(problem, obstacles, (index,), x, y, base_heading=base_heading) & level
                    for index in circles]
    for _ in circles:
        levels.append(np.logical_or.reduce(per_obstacle) if per_obstacle else np.zeros(x.shape, dtype=bool))
        # W_i^(p+1) = union over j > i of W_i^p and W_j^p; the last i has no j and drops out.
        per_obstacle = [np.logical_or.reduce([per_obstacle[i] & per_obstacle[j]
                                              for j in range(i + 1, len(per_obstacle))])
                        for i in range(len(per_obstacle) - 1)]
    return levels
