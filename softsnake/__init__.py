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

from .builder import ModelBuilder
from .errors import ConfigError, ModelError, SimulationError, SoftsnakeError, UsageError
from .model import Control, Model, State
from .solver import Solver

__all__ = ["ModelBuilder", "Model", "State", "Control", "Solver", "SoftsnakeError", "ModelError", "ConfigError",
           "SimulationError", "UsageError"]
