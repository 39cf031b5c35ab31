"""Host time to build a batch: N paper-mesh snakes (seed 001) and N 15-link vines (seed 003's batch).

Building is host work (Python and NumPy), paid once per batch before the first step and the same
whatever device the model goes to; for thousands of robots it was minutes (issue 13: ~0.2 s per paper
snake, ~36 ms per 15-link vine on the GPU machine's host). This script times it by phase, on the
"cpu" device (the upload to a GPU is not included):

- snakes: ``add_snake`` (one world: the four meshed links, once), ``ModelBuilder.replicate`` (N
  copies) and ``finalize`` (the row layout, J's and J^T's sparsity, the arrays);
- vines: ``VineBatch`` (every vine built from its spec, then finalized, the solver made).

Median of --repeats builds of each case; prints the host CPU and a table, writes build_time.csv.

    python experiments/build_time.py [--snakes 1,16,64,256] [--vines 16,256,1024] [--repeats 3] [--out DIR]
"""

import statistics
import time

import numpy as np

from softsnake.builder import ModelBuilder
from softsnake.cli.common import experiment_parser, make_output_folder, positive_int_list
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.bench import device_name
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.robot import add_snake
from softsnake.robots.vine.benchmarks import spread_batch_specs
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch

VINE_LINKS = 15
"""Links per vine of the vine batches (issue 13's target case)."""


def time_snakes(count, config):
    """Seconds of each phase of building ``count`` paper-mesh snakes side by side."""
    start = time.perf_counter()
    world = ModelBuilder()
    add_snake(world, config, "paper")
    robot = time.perf_counter()
    scene = ModelBuilder()
    scene.add_ground(mu=config.friction)
    scene.replicate(world, count, spacing=(0.0, 1.0, 0.0))
    copies = time.perf_counter()
    model = scene.finalize("cpu")
    end = time.perf_counter()
    return {"robot_s": robot - start, "replicate_s": copies - robot, "finalize_s": end - copies,
            "total_s": end - start, "rows": model.row_count}


def time_vines(count, scene):
    """Seconds to build a VineBatch of ``count`` vines of the scene (launch angles spread)."""
    specs = spread_batch_specs(scene, VINE_LINKS, count, np.random.default_rng(0))
    start = time.perf_counter()
    batch = VineBatch(specs, device="cpu")
    return {"total_s": time.perf_counter() - start, "rows": batch.model.row_count}


def medians(runs):
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--snakes", type=positive_int_list, default=positive_int_list("1,16,64,256"))
    parser.add_argument("--vines", type=positive_int_list, default=positive_int_list("16,256,1024"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    config = load_snake_config(resolution="paper")
    scene = load_scene("jitosho_cluttered_1")
    time_snakes(1, config)  # the first build loads the kernels' modules; not timed
    print(f"host: {device_name('cpu')}; median of {args.repeats} builds", flush=True)
    print("| robots | count | rows | robot s | replicate s | finalize s | total s | ms per robot |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    cases = [("snake", n) for n in args.snakes] + [("vine", n) for n in args.vines]
    for kind, count in cases:
        runs = [time_snakes(count, config) if kind == "snake" else time_vines(count, scene) for _ in range(args.repeats)]
        m = medians(runs)
        row = {"robot": kind, "count": count, "rows": int(m["rows"]), "robot_s": m.get("robot_s", float("nan")),
               "replicate_s": m.get("replicate_s", float("nan")), "finalize_s": m.get("finalize_s", float("nan")),
               "total_s": m["total_s"], "ms_per_robot": 1e3 * m["total_s"] / count}
        rows.append(row)
        print(f"| {kind} | {count} | {row['rows']} | {row['robot_s']:.2f} | {row['replicate_s']:.2f} | "
              f"{row['finalize_s']:.2f} | {row['total_s']:.2f} | {row['ms_per_robot']:.1f} |", flush=True)
    write_dict_csv(out / "build_time.csv", [{k: f"{v:.4g}" if isinstance(v, float) else v for k, v in row.items()}
                                             for row in rows])


if __name__ == "__main__":
    main()
