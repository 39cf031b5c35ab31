"""How each world's Newton loops ended: at the stop, near float32's round-off floor, or unconverged.

A substep's Newton loop ends for a world at its stop: once its merit has fallen by
``SolverSettings.newton_tolerance``, or has come within ``newton_floor`` of its round-off floor and
stopped falling (``newton_floor_stall``). Where the
budget (``newton_iterations``) runs out first, there are two cases. The merit may lie near float32's
round-off floor already (within ``ROUND_OFF_MARGIN`` times its estimate, in the root), what the
rounding of the positions alone leaves (``kernels.multipliers.row_round_off``): a relative tolerance
below that floor is never met, and the point is near converged. The estimate errs high: the floor
observed lies at 0.27-1.25 times it on vines, and at 0.016-0.34 times it on frictional particles
and bodies (experiments/results/vine.md, "Stopping at the round-off floor"), so "near" there can
still be tens of times above what more iterations reach. Or the merit lies above twice the estimate:
the substep ended unconverged, and the result depends on the budget.

``Solver`` counts these on the device in every step, at no host cost; ``Solver.newton_counts()``
reads them back as a :class:`NewtonCounts`, so that a run can say whether its answer is the
equations' or its budget's. Measured with the tolerance alone (16 Newton iterations, tolerance 1e-5,
no floor stop: the engine's default until the twenty-first session; 60 steps of 1/120 s;
experiments/results/convergence.md, "How substeps end"): the soft cantilever, bodies with friction,
three compliant double pendulums and a stiff block each reached the tolerance in at most 4 % of their
substeps and ended at the budget with the root of the merit 0.2 to 0.9 times its floor (median),
94-100 % of their substeps within twice it; the snake's gait at its 8 x 40 ends every substep 280
times above it. The substep's end assembly (``SolverSettings.wander_limit`` > 0, the default) judges the
loop's last step; without it (``wander_limit`` 0, no line search) the last step goes unjudged, and a budget
of one iteration counts every substep as unconverged.
"""

from dataclasses import dataclass

import numpy as np

ROUND_OFF_MARGIN = 2.0
"""A substep the budget ended counts as converged to round-off where the root of its world's merit lies within
this factor of its round-off floor's estimate [-] (the engine's default ``newton_floor``)."""


@dataclass(frozen=True)
class NewtonCounts:
    """Per world since the solver was made or ``Solver.reset_newton_counts()``, int64 arrays (world_count,).

    Attributes:
        substeps: substeps that ran a Newton loop (models with constraint rows).
        newton_steps: Newton steps taken (a world at its stop takes none for the rest of its substep).
        budget_ends: substeps whose loop the budget ended before the world reached its stop.
        unconverged_ends: those of ``budget_ends`` whose last judged merit lay above ``ROUND_OFF_MARGIN``
            times the root of its round-off floor.
        budget: ``SolverSettings.newton_iterations`` at the time of reading [-].
        tolerance: ``SolverSettings.newton_tolerance`` at the time of reading [-].
        floor: ``SolverSettings.newton_floor`` at the time of reading [-].
        balanced: whether the iteration balanced momentum (``SolverSettings.momentum_balance``): True, False, or
            "bodies" (the bodies' only); the plain iteration's merit leaves out the momentum residual, so its converged
            step keeps the lag of its path.
        wander_returns: substeps that went back to the least merit their loop visited, their end lying more than
            ``SolverSettings.wander_limit`` times above it (None given: zeros).
    """

    substeps: np.ndarray
    newton_steps: np.ndarray
    budget_ends: np.ndarray
    unconverged_ends: np.ndarray
    budget: int
    tolerance: float
    floor: float
    balanced: bool | str = True
    wander_returns: np.ndarray = None

    COUNTS = ("substeps", "newton_steps", "budget_ends", "unconverged_ends", "wander_returns")

    def __post_init__(self):
        if self.wander_returns is None:
            object.__setattr__(self, "wander_returns", np.zeros_like(self.substeps))

    def _settings(self):
        return {"budget": self.budget, "tolerance": self.tolerance, "floor": self.floor, "balanced": self.balanced}

    @classmethod
    def joined(cls, parts):
        """The counts of several solvers' worlds one after the other (the worker processes' shares of a batch)."""
        parts = list(parts)
        return cls(**{name: np.concatenate([getattr(part, name) for part in parts]) for name in cls.COUNTS},
                   **parts[0]._settings())

    def world(self, w):
        """The counts of world ``w`` alone (arrays of one entry), with the same settings."""
        return type(self)(**{name: getattr(self, name)[w:w + 1].copy() for name in self.COUNTS}, **self._settings())

    @property
    def converged_fraction(self):
        """Per world, the fraction of its substeps that ended converged: at the stop or at the round-off floor
        (1 where none ran) [-]."""
        return np.where(self.substeps > 0, 1.0 - self.unconverged_ends / np.maximum(self.substeps, 1), 1.0)

    def summary(self, world_name="world", study="a convergence study"):
        """One line for a person: how the substeps ended, and where the answer is the budget's rather than the
        equations'; ``study`` names where a budget's answer is compared with a converged one."""
        substeps = int(self.substeps.sum())
        if substeps == 0:
            return "Newton: no substep had constraint rows to solve"
        stopped = substeps - int(self.budget_ends.sum())
        unconverged = int(self.unconverged_ends.sum())
        at_floor = substeps - stopped - unconverged
        criterion = " or ".join([f"merit down by {self.tolerance:g}"] * (self.tolerance > 0.0)
                                + [f"within {self.floor:g} of its round-off floor"] * (self.floor > 0.0)) or "no tolerance"
        head = (f"Newton, budget {self.budget} iteration{'s' * (self.budget != 1)} "
                f"({self.newton_steps.sum() / substeps:.1f} per substep): ")
        if unconverged == substeps:
            nor_floor = "" if self.floor > 0.0 else ", nor near float32's round-off floor"
            return (head + f"no substep converged ({criterion}{nor_floor}): these numbers are the budget's answer, not "
                    f"a converged one (how far apart: {study})" + self._wandered())
        parts = [f"{_percent(stopped, substeps)} of substeps reached the stop ({criterion})"]
        if at_floor:
            parts.append(f"{_percent(at_floor, substeps)} ended near float32's round-off floor (within "
                         f"{ROUND_OFF_MARGIN:g} times its estimate)")
        if unconverged:
            worst = int(np.argmin(self.converged_fraction))
            parts.append(f"{_percent(unconverged, substeps)} ended unconverged (most: {world_name} {worst}, "
                         f"{self.unconverged_ends[worst]} of {self.substeps[worst]}; how far that moves the answer: "
                         f"{study})")
        else:
            parts[-1] += f": every {world_name} converged"
        lag = ""
        if self.balanced == "bodies":
            lag = "; momentum balanced for the bodies only: the particles keep the lag of their path even where they converged"
        elif not self.balanced:
            lag = "; the plain iteration (momentum not balanced) keeps the lag of its path even where it converged"
        return head + ", ".join(parts) + self._wandered() + lag

    def _wandered(self):
        """The clause on substeps that went back to their least merit ("" where none did)."""
        returns = int(self.wander_returns.sum())
        if not returns:
            return ""
        return (f"; {returns} substep{'s' * (returns != 1)} wandered and went back to the least merit of "
                f"{'their' if returns != 1 else 'its'} Newton loop (wander_limit)")


def _percent(count, total):
    """count / total in per cent, never rounded to 0 or 100 when it is neither."""
    value = 100.0 * count / total
    if 0 < count < total:
        value = min(max(value, 0.1), 99.9)
    return f"{value:.1f} %"
