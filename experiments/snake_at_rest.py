"""The snake at rest against the time step: float32 positions against compensated ones.

The coarse snake stands on its wheels, chambers empty, at its own budget (8 x 40, ``snake_solver``) for ``--seconds``,
at each ``--substeps`` per 1/120 s frame, once with float32 positions and once with
``SolverSettings.compensated_positions`` (each position a float32 pair: ``softsnake.kernels.compensated``). A
passive body at rest can only settle: what it gains is the numerics'. Float32 positions resolve velocities only to
their spacing over h, and the freely rolling wheels keep that rounding (experiments/results/convergence.md, "The time
step and float32's velocity resolution"); the pair carries it.

Per run: the kinetic energy at the end [J] and its largest value over the last half of the run, how far the centre
of mass moved along the ground [um], the Newton steps per substep and the substeps that ended unconverged
(``Solver.newton_counts``), and the wall time.

Writes snake_at_rest<tag>.csv and .md into --out (default experiments/results), rewritten after each run, so an
interrupted sweep keeps what it finished.

Usage: python experiments/snake_at_rest.py [--substeps 2,4,8,16,32] [--seconds 1] [--positions float32,compensated]
           [--tag NAME] [--out DIR]
"""

import platform
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.output_files import write_dict_csv

POSITIONS = {"float32": False, "compensated": True}
"""``--positions``: the value of ``SolverSettings.compensated_positions`` of each."""


def rest_run(substeps, seconds, compensated):
    """One coarse snake at rest: a dict of the run's measures."""
    from softsnake.robots.snake.simulation import SnakeSimulation, snake_solver

    sim = SnakeSimulation(1, resolution="coarse", seconds=seconds, substeps=substeps)
    sim.solver = snake_solver(sim.model, substeps=substeps, compensated_positions=compensated)
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
            "kinetic_energy_J": energies[-1], "late_peak_kinetic_energy_J": max(energies[len(energies) // 2:]),
            "moved_um": 1e6 * float(np.linalg.norm(moved)), "moved_x_um": 1e6 * float(moved[0]),
            "newton_per_substep": int(counts.newton_steps.sum()) / max(substep_count, 1),
            "unconverged_substeps": int(counts.unconverged_ends.sum()), "substep_count": substep_count,
            "wall_s": wall}


def write_table(path, rows, args):
    lines = [f"# The coarse snake at rest, {args.seconds:g} s: float32 against compensated positions", "",
             "Chambers empty, standing on its wheels, the snake's budget (8 x 40) and start; per 1/120 s frame the "
             "substeps given. Kinetic energy at the end and its largest value over the run's second half, the centre "
             "of mass's move along the ground, Newton steps per substep, substeps that ended unconverged. Device: "
             f"{wp.get_device()}, warp {wp.__version__}. `python experiments/snake_at_rest.py --substeps "
             f"{args.substeps} --seconds {args.seconds:g} --positions {args.positions}`.", "",
             "| substeps (h) | positions | kinetic energy [J] | late peak [J] | moved [um] | along x [um] "
             "| Newton / substep | unconverged | wall [s] |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['substeps']} (1/{1.0 / r['h_s']:.0f} s) | {r['positions']} | {r['kinetic_energy_J']:.2e} "
                     f"| {r['late_peak_kinetic_energy_J']:.2e} | {r['moved_um']:.1f} | {r['moved_x_um']:+.1f} "
                     f"| {r['newton_per_substep']:.2f} | {r['unconverged_substeps']} of {r['substep_count']} "
                     f"| {r['wall_s']:.0f} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--substeps", default="2,4,8,16,32", help="substeps per 1/120 s frame, comma-separated")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated time [s]")
    parser.add_argument("--positions", default="float32,compensated", help=f"comma-separated, of {sorted(POSITIONS)}")
    parser.add_argument("--tag", default="", help="file name suffix")
    args = parser.parse_args(argv)
    try:
        substeps = [int(s) for s in args.substeps.split(",")]
    except ValueError:
        parser.error(f"--substeps: expected integers like 2,4,8, got {args.substeps!r}")
    if any(s < 1 for s in substeps):
        parser.error(f"--substeps must be at least 1, got {args.substeps!r}")
    positions = args.positions.split(",")
    unknown = [p for p in positions if p not in POSITIONS]
    if unknown:
        parser.error(f"--positions: unknown {unknown}, choose from {sorted(POSITIONS)}")
    if not args.seconds > 0.0:
        parser.error("--seconds must be positive")
    out = make_output_folder(args.out)
    tag = f"_{args.tag}" if args.tag else ""
    print(f"device: {wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}",
          file=sys.stderr)
    rows = []
    for s in substeps:
        for p in positions:
            rows.append(rest_run(s, args.seconds, POSITIONS[p]))
            write_dict_csv(out / f"snake_at_rest{tag}.csv", rows)
            write_table(out / f"snake_at_rest{tag}.md", rows, args)
            r = rows[-1]
            print(f"{s:>3} substeps {p:>11}: kinetic energy {r['kinetic_energy_J']:.2e} J (late peak "
                  f"{r['late_peak_kinetic_energy_J']:.2e}), moved {r['moved_um']:.1f} um, "
                  f"{r['newton_per_substep']:.2f} Newton per substep, wall {r['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
