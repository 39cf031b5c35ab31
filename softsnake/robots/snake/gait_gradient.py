"""The derivative of what a gait does with respect to its parameters, through the engine.

The gait (eq. 9) sets every link's command, the valves' latency model turns the commands into chamber pressures on
the host, and the engine steps the snake under them; the gait is open loop, so the pressures of every frame are a
function of the gait's parameters theta alone (``SnakeSimulation.pressure_schedule``). By the chain rule

    dL/dtheta = sum_k dL/dp_k . dp_k/dtheta,

where dL/dp_k, the derivative of the loss with respect to the channel pressures held during frame k, is the engine's
adjoint of the recorded rollout (``softsnake.gradients.rollout_gradient(..., per_step=True)``), and dp_k/dtheta the
host schedule's, by central differences of the latency model in float64 (``HOST_STEPS``, about 1e-6 of each
parameter; the model is smooth between a valve's switches: over 2 s of the gait the frequency's differences at steps
of 1e-7 to 1e-4 Hz agree to 5e-7; one-sided where theta sits on its bound, as the amplitude at 8 psi does). A gradient
costs one recorded rollout, its adjoint (about 1.7 s per substep of the coarse snake on one core of a 2-core CPU: 4 to
12 rollouts at this budget, as fast as the rollout's solves converge; experiments/results/snake.md, "Gradients with
respect to the gait") and 2 host schedules per parameter; central differences of whole rollouts would cost two
rollouts per parameter, and the travel along x is too rough a function of the gait for them to settle (that page).
"""

import dataclasses

import numpy as np

from softsnake.errors import ConfigError
from softsnake.gradients import record_rollout, rollout_gradient
from softsnake.solver import Solver

from .gait import GAIT_FIELDS
from .simulation import SnakeSimulation

GRADIENT_BUDGET = {"newton_iterations": 30, "linear_iterations": 200, "newton_tolerance": 1e-7, "linear_tolerance": 1e-6,
                   "momentum_balance": True}
"""Solver settings of a gradient's rollout: balanced, 30 Newton x 200 linear iterations, tolerances 1e-7 / 1e-6, so
that every substep is the implicit-Euler step the adjoint differentiates (the snake's own 8 x 40 ends every substep
unconverged: README, "Known limitations")."""

LOSSES = {"travel": 0, "lateral": 1}
"""Losses [m] by name: the centre of mass' displacement along x (forward, the gait's travel) or along y (sideways:
where a turning gait takes the snake), from the start to the end of the run."""

HOST_STEPS = {"frequency": 1e-6, "phase_shift": 1e-6, "offset": 1e-6, "amplitude": 1e-2}
"""Steps of the host schedule's central differences, per parameter in its unit (Hz, rad, -, Pa: about 1e-6 of each
one's scale; the amplitude's 1e-2 Pa is 2e-7 of 8 psi)."""


@dataclasses.dataclass
class GaitGradient:
    """What ``gait_gradient`` returns.

    loss: the loss [m]
    gradient: {parameter: dL/d(parameter)} [m per the parameter's unit: Hz, rad, -, Pa]
    pressure_gradient: dL/d(channel pressures held during frame k), (frames, channels) [m/Pa]
    """

    loss: float
    gradient: dict
    pressure_gradient: np.ndarray


def gait_gradient(seconds, *, gait=None, loss="travel", parameters=GAIT_FIELDS, resolution="coarse",
                  solver_options=None):
    """The loss of one snake's gait over ``seconds`` [s] and its derivatives with respect to the gait's parameters.

    gait: a ``GaitParams`` of one snake (None: the paper's, ``SnakeSimulation``'s default)
    loss: "travel" or "lateral" (``LOSSES``)
    parameters: a name, or names, among ``GAIT_FIELDS`` (frequency [Hz], phase_shift [rad], offset [-], amplitude [Pa])
    resolution: the link mesh, "coarse" or "paper"
    solver_options: overrides of ``GRADIENT_BUDGET`` (a budget that leaves the substeps unconverged differentiates
        something else than what it steps: the gradient is then not that of its rollout)
    Returns a ``GaitGradient``. Raises ``ConfigError`` for an unknown loss or parameter, before any work.
    """
    parameters = (parameters,) if isinstance(parameters, str) else tuple(parameters)
    unknown = [name for name in parameters if name not in GAIT_FIELDS]
    if unknown:
        raise ConfigError(f"gait parameters are {', '.join(GAIT_FIELDS)}, not {', '.join(map(str, unknown))}")
    rollout = _GaitRollout(seconds, gait, loss, resolution, solver_options)
    displacement, records = rollout.run(record=True)
    _, grads = rollout_gradient(rollout.solver, records, rollout.seeds(), {"pressure": "pressure"}, per_step=True)
    per_frame = grads["pressure"]
    gradient = {name: float((per_frame * rollout.schedule_derivative(name)).sum()) for name in parameters}
    return GaitGradient(loss=float(displacement[LOSSES[loss]]), gradient=gradient, pressure_gradient=per_frame)


def gait_displacement(seconds, *, gait=None, resolution="coarse", solver_options=None):
    """The centre of mass' displacement (3,) [m] over the rollout of ``gait_gradient``, from a rollout that records
    nothing (for central differences; ``LOSSES`` index it)."""
    return _GaitRollout(seconds, gait, "travel", resolution, solver_options).run(record=False)[0]


class _GaitRollout:
    """One snake under a gait's pressures, stepped at ``GRADIENT_BUDGET`` (``gait_gradient``'s arguments)."""

    def __init__(self, seconds, gait, loss, resolution, solver_options):
        if loss not in LOSSES:
            raise ConfigError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
        self.axis = LOSSES[loss]
        self.sim = SnakeSimulation(1, seconds=seconds, gait=gait, resolution=resolution)
        self.solver = Solver(self.sim.model, **{"substeps": self.sim.solver.substeps, **GRADIENT_BUDGET,
                                                **(solver_options or {})})

    def schedule(self, **changes):
        """The channel pressures of every frame, (frames, channels) [Pa], float64; ``changes``: gait parameters."""
        return self.sim.channel_pressure_schedule(np.float64, **changes)

    def schedule_derivative(self, name):
        """d(channel pressures of every frame)/d(gait parameter ``name``) by central differences of the host schedule,
        one-sided (inwards) where the parameter sits on a bound of ``GaitParams``."""
        value, step = float(getattr(self.sim.gait, name)[0]), HOST_STEPS[name]
        try:
            plus = self.schedule(**{name: value + step})
        except ConfigError:
            return (self.schedule() - self.schedule(**{name: value - step})) / step
        try:
            minus = self.schedule(**{name: value - step})
        except ConfigError:
            return (plus - self.schedule()) / step
        return (plus - minus) / (2.0 * step)

    def _centre_of_mass(self, state):
        """(3,) [m], float64."""
        particles, bodies = state.particle_q.numpy().astype(np.float64), state.body_q.numpy().astype(np.float64)
        return self.sim.centers_of_mass(particles[None], bodies[None])[0]

    def run(self, record):
        """(the centre of mass' displacement (3,) [m], the StepRecords or None) of a rollout from rest."""
        sim, solver = self.sim, self.solver
        pressures = self.schedule().astype(np.float32)
        state, control = sim.model.state(), sim.model.control()
        start = self._centre_of_mass(state)

        def set_pressure(k, control):
            control.pressure.assign(pressures[k])

        records = None
        if record:
            records = record_rollout(solver, state, control, sim.dt, sim.frame_count, before_step=set_pressure)
        else:
            for k in range(sim.frame_count):
                set_pressure(k, control)
                solver.step(state, state, control, sim.dt)
        return self._centre_of_mass(state) - start, records

    def seeds(self):
        """dL/d(last state): the particles' and bodies' mass shares on the loss's axis."""
        model = self.sim.model
        particle_share, body_share = self.sim.mass_fractions()
        particle_seed, body_seed = np.zeros((model.particle_count, 3)), np.zeros((model.body_count, 7))
        particle_seed[:, self.axis], body_seed[:, self.axis] = particle_share[0], body_share[0]
        return {"particle_q": particle_seed, "body_q": body_seed}
