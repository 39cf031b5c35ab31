"""A gradient through the snake: d(loss)/d(element modulus factor) by the adjoint, against central differences.

Two rollouts of the coarse snake from rest on its wheels (mu 1), every step balanced at a tight budget (30 Newton
x 200 linear iterations, tolerances 1e-7 / 1e-6), so that every step is the implicit-Euler step the adjoint
differentiates:

- ``step`` (default): its four chambers stepped to +8 / -8 / +8 / -8 psi, ``--steps`` steps of 1/240 s (the
  snake's substep); loss: the mean x plus the mean y of its module centres [m].
- ``--gait-seconds T``: the paper's open-loop gait through the valve latency model for T seconds, frames of
  1/120 s of two substeps each (the snake's own stepping, ``SnakeSimulation.pressure_schedule``); loss: the
  forward travel of its centre of mass (x, mass-weighted over its particles and bodies) [m], what the gait
  reports.

Parameter: a factor on every tetrahedron's Young's modulus. The adjoint (``softsnake.gradients.rollout_gradient``)
solves each substep's dG/dy of 7118 unknowns, singular with the wheels' sticking friction, by the sparse
regularised least squares (``gradients._regularized_least_squares``); central differences rerun the whole
rollout at the factor times (1 +- d) for several d.

Prints a table (device, the adjoint, each central difference, wall times) and writes snake_gradient.csv (step) or
snake_gradient_gait_<T>s.csv into --out (default experiments/results), rewritten after every row.

A long rollout's check can run on two cores at once: one process with ``--methods adjoint``, another with
``--methods central`` (each writes its own rows; give them different --out folders).

Usage: python experiments/snake_gradient.py [--steps 46 | --gait-seconds T] [--methods adjoint,central]
           [--central-steps 0.03,0.01,0.003] [--out DIR]
"""

import platform
import time

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.gradients import record_rollout, rollout_gradient
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.gait_gradient import GRADIENT_BUDGET
from softsnake.robots.snake.robot import chamber_pressures
from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.units import psi_to_pa

BUDGET = GRADIENT_BUDGET
PRESSURES_PSI = (8.0, -8.0, 8.0, -8.0)
STEPS_RELATIVE = (3e-2, 1e-2, 3e-3)
"""Central-difference steps, relative to the factor [-]."""


class SnakeRollout:
    """One coarse snake (a ``SnakeSimulation`` of one world, for its model, masses and inputs) stepped under
    ``pressures[k]`` (channel pressures [Pa]) at step k of ``dt`` [s] in ``substeps`` substeps."""

    def __init__(self, steps=None, gait_seconds=None):
        self.gait = gait_seconds is not None
        sim = SnakeSimulation(1, seconds=gait_seconds if self.gait else 1.0)
        self.model, handle = sim.model, sim.snake
        self.modulus = self.model.tet_youngs_modulus.numpy().astype(np.float64)
        if self.gait:
            self.dt, self.substeps, self.steps = sim.dt, 2, sim.frame_count
            self.pressures = list(sim.channel_pressure_schedule())
        else:
            self.dt, self.substeps, self.steps = 1.0 / 240.0, 1, steps
            fixed = chamber_pressures(self.model, handle.link_channels, psi_to_pa(np.array([PRESSURES_PSI])))
            self.pressures = [fixed] * steps
        # d(loss)/d(position): mass fractions for the centre of mass' x; module-mean x + y for the step.
        self.particle_seed = np.zeros((self.model.particle_count, 3))
        self.body_seed = np.zeros((self.model.body_count, 7))
        if self.gait:
            particle_share, body_share = sim.mass_fractions()
            self.particle_seed[:, 0], self.body_seed[:, 0] = particle_share[0], body_share[0]
        else:
            modules = np.asarray(handle.module_bodies)
            self.body_seed[modules, 0] = self.body_seed[modules, 1] = 1.0 / len(modules)

    def describe(self):
        if self.gait:
            return f"the gait with latency, {self.steps} frames of 1/120 s in 2 substeps; loss: centre of mass x"
        return f"chambers stepped to {PRESSURES_PSI} psi, {self.steps} steps of 1/240 s; loss: modules' x + y"

    def run(self, factor, record):
        """(solver, records or None, final particle_q, final body_q), float64."""
        self.model.tet_youngs_modulus.assign((self.modulus * factor).astype(np.float32))
        solver = softsnake.Solver(self.model, substeps=self.substeps, **BUDGET)
        state, control = self.model.state(), self.model.control()

        def set_pressure(k, control):
            control.pressure.assign(self.pressures[k])

        if record:
            records = record_rollout(solver, state, control, self.dt, self.steps, before_step=set_pressure)
        else:
            records = None
            for k in range(self.steps):
                set_pressure(k, control)
                solver.step(state, state, control, self.dt)
        return solver, records, state.particle_q.numpy().astype(np.float64), state.body_q.numpy().astype(np.float64)

    def loss(self, particle_q, body_q):
        return float((self.particle_seed * particle_q).sum() + (self.body_seed * body_q).sum())


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--steps", type=int, default=46, help="steps of 1/240 s of the chamber step (default: 46)")
    parser.add_argument("--gait-seconds", type=float, default=None,
                        help="run the gait for this long instead of the chamber step [s]")
    parser.add_argument("--methods", default="adjoint,central", help="adjoint, central or both (default both): "
                        "two processes with one each run a long rollout's check on two cores at once")
    parser.add_argument("--central-steps", default=",".join(f"{d:g}" for d in STEPS_RELATIVE),
                        help="relative central-difference steps (default 0.03,0.01,0.003)")
    args = parser.parse_args(argv)
    methods = {name.strip() for name in args.methods.split(",") if name.strip()}
    if not methods or methods - {"adjoint", "central"}:
        parser.error(f"--methods takes adjoint and/or central, got {args.methods!r}")
    try:
        central_steps = [float(d) for d in args.central_steps.split(",") if d.strip()]
    except ValueError:
        parser.error(f"--central-steps takes comma-separated numbers, got {args.central_steps!r}")
    if "central" in methods and not (central_steps and all(0.0 < d < 0.5 for d in central_steps)):
        parser.error(f"--central-steps must lie between 0 and 0.5, got {args.central_steps!r}")
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.gait_seconds is not None and not 1.0 / 120.0 <= args.gait_seconds <= 60.0:
        parser.error("--gait-seconds must lie between one frame (1/120 s) and 60 s")
    out = make_output_folder(args.out)
    name = "snake_gradient.csv" if args.gait_seconds is None else f"snake_gradient_gait_{args.gait_seconds:g}s.csv"
    snake = SnakeRollout(args.steps, args.gait_seconds)
    print(f"Snake gradient: device cpu ({platform.machine()}), warp {wp.config.version}; coarse snake, "
          f"{snake.describe()}; {BUDGET['newton_iterations']} x {BUDGET['linear_iterations']} balanced")
    rows = []
    adjoint = rollout_seconds = gradient_seconds = None
    if "adjoint" in methods:
        start = time.perf_counter()
        solver, records, particle_q, body_q = snake.run(1.0, record=True)
        rollout_seconds = time.perf_counter() - start
        start = time.perf_counter()
        _, grads = rollout_gradient(solver, records, {"particle_q": snake.particle_seed, "body_q": snake.body_seed},
                                    {"youngs_modulus": snake.model.tet_youngs_modulus})
        gradient_seconds = time.perf_counter() - start
        adjoint = float((grads["youngs_modulus"] * snake.modulus).sum())
        loss = snake.loss(particle_q, body_q)
        rows.append({"method": "adjoint", "step_relative": "", "loss_m": loss, "dloss_dfactor_m": adjoint,
                     "wall_s": gradient_seconds})
        print(f"loss {loss:.6g} m; rollout {rollout_seconds:.1f} s")
        print(f"{'method':>22} {'d loss / d factor [m]':>22} {'wall [s]':>9}")
        print(f"{'adjoint':>22} {adjoint:>22.4g} {gradient_seconds:>9.1f}")
        write_dict_csv(out / name, rows)
    for d in central_steps if "central" in methods else []:
        start = time.perf_counter()
        plus = snake.loss(*snake.run(1.0 + d, record=False)[2:])
        minus = snake.loss(*snake.run(1.0 - d, record=False)[2:])
        difference = (plus - minus) / (2.0 * d)
        wall = time.perf_counter() - start
        rows.append({"method": "central difference", "step_relative": d, "loss_m": "", "dloss_dfactor_m": difference,
                     "wall_s": wall})
        print(f"{'central, d = ' + format(d, 'g'):>22} {difference:>22.4g} {wall:>9.1f}")
        write_dict_csv(out / name, rows)
    differences = [row["dloss_dfactor_m"] for row in rows if row["method"] == "central difference"]
    if adjoint is not None and differences:
        print(f"adjoint against the central differences' mean: {100.0 * (adjoint / np.mean(differences) - 1.0):+.1f} % "
              f"(their spread {100.0 * (max(differences) - min(differences)) / abs(np.mean(differences)):.1f} %); the "
              f"gradient cost {gradient_seconds / rollout_seconds:.1f} rollouts")


if __name__ == "__main__":
    main()
