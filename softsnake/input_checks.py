"""Non-finite inputs of a step: chamber pressures, joint targets, growth rates and external forces.

A NaN or Inf in ``Control`` or in a state's external forces turns the state non-finite within the
step, which the blow-up check would report as a diverging solve ("reduce dt"). The solver checks
the inputs on the device in the same once-per-step check (``softsnake.kernels.checks``) and reports
the input instead: its name, the entry and the world. A finite but huge input (a pressure of 1e30
Pa) is the caller's to avoid; what it does to the state is caught by the blow-up check.
"""

import numpy as np
import warp as wp

from .errors import SimulationError
from .kernels import checks
from .model import Control

INPUTS = (
    # (where the array is, its name, the model's item kind: <kind>_count and <kind>_world)
    *(("control", name, kind) for name, kind in Control.ARRAYS),
    ("state", "particle_f", "particle"),
    ("state", "body_f", "body"),
)
"""Every input of a step that the check covers."""


class InputCheck:
    """The device flags of non-finite step inputs of one solver's model, and their report."""

    def __init__(self, model):
        self.model = model
        self.flags = wp.zeros(max(model.world_count, 1) * len(INPUTS), dtype=int, device=model.device)
        """(world, input): 1 + the largest index of a non-finite entry of that input in that world, or 0."""

    def commands(self, solver, state, control):
        """The recorded launches that flag this step's non-finite inputs (``solver.record``); the flags
        keep the largest entry until ``raise_if_flagged`` reads and clears them."""
        m = self.model
        commands = []
        sources = {"state": state, "control": control}
        for k, (source, name, kind) in enumerate(INPUTS):
            count = getattr(m, f"{kind}_count")
            if count:
                values = getattr(sources[source], name)
                commands.append(solver.record(checks.FLAG_NONFINITE[values.dtype], count, [
                    values, getattr(m, f"{kind}_world"), k, len(INPUTS), self.flags]))
        return commands

    def raise_if_flagged(self, first_step, last_step):
        """SimulationError naming the first non-finite input (its entry and world) found in the steps
        ``first_step..last_step`` (those since the last read); the flags are cleared."""
        flags = self.flags.numpy().reshape(-1, len(INPUTS)).copy()  # on the CPU a view of the array cleared below
        self.flags.zero_()
        bad = np.argwhere(flags > 0)
        if len(bad):
            world, k = (int(v) for v in bad[0])
            worlds = len(np.unique(bad[:, 0]))
            raise SimulationError(
                f"{INPUTS[k][0]}.{INPUTS[k][1]}[{flags[world, k] - 1}] of world {world} is NaN or Inf "
                f"({worlds} world(s) with non-finite inputs in {step_span(first_step, last_step)}); the state from "
                f"then on is not valid", world=world, step=last_step)


def step_span(first, last):
    """"step 7" or "steps 5..8": the steps a read of the check's flags covers."""
    return f"step {last}" if first == last else f"steps {first}..{last}"
