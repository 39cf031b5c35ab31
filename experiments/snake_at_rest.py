"""The snake at rest against the time step, the iteration, the linear solver and the device.

The coarse snake stands on its wheels, chambers empty, at its own budget (8 x 40, ``snake_solver``) for ``--seconds``,
at each ``--substeps`` per 1/120 s frame, once with float32 positions and once with
``SolverSettings.compensated_positions`` (each position a float32 pair: ``softsnake.kernels.compensated``). A
passive body at rest can only settle: what it gains is the numerics'. Float32 positions resolve velocities only to
their spacing over h, and the freely rolling wheels keep that rounding (experiments/results/convergence.md, "The time
step and float32's velocity resolution"); the pair carries it.

``--iterations`` names the momentum balance of each run (the snake's own, "bodies" at its budget; plain, bodies or
balanced: ``SolverSettings.momentum_balance``), ``--linear-solvers`` the linear solvers (auto, per_world, block,
batched) and ``--device`` the Warp device: on an H200 the resting snake's kinetic energy at 1 s was ten times the CPU's
sample (experiments/results/gpu.md, section 20), and the CPU's own block solver changes the plain iteration's creep.

Per run: the kinetic energy at the end [J] and its largest and mean values over the last half of the run, how far
the centre of mass moved along the ground [um], the Newton steps per substep and the substeps that ended unconverged
(``Solver.newton_counts``), and the wall time.

Writes snake_at_rest<tag>.csv and .md into --out (default experiments/results), rewritten after each run, so an
interrupted sweep keeps what it finished.

Usage: python experiments/snake_at_rest.py [--substeps 2,4,8,16,32] [--seconds 1] [--positions float32,compensated]
           [--iterations snake,plain,bodies,balanced] [--linear-solvers auto,per_world,block,batched] [--device cuda]
           [--tag NAME] [--out DIR]
"""

import itertools
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import (check_device, chosen_variants, experiment_parser, make_output_folder,
                                  positive_int_list)
from softsnake.errors import UsageError
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.bench import device_name

POSITIONS = {"float32": False, "compensated": True}
"""``--positions``: the value of ``SolverSettings.compensated_positions`` of each."""

ITERATIONS = {"snake": None, "plain": False, "bodies": "bodies", "balanced": True}
"""``--iterations``: the ``SolverSettings.momentum_balance`` of each (snake: the snake's own, ``SNAKE_START``)."""

LINEAR_SOLVERS = ("auto", "per_world", "block", "batched")
"""``--linear-solvers``: ``SolverSettings.linear_solver`` values."""


def rest_run(substeps, seconds, compensated, *, iteration="snake", linear_solver="auto", device=None):
    """One coarse snake at rest: a dict of the run's measures."""
    from softsnake.robots.snake.simulation import SnakeSimulation, snake_solver

    sim = SnakeSimulation(1, resolution="coarse", seconds=seconds, substeps=substeps, device=device)
    overrides = {} if ITERATIONS[iteration] is None else {"momentum_balance": ITERATIONS[iteration]}
    sim.solver = snake_solver(sim.model, substeps=substeps, compensated_positions=compensated,
                              linear_solver=linear_solver, **overrides)
    rest = np.zeros((1, sim.config.link_count))
    start = sim.observe().com[0].copy()
    energies = []
    began = time.perf_counter()
    for _ in range(sim.frame_count):
        sim.step(rest)
        energies.append(float(sim.model.kinetic_energy(sim.state)[0]))
    wall = time.perf_counter() - began
    if not np.all(np.isfinite(energies)):
        raise RuntimeError(f"the snake at rest blew up at {substeps} substeps")
    moved = sim.observe().com[0, :2] - start[:2]
    counts = sim.solver.newton_counts()
    substep_count = int(counts.substeps.sum())
    return {"substeps": substeps, "h_s": sim.dt / substeps, "positions": "compensated" if compensated else "float32",
            "iteration": iteration, "linear_solver": linear_solver, "device": str(sim.model.device),
            "kinetic_energy_J": energies[-1], "late_peak_kinetic_energy_J": max(energies[len(energies) // 2:]),
            "late_mean_kinetic_energy_J": float(np.mean(energies[len(energies) // 2:])),
            "moved_um": 1e6 * float(np.linalg.norm(moved)), "moved_x_um": 1e6 * float(moved[0]),
            "newton_per_substep": int(counts.newton_steps.sum()) / max(substep_count, 1),
            "unconverged_substeps": int(counts.unconverged_ends.sum()), "substep_count": substep_count,
            "wall_s": wall}


def write_table(path, rows, args):
    lines = [f"# The coarse snake at rest, {args.seconds:g} s", "",
             "Chambers empty, standing on its wheels, the snake's budget (8 x 40); per 1/120 s frame the substeps "
             "given; the iteration's momentum balance (snake: its own, bodies) and the linear solver. Kinetic energy "
             "at the end and its largest and mean values over the run's second half, the centre of mass's move along "
             "the ground, Newton steps per substep, substeps that ended unconverged. Device: "
             f"{device_name(args.device)}, warp {wp.__version__}. "
             f"`{' '.join(['python experiments/snake_at_rest.py', *args.command])}`.", "",
             "| substeps (h) | positions | iteration | linear solver | kinetic energy [J] | late peak [J] "
             "| late mean [J] | moved [um] | along x [um] | Newton / substep | unconverged | wall [s] |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['substeps']} (1/{1.0 / r['h_s']:.0f} s) | {r['positions']} | {r['iteration']} "
                     f"| {r['linear_solver']} | {r['kinetic_energy_J']:.2e} "
                     f"| {r['late_peak_kinetic_energy_J']:.2e} | {r['late_mean_kinetic_energy_J']:.2e} "
                     f"| {r['moved_um']:.1f} | {r['moved_x_um']:+.1f} "
                     f"| {r['newton_per_substep']:.2f} | {r['unconverged_substeps']} of {r['substep_count']} "
                     f"| {r['wall_s']:.0f} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--substeps", type=positive_int_list, default=[2, 4, 8, 16, 32],
                        help="substeps per 1/120 s frame, comma-separated")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated time [s]")
    parser.add_argument("--positions", default="float32,compensated",
                        help=f"comma-separated, of {', '.join(POSITIONS)}")
    parser.add_argument("--iterations", default="snake", help=f"comma-separated, of {', '.join(ITERATIONS)}")
    parser.add_argument("--linear-solvers", default="auto", help=f"comma-separated, of {', '.join(LINEAR_SOLVERS)}")
    parser.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    parser.add_argument("--tag", default="", help="file name suffix")
    args = parser.parse_args(argv)
    args.command = list(sys.argv[1:] if argv is None else argv)
    if args.device is not None:
        try:
            check_device(args.device)
        except UsageError as error:
            parser.error(str(error))
    iterations = chosen_variants(parser, args.iterations, ITERATIONS)
    linear_solvers = chosen_variants(parser, args.linear_solvers, LINEAR_SOLVERS)
    positions = chosen_variants(parser, args.positions, POSITIONS)
    if not args.seconds > 0.0:
        parser.error("--seconds must be positive")
    out = make_output_folder(args.out)
    tag = f"_{args.tag}" if args.tag else ""
    print(f"device: {device_name(args.device)}, warp {wp.__version__}", file=sys.stderr)
    rows = []
    for s, p, iteration, solver in itertools.product(args.substeps, positions, iterations, linear_solvers):
        rows.append(rest_run(s, args.seconds, POSITIONS[p], iteration=iteration, linear_solver=solver,
                             device=args.device))
        write_dict_csv(out / f"snake_at_rest{tag}.csv", rows)
        write_table(out / f"snake_at_rest{tag}.md", rows, args)
        r = rows[-1]
        print(f"{s:>3} substeps {p:>11} {iteration:>8} {solver:>9}: kinetic energy {r['kinetic_energy_J']:.2e} J "
              f"(late peak {r['late_peak_kinetic_energy_J']:.2e}, mean {r['late_mean_kinetic_energy_J']:.2e}), "
              f"moved {r['moved_um']:.1f} um, "
              f"{r['newton_per_substep']:.2f} Newton per substep, wall {r['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
