"""The vine-robot scene file: one TOML format for the dynamic simulator and the planner.

A scene holds the robot's parameters (``[vine]``), the time stepping (``[sim]``), the obstacles
(``[[obstacles]]``) and, optionally, a planning problem (``[plan]``, seed 004). Every value is SI
(m, kg, s, Pa, rad). The ``[vine]`` table is required (an empty file, or one without it, is most
likely not the scene meant); every other table, and every key of ``[vine]``, ``[sim]`` and ``[plan]``
except ``plan.target`` and ``plan.orientation``, is optional, with the defaults documented on the
dataclasses below (the defaults of ``[vine]`` and ``[sim]`` are the cluttered-environment example
of seed 000: an empty ``[vine]`` table asks for that robot). Example::

    name = "planner_navigation"
    description = "seed 004 navigation experiment"
    [vine]
    heading = 0.0
    [[obstacles]]
    type = "circle"        # vertical cylinder
    center = [0.7, 0.2]
    radius = 0.0025
    [[obstacles]]
    type = "rectangle"     # box; size = full width along its rotated x, full height along its rotated y
    center = [0.1, 0.2]
    size = [0.05, 0.3]
    angle = 0.0            # optional
    [[obstacles]]
    type = "wall"          # thin wall: a segment
    start = [0.0, 0.5]
    end = [1.0, 0.5]
    [plan]
    target = [1.7, -0.7]
    orientation = 0.0
    length_range = [0.0, 2.0]
    curvature_range = [-2.0, 2.0]
    flexural_rigidity = 0.1
    critical_moment = 0.32
    total_length_max = 2.0  # optional: limit on the sum of the sections (none by default)

Bad input raises ``ConfigError`` with a one-line message naming the file and the offending key
(``planner.toml: obstacles[2].radius: must be positive, got -0.01``). The dataclasses validate
themselves, so scenes built in code are checked the same way. A scene's growth must be one the
simulator can follow: the tip may advance at most one tube radius per time step
(``VineScene``: contacts are found once per step, so a faster tip passes through obstacles, and the
growth drives no longer keep the links together).

``load_scene`` also accepts the name of a shipped scene (``load_scene("planner_navigation")``),
looked up in ``softsnake/assets/vine/``.
"""

import math
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from softsnake.errors import ConfigError
from softsnake.validation import float_field, integer, naming_file, non_negative, pair, positive, read_toml, value_range

from ..assets import asset_folder


STIFFNESS_MODELS = ("linear", "wrinkling")
"""Names accepted by ``VineParams.stiffness_model``."""

MAX_VINE_LINKS = 500
"""Most links a scene's vine may have [-]. A vine's step takes one conjugate residual iteration per link
over rows that grow with the links, so its time grows with the square of the bodies: 1.9 ms per step
for 100 bodies on one CPU core (experiments/results/vine.md), about 0.19 s for the 1000 bodies of 500
links (86 s for the 450 steps of a default scene); a larger count is far more likely a typo."""

STEP_SECONDS_100_BODIES = 1.91e-3
"""Measured time of one step of a 100-body vine on one CPU core [s] (experiments/results/vine.md)."""


@dataclass(frozen=True)
class VineParams:
    """The vine robot of the dynamic simulator (seed 000 multi-link model) and its base frame.

    heading: initial heading of the robot at its base, from the x axis [rad]; also the base
        heading of the planner
    length: initial length [m]
    tube_radius: radius of the inflated tube [m]
    link_count: pin + prismatic link pairs (bodies = 2 * link_count) [-]
    body_half_length: distance from a body's centre to its ends [m]
    body_mass: mass of one body [kg]
    body_inertia: rotational inertia of one body about its centre [kg m^2]
    stiffness: torsional stiffness of every pin [N m/rad]
    damping: torsional damping of every pin [N m s/rad]
    growth_rate: total growth rate, shared equally by the prismatic joints [m/s]
    stiffness_model: "linear" (seed 000) or "wrinkling" (seed 003)
    pressure: internal pressure, used by the wrinkling model [Pa]
    """

    heading: float = -0.9076
    length: float = 0.30
    tube_radius: float = 0.0075
    link_count: int = 25
    body_half_length: float = 0.003
    body_mass: float = 0.002
    body_inertia: float = 5e-6
    stiffness: float = 0.03
    damping: float = 1e-5
    growth_rate: float = 0.205
    stiffness_model: str = "linear"
    pressure: float = 6894.757

    def __post_init__(self):
        for name in ("heading", "length", "tube_radius", "body_half_length", "body_mass", "body_inertia",
                     "stiffness", "damping", "growth_rate", "pressure"):
            float_field(self, name, f"vine.{name}")
        for key in ("length", "tube_radius", "body_half_length", "body_mass", "body_inertia"):
            positive(f"vine.{key}", getattr(self, key))
        for key in ("stiffness", "damping", "growth_rate", "pressure"):
            non_negative(f"vine.{key}", getattr(self, key))
        integer("vine.link_count", self.link_count, minimum=1)
        if self.link_count > MAX_VINE_LINKS:
            step = STEP_SECONDS_100_BODIES * (self.body_count / 100.0) ** 2
            raise ConfigError(
                f"vine.link_count: {self.link_count} links ({self.body_count} bodies) would take about {step:.2g} s "
                f"per step of one vine on one CPU core (the time grows with the square of the bodies: 1.9 ms for "
                f"100); the limit is {MAX_VINE_LINKS} links")
        if self.stiffness_model not in STIFFNESS_MODELS:
            known = ", ".join(STIFFNESS_MODELS)
            raise ConfigError(f"vine.stiffness_model: expected one of {known}, got {self.stiffness_model!r}")
        if self.stiffness_model == "wrinkling" and self.pressure <= 0:
            raise ConfigError(f"vine.pressure: the wrinkling model needs a positive pressure, got {self.pressure}")

    @property
    def body_count(self):
        """Number of rigid bodies, two per link [-]."""
        return 2 * self.link_count


@dataclass(frozen=True)
class SimParams:
    """Time stepping of the dynamic simulator.

    dt: time step [s]
    duration: simulated time [s]
    """

    dt: float = 1.0 / 90.0
    duration: float = 5.0

    def __post_init__(self):
        float_field(self, "dt", "sim.dt")
        float_field(self, "duration", "sim.duration")
        positive("sim.dt", self.dt)
        positive("sim.duration", self.duration)

    @property
    def step_count(self):
        """Number of whole steps that fit in ``duration`` [-]."""
        return int(round(self.duration / self.dt))


def _as_points(points):
    """``points`` as a float array of shape (N, 2); ConfigError for any other shape."""
    array = np.asarray(points, dtype=float)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ConfigError(f"points: expected an array of shape (N, 2), got shape {array.shape}")
    return array


@dataclass(frozen=True)
class ObstacleCircle:
    """A vertical cylinder, a circle in the plane.

    center: (x, y) of the centre [m]
    radius: radius [m]
    key: where the obstacle is in the scene file, for error messages
    """

    center: tuple
    radius: float
    key: str = field(default="obstacle", repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "center", pair(f"{self.key}.center", self.center))
        float_field(self, "radius", f"{self.key}.radius")
        positive(f"{self.key}.radius", self.radius)

    def signed_distance(self, points):
        """Signed distance of 2-D ``points`` (N, 2) [m] to the surface (negative inside) [m] and
        the outward unit normal (N, 2) of the closest surface point."""
        offset = _as_points(points) - np.asarray(self.center)
        norm = np.linalg.norm(offset, axis=1)
        # At the centre every direction is closest; +x is chosen.
        safe = np.where(norm > 0.0, norm, 1.0)
        normal = np.where((norm > 0.0)[:, None], offset / safe[:, None], np.array([1.0, 0.0]))
        return norm - self.radius, normal


@dataclass(frozen=True)
class ObstacleRectangle:
    """A box, a rectangle in the plane, rotated by ``angle`` about its centre.

    center: (x, y) of the centre [m]
    size: full width along the rotated x axis and full height along the rotated y axis [m]
    angle: rotation from the world x axis, counterclockwise [rad]
    key: where the obstacle is in the scene file, for error messages
    """

    center: tuple
    size: tuple
    angle: float = 0.0
    key: str = field(default="obstacle", repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "center", pair(f"{self.key}.center", self.center))
        object.__setattr__(self, "size", pair(f"{self.key}.size", self.size))
        for value in self.size:
            if value <= 0:
                raise ConfigError(f"{self.key}.size: must be positive, got {list(self.size)}")
        float_field(self, "angle", f"{self.key}.angle")

    def signed_distance(self, points):
        """Signed distance of 2-D ``points`` (N, 2) [m] to the surface (negative inside) [m] and
        the outward unit normal (N, 2) of the closest surface point."""
        cos, sin = math.cos(self.angle), math.sin(self.angle)
        offset = _as_points(points) - np.asarray(self.center)
        local = np.stack([cos * offset[:, 0] + sin * offset[:, 1], -sin * offset[:, 0] + cos * offset[:, 1]], axis=1)
        half = 0.5 * np.asarray(self.size)
        excess = np.abs(local) - half
        outside = np.maximum(excess, 0.0)
        outside_norm = np.linalg.norm(outside, axis=1)
        inside = np.minimum(excess.max(axis=1), 0.0)
        distance = outside_norm + inside
        # Outside: the gradient points from the nearest surface point; inside (and on the surface):
        # the normal of the nearest face.
        face_axis = np.argmax(excess, axis=1)
        face_normal = np.zeros_like(local)
        face_normal[np.arange(len(local)), face_axis] = 1.0
        safe = np.where(outside_norm > 0.0, outside_norm, 1.0)
        local_normal = np.where((outside_norm > 0.0)[:, None], outside / safe[:, None], face_normal) * np.where(
            local < 0.0, -1.0, 1.0)
        normal = np.stack([cos * local_normal[:, 0] - sin * local_normal[:, 1],
                           sin * local_normal[:, 0] + cos * local_normal[:, 1]], axis=1)
        return distance, normal


@dataclass(frozen=True)
class ObstacleWall:
    """A thin wall, a segment in the plane (it has no inside, so its distance is never negative).

    start: (x, y) of one end [m]
    end: (x, y) of the other end [m]
    key: where the obstacle is in the scene file, for error messages
    """

    start: tuple
    end: tuple
    key: str = field(default="obstacle", repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "start", pair(f"{self.key}.start", self.start))
        object.__setattr__(self, "end", pair(f"{self.key}.end", self.end))
        if self.start == self.end:
            raise ConfigError(f"{self.key}.end: the wall has zero length (start == end == {list(self.end)})")

    def signed_distance(self, points):
        """Distance of 2-D ``points`` (N, 2) [m] to the segment [m] and the unit normal (N, 2)
        pointing from the closest segment point to the point (the wall's left normal on it)."""
        start, end = np.asarray(self.start), np.asarray(self.end)
        direction = end - start
        offset = _as_points(points) - start
        fraction = np.clip(offset @ direction / (direction @ direction), 0.0, 1.0)
        gap = offset - fraction[:, None] * direction
        norm = np.linalg.norm(gap, axis=1)
        left = np.array([-direction[1], direction[0]]) / np.linalg.norm(direction)
        safe = np.where(norm > 0.0, norm, 1.0)
        normal = np.where((norm > 0.0)[:, None], gap / safe[:, None], left)
        return norm, normal


OBSTACLE_TYPES = {"circle": ObstacleCircle, "rectangle": ObstacleRectangle, "wall": ObstacleWall}
"""Obstacle classes by their ``type`` in the scene file."""


def obstacle_signed_distance(obstacles, points):
    """Signed distance from 2-D points to the nearest obstacle surface, and its outward normal.

    obstacles: sequence of ObstacleCircle / ObstacleRectangle / ObstacleWall
    points: array (N, 2) of positions [m]
    Returns (distance (N,) [m], negative inside an obstacle; normal (N, 2), unit, pointing out of
    the nearest obstacle). With no obstacles the distance is +inf and the normal zero.
    """
    points = _as_points(points)
    distance = np.full(len(points), np.inf)
    normal = np.zeros((len(points), 2))
    for obstacle in obstacles:
        obstacle_distance, obstacle_normal = obstacle.signed_distance(points)
        closer = obstacle_distance < distance
        distance = np.where(closer, obstacle_distance, distance)
        normal = np.where(closer[:, None], obstacle_normal, normal)
    return distance, normal


@dataclass(frozen=True)
class PlanProblem:
    """A planning problem of the obstacle-interaction planner (seed 004).

    target: desired tip position (x, y) [m]
    orientation: desired tip orientation, from the x axis [rad]
    length_range: (min, max) length of every section of the robot [m]
    curvature_range: (min, max) curvature of every actuated section [1/m]
    flexural_rigidity: EI of the inflated backbone [N m^2]
    critical_moment: base moment m_c at which the backbone wrinkles [N m]
    total_length_max: limit on the robot's total length (sum of its sections) [m]; None: no
        limit beyond the per-section ``length_range`` (as in seed 004)
    """

    target: tuple
    orientation: float
    length_range: tuple = (0.0, 2.0)
    curvature_range: tuple = (-2.0, 2.0)
    flexural_rigidity: float = 0.1
    critical_moment: float = 0.32
    total_length_max: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "target", pair("plan.target", self.target))
        float_field(self, "orientation", "plan.orientation")
        object.__setattr__(self, "length_range", value_range("plan.length_range", self.length_range, minimum=0.0))
        object.__setattr__(self, "curvature_range", value_range("plan.curvature_range", self.curvature_range))
        for name in ("flexural_rigidity", "critical_moment"):
            float_field(self, name, f"plan.{name}")
            positive(f"plan.{name}", getattr(self, name))
        if self.total_length_max is not None:
            float_field(self, "total_length_max", "plan.total_length_max")
            positive("plan.total_length_max", self.total_length_max)


@dataclass(frozen=True)
class VineScene:
    """A whole scene.

    name: scene name (the file's ``name``; the file name without suffix if absent)
    description: free text
    vine: robot parameters
    sim: time stepping
    obstacles: tuple of ObstacleCircle / ObstacleRectangle / ObstacleWall
    plan: planning problem, or None if the file has no ``[plan]`` table
    source: where the scene came from (file path, or "<dict>")
    """

    name: str
    description: str = ""
    vine: VineParams = VineParams()
    sim: SimParams = SimParams()
    obstacles: tuple = ()
    plan: PlanProblem | None = None
    source: str = "<dict>"

    def __post_init__(self):
        limit = self.vine.tube_radius / self.sim.dt
        if self.vine.growth_rate > limit:
            grown = self.vine.length + self.vine.growth_rate * self.sim.duration
            raise ConfigError(
                f"vine.growth_rate: {self.vine.growth_rate:g} m/s would grow the vine from {self.vine.length:g} m to "
                f"{grown:.3g} m in sim.duration {self.sim.duration:g} s, advancing the tip {self.vine.growth_rate * self.sim.dt:.3g} m "
                f"per step of sim.dt {self.sim.dt:.3g} s, more than the tube radius {self.vine.tube_radius:g} m: contacts "
                f"are found once per step, so the tip would pass through obstacles (at most {limit:.3g} m/s here)")


_TOP_KEYS = ("name", "description", "vine", "sim", "obstacles", "plan")
_OBSTACLE_KEYS = {"circle": ("center", "radius"), "rectangle": ("center", "size", "angle"), "wall": ("start", "end")}
_OPTIONAL_OBSTACLE_KEYS = {"angle"}
_REQUIRED_PLAN_KEYS = ("target", "orientation")


def _table(data, key):
    """The optional sub-table ``data[key]`` ({} if absent); ConfigError if it is not a table."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: expected a table, got {value!r}")
    return value


def _refuse_unknown(data, prefix, known):
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key (known: {', '.join(known)})")


def _string(key, value):
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _obstacle_from_dict(index, data):
    key = f"obstacles[{index}]"
    if not isinstance(data, dict):
        raise ConfigError(f"{key}: expected a table, got {data!r}")
    if "type" not in data:
        raise ConfigError(f"{key}.type: missing key (one of {', '.join(OBSTACLE_TYPES)})")
    kind = _string(f"{key}.type", data["type"])
    if kind not in OBSTACLE_TYPES:
        raise ConfigError(f"{key}.type: unknown obstacle type {kind!r} (known: {', '.join(OBSTACLE_TYPES)})")
    names = _OBSTACLE_KEYS[kind]
    _refuse_unknown(data, f"{key}.", ("type",) + names)
    for name in names:
        if name not in data and name not in _OPTIONAL_OBSTACLE_KEYS:
            raise ConfigError(f"{key}.{name}: missing key")
    values = {name: data[name] for name in names if name in data}
    return OBSTACLE_TYPES[kind](key=key, **values)


def _dataclass_from_table(cls, data, prefix):
    names = [item.name for item in fields(cls)]
    _refuse_unknown(data, prefix, names)
    return cls(**data)


def scene_from_dict(data, *, source="<dict>", default_name="scene"):
    """Build a validated ``VineScene`` from parsed TOML data.

    data: the parsed file (nested dicts)
    source: recorded as ``VineScene.source``
    default_name: the name used when ``data`` has no ``name``
    Raises ConfigError naming the key (without the file name).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"expected a table at the top level, got {data!r}")
    if not data:
        raise ConfigError("empty scene: a scene needs at least a [vine] table (an empty [vine] asks for the "
                          "default robot)")
    _refuse_unknown(data, "", _TOP_KEYS)
    name = _string("name", data.get("name", default_name))
    description = _string("description", data.get("description", ""))
    vine = _dataclass_from_table(VineParams, _table(data, "vine"), "vine.")
    if vine.stiffness_model == "linear" and vine.stiffness == 0.0:  # a VineParams of Python's may take a moment curve
        raise ConfigError("vine.stiffness: the linear stiffness model needs a positive stiffness, got 0")
    sim = _dataclass_from_table(SimParams, _table(data, "sim"), "sim.")
    obstacle_list = data.get("obstacles", [])
    if not isinstance(obstacle_list, list):
        raise ConfigError(f"obstacles: expected an array of tables ([[obstacles]]), got {obstacle_list!r}")
    obstacles = tuple(_obstacle_from_dict(index, item) for index, item in enumerate(obstacle_list))
    plan = None
    if "plan" in data:
        plan_data = _table(data, "plan")
        for key in _REQUIRED_PLAN_KEYS:
            if key not in plan_data:
                raise ConfigError(f"plan.{key}: missing key")
        plan = _dataclass_from_table(PlanProblem, plan_data, "plan.")
    if "vine" not in data:
        raise ConfigError("vine: missing table (an empty [vine] asks for the default robot)")
    return VineScene(name=name, description=description, vine=vine, sim=sim, obstacles=obstacles, plan=plan,
                     source=source)


def shipped_scene_dirs():
    """Folders searched for shipped scenes: ``softsnake/assets/vine``."""
    return [asset_folder("vine")]


def shipped_scene_names():
    """Sorted names of the shipped scenes (file names without ``.toml``)."""
    return sorted({path.stem for folder in shipped_scene_dirs() if folder.is_dir() for path in folder.glob("*.toml")})


def _resolve_scene_path(path):
    candidate = Path(path)
    if candidate.is_file():
        return candidate
    # A bare name (no folder, no suffix) may name a shipped scene.
    if candidate.name == str(path) and candidate.suffix == "":
        for folder in shipped_scene_dirs():
            shipped = folder / f"{candidate.name}.toml"
            if shipped.is_file():
                return shipped
    shipped = ", ".join(shipped_scene_names()) or "none"
    raise ConfigError(f"{path}: no such scene file, and no shipped scene of that name (shipped: {shipped})")


def load_scene(path):
    """Load and validate a vine scene.

    path: a TOML file, or the name of a shipped scene (e.g. "planner_navigation")
    Returns a ``VineScene``; raises ConfigError with a one-line message naming file and key.
    """
    resolved = _resolve_scene_path(path)
    data = read_toml(resolved)
    with naming_file(resolved):
        return scene_from_dict(data, source=str(resolved), default_name=resolved.stem)
