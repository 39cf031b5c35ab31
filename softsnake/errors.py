"""The exceptions softsnake raises: one base class and four kinds.

Every message is one line that names the item or input and what is wrong with it, so that the
command line can print it as it is, without a traceback.

- :class:`ModelError`: bad input to a model builder (the engine's ``ModelBuilder`` or a robot's
  builder functions): an index out of range, a non-positive mass, a degenerate mesh.
- :class:`ConfigError`: a bad configuration: a snake config, a vine scene, gait or stiffness
  parameters, a reference data file, options of a library function.
- :class:`SimulationError`: a run that went wrong while stepping: a blow-up (non-finite or runaway
  state), with the world and the step where it was found.
- :class:`UsageError`: a bad command-line option or an unusable output location.

Each also derives from the built-in exception a caller would expect (``ValueError`` for bad
input, ``RuntimeError`` for a failed run), so ``except ValueError`` keeps working.
"""


class SoftsnakeError(Exception):
    """Base class of every error softsnake raises on purpose."""


class ModelError(SoftsnakeError, ValueError):
    """Bad input to a model builder: the message names the item and what is wrong with it."""


class ConfigError(SoftsnakeError, ValueError):
    """A bad configuration file, scene, data file or parameter set (one-line message)."""


class UsageError(SoftsnakeError, ValueError):
    """A bad command-line option or output location; reported as one line, without a traceback."""


class SimulationError(SoftsnakeError, RuntimeError):
    """A step blew up: a non-finite state, a runaway speed or spin, or kinetic energy that ran away.
    ``world`` and ``step`` say where and when, ``reason`` what (as the message words it)."""

    def __init__(self, message, *, world=None, step=None, reason=None):
        super().__init__(message)
        self.world = world
        self.step = step
        self.reason = reason
