"""softsnake: a GPU constraint-dynamics engine for pneumatic soft robots, on NVIDIA Warp.

The engine follows seed 001 (Gasoto, Macklin et al.): particles, rigid bodies, corotational
tetrahedral FEM as compliant constraints, pressure-driven distance constraints, attachments,
hinges, angular springs and frictional contact, solved by non-smooth Newton iterations with a
Jacobi-preconditioned conjugate residual linear solver, for many independent worlds at once.

    builder = softsnake.ModelBuilder()
    ...
    model = builder.finalize("cpu")
    solver = softsnake.Solver(model)
    state_0, state_1, control = model.state(), model.state(), model.control()
    solver.step(state_0, state_1, control, dt)
"""

from importlib.metadata import PackageNotFoundError, version as _package_version

try:
    __version__ = _package_version("softsnake")
    """The installed package's version (pyproject.toml's ``version``)."""
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

from .builder import ModelBuilder
from .errors import ConfigError, ModelError, SimulationError, SoftsnakeError, UsageError
from .model import Control, Model, State
from .solver import Solver
from .solver_settings import SolverSettings

__all__ = ["__version__", "ModelBuilder", "Model", "State", "Control", "Solver", "SolverSettings", "SoftsnakeError", "ModelError", "ConfigError",
           "SimulationError", "UsageError"]
