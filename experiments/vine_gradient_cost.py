"""Cost of a vine rollout's gradient through the engine against the rollout itself.

For vines of 5, 10 and 25 links growing into a wall (one vine, 45 steps of 1/90 s, the vine's default
solver settings): the wall time per step of the forward rollout (``VineBatch.step``) and of recording
the rollout and running its gradient (``robots.vine.gradients.vine_gradients``: record, then the
adjoint of every step), medians of --repeats runs after one warm-up run; their ratio; the colours of
the step's Jacobian pattern (tape backward passes per step); and the bytes the record holds per
vine-step. Prints a table with the device and writes vine_gradient_cost.csv into --out (default
experiments/results).

Usage: python experiments/vine_gradient_cost.py [--out DIR] [--repeats 3]
"""

import statistics
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.gradients import _JacobianPattern, record_rollout
from softsnake.output_files import write_dict_csv
from softsnake.robots.vine.gradients import vine_gradients
from softsnake.robots.vine.scene import ObstacleWall, VineParams
from softsnake.robots.vine.simulation import VineBatch, VineSpec

LINKS = (5, 10, 25)
STEPS = 45
DT = 1.0 / 90.0
WALL = (ObstacleWall(start=(0.0, 0.12), end=(0.5, 0.12)),)


def batch(links):
    return VineBatch([VineSpec(VineParams(link_count=links, length=0.3, heading=0.5, growth_rate=0.1), WALL)])


def forward_seconds(links):
    b = batch(links)
    start = time.perf_counter()
    for _ in range(STEPS):
        b.step(DT)
    return time.perf_counter() - start


def gradient_seconds(links):
    b = batch(links)
    start = time.perf_counter()
    vine_gradients(b, STEPS, DT, lambda poses: np.ones((1, 2 * links, 2)))
    return time.perf_counter() - start


def record_bytes(links):
    b = batch(links)
    record = record_rollout(b.solver, b.state, b.control, DT, 1)[0]
    return sum(v.nbytes for d in (record.start, record.end, record.forces, record.control) for v in d.values()) \
        + record.multipliers.nbytes


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (median)")
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    device = wp.get_device("cpu")
    print(f"device: {device} ({device.name}); {STEPS} steps of {DT:.4g} s, medians of {args.repeats} runs")
    rows = []
    for links in LINKS:
        forward_seconds(links), gradient_seconds(links)  # warm-up: kernel loads, first allocations
        forward = statistics.median(forward_seconds(links) for _ in range(args.repeats))
        gradient = statistics.median(gradient_seconds(links) for _ in range(args.repeats))
        rows.append({"links": links, "forward_ms_per_step": 1e3 * forward / STEPS,
                     "record_and_gradient_ms_per_step": 1e3 * gradient / STEPS, "ratio": gradient / forward,
                     "colours": _JacobianPattern(batch(links).model).colour_count,
                     "record_bytes_per_vine_step": record_bytes(links)})
    write_dict_csv(out / "vine_gradient_cost.csv", rows)
    print("| links | forward [ms/step] | record + gradient [ms/step] | ratio | colours | record [B/vine-step] |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['links']} | {r['forward_ms_per_step']:.2f} | {r['record_and_gradient_ms_per_step']:.1f} | "
              f"{r['ratio']:.1f} | {r['colours']} | {r['record_bytes_per_vine_step']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
