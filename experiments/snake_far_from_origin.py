"""Does a snake built far from its model's origin walk as it does at the origin? (convergence.md, "A frame that
follows each world")

Unlike ``add_world(offset=...)``, which keeps a world's coordinates where its builder put them, a snake built with
``add_snake(..., position=(d, 0, 0))`` has float32 coordinates d metres out, and so has a snake that walks there.
Each substep now runs in a frame centred on its world (``softsnake.kernels.world_frame``); this script builds one
coarse snake on the ground at d = 0, 10, 30 and 100 m along x (the model's own frame, no offset), runs the paper's
gait (no latency) for --seconds, and prints its centre-of-mass travel from where it was built and the difference
from the snake at the origin. Run it on the code before the frame (a checkout of an older commit on PYTHONPATH) for
the comparison.

    python experiments/snake_far_from_origin.py [--seconds 3] [--distances 0,10,30,100] [--substeps 2]
        [--compensated | --float32]

``--compensated`` / ``--float32`` force ``SolverSettings.compensated_positions`` (default: the engine's "auto",
float32 at the gait's 2 substeps); compensated, the centre of mass includes the positions' remainders.
"""

import argparse
import sys

import numpy as np

import softsnake
from softsnake.cli.common import POSITION_SETTINGS, add_positions_option, float_list, positions_suffix
from softsnake.console import quiet_warp
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.gait import GaitParams, gait_command
from softsnake.robots.snake.robot import add_snake, chamber_pressures
from softsnake.robots.snake.simulation import snake_solver

DT = 1.0 / 120.0


def centre_of_mass(state, mass):
    """The particles' centre of mass [m], float64, with the positions' remainders where the state has them."""
    q = state.particle_q.numpy().astype(np.float64)
    low = getattr(state, "particle_q_low", None)  # older checkouts have no remainders
    if low is not None:
        q += low.numpy()
    return np.average(q, axis=0, weights=mass)


def travel(distance, seconds, substeps, **positions):
    """Centre-of-mass travel [m] (3,) of a coarse snake built ``distance`` m out along x, after ``seconds``."""
    config = load_snake_config(resolution="coarse")
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=config.friction)
    snake = add_snake(builder, config, "coarse", position=(distance, 0.0, 0.0))
    model = builder.finalize("cpu")
    solver = snake_solver(model, substeps=substeps, **positions)
    state, control = model.state(), model.control()
    mass = model.particle_mass_numpy().astype(np.float64)
    start = centre_of_mass(state, mass)
    gait = GaitParams(snake_count=1)
    # Its own loop rather than simulation.step_gait, so that it runs on the older checkouts it is compared with.
    for frame in range(1, int(round(seconds / DT)) + 1):
        # The gait's link index counts from the tail (gait.head_first_command).
        command = gait_command(gait, frame * DT, config.link_count)[:, ::-1]
        control.pressure.assign(chamber_pressures(model, snake.link_channels, command))
        solver.step(state, state, control, DT)
    return centre_of_mass(state, mass) - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--distances", type=float_list, default=[0.0, 10.0, 30.0, 100.0])
    parser.add_argument("--substeps", type=int, default=2)
    add_positions_option(parser)
    args = parser.parse_args(argv)
    positions = {"compensated_positions": POSITION_SETTINGS[args.positions]}
    quiet_warp()
    print(f"coarse snake, paper gait without latency, {args.seconds:g} s in {args.substeps} substeps per 1/120 s "
          f"frame{positions_suffix(args)[1]}, built d m out along x (softsnake {softsnake.__file__})")
    print("| d [m] | forward [mm] | lateral [mm] | from the snake at 0: x / y [mm] |")
    print("|---:|---:|---:|---|")
    reference = None
    for d in args.distances:
        t = travel(d, args.seconds, args.substeps, **positions)
        reference = t if reference is None else reference
        print(f"| {d:g} | {1e3 * t[0]:.3f} | {1e3 * t[1]:.3f} | {1e3 * (t[0] - reference[0]):+.3f} / "
              f"{1e3 * (t[1] - reference[1]):+.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
