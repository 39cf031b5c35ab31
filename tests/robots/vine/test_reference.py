"""Reference-data loaders (softsnake.robots.vine.reference) against the README and the data themselves."""

import numpy as np
import pytest

from softsnake.errors import ConfigError
from softsnake.robots.vine import reference as ref
from softsnake.robots.vine.scene import ObstacleRectangle


def _reference_present():
    try:
        ref.reference_folder()
    except ConfigError:
        return False
    return True


needs_data = pytest.mark.skipif(not _reference_present(), reason="vine reference data not present")

HEADING = np.radians(-52.0)  # initial heading of the cluttered scenes [rad]
TUBE_RADIUS = 0.0075  # cluttered scenes [m]
WALL_TUBE_RADIUS = 0.012  # wall-fit scene [m]


@pytest.fixture(scope="module")
def rollouts():
    return {n: ref.load_jitosho_rollout(n) for n in (1, 2)}


def _box_distance(points, rectangle):
    """Signed distance from points (N, 2) to a rectangle obstacle, negative inside [m]."""
    return rectangle.signed_distance(points)[0]


def _contact_points(q, half_length=ref.JITOSHO_HALF_LENGTH):
    """Distal end of the second body of each pair (the README's contact points) [m]."""
    second = q[..., 1::2, :]
    return second[..., :2] + half_length * np.stack([np.cos(second[..., 2]), np.sin(second[..., 2])], axis=-1)


@needs_data
@pytest.mark.parametrize("n", [1, 2])
def test_rollout_shapes_and_times(rollouts, n):
    t, q, v = rollouts[n]
    assert t.shape == (450,) and q.shape == (450, 50, 3) and v.shape == (450, 50, 3)
    np.testing.assert_allclose(np.diff(t), 1 / 90, rtol=1e-12)
    assert t[0] == 0.0 and t[-1] == pytest.approx(449 / 90, rel=1e-12)


@needs_data
@pytest.mark.parametrize("n", [1, 2])
def test_rollout_initial_state_matches_readme(rollouts, n):
    _, q, v = rollouts[n]
    # straight, at rest, heading -52 deg, 0.30 m, first body centre one half-length from the origin
    assert np.all(v[0] == 0.0)
    np.testing.assert_allclose(q[0, :, 2], HEADING, atol=1e-7)
    np.testing.assert_allclose(q[0, 0, :2], 0.003 * np.array([np.cos(HEADING), np.sin(HEADING)]), atol=1e-8)
    assert ref.rollout_length(q[0]) == pytest.approx(0.30, abs=1e-9)


@needs_data
@pytest.mark.parametrize("n", [1, 2])
def test_rollout_base_stays_pinned_at_origin_and_pins_hold(rollouts, n):
    # Checks the (x, y, theta) per body ordering: a wrong reshape breaks the pin constraints.
    _, q, _ = rollouts[n]
    d = ref.JITOSHO_HALF_LENGTH
    axis = np.stack([np.cos(q[..., 2]), np.sin(q[..., 2])], axis=-1)
    proximal, distal = q[..., :2] - d * axis, q[..., :2] + d * axis
    assert np.linalg.norm(proximal[:, 0], axis=-1).max() < 1e-5  # measured 1.6e-6 m (rollout 1)
    pin_error = np.linalg.norm(distal[:, 1:-1:2] - proximal[:, 2::2], axis=-1)
    assert pin_error.max() < 3e-5  # measured 1.4e-5 m (rollout 1)


@needs_data
def test_rollout_1_final_length_within_readme_range(rollouts):
    _, q, _ = rollouts[1]
    final = ref.rollout_length(q[-1])
    assert 1.30 <= final <= 1.32  # README: 1.30-1.32 m; measured 1.3110 m


@needs_data
def test_rollout_2_grows_at_the_commanded_rate(rollouts):
    # No contact in environment 2, so every step adds 0.205 m/s * dt.
    t, q, _ = rollouts[2]
    np.testing.assert_allclose(ref.rollout_length(q), 0.30 + 0.205 * t, atol=1e-6)


@needs_data
def test_rollout_tip_is_distal_end_of_last_body(rollouts):
    _, q, _ = rollouts[2]
    # rollout 2 stays straight along the initial heading
    np.testing.assert_allclose(ref.rollout_tip(q[-1]), ref.rollout_length(q[-1]) * np.array(
        [np.cos(HEADING), np.sin(HEADING)]), atol=1e-6)


@needs_data
def test_obstacles_converted_from_inches_lower_left():
    first = ref.load_jitosho_obstacles(1)[0]  # file line: "12 -7 16 3" (inches)
    assert first.center == pytest.approx(((12 + 8) * 0.0254, (-7 + 1.5) * 0.0254), rel=1e-12)
    assert first.size == pytest.approx((16 * 0.0254, 3 * 0.0254), rel=1e-12)
    assert first.angle == 0.0
    assert len(ref.load_jitosho_obstacles(1)) == 5 and len(ref.load_jitosho_obstacles(2)) == 3


@needs_data
def test_rollout_1_touches_but_never_enters_its_obstacles(rollouts):
    # Contact points keep gap = distance - tube radius >= 0 and reach gap 0: this pins down the
    # inch conversion and the lower-left-corner convention together (tolerance 0.01 mm).
    _, q, _ = rollouts[1]
    points = _contact_points(q).reshape(-1, 2)
    obstacles = ref.load_jitosho_obstacles(1)
    gaps = np.min([_box_distance(points, box) for box in obstacles], axis=0) - TUBE_RADIUS
    assert gaps.min() == pytest.approx(0.0, abs=1e-5)  # measured -1.1e-6 m
    misread = [ObstacleRectangle(center=(b.center[0] - b.size[0] / 2, b.center[1] - b.size[1] / 2), size=b.size)
               for b in obstacles]  # corner read as centre: the vine would run through them
    assert np.min([_box_distance(points, box) for box in misread]) < 0.0


@needs_data
def test_wall_fit_fields_and_units():
    wall_fit = ref.load_wall_fit()
    assert wall_fit.video_points.shape == (8, 21, 2)
    np.testing.assert_allclose(wall_fit.frame_times, np.arange(8) * 3 / 90, rtol=1e-12)
    assert wall_fit.dt == pytest.approx(1 / 90)
    np.testing.assert_array_equal(wall_fit.video_points[:, 0], 0.0)  # base at the origin
    np.testing.assert_allclose(wall_fit.growth_input, 0.008)  # 8 mm/s per prismatic joint
    assert wall_fit.growth_input.shape == (22, 5)
    assert wall_fit.wall.center == pytest.approx((0.24889, 0.35628))
    assert wall_fit.wall.size == pytest.approx((0.50228, 0.030))
    assert wall_fit.wall.angle == pytest.approx(-0.02357)
    assert wall_fit.interp_matrix.shape == (10, 21)
    assert wall_fit.contact_impulse_fit.shape == (21,)
    assert wall_fit.fit_initial_guess_z0.shape == (2582,)
    assert wall_fit.published_tip_x_mae == pytest.approx(1.1e-3)


@needs_data
def test_wall_fit_robot_tip_sits_at_the_wall():
    # The video shows the tip in contact: the last centreline point is between one and two tube
    # radii from the wall (measured 17 mm), which only holds if points and wall share units.
    wall_fit = ref.load_wall_fit()
    tips = wall_fit.video_points[:, -1, :]
    distance = _box_distance(tips, wall_fit.wall)
    assert np.all(distance > WALL_TUBE_RADIUS) and np.all(distance < 2 * WALL_TUBE_RADIUS)
    lengths = np.linalg.norm(np.diff(wall_fit.video_points, axis=1), axis=-1).sum(axis=1)
    assert np.all(np.diff(lengths) > 0.0)  # growing (358 mm to 367 mm)


def _crossing_frames(frames, walls):
    """Number of frames whose skeleton polyline crosses a wall segment (base marker excluded)."""

    def orientation(p, q, r):
        return np.sign((q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1])
                       - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0]))

    count = 0
    for points in frames:
        a, b = points[:-1, None], points[1:, None]
        c, d = walls[None, 1:, 0], walls[None, 1:, 1]
        crossing = (orientation(a, b, c) * orientation(a, b, d) < 0) & (orientation(c, d, a) * orientation(c, d, b) < 0)
        count += bool(crossing.any())
    return count


@needs_data
def test_chen_videos_load():
    assert ref.chen_video_ids() == [1, 2, 3, 4, 5, 6]
    for k in ref.chen_video_ids():
        frames, walls = ref.load_chen_video(k)
        assert len(frames) > 100 and all(f.ndim == 2 and f.shape[1] == 2 and len(f) >= 3 for f in frames)
        assert walls.dtype == float and walls.shape[1:] == (2, 2)
        np.testing.assert_array_equal(walls[0, 1], [0.0, 0.0])  # base marker ends at the origin
        first = np.linalg.norm([f[0] for f in frames], axis=1)
        assert np.median(first) < 16.0 and first.max() < 40.0  # base near the origin [px]
        heading = np.mean([f[min(len(f), 10) - 1] - f[0] for f in frames], axis=0)
        assert heading[0] > abs(heading[1])  # heading roughly +x


@needs_data
@pytest.mark.parametrize("k", [1, 2, 3, 5, 6])  # video 4 crosses neither version
def test_chen_walls_in_points_frame(k):
    frames, walls = ref.load_chen_video(k)
    mirrored = walls * np.array([1.0, -1.0])
    assert _crossing_frames(frames, walls) < 0.5 * _crossing_frames(frames, mirrored)


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="reference folder not found"):
        ref.load_jitosho_rollout(1, folder=tmp_path / "nowhere")


def test_environment_variable_names_the_reference_root(tmp_path, monkeypatch):
    (tmp_path / "vine").mkdir()
    monkeypatch.setenv("SOFTSNAKE_REFERENCE", str(tmp_path))
    assert ref.reference_folder() == tmp_path / "vine"
    with pytest.raises(ConfigError, match="no rollout 1"):
        ref.load_jitosho_rollout(1)


def test_an_installed_copy_finds_the_reference_beside_the_current_folder(tmp_path, monkeypatch):
    """``pip install .`` puts the package in site-packages, where no ../shared lies beside it: the data are then
    looked for beside the folder the command runs in (the repository root), and the error names both places."""
    monkeypatch.delenv("SOFTSNAKE_REFERENCE", raising=False)
    monkeypatch.setattr(ref, "REPOSITORY_ROOT", tmp_path / "site-packages")
    repository = tmp_path / "checkout" / "main"
    repository.mkdir(parents=True)
    monkeypatch.chdir(repository)
    with pytest.raises(ConfigError, match=r"not found: \S*/shared/reference/vine or \S*/checkout/shared/reference/vine "):
        ref.reference_folder()
    (tmp_path / "checkout" / "shared" / "reference" / "vine").mkdir(parents=True)
    assert ref.reference_folder() == (tmp_path / "checkout" / "shared" / "reference" / "vine").resolve()


@needs_data
def test_unknown_data_set_lists_the_available_ones():
    with pytest.raises(ConfigError, match=r"available: 1, 2\)"):
        ref.load_jitosho_obstacles(7)
    with pytest.raises(ConfigError, match=r"available: 1, 2, 3, 4, 5, 6\)"):
        ref.load_chen_video(0)


@needs_data
@pytest.mark.parametrize("n", [1, 2])
def test_shipped_cluttered_scene_matches_reference(rollouts, n):
    from softsnake.robots.vine.scene import load_scene

    scene = load_scene(f"jitosho_cluttered_{n}")
    t, q, _ = rollouts[n]
    vine = scene.vine
    assert vine.heading == pytest.approx(HEADING, abs=1e-15)
    assert vine.body_count == q.shape[1] and vine.body_half_length == ref.JITOSHO_HALF_LENGTH
    assert vine.length == pytest.approx(ref.rollout_length(q[0]), abs=1e-12)
    assert vine.tube_radius == TUBE_RADIUS and vine.stiffness_model == "linear"
    assert (vine.body_mass, vine.body_inertia, vine.stiffness, vine.damping) == (0.002, 5e-6, 0.03, 1e-5)
    assert vine.growth_rate == 0.205
    assert scene.sim.dt == pytest.approx(t[1] - t[0], rel=1e-15) and scene.sim.step_count == 450
    expected = ref.load_jitosho_obstacles(n)
    assert len(scene.obstacles) == len(expected)
    for got, box in zip(scene.obstacles, expected):
        assert got.center == pytest.approx(box.center, abs=1e-12)
        assert got.size == pytest.approx(box.size, abs=1e-12)
        assert got.angle == 0.0


@needs_data
def test_shipped_wall_scene_matches_reference():
    from softsnake.robots.vine.scene import load_scene

    scene = load_scene("jitosho_wall")
    wall_fit = ref.load_wall_fit()
    vine = scene.vine
    assert (vine.heading, vine.link_count, vine.body_half_length, vine.tube_radius) == (1.31, 5, 0.016845, 0.012)
    assert (vine.body_mass, vine.body_inertia, vine.stiffness, vine.damping) == (0.001, 2e-4, 0.05, 1e-5)
    assert vine.length == pytest.approx(vine.body_count * 2 * vine.body_half_length, rel=1e-12)
    assert vine.growth_rate == pytest.approx(wall_fit.growth_input[0].sum(), rel=1e-12)
    assert scene.sim.dt == pytest.approx(wall_fit.dt, rel=1e-15)
    assert scene.sim.step_count == 21  # the last of the 8 frames is step 7 * 3
    assert scene.sim.step_count * scene.sim.dt == pytest.approx(wall_fit.frame_times[-1], rel=1e-12)
    (wall,) = scene.obstacles
    assert wall.center == pytest.approx(wall_fit.wall.center, abs=1e-12)
    assert wall.size == pytest.approx(wall_fit.wall.size, abs=1e-12)
    assert wall.angle == pytest.approx(wall_fit.wall.angle, abs=1e-15)
    # the straight initial vine starts clear of the wall (measured gap 7.6 mm at the tip)
    ends = np.outer(np.arange(1, 6) / 5 * vine.length, [np.cos(vine.heading), np.sin(vine.heading)])
    assert np.min(_box_distance(ends, wall_fit.wall)) - vine.tube_radius > 0.005
