"""The engine's stop at the round-off floor: how far it ends from a step solved far past convergence, and what
it saves (``SolverSettings.newton_floor``, ``multipliers.judge_newton_steps``).

The golden engine scenes (tests/test_golden_states.py: particles with friction warm and cold, bodies of every
shape with friction warm and cold, the soft cantilever under a pressure ramp, planar and 3-D chains under joint
targets; each with its own settings), three compliant double pendulums and a stiff block on rough ground
(tests/engine_scenes.py), each run with the engine's default stop (newton_floor 2: within twice the round-off
floor's estimate, once the merit has stopped falling), with the stop at the first iteration within it
(newton_floor_stall 0, the vines'), and with the tolerance alone (newton_floor 0, the engine's default until the
twenty-first session), against the far-converged reference of the start and budget studies
(``convergence.FAR_PAST_CONVERGED``: balanced, cold, 64 x 400, tolerances 1e-7 / 1e-6, no floor stop).

Reported per scene and stop: the largest distance of the final positions (particles, body centres) from the
reference [mm], Newton steps per substep (``Solver.newton_counts``), and the wall time of the run [s] (one
run, this machine).

Writes floor_stop.csv/.md into --out (default experiments/results).

Usage: python experiments/floor_stop.py [--out DIR]
"""

import platform
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder

from convergence import FAR_PAST_CONVERGED, write_outputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from engine_scenes import pendulum_worlds, stiff_block  # noqa: E402
from test_golden_states import ENGINE_CASES  # noqa: E402

STOPS = {"default (floor 2, stalled)": {}, "floor 2 at once (stall 0)": {"newton_floor_stall": 0.0},
         "tolerance alone (floor 0)": {"newton_floor": 0.0}}


CASES = {**{name: case for name, case in ENGINE_CASES.items() if name != "batch"},
         "pendulums": (lambda: pendulum_worlds("cpu"), 60, {}, None), "stiff_block": (lambda: stiff_block("cpu"), 60, {}, None)}


def run(make, steps, options, control_fn):
    """(final positions (n, 3) float64 [m], Newton steps per substep, wall time [s])."""
    model = make()
    solver = softsnake.Solver(model, **options)
    state, control = model.state(), model.control()
    start = time.perf_counter()
    for k in range(steps):
        if control_fn is not None:
            control_fn(control, k)
        solver.step(state, state, control, 1.0 / 120.0)
    wall = time.perf_counter() - start
    positions = np.vstack([state.particle_q.numpy().astype(np.float64).reshape(-1, 3),
                           state.body_q.numpy().astype(np.float64).reshape(-1, 7)[:, :3]])
    counts = solver.newton_counts()
    return positions, counts.newton_steps.sum() / max(counts.substeps.sum(), 1), wall


def main(argv=None):
    args = experiment_parser(__doc__, __file__).parse_args(argv)
    out = make_output_folder(args.out)
    rows = []
    for name, (make, steps, options, control_fn) in CASES.items():
        reference, _, _ = run(make, steps, {**options, **FAR_PAST_CONVERGED}, control_fn)
        for stop, stop_options in STOPS.items():
            positions, newton_steps, wall = run(make, steps, {**options, **stop_options}, control_fn)
            rows.append({"scene": name, "stop": stop, "from_reference_mm": 1e3 * float(np.abs(positions - reference).max()),
                         "newton_steps_per_substep": float(newton_steps), "wall_s": wall})
            print(rows[-1], flush=True)
        write_outputs(out, "floor_stop", rows, [
            "# The stop at the round-off floor against the tolerance alone (experiments/floor_stop.py)", "",
            f"Device: cpu ({platform.machine()}), warp {wp.config.version}. Reference: balanced, cold, 64 x 400, "
            "tolerances 1e-7 / 1e-6, no floor stop. Steps of 1/120 s; each scene's own settings (golden states)."])


if __name__ == "__main__":
    main()
