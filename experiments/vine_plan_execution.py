"""Execute the seed 004 planner's best plan for softsnake/assets/vine/planner_navigation.toml on the dynamic vine.

The planner (softsnake/robots/vine/planner.py) returns its best feasible plan, O2: a passive section that
leans on obstacle O2, bent by the contact as a point-loaded cantilever (seed 004 eqs. 3-4), and an
actuated constant-curvature tip section from O2 to the target. Here a vine with the robot of seed
004 (tube diameter 0.064 m, EI = 0.1 N m^2 as a pin stiffness K = EI / link length) grows through
the scene and is steered by its muscles (pressure latency, simulation.py), then the tip pose is
compared with the planned one.

The plan says how the robot should look, not how to grow into that shape: its passive section is
unactuated and ends pressed against O2, which lies 0.4 m to the right of the straight line from
the base. Two executions:

* literal: the plan's section curvatures as steering (passive: none; tip section: the planned
  curvature from the passive section's length on). Nothing pushes the vine onto O2.
* placed: while the vine grows, the muscles also bend the passive section along the planned
  cantilever shape, deflected further by the tube's radius plus the obstacle's (the plan's robot
  is a line), so that it passes on the far side of O2; the tip section grows with the planned
  curvature. At the planned length the passive section's muscles are released: it springs back
  against O2, and the final pose shows whether O2 alone holds the robot in the planned shape (the
  static situation the plan describes).

Steering is set per pin from its arc length along the vine (the vine grows evenly, seed 000).
Writes vine_plan_execution.csv and vine_plan_execution.png into --out (default
experiments/results) and prints the tip errors.

Usage: python experiments/vine_plan_execution.py [--out DIR]
"""

import math
import sys

import numpy as np

from softsnake.cli.common import experiment_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.plotting import new_figure, save, styled
from softsnake.robots.vine.planner import plan_paths
from softsnake.robots.vine.plots import draw_obstacles
from softsnake.robots.vine.scene import VineParams, load_scene
from softsnake.robots.vine.simulation import VineBatch, VineSpec, pin_points, rollout, steering_pressure

LINK_COUNT = 48
"""Links of the vine: about 39 mm each at the planned length, so that the 32 mm contact spheres
overlap and the 2.5 mm obstacles cannot slip between them."""

INITIAL_LENGTH = 0.2
"""Length at the start [m]."""

GROWTH_RATE = 0.1
"""Growth rate [m/s]."""

BODY_MASS = 0.002
"""Mass of one body [kg] (about 0.05 kg/m of robot at the planned length)."""

BODY_INERTIA = 1e-5
"""Rotational inertia of one body [kg m^2]."""

PIN_DAMPING = 0.2
"""Pin damping [N m s/rad]: growth and steering are slow, the plan is static."""

SETTLE_TIME = 4.0
"""Time held at the planned length before measuring [s]."""

DT = 1.0 / 90.0


def vine_for(scene, plan_length):
    """The seed 004 robot as a multi-link vine (VineParams)."""
    link_length = plan_length / LINK_COUNT
    return VineParams(heading=scene.vine.heading, length=INITIAL_LENGTH, tube_radius=scene.vine.tube_radius,
                      link_count=LINK_COUNT, body_half_length=INITIAL_LENGTH / (4 * LINK_COUNT), body_mass=BODY_MASS,
                      body_inertia=BODY_INERTIA, stiffness=scene.plan.flexural_rigidity / link_length,
                      damping=PIN_DAMPING, growth_rate=GROWTH_RATE, pressure=scene.vine.pressure)


def pin_arc_lengths(batch):
    """Arc length of every pin from the base [m], (V, pins)."""
    lengths = np.stack([h.link_lengths(batch.extension[v]) for v, h in enumerate(batch.handles)])
    return np.concatenate([np.zeros((batch.vine_count, 1)), np.cumsum(lengths, axis=1)[:, :-1]], axis=1)


def steering_for(plan, scene, placed):
    """Steering function of (time, batch) for the literal (placed=False) or placed execution."""
    passive, tip = plan.sections[0], plan.sections[-1]
    contact_abscissa = passive.interaction.contact_abscissa
    clearance = scene.vine.tube_radius + scene.obstacles[passive.obstacle].radius
    deflection = passive.interaction.deflection
    placed_deflection = deflection + math.copysign(clearance, deflection)
    force = 3.0 * scene.plan.flexural_rigidity * placed_deflection / contact_abscissa**3
    release_time = (plan.total_length - INITIAL_LENGTH) / GROWTH_RATE

    def steering(time, batch):
        s = pin_arc_lengths(batch)
        curvature = np.where(s > passive.length, tip.curvature, 0.0)
        if placed and time < release_time - 0.5 * DT:
            # Cantilever under a tip force at the contact: w'' = f (a - s) / EI for s < a (seed 004 eq. 3).
            bent = force * np.clip(contact_abscissa - s, 0.0, None) / scene.plan.flexural_rigidity
            curvature = np.where(s < passive.length, bent, curvature)
        return steering_pressure(np.clip(curvature, *scene.plan.curvature_range))

    return steering


def execute(scene, plan, placed):
    plan_length = plan.total_length
    batch = VineBatch([VineSpec(vine_for(scene, plan_length), tuple(scene.obstacles))])
    grow_steps = int(round((plan_length - INITIAL_LENGTH) / GROWTH_RATE / DT))
    steering = steering_for(plan, scene, placed)
    grown = rollout(batch, grow_steps, DT, steering=steering, record_every=9)
    batch.set_growth_rate(0.0)
    held = rollout(batch, int(round(SETTLE_TIME / DT)), DT, steering=steering, record_every=9)
    pose = held.poses[-1, 0]
    tip = held.tips[-1, 0]
    return {"name": "placed" if placed else "literal", "poses": np.concatenate([grown.poses, held.poses[1:]])[:, 0],
            "tip": tip, "heading": float(pose[-1, 2]), "length": float(held.lengths[-1, 0]),
            "half_length": batch.half_length[0]}


def main(argv=None):
    out = experiment_output_folder(__doc__, __file__, argv)
    scene = load_scene("planner_navigation")
    result = plan_paths(scene.plan, scene.obstacles, base_heading=scene.vine.heading)
    plan = result.best
    planned_tip = np.array([plan.tip.x, plan.tip.y])
    print(f"best plan {plan.label}: tip ({plan.tip.x:.3f}, {plan.tip.y:.3f}) m, heading {plan.tip.heading:.4f} rad, "
          f"length {plan.total_length:.3f} m")
    runs = [execute(scene, plan, placed) for placed in (False, True)]
    rows = []
    for run in runs:
        error = float(np.linalg.norm(run["tip"] - planned_tip))
        heading_error = float(abs((run["heading"] - plan.tip.heading + math.pi) % (2 * math.pi) - math.pi))
        target_error = float(np.linalg.norm(run["tip"] - np.asarray(scene.plan.target)))
        rows.append({"execution": run["name"], "tip_x_m": run["tip"][0], "tip_y_m": run["tip"][1],
                     "tip_heading_rad": run["heading"], "length_m": run["length"], "tip_error_m": error,
                     "tip_error_tube_diameters": error / (2 * scene.vine.tube_radius),
                     "heading_error_rad": heading_error, "target_distance_m": target_error})
        print(f"{run['name']}: tip ({run['tip'][0]:.3f}, {run['tip'][1]:.3f}) m, heading {run['heading']:.4f} rad, "
              f"length {run['length']:.3f} m; tip error {error:.3f} m ({error / (2 * scene.vine.tube_radius):.2f} tube "
              f"diameters), heading error {heading_error:.4f} rad")
    write_dict_csv(out / "vine_plan_execution.csv",
                   [{k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()} for row in rows])
    plot_executions(out / "vine_plan_execution.png", scene, plan, runs, rows)
    return 0


@styled
def plot_executions(path, scene, plan, runs, rows):
    """One panel per execution: the planned shape, the vine's shapes while growing and its final shape."""
    figure, axes_row = new_figure(6.0 * len(runs), 4.2, 1, len(runs))
    for axes, run, row in zip(axes_row, runs, rows):
        draw_obstacles(axes, scene.obstacles)
        points = plan.points()
        axes.plot(points[:, 0], points[:, 1], "k--", linewidth=1.5, label=f"plan {plan.label}")
        for k in np.linspace(0, len(run["poses"]) - 1, 6).astype(int)[1:-1]:
            shape = pin_points(run["poses"][k], run["half_length"])
            axes.plot(shape[:, 0], shape[:, 1], color="tab:orange", alpha=0.35, linewidth=1.0)
        shape = pin_points(run["poses"][-1], run["half_length"])
        axes.plot(shape[:, 0], shape[:, 1], color="tab:orange", linewidth=2.5, label="dynamic vine (final)")
        axes.plot(*scene.plan.target, "g*", markersize=12, label="target")
        axes.set_aspect("equal")
        axes.set_xlim(-0.1, 2.0)
        axes.set_ylim(-1.0, 0.5)
        axes.set_title(f"{run['name']} execution: tip error {row['tip_error_m']:.3f} m, heading error "
                       f"{row['heading_error_rad']:.3f} rad")
        axes.legend(loc="upper right")
    save(figure, path)


if __name__ == "__main__":
    sys.exit(main())
