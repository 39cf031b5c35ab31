"""How each world's Newton loops ended: converged, or stopped by the budget.

A substep's Newton loop ends for a world once its merit has fallen by ``SolverSettings.newton_tolerance``
(or to its round-off floor, ``newton_floor``): it has converged. Where the budget
(``newton_iterations``) runs out first, the substep ends on an unconverged point, and the result
depends on the budget. ``Solver`` counts both on the device in every step, at no host cost;
``Solver.newton_counts()`` reads them back as a :class:`NewtonCounts`, so that a run can say whether
its answer is its budget's or the equations'.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NewtonCounts:
    """Per world since the solver was made or ``Solver.reset_newton_counts()``, int64 arrays (world_count,).

    Attributes:
        substeps: substeps that ran a Newton loop (models with constraint rows).
        newton_steps: Newton steps taken (a world that has converged takes none for the rest of its substep).
        budget_ends: substeps whose loop the budget ended before the world converged.
        budget: ``SolverSettings.newton_iterations`` at the time of reading [-].
        tolerance: ``SolverSettings.newton_tolerance`` at the time of reading [-].
        floor: ``SolverSettings.newton_floor`` at the time of reading [-].
    """

    substeps: np.ndarray
    newton_steps: np.ndarray
    budget_ends: np.ndarray
    budget: int
    tolerance: float
    floor: float

    @classmethod
    def joined(cls, parts):
        """The counts of several solvers' worlds one after the other (the worker processes' shares of a batch)."""
        parts = list(parts)
        return cls(*(np.concatenate([getattr(part, name) for part in parts])
                     for name in ("substeps", "newton_steps", "budget_ends")),
                   budget=parts[0].budget, tolerance=parts[0].tolerance, floor=parts[0].floor)

    @property
    def converged_fraction(self):
        """Per world, the fraction of its substeps that converged within the budget (1 where none ran) [-]."""
        ran = np.maximum(self.substeps, 1)
        return np.where(self.substeps > 0, (self.substeps - self.budget_ends) / ran, 1.0)

    @property
    def mean_newton_steps(self):
        """Per world, Newton steps per substep (0 where none ran) [-]."""
        return self.newton_steps / np.maximum(self.substeps, 1)

    def summary(self, world_name="world", study="a convergence study"):
        """One line for a person: whether every substep converged, or how many the budget ended unconverged;
        ``study`` names where the budget's answer is compared with a converged one."""
        substeps = int(self.substeps.sum())
        if substeps == 0:
            return "Newton: no substep had constraint rows to solve"
        ends = int(self.budget_ends.sum())
        mean = self.newton_steps.sum() / substeps
        criterion = " or ".join([f"merit down by {self.tolerance:g}"] * (self.tolerance > 0.0)
                                + [f"within {self.floor:g} of its round-off floor"] * (self.floor > 0.0)) or "no tolerance"
        if ends == 0:
            return (f"Newton: every substep of every {world_name} converged ({criterion}) within its budget of "
                    f"{self.budget} iterations, {mean:.1f} on average")
        if ends == substeps:
            return (f"Newton: no substep converged ({criterion}) within the budget of {self.budget} iterations: these "
                    f"numbers are the budget's answer, not a converged one (how far apart: {study})")
        worst = int(np.argmin(self.converged_fraction))
        return (f"Newton: {100.0 * (substeps - ends) / substeps:.1f} % of substeps converged ({criterion}) within the "
                f"budget of {self.budget} iterations, {mean:.1f} on average; {ends} of {substeps} ended at the budget "
                f"unconverged (most: {world_name} {worst}, {self.budget_ends[worst]} of {self.substeps[worst]}; how far "
                f"that moves the answer: {study})")
