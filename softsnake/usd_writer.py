"""Streaming USD scene recorder for batches of robots.

The recorder is engine-agnostic: it takes numpy arrays (deformable surface points, rigid-body
poses) and writes them as time samples with usd-core (pxr). Geometry is grouped under named
Xforms (``/World/snake_003/link_1``) so a batch of robots laid side by side stays readable.

Files are never corrupt: the stage lives in ``<stem>.partial<ext>`` next to the final path while
recording (saved every ``flush_every`` frames, so a killed process leaves a readable partial file
up to the last flush) and is written onto the final path only when recording ends normally. The
file format follows the extension: ``.usda`` text, ``.usdc`` or ``.usd`` binary crate. A recording
that was interrupted goes on in its partial file (``reopen_after``): a run continued from a saved
state adds its scene again, which then finds the prims that are there, and writes the frames after it.

Quaternions come in Warp's (x, y, z, w) order; positions and sizes are given in metres [m] and
written in stage units (divided by ``meters_per_unit``).
"""

import math
import os
from dataclasses import dataclass

import numpy as np
from pxr import Gf, Sdf, Tf, Usd, UsdGeom, Vt

from .errors import ConfigError, UsageError
from .output_files import replaced_when_complete
from .validation import positive_integer, positive_number

USD_EXTENSIONS = (".usda", ".usdc", ".usd")
BODY_SHAPES = ("box", "sphere", "capsule", "cylinder")
AXES = ("X", "Y", "Z")

# Time codes computed as time * fps carry round-off (0.1 s * 30 fps = 3.0000000000000004); snapping
# within this many frames of an integer keeps sample times exact for frame-locked recordings.
TIME_CODE_SNAP = 1e-6
# Simulation quaternions drift slightly from unit length; larger errors mean a wrong input layout.
QUAT_NORM_TOLERANCE = 1e-3


@dataclass(frozen=True, eq=False)
class GroupHandle:
    """A named Xform that parents other prims; ``path`` is its USD prim path."""

    path: str


@dataclass(frozen=True, eq=False)
class MeshHandle:
    """A triangle mesh whose points are time-sampled; ``point_count`` points per frame."""

    path: str
    point_count: int


@dataclass(frozen=True, eq=False)
class BodyHandle:
    """A rigid shape whose translate and orient are time-sampled."""

    path: str
    shape: str


def _check_vector(label, value, size):
    """Return ``value`` as a float64 array of ``size`` finite entries."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (size,):
        raise ConfigError(f"{label} must have shape ({size},), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ConfigError(f"{label} must be finite, got {array.tolist()}")
    return array


def _check_axis(label, axis):
    if axis not in AXES:
        raise ConfigError(f"{label} axis must be one of {', '.join(AXES)}, got {axis!r}")
    return axis


def _check_color(label, color):
    """Return ``color`` as an RGB tuple in [0, 1], or None."""
    if color is None:
        return None
    rgb = _check_vector(f"{label} color", color, 3)
    if np.any(rgb < 0.0) or np.any(rgb > 1.0):
        raise ConfigError(f"{label} color must be RGB in [0, 1], got {rgb.tolist()}")
    return tuple(rgb)


def _quat_xyzw_to_usd(label, quat_xyzw):
    """Convert a Warp (x, y, z, w) quaternion to a unit ``Gf.Quatf`` (w first)."""
    quat = _check_vector(label, quat_xyzw, 4)
    norm = float(np.linalg.norm(quat))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        raise ConfigError(f"{label} must be a unit quaternion (x, y, z, w), got norm {norm:.6g}")
    x, y, z, w = quat / norm
    return Gf.Quatf(float(w), Gf.Vec3f(float(x), float(y), float(z)))


def _points_extent(points):
    """Axis-aligned bounds of ``points`` as the two-corner USD extent."""
    return Vt.Vec3fArray.FromNumpy(np.stack([points.min(axis=0), points.max(axis=0)]).astype(np.float32))


class UsdRecorder:
    """Record a USD stage frame by frame; use as a context manager.

    ``path``: final file (.usda, .usdc or .usd); ``fps``: frames per second [1/s], also the
    time codes per second; ``up_axis``: "Z" or "Y"; ``meters_per_unit``: length of one stage
    unit [m] (inputs stay in metres and are converted when written);
    ``flush_every``: save the partial file every this many frames;
    ``reopen_after``: None (a new recording), or go on with the partial file an interrupted recorder of
    ``path`` left: every time sample after this time [s] is removed, and the ``add_*`` methods return
    the prims that are there (the same scene added again) instead of adding new ones.
    """

    def __init__(self, path, *, fps=60.0, up_axis="Z", meters_per_unit=1.0, flush_every=100, reopen_after=None):
        self.path = os.path.abspath(os.fspath(path))
        stem, ext = os.path.splitext(self.path)
        if ext not in USD_EXTENSIONS:
            raise UsageError(f"USD output {path} must end in one of {', '.join(USD_EXTENSIONS)}")
        if not os.path.isdir(os.path.dirname(self.path)):
            raise UsageError(f"USD output folder {os.path.dirname(self.path)} does not exist")
        if os.path.isdir(self.path):
            raise UsageError(f"USD output {path} is a folder")
        self.fps = positive_number("fps", fps)
        if up_axis not in ("Y", "Z"):
            raise ConfigError(f"up_axis must be 'Y' or 'Z', got {up_axis!r}")
        self.up_axis = up_axis
        meters_per_unit = positive_number("meters_per_unit", meters_per_unit)
        self._units_per_meter = 1.0 / meters_per_unit
        self.flush_every = positive_integer("flush_every", flush_every)
        self.partial_path = f"{stem}.partial{ext}"
        self._groups = set()
        self._meshes = {}
        self._bodies = {}
        self.frame_count = 0
        self.last_time_code = None
        self.closed = False
        self.reopened = reopen_after is not None
        """Whether this recorder goes on with an interrupted recording's partial file."""
        if self.reopened:
            self._reopen(reopen_after, meters_per_unit)
            return
        try:
            self._stage = Usd.Stage.CreateNew(self.partial_path)
        except Tf.ErrorException as exc:
            raise UsageError(f"cannot create {self.partial_path} (is another recorder writing it?)") from exc
        self._layer = self._stage.GetRootLayer()
        UsdGeom.SetStageUpAxis(self._stage, UsdGeom.Tokens.z if up_axis == "Z" else UsdGeom.Tokens.y)
        UsdGeom.SetStageMetersPerUnit(self._stage, meters_per_unit)
        self._stage.SetTimeCodesPerSecond(self.fps)
        self._stage.SetFramesPerSecond(self.fps)
        self._stage.SetStartTimeCode(0.0)
        self._stage.SetEndTimeCode(0.0)
        world = UsdGeom.Xform.Define(self._stage, "/World")
        self._stage.SetDefaultPrim(world.GetPrim())
        self._world = GroupHandle("/World")
        self._groups.add(self._world)

    def _reopen(self, after, meters_per_unit):
        """Open the partial file, check its units and rate, and remove its time samples after ``after`` [s]."""
        if not os.path.isfile(self.partial_path):
            raise UsageError(f"no partial USD file {self.partial_path} to go on with")
        try:
            self._stage = Usd.Stage.Open(self.partial_path)
        except Tf.ErrorException as exc:
            raise UsageError(f"cannot open {self.partial_path}: {exc}") from exc
        self._layer = self._stage.GetRootLayer()
        if (self._stage.GetTimeCodesPerSecond() != self.fps
                or UsdGeom.GetStageMetersPerUnit(self._stage) != meters_per_unit):
            raise UsageError(f"{self.partial_path} was recorded at {self._stage.GetTimeCodesPerSecond():g} frames per "
                             f"second and {UsdGeom.GetStageMetersPerUnit(self._stage):g} m per unit, not {self.fps:g} "
                             f"and {meters_per_unit:g}")
        last = self._time_code(None, after)
        kept = set()
        with Sdf.ChangeBlock():
            for prim in self._stage.Traverse():
                for attribute in prim.GetAttributes():
                    for code in attribute.GetTimeSamples():
                        if code > last:
                            self._layer.EraseTimeSample(attribute.GetPath(), code)
                        else:
                            kept.add(code)
        if last not in kept:
            raise UsageError(f"{self.partial_path} has no frame at {after:g} s to go on from (it ends at "
                             f"{max(kept, default=0.0) / self.fps:g} s)")
        self.frame_count = len(kept)
        self.last_time_code = last
        self._stage.SetEndTimeCode(last)
        self._world = GroupHandle(self._stage.GetDefaultPrim().GetPath().pathString)
        self._groups.add(self._world)

    def _found(self, path):
        """The prim at ``path`` of a reopened recording (None for a new one); ConfigError if it is not there."""
        if not self.reopened:
            return None
        prim = self._stage.GetPrimAtPath(path)
        if not prim:
            raise ConfigError(f"{path} is not in the partial file {self.partial_path}: another scene?")
        return prim

    # ----------------------------------------------------------------------------- lifetime

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is None:
            self.close()
            return False
        if not self.closed:
            try:
                self._save()
            except Exception as save_error:  # keep the original error; say why no partial file exists
                exc_value.add_note(f"partial USD {self.partial_path} could not be saved: {save_error}")
            self._release()
        return False

    def flush(self):
        """Save everything recorded so far to the partial file ``<stem>.partial<ext>``."""
        self._check_open()
        self._save()

    def close(self):
        """Save the stage, write it afresh onto the final path (atomically) and remove the partial file; later calls do
        nothing.

        Written afresh (``Sdf.Layer.Export``), the final file's bytes follow from the recorded scene alone: a crate file
        saved several times keeps the layout of its saves, so a recording interrupted and reopened (``reopen_after``)
        would otherwise end in other bytes than one never interrupted, with the same samples."""
        if self.closed:
            return
        self._save()
        with replaced_when_complete(self.path) as temporary:
            if not self._layer.Export(str(temporary)):
                raise UsageError(f"cannot write {self.path}")
        self._release()
        os.remove(self.partial_path)

    def _save(self):
        self._stage.SetEndTimeCode(self.last_time_code or 0.0)
        self._stage.Save()

    def _release(self):
        # Dropping the stage frees the layer identifier so a later recorder may reuse the path.
        self._stage = None
        self._layer = None
        self.closed = True

    def _check_open(self):
        if self.closed:
            raise ConfigError(f"USD recorder for {self.path} is closed")

    # ----------------------------------------------------------------------------- prims

    def _child_path(self, name, parent):
        """Checked prim path for ``name`` under ``parent`` (a GroupHandle or None for /World)."""
        self._check_open()
        parent = self._world if parent is None else parent
        if parent not in self._groups:
            raise ConfigError(f"parent of {name!r} must be a group added to this recorder, got {parent!r}")
        if not isinstance(name, str) or not Sdf.Path.IsValidIdentifier(name):
            raise ConfigError(f"prim name {name!r} must be a valid identifier (letters, digits, _)")
        path = f"{parent.path}/{name}"
        if self._stage.GetPrimAtPath(path) and not self.reopened:
            raise ConfigError(f"prim {path} already exists")
        return path

    def _finish_gprim(self, gprim, color):
        """Author the gprim's extent and optional constant display color."""
        extent = UsdGeom.Boundable.ComputeExtentFromPlugins(gprim, Usd.TimeCode.Default())
        gprim.CreateExtentAttr(extent)
        if color is not None:
            gprim.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*color)]))

    def _define_shape(self, path, shape, *, half_extents, radius, height, axis):
        """Define a box, sphere, capsule or cylinder gprim; a box is a size-2 cube scaled later."""
        if shape not in BODY_SHAPES:
            raise ConfigError(f"{path}: unknown shape {shape!r}, expected one of {', '.join(BODY_SHAPES)}")
        needs = {"box": ("half_extents",), "sphere": ("radius",)}.get(shape, ("radius", "height"))
        given = {"half_extents": half_extents, "radius": radius, "height": height}
        for key, value in given.items():
            if (value is None) == (key in needs):
                state = "needs" if value is None else "does not take"
                raise ConfigError(f"{path}: a {shape} {state} {key}")
        if shape == "box":
            half = _check_vector(f"{path} half_extents", half_extents, 3)
            if np.any(half <= 0.0):
                raise ConfigError(f"{path} half_extents must be positive, got {half.tolist()}")
            gprim = UsdGeom.Cube.Define(self._stage, path)
            gprim.CreateSizeAttr(2.0)
            return gprim, Gf.Vec3f(*(half * self._units_per_meter))
        radius = positive_number(f"{path} radius", radius)
        if shape == "sphere":
            gprim = UsdGeom.Sphere.Define(self._stage, path)
            gprim.CreateRadiusAttr(radius * self._units_per_meter)
            return gprim, None
        height = positive_number(f"{path} height", height)
        axis = _check_axis(path, axis)
        gprim = (UsdGeom.Capsule if shape == "capsule" else UsdGeom.Cylinder).Define(self._stage, path)
        gprim.CreateRadiusAttr(radius * self._units_per_meter)
        gprim.CreateHeightAttr(height * self._units_per_meter)
        gprim.CreateAxisAttr(axis)
        return gprim, None

    def add_group(self, name, *, parent=None):
        """Add an Xform named ``name`` under ``parent`` (None: /World); returns a GroupHandle."""
        path = self._child_path(name, parent)
        if self._found(path) is None:
            UsdGeom.Xform.Define(self._stage, path)
        handle = GroupHandle(path)
        self._groups.add(handle)
        return handle

    def add_ground(self, *, size=100.0, name="ground", color=(0.5, 0.5, 0.5)):
        """Add a square ground quad of side ``size`` [m] through the origin, normal to the up axis."""
        path = self._child_path(name, None)
        if self._found(path) is not None:
            return path
        half = positive_number("ground size", size) / 2.0 * self._units_per_meter
        color = _check_color(path, color)
        corners = [(-half, -half), (half, -half), (half, half), (-half, half)]
        # Counter-clockwise seen from the up axis, so the face normal points up.
        if self.up_axis == "Z":
            points = [(a, b, 0.0) for a, b in corners]
        else:
            points = [(b, 0.0, a) for a, b in corners]
        mesh = UsdGeom.Mesh.Define(self._stage, path)
        mesh.CreatePointsAttr(Vt.Vec3fArray([Gf.Vec3f(*p) for p in points]))
        mesh.CreateFaceVertexCountsAttr([4])
        mesh.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
        mesh.CreateDoubleSidedAttr(True)
        self._finish_gprim(mesh, color)
        return path

    def add_static_box(self, name, center, half_extents, rotation_quat_xyzw=(0.0, 0.0, 0.0, 1.0), *,
                       color=None, parent=None):
        """Add a fixed box: ``center`` [m], ``half_extents`` [m], rotation as (x, y, z, w)."""
        path = self._child_path(name, parent)
        if self._found(path) is not None:
            return path
        center = _check_vector(f"{path} center", center, 3) * self._units_per_meter
        orient = _quat_xyzw_to_usd(f"{path} rotation", rotation_quat_xyzw)
        color = _check_color(path, color)
        gprim, scale = self._define_shape(path, "box", half_extents=half_extents, radius=None, height=None,
                                          axis=None)
        gprim.AddTranslateOp().Set(Gf.Vec3d(*center))
        gprim.AddOrientOp().Set(orient)
        gprim.AddScaleOp().Set(scale)
        self._finish_gprim(gprim, color)
        return path

    def add_static_cylinder(self, name, center, radius, height, axis="Z", *, color=None, parent=None):
        """Add a fixed cylinder: ``center`` [m], ``radius`` [m], full ``height`` [m] along ``axis``."""
        path = self._child_path(name, parent)
        if self._found(path) is not None:
            return path
        center = _check_vector(f"{path} center", center, 3) * self._units_per_meter
        color = _check_color(path, color)
        gprim, _ = self._define_shape(path, "cylinder", half_extents=None, radius=radius, height=height,
                                      axis=axis)
        gprim.AddTranslateOp().Set(Gf.Vec3d(*center))
        self._finish_gprim(gprim, color)
        return path

    def add_mesh(self, name, faces, points, *, color=None, parent=None):
        """Add a triangle mesh with time-sampled points; returns a MeshHandle.

        ``faces``: (k, 3) vertex indices; ``points``: (n, 3) initial positions [m].
        """
        path = self._child_path(name, parent)
        prim = self._found(path)
        if prim is not None:
            mesh = UsdGeom.Mesh(prim)
            handle = MeshHandle(path, len(mesh.GetPointsAttr().Get(Usd.TimeCode.Default())))
            self._meshes[handle] = (mesh.GetPointsAttr().GetPath(), mesh.GetExtentAttr().GetPath())
            return handle
        faces = np.asarray(faces)
        if faces.ndim != 2 or faces.shape[1] != 3 or faces.shape[0] == 0:
            raise ConfigError(f"{path} faces must have shape (k, 3) with k > 0, got {faces.shape}")
        if not np.issubdtype(faces.dtype, np.integer):
            raise ConfigError(f"{path} faces must be integers, got {faces.dtype}")
        points = self._check_points(path, points, None, "initial points")
        if faces.min() < 0 or faces.max() >= len(points):
            raise ConfigError(f"{path} faces index outside 0..{len(points) - 1}")
        color = _check_color(path, color)
        mesh = UsdGeom.Mesh.Define(self._stage, path)
        mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(points))
        mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(faces), 3, dtype=np.int32)))
        mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(faces.astype(np.int32).ravel()))
        mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
        mesh.CreateExtentAttr(_points_extent(points))
        if color is not None:
            mesh.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*color)]))
        handle = MeshHandle(path, len(points))
        self._meshes[handle] = (mesh.GetPointsAttr().GetPath(), mesh.GetExtentAttr().GetPath())
        return handle

    def add_body(self, name, shape, *, half_extents=None, radius=None, height=None, axis="Z", color=None,
                 parent=None):
        """Add a rigid shape with a time-sampled pose; returns a BodyHandle.

        ``shape``: "box" (``half_extents`` [m]), "sphere" (``radius`` [m]), "capsule" or
        "cylinder" (``radius`` [m], ``height`` [m] along ``axis``; a capsule's height excludes
        its two hemispherical caps, as in UsdGeom). The shape is centred on the body origin.
        """
        path = self._child_path(name, parent)
        prim = self._found(path)
        if prim is not None:
            ops = {op.GetOpType(): op.GetAttr().GetPath() for op in UsdGeom.Xformable(prim).GetOrderedXformOps()}
            handle = BodyHandle(path, shape)
            self._bodies[handle] = (ops[UsdGeom.XformOp.TypeTranslate], ops[UsdGeom.XformOp.TypeOrient])
            return handle
        color = _check_color(path, color)
        gprim, scale = self._define_shape(path, shape, half_extents=half_extents, radius=radius, height=height,
                                          axis=axis)
        translate = gprim.AddTranslateOp()
        orient = gprim.AddOrientOp()
        if scale is not None:
            gprim.AddScaleOp().Set(scale)
        self._finish_gprim(gprim, color)
        handle = BodyHandle(path, shape)
        self._bodies[handle] = (translate.GetAttr().GetPath(), orient.GetAttr().GetPath())
        return handle

    # ----------------------------------------------------------------------------- frames

    def _check_points(self, path, points, point_count, what):
        """Return ``points`` [m] as a float32 (n, 3) array in stage units after checking shape and finiteness."""
        array = np.asarray(points, dtype=np.float64)
        expected = "(n, 3)" if point_count is None else f"({point_count}, 3)"
        if array.ndim != 2 or array.shape[1] != 3 or len(array) == 0 or (
                point_count is not None and len(array) != point_count):
            raise ConfigError(f"{path} {what} must have shape {expected}, got {array.shape}")
        bad = ~np.all(np.isfinite(array), axis=1)
        if np.any(bad):
            raise ConfigError(f"{path} {what} have {int(bad.sum())} non-finite points "
                              f"(first at index {int(np.argmax(bad))})")
        return (array * self._units_per_meter).astype(np.float32)

    def _time_code(self, frame, time):
        if (frame is None) == (time is None):
            raise ConfigError("write_frame needs exactly one of frame= (index) or time= (seconds)")
        code = float(frame) if time is None else float(time) * self.fps
        if not math.isfinite(code) or code < 0.0:
            raise ConfigError(f"frame time code must be finite and >= 0, got {code!r}")
        if abs(code - round(code)) < TIME_CODE_SNAP:
            code = float(round(code))
        if self.last_time_code is not None and code <= self.last_time_code:
            raise ConfigError(f"frame time code {code:g} must come after the last one, {self.last_time_code:g}")
        return code

    def write_frame(self, *, frame=None, time=None, mesh_points=None, body_transforms=None):
        """Add one time sample per given handle.

        Give either ``frame`` (index; time code = frame) or ``time`` [s] (time code = time * fps).
        ``mesh_points``: {MeshHandle: (n, 3) points [m]}; ``body_transforms``:
        {BodyHandle: (position (3,) [m], quaternion (x, y, z, w))}. Everything is checked
        before anything is written, so a rejected frame leaves no samples behind.
        """
        self._check_open()
        code = self._time_code(frame, time)
        where = f"at frame time code {code:g}"
        samples = []
        for handle, points in (mesh_points or {}).items():
            if handle not in self._meshes:
                raise ConfigError(f"{handle!r} is not a mesh of this recorder")
            array = self._check_points(handle.path, points, handle.point_count, f"points {where}")
            points_path, extent_path = self._meshes[handle]
            samples.append((points_path, Vt.Vec3fArray.FromNumpy(array)))
            samples.append((extent_path, _points_extent(array)))
        for handle, transform in (body_transforms or {}).items():
            if handle not in self._bodies:
                raise ConfigError(f"{handle!r} is not a body of this recorder")
            try:
                position, quat_xyzw = transform
            except (TypeError, ValueError):
                raise ConfigError(f"{handle.path} transform {where} must be (position, quat_xyzw)") from None
            position = _check_vector(f"{handle.path} position {where}", position, 3)
            orient = _quat_xyzw_to_usd(f"{handle.path} quaternion {where}", quat_xyzw)
            translate_path, orient_path = self._bodies[handle]
            samples.append((translate_path, Gf.Vec3d(*(position * self._units_per_meter))))
            samples.append((orient_path, orient))

        # Batch the layer edits so USD sends one change notice per frame, not one per sample.
        with Sdf.ChangeBlock():
            for attr_path, value in samples:
                self._layer.SetTimeSample(attr_path, code, value)
        self.last_time_code = code
        self._stage.SetEndTimeCode(code)
        self.frame_count += 1
        if self.frame_count % self.flush_every == 0:
            self._save()
