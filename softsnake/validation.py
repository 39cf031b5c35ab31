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
``position``, ``unit_quaternion``, ``unit_axis``, ``positive_value``, ``non_negative_value``,
``finite_value``, ``length_value``, ``mass_value``, ``index_value``): they raise ``ModelError`` (or the
given error class) naming the item, ``"particle 3 mass must be positive and finite, got -1"``, and
return the value in its checked form. The model is simulated in float32, so they also refuse what
float32 cannot hold although float64 can: a value beyond ``FLOAT32_MAX`` (it would become Inf), a
non-zero one below ``FLOAT32_TINY`` (it would become 0), a mass whose inverse would become 0
(``INVERSE_LIMIT``), and positions and lengths beyond ``POSITION_LIMIT`` (float32 no longer resolves
a millimetre there). ``time_step`` checks the solver's dt.
"""

import contextlib
import math
import numbers
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
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (TOML must be UTF-8)") from None
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
FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Largest float32 [-]: the model is simulated in float32, so a larger value becomes Inf."""

FLOAT32_TINY = float(np.finfo(np.float32).tiny)
"""Smallest normal float32 [-]: a non-zero value below it loses its precision or becomes 0."""

POSITION_LIMIT = 1.0e4
"""Largest coordinate of a position, and largest length, the builder takes [m]. float32 spaces its
numbers 2^-10 m (0.98 mm) apart between 8192 and 16384 m: beyond 1e4 m it no longer resolves a
millimetre, the scale of the robots' contacts and meshes."""

INVERSE_LIMIT = 1.0 / FLOAT32_TINY
"""Largest mass [kg] (or principal moment of inertia [kg m^2]) whose inverse float32 still holds
as a normal number (about 8.5e37); a larger one's inverse becomes 0, which the solver reads as
"kinematic" (infinite mass)."""


SMALL_SIZE = 16
"""Arrays of at most this many entries are checked entry by entry in Python, larger ones with NumPy."""


def _float32_range(a, what, error):
    """``a`` (a float64 array, finite) if float32 holds every entry: none beyond FLOAT32_MAX (it
    would become Inf) and no non-zero one below FLOAT32_TINY (it would lose its precision or become 0)."""
    if a.size <= SMALL_SIZE:  # the builder's vectors and scalars: plain Python is several times faster than NumPy
        if all(m <= FLOAT32_MAX and (m == 0.0 or m >= FLOAT32_TINY) for m in map(abs, a.reshape(-1).tolist())):
            return a
    magnitude = np.abs(a)
    if np.any(magnitude > FLOAT32_MAX):
        raise error(f"{what} overflows float32, in which the model is simulated: "
                    f"{a.tolist() if a.ndim else float(a)} (largest float32 {FLOAT32_MAX:.3g})")
    if np.any((magnitude > 0.0) & (magnitude < FLOAT32_TINY)):
        raise error(f"{what} underflows float32, in which the model is simulated: "
                    f"{a.tolist() if a.ndim else float(a)} (smallest normal float32 {FLOAT32_TINY:.3g})")
    return a


def _real(value, what, error):
    """``value`` as a float if it is a real number (not a bool, a string or None)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        raise error(f"{what} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{what} must be a number, got {value!r}") from None


def vector(value, n, what, error=ModelError):
    """A finite float64 vector of ``n`` components that float32 holds."""
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{what} must be {n} numbers, got {value!r}") from None
    if a.shape != (n,):
        raise error(f"{what} must have {n} components, got shape {a.shape}")
    if not (all(map(math.isfinite, a.tolist())) if n <= SMALL_SIZE else np.all(np.isfinite(a))):
        raise error(f"{what} contains NaN or Inf: {a.tolist()}")
    return _float32_range(a, what, error)


def bounded_vector(value, n, what, error=ModelError):
    """``vector`` of lengths or coordinates [m], every component within +-``POSITION_LIMIT``."""
    a = vector(value, n, what, error)
    if np.any(np.abs(a) > POSITION_LIMIT):
        raise error(f"{what} {a.tolist()} lies beyond {POSITION_LIMIT:g} m, where float32 (the model's precision) "
                    "no longer resolves a millimetre")
    return a


def position(value, what, error=ModelError):
    """A position (or offset) [m]: 3 finite components within +-``POSITION_LIMIT``."""
    return bounded_vector(value, 3, what, error)


def length_value(value, what, error=ModelError):
    """A positive length [m] of at most ``POSITION_LIMIT`` that float32 holds."""
    v = positive_value(value, what, error)
    if v > POSITION_LIMIT:
        raise error(f"{what} {v:g} m exceeds {POSITION_LIMIT:g} m, where float32 (the model's precision) "
                    "no longer resolves a millimetre")
    return v


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
    """A positive, finite float that float32 holds."""
    v = _real(value, what, error)
    if not math.isfinite(v) or v <= 0.0:
        raise error(f"{what} must be positive and finite, got {value}")
    return float(_float32_range(np.float64(v), what, error))


def non_negative_value(value, what, error=ModelError):
    """A non-negative, finite float that float32 holds."""
    v = _real(value, what, error)
    if not math.isfinite(v) or v < 0.0:
        raise error(f"{what} must be non-negative and finite, got {value}")
    return float(_float32_range(np.float64(v), what, error))


def finite_value(value, what, error=ModelError):
    """A finite float that float32 holds."""
    return float(vector([_real(value, what, error)], 1, what, error)[0])


def inverse_representable(value, what, error=ModelError, *, unit="kg"):
    """A mass (or principal moment of inertia) whose inverse float32 holds: at most ``INVERSE_LIMIT``."""
    if value > INVERSE_LIMIT:
        raise error(f"{what} {value:g} {unit} is too large for float32, in which the model is simulated: its inverse "
                    f"{1.0 / value:.3g} would become 0, as if it were kinematic (at most {INVERSE_LIMIT:.3g} {unit})")
    return value


def mass_value(value, what, error=ModelError):
    """A positive mass [kg] whose inverse float32 holds."""
    return inverse_representable(positive_value(value, what, error), what, error)


def index_value(value, what, error=ModelError):
    """An index: an int or NumPy integer, or a whole float (2.0); never a bool."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    raise error(f"{what} must be an integer index, got {value!r}")


def whole_count(value, what, error=ModelError):
    """A count of at least 1 (an int, or a whole float)."""
    count = index_value(value, what, error)
    if count < 1:
        raise error(f"{what} must be at least 1, got {value!r}")
    return count


MIN_SUBSTEP = 1.0 / math.sqrt(FLOAT32_MAX)
"""Shortest substep [s] whose 1 / h^2 (the compliance scale of every row) float32 holds (about 5.4e-20 s)."""


def time_step(dt, substeps=1):
    """``dt`` [s] as a float if it is a real number (a NumPy scalar too, never a bool), finite and > 0,
    and its ``substeps`` substeps are not shorter than ``MIN_SUBSTEP``; ConfigError otherwise."""
    if isinstance(dt, (bool, np.bool_)) or not isinstance(dt, numbers.Real):
        raise ConfigError(f"dt must be a positive finite time step [s] (a real number), got {dt!r}")
    value = float(dt)
    if not (math.isfinite(value) and value > 0.0):
        raise ConfigError(f"dt must be a positive finite time step [s], got {dt!r}")
    if value / substeps < MIN_SUBSTEP:
        raise ConfigError(f"dt {value:g} s in {substeps} substep(s) is too short for float32: 1 / h^2 of a substep "
                          f"overflows (the shortest substep is {MIN_SUBSTEP:.2g} s)")
    return value
