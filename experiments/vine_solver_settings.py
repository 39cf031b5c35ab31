"""Which budget a vine needs: distance from the converged step, dependence on the start, and cost.

A vine's answer should be the physics' and not the solver's: the same whether each step starts warm (the last
step's contact multipliers) or cold, and the same at a larger budget. This study runs the vine scenes at several
budgets (Newton x linear iterations at most; the engine's tolerances stop a converged step earlier), with the
plain iteration (seed 001's) and the balanced one (``SolverSettings.momentum_balance``), warm and cold, against a
reference: balanced, cold, 64 x 400, tolerances 1e-7 / 1e-6. Scenes:

- cluttered scenes 1 and 2 (25 links, 450 steps of 1/90 s; seed 000's reference rollouts): the tip error against
  the reference rollout (median and maximum in tube diameters D) and whether the vine passes every obstacle
  on the reference's side;
- the wall (real robot, seed 000 Fig. 7, 21 steps from the video's first state): the tip's x against the video
  before fitting (mean absolute error) [mm];
- the runtime vine (seed 000 Fig. 5: 30 bodies, one circle, 400 steps of 10 ms, stiffness 0.5 N m/rad, the
  stiffest chain here) and the batch benchmark's vine (15 links in cluttered scene 1, 64 launch angles, 200 steps).

Per scene, budget and iteration: the largest tip distance over the run from the reference (warm start) and
between the warm and the cold run, in tube diameters D, and the warm run's wall time per step [ms] (one run,
this machine; the benchmark is experiments/vine_runtime.py). "old default" is the vines' budget until the
sixteenth session, 4 x max(20, links), plain; "default" is what ``VineBatch`` runs now
(``softsnake.robots.vine.simulation.SOLVER_DEFAULTS``: the engine's policy, 16 x max(100, links), balanced,
stopping also at twice the round-off floor, ``newton_floor``; until the seventeenth session a Newton tolerance
of 3e-5 instead, ``16x100b@3e-5+floor0``).

Writes vine_solver_settings.csv/.md into --out (default experiments/results), rewritten after every row, so an
interrupted run keeps what it finished.

Usage: python experiments/vine_solver_settings.py [--budgets old,8x50,8x50b,16x100,16x100b,default,32x200b] [--scenes NAMES] [--out DIR]
"""

import platform
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.errors import SimulationError
from softsnake.robots.vine.benchmarks import (RUNTIME_VINE, SINGLE_DT, SINGLE_STEPS, runtime_vine_specs,
                                              spread_batch_specs)
from softsnake.robots.vine.comparison import compare_with_reference
from softsnake.robots.vine.reference import load_jitosho_rollout, load_wall_fit
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, VineSpec, rollout, seed_001_solver_options, specs_from_scene
from softsnake.solver_settings import SolverSettings

from convergence import FAR_PAST_CONVERGED, write_outputs

TITLE = "# Vine budgets: distance from the converged step, warm against cold, cost (experiments/vine_solver_settings.py)"
BATCH_VINES, BATCH_LINKS, BATCH_STEPS = 64, 15, 200


def budget_options(name, links):
    """(label, solver options) of a budget name: ``old`` (4 x max(20, links), plain), ``default`` (VineBatch's
    own), NxL (plain) or NxLb (balanced) at the engine's Newton tolerance, or at TOL with the suffix @TOL; any
    of them with the suffix +floorF stops at F times the round-off floor (``newton_floor``; 0: never). Every run
    has the vines' energy floor of the blow-up check (``SOLVER_DEFAULTS``), which changes no step."""
    name, *suffixes = name.split("+")
    label, options = _budget_options(name, links)
    for suffix in suffixes:
        if not suffix.startswith("floor"):
            raise ValueError(f"budget suffix +{suffix} is not +floorF")
        label, options = f"{label}, floor {float(suffix[5:]):g}", {**options, "newton_floor": float(suffix[5:])}
    return label, options


def _budget_options(name, links):
    engine_tolerance = SolverSettings.newton_tolerance
    if name == "old":
        return "old default 4x20 plain", seed_001_solver_options(links)
    if name == "default":
        return "default", {}
    name, _, tolerance = name.partition("@")
    balanced = name.endswith("b")
    newton, linear = (int(part) for part in name.rstrip("b").split("x"))
    options = {"newton_iterations": newton, "linear_iterations": linear, "momentum_balance": balanced,
               "newton_tolerance": float(tolerance) if tolerance else engine_tolerance}
    label = f"{newton}x{linear} {'balanced' if balanced else 'plain'}"
    return (label + f", Newton tolerance {tolerance}" if tolerance else label), options


def run(specs, steps, dt, options):
    """(rollout or None if it blew up, wall time per step [ms])."""
    batch = VineBatch(specs, solver_options=options)
    start = time.perf_counter()
    try:
        result = rollout(batch, steps, dt)
    except SimulationError:
        return None, float("nan")
    return result, 1e3 * (time.perf_counter() - start) / steps


def scenes():
    """name -> (specs, steps, dt, tube diameter [m], links, measure(result) -> dict)."""
    cases = {}
    for number in (1, 2):
        scene = load_scene(f"jitosho_cluttered_{number}")
        times, q_ref, _ = load_jitosho_rollout(number)

        def measure(result, scene=scene, q_ref=q_ref):
            error, same_side = compare_with_reference(scene, result.poses[:, 0], result.tips[:, 0], q_ref)
            return {"tip_error_median_D": float(np.median(error)), "tip_error_max_D": float(error.max()),
                    "same_side": bool(same_side.all())}
        cases[f"cluttered_{number}"] = (specs_from_scene(scene), len(times) - 1, scene.sim.dt,
                                        2.0 * scene.vine.tube_radius, scene.vine.link_count, measure)
    wall = load_scene("jitosho_wall")
    reference = load_wall_fit()
    poses, velocities = reference.initial_state()
    frames = reference.frame_steps(wall.sim.dt)
    video_x = reference.video_points[:, -1, 0]
    cases["wall"] = ([VineSpec(wall.vine, wall.obstacles, initial_poses=poses, initial_velocities=velocities)],
                     int(frames[-1]), wall.sim.dt, 2.0 * wall.vine.tube_radius, wall.vine.link_count,
                     lambda result: {"tip_x_mae_mm": float(1e3 * np.abs(result.tips[frames, 0, 0] - video_x).mean())})
    runtime = runtime_vine_specs(30)
    cases["runtime_30_bodies"] = (runtime, SINGLE_STEPS, SINGLE_DT, 2.0 * RUNTIME_VINE.tube_radius,
                                  runtime[0].vine.link_count, lambda result: {})
    batch_scene = load_scene("jitosho_cluttered_1")
    batch = spread_batch_specs(batch_scene, BATCH_LINKS, BATCH_VINES, np.random.default_rng(0))
    cases[f"batch_{BATCH_LINKS}_links"] = (batch, BATCH_STEPS, batch_scene.sim.dt, 2.0 * batch_scene.vine.tube_radius,
                                           BATCH_LINKS, lambda result: {})
    return cases


def tip_distance(a, b, diameter):
    """Largest tip distance between two rollouts over every recorded step and vine [D]."""
    return float(np.linalg.norm(a.tips - b.tips, axis=-1).max() / diameter)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--budgets", default="old,8x50,8x50b,16x100,16x100b,default,32x200b",
                        help="comma-separated: old, default, NxL (plain), NxLb (balanced), each NxL[b]@TOL with a Newton tolerance, "
                             "any with +floorF (stop at F times the round-off floor; 0: never)")
    parser.add_argument("--scenes", default=None, help="comma-separated scene names (default: all)")
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    cases = scenes()
    if args.scenes:
        unknown = set(args.scenes.split(",")) - set(cases)
        if unknown:
            parser.error(f"unknown scenes {sorted(unknown)}; choose from {', '.join(cases)}")
        cases = {name: cases[name] for name in args.scenes.split(",")}
    header = (f"Device: cpu ({platform.machine()}), warp {wp.config.version}. Reference: balanced, cold, 64 x 400, "
              f"tolerances 1e-7 / 1e-6. Distances: the largest tip distance over the run and the vines [D, tube "
              f"diameters]; wall time: the warm run, per step [ms], one run.")
    rows = []
    for scene_name, (specs, steps, dt, diameter, links, measure) in cases.items():
        reference, _ = run(specs, steps, dt, FAR_PAST_CONVERGED)
        for name in args.budgets.split(","):
            label, options = budget_options(name, links)
            warm, wall_ms = run(specs, steps, dt, options)
            cold, _ = run(specs, steps, dt, {**options, "warm_start": False})
            row = {"scene": scene_name, "budget": label}
            if warm is None or cold is None:
                row["blew_up"] = True
            else:
                row.update({"from_reference_D": tip_distance(warm, reference, diameter),
                            "warm_vs_cold_D": tip_distance(warm, cold, diameter),
                            "cold_from_reference_D": tip_distance(cold, reference, diameter),
                            "ms_per_step": wall_ms, **measure(warm)})
            rows.append(row)
            print(", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                            for key, value in row.items()), flush=True)
            write_outputs(out, "vine_solver_settings", rows, [TITLE, "", header])
        reference_row = {"scene": scene_name, "budget": "reference 64x400 balanced cold", "from_reference_D": 0.0,
                         **measure(reference)}
        rows.append(reference_row)
        write_outputs(out, "vine_solver_settings", rows, [TITLE, "", header])
    return 0


if __name__ == "__main__":
    sys.exit(main())
