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

Usage: python experiments/newton_counts.py [--out DIR]
"""

import sys
from pathlib import Path

import numpy as np

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder

from convergence import write_outputs

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
            "balanced": solver.balances_momentum, "substeps": int(substeps),
            "stop_pct": 100.0 * (substeps - ends) / substeps, "floor_pct": 100.0 * (ends - unconverged) / substeps,
            "unconverged_pct": 100.0 * unconverged / substeps,
            "newton_steps_per_substep": counts.newton_steps.sum() / substeps,
            "root_merit_over_floor_median": float(np.median(ratios)),
            "root_merit_over_floor_p90": float(np.percentile(ratios, 90)), "root_merit_over_floor_max": float(ratios.max())}


def snake_row():
    from softsnake.robots.snake.simulation import SnakeSimulation

    simulation = SnakeSimulation(1, resolution="coarse", device="cpu", seconds=STEPS * DT)
    solver, ratios = simulation.solver, []
    step = solver.step

    def observed(*args):
        step(*args)
        ratios.append(float(np.sqrt(solver.merit.numpy()[0] / max(solver.merit_floor.numpy()[0], 1e-38))))
    solver.step = observed
    simulation.run(progress=False)
    return row("snake (gait)", solver, ratios)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
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
