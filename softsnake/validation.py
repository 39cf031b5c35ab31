"""Checks of configuration values, scene entries and function arguments, one copy for every robot.

Each check raises ``softsnake.errors.ConfigError`` with a one-line message and returns the
checked value. Two message styles:

- keys of a parameter file or scene (``number``, ``positive``, ``non_negative``, ``integer``,
  ``pair``, ``value_range``, ``float_field``): the dotted key first, as the file names it,
  ``"link.length: must be positive, got -0.1"``;
- arguments of a library function (``positive_integer``, ``positive_number``, ``finite_array``,
  ``positive_array``, ``non_negative_array``): the argument's name in the sentence,
  ``"snake_count must be a positive integer, got 0"``.

``read_toml`` and ``naming_file`` read a parameter file and put its name in front of a message.
A bool is never taken for a number.

Input to the model builder is checked by the functions of the last section (``vector``,
``unit_quaternion``, ``unit_axis``, ``positive_value``, ``non_negative_value``, ``finite_value``): they
raise ``ModelError`` (or the given error class) naming the item, ``"particle 3 mass must be positive
and finite, got -1"``, and return the value in its checked form.
"""

import contextlib
import math
import tomllib

import numpy as np

from .errors import ConfigError, ModelError


def _is_real(value):
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


# ---------------------------------------------------------------------- keys of files and scenes
def number(key, value):
    """``value`` if it is a finite real number (returned as given, int or float)."""
    if not _is_real(value):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{key}: must be finite, got {value}")
    return value


def positive(key, value):
    """``value`` if it is a finite number > 0."""
    if number(key, value) <= 0:
        raise ConfigError(f"{key}: must be positive, got {value}")
    return value


def non_negative(key, value):
    """``value`` if it is a finite number >= 0."""
    if number(key, value) < 0:
        raise ConfigError(f"{key}: must not be negative, got {value}")
    return value


def integer(key, value, *, minimum):
    """``value`` if it is an integer of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {value}")
    return value


def pair(key, value):
    """``value`` (a list or tuple of two finite numbers) as a tuple of two floats."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(f"{key}: expected a pair [a, b] of numbers, got {value!r}")
    return (float(number(key, value[0])), float(number(key, value[1])))


def value_range(key, value, *, minimum=None):
    """``value`` as a pair (low, high) of floats with low <= high (and low >= ``minimum``)."""
    low, high = pair(key, value)
    if low > high:
        raise ConfigError(f"{key}: minimum {low} exceeds maximum {high}")
    if minimum is not None and low < minimum:
        raise ConfigError(f"{key}: minimum must be at least {minimum}, got {low}")
    return (low, high)


def float_field(obj, name, key):
    """Check that field ``name`` of the frozen dataclass ``obj`` is a finite number (named ``key``
    in messages), store it back as a float and return it."""
    value = float(number(key, getattr(obj, name)))
    object.__setattr__(obj, name, value)
    return value


# ---------------------------------------------------------------------- arguments of functions
def positive_integer(name, value):
    """``value`` if it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def positive_number(name, value, *, unit=None):
    """``value`` as a float if it is a finite real number > 0; ``unit`` (e.g. "s") is named in the
    message."""
    try:
        converted = None if isinstance(value, (bool, str, bytes)) else float(value)
    except (TypeError, ValueError):
        converted = None
    if converted is None or not (math.isfinite(converted) and converted > 0.0):
        what = "a positive finite number" + (f" [{unit}]" if unit else "")
        raise ConfigError(f"{name} must be {what}, got {value!r}")
    return converted


def finite_array(name, value):
    """``value`` as a float array if every entry is finite."""
    array = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(array)):
        raise ConfigError(f"{name} must be finite, got {array.tolist()}")
    return array


def positive_array(name, value):
    """``value`` as a float array if every entry is finite and > 0."""
    array = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(array)) or np.any(array <= 0.0):
        raise ConfigError(f"{name} must be finite and > 0, got {array.tolist()}")
    return array


def non_negative_array(name, value):
    """``value`` as a float array if every entry is finite and >= 0."""
    array = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(array)) or np.any(array < 0.0):
        raise ConfigError(f"{name} must be finite and >= 0, got {array.tolist()}")
    return array


# ---------------------------------------------------------------------- files
def read_toml(path):
    """The parsed TOML file at ``path`` (nested dicts); ConfigError naming the file if it cannot
    be read or is not valid TOML."""
    try:
        with open(path, "rb") as stream:
            return tomllib.load(stream)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


@contextlib.contextmanager
def naming_file(path):
    """Within the block, a ConfigError's message is prefixed with ``path`` (the file whose key it
    names)."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


# ---------------------------------------------------------------------- model building input
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


def positive_value(value, what, error=ModelError):
    """A positive, finite float."""
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise error(f"{what} must be positive and finite, got {value}")
    return v


def non_negative_value(value, what, error=ModelError):
    """A non-negative, finite float."""
    v = float(value)
    if not math.isfinite(v) or v < 0.0:
        raise error(f"{what} must be non-negative and finite, got {value}")
    return v


def finite_value(value, what, error=ModelError):
    """A finite float."""
    return float(vector([value], 1, what, error)[0])
