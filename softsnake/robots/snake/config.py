"""The soft snake's parameter file: load ``snake.toml`` into frozen dataclasses and validate it.

Every parameter of the four-link snake lives in one TOML file (the shipped one is
``softsnake/assets/snake/snake.toml``). All values are SI (m, kg, s, Pa). The file's layout mirrors the
dataclasses below: top-level scalars of ``SnakeConfig`` and the tables ``[material]``, ``[link]``
(with ``[link.resolution.<name>]`` sub-tables), ``[cap]`` and ``[wheel]``.

Bad values raise ``ConfigError``, whose one-line message names the file and the key, before any
mesh is built. The dataclasses validate themselves too, so configurations made in code are
checked the same way.

Snake frame: the snake lies along x, z is up; every rigid module (``CapConfig``) carries one
wheel on each side (``WheelConfig.mount_offset`` and its mirror image in y).
"""

import math
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType

from softsnake.errors import ConfigError
from softsnake.validation import integer, naming_file, non_negative, number, positive, read_toml

from ..assets import asset_folder


@dataclass(frozen=True)
class MaterialConfig:
    """The link's silicone.

    young_modulus: Young's modulus Y [Pa]
    poisson_ratio: Poisson's ratio nu [-], in [0, 0.5)
    density: mass density [kg/m^3]
    element_poisson_ratio: Poisson's ratio given to the linear tetrahedra [-], in [0, 0.5), or None
        for ``poisson_ratio`` (optional key): linear tetrahedra lock as nu -> 0.5, so a
        nearly incompressible silicone may need a smaller value in the elements
    """

    young_modulus: float
    poisson_ratio: float
    density: float
    element_poisson_ratio: float | None = None

    def __post_init__(self):
        positive("material.young_modulus", self.young_modulus)
        for key in ("poisson_ratio", "element_poisson_ratio"):
            value = getattr(self, key)
            if value is None and key == "element_poisson_ratio":
                continue
            number(f"material.{key}", value)
            if not 0.0 <= value < 0.5:
                raise ConfigError(f"material.{key}: must lie in [0, 0.5), got {value}")
        positive("material.density", self.density)

    @property
    def tet_poisson_ratio(self):
        """Poisson's ratio of the tetrahedral elements [-]."""
        return self.poisson_ratio if self.element_poisson_ratio is None else self.element_poisson_ratio


PAPER_SNAKE_PARTICLES = 1456
"""Particles of the paper-resolution snake: 4 links of 13 sections of 28 points [-]."""

PAPER_SNAKE_FRAME_SECONDS = 0.12
"""Measured time per frame of one paper-resolution snake on one CPU core [s] (README, Results)."""

PAPER_SNAKE_ARRAY_BYTES = 11.5e6
"""Measured arrays of one paper-resolution snake [B] (README, Results)."""

MAX_LINK_PARTICLES = 10_000
"""Largest link mesh a snake config may ask for [particles per link]: 27 times the paper's 364.
A four-link snake of such links takes about 3.3 s per frame on one CPU core and 320 MB of arrays
(scaled from the paper mesh's measured 0.12 s and 11.5 MB), besides the tetrahedral meshing; a
larger mesh is far more likely a typo than a wish, and would run for hours without saying why."""


@dataclass(frozen=True)
class ResolutionConfig:
    """How finely one link is meshed.

    name: the resolution's name in the file (``[link.resolution.<name>]``)
    section_count: cross-sections along the link, including both ends [-]
    outer_ring_points: particles on the outer circle of each cross-section [-], even so that the
        top and bottom points lie on the inextensible layer y = 0
    chamber_ring_points: particles around each chamber of each cross-section [-], even so that
        every ring point has an opposite point for the chamber-limit constraints
    element_modulus_factor: factor on ``material.young_modulus`` for this resolution's tetrahedra
        [-] (optional key, default 1). Linear tetrahedra lock in bending, the more the coarser the
        mesh, so a coarse link bends less per psi than a fine one of the same silicone; the
        factor calibrates a coarse mesh to a finer one's curvature per psi. The actuation rows
        (Ecoflex columns) and everything else keep ``material.young_modulus``.
    """

    name: str
    section_count: int
    outer_ring_points: int
    chamber_ring_points: int
    element_modulus_factor: float = 1.0

    def __post_init__(self):
        prefix = f"link.resolution.{self.name}"
        integer(f"{prefix}.section_count", self.section_count, minimum=2)
        for key in ("outer_ring_points", "chamber_ring_points"):
            value = getattr(self, key)
            integer(f"{prefix}.{key}", value, minimum=4)
            if value % 2:
                raise ConfigError(f"{prefix}.{key}: must be even, got {value}")
        positive(f"{prefix}.element_modulus_factor", self.element_modulus_factor)
        per_section = self.outer_ring_points + 2 * self.chamber_ring_points
        particles = self.section_count * per_section
        if particles > MAX_LINK_PARTICLES:
            scale = 4 * particles / PAPER_SNAKE_PARTICLES
            raise ConfigError(
                f"{prefix}: {self.section_count} sections of {per_section} points make {particles} particles per "
                f"link, more than the limit of {MAX_LINK_PARTICLES} (the paper mesh has 364): a four-link snake "
                f"would need about {scale * PAPER_SNAKE_ARRAY_BYTES / 1e9:.2g} GB of arrays and "
                f"{scale * PAPER_SNAKE_FRAME_SECONDS:.2g} s per frame on one CPU core, besides the meshing")


@dataclass(frozen=True)
class LinkConfig:
    """Geometry of one soft link (axis +x, chambers side by side along y, layer at y = 0).

    length: link length along x [m]
    outer_diameter: diameter of the outer circle through the outer ring points [m]
    chamber_radius: circumradius of each polygonal chamber cross-section [m]
    chamber_offset: distance of each chamber axis from the inextensible layer y = 0 [m]
    resolutions: mesh resolutions by name (read-only mapping of ``ResolutionConfig``)
    """

    length: float
    outer_diameter: float
    chamber_radius: float
    chamber_offset: float
    resolutions: MappingProxyType

    def __post_init__(self):
        for key in ("length", "outer_diameter", "chamber_radius", "chamber_offset"):
            positive(f"link.{key}", getattr(self, key))
        if self.chamber_offset <= self.chamber_radius:
            raise ConfigError(
                f"link.chamber_offset: {self.chamber_offset} m must exceed link.chamber_radius "
                f"{self.chamber_radius} m so that the chambers do not cross the layer y = 0"
            )
        if not self.resolutions:
            raise ConfigError("link.resolution: at least one resolution is needed")
        for resolution in self.resolutions.values():
            # The chamber's circumcircle must fit inside the outer polygon's inscribed circle, so
            # the walls have positive thickness at every resolution.
            inner_radius = 0.5 * self.outer_diameter * math.cos(math.pi / resolution.outer_ring_points)
            if self.chamber_offset + self.chamber_radius >= inner_radius:
                raise ConfigError(
                    f"link.chamber_radius: chambers reach {self.chamber_offset + self.chamber_radius:.6g} m "
                    f"from the axis, not inside the outer wall ({inner_radius:.6g} m at resolution "
                    f"'{resolution.name}')"
                )

    def resolution(self, name):
        """The ``ResolutionConfig`` called ``name``; ConfigError if there is none."""
        try:
            return self.resolutions[name]
        except KeyError:
            known = ", ".join(sorted(self.resolutions))
            raise ConfigError(f"link.resolution: unknown resolution {name!r} (known: {known})") from None


@dataclass(frozen=True)
class CapConfig:
    """One rigid module (two ABS cap plates plus electronics) at each end of every link, as a box.

    length: size along the snake axis x [m]
    width: size along y [m]
    height: size along z [m]
    mass: total mass [kg]
    """

    length: float
    width: float
    height: float
    mass: float

    def __post_init__(self):
        for key in ("length", "width", "height", "mass"):
            positive(f"cap.{key}", getattr(self, key))


@dataclass(frozen=True)
class WheelConfig:
    """A passive wheel; each module carries two, at ``mount_offset`` and at its mirror image in y.

    radius: wheel radius [m]
    width: wheel width along its axle (y) [m]
    mass: wheel mass [kg]
    mount_offset: (x, y, z) of the wheel centre in the module frame (origin at the module's centre
        of mass, x along the snake) for the wheel on the +y side [m]
    """

    radius: float
    width: float
    mass: float
    mount_offset: tuple

    def __post_init__(self):
        for key in ("radius", "width", "mass"):
            positive(f"wheel.{key}", getattr(self, key))
        if not isinstance(self.mount_offset, tuple) or len(self.mount_offset) != 3:
            raise ConfigError(f"wheel.mount_offset: expected [x, y, z], got {self.mount_offset!r}")
        for value in self.mount_offset:
            number("wheel.mount_offset", value)


@dataclass(frozen=True)
class SnakeConfig:
    """The whole snake: ``link_count`` links joined by ``link_count + 1`` rigid modules.

    link_count: number of soft links [-]
    friction: Coulomb friction coefficient of every contact [-]
    stiff_compliance: compliance of the stiff distance constraints (chamber limit, perimeter,
        inextensible layer) [m/N]; the actuation rows are not stiff, their compliance follows
        from the material and the chamber area (``softsnake.robots.snake.robot.add_soft_link``)
    damping_time: stiffness-proportional damping of the compliant constraints: each constraint
        acts on c + damping_time * dc/dt [s]
    material: the link's silicone
    link: link geometry and mesh resolutions
    cap: the rigid modules
    wheel: the wheels
    resolution_name: the resolution chosen when the file was loaded
    """

    link_count: int
    friction: float
    stiff_compliance: float
    damping_time: float
    material: MaterialConfig
    link: LinkConfig
    cap: CapConfig
    wheel: WheelConfig
    resolution_name: str

    def __post_init__(self):
        integer("link_count", self.link_count, minimum=1)
        non_negative("friction", self.friction)
        non_negative("stiff_compliance", self.stiff_compliance)
        non_negative("damping_time", self.damping_time)
        self.link.resolution(self.resolution_name)
        for key in ("width", "height"):
            if getattr(self.cap, key) < self.link.outer_diameter:
                raise ConfigError(
                    f"cap.{key}: the module ({self.cap.width} x {self.cap.height} m) must cover the link "
                    f"end (diameter {self.link.outer_diameter} m)"
                )
        mount_x, mount_y, mount_z = self.wheel.mount_offset
        if abs(mount_x) > 0.5 * self.cap.length:
            raise ConfigError(f"wheel.mount_offset: axle x = {mount_x} m lies beyond the module")
        if abs(mount_y) < 0.5 * (self.cap.width + self.wheel.width):
            raise ConfigError(f"wheel.mount_offset: wheel at y = {mount_y} m intersects the module")
        # Standing on its wheels, the module's centre is radius - mount_z above the ground; the
        # module and the link (coaxial with it) must clear the ground.
        clearance = self.wheel.radius - mount_z - 0.5 * max(self.cap.height, self.link.outer_diameter)
        if clearance <= 0:
            raise ConfigError(
                f"wheel.radius: wheels of radius {self.wheel.radius} m mounted at z = {mount_z} m do "
                "not lift the modules and links off the ground"
            )

    @property
    def module_count(self):
        """Number of rigid modules (one between links and one at each end) [-]."""
        return self.link_count + 1

    @property
    def wheel_count(self):
        """Number of wheels, two per module [-]."""
        return 2 * self.module_count

    def resolution(self, name=None):
        """The ``ResolutionConfig`` called ``name``, or the one chosen at load time if None."""
        return self.link.resolution(self.resolution_name if name is None else name)


def _table(data, key, prefix):
    """The sub-table ``data[key]``; ConfigError if it is missing or not a table."""
    name = f"{prefix}{key}"
    if key not in data:
        raise ConfigError(f"{name}: missing table")
    if not isinstance(data[key], dict):
        raise ConfigError(f"{name}: expected a table, got {data[key]!r}")
    return data[key]


def _expect_keys(data, prefix, expected):
    """Refuse unknown and missing keys in one table."""
    unknown = sorted(set(data) - set(expected))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key")
    missing = [key for key in expected if key not in data]
    if missing:
        raise ConfigError(f"{prefix}{missing[0]}: missing key")


def _scalars(data, prefix, cls, *, skip=()):
    """Keyword arguments for ``cls`` from a table holding exactly its fields (less ``skip``)."""
    names = [field.name for field in fields(cls) if field.name not in skip]
    _expect_keys(data, prefix, names)
    return {name: data[name] for name in names}


def _material(data):
    """``MaterialConfig`` from the [material] table; ``element_poisson_ratio`` may be left out."""
    optional = ("element_poisson_ratio",)
    fields_given = _scalars({k: v for k, v in data.items() if k not in optional}, "material.", MaterialConfig,
                            skip=optional)
    fields_given.update({key: data[key] for key in optional if key in data})
    return MaterialConfig(**fields_given)


def snake_config_from_dict(data, *, resolution="paper"):
    """Build a validated ``SnakeConfig`` from parsed TOML data.

    data: the parsed file (nested dicts)
    resolution: name of the link mesh resolution to select
    Raises ConfigError naming the key (without the file name).
    """
    _expect_keys(data, "", ["link_count", "friction", "stiff_compliance", "damping_time",
                            "material", "link", "cap", "wheel"])
    link_data = _table(data, "link", "")
    resolutions = {}
    for name, table in _table(link_data, "resolution", "link.").items():
        prefix = f"link.resolution.{name}."
        if not isinstance(table, dict):
            raise ConfigError(f"{prefix[:-1]}: expected a table, got {table!r}")
        optional = ("element_modulus_factor",)
        given = _scalars({k: v for k, v in table.items() if k not in optional}, prefix, ResolutionConfig,
                         skip=("name",) + optional)
        given.update({key: table[key] for key in optional if key in table})
        resolutions[name] = ResolutionConfig(name=name, **given)
    link_fields = _scalars({k: v for k, v in link_data.items() if k != "resolution"}, "link.", LinkConfig,
                           skip=("resolutions",))
    wheel_fields = _scalars(_table(data, "wheel", ""), "wheel.", WheelConfig)
    if isinstance(wheel_fields["mount_offset"], list):
        wheel_fields["mount_offset"] = tuple(wheel_fields["mount_offset"])
    return SnakeConfig(
        link_count=data["link_count"],
        friction=data["friction"],
        stiff_compliance=data["stiff_compliance"],
        damping_time=data["damping_time"],
        material=_material(_table(data, "material", "")),
        link=LinkConfig(resolutions=MappingProxyType(resolutions), **link_fields),
        cap=CapConfig(**_scalars(_table(data, "cap", ""), "cap.", CapConfig)),
        wheel=WheelConfig(**wheel_fields),
        resolution_name=resolution,
    )


def default_config_path():
    """Path of the shipped ``snake.toml`` (``softsnake/assets/snake/``)."""
    path = asset_folder("snake") / "snake.toml"
    if not path.is_file():
        raise ConfigError(f"shipped snake.toml not found at {path}")
    return path


def load_snake_config(path=None, resolution="paper"):
    """Load and validate a snake parameter file.

    path: the TOML file; None loads the shipped ``softsnake/assets/snake/snake.toml``
    resolution: name of the link mesh resolution to select (``[link.resolution.<name>]``)
    Returns a ``SnakeConfig``; raises ConfigError with a one-line message naming file and key.
    """
    path = default_config_path() if path is None else Path(path)
    data = read_toml(path)
    with naming_file(path):
        return snake_config_from_dict(data, resolution=resolution)
