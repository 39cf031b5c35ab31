"""How the substeps of each scene end at its default budget: at the Newton tolerance, at float32's round-off
floor, or unconverged (``Solver.newton_counts``, ``softsnake/newton_counts.py``).

Scenes, each at the budget its users run:

* ``soft``: the soft cantilever with pressure rows at 20 kPa (tests/engine_scenes.py), engine default;
* ``bodies``: bodies of every shape with friction and a hinge (tests/engine_scenes.py), engine default;
* ``pendulums``: three compliant double pendulums swinging at 0.5, 2 and 5 m/s, one world each, engine default;
* ``stiff_block``: a 1 MPa block resting on rough ground (tests/engine_scenes.py), engine default;
* ``snake``: one coarse snake under the open-loop gait, its 8 x 40 (``SnakeSimulation``);
* ``vine``: the vine of cluttered scene 1, its defaults (``VineBatch``).

Reported per scene: substeps, the shares that reached the stop, ended at the budget within twice their
round-off floor, and ended above it (unconverged), Newton steps per substep, and the root of the merit over
its round-off floor at the end of every step's last substep (median, 90th percentile, largest; since the
twenty-sixth session the substep's end assembly judges the budget's last step, ``SolverSettings.wander_limit``;
the page was measured before, at the point before that step). 60 steps of 1/120 s (the vine: its 450 steps).

Writes newton_counts.csv/.md into --out (default experiments/results), rewritten after every scene.

``--snake-budgets 8x40,8x160,...`` instead runs the snake alone at those budgets (60 frames of 1/120 s, 120
substeps) and adds, per budget, each constraint type's share of the merit r^T D^-1 r at the end of every
10th frame (summed; ``softsnake.residuals``): what the budget leaves unsolved, and where. Files:
newton_counts_snake_budgets.csv/.md.

Usage: python experiments/newton_counts.py [--out DIR] [--snake-budgets NxL,...]
"""

import sys
from pathlib import Path

import numpy as np

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder

from convergence import parse_budgets, write_outputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from engine_scenes import pendulum_worlds, scene_bodies, scene_soft, stiff_block  # noqa: E402

STEPS = 60
DT = 1.0 / 120.0


def engine_scene(make, pressure=0.0):
    """(solver, step function) of an engine scene at the engine's default settings."""
    model = make()
    solver = softsnake.Solver(model)
    state, control = model.state(), model.control()
    if model.pressure_channel_count:
        control.pressure.assign(np.full(model.pressure_channel_count, pressure, dtype=np.float32))
    return solver, lambda: solver.step(state, state, control, DT), STEPS


def vine():
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, specs_from_scene

    scene = load_scene("jitosho_cluttered_1")
    batch = VineBatch(specs_from_scene(scene, vine_count=1, heading_spread=0.0), device="cpu")
    steps = int(round(scene.sim.duration / scene.sim.dt))
    return batch.solver, lambda: batch.step(scene.sim.dt), steps


def measure(name, solver, step, steps):
    ratios = []

    def observed():
        step()
        merit, floor = solver.merit.numpy(), solver.merit_floor.numpy()
        ratios.extend(np.sqrt(merit / np.maximum(floor, 1e-38))[:solver.model.world_count])

    for _ in range(steps):
        observed()
    return row(name, solver, ratios)


def row(name, solver, ratios):
    counts = solver.newton_counts()
    substeps = counts.substeps.sum()
    ends, unconverged = counts.budget_ends.sum(), counts.unconverged_ends.sum()
    ratios = np.asarray(ratios)
    return {"scene": name, "budget": f"{solver.newton_iterations}x{solver.linear_iterations}",
            "balanced": counts.balanced, "substeps": int(substeps),
            "stop_pct": 100.0 * (substeps - ends) / substeps, "floor_pct": 100.0 * (ends - unconverged) / substeps,
            "unconverged_pct": 100.0 * unconverged / substeps,
            "newton_steps_per_substep": counts.newton_steps.sum() / substeps,
            "root_merit_over_floor_median": float(np.median(ratios)),
            "root_merit_over_floor_p90": float(np.percentile(ratios, 90)), "root_merit_over_floor_max": float(ratios.max())}


def snake_row(budget=None):
    """The coarse snake under the gait at its own budget, or at ``budget`` (newton, linear)."""
    from softsnake.robots.snake.simulation import SnakeSimulation

    iterations = {} if budget is None else {"newton_iterations": budget[0], "linear_iterations": budget[1]}
    simulation = SnakeSimulation(1, resolution="coarse", device="cpu", seconds=STEPS * DT, **iterations)
    solver, ratios = simulation.solver, []
    step = solver.step

    def observed(*args):
        step(*args)
        ratios.append(float(np.sqrt(solver.merit.numpy()[0] / max(solver.merit_floor.numpy()[0], 1e-38))))
    solver.step = observed
    if budget is None:
        simulation.run(progress=False)
        return row("snake (gait)", solver, ratios)
    shares = np.zeros(len(constraint_type_names()))
    for frame in range(simulation.frame_count):
        simulation.step(simulation.gait_command((frame + 1) * simulation.dt))
        if frame % 10 == 9:
            shares += merit_by_constraint_type(simulation)
    result = row("snake (gait)", solver, ratios)
    result.update({f"merit_share_{name}": value for name, value in zip(constraint_type_names(), shares / shares.sum())})
    return result


def constraint_type_names():
    from softsnake.constraints import CONSTRAINT_TYPES

    return [ctype.name for ctype in CONSTRAINT_TYPES]


def merit_by_constraint_type(simulation):
    """Each constraint type's part of the merit r^T D^-1 r at the end point of the last step (the residual norms'
    re-assembly, ``Solver.residual_norms``)."""
    from softsnake.constraints import CONSTRAINT_TYPES

    model, solver = simulation.model, simulation.solver
    solver.residual_norms(simulation.state, simulation.control, simulation.dt)
    r = solver.residual.numpy()[:model.row_count].astype(np.float64)
    weighted = r * r * solver.inv_diagonal.numpy()[:model.row_count].astype(np.float64)
    owner = np.zeros(model.row_count, dtype=np.int64)
    planar = model.planar_axis >= 0
    for k, ctype in enumerate(CONSTRAINT_TYPES):
        first = getattr(model, f"{ctype.name}_row").numpy().astype(np.int64)
        for j in range(ctype.rows_per_item(planar)):
            owner[first + j] = k
    return np.bincount(owner, weights=weighted, minlength=len(CONSTRAINT_TYPES))


def snake_budgets(out, budgets):
    rows = []
    for label, newton, linear in budgets:
        rows.append(snake_row((newton, linear)))
        print(rows[-1], flush=True)
        write_outputs(out, "newton_counts_snake_budgets", rows, [
            "# How the snake's substeps end at several budgets (experiments/newton_counts.py --snake-budgets)", "",
            f"One coarse snake under the gait with latency, {STEPS} frames of 1/120 s (2 substeps each); device cpu. "
            "Columns as in newton_counts.md; merit_share_<type>: that constraint type's share of the merit "
            "r^T D^-1 r at the end of every 10th frame (summed over the 6 frames)."])


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--snake-budgets", default=None,
                        help="NEWTONxLINEAR,...: the snake alone at these budgets, with the merit by constraint type")
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    if args.snake_budgets:
        return snake_budgets(out, parse_budgets(args.snake_budgets))
    cases = [lambda: measure("soft", *engine_scene(scene_soft, 2e4)), lambda: measure("bodies", *engine_scene(scene_bodies)),
             lambda: measure("pendulums", *engine_scene(lambda: pendulum_worlds("cpu"))),
             lambda: measure("stiff_block", *engine_scene(lambda: stiff_block("cpu"))), snake_row,
             lambda: measure("vine", *vine())]
    rows = []
    for case in cases:  # the files rewritten after every scene: an interrupted run keeps what it finished
        rows.append(case())
        print(rows[-1], flush=True)
        write_outputs(out, "newton_counts", rows, [
            "# How substeps end at each scene's default budget (experiments/newton_counts.py)", "",
            f"{STEPS} steps of 1/120 s (the vine: its scene's steps); device cpu. stop: reached the Newton tolerance "
            "or the floor stop (newton_floor); floor: ended at the budget within twice the round-off floor's "
            "estimate; unconverged: ended above it. Ratios: root of the merit over its round-off floor's estimate "
            "after each step."])


if __name__ == "__main__":
    main()
