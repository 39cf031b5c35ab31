"""A gradient through the snake: d(travel)/d(element modulus factor) by the adjoint, against central differences.

The coarse snake starts at rest on its wheels (mu 1) with its four chambers stepped to +8 / -8 / +8 / -8
psi, and runs ``--steps`` balanced steps of 1/240 s (the snake's substep) at a tight budget (30 Newton x
200 linear iterations, tolerances 1e-7 / 1e-6), so that every step is the implicit-Euler step the adjoint
differentiates. Loss: the mean x plus the mean y of its module centres [m]. Parameter: a factor on every
tetrahedron's Young's modulus. The adjoint (``softsnake.gradients.rollout_gradient``) solves each step's
dG/dy of 7118 unknowns, singular with the wheels' sticking friction, by the sparse regularised least
squares (``gradients._regularized_least_squares``); central differences rerun the whole rollout at the
factor times (1 +- d) for several d.

Prints a table (device, the adjoint, each central difference, wall times) and writes snake_gradient.csv
into --out (default experiments/results).

Usage: python experiments/snake_gradient.py [--steps 46] [--out DIR]
"""

import platform
import time

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.gradients import record_rollout, rollout_gradient
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.robot import add_snake, chamber_pressures
from softsnake.units import psi_to_pa

H = 1.0 / 240.0
"""Step [s]: one substep of the snake's 1/120 s frame."""
BUDGET = {"substeps": 1, "newton_iterations": 30, "linear_iterations": 200, "newton_tolerance": 1e-7,
          "linear_tolerance": 1e-6, "momentum_balance": True}
PRESSURES_PSI = (8.0, -8.0, 8.0, -8.0)
STEPS_RELATIVE = (3e-2, 1e-2, 3e-3)
"""Central-difference steps, relative to the factor [-]."""


class SnakeRollout:
    def __init__(self, steps):
        config = load_snake_config(resolution="coarse")
        builder = softsnake.ModelBuilder()
        builder.add_ground(mu=config.friction)
        self.handle = add_snake(builder, config)
        self.model = builder.finalize("cpu")
        self.modulus = self.model.tet_youngs_modulus.numpy().astype(np.float64)
        self.pressure = chamber_pressures(self.model, self.handle.link_channels, psi_to_pa(np.array([PRESSURES_PSI])))
        self.modules = np.asarray(self.handle.module_bodies)
        self.steps = steps

    def run(self, factor, record):
        """(solver, records or None, final body_q float64)."""
        self.model.tet_youngs_modulus.assign((self.modulus * factor).astype(np.float32))
        solver = softsnake.Solver(self.model, **BUDGET)
        state, control = self.model.state(), self.model.control()
        control.pressure.assign(self.pressure)
        if record:
            records = record_rollout(solver, state, control, H, self.steps)
        else:
            records = None
            for _ in range(self.steps):
                solver.step(state, state, control, H)
        return solver, records, state.body_q.numpy().astype(np.float64)

    def loss(self, body_q):
        return float(body_q[self.modules, 0].mean() + body_q[self.modules, 1].mean())

    def loss_seed(self, body_q):
        seed = np.zeros_like(body_q)
        seed[self.modules, 0] = seed[self.modules, 1] = 1.0 / len(self.modules)
        return seed


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--steps", type=int, default=46, help="steps of 1/240 s (default: 46)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    out = make_output_folder(args.out)
    snake = SnakeRollout(args.steps)
    print(f"Snake gradient: device cpu ({platform.machine()}), warp {wp.config.version}; coarse snake, {args.steps} "
          f"steps of 1/240 s, chambers at {PRESSURES_PSI} psi, {BUDGET['newton_iterations']} x "
          f"{BUDGET['linear_iterations']} balanced")
    start = time.perf_counter()
    solver, records, body_q = snake.run(1.0, record=True)
    rollout_seconds = time.perf_counter() - start
    start = time.perf_counter()
    _, grads = rollout_gradient(solver, records, {"body_q": snake.loss_seed(body_q)},
                                {"youngs_modulus": snake.model.tet_youngs_modulus})
    gradient_seconds = time.perf_counter() - start
    adjoint = float((grads["youngs_modulus"] * snake.modulus).sum())
    rows = [{"method": "adjoint", "step_relative": "", "dloss_dfactor_m": adjoint, "wall_s": gradient_seconds}]
    print(f"loss {snake.loss(body_q):.6g} m; rollout {rollout_seconds:.1f} s")
    print(f"{'method':>22} {'d loss / d factor [m]':>22} {'wall [s]':>9}")
    print(f"{'adjoint':>22} {adjoint:>22.4g} {gradient_seconds:>9.1f}")
    for d in STEPS_RELATIVE:
        start = time.perf_counter()
        plus = snake.loss(snake.run(1.0 + d, record=False)[2])
        minus = snake.loss(snake.run(1.0 - d, record=False)[2])
        difference = (plus - minus) / (2.0 * d)
        wall = time.perf_counter() - start
        rows.append({"method": "central difference", "step_relative": d, "dloss_dfactor_m": difference, "wall_s": wall})
        print(f"{'central, d = ' + format(d, 'g'):>22} {difference:>22.4g} {wall:>9.1f}")
        write_dict_csv(out / "snake_gradient.csv", rows)
    differences = [row["dloss_dfactor_m"] for row in rows[1:]]
    print(f"adjoint against the central differences' mean: {100.0 * (adjoint / np.mean(differences) - 1.0):+.1f} % "
          f"(their spread {100.0 * (max(differences) - min(differences)) / abs(np.mean(differences)):.1f} %); the "
          f"gradient cost {gradient_seconds / rollout_seconds:.1f} rollouts")
    write_dict_csv(out / "snake_gradient.csv", rows)


if __name__ == "__main__":
    main()
