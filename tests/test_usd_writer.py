"""Tests for softsnake.usd_writer: files read back with pxr match what was recorded.

Positions are stored as float32 (points, orient) or float64 (translate), so read-back values are
compared with a tolerance of 1e-6 m / 1e-6 (float32 round-off on values of order 1).
"""

import math
import shutil

import numpy as np
import pytest
from pxr import Gf, Usd, UsdGeom

from softsnake.errors import ConfigError, UsageError
from softsnake.usd_writer import UsdRecorder

TOL = 1e-6
FPS = 30.0
FRAMES = 5
# A tetrahedron surface: 4 points, 4 outward triangles.
TET_POINTS = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
TET_FACES = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])


def quat_z(angle):
    """Rotation by ``angle`` [rad] about +Z in Warp's (x, y, z, w) order."""
    return np.array([0.0, 0.0, math.sin(angle / 2.0), math.cos(angle / 2.0)])


def mesh_points_at(robot, frame):
    return TET_POINTS + np.array([0.5 * robot, 0.01 * frame, 0.0])


def body_pose_at(robot, link, frame):
    return np.array([0.5 * robot, 0.2 * link, 0.02 * frame]), quat_z(0.1 * frame + link)


def record_two_robots(path, *, frames=FRAMES, fail_after=None, flush_every=100, reopen_after=None):
    """Record two robots (mesh + capsule + box each) and static scenery; raise after ``fail_after`` frames;
    ``reopen_after`` [s]: go on with the partial file from the frame after this time."""
    first = 0 if reopen_after is None else round(reopen_after * FPS) + 1
    with UsdRecorder(path, fps=FPS, flush_every=flush_every, reopen_after=reopen_after) as rec:
        rec.add_ground(size=20.0)
        rec.add_static_box("wall", (1.0, 2.0, 3.0), (1.0, 2.0, 3.0), quat_z(math.pi / 2.0))
        rec.add_static_cylinder("post", (0.0, -1.0, 0.5), 0.5, 2.0, axis="X")
        meshes, bodies = [], []
        for robot in range(2):
            group = rec.add_group(f"snake_{robot:03d}")
            meshes.append(rec.add_mesh("skin", TET_FACES, mesh_points_at(robot, 0), color=(0.2, 0.6, 0.2),
                                       parent=group))
            bodies.append(rec.add_body("link_0", "capsule", radius=0.05, height=0.2, axis="X", parent=group))
            bodies.append(rec.add_body("link_1", "box", half_extents=(0.1, 0.05, 0.02), parent=group))
        for frame in range(first, frames):
            if frame == fail_after:
                raise RuntimeError("simulated crash")
            rec.write_frame(
                frame=frame,
                mesh_points={mesh: mesh_points_at(robot, frame) for robot, mesh in enumerate(meshes)},
                body_transforms={body: body_pose_at(index // 2, index % 2, frame) for index, body in enumerate(bodies)},
            )
    return rec


@pytest.mark.parametrize("ext, magic", [(".usda", b"#usda"), (".usdc", b"PXR-USDC")])
def test_two_robot_scene_reads_back(tmp_path, ext, magic):
    path = tmp_path / f"scene{ext}"
    record_two_robots(path)
    assert path.read_bytes()[: len(magic)] == magic
    assert not (tmp_path / f"scene.partial{ext}").exists()

    stage = Usd.Stage.Open(str(path))
    assert stage.GetDefaultPrim().GetPath() == "/World"
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert stage.GetTimeCodesPerSecond() == FPS
    assert stage.GetFramesPerSecond() == FPS
    assert stage.GetStartTimeCode() == 0.0
    assert stage.GetEndTimeCode() == FRAMES - 1

    for robot in range(2):
        mesh = UsdGeom.Mesh(stage.GetPrimAtPath(f"/World/snake_{robot:03d}/skin"))
        points_attr = mesh.GetPointsAttr()
        assert points_attr.GetTimeSamples() == list(range(FRAMES))
        assert list(mesh.GetFaceVertexIndicesAttr().Get()) == TET_FACES.ravel().tolist()
        for frame in range(FRAMES):
            points = np.array(points_attr.Get(frame))
            assert points.shape == (4, 3)
            np.testing.assert_allclose(points, mesh_points_at(robot, frame), atol=TOL)
            extent = np.array(mesh.GetExtentAttr().Get(frame))
            np.testing.assert_allclose(extent, [points.min(axis=0), points.max(axis=0)], atol=TOL)

        for link in range(2):
            prim = stage.GetPrimAtPath(f"/World/snake_{robot:03d}/link_{link}")
            xform = UsdGeom.Xformable(prim)
            assert prim.GetAttribute("xformOp:translate").GetTimeSamples() == list(range(FRAMES))
            assert prim.GetAttribute("xformOp:orient").GetTimeSamples() == list(range(FRAMES))
            for frame in range(FRAMES):
                position, quat = body_pose_at(robot, link, frame)
                angle = 0.1 * frame + link
                # The body's local +X axis must land on (cos a, sin a, 0): proves the xyzw -> wxyz order.
                matrix = xform.ComputeLocalToWorldTransform(frame)
                if link == 1:
                    matrix = Gf.Matrix4d().SetScale(Gf.Vec3d(10.0, 20.0, 50.0)) * matrix  # undo the box scale
                tip = np.array(matrix.Transform(Gf.Vec3d(1.0, 0.0, 0.0)))
                np.testing.assert_allclose(tip, position + [math.cos(angle), math.sin(angle), 0.0], atol=TOL)

    # Static shapes: world bounds against hand-computed boxes.
    cache = UsdGeom.BBoxCache(0.0, [UsdGeom.Tokens.default_])
    bounds = {
        # Half extents (1, 2, 3) turned 90 deg about Z swap x and y: x +-2, y +-1, z +-3 about (1, 2, 3).
        "/World/wall": ([-1.0, 1.0, 0.0], [3.0, 3.0, 6.0]),
        # Radius 0.5, height 2 along X about (0, -1, 0.5).
        "/World/post": ([-1.0, -1.5, 0.0], [1.0, -0.5, 1.0]),
        "/World/ground": ([-10.0, -10.0, 0.0], [10.0, 10.0, 0.0]),
    }
    for prim_path, (low, high) in bounds.items():
        box = cache.ComputeWorldBound(stage.GetPrimAtPath(prim_path)).ComputeAlignedRange()
        np.testing.assert_allclose([box.GetMin(), box.GetMax()], [low, high], atol=TOL)
    # Capsule radius 0.05, spine 0.2 along X: local extent +-(0.15, 0.05, 0.05).
    capsule = UsdGeom.Capsule(stage.GetPrimAtPath("/World/snake_000/link_0"))
    np.testing.assert_allclose(np.array(capsule.GetExtentAttr().Get()), [[-0.15, -0.05, -0.05],
                                                                         [0.15, 0.05, 0.05]], atol=TOL)


def test_interrupted_run_leaves_only_partial_file(tmp_path):
    path = tmp_path / "crash.usdc"
    with pytest.raises(RuntimeError, match="simulated crash"):
        record_two_robots(path, fail_after=3)
    assert not path.exists()
    partial = tmp_path / "crash.partial.usdc"
    assert sorted(p.name for p in tmp_path.iterdir()) == [partial.name]
    stage = Usd.Stage.Open(str(partial))
    assert stage.GetEndTimeCode() == 2.0
    points_attr = stage.GetAttributeAtPath("/World/snake_001/skin.points")
    assert points_attr.GetTimeSamples() == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(np.array(points_attr.Get(2.0)), mesh_points_at(1, 2), atol=TOL)


def _samples(path):
    stage = Usd.Stage.Open(str(path))
    return stage.GetEndTimeCode(), {str(attribute.GetPath()): [(code, np.asarray(attribute.Get(code)).tolist())
                                                               for code in attribute.GetTimeSamples()]
                                    for prim in stage.Traverse() for attribute in prim.GetAttributes()}


def test_an_interrupted_recording_goes_on_in_its_partial_file(tmp_path):
    """Reopened after frame 1 of the 4 an interrupted recording saved, the same scene added again finds its prims,
    frames 2 .. 3 are dropped and written again with frame 4: the file of a recording never interrupted."""
    record_two_robots(tmp_path / "straight.usdc")
    path = tmp_path / "resumed.usdc"
    with pytest.raises(RuntimeError, match="simulated crash"):
        record_two_robots(path, fail_after=4)
    rec = record_two_robots(path, reopen_after=1.0 / FPS)
    assert rec.reopened and not (tmp_path / "resumed.partial.usdc").exists()
    assert _samples(path) == _samples(tmp_path / "straight.usdc")


def test_reopening_names_what_is_wrong(tmp_path):
    path = tmp_path / "run.usdc"
    with pytest.raises(UsageError, match="no partial USD file .*run.partial.usdc to go on with"):
        UsdRecorder(path, fps=FPS, reopen_after=0.0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        record_two_robots(path, fail_after=3)
    with pytest.raises(UsageError, match="recorded at 30 frames per second and 1 m per unit, not 60 and 1"):
        UsdRecorder(path, fps=60.0, reopen_after=0.0)
    with pytest.raises(UsageError, match="has no frame at 0.1 s to go on from \\(it ends at 0.0666667 s\\)"):
        UsdRecorder(path, fps=FPS, reopen_after=0.1)
    with UsdRecorder(path, fps=FPS, reopen_after=1.0 / FPS) as rec:
        with pytest.raises(ConfigError, match="/World/snake_002 is not in the partial file"):
            rec.add_group("snake_002")


def test_flush_leaves_readable_partial_file_while_recording(tmp_path):
    path = tmp_path / "live.usdc"
    rec = UsdRecorder(path, fps=FPS, flush_every=2)
    mesh = rec.add_mesh("skin", TET_FACES, TET_POINTS)
    for frame in range(5):
        rec.write_frame(frame=frame, mesh_points={mesh: TET_POINTS + frame})
        # Copy the file as a killed process would leave it; the copy is read from disk, not from memory.
        snapshot = tmp_path / f"snapshot_{frame}.usdc"
        shutil.copy(rec.partial_path, snapshot)
        stage = Usd.Stage.Open(str(snapshot))
        points_attr = stage.GetAttributeAtPath("/World/skin.points")
        # Saved after frames 2 and 4 (flush_every=2): the disk holds frames up to the last flush,
        # and before the first flush a valid stage without the mesh.
        flushed = 2 * ((frame + 1) // 2)
        if flushed == 0:
            assert not points_attr
        else:
            assert points_attr.GetTimeSamples() == list(range(flushed))
    rec.close()
    assert Usd.Stage.Open(str(path)).GetAttributeAtPath("/World/skin.points").GetTimeSamples() == list(range(5))
    assert not (tmp_path / "live.partial.usdc").exists()


def test_time_in_seconds_maps_to_frame_time_codes(tmp_path):
    path = tmp_path / "timed.usda"
    with UsdRecorder(path, fps=FPS) as rec:
        body = rec.add_body("ball", "sphere", radius=0.1)
        for step in range(4):
            # 0.1 s * 30 fps = 3.0000000000000004 must still land on time code 3.
            rec.write_frame(time=0.1 * step, body_transforms={body: ((0.0, 0.0, step), (0, 0, 0, 1))})
    stage = Usd.Stage.Open(str(path))
    assert stage.GetAttributeAtPath("/World/ball.xformOp:translate").GetTimeSamples() == [0.0, 3.0, 6.0, 9.0]
    assert stage.GetEndTimeCode() == 9.0


def test_nan_points_rejected_naming_prim_and_frame(tmp_path):
    path = tmp_path / "nan.usda"
    with pytest.raises(ConfigError, match=r"/World/robot_000/skin .*time code 1\b.*index 2"):
        with UsdRecorder(path) as rec:
            group = rec.add_group("robot_000")
            mesh = rec.add_mesh("skin", TET_FACES, TET_POINTS, parent=group)
            body = rec.add_body("link", "sphere", radius=0.1, parent=group)
            good_pose = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
            rec.write_frame(frame=0, mesh_points={mesh: TET_POINTS}, body_transforms={body: good_pose})
            bad = TET_POINTS.copy()
            bad[2, 1] = np.nan
            rec.write_frame(frame=1, mesh_points={mesh: bad}, body_transforms={body: good_pose})
    stage = Usd.Stage.Open(str(tmp_path / "nan.partial.usda"))
    # The rejected frame wrote nothing, not even the valid body pose.
    assert stage.GetAttributeAtPath("/World/robot_000/skin.points").GetTimeSamples() == [0.0]
    assert stage.GetAttributeAtPath("/World/robot_000/link.xformOp:translate").GetTimeSamples() == [0.0]
    assert "nan" not in (tmp_path / "nan.partial.usda").read_text().lower()


def test_nan_pose_rejected(tmp_path):
    with UsdRecorder(tmp_path / "pose.usda") as rec:
        body = rec.add_body("link", "box", half_extents=(0.1, 0.1, 0.1))
        with pytest.raises(ConfigError, match=r"/World/link position at frame time code 0"):
            rec.write_frame(frame=0, body_transforms={body: ((0.0, np.nan, 0.0), (0, 0, 0, 1))})


@pytest.mark.parametrize("call, message", [
    (lambda rec, mesh, body: rec.write_frame(frame=0, mesh_points={mesh: TET_POINTS[:3]}), r"shape \(4, 3\)"),
    (lambda rec, mesh, body: rec.write_frame(frame=0, body_transforms={body: ((0, 0), (0, 0, 0, 1))}),
     r"shape \(3,\)"),
    (lambda rec, mesh, body: rec.write_frame(frame=0, body_transforms={body: ((0, 0, 0), (0, 0, 1))}),
     r"shape \(4,\)"),
    (lambda rec, mesh, body: rec.write_frame(frame=0, body_transforms={body: ((0, 0, 0), (0, 0, 0, 2))}),
     "unit quaternion"),
    (lambda rec, mesh, body: rec.write_frame(frame=0, body_transforms={body: np.zeros(7)}),
     r"\(position, quat_xyzw\)"),
    (lambda rec, mesh, body: rec.write_frame(mesh_points={mesh: TET_POINTS}), "exactly one of"),
    (lambda rec, mesh, body: rec.write_frame(frame=-1), ">= 0"),
    (lambda rec, mesh, body: rec.write_frame(frame=0, body_transforms={mesh: ((0, 0, 0), (0, 0, 0, 1))}),
     "not a body"),
    (lambda rec, mesh, body: rec.add_body("cone", "cone", radius=0.1), "unknown shape 'cone'"),
    (lambda rec, mesh, body: rec.add_body("ball", "sphere"), "sphere needs radius"),
    (lambda rec, mesh, body: rec.add_body("ball", "sphere", radius=0.1, height=1.0), "does not take height"),
    (lambda rec, mesh, body: rec.add_body("rod", "capsule", radius=0.1, height=1.0, axis="W"), "axis"),
    (lambda rec, mesh, body: rec.add_body("rod", "cylinder", radius=-0.1, height=1.0), "radius must be a positive"),
    (lambda rec, mesh, body: rec.add_mesh("skin", TET_FACES, TET_POINTS), "already exists"),
    (lambda rec, mesh, body: rec.add_mesh("bad name", TET_FACES, TET_POINTS), "valid identifier"),
    (lambda rec, mesh, body: rec.add_mesh("quads", [[0, 1, 2, 3]], TET_POINTS), r"shape \(k, 3\)"),
    (lambda rec, mesh, body: rec.add_mesh("holes", [[0, 1, 4]], TET_POINTS), "index outside 0..3"),
    (lambda rec, mesh, body: rec.add_mesh("floats", TET_FACES * 1.0, TET_POINTS), "integers"),
    (lambda rec, mesh, body: rec.add_mesh("tinted", TET_FACES, TET_POINTS, color=(2, 0, 0)), r"\[0, 1\]"),
    (lambda rec, mesh, body: rec.add_static_box("wall", (0, 0, 0), (1, 0, 1)), "half_extents must be positive"),
    (lambda rec, mesh, body: rec.add_group("g", parent="snake_000"), "must be a group"),
])
def test_bad_input_rejected(tmp_path, call, message):
    with UsdRecorder(tmp_path / "bad.usda") as rec:
        mesh = rec.add_mesh("skin", TET_FACES, TET_POINTS)
        body = rec.add_body("link", "sphere", radius=0.1)
        with pytest.raises(ConfigError, match=message):
            call(rec, mesh, body)


def test_time_codes_must_increase(tmp_path):
    with UsdRecorder(tmp_path / "order.usda") as rec:
        rec.write_frame(frame=3)
        with pytest.raises(ConfigError, match="must come after the last one, 3"):
            rec.write_frame(frame=3)


def test_use_after_close_rejected(tmp_path):
    rec = UsdRecorder(tmp_path / "closed.usdc")
    body = rec.add_body("link", "sphere", radius=0.1)
    rec.close()
    rec.close()
    with pytest.raises(ConfigError, match="closed"):
        rec.write_frame(frame=0, body_transforms={body: ((0, 0, 0), (0, 0, 0, 1))})
    with pytest.raises(ConfigError, match="closed"):
        rec.add_group("late")
    with pytest.raises(ConfigError, match="closed"):
        rec.flush()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"path": "scene.obj"}, UsageError, "must end in one of"),
    ({"path": "scene.USDA"}, UsageError, "must end in one of"),
    ({"path": "missing/scene.usda"}, UsageError, "does not exist"),
    ({"path": "scene.usda", "fps": 0.0}, ConfigError, "fps must be a positive"),
    ({"path": "scene.usda", "up_axis": "X"}, ConfigError, "up_axis"),
    ({"path": "scene.usda", "meters_per_unit": -1.0}, ConfigError, "meters_per_unit"),
    ({"path": "scene.usda", "flush_every": 0}, ConfigError, "flush_every"),
])
def test_bad_recorder_options_rejected_before_any_file(tmp_path, kwargs, error, message):
    kwargs["path"] = tmp_path / kwargs["path"]
    with pytest.raises(error, match=message):
        UsdRecorder(**kwargs)
    assert list(tmp_path.iterdir()) == []


def test_same_path_can_be_recorded_twice(tmp_path):
    path = tmp_path / "again.usda"
    for _ in range(2):
        with UsdRecorder(path, fps=24.0, up_axis="Y") as rec:
            rec.add_ground(size=4.0)
            rec.write_frame(frame=0)
    stage = Usd.Stage.Open(str(path))
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y
    ground = UsdGeom.Mesh(stage.GetPrimAtPath("/World/ground"))
    # A Y-up ground lies in the XZ plane and faces +Y.
    np.testing.assert_allclose(np.array(ground.GetExtentAttr().Get()), [[-2, 0, -2], [2, 0, 2]], atol=TOL)
    points = np.array(ground.GetPointsAttr().Get())
    normal = np.cross(points[1] - points[0], points[2] - points[0])
    assert normal[1] > 0 and abs(normal[0]) < TOL and abs(normal[2]) < TOL


def test_centimetre_stage_converts_metre_inputs(tmp_path):
    path = tmp_path / "cm.usda"
    with UsdRecorder(path, meters_per_unit=0.01) as rec:
        mesh = rec.add_mesh("skin", TET_FACES, TET_POINTS)
        body = rec.add_body("rod", "capsule", radius=0.05, height=0.2)
        rec.add_static_box("brick", (0.0, 0.0, 0.5), (0.1, 0.2, 0.3))
        rec.write_frame(frame=0, mesh_points={mesh: TET_POINTS},
                        body_transforms={body: ((0.0, 0.0, 1.5), (0.0, 0.0, 0.0, 1.0))})
    stage = Usd.Stage.Open(str(path))
    assert UsdGeom.GetStageMetersPerUnit(stage) == 0.01
    # 1 m = 100 stage units.
    np.testing.assert_allclose(np.array(stage.GetAttributeAtPath("/World/skin.points").Get(0)), TET_POINTS * 100,
                               rtol=TOL)
    capsule = UsdGeom.Capsule(stage.GetPrimAtPath("/World/rod"))
    assert capsule.GetRadiusAttr().Get() == pytest.approx(5.0, rel=TOL)
    assert capsule.GetHeightAttr().Get() == pytest.approx(20.0, rel=TOL)
    np.testing.assert_allclose(stage.GetAttributeAtPath("/World/rod.xformOp:translate").Get(0), [0, 0, 150], rtol=TOL)
    brick = UsdGeom.BBoxCache(0.0, [UsdGeom.Tokens.default_]).ComputeWorldBound(stage.GetPrimAtPath("/World/brick"))
    box = brick.ComputeAlignedRange()
    np.testing.assert_allclose([box.GetMin(), box.GetMax()], [[-10, -20, 20], [10, 20, 80]], rtol=TOL, atol=TOL)
