"""Animations a person can open without a USD viewer: an animated GIF of triangle meshes seen from
above, in perspective and, optionally, close up, side by side (matplotlib draws the frames, Pillow
writes the GIF).

A robot's animation is a list of ``Part`` lists, one list per frame: every part a triangle mesh in
world coordinates [m] with a colour. ``static`` parts (obstacles) are drawn in every frame. These
two views keep one camera for the whole animation, framing everything any frame shows. A
``CloseUp`` adds a third panel, in perspective from the same direction, whose camera follows one
point (a robot's centre of mass) from frame to frame and frames only a box around it, so that a
robot small against the whole scene shows its shape.

    frames = [[Part(points, faces, (0.9, 0.6, 0.2)), ...], ...]
    write_gif("run.gif", frames, times, title="3 snakes", close_up=CloseUp(centres, 0.75, "snake 1"))

GIF needs no encoder beyond Pillow (a matplotlib dependency) and opens in any web browser or
image viewer.
"""

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from mpl_toolkits.mplot3d.art3d import Poly3DCollection

from .machine import usable_cores
from .output_files import replaced_when_complete
from .plotting import STYLE

FPS_DEFAULT = 12.0
"""Frames per second of simulated time in an animation [1/s]; the GIF plays in real time."""

FRAMES_MAX = 240
"""Most frames an animation holds [-]: a longer run is sampled more sparsely and plays faster."""

DPI = 90
"""Resolution of the frames [dots per inch]."""

HEIGHT = 4.5
"""Height of the pictures [inch]."""

ELEVATION = 28.0
"""Elevation of the perspective cameras above the ground plane [deg]."""

AZIMUTH = -115.0
"""Direction from which the perspective cameras look, from the +x axis [deg]: from the right-hand
side of a robot heading along +x, a little behind it."""

ZOOM = 1.25
"""How much of the perspective panel its box fills [-]."""

CLOSE_UP_ZOOM = 1.8
"""How much of the close-up panel its box fills [-]: more than ``ZOOM``, for the robot's details;
the box's far corners may leave the panel, the robot in its middle does not."""

LIGHT = np.array([0.3, -0.4, 0.87]) / np.linalg.norm([0.3, -0.4, 0.87])
"""Direction toward the light for shading the faces [-]."""


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """One triangle mesh of a frame: ``points`` (n, 3) [m], ``faces`` (m, 3) indices into points,
    ``color`` RGB in [0, 1]."""

    points: np.ndarray
    faces: np.ndarray
    color: tuple


@dataclasses.dataclass(frozen=True, eq=False)
class CloseUp:
    """The third panel's camera: from the perspective panel's direction, it looks at ``centers``
    (frames, 3) [m], one point per frame, and frames a box ``span`` wide and deep [m] around it;
    ``title`` names what it follows."""

    centers: np.ndarray
    span: float
    title: str = "close-up"


def frame_stride(frame_count, dt, fps=FPS_DEFAULT, frames_max=FRAMES_MAX):
    """Every how many simulation frames of ``dt`` [s] an animation of ``frame_count`` frames takes a
    picture: ``fps`` pictures per simulated second, at most ``frames_max`` in all [-]."""
    stride = max(1, int(round(1.0 / (fps * dt))))
    return max(stride, int(np.ceil(frame_count / frames_max)))


# --------------------------------------------------------------------------- meshes of shapes


def quat_rotate(quat_xyzw, points):
    """``points`` (n, 3) rotated by the unit quaternion (x, y, z, w)."""
    x, y, z, w = (float(v) for v in quat_xyzw)
    rotation = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return np.asarray(points) @ rotation.T


def box_mesh(half_extents):
    """Corners (8, 3) and triangles (12, 3) of a box centred at the origin [m]."""
    hx, hy, hz = half_extents
    corners = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    faces = [tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))]
    return corners, np.asarray(faces, dtype=np.int64)


def cylinder_mesh(radius, half_height, sides=10):
    """Points (2 sides + 2, 3) and triangles of a closed cylinder along z centred at the origin [m]."""
    angle = 2.0 * np.pi * np.arange(sides) / sides
    ring = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    points = np.vstack([np.column_stack([ring, np.full(sides, -half_height)]),
                        np.column_stack([ring, np.full(sides, half_height)]),
                        [[0.0, 0.0, -half_height], [0.0, 0.0, half_height]]])
    faces = []
    for k in range(sides):
        a, b = k, (k + 1) % sides
        faces += [(a, b, b + sides), (a, b + sides, a + sides), (2 * sides, b, a), (2 * sides + 1, a + sides, b + sides)]
    return points, np.asarray(faces, dtype=np.int64)


def posed(mesh, position, quat_xyzw, color):
    """The ``Part`` of a (points, faces) mesh moved to a body pose (position [m], quaternion x, y, z, w)."""
    points, faces = mesh
    return Part(quat_rotate(quat_xyzw, points) + np.asarray(position, dtype=np.float64), faces, color)


# --------------------------------------------------------------------------- drawing


def _triangles(parts):
    """(triangles (k, 3, 3) [m], RGB colours (k, 3)) of all parts, shaded by the light."""
    if not parts:
        return np.zeros((0, 3, 3)), np.zeros((0, 3))
    triangles = np.concatenate([np.asarray(part.points, dtype=np.float64)[part.faces] for part in parts])
    colors = np.concatenate([np.tile(part.color, (len(part.faces), 1)) for part in parts])
    normal = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-30)
    shade = 0.55 + 0.45 * np.abs(normal @ LIGHT)
    return triangles, np.clip(colors * shade[:, None], 0.0, 1.0)


def _extent(frames, static):
    """(lowest, highest) coordinates (3,) [m] of all points of all frames and the static parts."""
    points = [np.asarray(part.points).reshape(-1, 3) for frame in frames for part in frame]
    points += [np.asarray(part.points).reshape(-1, 3) for part in static]
    points = np.concatenate(points)
    return points.min(axis=0), points.max(axis=0)


def _with_margin(extent):
    """``extent`` widened on every side by a twentieth of its larger horizontal size [m]."""
    low, high = extent
    margin = 0.05 * max(float(np.max(high[:2] - low[:2])), 1e-3)
    return low - margin, high + margin


def _frame_box(axes, low, high, zoom):
    """Frame the 3D ``axes`` on the box from ``low`` to ``high`` (3,) [m], ``zoom`` as in
    ``ZOOM``: metres equal on every axis, but the height at least a twentieth of the width."""
    span = high - low
    top_z = low[2] + max(span[2], 0.05 * max(span[0], span[1]))
    axes.set_xlim(low[0], high[0])
    axes.set_ylim(low[1], high[1])
    axes.set_zlim(low[2], top_z)
    axes.set_box_aspect((span[0], span[1], top_z - low[2]), zoom=zoom)


def _style_perspective(axes, title):
    """Camera, ticks and labels of a perspective panel (the height's scale is left out: the scenes
    are flat, a few centimetres of z would only crowd the picture)."""
    axes.view_init(elev=ELEVATION, azim=AZIMUTH)
    axes.set_zticks([])
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(MaxNLocator(4))
    axes.set_xlabel("x [m]")
    axes.set_ylabel("y [m]")
    axes.set_title(title)


def _inside(triangles, colors, center, span):
    """The triangles (k, 3, 3) [m] and colours (k, 3) whose centres lie within ``span`` / 2 of
    ``center`` in x and y [m]."""
    keep = np.all(np.abs(triangles[:, :, :2].mean(axis=1) - center[:2]) <= 0.5 * span, axis=1)
    return triangles[keep], colors[keep]


class _Views:
    """The panels of an animation, ``height`` inches tall: a top view (x, y), whose width follows
    the scene's shape, a perspective view and, given a ``CloseUp``, a perspective close-up."""

    def __init__(self, extent, title, height, close_up=None):
        low, high = _with_margin(extent)
        span = high - low
        top_width = float(np.clip(0.9 * height * span[0] / max(span[1], 1e-9), 0.45 * height, 1.8 * height))
        widths = (top_width, 1.35 * height) + ((1.35 * height,) if close_up is not None else ())
        self.figure = Figure(figsize=(sum(widths), height), dpi=DPI, layout="constrained")
        self.figure.get_layout_engine().set(h_pad=0.12, w_pad=0.08)
        grid = self.figure.add_gridspec(1, len(widths), width_ratios=widths)
        self.top = self.figure.add_subplot(grid[0, 0])
        self.perspective = self.figure.add_subplot(grid[0, 1], projection="3d")
        self.close_up = None
        if close_up is not None:
            self.close_up = self.figure.add_subplot(grid[0, 2], projection="3d")
            _style_perspective(self.close_up, close_up.title)
            self.close_up_span = float(close_up.span)
            # The close-up's floor is the lowest point drawn, not the margin below it: at its low
            # camera, the robot stands on it rather than floating above it.
            self.close_up_z = extent[0][2], extent[1][2]
        self.title = title
        self.canvas = FigureCanvasAgg(self.figure)
        self.top.set_xlim(low[0], high[0])
        self.top.set_ylim(low[1], high[1])
        self.top.set_aspect("equal")
        self.top.set_xlabel("x [m]")
        self.top.set_ylabel("y [m]")
        self.top.set_title("from above")
        _frame_box(self.perspective, low, high, ZOOM)
        _style_perspective(self.perspective, "perspective")
        self._artists = []
        self._laid_out = False

    def _follow(self, triangles, colors, center):
        """Move the close-up's box to ``center`` (3,) [m]; returns its collection of the triangles
        inside the box (the others would be drawn outside the panel)."""
        center = np.asarray(center, dtype=np.float64)
        half = 0.5 * self.close_up_span
        low = np.array([center[0] - half, center[1] - half, self.close_up_z[0]])
        high = np.array([center[0] + half, center[1] + half, self.close_up_z[1]])
        _frame_box(self.close_up, low, high, CLOSE_UP_ZOOM)
        near, near_colors = _inside(triangles, colors, center, self.close_up_span)
        collection = Poly3DCollection(near, facecolors=near_colors, edgecolors="none")
        # Not clipped to the axes' rectangle, which the zoomed box overhangs: the triangles are
        # already only those in the box.
        collection.set_clip_on(False)
        self.close_up.add_collection3d(collection)
        return collection

    def draw(self, parts, time, center=None):
        """The picture (RGB array) of ``parts`` at ``time`` [s], the close-up looking at ``center``
        (3,) [m]."""
        for artist in self._artists:
            artist.remove()
        triangles, colors = _triangles(parts)
        # Painter's order from above: lower faces first.
        order = np.argsort(triangles[:, :, 2].mean(axis=1))
        flat = PolyCollection(triangles[order][:, :, :2], facecolors=colors[order], edgecolors="none")
        solid = Poly3DCollection(triangles, facecolors=colors, edgecolors="none")
        self.top.add_collection(flat)
        self.perspective.add_collection3d(solid)
        self.figure.suptitle(f"{self.title}   t = {time:5.2f} s")
        self._artists = [flat, solid]
        if self.close_up is not None:
            self._artists.append(self._follow(triangles, colors, center))
        self.canvas.draw()
        if not self._laid_out:
            # Lay the panels out once, for the first picture; every later one keeps that layout.
            self.figure.set_layout_engine("none")
            self._laid_out = True
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()


PICTURES_PER_PROCESS = 12
"""Fewest pictures worth a drawing process of their own [-]: a process takes about as long to start (a new
interpreter importing softsnake, ~1 s on this project's 2-core CI machine) as six pictures of a 16-snake gait take
to draw (0.17 s each there). Measured there: 48 such pictures in 8.4 s in one process, 7.3 s in two."""


def drawing_processes(picture_count, cores=None):
    """How many processes ``render_frames`` draws ``picture_count`` pictures in: one per ``PICTURES_PER_PROCESS``
    pictures, at most one per core (``cores``, default those this process may run on: a container's, not its
    host's)."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(cores, picture_count // PICTURES_PER_PROCESS))


def render_frames(frames, times, *, title="", static=(), height=HEIGHT, close_up=None, processes=None):
    """The pictures (RGB arrays) of an animation: ``frames`` a list of ``Part`` lists, ``times`` the
    simulated time of each [s], ``static`` parts drawn in every frame, ``close_up`` (a ``CloseUp``
    with one centre per frame, or None) the third panel's camera.

    ``processes``: how many processes draw them (default ``drawing_processes``), each a contiguous run of the
    pictures. Every process lays its panels out on picture 0 first, as one process does, so the pictures are the
    same, byte for byte, in any number of processes (matplotlib draws the 240 pictures of a long gait in ~1 minute
    in one process)."""
    if len(frames) != len(times) or not frames:
        raise ValueError("an animation needs one time per frame and at least one frame")
    if close_up is not None and len(close_up.centers) != len(frames):
        raise ValueError("a close-up needs one centre per frame")
    static = list(static)
    centers = list(close_up.centers) if close_up is not None else [None] * len(frames)
    setup = (_extent(frames, static), title, height, close_up, static)
    jobs = list(zip(frames, times, centers))
    processes = drawing_processes(len(jobs)) if processes is None else max(1, min(int(processes), len(jobs)))
    if processes == 1:
        return _draw_pictures(setup, jobs)
    bounds = np.linspace(0, len(jobs), processes + 1).round().astype(int)
    runs = [(jobs[low:high], None if low == 0 else jobs[0]) for low, high in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(processes) as threads:  # each thread waits on its process's pipes
        drawn = list(threads.map(lambda run: _draw_in_process(setup, *run), runs))
    return [picture for pictures in drawn for picture in pictures]


def _draw_in_process(setup, jobs, layout):
    """``_draw_pictures(setup, jobs, layout)`` in a new interpreter (``python -m softsnake.animation FILE``): its
    arguments pickled into its input, its pictures into FILE (not its output, which an import may print to).
    Not multiprocessing: its children import the caller's main script again (a script without a ``__main__``
    guard would run twice), and a forked child would inherit the caller's CUDA context."""
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="softsnake-draw-") as folder:
        pictures = Path(folder) / "pictures.pickle"
        child = subprocess.run([sys.executable, "-m", "softsnake.animation", str(pictures)],
                               input=pickle.dumps((setup, jobs, layout)), capture_output=True, env=env, check=False)
        if child.returncode != 0:
            last = child.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"a drawing process failed (exit status {child.returncode}): {last[0]}")
        return pickle.loads(pictures.read_bytes())


def _draw_pictures(setup, jobs, layout=None):
    """The pictures of ``jobs`` ((parts, time, centre) each) in panels made from ``setup``
    ((extent, title, height, close_up, static)); ``layout``: the job whose picture lays the panels out
    (drawn and dropped; None: the first of ``jobs``)."""
    extent, title, height, close_up, static = setup
    with matplotlib.rc_context(STYLE):
        views = _Views(extent, title, height, close_up)
        if layout is not None:
            views.draw(static + list(layout[0]), layout[1], layout[2])
        return [views.draw(static + list(parts), time, center) for parts, time, center in jobs]


def write_gif(path, frames, times, *, title="", static=(), fps=FPS_DEFAULT, height=HEIGHT, close_up=None):
    """Write an animated GIF of ``frames`` (see ``render_frames``) at ``path`` (complete or absent),
    ``fps`` pictures per second; returns the path."""
    from PIL import Image

    pictures = [Image.fromarray(rgb) for rgb in render_frames(frames, times, title=title, static=static, height=height,
                                                              close_up=close_up)]
    duration_ms = max(20, int(round(1000.0 / fps)))
    with replaced_when_complete(path) as temporary:
        pictures[0].save(temporary, format="GIF", save_all=True, append_images=pictures[1:], duration=duration_ms,
                         loop=0, optimize=False)
    return path


if __name__ == "__main__":  # a drawing process of render_frames: pickled arguments in, pickled pictures to a file
    Path(sys.argv[1]).write_bytes(pickle.dumps(_draw_pictures(*pickle.loads(sys.stdin.buffer.read()))))
