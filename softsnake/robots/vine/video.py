"""Chen et al.'s real vine-robot videos (seed 003 sec. IV-B) in metres, as vine scenes, and the
errors and losses of rollouts against them.

The data (``shared/reference/vine/chen_real_video/vidK``, read by ``reference.load_chen_video``)
are skeleton points per video frame and wall segments, in pixels of a rectified top-down image
about 256 px wide, in a frame whose origin is the annotated base of the robot and whose +x axis is
the annotated launch direction. The first segment of ``walls.npy`` is that annotation (the base
marker, ending at the origin), not a wall. This module turns them into SI units and a scene the
batched simulator can roll out, and measures rollouts against them.

Scale (pixels to metres). Neither the data nor seed 003 record it, so it is measured:

* Tube diameter. Seed 003 sec. III-A measures the wrinkling criterion on "the LDPE tubing used to
  make the vine robot in Sec. IV-B": "LDPE tubing (67mm diameter, 2mil, ULine)"; sec. IV-B says
  the video robots are LDPE tubes 0.002 in (2 mil) thick. So the tube diameter is 67 mm
  (``TUBE_DIAMETER``).
* Tube radius in pixels. The tube's centre line (the skeleton) cannot come closer to a wall than
  the tube radius, and it lies at about that distance wherever the robot grows along a wall.
  :func:`wall_clearance_pixels` measures, over all frames of a video, the distance from every
  skeleton point to the nearest wall, leaving out the 30 px behind the tip (where the
  segmentation of the tip and its shadow moves the skeleton end onto walls) and the 5 % at
  each end of a wall (the hand-clicked ends are loose: the robot rounds them closer), and takes
  its 1st percentile. The six videos give 13.0, 12.2, 12.3, 12.3, 13.2 and 8.0 px (the median,
  12.3 px, is ``TUBE_RADIUS_PIXELS``). Five agree within 8 %; video 6 is the outlier.
* Scale. ``PIXELS_PER_METRE = 12.3 px / 33.5 mm = 367 px/m`` (2.72 mm per pixel), one scale for
  every video, assuming one test bed whose annotated rectangle the rectification maps onto the
  image width in every video. The rectified image, 256 px wide, is then 0.70 m wide, and the tube's 24.6 px
  diameter survives the 11 x 11 px morphological opening of the authors' segmentation (their
  public code, CoMMALab/DiffVineSimPy ``videoparser/framer.py``), which removes anything thinner.
* Cross-check: the skeleton starts a steady gap past the base (thinning shortens a band's cut
  end by about its half-width). :func:`base_gap_pixels` gives 7.6, 9.5, 6.1, 15.0, 14.1 and
  12.0 px, median 10.8 px: 12 % below the wall clearance.
* Uncertainty: about +-15 % (the spread of the estimates). The clearance is an upper bound of the
  radius if the walls were annotated at their mid-plane rather than at their faces (their
  thickness is not recorded); the base gap does not depend on the walls.

Time. Seed 003 does not give the frame rate. The authors' extraction keeps every third camera
frame (``framer.py``); with the usual 30 frames per second of a camera the frames are 0.1 s apart
(``FRAME_INTERVAL``), nine steps of the simulator's 1/90 s. This is an assumption: every time
argument takes another interval. The extraction also dropped frames whose skeleton was shorter
than 90 % of the last kept one; the data do not say where, so the frames are taken as evenly
spaced.

Base and heading. The robot is pinned at the origin (the annotated base). Its initial heading is
the mean direction, from the base, of the skeleton points of the first ``HEADING_FRAMES`` frames.

Length and growth. The length of frame t is the distance from the base to the first skeleton
point plus the skeleton's arc length (the skeleton ends about a tube radius short of the tube's
end, as the simulated backbone ends at the centre of its last contact sphere). The raw lengths are
noisy and sometimes shrink (segmentation); ``VineVideo.lengths`` is their least-squares
non-decreasing fit (pool adjacent violators), the per-frame length schedule a rollout follows;
``VineVideo.growth_rate`` is the least-squares constant growth rate (seed 003 fits one, u).

Simulation set-up (:func:`video_vine`, :func:`video_scene`, :func:`rollout_videos`). The vine
starts straight along the heading at the first frame's length, pinned at the origin, with the
tube radius of the video (33.5 mm), contact with the walls (``ObstacleWall``; the base marker is
left out), and a growth rate set every frame from the length schedule, so the simulated length
follows the video's. Stiffness, damping, mass, inertia and the link count come from the given
``VineParams`` (the defaults: seed 000's cluttered example), or from a moment curve
(``robot.mlp_moment_curve``). The bodies fill half of the first frame's length
(``BODY_FILL``), so a video state of any later frame can be laid out with the same bodies.

Video states (:func:`video_state`, for seed 003's one-step loss: each step starts from the video).
The vine's pins are laid along the frame's backbone, evenly in arc length, after three
corrections the raw skeleton needs before a rigid-tube model can start from it: it is smoothed over
a tube radius on each side (it is a chain of pixels, and one-pixel steps read as 30 degree bends
between pins 2 px apart); it is cut where it crosses a wall (near wall ends and under a tip pressed
onto a wall the segmentation runs over walls); and it is kept a tube radius from the walls (the
tip and the parts rounding a wall end come closer than the radius in most frames: a vine started
inside a wall is thrown out). The velocities are zero or the backward difference over one frame.

Errors and losses against the video (``video_errors``, ``one_step_loss``, ``rollout_loss``) are
``softsnake.robots.vine.backbones``; :func:`one_step_predictions` computes seed 003's one-step
predictions with the engine: one world per start frame, each started from the video state, grown over
one frame interval.
"""

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from softsnake.errors import ConfigError, ModelError
from softsnake.validation import positive_integer, positive_number

from .backbones import (  # noqa: F401  (errors and losses: imported from here too)
    SHAPE_SAMPLES,
    VideoErrors,
    one_step_loss,
    polyline_length,
    resample_polyline,
    rollout_loss,
    shape_error,
    tip_error,
    video_errors,
)
from .reference import chen_video_ids, load_chen_video
from .scene import (
    ObstacleWall,
    SimParams,
    VineParams,
    VineScene,
    obstacle_signed_distance,
)
from .simulation import VineBatch, VineSpec, pin_points

TUBE_DIAMETER = 0.067
"""Diameter of the video robots' LDPE tube [m] (seed 003 sec. III-A)."""

TUBE_RADIUS_PIXELS = 12.3
"""Tube radius in the videos' pixels [px]: the median over the six videos of wall_clearance_pixels."""

PIXELS_PER_METRE = TUBE_RADIUS_PIXELS / (0.5 * TUBE_DIAMETER)
"""Scale of the rectified video images [px/m] (module docstring): 367 px/m."""

FRAME_INTERVAL = 0.1
"""Time between two data frames [s]: every third frame of a 30 frames/s camera (an assumption)."""

DT = SimParams().dt
"""Simulation time step of the video rollouts [s] (1/90 s, seeds 000 and 003)."""

CLEARANCE_TIP_MARGIN_PIXELS = 30.0
"""Skeleton length behind the tip left out of the wall clearance [px]."""

CLEARANCE_PERCENTILE = 1.0
"""Percentile of the skeleton-to-wall distances taken as the wall clearance [%]."""

CLEARANCE_WALL_END_FRACTION = 0.05
"""Fraction of a wall's length at each end left out of the wall clearance [-]."""

BASE_GAP_MIN_LENGTH_PIXELS = 40.0
"""Skeletons shorter than this are left out of the base gap [px]."""

HEADING_FRAMES = 10
"""First frames whose skeleton points give the initial heading [-]."""

BODY_FILL = 0.5
"""Fraction of the first frame's length taken by the bodies end to end (the rest: link gaps) [-]."""

WALL_CLEARING_ITERATIONS = 10
"""Passes of pins_clear_of_walls [-]."""


# ------------------------------------------------------------------------------------------ geometry
def increasing_fit(values):
    """The least-squares non-decreasing fit of a sequence (pool adjacent violators): (n,)."""
    values = np.asarray(values, dtype=float)
    means, counts = [], []
    for value in values:
        means.append(value)
        counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            count = counts[-2] + counts[-1]
            means[-2] = (means[-2] * counts[-2] + means[-1] * counts[-1]) / count
            counts[-2] = count
            means.pop()
            counts.pop()
    return np.repeat(means, counts)


def _wall_distances(points, walls, end_fraction):
    """Distance from points (n, 2) to the nearest wall interior (S, 2, 2) [same units]; inf where
    a point's foot lies within ``end_fraction`` of a wall's ends on every wall."""
    distance = np.full(len(points), np.inf)
    for start, end in walls:
        along = end - start
        length = np.linalg.norm(along)
        unit = along / length
        offset = points - start
        foot = offset @ unit
        across = np.abs(offset[:, 0] * unit[1] - offset[:, 1] * unit[0])
        inside = (foot > end_fraction * length) & (foot < (1.0 - end_fraction) * length)
        distance = np.minimum(distance, np.where(inside, across, np.inf))
    return distance


def wall_clearance_pixels(frames, walls, *, tip_margin=CLEARANCE_TIP_MARGIN_PIXELS, percentile=CLEARANCE_PERCENTILE,
                          end_fraction=CLEARANCE_WALL_END_FRACTION):
    """The tube radius a video shows [px]: a low percentile of the distance from its skeleton points
    to the walls (module docstring, "Scale").

    frames: list of (n_t, 2) skeleton points per frame, base first [px]
    walls: (S, 2, 2) wall segments, without the base marker [px]
    tip_margin: skeleton length behind the tip left out [px]
    percentile: the percentile of the distances taken [%]
    end_fraction: fraction of each wall's length at each end left out [-]
    """
    walls = np.asarray(walls, dtype=float)
    distances = []
    for points in frames:
        points = np.asarray(points, dtype=float)
        arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
        body = points[arc <= arc[-1] - tip_margin]
        if len(body):
            distances.append(_wall_distances(body, walls, end_fraction))
    distances = np.concatenate(distances) if distances else np.zeros(0)
    distances = distances[np.isfinite(distances)]
    if distances.size == 0:
        raise ConfigError("no skeleton point lies beside a wall: the wall clearance is undefined")
    return float(np.percentile(distances, percentile))


def base_gap_pixels(frames, *, min_length=BASE_GAP_MIN_LENGTH_PIXELS):
    """The median distance from the base (the origin) to the first skeleton point, over the frames
    whose skeleton is at least ``min_length`` long [px]: about the tube radius (module docstring)."""
    gaps = [np.linalg.norm(points[0]) for points in frames if len(points) and polyline_length(points) >= min_length]
    if not gaps:
        raise ConfigError(f"no skeleton is {min_length} px long: the base gap is undefined")
    return float(np.median(gaps))


def initial_heading(skeletons, *, frames=HEADING_FRAMES):
    """Initial heading [rad]: the direction of the mean unit vector from the base (the origin) to the
    skeleton points of the first ``frames`` frames."""
    points = np.concatenate([np.asarray(s, dtype=float) for s in skeletons[:frames]])
    norms = np.linalg.norm(points, axis=1)
    points, norms = points[norms > 0.0], norms[norms > 0.0]
    if len(points) == 0:
        raise ConfigError("the first frames have no skeleton point away from the base: no heading")
    mean = (points / norms[:, None]).mean(axis=0)
    return math.atan2(mean[1], mean[0])


# ------------------------------------------------------------------------------------------ the videos
@dataclass(frozen=True, eq=False)
class VineVideo:
    """One of Chen et al.'s real videos in SI units (module docstring).

    number: video number k (folder ``vidK``)
    skeletons: tuple of (n_t, 2) skeleton points per frame, base first (the base itself not among
        them) [m]
    walls: tuple of ObstacleWall, the walls without the base marker [m]
    base_marker: (2, 2) the annotated base segment, ending at the origin [m]
    frame_interval: time between frames [s]
    pixels_per_metre: the scale used [px/m]
    heading: initial heading at the base [rad]
    raw_lengths: (T,) length per frame from the data [m]
    lengths: (T,) non-decreasing length schedule, the least-squares fit of raw_lengths [m]
    """

    number: int
    skeletons: tuple
    walls: tuple
    base_marker: np.ndarray
    frame_interval: float
    pixels_per_metre: float
    heading: float
    raw_lengths: np.ndarray
    lengths: np.ndarray

    @property
    def name(self):
        """Scene name of the video: ``chen_video_K``."""
        return f"chen_video_{self.number}"

    @property
    def frame_count(self):
        """Number of frames T [-]."""
        return len(self.skeletons)

    @property
    def times(self):
        """(T,) time of every frame from the first [s]."""
        return np.arange(self.frame_count) * self.frame_interval

    @property
    def duration(self):
        """Time from the first frame to the last [s]."""
        return (self.frame_count - 1) * self.frame_interval

    @property
    def final_length(self):
        """Length at the last frame, from the length schedule [m]."""
        return float(self.lengths[-1])

    @property
    def tube_radius(self):
        """Tube radius [m] (seed 003: 67 mm diameter)."""
        return 0.5 * TUBE_DIAMETER

    @property
    def growth_rate(self):
        """Least-squares constant growth rate of the raw lengths [m/s]."""
        return float(np.polyfit(self.times, self.raw_lengths, 1)[0])

    def frame_growth_rates(self):
        """(T - 1,) growth rate over every frame interval from the length schedule [m/s], >= 0."""
        return np.diff(self.lengths) / self.frame_interval

    def clip(self, frames):
        """The video's first ``frames`` frames (>= 2), a VineVideo (its heading and scale unchanged)."""
        frames = positive_integer("frames", frames)
        if not 2 <= frames <= self.frame_count:
            raise ConfigError(f"video {self.number} has {self.frame_count} frames: a clip takes 2 to that many, got {frames}")
        return replace(self, skeletons=self.skeletons[:frames], raw_lengths=self.raw_lengths[:frames],
                       lengths=self.lengths[:frames])

    def backbone(self, frame):
        """The robot's backbone at ``frame``: the base (origin), then the skeleton points [m], (n + 1, 2)."""
        return np.concatenate([np.zeros((1, 2)), self.skeletons[frame]])

    def backbones(self):
        """The backbone of every frame, a list of (n_t + 1, 2) arrays [m]."""
        return [self.backbone(frame) for frame in range(self.frame_count)]


def load_video(number, *, folder=None, pixels_per_metre=PIXELS_PER_METRE, frame_interval=FRAME_INTERVAL):
    """Video ``number`` of Chen et al. in SI units, a :class:`VineVideo`.

    folder: vine reference folder (``reference.reference_folder``)
    pixels_per_metre: scale [px/m] (default: the measured ``PIXELS_PER_METRE``)
    frame_interval: time between frames [s] (default: the assumed ``FRAME_INTERVAL``)
    """
    scale = positive_number("pixels_per_metre", pixels_per_metre, unit="px/m")
    frame_interval = positive_number("frame_interval", frame_interval, unit="s")
    frames, walls = load_chen_video(number, folder=folder)
    if len(walls) < 2 or not np.array_equal(walls[0, 1], [0.0, 0.0]):
        raise ConfigError(f"video {number}: walls.npy must start with the base marker (a segment ending at the "
                          f"origin) and hold at least one wall")
    if len(frames) < 2 or any(len(points) < 2 for points in frames):
        raise ConfigError(f"video {number}: every frame needs at least two skeleton points, and two frames at least")
    skeletons = tuple(np.asarray(points, dtype=float) / scale for points in frames)
    raw_lengths = np.array([np.linalg.norm(s[0]) + polyline_length(s) for s in skeletons])
    obstacles = tuple(ObstacleWall(tuple(start / scale), tuple(end / scale), key=f"video {number} wall {index}")
                      for index, (start, end) in enumerate(walls[1:], start=1))
    return VineVideo(number=number, skeletons=skeletons, walls=obstacles, base_marker=walls[0] / scale,
                     frame_interval=frame_interval, pixels_per_metre=scale, heading=initial_heading(skeletons),
                     raw_lengths=raw_lengths, lengths=increasing_fit(raw_lengths))


def load_videos(numbers=None, **options):
    """Several videos (default: every one in the reference folder), a list of :class:`VineVideo`;
    ``options``: those of :func:`load_video`."""
    numbers = chen_video_ids(folder=options.get("folder")) if numbers is None else numbers
    return [load_video(number, **options) for number in numbers]


# ------------------------------------------------------------------------------------------ simulation
def video_vine(video, vine=None, *, link_count=None):
    """The VineParams of a vine grown in ``video``: heading, initial length, tube radius, body
    half-length and growth rate from the video, everything else from ``vine`` (default VineParams()).

    link_count: links of the vine (default: ``vine.link_count``); the bodies fill ``BODY_FILL`` of the
        first frame's length.
    """
    vine = VineParams() if vine is None else vine
    links = vine.link_count if link_count is None else positive_integer("link count", link_count)
    length = float(video.lengths[0])
    return replace(vine, heading=video.heading, length=length, tube_radius=video.tube_radius, link_count=links,
                   body_half_length=BODY_FILL * length / (4.0 * links), growth_rate=max(video.growth_rate, 0.0))


def video_scene(video, vine=None, *, link_count=None, dt=DT):
    """A VineScene of ``video``: the vine of :func:`video_vine`, its walls, its duration at steps ``dt`` [s]."""
    return VineScene(name=video.name, description=f"Chen et al. real video {video.number} (seed 003), "
                     f"{video.pixels_per_metre:.4g} px/m, frames {video.frame_interval:g} s apart",
                     vine=video_vine(video, vine, link_count=link_count), sim=SimParams(dt=dt, duration=video.duration),
                     obstacles=video.walls, source=f"chen_real_video/vid{video.number}")


def steps_per_frame(video, dt=DT):
    """Simulation steps of ``dt`` [s] in one frame interval; ConfigError unless it is a whole number."""
    dt = positive_number("dt", dt, unit="s")
    steps = int(round(video.frame_interval / dt))
    if steps < 1 or abs(steps * dt - video.frame_interval) > 1e-9 * video.frame_interval:
        raise ConfigError(f"the frame interval {video.frame_interval:g} s is not a whole number of steps of {dt:g} s")
    return steps


@dataclass(frozen=True, eq=False)
class VideoRollout:
    """A simulated vine recorded at the frames of its video.

    number: the video's number
    times: (T,) [s]; poses: (T, B, 3) body centres and angles [m, rad], base body first
    backbones: (T, links + 1, 2) the backbone through base, pins and tip [m]
    newton_counts: how the solver's Newton loops ended in this vine's substeps up to its video's last frame
        (``NewtonCounts`` of one world): a rollout with unconverged substeps is its budget's answer there
    """

    number: int
    times: np.ndarray
    poses: np.ndarray
    backbones: np.ndarray
    newton_counts: object = None

    @property
    def tips(self):
        """(T, 2) backbone end [m]."""
        return self.backbones[:, -1]


def _is_one_curve(curves):
    """Whether ``curves`` is None or one (angles, moments) pair rather than a list of them."""
    if curves is None:
        return True
    try:
        return len(curves) == 2 and np.asarray(curves[0], dtype=float).ndim == 1
    except (TypeError, ValueError):
        return False


def growth_schedule(videos, per_frame, steps):
    """(steps, V) total growth rate of each video's vine during each simulation step [m/s]: its length
    schedule's rate over the frame interval the step lies in (``per_frame``: steps per frame of each
    video, (V,)), 0 once the video has ended."""
    schedule = np.zeros((steps, len(videos)))
    for v, video in enumerate(videos):
        rates = video.frame_growth_rates()
        frame = np.arange(steps) // per_frame[v]
        inside = frame < len(rates)
        schedule[inside, v] = rates[frame[inside]]
    return schedule


def rollout_videos(videos, vines=None, *, moment_curves=None, link_count=None, dt=DT, **batch_options):
    """One vine per video, grown on the video's walls for the video's duration, all in one batch.

    videos: list of VineVideo
    vines: VineParams per video, or one for all (default VineParams()); the video sets its geometry
        and growth (:func:`video_vine`)
    moment_curves: (angles, moments) per video, or one for all, in place of the stiffness model
    link_count: links of every vine (default: that of the vines)
    dt: simulation time step [s]; a frame interval must be a whole number of steps
    batch_options: VineBatch keyword arguments (device, growth, link_extension_max, friction, ...)
    Every frame interval the growth rate is set from the video's length schedule (0 once a video has
    ended). Returns a list of VideoRollout, one per video, recorded at its frames, with how its substeps' Newton
    loops ended.
    """
    videos = list(videos)
    vine_list = vines if isinstance(vines, (list, tuple)) else [vines] * len(videos)
    curve_list = [moment_curves] * len(videos) if _is_one_curve(moment_curves) else list(moment_curves)
    if len(vine_list) != len(videos) or len(curve_list) != len(videos):
        raise ConfigError(f"{len(videos)} videos need as many vines and moment curves (or one for all)")
    specs = [VineSpec(video_vine(video, vine, link_count=link_count), video.walls, moment_curve=curve)
             for video, vine, curve in zip(videos, vine_list, curve_list)]
    batch = VineBatch(specs, **batch_options)
    per_frame = np.array([steps_per_frame(video, dt) for video in videos])
    frames = np.array([video.frame_count for video in videos])
    total_steps = int(np.max((frames - 1) * per_frame))
    schedule = growth_schedule(videos, per_frame, total_steps)
    poses = [[None] * count for count in frames]
    counts_at_end = [None] * len(videos)
    initial = batch.poses()
    for v in range(len(videos)):
        poses[v][0] = initial[v]
    for step in range(total_steps):
        if np.any(step % per_frame == 0):
            batch.set_growth_rate(schedule[step])
        batch.step(dt)
        done = step + 1
        if np.any(done % per_frame == 0):
            current = batch.poses()
            for v in np.flatnonzero((done % per_frame == 0) & (done // per_frame < frames)):
                poses[v][done // per_frame[v]] = current[v]
            # A vine's Newton counts end with its video (the batch steps on until the longest video ends).
            ended = np.flatnonzero((done % per_frame == 0) & (done // per_frame == frames - 1))
            if len(ended):
                counts = batch.newton_counts()
                for v in ended:
                    counts_at_end[v] = counts.world(v)
    results = []
    final_counts = batch.newton_counts()  # for a video of one frame, which the loop never ends
    for v, video in enumerate(videos):
        stacked = np.stack(poses[v])
        results.append(VideoRollout(number=video.number, times=video.times, poses=stacked,
                                    backbones=pin_points(stacked, batch.half_length[v]),
                                    newton_counts=final_counts.world(v) if counts_at_end[v] is None else counts_at_end[v]))
    return results


def smooth_polyline(points, half_width):
    """The polyline ``points`` (n, 2) averaged over ``half_width`` [same units] of arc length on each side
    of every point (a moving box, narrowed symmetrically near the ends, so both end points stay and a
    straight, evenly spaced polyline is unchanged). The skeletons are chains of pixels: their one-pixel
    steps are no bends of the tube."""
    points = np.asarray(points, dtype=float)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    reach = np.minimum(half_width, np.minimum(arc, arc[-1] - arc))
    low = np.searchsorted(arc, arc - reach - 1e-12 * arc[-1], side="left")
    high = np.searchsorted(arc, arc + reach + 1e-12 * arc[-1], side="right")
    sums = np.concatenate([np.zeros((1, 2)), np.cumsum(points, axis=0)])
    return (sums[high] - sums[low]) / (high - low)[:, None]


def cut_at_walls(points, walls):
    """The polyline ``points`` (n, 2) up to its first crossing of a wall (ObstacleWall sequence), the
    crossing point left out: (k, 2), k >= 1. (Skeletons near a wall's end or under a tip pressed onto a
    wall sometimes cross it.)"""
    points = np.asarray(points, dtype=float)
    a, b = points[:-1], points[1:]
    first = len(points) - 1
    for wall in walls:
        c, d = np.asarray(wall.start), np.asarray(wall.end)

        def side(p, q, r):
            return (q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1]) - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0])

        crossing = (side(a, b, c) * side(a, b, d) < 0.0) & (side(c, d, a) * side(c, d, b) < 0.0)
        if np.any(crossing):
            first = min(first, int(np.argmax(crossing)))
    return points[:first + 1]


def pins_clear_of_walls(pins, walls, radius, *, iterations=WALL_CLEARING_ITERATIONS):
    """Pins (n, 2) [m] moved out of the walls: every pin after the first (each carries a contact sphere of
    ``radius`` [m]) that is closer to a wall than ``radius`` moves along the wall's normal to that
    distance, repeated ``iterations`` times (a pin pushed out of one wall may be pushed into another).
    Returns (pins (n, 2), how far each pin moved (n,)) [m]."""
    moved = np.array(pins, dtype=float)
    for _ in range(iterations):
        distance, normal = obstacle_signed_distance(walls, moved[1:])
        deficit = np.maximum(radius - distance, 0.0)
        if not np.any(deficit > 0.0):
            break
        moved[1:] += deficit[:, None] * normal
    return moved, np.linalg.norm(moved - np.asarray(pins, dtype=float), axis=1)


def poses_along(pins, half_length):
    """Body poses (2 (n - 1), 3) [m, rad] of a vine whose pins are ``pins`` (n, 2), base first: each
    link's two bodies at its ends, along its chord. ModelError if a chord is shorter than its bodies
    (4 d)."""
    pins = np.asarray(pins, dtype=float)
    chords = np.diff(pins, axis=0)
    lengths = np.linalg.norm(chords, axis=1)
    if np.any(lengths < 4.0 * half_length):
        raise ModelError(f"a link of the backbone is {lengths.min():.3g} m long, shorter than its two bodies "
                         f"({4.0 * half_length:.3g} m)")
    unit = chords / lengths[:, None]
    angle = np.arctan2(unit[:, 1], unit[:, 0])
    proximal = pins[:-1] + half_length * unit
    distal = pins[1:] - half_length * unit
    centres = np.stack([proximal, distal], axis=1).reshape(-1, 2)
    return np.column_stack([centres, np.repeat(angle, 2)])


def video_pins(video, frame, link_count, *, clear_walls=True):
    """The pins of a vine of ``link_count`` links laid along the video's backbone at ``frame``: link_count
    + 1 points evenly spaced in arc length from the base to the skeleton's end [m], the backbone smoothed
    over a tube radius on each side (:func:`smooth_polyline`: a tube bends no sharper).

    Unless ``clear_walls`` is False the backbone is first cut where it crosses a wall
    (:func:`cut_at_walls`) and kept the tube radius away from the walls (:func:`pins_clear_of_walls`):
    near the tip and around wall ends the skeleton comes closer to the walls than the tube radius (in
    most frames), and a vine started inside a wall is thrown out of it. Returns (pins (link_count + 1,
    2), how far each moved from the evenly spaced pins of the uncut backbone (link_count + 1,)) [m]."""
    pins, moved = _video_pins(video, int(frame), int(link_count), bool(clear_walls))
    return pins.copy(), moved.copy()


PINS_KEPT = 4096
"""How many ``video_pins`` results a process keeps: a fit asks for the same start frames at every evaluation (the
one-step loss's ~100 start states of the training videos took 0.23 s of its ~2.1 s evaluation to lay out again), and a
video's frames, walls and tube radius never change (``VineVideo`` is frozen)."""


@functools.lru_cache(maxsize=PINS_KEPT)
def _video_pins(video, frame, link_count, clear_walls):
    """``video_pins``, computed once per video, frame, link count and ``clear_walls``."""
    backbone = smooth_polyline(video.backbone(frame), video.tube_radius)
    if not clear_walls:
        return resample_polyline(backbone, link_count + 1), np.zeros(link_count + 1)
    # Cut the backbone where it crosses a wall, clear the dense backbone (pins pushed one by one could
    # meet in a corner), then the pins, whose chords may cut a corner of the cleared backbone.
    backbone, _ = pins_clear_of_walls(cut_at_walls(backbone, video.walls), video.walls, video.tube_radius)
    pins = resample_polyline(backbone, link_count + 1)
    cleared, _ = pins_clear_of_walls(pins, video.walls, video.tube_radius)
    return cleared, np.linalg.norm(cleared - resample_polyline(video.backbone(frame), link_count + 1), axis=1)


def video_state(video, frame, vine, *, velocities=False, clear_walls=True):
    """The video's state at ``frame`` as body poses and velocities of ``vine`` (VineParams of
    :func:`video_vine`): (poses (B, 3), velocities (B, 3)) [m, rad, m/s, rad/s].

    The bodies lie along the pins of :func:`video_pins`. velocities: False: at rest; True: the backward
    difference of the poses over the last frame interval (zero at frame 0). Seed 003 fits them as free
    variables.
    """
    pins, _ = video_pins(video, frame, vine.link_count, clear_walls=clear_walls)
    poses = poses_along(pins, vine.body_half_length)
    rates = np.zeros_like(poses)
    if velocities and frame > 0:
        before = poses_along(video_pins(video, frame - 1, vine.link_count, clear_walls=clear_walls)[0],
                             vine.body_half_length)
        rates[:, :2] = (poses[:, :2] - before[:, :2]) / video.frame_interval
        rates[:, 2] = np.angle(np.exp(1j * (poses[:, 2] - before[:, 2]))) / video.frame_interval
    return poses, rates


def one_step_predictions(video, vine=None, *, start_frames=None, moment_curve=None, link_count=None, dt=DT,
                         velocities=False, **batch_options):
    """Seed 003's one-step predictions: from the video's state at each start frame, the backbone one
    frame interval later, one world per start frame in one batch.

    vine: VineParams (default VineParams()); the video sets its geometry (:func:`video_vine`)
    start_frames: frames to start from (default: all but the last)
    moment_curve: (angles, moments) in place of the stiffness model
    velocities: start at rest (False) or with the backward-difference velocities (:func:`video_state`)
    batch_options: VineBatch keyword arguments
    Returns (start frames used (n,), predicted backbones (n, links + 1, 2) [m]); compare them with
    ``video.backbone(start + 1)`` (:func:`one_step_loss`). A start frame whose backbone, cut where it
    crosses a wall, is too short for the vine's bodies (:func:`poses_along`) is left out.
    """
    starts = np.arange(video.frame_count - 1) if start_frames is None else np.asarray(start_frames, dtype=int)
    if starts.size == 0 or starts.min() < 0 or starts.max() >= video.frame_count - 1:
        raise ConfigError(f"start frames must lie in 0..{video.frame_count - 2}, got {starts.tolist()}")
    params = video_vine(video, vine, link_count=link_count)
    specs, used = [], []
    for start in starts:
        try:
            poses, rates = video_state(video, start, params, velocities=velocities)
        except ModelError:
            continue  # a backbone cut at a wall too short for the bodies
        used.append(start)
        specs.append(VineSpec(params, video.walls, initial_poses=poses, initial_velocities=rates,
                              moment_curve=moment_curve))
    if not specs:
        raise ConfigError(f"video {video.number}: no start frame gives a state the vine's bodies fit in")
    starts = np.asarray(used, dtype=int)
    batch = VineBatch(specs, **batch_options)
    batch.set_growth_rate(video.frame_growth_rates()[starts])
    for _ in range(steps_per_frame(video, dt)):
        batch.step(dt)
    return starts, pin_points(batch.poses(), batch.half_length)
