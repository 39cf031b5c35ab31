"""Does the engine's proximal contact regularisation slow its convergence outside the video fits? The snake and the
vines at 1e-2 (the engine's default), 1e-3 (the video fits') and 1e-4.

``SolverSettings.contact_regularization`` adds r diag(J M^-1 J^T) to each contact row's diagonal in the Newton
matrix only (not in the residual), so it changes the path of the iteration and not its converged answer. The video
fits' vines of heavy rotations pressed on walls stalled under it (video_fit_convergence.md: 319 of 1 536 substeps
unconverged at 200 x 200 with r 1e-2, 4 with 1e-3), and the fits moved to 1e-3; the engine's default stayed 1e-2,
untried elsewhere. Here, per r:

- vines: seed 000's cluttered scenes 1 and 2 (against its rollouts, tube diameters) and the wall scene, with the
  vines' settings at the engine's default budget (16 x 100, balanced): tip error, unconverged substeps, Newton
  steps per substep, wall time;
- the snake: one coarse snake under the gait for ``--seconds`` at its budget (8 x 40, its own iteration) and at the converged
  reference (16 x 160, balanced): forward travel, unconverged substeps, Newton steps per substep, wall time. The
  converged travel must not depend on r; the budget's may.

Writes contact_regularization.csv and contact_regularization.md into --out (default experiments/results).

Usage: python experiments/contact_regularization.py [--seconds 2] [--out DIR]
"""

import time

import numpy as np

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.errors import SimulationError
from softsnake.output_files import replaced_when_complete, write_dict_csv

REGULARIZATIONS = (1e-2, 1e-3, 1e-4)
SNAKE_BUDGETS = ((8, 40, None), (16, 160, True))
"""(Newton, linear, balanced): the snake's budget with its own iteration (None: ``SNAKE_START``'s, the bodies balanced
since the twenty-seventh session; the plain iteration before, when contact_regularization.md was measured) and its
converged reference."""


def counted(counts, wall):
    """The columns every run reports from its ``NewtonCounts`` and wall time."""
    substeps = int(counts.substeps.sum())
    return {"substeps": substeps, "unconverged": int(counts.unconverged_ends.sum()),
            "newton_per_substep": round(float(counts.newton_steps.sum()) / max(substeps, 1), 2),
            "wander_returns": int(counts.wander_returns.sum()), "wall_s": round(wall, 2)}


def vine_row(scene_name, regularization):
    from softsnake.robots.vine.comparison import compare_with_reference
    from softsnake.robots.vine.reference import load_jitosho_rollout
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, rollout, specs_from_scene

    scene = load_scene(scene_name)
    batch = VineBatch(specs_from_scene(scene), solver_options={"contact_regularization": regularization})
    reference = None
    if scene_name.startswith("jitosho_cluttered_"):
        times, reference, _ = load_jitosho_rollout(int(scene_name[-1]))
        steps = len(times) - 1
    else:
        steps = int(round(scene.sim.duration / scene.sim.dt))
    row = {"case": f"vine {scene_name}", "regularization": regularization}
    clock = time.perf_counter()
    try:
        result = rollout(batch, steps, scene.sim.dt)
    except SimulationError as exc:
        return {**row, "result": f"blew up: {exc}"}
    row.update(counted(batch.newton_counts(), time.perf_counter() - clock))
    if reference is not None:
        error, same_side = compare_with_reference(scene, result.poses[:, 0], result.tips[:, 0], reference)
        row["result"] = (f"tip error median {np.median(error):.4f} D, max {error.max():.3f} D, "
                         f"same side {bool(same_side.all())}")
    else:
        row["result"] = f"tip at ({result.tips[-1, 0, 0]:.5f}, {result.tips[-1, 0, 1]:.5f}) m"
    return row


def snake_row(seconds, newton, linear, balanced, regularization):
    from softsnake.robots.snake.simulation import SnakeSimulation

    simulation = SnakeSimulation(1, seconds=seconds, newton_iterations=newton, linear_iterations=linear)
    if balanced is not None:
        simulation.solver.momentum_balance = balanced
    simulation.solver.contact_regularization = regularization
    row = {"case": f"snake {seconds:g} s, {newton} x {linear}{', balanced' * (balanced is True)}",
           "regularization": regularization}
    clock = time.perf_counter()
    try:
        trajectories = simulation.run(progress=False)
    except SimulationError as exc:
        return {**row, "result": f"blew up: {exc}"}
    row.update(counted(simulation.newton_counts(), time.perf_counter() - clock))
    row["result"] = f"forward travel {1e3 * trajectories.travel()[0][0]:.3f} mm"
    return row


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated time of each snake run [s]")
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    clock = time.perf_counter()
    rows = []
    for regularization in REGULARIZATIONS:
        for scene in ("jitosho_cluttered_1", "jitosho_cluttered_2", "jitosho_wall"):
            rows.append(vine_row(scene, regularization))
            print(rows[-1], flush=True)
        for newton, linear, balanced in SNAKE_BUDGETS:
            rows.append(snake_row(args.seconds, newton, linear, balanced, regularization))
            print(rows[-1], flush=True)
    columns = ("case", "regularization", "result", "substeps", "unconverged", "newton_per_substep", "wander_returns",
               "wall_s")
    rows = [{key: row.get(key, "") for key in columns} for row in rows]
    write_dict_csv(out / "contact_regularization.csv", rows)
    lines = ["# The proximal contact regularisation outside the video fits", "",
             f"Reproduce with `python experiments/contact_regularization.py --seconds {args.seconds:g}` "
             f"({(time.perf_counter() - clock) / 60:.0f} min on this 2-core CPU, device cpu). What and why: the "
             "script's docstring.", "",
             "| case | r | result | unconverged substeps | Newton steps per substep | wall [s] |", "|---|---|---|---|---|---|"]
    for case in dict.fromkeys(row["case"] for row in rows):
        for row in (r for r in rows if r["case"] == case):
            unconverged = f"{row['unconverged']} of {row['substeps']}" if row["substeps"] != "" else ""
            lines.append(f"| {case} | {row['regularization']:g} | {row['result']} | {unconverged} | "
                         f"{row['newton_per_substep']} | {row['wall_s']} |")
    with replaced_when_complete(out / "contact_regularization.md") as temporary:
        temporary.write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'contact_regularization.md'}")


if __name__ == "__main__":
    main()
