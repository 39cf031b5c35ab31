"""Calibrate the coarse link's element modulus factor with gradients through the engine.

The coarse link (216 tetrahedra) locks in bending, so its tetrahedra get ``element_modulus_factor``
times the silicone's modulus (snake.toml, ``[link.resolution.coarse]``): the factor that makes it bend
as much per psi as the paper-mesh link. The shipped 0.39 was found by bisection on whole curvature
sweeps (experiments/results/snake.md, "Coarse mesh calibration"). Here the same fit runs by Newton's
method on log(factor), with d(curvature)/d(factor) from the adjoint of the rollout
(``softsnake.gradients.rollout_gradient``): the stand link of ``softsnake curvature`` at -8 and +8 psi
(two worlds of one batch), from factor 1 (the uncalibrated silicone) to the paper mesh's curvatures
(``--target``, default the paper link's converged curvature at -8 / +8 psi,
tests/robots/snake/test_calibration.py). Each iteration fits the mean of the two sides' log errors.

The rollouts are those the gradient differentiates: one substep per step of 1/120 s (the length of the
snake's substep), ``momentum_balance`` on and a tight budget (30 Newton x 200 linear iterations,
tolerances 1e-7 / 1e-6), so every step is the implicit-Euler step its adjoint assumes. The first
gradient is checked against a central difference of two more rollouts (factor x (1 +- 1 %)).

Prints a table per iteration (factor, curvatures, errors, d curvature / d factor, wall times of the
rollout and its gradient) with the device, and writes calibrate_link_gradient.csv into --out (default
experiments/results) after every iteration, so an interrupted run keeps the iterations it finished.

Usage: python experiments/calibrate_link_gradient.py [--iterations 3] [--seconds 2] [--start 1.0]
           [--target=-7.448,7.45] [--out DIR]
"""

import platform
import time

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.gradients import record_rollout, rollout_gradient
from softsnake.output_files import write_csv
from softsnake.robots.snake.curvature import build_stands
from softsnake.robots.snake.gait_gradient import GRADIENT_BUDGET
from softsnake.robots.snake.robot import chamber_pressures, link_curvature
from softsnake.units import psi_to_pa

COLUMNS = ("iteration", "factor", "curvature_minus8_per_m", "curvature_plus8_per_m", "error_minus8", "error_plus8",
           "dcurvature_dfactor_minus8", "dcurvature_dfactor_plus8", "central_difference_minus8",
           "central_difference_plus8", "rollout_seconds", "gradient_seconds")
PRESSURES_PSI = (-8.0, 8.0)
PAPER_MESH_CURVATURE_AT_8_PSI = (-7.448, 7.450)
"""The paper-mesh stand link at -8 / +8 psi, converged [1/m] (tests/robots/snake/test_calibration.py)."""
H = 1.0 / 120.0
"""Step [s]: one substep of the snake's 1/60 s frame."""
BUDGET = {"substeps": 1, **GRADIENT_BUDGET}


class Stand:
    """The stand link at each pressure, one world each, with the tetrahedra's modulus set per factor."""

    def __init__(self):
        self.model, self.handle, self.bodies_per_world = build_stands(len(PRESSURES_PSI), device="cpu")
        self.shipped_factor = self.handle.config.resolution("coarse").element_modulus_factor
        self.silicone = self.model.tet_youngs_modulus.numpy().astype(np.float64) / self.shipped_factor
        self.tet_world = self.model.tet_world.numpy()

    def curvature(self, body_q):
        """Each world's link curvature [1/m] from the body poses (body_count, 7)."""
        poses = np.asarray(body_q, dtype=np.float64).reshape(len(PRESSURES_PSI), self.bodies_per_world, 7)
        return link_curvature(poses, self.handle.cap_bodies, self.handle.link_lengths)[:, 0]

    def curvature_gradient(self, body_q, step=1e-6):
        """d(curvature of world w)/d(body_q), summed over the worlds (each depends on its own bodies only):
        central differences of ``curvature`` in float64, exact to ~1e-10 for this smooth function."""
        body_q = np.asarray(body_q, dtype=np.float64)
        seed = np.zeros_like(body_q)
        for index in np.ndindex(body_q.shape):
            plus, minus = body_q.copy(), body_q.copy()
            plus[index] += step
            minus[index] -= step
            seed[index] = (self.curvature(plus) - self.curvature(minus)).sum() / (2.0 * step)
        return seed

    def rollout(self, factor, seconds, record=True):
        """The stand at ``factor`` for ``seconds``: (solver, records or None, final body_q)."""
        self.model.tet_youngs_modulus.assign((self.silicone * factor).astype(np.float32))
        solver = softsnake.Solver(self.model, **BUDGET)
        state, control = self.model.state(), self.model.control()
        differential = psi_to_pa(np.asarray(PRESSURES_PSI))[:, None]
        control.pressure.assign(chamber_pressures(self.model, self.handle.link_channels, differential))
        steps = int(round(seconds / H))
        if record:
            records = record_rollout(solver, state, control, H, steps)
        else:
            records = None
            for _ in range(steps):
                solver.step(state, state, control, H)
        return solver, records, state.body_q.numpy().astype(np.float64)

    def derivative(self, solver, records, body_q):
        """d(curvature of each world)/d(factor) by the adjoint of the recorded rollout."""
        _, grads = rollout_gradient(solver, records, {"body_q": self.curvature_gradient(body_q)},
                                    {"youngs_modulus": self.model.tet_youngs_modulus})
        # d Y_t / d factor = silicone_t: each world's loss depends on its own tetrahedra only.
        per_tet = grads["youngs_modulus"] * self.silicone
        return np.array([per_tet[self.tet_world == w].sum() for w in range(len(PRESSURES_PSI))])


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--iterations", type=int, default=3, help="Newton iterations on log(factor) (default: 3)")
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated time of each rollout [s] (default: 2)")
    parser.add_argument("--start", type=float, default=1.0, help="the factor to start from (default: 1)")
    parser.add_argument("--target", default=",".join(f"{k:g}" for k in PAPER_MESH_CURVATURE_AT_8_PSI),
                        help="curvatures to reach at -8 and +8 psi [1/m] (default: the paper mesh's)")
    args = parser.parse_args(argv)
    target = np.array([float(v) for v in args.target.split(",")])
    if target.shape != (2,) or target[0] >= 0.0 or target[1] <= 0.0:
        parser.error("--target needs two curvatures [1/m]: a negative one at -8 psi, a positive one at +8 psi")
    if args.iterations < 1 or not args.seconds > 0.0 or not args.start > 0.0:
        parser.error("--iterations must be at least 1, --seconds and --start positive")
    out = make_output_folder(args.out)

    stand = Stand()
    device = f"cpu ({platform.machine()}), warp {wp.__version__}"
    print(f"Coarse link factor by gradients: {device}; stand at {PRESSURES_PSI[0]:g} / {PRESSURES_PSI[1]:g} psi, "
          f"{args.seconds:g} s of {H:.4g} s steps; target {target[0]:.4f} / {target[1]:.4f} 1/m; shipped factor "
          f"{stand.shipped_factor:g}")
    print(f"{'iter':>4} {'factor':>8} {'curv -8':>9} {'curv +8':>9} {'err -8':>8} {'err +8':>8} "
          f"{'dk/df -8':>9} {'dk/df +8':>9} {'rollout s':>9} {'grad s':>7}")
    rows = []
    factor = args.start
    for iteration in range(args.iterations + 1):
        start = time.perf_counter()
        solver, records, body_q = stand.rollout(factor, args.seconds)
        rollout_seconds = time.perf_counter() - start
        curvature = stand.curvature(body_q)
        error = curvature / target - 1.0
        row = {"iteration": iteration, "factor": factor, "curvature_minus8_per_m": curvature[0],
               "curvature_plus8_per_m": curvature[1], "error_minus8": error[0], "error_plus8": error[1],
               "rollout_seconds": rollout_seconds}
        if iteration < args.iterations:
            start = time.perf_counter()
            slope = stand.derivative(solver, records, body_q)
            row["gradient_seconds"] = time.perf_counter() - start
            row["dcurvature_dfactor_minus8"], row["dcurvature_dfactor_plus8"] = slope
            if iteration == 0:
                # The adjoint against a central difference of two more rollouts.
                step = 0.01 * factor
                plus = stand.curvature(stand.rollout(factor + step, args.seconds, record=False)[2])
                minus = stand.curvature(stand.rollout(factor - step, args.seconds, record=False)[2])
                central = (plus - minus) / (2.0 * step)
                row["central_difference_minus8"], row["central_difference_plus8"] = central
                print(f"     adjoint d curvature / d factor {slope[0]:.5g} / {slope[1]:.5g}, central difference "
                      f"{central[0]:.5g} / {central[1]:.5g} (relative {abs(slope / central - 1.0).max():.2e})")
        rows.append(row)
        print(f"{iteration:>4} {factor:>8.5f} {curvature[0]:>9.4f} {curvature[1]:>9.4f} {100 * error[0]:>7.2f}% "
              f"{100 * error[1]:>7.2f}% {row.get('dcurvature_dfactor_minus8', np.nan):>9.4g} "
              f"{row.get('dcurvature_dfactor_plus8', np.nan):>9.4g} {rollout_seconds:>9.1f} "
              f"{row.get('gradient_seconds', np.nan):>7.1f}")
        write_csv(out / "calibrate_link_gradient.csv", list(COLUMNS),
                  [[f"{r[c]:.6g}" if c in r else "" for c in COLUMNS] for r in rows])
        if iteration == args.iterations:
            break
        # Newton on log(curvature / target) against log(factor): d log k / d log f = f k' / k.
        log_slope = factor * slope / curvature
        factor *= float(np.exp(-np.mean(np.log(curvature / target)) / np.mean(log_slope)))
    print(f"fitted factor {factor:.5f} (shipped {stand.shipped_factor:g}); wrote {out / 'calibrate_link_gradient.csv'}")
    return rows


if __name__ == "__main__":
    main()
