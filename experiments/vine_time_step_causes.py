"""Why seed 000's cluttered scene 1 does not converge in the time step: variants of it at 1 to 32 substeps.

``time_step_convergence.py --robot vine`` finds the vine of ``jitosho_cluttered_1`` (it grows against a box, slides
along it and springs back past its corner) moving by one to two tube diameters with every halving of h, without the
shrinking changes of a first-order method, while ``jitosho_cluttered_2`` (it touches nothing) is converged at the
scene's own 1/90 s. This script changes one thing of scene 1 at a time and runs each variant at ``--substeps``
substeps per 1/90 s step (the vine's own converged solver settings, one vine): the scene as given; no obstacles;
the pins' damping times 10 and 100 (the scene's pins have a damping ratio C / (2 sqrt(K I)) of about 0.013); the
pins' stiffness times 10; growth that gives way under a tip load (``VineBatch(stall_force=...)``; the scene's growth
holds its rate whatever the load, as seed 000's growth-rate constraint does).

Per variant: the tip's largest distance over the scene's 450 steps from the run at the next finer h [tube
diameters], and the observed order of the last two changes (log2 of their ratio; first order: 1). Writes
vine_time_step_causes.csv and .md into --out (default experiments/results), rewritten after each variant.

Usage: python experiments/vine_time_step_causes.py [--substeps 1,2,4,8,16,32] [--variants NAME,...] [--out DIR]
"""

import dataclasses
import itertools
import math
import platform
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import chosen_variants, experiment_parser, make_output_folder, positive_int_list
from softsnake.output_files import write_dict_csv
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, rollout, specs_from_scene

SCENE = "jitosho_cluttered_1"


def variants(scene):
    """{name: (description, scene, VineBatch keyword options)} of the study."""
    vine = scene.vine

    def with_vine(**changes):
        return dataclasses.replace(scene, vine=dataclasses.replace(vine, **changes))

    return {
        "scene": ("the scene as given", scene, {}),
        "no_obstacles": ("no obstacles", dataclasses.replace(scene, obstacles=()), {}),
        "damping_x10": ("pins' damping x 10", with_vine(damping=10.0 * vine.damping), {}),
        "damping_x100": ("pins' damping x 100", with_vine(damping=100.0 * vine.damping), {}),
        "stiffness_x10": ("pins' stiffness x 10", with_vine(stiffness=10.0 * vine.stiffness), {}),
        "stall_0.5N": ("growth gives way at a 0.5 N tip load", scene, {"stall_force": 0.5}),
        "stall_0.05N": ("growth gives way at a 0.05 N tip load", scene, {"stall_force": 0.05}),
    }


def tips(scene, substeps, options):
    """The vine's tip (steps + 1, 2) [m] at ``substeps`` per step."""
    batch = VineBatch(specs_from_scene(scene), solver_options={"substeps": substeps}, **options)
    return rollout(batch, scene.sim.step_count, scene.sim.dt).tips[:, 0]


def damping_ratio(vine):
    """C / (2 sqrt(K I)) of one pin with one body's inertia [-]."""
    return vine.damping / (2.0 * math.sqrt(vine.stiffness * vine.body_inertia))


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--substeps", type=positive_int_list, default=[1, 2, 4, 8, 16, 32],
                        help="substeps per 1/90 s step, comma-separated (at least two)")
    parser.add_argument("--variants", default=None, help="comma-separated names (default: all)")
    args = parser.parse_args(argv)
    scene = load_scene(SCENE)
    table = variants(scene)
    names = chosen_variants(parser, args.variants, table)
    if len(args.substeps) < 2:
        parser.error("--substeps needs at least two values to compare")
    out = make_output_folder(args.out)
    substeps = sorted(args.substeps)
    device = f"{wp.get_device()} ({platform.processor() or platform.machine()}), warp {wp.__version__}"
    print(f"{SCENE}, {scene.sim.step_count} steps of 1/{1.0 / scene.sim.dt:.0f} s; device {device}", flush=True)
    diameter = 2.0 * scene.vine.tube_radius
    rows = []
    for name in names:
        description, variant, options = table[name]
        start = time.perf_counter()
        runs = [tips(variant, s, options) for s in substeps]
        changes = [float(np.linalg.norm(a - b, axis=1).max() / diameter) for a, b in itertools.pairwise(runs)]
        order = math.log2(changes[-2] / changes[-1]) if len(changes) > 1 and min(changes[-2:]) > 0 else math.nan
        row = {"variant": name, "description": description, "damping_ratio": damping_ratio(variant.vine),
               **{f"change_{a}_to_{b}": c for (a, b), c in zip(itertools.pairwise(substeps), changes)},
               "observed_order": order, "wall_s": time.perf_counter() - start}
        rows.append(row)
        print(f"{name:14s} " + " ".join(f"{c:.3f}" for c in changes) + f"  order {order:+.2f}  ({row['wall_s']:.0f} s)",
              flush=True)
        write_dict_csv(out / "vine_time_step_causes.csv", rows)
        write_markdown(out / "vine_time_step_causes.md", rows, substeps, device, argv)
    return 0


def write_markdown(path, rows, substeps, device, argv):
    steps = list(itertools.pairwise(substeps))
    lines = [f"# Why cluttered scene 1 does not converge in h: variants of {SCENE}", "",
             f"`python experiments/vine_time_step_causes.py{' ' + ' '.join(argv) if argv else ''}`; device {device}. "
             "Cells: the tip's largest distance over the scene's 450 steps from the run at the next finer h [tube "
             "diameters, 15 mm]; order: log2 of the ratio of the last two changes (first order: 1).", "",
             "| variant | pin damping ratio | " + " | ".join(f"{a} -> {b}" for a, b in steps) + " | order | wall [s] |",
             "|---|---:|" + "---:|" * len(steps) + "---:|---:|"]
    for row in rows:
        cells = " | ".join(f"{row[f'change_{a}_to_{b}']:.3f}" for a, b in steps)
        lines.append(f"| {row['description']} | {row['damping_ratio']:.3f} | {cells} | {row['observed_order']:+.2f} | "
                     f"{row['wall_s']:.0f} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
