"""A static equilibrium depends on the physics only, not on the solver's budget.

The clamped pneumatic beam of ``engine_scenes.pneumatic_beam`` (6 x 2 x 2 cm, Y = 100 kPa, 20 kPa in its
actuation rows) sags under gravity and bends under pressure to rest within 2 s of 1/120 s frames (2
substeps, no tolerances: every budget runs all its iterations). Its lowest node at rest, measured on
the CPU: -11.5892 mm at 8 x 40, 8 x 400 and 32 x 400 Newton x linear iterations (a sag of 1.589 mm from
its start at -10 mm), -12.0479 at 8 x 10 (a sag of 2.048 mm, 29 % more), -15.4854 at 4 x 5 (3.5 times). The elastic rows start every substep from zero multipliers
(only contacts carry theirs), so the rows' residual after a short budget is a force the rest state
keeps; the coarse snake link on its stand bends 21 % more at the snake's 8 x 40 than converged
(experiments/results/convergence.md, "The stand"). Carrying every row's multipliers removes the bias
(-11.5892 mm at every budget above) but blew up dynamic runs (the snake's gait, stiff columns and bars).
``SolverSettings.elastic_warm_start`` (off by default) tries that start beside the engine's and keeps, per
world, the one with the lower merit: the beam then rests at -11.5892 mm from 4 x 5 on. The strict xfail of
the default start turns the suite red once a fix makes the short budget agree.
"""

import numpy as np
import pytest

import softsnake
from engine_scenes import BEAM_PRESSURE, pneumatic_beam


def resting_tip_height(newton, linear, **options):
    """The beam's lowest node after 2 s at the budget [m], and its change over the last 0.25 s."""
    model = pneumatic_beam()
    solver = softsnake.Solver(model, newton_iterations=newton, linear_iterations=linear, newton_tolerance=0.0,
                              linear_tolerance=0.0, **options)
    state, control = model.state(), model.control()
    control.pressure.assign(np.array([BEAM_PRESSURE], dtype=np.float32))
    heights = []
    for _ in range(240):
        solver.step(state, state, control, 1.0 / 120.0)
        heights.append(float(state.particle_q.numpy()[:, 2].min()))
    return heights[-1], heights[-1] - heights[-31]


@pytest.fixture(scope="module")
def converged():
    height, settle = resting_tip_height(8, 400)
    assert abs(settle) < 1e-7  # at rest: far below the differences between budgets
    return height


@pytest.mark.parametrize("newton, linear", [(8, 40), pytest.param(8, 10, marks=pytest.mark.xfail(strict=True, reason=(
    "known: elastic rows restart from zero every substep, so a short budget's residual biases the rest state "
    "(8 x 10: 29 % more sag; convergence.md, 'The stand')")))])
def test_resting_beam_does_not_depend_on_the_budget(converged, newton, linear):
    """The rest height at a budget within 0.1 % of the sag's converged value (8 x 400)."""
    height, _ = resting_tip_height(newton, linear)
    sag = converged + 0.01  # the lowest node starts at z = -0.01 m
    assert abs(height - converged) <= 1e-3 * abs(sag), (height, converged)


@pytest.mark.parametrize("newton, linear", [(4, 5), (8, 10)])
def test_resting_beam_with_the_elastic_warm_start(converged, newton, linear):
    """``SolverSettings.elastic_warm_start`` (a second start that carries the soft rows' multipliers, kept
    where its merit is lower): at 4 x 5 and 8 x 10 the beam rests where 8 x 400 puts it, within 0.1 % of its
    sag (measured: -11.5892 mm at both, as converged)."""
    height, _ = resting_tip_height(newton, linear, elastic_warm_start=True)
    sag = converged + 0.01
    assert abs(height - converged) <= 1e-3 * abs(sag), (height, converged)
