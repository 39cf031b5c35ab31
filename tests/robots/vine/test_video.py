"""Chen et al.'s real videos in SI units (softsnake.robots.vine.video): the geometry helpers, the errors
and losses on synthetic backbones with known answers, a synthetic straight video rolled out, and the
loader on every real video (skipped when the reference data are absent)."""

import dataclasses
import math

import numpy as np
import pytest

from softsnake.errors import ConfigError, ModelError
from softsnake.robots.vine import reference as ref
from softsnake.robots.vine import video as vv
from softsnake.robots.vine.robot import vine_world
from softsnake.robots.vine.scene import ObstacleWall, VineParams
from synthetic_videos import straight_video


needs_data = pytest.mark.skipif(not ref.reference_available(), reason="vine reference data not present")

D = vv.TUBE_DIAMETER


# ------------------------------------------------------------------------------------------ geometry
def test_resample_polyline_is_even_in_arc_length():
    # An L of legs 3 and 1 sampled at 5 points: every 1.0 along it, the corner among them.
    points = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.0, 1.0]])
    np.testing.assert_allclose(vv.resample_polyline(points, 5), [[0, 0], [1, 0], [2, 0], [3, 0], [3, 1]], atol=1e-15)
    np.testing.assert_array_equal(vv.resample_polyline([[1.0, 2.0], [1.0, 2.0]], 3), [[1, 2]] * 3)
    assert vv.polyline_length(points) == 4.0
    with pytest.raises(ConfigError):
        vv.resample_polyline(np.zeros((0, 2)), 3)


def test_increasing_fit_pools_adjacent_violators():
    # Hand-worked: 3 > 2 pool to 2.5; a decreasing run pools to its mean; an increasing sequence stays.
    np.testing.assert_allclose(vv.increasing_fit([1.0, 3.0, 2.0, 4.0]), [1.0, 2.5, 2.5, 4.0], rtol=1e-15)
    np.testing.assert_allclose(vv.increasing_fit([3.0, 2.0, 1.0]), [2.0, 2.0, 2.0], rtol=1e-15)
    np.testing.assert_array_equal(vv.increasing_fit([0.0, 1.0, 1.0, 5.0]), [0.0, 1.0, 1.0, 5.0])
    noisy = np.linspace(0, 1, 200) + np.random.default_rng(0).normal(0, 0.05, 200)
    fit = vv.increasing_fit(noisy)
    assert np.all(np.diff(fit) >= 0.0) and fit.mean() == pytest.approx(noisy.mean(), rel=1e-12)


def test_smooth_polyline_removes_pixel_steps_and_keeps_lines():
    line = np.column_stack([np.arange(40.0), 0.5 * np.arange(40.0)])
    np.testing.assert_allclose(vv.smooth_polyline(line, 5.0), line, atol=1e-12)
    staircase = np.column_stack([np.arange(60.0), np.arange(60.0) % 2])  # one-pixel zigzag
    smoothed = vv.smooth_polyline(staircase, 6.0)
    assert np.ptp(smoothed[10:-10, 1]) < 0.12  # 1 px down to 1/9 px (9 points a window)
    np.testing.assert_array_equal(smoothed[[0, -1]], staircase[[0, -1]])


def test_cut_at_walls_and_clearing():
    wall = ObstacleWall((1.0, -1.0), (1.0, 1.0))
    crossing = np.array([[0.0, 0.0], [0.5, 0.0], [0.9, 0.0], [1.2, 0.0], [1.5, 0.0]])
    np.testing.assert_array_equal(vv.cut_at_walls(crossing, [wall]), crossing[:3])
    np.testing.assert_array_equal(vv.cut_at_walls(crossing[:3], [wall]), crossing[:3])
    # A pin 0.1 from the wall with radius 0.25 moves 0.15 along the wall's normal; the first pin never moves.
    pins, moved = vv.pins_clear_of_walls([[0.9, 0.0], [0.9, 0.5]], [wall], 0.25)
    np.testing.assert_allclose(pins, [[0.9, 0.0], [0.75, 0.5]], atol=1e-15)
    np.testing.assert_allclose(moved, [0.0, 0.15], atol=1e-15)


def test_poses_along_pins_build_a_valid_vine():
    pins = np.array([[0.0, 0.0], [0.1, 0.0], [0.18, 0.06], [0.2, 0.16]])
    vine = VineParams(link_count=3, body_half_length=0.005, length=0.3)
    poses = vv.poses_along(pins, vine.body_half_length)
    _, handle = vine_world(vine, (), initial_poses=poses)  # add_vine checks pins, collinearity, base
    np.testing.assert_allclose(handle.link_lengths(np.zeros(3)), np.linalg.norm(np.diff(pins, axis=0), axis=1),
                               rtol=1e-12)
    with pytest.raises(ModelError, match="shorter than its two bodies"):
        vv.poses_along(pins, 0.03)


# ------------------------------------------------------------------------------------------ estimators
def test_wall_clearance_and_base_gap_on_astraight_video():
    """A skeleton 10 px beside a wall, starting 12 px past the base, whose last 20 px bend into the wall:
    the clearance leaves the tip out (10 px); the base gap is 12 px."""
    x = np.arange(12.0, 120.0)
    straight = np.column_stack([x, np.full_like(x, 10.0)])
    tip = np.column_stack([np.arange(120.0, 140.0), np.linspace(9.0, 1.0, 20)])
    frames = [np.concatenate([straight, tip])] * 3
    walls = np.array([[[0.0, 0.0], [200.0, 0.0]]])
    assert vv.wall_clearance_pixels(frames, walls) == pytest.approx(10.0, abs=1e-12)
    assert vv.wall_clearance_pixels(frames, walls, tip_margin=0.0, percentile=0.0) == pytest.approx(1.0, abs=1e-12)
    assert vv.base_gap_pixels(frames) == pytest.approx(math.hypot(12.0, 10.0), rel=1e-12)
    assert vv.initial_heading([np.array([[1.0, 1.0], [2.0, 2.0]])]) == pytest.approx(math.pi / 4, rel=1e-15)


# ------------------------------------------------------------------------------------------ errors, losses
def _straight(length, angle=0.0, count=30):
    s = np.linspace(0.0, length, count)
    return np.column_stack([s * math.cos(angle), s * math.sin(angle)])


def test_errors_of_known_shapes():
    """Offset by h: tip and shape error h. Half as long, same line: tip error L/2, shape error L/4 (the
    mean of f L/2 over fractions f evenly in [0, 1]). Turned by phi about the base: tip 2 L sin(phi/2),
    shape L sin(phi/2)."""
    length, h, phi = 0.6, 0.02, 0.3
    video = _straight(length)
    assert vv.tip_error(video + [0.0, h], video) == pytest.approx(h, rel=1e-12)
    assert vv.shape_error(video + [0.0, h], video) == pytest.approx(h, rel=1e-12)
    assert vv.tip_error(_straight(length / 2), video) == pytest.approx(length / 2, rel=1e-12)
    assert vv.shape_error(_straight(length / 2), video) == pytest.approx(length / 4, rel=1e-12)
    assert vv.tip_error(_straight(length, phi), video) == pytest.approx(2 * length * math.sin(phi / 2), rel=1e-12)
    assert vv.shape_error(_straight(length, phi), video) == pytest.approx(length * math.sin(phi / 2), rel=1e-12)


def test_video_errors_summary_in_metres_and_diameters():
    video = straight_video(frames=4)
    shifted = [b + [0.0, 0.01 * (t + 1)] for t, b in enumerate(video.backbones())]
    errors = vv.video_errors(shifted, video)
    np.testing.assert_allclose(errors.tip, [0.01, 0.02, 0.03, 0.04], rtol=1e-12)
    np.testing.assert_allclose(errors.shape, errors.tip, rtol=1e-12)
    summary = errors.summary()
    assert summary["tip_mean_m"] == pytest.approx(0.025, rel=1e-12)
    assert summary["tip_max_m"] == pytest.approx(0.04, rel=1e-12)
    assert summary["shape_mean_diameters"] == pytest.approx(0.025 / D, rel=1e-12)
    with pytest.raises(ConfigError, match="4 frames"):
        vv.video_errors(shifted[:3], video)


def test_losses_are_mean_squared_distances():
    video = [_straight(0.5), _straight(0.6)]
    assert vv.one_step_loss([b + [0.0, 0.01] for b in video], video) == pytest.approx(1e-4, rel=1e-12)
    assert vv.rollout_loss([video[0] + [0.03, 0.0], video[1] + [0.0, 0.01]], video) == pytest.approx(5e-4, rel=1e-12)
    assert vv.rollout_loss(video, video) == 0.0
    with pytest.raises(ConfigError, match="as many"):
        vv.one_step_loss(video[:1], video)


# ------------------------------------------------------------------------------------------ simulation
def test_straight_synthetic_video_is_followed():
    """A straight robot growing along 0.4 rad with no wall: the default vine, grown at the video's length
    schedule, stays on it (shape and tip errors below 0.1 mm) and reaches its final length (0.1 %)."""
    video = straight_video(heading=0.4)
    (result,) = vv.rollout_videos([video], link_count=8)
    assert result.backbones.shape == (video.frame_count, 9, 2)
    errors = vv.video_errors(result.backbones, video)
    assert errors.shape.max() < 1e-4 and errors.tip.max() < 1e-4
    assert vv.polyline_length(result.backbones[-1]) == pytest.approx(video.final_length, rel=1e-3)
    starts, predicted = vv.one_step_predictions(video, start_frames=[2, 7], link_count=8)
    observed = [video.backbone(s + 1) for s in starts]
    assert vv.one_step_loss(predicted, observed) < (1e-4) ** 2


def test_a_rollouts_newton_counts_end_with_its_video():
    """Two straight videos of 6 and 12 frames in one batch, three steps per frame: the batch steps until the longer
    one ends, but each rollout's Newton counts cover its own video only (15 and 33 substeps of one step each)."""
    videos = [straight_video(frames=6, heading=0.2), straight_video(frames=12, heading=-0.2)]
    short, long = vv.rollout_videos(videos, link_count=4, dt=vv.FRAME_INTERVAL / 3)
    assert short.newton_counts.substeps.tolist() == [15] and long.newton_counts.substeps.tolist() == [33]
    assert short.newton_counts.unconverged_ends.tolist() == [0]


def test_video_scene_and_steps_per_frame():
    video = straight_video(walls=[ObstacleWall((0.3, -0.2), (0.3, 0.2))])
    scene = vv.video_scene(video, link_count=10)
    assert scene.vine.tube_radius == D / 2 and scene.vine.length == pytest.approx(0.1)
    assert 4 * scene.vine.body_half_length * 10 == pytest.approx(vv.BODY_FILL * 0.1, rel=1e-12)
    assert scene.sim.duration == pytest.approx(video.duration) and scene.obstacles == video.walls
    assert vv.steps_per_frame(video) == 9
    with pytest.raises(ConfigError, match="whole number"):
        vv.steps_per_frame(video, dt=0.03)


# ------------------------------------------------------------------------------------------ real videos
@pytest.fixture(scope="module")
def videos():
    return vv.load_videos()


@needs_data
def test_loader_shapes_units_and_walls(videos):
    assert [v.number for v in videos] == [1, 2, 3, 4, 5, 6]
    for video in videos:
        assert video.frame_count >= 140 and all(s.ndim == 2 and s.shape[1] == 2 for s in video.skeletons)
        assert video.times[-1] == pytest.approx(video.duration) and video.duration > 14.0
        assert len(video.walls) in (4, 5) and all(isinstance(w, ObstacleWall) for w in video.walls)
        np.testing.assert_array_equal(video.base_marker[1], [0.0, 0.0])
        # Inside the rectified image: 256 px wide, so no wall end farther than its diagonal (plus 10 %).
        ends = np.array([[w.start, w.end] for w in video.walls]).reshape(-1, 2)
        assert np.linalg.norm(ends, axis=1).max() < 1.1 * 256 * math.sqrt(2) / vv.PIXELS_PER_METRE
        assert abs(video.heading) < math.radians(15)  # launched roughly along the base marker


@needs_data
def test_scale_from_the_wall_clearance(videos):
    """The measured tube radius (module docstring): the median over the videos of the wall clearance is
    TUBE_RADIUS_PIXELS (12.3 px); every video gives 7.5-14 px, i.e. 220-420 px/m; the base gap agrees
    within 15 %."""
    clearances, gaps = [], []
    for number in ref.chen_video_ids():
        frames, walls = ref.load_chen_video(number)
        clearances.append(vv.wall_clearance_pixels(frames, walls[1:]))
        gaps.append(vv.base_gap_pixels(frames))
    assert np.median(clearances) == pytest.approx(vv.TUBE_RADIUS_PIXELS, abs=0.05)
    assert all(7.5 <= c <= 14.0 for c in clearances)
    assert abs(np.median(gaps) / np.median(clearances) - 1.0) < 0.15
    assert vv.PIXELS_PER_METRE == pytest.approx(367.2, abs=0.1)
    assert all(v.pixels_per_metre == vv.PIXELS_PER_METRE for v in videos)


@needs_data
def test_growth_is_monotone_up_to_segmentation_noise(videos):
    for video in videos:
        steps = np.diff(video.raw_lengths)
        assert np.mean(steps < 0.0) < 0.4  # some frames shrink (segmentation) ...
        assert steps.min() > -0.04  # ... by at most 4 cm (1.5 px = 4 mm typical)
        assert np.all(np.diff(video.lengths) >= 0.0) and video.final_length > 5 * video.lengths[0]
        assert np.sqrt(np.mean((video.raw_lengths - video.lengths) ** 2)) < 0.01
        assert 0.02 < video.growth_rate < 0.06  # [m/s] at the assumed 0.1 s per frame
        assert video.final_length == pytest.approx(video.raw_lengths[-1], abs=0.01)


@needs_data
def test_a_real_video_rolls_out_and_its_states_lie_clear_of_the_walls(videos):
    """The first 20 frames of video 4 (the vine reaches its first wall): the rollout follows the length
    schedule and the video; the video states of frames 60 and 120 (beside walls) keep the tube radius from every
    wall."""
    video = dataclasses.replace(videos[3], skeletons=videos[3].skeletons[:20], raw_lengths=videos[3].raw_lengths[:20],
                                lengths=videos[3].lengths[:20])
    (result,) = vv.rollout_videos([video], link_count=10)
    lengths = [vv.polyline_length(b) for b in result.backbones]
    np.testing.assert_allclose(lengths, video.lengths, rtol=2e-3)
    # It follows the video, unfitted: its tip within half a tube diameter of the video's in every frame and its shape
    # within a quarter (measured at most 26.9 and 9.9 mm of the 67 mm diameter; means 15.4 and 6.5 mm).
    errors = vv.video_errors(result.backbones, video)
    assert errors.tip.max() < 0.5 * errors.tube_diameter and errors.shape.max() < 0.25 * errors.tube_diameter, errors
    from softsnake.robots.vine.scene import obstacle_signed_distance
    for frame in (60, 120):
        pins, moved = vv.video_pins(videos[3], frame, 25)
        distance, _ = obstacle_signed_distance(videos[3].walls, pins[1:])
        assert distance.min() > vv.TUBE_DIAMETER / 2 - 1e-9 and moved[0] == 0.0


def test_reference_available_says_whether_the_folder_exists(tmp_path):
    assert not ref.reference_available(tmp_path / "nowhere") and ref.reference_available(tmp_path)


def test_rollout_videos_takes_one_moment_curve_or_one_per_video():
    """An MLP moment curve for all vines, or one per vine: a straight video stays straight either way."""
    from softsnake.robots.vine.robot import mlp_moment_curve
    from softsnake.robots.vine.stiffness import MlpMoment

    curve = mlp_moment_curve(MlpMoment([2.0, 0.5], [0.0, 1.0], [0.02, 0.01]))
    videos = [straight_video(frames=4), straight_video(frames=5, heading=-0.3)]
    for curves in (curve, [curve, curve]):
        results = vv.rollout_videos(videos, moment_curves=curves, link_count=6)
        assert [len(r.backbones) for r in results] == [4, 5]
        assert all(vv.video_errors(r.backbones, v).shape.max() < 1e-4 for r, v in zip(results, videos))
    with pytest.raises(ConfigError, match="as many"):
        vv.rollout_videos(videos, moment_curves=[curve], link_count=6)
