"""The vine model against the reference data of shared/reference/vine (seed 000).

Cluttered scenes (rollout_1 / rollout_2 of the original simulator, with its settings): our rollout
over the reference at a few instants, the tip error against time (median and maximum in tube
diameters), the final length against the reference (within 1 %), and on which side of each
obstacle the vine lies at every step (the signed angle the backbone sweeps around the obstacle's
centre: two shapes pass an obstacle on the same side when their angles differ by less than pi).
The same metrics with two substeps per step show how much the solver settings matter.

Wall scene (real robot growing into a wall, seed 000 Fig. 7): starting from the first state and
velocities of the original fit's initial guess, the tip x error against the 8 video frames (mean
absolute error, seed 000 reports 1.1 mm for its fitted model), before fitting (the scene's
stiffness 0.05 N m/rad, damping 1e-5 N m s/rad) and after fitting stiffness and damping: a batch
of rollouts over a logarithmic grid (one world per parameter pair, one run), then
scipy.optimize.minimize (Nelder-Mead in log parameters, bounded) from the grid's best.

Writes into --out (default experiments/results): vine_reference_metrics.csv,
vine_reference_shapes.png, vine_reference_errors.png, vine_wall_fit.csv, vine_wall_fit.png.

Usage: python experiments/vine_reference.py [--out DIR]
"""

import sys
import time
from dataclasses import replace

import numpy as np
import warp as wp
from scipy.optimize import minimize

from softsnake.cli.common import experiment_output_folder
from softsnake.output_files import write_csv, write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.vine.comparison import centre_backbone, compare_with_reference
from softsnake.robots.vine.plots import draw_obstacles
from softsnake.robots.vine.reference import load_jitosho_rollout, load_wall_fit, rollout_length
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, VineSpec, rollout, specs_from_scene

SNAPSHOT_TIMES = (0.5, 1.5, 2.5, 3.0, 3.5, 4.0, 4.5, 4.99)
"""Instants of the shape comparison [s]."""

FIT_GRID_STIFFNESS = np.logspace(-6, 1, 15)
"""Stiffness values of the wall fit's batch grid [N m/rad]."""

FIT_GRID_DAMPING = np.logspace(-7, -2, 11)
"""Damping values of the wall fit's batch grid [N m s/rad]."""

FIT_BOUNDS = ((np.log(1e-7), np.log(100.0)), (np.log(1e-8), np.log(1e-1)))
"""Bounds of log stiffness and log damping in the refinement."""


def cluttered(number, substeps):
    """Rollout of cluttered scene ``number`` and its metrics against the reference."""
    scene = load_scene(f"jitosho_cluttered_{number}")
    times, q_ref, _ = load_jitosho_rollout(number)
    steps = len(times) - 1
    start = time.perf_counter()
    batch = VineBatch(specs_from_scene(scene), solver_options={"substeps": substeps})
    result = rollout(batch, steps, scene.sim.dt)
    wall = time.perf_counter() - start
    poses = result.poses[:, 0]
    error, same_side = compare_with_reference(scene, poses, result.tips[:, 0], q_ref)
    length, length_ref = result.lengths[-1, 0], rollout_length(q_ref[-1])
    return {
        "scene": scene, "times": times, "poses": poses, "reference": q_ref, "error": error,
        "metrics": {
            "scene": scene.name, "substeps": substeps, "steps": steps,
            "tip_error_median_diameters": float(np.median(error)), "tip_error_max_diameters": float(error.max()),
            "tip_error_max_time_s": float(times[np.argmax(error)]),
            "tip_error_final_diameters": float(error[-1]),
            "length_m": float(length), "length_reference_m": float(length_ref),
            "length_difference_percent": float(100.0 * (length / length_ref - 1.0)),
            "same_side_every_step": bool(same_side.all()),
            "steps_on_another_side": int((~same_side.all(axis=1)).sum()),
            "wall_time_per_step_ms": 1e3 * wall / steps,
        },
    }


@styled
def plot_shapes(runs, path):
    figure, axes_grid = new_figure(2.6 * len(SNAPSHOT_TIMES), 2.9 * len(runs), len(runs), len(SNAPSHOT_TIMES),
                                   squeeze=False)
    for row, run in zip(axes_grid, runs):
        for axes, instant in zip(row, SNAPSHOT_TIMES):
            k = int(round(instant / run["scene"].sim.dt))
            draw_obstacles(axes, run["scene"].obstacles)
            half_length = run["scene"].vine.body_half_length
            reference = centre_backbone(run["reference"][k], half_length)
            ours = centre_backbone(run["poses"][k], half_length)
            axes.plot(reference[:, 0], reference[:, 1], color="black", linewidth=2.5, label="reference (seed 000)")
            axes.plot(ours[:, 0], ours[:, 1], color="tab:orange", linewidth=1.5, label="softsnake")
            axes.set_xlim(-0.1, 1.25)
            axes.set_ylim(-1.2, 0.3)
            axes.set_aspect("equal")
            axes.set_title(f"{run['scene'].name.replace('jitosho_', '')}, t = {run['times'][k]:.2f} s")
    axes_grid[0, 0].legend(loc="lower left")
    save(figure, path, dpi=80)


@styled
def plot_errors(runs, path):
    figure, axes = new_figure(7, 3.6)
    for run in runs:
        metrics = run["metrics"]
        axes.plot(run["times"], run["error"], label=f"{metrics['scene']}, {metrics['substeps']} substep(s)")
    axes.set_xlabel("time [s]")
    axes.set_ylabel("tip error [tube diameters]")
    axes.set_yscale("log")
    axes.legend()
    save(figure, path)


def wall_tip_x(scene, reference, stiffness_damping):
    """Tip x [m] at the video frames, (8, n), for n (stiffness, damping) pairs in one batch."""
    poses, velocities = reference.initial_state()
    specs = [VineSpec(replace(scene.vine, stiffness=float(k), damping=float(c)), scene.obstacles, initial_poses=poses,
                      initial_velocities=velocities) for k, c in stiffness_damping]
    frames = reference.frame_steps(scene.sim.dt)
    result = rollout(VineBatch(specs), int(frames[-1]), scene.sim.dt)
    return result.tips[frames, :, 0]


def wall_fit():
    scene = load_scene("jitosho_wall")
    reference = load_wall_fit()
    video_x = reference.video_points[:, -1, 0]

    def mae(tip_x):
        return np.abs(tip_x - video_x[:, None]).mean(axis=0)

    before = (scene.vine.stiffness, scene.vine.damping)
    grid = [(k, c) for k in FIT_GRID_STIFFNESS for c in FIT_GRID_DAMPING]
    start = time.perf_counter()
    grid_mae = mae(wall_tip_x(scene, reference, grid))
    grid_seconds = time.perf_counter() - start
    best = grid[int(np.argmin(grid_mae))]
    refined = minimize(lambda p: float(mae(wall_tip_x(scene, reference, [tuple(np.exp(p))]))[0]), np.log(best),
                       method="Nelder-Mead", bounds=FIT_BOUNDS, options={"xatol": 1e-3, "fatol": 1e-7, "maxfev": 80})
    after = tuple(np.exp(refined.x))
    tips = wall_tip_x(scene, reference, [before, after])
    return {
        "video_x": video_x, "frame_times": reference.frame_times, "tips": tips, "before": before, "after": after,
        "mae_before_mm": 1e3 * float(mae(tips)[0]), "mae_after_mm": 1e3 * float(mae(tips)[1]),
        "grid": np.asarray(grid), "grid_mae_mm": 1e3 * grid_mae, "grid_seconds": grid_seconds,
        "evaluations": refined.nfev, "published_mae_mm": 1e3 * reference.published_tip_x_mae,
    }


@styled
def plot_wall(fit, path):
    figure, (tips_axes, grid_axes) = new_figure(11, 3.8, 1, 2)
    t = fit["frame_times"]
    tips_axes.plot(t, 1e3 * fit["video_x"], "ko-", label="video (seed 000 Fig. 7)")
    tips_axes.plot(t, 1e3 * fit["tips"][:, 0], "s--", color="tab:red",
                   label=f"before fit: K {fit['before'][0]:.3g}, C {fit['before'][1]:.3g}; MAE {fit['mae_before_mm']:.2f} mm")
    tips_axes.plot(t, 1e3 * fit["tips"][:, 1], "^-", color="tab:blue",
                   label=f"after fit: K {fit['after'][0]:.3g}, C {fit['after'][1]:.3g}; MAE {fit['mae_after_mm']:.2f} mm")
    tips_axes.set_xlabel("time [s]")
    tips_axes.set_ylabel("tip x [mm]")
    tips_axes.legend()
    shape = (len(FIT_GRID_STIFFNESS), len(FIT_GRID_DAMPING))
    image = grid_axes.pcolormesh(FIT_GRID_DAMPING, FIT_GRID_STIFFNESS, fit["grid_mae_mm"].reshape(shape), shading="nearest",
                                 cmap="viridis")
    grid_axes.grid(False)
    grid_axes.set_xscale("log")
    grid_axes.set_yscale("log")
    grid_axes.set_xlabel("damping C [N m s/rad]")
    grid_axes.set_ylabel("stiffness K [N m/rad]")
    grid_axes.plot(*fit["before"][::-1], "rs")
    grid_axes.plot(*fit["after"][::-1], "b^")
    figure.colorbar(image, ax=grid_axes, label="tip x MAE [mm]")
    save(figure, path)


def main(argv=None):
    out = experiment_output_folder(__doc__, __file__, argv)
    print(f"device: {wp.get_device('cpu')} ({wp.get_device('cpu').name})")

    runs = [cluttered(number, substeps) for substeps in (1, 2) for number in (1, 2)]
    write_dict_csv(out / "vine_reference_metrics.csv", [run["metrics"] for run in runs])
    for run in runs:
        print(", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                        for key, value in run["metrics"].items()))
    plot_shapes([run for run in runs if run["metrics"]["substeps"] == 1], out / "vine_reference_shapes.png")
    plot_errors(runs, out / "vine_reference_errors.png")

    fit = wall_fit()
    write_csv(out / "vine_wall_fit.csv", ["time_s", "video_tip_x_m", "before_tip_x_m", "after_tip_x_m"],
              [[f"{value:.6f}" for value in row]
               for row in zip(fit["frame_times"], fit["video_x"], fit["tips"][:, 0], fit["tips"][:, 1])])
    plot_wall(fit, out / "vine_wall_fit.png")
    print(f"wall: before K {fit['before'][0]:.4g} N m/rad, C {fit['before'][1]:.4g} N m s/rad: tip x MAE "
          f"{fit['mae_before_mm']:.3f} mm; after K {fit['after'][0]:.4g}, C {fit['after'][1]:.4g}: "
          f"{fit['mae_after_mm']:.3f} mm (seed 000: {fit['published_mae_mm']:.1f} mm); grid of {len(fit['grid'])} "
          f"rollouts in one batch: {fit['grid_seconds']:.2f} s; refinement: {fit['evaluations']} rollouts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
