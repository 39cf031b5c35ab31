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

import importlib.util as _importlib_util
import os as _os
import sys as _sys

# Installed, the Warp kernels are the sub-package softsnake.kernels (pyproject package-dir maps
# the top-level kernels/ folder there). Imported straight from a source checkout, the package
# sits beside kernels/: register that folder under the same name so both layouts import alike.
# A checkout's own kernels (pyproject.toml beside them) win over an installed, for example
# editable, copy found elsewhere, so that a second checkout never runs the first one's kernels.
_root = _os.path.dirname(_os.path.dirname(__file__))
_kernels_dir = _os.path.join(_root, "kernels")
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) or _importlib_util.find_spec("softsnake.kernels") is None:
    _spec = _importlib_util.spec_from_file_location(
        "softsnake.kernels", _os.path.join(_kernels_dir, "__init__.py"), submodule_search_locations=[_kernels_dir]
    )
    kernels = _importlib_util.module_from_spec(_spec)
    _sys.modules["softsnake.kernels"] = kernels
    _spec.loader.exec_module(kernels)

from .builder import ModelBuilder
from .errors import ModelError, SimulationError
from .model import Control, Model, State
from .solver import Solver

__all__ = ["ModelBuilder", "Model", "State", "Control", "Solver", "ModelError", "SimulationError"]
