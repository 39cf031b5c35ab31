"""Exceptions raised by softsnake."""


class ModelError(ValueError):
    """Bad input to the model builder: the message names the item and what is wrong with it."""


class SimulationError(RuntimeError):
    """A step blew up: a non-finite state or a runaway speed. ``world`` and ``step`` say where and when."""

    def __init__(self, message, *, world=None, step=None):
        super().__init__(message)
        self.world = world
        self.step = step
