"""How many Newton and linear iterations a vine needs: accuracy against cost.

The engine's settings come from the soft-snake paper (seed 001: 4 Newton iterations of 20
conjugate residual iterations per substep). A vine is a chain of rigid bodies with far fewer rows,
so this study measures what each setting costs in accuracy, to choose the vine's defaults
(``softsnake.robots.vine.simulation.SOLVER_DEFAULTS``) on evidence rather than by analogy:

- cluttered scenes 1 and 2 (reference rollouts of seed 000's simulator, 25 links): tip error against
  the reference (median and maximum in tube diameters), final length against the reference, whether
  the vine passes every obstacle on the reference's side, and the largest tip distance from a
  converged solve (``CONVERGED``: 8 Newton x 100 linear iterations) of the same scene;
- wall scene (real robot, seed 000 Fig. 7): tip x mean absolute error against the video before
  fitting, and the largest tip distance from the converged solve;
- runtime vine (seed 000 Fig. 5 setting, 30 bodies, one circle, 400 steps of 10 ms, stiffness 0.5 N m/rad:
  the stiffest chain of the experiments) and the batch benchmark's vine (15 links in cluttered scene 1, 64
  launch angles): largest tip distance from the converged solve, in tube diameters.

Cost is reported as matrix products per step (Newton x linear iterations); time per step belongs to the
benchmark (experiments/vine_runtime.py). Cluttered scene 1 is contact-rich and sensitive: even settings
close to converged move its tip by about a diameter at the contact events, so it is read together
with scene 2 and the wall.

Writes vine_solver_settings.csv into --out (default experiments/results) and prints the table.

Usage: python experiments/vine_solver_settings.py [--out DIR]
"""

import sys

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_output_folder
from softsnake.errors import SimulationError
from softsnake.output_files import write_dict_csv
from softsnake.robots.vine.benchmarks import (RUNTIME_VINE, SINGLE_DT, SINGLE_STEPS, runtime_vine_specs,
                                              spread_batch_specs)
from softsnake.robots.vine.comparison import compare_with_reference
from softsnake.robots.vine.reference import load_jitosho_rollout, load_wall_fit, rollout_length
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, VineSpec, rollout, specs_from_scene

CONVERGED = (8, 100)
"""Newton and linear iterations of the converged solve every setting is compared with."""

NEWTON_ITERATIONS = (1, 2, 3, 4)
LINEAR_ITERATIONS = (10, 15, 20, 25)
BATCH_VINES, BATCH_LINKS, BATCH_STEPS = 64, 15, 200


def run(specs, steps, dt, newton, linear):
    """Tips (F, V, 2) [m] and lengths (F, V) [m] of a rollout; None if it blew up."""
    batch = VineBatch(specs, solver_options={"newton_iterations": newton, "linear_iterations": linear})
    try:
        result = rollout(batch, steps, dt)
    except SimulationError:
        return None
    return result


def cluttered_cases():
    cases = []
    for number in (1, 2):
        scene = load_scene(f"jitosho_cluttered_{number}")
        times, q_ref, _ = load_jitosho_rollout(number)
        cases.append((f"cluttered_{number}", scene, specs_from_scene(scene), len(times) - 1, q_ref))
    return cases


def wall_case():
    scene = load_scene("jitosho_wall")
    reference = load_wall_fit()
    poses, velocities = reference.initial_state()
    steps = int(reference.frame_steps(scene.sim.dt)[-1])
    return scene, [VineSpec(scene.vine, scene.obstacles, initial_poses=poses, initial_velocities=velocities)], steps, reference


def main(argv=None):
    out = experiment_output_folder(__doc__, __file__, argv)
    print(f"device: {wp.get_device('cpu')} ({wp.get_device('cpu').name})")

    clutter = cluttered_cases()
    wall_scene, wall_specs, wall_steps, wall_reference = wall_case()
    wall_frames = wall_reference.frame_steps(wall_scene.sim.dt)
    wall_video_x = wall_reference.video_points[:, -1, 0]
    batch_scene = load_scene("jitosho_cluttered_1")
    batch = spread_batch_specs(batch_scene, BATCH_LINKS, BATCH_VINES, np.random.default_rng(0))
    chains = {
        "runtime_30_bodies": (runtime_vine_specs(30), SINGLE_STEPS, SINGLE_DT, 2.0 * RUNTIME_VINE.tube_radius),
        f"batch_{BATCH_LINKS}_links": (batch, BATCH_STEPS, batch_scene.sim.dt, 2.0 * batch_scene.vine.tube_radius),
        "wall": (wall_specs, wall_steps, wall_scene.sim.dt, 2.0 * wall_scene.vine.tube_radius),
    }
    converged = {name: run(specs, steps, scene.sim.dt, *CONVERGED) for name, scene, specs, steps, _ in clutter}
    converged.update({name: run(specs, steps, dt, *CONVERGED) for name, (specs, steps, dt, _) in chains.items()})

    rows = []
    for newton in NEWTON_ITERATIONS:
        for linear in LINEAR_ITERATIONS:
            row = {"newton_iterations": newton, "linear_iterations": linear, "products_per_step": newton * linear}
            for name, scene, specs, steps, q_ref in clutter:
                result = run(specs, steps, scene.sim.dt, newton, linear)
                if result is None:
                    row[f"{name}_blew_up"] = True
                    continue
                error, same_side = compare_with_reference(scene, result.poses[:, 0], result.tips[:, 0], q_ref)
                row[f"{name}_tip_error_median_D"] = float(np.median(error))
                row[f"{name}_tip_error_max_D"] = float(error.max())
                row[f"{name}_length_percent"] = float(100.0 * (result.lengths[-1, 0] / rollout_length(q_ref[-1]) - 1.0))
                row[f"{name}_same_side"] = bool(same_side.all())
                row[f"{name}_from_converged_max_D"] = float(
                    np.abs(result.tips - converged[name].tips).max() / (2.0 * scene.vine.tube_radius))
            for name, (specs, steps, dt, diameter) in chains.items():
                result = run(specs, steps, dt, newton, linear)
                if result is None:
                    row[f"{name}_blew_up"] = True
                    continue
                row[f"{name}_from_converged_max_D"] = float(
                    np.linalg.norm(result.tips - converged[name].tips, axis=-1).max() / diameter)
                if name == "wall":
                    row["wall_tip_x_mae_mm"] = float(1e3 * np.abs(result.tips[wall_frames, 0, 0] - wall_video_x).mean())
            rows.append(row)
            print(", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                            for key, value in row.items()), flush=True)
    keys = list(dict.fromkeys(key for row in rows for key in row))
    write_dict_csv(out / "vine_solver_settings.csv",
                   [{key: (f"{row[key]:.5g}" if isinstance(row.get(key), float) else row.get(key, "")) for key in keys}
                    for row in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
