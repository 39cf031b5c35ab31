"""The wall scene (seed 000 Fig. 7) refitted with gradients through the engine, against the grid + Nelder-Mead fit.

Three fits of the tip x at the 8 video frames, in one run on this machine:

1. gradient, (K, C): L-BFGS-B (SciPy) in log K and log C from the scene's values, each evaluation one
   rollout with its gradient (``robots.vine.fitting.fit_wall``, the solver run to convergence);
2. gradient, (K, C, body inertia): the same with the bodies' rotational inertia free as well;
3. grid + Nelder-Mead (K, C): ``experiments/vine_reference.py``'s fit (165 rollouts in one batch, then
   Nelder-Mead), at the vine's default solver budget as there; its (K, C) are then also evaluated
   with the converged budget of 1 and 2, so that all errors compare alike.

Prints a table (device, wall times) and writes vine_wall_gradient_fit.csv into --out (default
experiments/results).

Usage: python experiments/vine_wall_gradient_fit.py [--out DIR]
"""

import dataclasses
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.robots.vine.fitting import fit_wall, wall_tip_error_and_gradient
from softsnake.robots.vine.reference import load_wall_fit
from softsnake.robots.vine.scene import load_scene
from vine_reference import wall_fit


def main(argv=None):
    out = experiment_output_folder(__doc__, __file__, argv)
    device = wp.get_device("cpu")
    print(f"device: {device} ({device.name})")
    scene, reference = load_scene("jitosho_wall"), load_wall_fit()
    video_x = reference.video_points[:, -1, 0]

    def converged_mae_mm(vine):
        _, _, tips = wall_tip_error_and_gradient(scene, reference, vine, ())
        return 1e3 * float(np.mean(np.abs(tips - video_x)))

    rows = [{"fit": "none (scene values)", "stiffness": scene.vine.stiffness, "damping": scene.vine.damping,
             "body_inertia": scene.vine.body_inertia, "tip_x_mae_mm": converged_mae_mm(scene.vine),
             "tip_x_mae_default_budget_mm": np.nan, "rollouts": 1, "seconds": np.nan}]
    for names in (("stiffness", "damping"), ("stiffness", "damping", "body_inertia")):
        fit = fit_wall(scene, reference, names)
        rows.append({"fit": f"gradient, L-BFGS-B ({', '.join(names)})", "stiffness": fit["vine"].stiffness,
                     "damping": fit["vine"].damping, "body_inertia": fit["vine"].body_inertia,
                     "tip_x_mae_mm": fit["mae_mm"], "tip_x_mae_default_budget_mm": np.nan,
                     "rollouts": fit["evaluations"], "seconds": fit["seconds"]})
    start = time.perf_counter()
    grid = wall_fit()
    seconds = time.perf_counter() - start
    fitted = dataclasses.replace(scene.vine, stiffness=float(grid["after"][0]), damping=float(grid["after"][1]))
    rows.append({"fit": "grid + Nelder-Mead (stiffness, damping)", "stiffness": fitted.stiffness,
                 "damping": fitted.damping, "body_inertia": fitted.body_inertia,
                 "tip_x_mae_mm": converged_mae_mm(fitted), "tip_x_mae_default_budget_mm": grid["mae_after_mm"],
                 "rollouts": len(grid["grid"]) + grid["evaluations"], "seconds": seconds})
    write_dict_csv(out / "vine_wall_gradient_fit.csv", rows)
    print("| fit | K [N m/rad] | C [N m s/rad] | inertia [kg m^2] | tip x MAE, converged [mm] | tip x MAE, default budget [mm] "
          "| rollouts | wall time [s] |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['fit']} | {row['stiffness']:.3g} | {row['damping']:.3g} | {row['body_inertia']:.3g} | "
              f"{row['tip_x_mae_mm']:.3f} | {row['tip_x_mae_default_budget_mm']:.3f} | {row['rollouts']} | "
              f"{row['seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
