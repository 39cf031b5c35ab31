"""The builder's internal consistency, checked before its lists become device arrays.

A builder keeps one list per field of every kind of item (``softsnake.constraints.base``), and every
``add_*`` method appends to all of them or to none. Lists changed by hand (or by code that bypassed
``append_item``) can still leave them uneven, or hold indices past the end of another kind's lists;
uploaded as they are, the kernels would read past the ends of their arrays (a crash, or silently
wrong numbers). ``check_builder_tables`` refuses such a builder with a ``ModelError`` that names the
list or the item: ``ModelBuilder.finalize`` runs it, and ``ModelBuilder.add_world`` runs it on the
builder it copies.
"""

import numpy as np
import warp as wp

from .constraints.shapes import OBSTACLE, ObstacleKind, ShapeKind
from .errors import ModelError
from .items import item_kinds
from .validation import FLOAT32_MAX, FLOAT32_TINY, POSITION_LIMIT

FLOAT_SHAPES = {float: (), wp.vec3: (3,), wp.quat: (4,), wp.mat33: (3, 3), wp.transform: (7,),
                wp.spatial_vector: (6,)}
"""Shape of one item's value of each floating-point field dtype (transforms and spatial vectors are
held as pairs of a vec3 and a quaternion or a vec3)."""

POSITION_FIELDS = {"particle_q": 3, "body_q": 3, "obstacle_pos": 3}
"""Fields whose first components are a position [m], bounded by ``POSITION_LIMIT``."""

KIND_ENUMS = {"shape_kind": ShapeKind, "obstacle_kind": ObstacleKind}

INFINITY_MEANS_NONE = {"shape_mu"}
"""Fields where +inf is a value (a shape's mu: the obstacle's); contact slots take the smaller mu."""


def label_of(kind):
    """How messages name one item of ``kind`` ("angular spring", "pressure channel")."""
    return getattr(kind, "label", "") or kind.name.replace("_", " ")


def _corrupt(message):
    return ModelError(f"corrupt builder: {message}")


def _list_lengths(builder):
    """Item count of every kind; ModelError if a field's list is missing or of another length."""
    counts = {}
    for kind in item_kinds():
        worlds = getattr(builder, f"{kind.name}_world", None)
        if not isinstance(worlds, list):
            raise _corrupt(f"{kind.name}_world is not a list")
        for field in kind.fields:
            values = getattr(builder, f"{kind.name}_{field.name}", None)
            if not isinstance(values, list) or len(values) != len(worlds):
                have = f"{len(values)} values" if isinstance(values, list) else "no list"
                raise _corrupt(f"{kind.name}_{field.name} has {have} for {len(worlds)} {label_of(kind)} items "
                               "(a list changed outside the add_* methods)")
        counts[kind.name] = len(worlds)
    return counts


def _integers(values, what, width=None):
    """``values`` as an int64 array (items, width); ModelError unless every entry is an integer."""
    try:
        array = np.asarray(values) if len(values) else np.zeros((0,) if width is None else (0, width), dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise _corrupt(f"{what} holds values that are not integers") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.bool_)):
        raise _corrupt(f"{what} holds values that are not integers")
    if width is not None and (array.ndim != 2 or array.shape[1] != width):
        raise _corrupt(f"{what} holds entries of shape {array.shape[1:]}, not ({width},)")
    return array.astype(np.int64)


def _check_worlds(builder):
    """Each kind's worlds as int arrays; ModelError for a world out of range or out of order."""
    world_count = max(builder.world_count, 1)
    worlds = {}
    for kind in item_kinds():
        w = _integers(getattr(builder, f"{kind.name}_world"), f"{kind.name}_world").reshape(-1)
        shared = kind is OBSTACLE  # -1: an obstacle shared by every world
        bad = np.flatnonzero((w < (-1 if shared else 0)) | (w >= world_count))
        if len(bad):
            k = int(bad[0])
            raise _corrupt(f"{label_of(kind)} {k} belongs to world {w[k]}, outside [0, {world_count})")
        if not shared and np.any(np.diff(w) < 0):
            k = int(np.flatnonzero(np.diff(w) < 0)[0]) + 1
            raise _corrupt(f"{label_of(kind)} {k} of world {w[k]} follows one of world {w[k - 1]}: "
                           "items must be added world after world")
        worlds[kind.name] = w
    return worlds


def _check_indices(builder, counts, worlds):
    """Every index field in range, and pointing into the item's own world."""
    for kind in item_kinds():
        for field in kind.fields:
            if not field.index:
                continue
            values = getattr(builder, f"{kind.name}_{field.name}")
            if not values:
                continue
            width = len(values[0]) if values and isinstance(values[0], (tuple, list, np.ndarray)) else None
            index = _integers(values, f"{kind.name}_{field.name}", width).reshape(counts[kind.name], -1)
            size = counts[field.index]
            low = -1 if field.optional else 0
            bad = np.argwhere((index < low) | (index >= size))
            if len(bad):
                k, j = (int(v) for v in bad[0])
                allowed = f"[{low}, {size})" if low == 0 else f"-1 or [0, {size})"
                raise _corrupt(f"{label_of(kind)} {k}: {field.index.replace('_', ' ')} index {int(index[k, j])} "
                               f"outside {allowed}")
            item_world = worlds[kind.name][:, None]
            target_world = worlds[field.index][np.maximum(index, 0)] if size else np.zeros_like(index)
            foreign = np.argwhere((index >= 0) & (target_world != item_world) & (item_world >= 0))
            if len(foreign):
                k, j = (int(v) for v in foreign[0])
                raise _corrupt(f"{label_of(kind)} {k} of world {int(item_world[k, 0])} refers to "
                               f"{field.index.replace('_', ' ')} {int(index[k, j])} of world {int(target_world[k, j])}")


def _floats(values, dtype, what):
    """A field's values as a float64 array (items, *shape); ModelError for a value of another shape."""
    shape = FLOAT_SHAPES[dtype]
    try:
        if dtype in (wp.transform, wp.spatial_vector):  # pairs (vec3, quaternion or vec3)
            array = np.concatenate([np.asarray([v[k] for v in values], dtype=np.float64).reshape(len(values), -1)
                                    for k in range(2)], axis=1)
        else:
            array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, IndexError, OverflowError):
        raise _corrupt(f"{what} holds values that are not arrays of numbers of shape {shape}") from None
    if array.shape[1:] != shape:
        raise _corrupt(f"{what} holds values of shape {array.shape[1:]}, not {shape}")
    return array


def _check_values(builder):
    """Every floating-point field finite in float32, positions within ``POSITION_LIMIT``, kinds known."""
    for kind in item_kinds():
        for field in kind.fields:
            name = f"{kind.name}_{field.name}"
            values = getattr(builder, name)
            if name in KIND_ENUMS:
                codes = _integers(values, name).reshape(-1)
                known = np.isin(codes, [int(k) for k in KIND_ENUMS[name]])
                if not known.all():
                    k = int(np.flatnonzero(~known)[0])
                    raise _corrupt(f"{label_of(kind)} {k} has unknown kind {int(codes[k])}")
            if field.index or field.dtype not in FLOAT_SHAPES or not values:
                continue
            array = _floats(values, field.dtype, name)
            flat = array.reshape(len(array), -1)
            checked = np.where(flat == np.inf, 0.0, flat) if name in INFINITY_MEANS_NONE else flat
            magnitude = np.abs(checked)
            bad = ~np.isfinite(checked) | (magnitude > FLOAT32_MAX) | ((magnitude > 0) & (magnitude < FLOAT32_TINY))
            if name in POSITION_FIELDS:
                bad[:, :POSITION_FIELDS[name]] |= magnitude[:, :POSITION_FIELDS[name]] > POSITION_LIMIT
            if bad.any():
                k = int(np.flatnonzero(bad.any(axis=1))[0])
                beyond = f" or lies beyond {POSITION_LIMIT:g} m" if name in POSITION_FIELDS else ""
                raise ModelError(f"{label_of(kind)} {k} {field.name} {flat[k].tolist()} is not finite in float32 "
                                 f"(in which the model is simulated){beyond}")


def check_builder_tables(builder):
    """ModelError unless ``builder``'s lists are consistent: one value per item in every field's list,
    worlds in range and in order, every index in range and in its item's world, every number finite
    in float32 and every position within ``POSITION_LIMIT``."""
    counts = _list_lengths(builder)
    worlds = _check_worlds(builder)
    _check_indices(builder, counts, worlds)
    _check_values(builder)
