"""Checks of user input at the edge: each returns the value in its checked form or raises the given
error class with one line that names the input (``what``) and what is wrong with it.

The model builder raises ``ModelError``; configuration and scene loaders pass ``ConfigError``.
"""

import math

import numpy as np

from .errors import ModelError


def vector(value, n, what, error=ModelError):
    """A finite float64 vector of ``n`` components."""
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise error(f"{what} must be {n} numbers, got {value!r}") from None
    if a.shape != (n,):
        raise error(f"{what} must have {n} components, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise error(f"{what} contains NaN or Inf: {a.tolist()}")
    return a


def unit_quaternion(value, what, error=ModelError):
    """A quaternion (x, y, z, w), normalised; a zero one is an error."""
    q = vector(value, 4, what, error)
    norm = np.linalg.norm(q)
    if norm < 1e-12:
        raise error(f"{what} is a zero quaternion")
    return q / norm


def unit_axis(axis, what, error=ModelError):
    """A joint axis as a unit 3-vector; a zero axis is an error naming the joint."""
    axis = vector(axis, 3, f"{what} axis", error)
    norm = np.linalg.norm(axis)
    if norm < 1e-12:
        raise error(f"{what} axis is zero")
    return axis / norm


def positive(value, what, error=ModelError):
    """A positive, finite float."""
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise error(f"{what} must be positive and finite, got {value}")
    return v


def non_negative(value, what, error=ModelError):
    """A non-negative, finite float."""
    v = float(value)
    if not math.isfinite(v) or v < 0.0:
        raise error(f"{what} must be non-negative and finite, got {value}")
    return v


def finite(value, what, error=ModelError):
    """A finite float."""
    return float(vector([value], 1, what, error)[0])
