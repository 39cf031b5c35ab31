"""Do identical worlds stay identical on a GPU? (issue 13; experiments/results/gpu.md, section 8)

Every world of a batch is simulated in its own frame and reads no other world's numbers, so N copies of
one snake must keep N identical local states: on the CPU they do, bit for bit, at any placement
(tests/test_world_placement.py). On a GPU this was never measured. (The 1024 snakes of
``softsnake gait --device cuda`` are no such test: the command spreads their gait offsets from -0.3 to 0.3,
so their trajectories differ by design.) A drift between copies that grows with the world's index would
point at a race between thread blocks (later blocks seeing writes of earlier ones), a uniform one at
order-dependent float sums (atomics).

This script steps N copies of the coarse snake under the paper's gait (one ``GaitParams`` for all, valve
latency on) for --frames frames, once per variant: linear solver, CUDA graph or not, stepped in place
(``step(state, state)``) or between two states, and spacing of the worlds. Per variant it prints the
number of distinct local states and the largest deviation of a world's particle positions from world
0's in each eighth of the batch (worlds ordered by index). The answer the engine promises: 1 distinct
state, deviations 0 (on the CPU: checked with 3 snakes, 3 frames).

    python experiments/gpu_world_independence.py [--device cuda] [--snakes 128] [--frames 30]
        [--variants block/graph/inplace/1,block/nograph/inplace/1,...]

Writes gpu_world_independence.csv into --out.
"""

import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.errors import ConfigError
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.robot import chamber_pressures
from softsnake.robots.snake.simulation import DT_DEFAULT, SnakeSimulation, snake_solver

DEFAULT_VARIANTS = ("block/graph/inplace/1,block/nograph/inplace/1,block/graph/twostates/1,block/graph/inplace/0.001,"
                    "batched/graph/inplace/1,batched/nograph/inplace/1")
"""linear solver / CUDA graph or not / stepped in place or between two states / spacing of the worlds [m]."""

GROUPS = 8
"""The batch is reported in this many groups of consecutive world indices."""


class TwoStateSimulation(SnakeSimulation):
    """The gait run stepping from one state into another and back (``step(state_0, state_1)``), not in place."""

    def _advance(self, differential, upcoming=()):
        self.control.pressure.assign(chamber_pressures(self.model, self.snake.link_channels, differential))
        if not hasattr(self, "_spare"):
            self._spare = self.model.state()
        self.solver.step(self.state, self._spare, self.control, self.dt)
        self.state, self._spare = self._spare, self.state


def parse_variant(text):
    """(linear solver, CUDA graph, in place, spacing [m]) from 'solver/graph|nograph/inplace|twostates/spacing'."""
    try:
        solver, graph, stepping, spacing = text.split("/")
        if graph not in ("graph", "nograph") or stepping not in ("inplace", "twostates"):
            raise ValueError
        return solver, graph == "graph", stepping == "inplace", float(spacing)
    except ValueError:
        raise ConfigError(f"variant {text!r} is not solver/graph|nograph/inplace|twostates/spacing") from None


def run_variant(device, snakes, frames, solver_name, graph, in_place, spacing):
    """One row: distinct local states and each group's largest deviation from world 0 [m]."""
    kind = SnakeSimulation if in_place else TwoStateSimulation
    sim = kind(snakes, device=device, seconds=frames * DT_DEFAULT, spacing=spacing)
    sim.solver = snake_solver(sim.model, linear_solver=solver_name, capture_graph=graph)
    start = time.perf_counter()
    sim.run(progress=False)
    wp.synchronize_device(sim.model.device)
    seconds = time.perf_counter() - start
    local = sim.state.particle_q.numpy().reshape(snakes, -1, 3)  # every world in its own frame
    deviation = np.abs(local - local[0]).reshape(snakes, -1).max(axis=1)
    distinct = len({world.tobytes() for world in local})
    groups = np.array_split(deviation, min(GROUPS, snakes))
    row = {"device": str(sim.model.device), "snakes": snakes, "frames": frames, "linear_solver": solver_name,
           "capture_graph": graph, "stepping": "in place" if in_place else "two states", "spacing_m": spacing,
           "distinct_states": distinct, "largest_deviation_m": float(deviation.max()), "seconds": seconds}
    row.update({f"group_{g}_m": float(group.max()) for g, group in enumerate(groups)})
    return row


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--device", default="cuda", help="Warp device (default cuda; cpu: the reference, all zeros)")
    parser.add_argument("--snakes", type=int, default=128, help="copies of the coarse snake (default 128)")
    parser.add_argument("--frames", type=int, default=30, help="frames of 1/120 s (default 30)")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help="comma-separated solver/graph|nograph/inplace|twostates/spacing (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.snakes < 2 or args.frames < 1:
        parser.error(f"--snakes must be at least 2 and --frames at least 1, got {args.snakes} and {args.frames}")
    variants = [parse_variant(text) for text in args.variants.split(",") if text.strip()]
    out = make_output_folder(args.out)
    device = wp.get_device(args.device)
    print(f"device: {device} ({device.name}); {args.snakes} coarse snakes, {args.frames} frames of the gait")
    print(f"{'solver':>9} {'graph':>5} {'stepping':>10} {'spacing':>7} {'distinct':>8} {'largest m':>10} | "
          f"largest deviation from world 0 in each eighth of the batch [m] | s")
    rows = []
    for variant in variants:
        row = run_variant(args.device, args.snakes, args.frames, *variant)
        rows.append(row)
        write_dict_csv(out / "gpu_world_independence.csv", rows)  # complete after every variant
        groups = " ".join(f"{row[key]:.1e}" for key in row if key.startswith("group_"))
        print(f"{row['linear_solver']:>9} {str(row['capture_graph']):>5} {row['stepping']:>10} {row['spacing_m']:7g} "
              f"{row['distinct_states']:8d} {row['largest_deviation_m']:10.2e} | {groups} | {row['seconds']:.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
