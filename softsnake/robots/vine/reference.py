"""Loaders for the vine-robot reference data (``shared/reference/vine``, see its README.md).

Everything is returned in SI units (m, s, rad, m/s) except the Chen et al. videos, whose metric
scale was never recorded (pixels; ``video.py`` measures it and converts them to metres). The folder is found, in order, from the ``folder`` keyword, the
environment variable ``SOFTSNAKE_REFERENCE`` (the reference root that holds ``vine/``), or
``../shared/reference/vine`` next to the repository root.

Two facts checked against the data and not spelled out in the README:

* Row k of a Jitosho rollout is the state at t = k dt (row 0 is the initial state, at rest, 0.30 m
  long). Rollout 1 ends 1.311 m long (contact slows the growth); rollout 2 touches no obstacle
  and ends at 0.30 + 0.205 * 449/90 = 1.3227 m.
* In the Chen videos ``walls.npy`` uses the image y axis (downwards) while ``points.npy`` has y
  upwards: only with the wall y coordinates negated do the robots stay on their side of the walls.
  :func:`load_chen_video` returns the walls in the frame of the points.
"""

import dataclasses
import os
from pathlib import Path

import numpy as np

from softsnake.errors import ConfigError

from ..assets import REPOSITORY_ROOT
from .scene import ObstacleRectangle

INCH = 0.0254
"""Metres per inch."""

MILLIMETRE = 1e-3
"""Metres per millimetre."""

JITOSHO_DT = 1.0 / 90.0
"""Time step of the Jitosho rollouts and of the wall-fit simulation [s]."""

JITOSHO_BODY_COUNT = 50
"""Rigid bodies in the cluttered-environment rollouts."""

JITOSHO_HALF_LENGTH = 0.003
"""Body half-length d of the cluttered-environment rollouts [m]."""

WALL_FIT_STEPS_PER_FRAME = 3
"""Simulation steps of 1/90 s between two video frames of the wall-fit video."""

_ENVIRONMENT_VARIABLE = "SOFTSNAKE_REFERENCE"


@dataclasses.dataclass(frozen=True)
class WallFitReference:
    """The real robot growing into a wall (seed 000 Fig. 7), in SI units.

    video_points: (8, 21, 2) points along the robot per video frame, base first [m]
    frame_times: (8,) time of each frame from the first one [s]
    dt: simulation time step of the original fit [s]
    growth_input: (22, 5) growth rate per prismatic joint per simulation step [m/s]
    wall: the wall, a rotated rectangle [m, rad]
    interp_matrix: (10, 21) as stored; its transpose maps the 10 pin positions to the 21 points
    contact_impulse_fit: (21,) as stored, in the original code's units (not converted)
    fit_initial_guess_z0: (2582,) as stored, the original fit's initial guess in its mm-based
        units (not converted). Layout seen in the data: 22 states of q (10 x (x, y, theta)) then
        v (30 values) [mm, rad, mm/s, rad/s], 21 x 60 zeros (model residuals), then the stiffness
        and damping guesses 50 and 10 (original units)
    published_tip_x_mae: seed 000's tip x mean absolute error of the fitted model [m]
    """

    video_points: np.ndarray
    frame_times: np.ndarray
    dt: float
    growth_input: np.ndarray
    wall: ObstacleRectangle
    interp_matrix: np.ndarray
    contact_impulse_fit: np.ndarray
    fit_initial_guess_z0: np.ndarray
    published_tip_x_mae: float

    def initial_state(self):
        """The first state of the original fit's initial guess in SI units: body poses (10, 3) and
        velocities (10, 3) [m, rad, m/s, rad/s] (``fit_initial_guess_z0`` is in mm)."""
        poses = self.fit_initial_guess_z0[:30].reshape(10, 3).copy()
        velocities = self.fit_initial_guess_z0[30:60].reshape(10, 3).copy()
        poses[:, :2] *= MILLIMETRE
        velocities[:, :2] *= MILLIMETRE
        return poses, velocities

    def frame_steps(self, dt):
        """The simulation step of each video frame for steps of ``dt`` [s], (8,) integers."""
        return np.round(self.frame_times / dt).astype(int)


def reference_folder(folder=None):
    """The vine reference folder as a Path; ConfigError if it does not exist.

    folder: explicit folder (str or Path); default: $SOFTSNAKE_REFERENCE/vine, else ../shared/reference/vine beside
        the repository root (a source checkout, or an editable install), else beside the current folder (a copy
        installed with ``pip install .``, run from the repository root)
    """
    if folder is not None:
        candidates = [Path(folder)]
    elif os.environ.get(_ENVIRONMENT_VARIABLE):
        candidates = [Path(os.environ[_ENVIRONMENT_VARIABLE]) / "vine"]
    else:
        candidates = [root.parent / "shared" / "reference" / "vine" for root in (REPOSITORY_ROOT, Path.cwd())]
    for path in candidates:
        if path.is_dir():
            return path
    tried = " or ".join(str(path) for path in dict.fromkeys(candidates))
    raise ConfigError(f"vine reference folder not found: {tried} (pass folder= or set {_ENVIRONMENT_VARIABLE})")


def reference_available(folder=None):
    """Whether the vine reference folder exists (see :func:`reference_folder`): tests that need the data
    skip without it."""
    try:
        reference_folder(folder)
    except ConfigError:
        return False
    return True


def _existing_file(path):
    if not path.is_file():
        raise ConfigError(f"reference file not found: {path}")
    return path


def _indexed_file(folder, pattern, index, what):
    """The file for one numbered data set, with the available numbers in the error."""
    path = folder / pattern.format(index)
    if not path.exists():
        stem, suffix = pattern.split("{}")
        available = sorted(p.name[len(stem):len(p.name) - len(suffix)] for p in folder.glob(pattern.format("*")))
        raise ConfigError(f"no {what} {index} in {folder} (available: {', '.join(available) or 'none'})")
    return path


def load_jitosho_rollout(n, *, folder=None):
    """One rollout of the original vine simulator in the cluttered environment.

    n: rollout number (1 or 2)
    folder: vine reference folder (see :func:`reference_folder`)
    Returns (t, q, v): t (450,) [s], q (450, 50, 3) body centre (x, y) [m] and angle theta [rad]
    per time step, base body first; v (450, 50, 3) their rates [m/s, rad/s].
    """
    path = _indexed_file(reference_folder(folder) / "jitosho_cluttered", "rollout_{}.csv", n, "rollout")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    columns = 2 * 3 * JITOSHO_BODY_COUNT
    if data.shape[1] != columns:
        raise ConfigError(f"{path}: expected {columns} columns (q then v), found {data.shape[1]}")
    steps = data.shape[0]
    q = data[:, :columns // 2].reshape(steps, JITOSHO_BODY_COUNT, 3)
    v = data[:, columns // 2:].reshape(steps, JITOSHO_BODY_COUNT, 3)
    return np.arange(steps) * JITOSHO_DT, q, v


def load_jitosho_obstacles(n, *, folder=None):
    """Obstacles of cluttered environment n as axis-aligned ObstacleRectangle objects [m].

    The file gives each rectangle as lower-left corner and size in inches.
    n: environment number (1 or 2)
    folder: vine reference folder (see :func:`reference_folder`)
    """
    path = _indexed_file(reference_folder(folder) / "jitosho_cluttered", "obstacles_{}.txt", n, "obstacle file")
    rows = np.loadtxt(path, ndmin=2) * INCH
    if rows.shape[1] != 4:
        raise ConfigError(f"{path}: expected lines 'x y w h', found {rows.shape[1]} columns")
    return [ObstacleRectangle(center=(x + w / 2, y + h / 2), size=(w, h), key=f"{path.name} line {line}")
            for line, (x, y, w, h) in enumerate(rows.tolist(), start=1)]


def load_wall_fit(*, folder=None):
    """The wall-fit video and fitting data of seed 000 Fig. 7 as a :class:`WallFitReference`.

    folder: vine reference folder (see :func:`reference_folder`)
    """
    path = _existing_file(reference_folder(folder) / "jitosho_wall_fit" / "wall_growth_video.npz")
    with np.load(path) as data:
        x, y = data["x_video_mm"], data["y_video_mm"]
        frame_times = np.arange(x.shape[0]) * WALL_FIT_STEPS_PER_FRAME * JITOSHO_DT
        # wall as given in the README: centre, thickness and length in mm, rotation in rad
        wall = ObstacleRectangle(center=(248.89 * MILLIMETRE, 356.28 * MILLIMETRE),
                                 size=(502.28 * MILLIMETRE, 30.0 * MILLIMETRE), angle=-0.02357, key="wall")
        return WallFitReference(
            video_points=np.stack([x, y], axis=-1) * MILLIMETRE,
            frame_times=frame_times,
            dt=JITOSHO_DT,
            growth_input=data["growth_U"] * MILLIMETRE,
            wall=wall,
            interp_matrix=data["interp_A"].copy(),
            contact_impulse_fit=data["contact_impulse_fit"].copy(),
            fit_initial_guess_z0=data["fit_initial_guess_z0"].copy(),
            published_tip_x_mae=1.1 * MILLIMETRE,
        )


def chen_video_ids(*, folder=None):
    """Numbers k of the available Chen et al. videos (folders ``vidK``), ascending.

    folder: vine reference folder (see :func:`reference_folder`)
    """
    video_root = reference_folder(folder) / "chen_real_video"
    return sorted(int(p.name[3:]) for p in video_root.glob("vid*") if p.name[3:].isdigit())


def load_chen_video(k, *, folder=None):
    """Skeleton points and walls of Chen et al. video k, in pixels of the rectified image.

    k: video number (see :func:`chen_video_ids`)
    folder: vine reference folder (see :func:`reference_folder`)
    Returns (frames, walls): frames is a list with one (n_t, 2) array of (x, y) points per video
    frame, base first; walls is an (S, 2, 2) float array of segments ((x1, y1), (x2, y2)) with y
    flipped from the stored file into the points' y-up frame (see the module docstring).
    """
    video_root = reference_folder(folder) / "chen_real_video"
    video = _indexed_file(video_root, "vid{}", k, "video")
    points = np.load(_existing_file(video / "points.npy"))
    walls = np.load(_existing_file(video / "walls.npy")).astype(float)
    if points.ndim != 3 or points.shape[2] != 2 or walls.ndim != 3 or walls.shape[1:] != (2, 2):
        raise ConfigError(f"{video}: points must be (T, 1+N, 2) and walls (S, 2, 2)")
    counts = points[:, 0, 0].astype(int)
    if np.any(counts < 0) or np.any(counts > points.shape[1] - 1):
        raise ConfigError(f"{video}/points.npy: point counts outside 0..{points.shape[1] - 1}")
    frames = [points[t, 1:count + 1].copy() for t, count in enumerate(counts)]
    walls[:, :, 1] *= -1.0
    return frames, walls


def rollout_tip(q, *, half_length=JITOSHO_HALF_LENGTH):
    """Distal end of the last body of each configuration [m].

    q: (..., bodies, 3) body centres and angles [m, rad]
    half_length: body half-length d [m]
    Returns (..., 2).
    """
    q = np.asarray(q, dtype=float)
    last = q[..., -1, :]
    return last[..., :2] + half_length * np.stack([np.cos(last[..., 2]), np.sin(last[..., 2])], axis=-1)


def rollout_length(q, *, half_length=JITOSHO_HALF_LENGTH):
    """Backbone length of pin/prismatic vine configurations [m].

    Bodies come in pairs joined by a prismatic joint (collinear), pairs are pinned end to end, so
    the length is the sum over pairs of the centre distance plus the two outer half-lengths.
    q: (..., bodies, 3) body centres and angles [m, rad], an even number of bodies
    half_length: body half-length d [m]
    Returns (...).
    """
    q = np.asarray(q, dtype=float)
    if q.shape[-2] % 2:
        raise ConfigError(f"pin/prismatic vines have an even number of bodies, got {q.shape[-2]}")
    centres = q[..., :2]
    gaps = np.linalg.norm(centres[..., 1::2, :] - centres[..., 0::2, :], axis=-1)
    return np.sum(gaps + 2.0 * half_length, axis=-1)
