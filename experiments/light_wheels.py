"""Light wheels on loaded axles: the snake's 10 g wheels under sudden loads, by budget and iteration.

The snake's wheels weigh 10 g and have 1.6e-6 kg m^2 about a diameter, far below their load times
their radius times h^2 at h = 1/120 s: one Newton iteration can turn a wheel far across its axle.
Three cases, each with the wheels' fastest angular speed [rad/s] and the largest kinetic energy
(translation and rotation of every body and particle) against the start's or a reference:

* ``yaw``: one snake module made 0.5 kg on its two wheels (mu 1), every body started at 0.1 m/s forward
  and 5 rad/s about the vertical (the wheels as if alone, so the first step's hinge impulses jerk
  them), 1 s of one substep of 1/120 s; reference: the same at 1/480 s, balanced, 30 x 200. A passive
  system on flat ground: its kinetic energy can only fall.
* ``step``: the coarse snake at rest, its head link's chamber stepped to 8 psi (the other links at 0),
  0.5 s at one substep of 1/120 s and at the snake's own two substeps of 1/240 s; reference: one
  substep of 1/480 s, balanced, 30 x 200.
* ``push``: one module (the snake's, 0.19 kg) pushed sideways at 1.5, 2, 2.5 and 3 times its grip
  mu (M + 2 m) g for 0.75 s at the engine's default budget (balanced since the fifteenth session) and at 8
  Newton iterations (the default until the fourteenth session; plain): the largest vertical speed of the
  module [m/s] (it should slide flat: 0).

Writes light_wheels.csv/.md into --out (default experiments/results) after every row.

Usage: python experiments/light_wheels.py [--cases yaw,step,push] [--tag TAG] [--out DIR]
"""

import dataclasses
import platform

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.robot import add_module, add_snake, chamber_pressures, module_height
from softsnake.units import psi_to_pa

from convergence import write_outputs

CASES = ("yaw", "step", "push")


def run(model, state, control, solver_options, dt, seconds, wheels, watch=None):
    """Step ``seconds`` [s]; (fastest wheel [rad/s], largest kinetic energy [J], watch's largest)."""
    solver = softsnake.Solver(model, check_finite=False, **solver_options)
    fastest = energy = watched = 0.0
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, dt)
        fastest = max(fastest, float(np.abs(state.body_qd.numpy()[wheels, 3:]).max()))
        energy = max(energy, float(model.kinetic_energy(state).sum()))
        if watch is not None:
            watched = max(watched, watch(state))
    return fastest, energy, watched


def budget(newton, linear, balanced, substeps=1):
    return {"substeps": substeps, "newton_iterations": newton, "linear_iterations": linear,
            "momentum_balance": balanced}


def iteration_name(balanced):
    """The name of a ``momentum_balance`` value in the tables: plain, balanced or bodies (balanced bodies only)."""
    return "bodies" if balanced == "bodies" else "balanced" if balanced else "plain"


def yaw_rows(config):
    heavy = dataclasses.replace(config, cap=dataclasses.replace(config.cap, mass=0.5))
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=1.0)
    _, wheels = add_module(builder, heavy, position=(0.0, 0.0, module_height(heavy)), rotation=(0, 0, 0, 1))
    model = builder.finalize("cpu")
    runs = [("1/120", 1.0 / 120.0, budget(n, lin, b)) for b in (False, True, "bodies") for n, lin in ((8, 40), (30, 200))]
    runs.append(("1/480 (reference)", 1.0 / 480.0, budget(30, 200, True)))
    for label, dt, options in runs:
        state, control = model.state(), model.control()
        qd = state.body_qd.numpy()
        qd[:, 0], qd[:, 5] = 0.1, 5.0
        state.body_qd.assign(qd)
        start = float(model.kinetic_energy(state).sum())
        fastest, energy, _ = run(model, state, control, options, dt, 1.0, list(wheels))
        yield {"case": "yaw", "substep_s": label, "budget": f"{options['newton_iterations']}x{options['linear_iterations']}",
               "iteration": iteration_name(options["momentum_balance"]), "wheel_omega_max_rad_s": fastest,
               "kinetic_energy_max_j": energy, "energy_ratio": energy / start}


def step_rows(config):
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=config.friction)
    snake = add_snake(builder, config, "coarse")
    model = builder.finalize("cpu")
    wheels = list(np.asarray(snake.wheel_bodies).ravel())
    pressure = chamber_pressures(model, snake.link_channels, psi_to_pa(np.array([[8.0, 0.0, 0.0, 0.0]])))
    runs = [("1/120", 1.0 / 120.0, budget(n, lin, b)) for n, lin in ((8, 40), (16, 160)) for b in (False, True, "bodies")]
    runs += [("2 x 1/240 (the snake's)", 1.0 / 120.0, budget(n, lin, b, substeps=2)) for n, lin in ((4, 20), (8, 40))
             for b in (False, True, "bodies")]
    runs.append(("1/480 (reference)", 1.0 / 480.0, budget(30, 200, True)))
    for label, dt, options in runs:
        state, control = model.state(), model.control()
        control.pressure.assign(pressure)
        fastest, energy, _ = run(model, state, control, options, dt, 0.5, wheels)
        yield {"case": "step", "substep_s": label, "budget": f"{options['newton_iterations']}x{options['linear_iterations']}",
               "iteration": iteration_name(options["momentum_balance"]), "wheel_omega_max_rad_s": fastest,
               "kinetic_energy_max_j": energy}


def push_rows(config):
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=config.friction)
    module, wheels = add_module(builder, config, position=(0.0, 0.0, module_height(config)), rotation=(0, 0, 0, 1))
    model = builder.finalize("cpu")
    grip = config.friction * (config.cap.mass + 2.0 * config.wheel.mass) * 9.81
    default = softsnake.SolverSettings()
    for fraction in (1.5, 2.0, 2.5, 3.0):
        for newton in sorted({8, default.newton_iterations}):
            state, control = model.state(), model.control()
            wrench = np.zeros((model.body_count, 6), dtype=np.float32)
            wrench[module, 1] = fraction * grip
            state.body_f.assign(wrench)
            options = {"newton_iterations": newton}
            fastest, energy, rising = run(model, state, control, options, 1.0 / 120.0, 0.75, list(wheels),
                                          watch=lambda s: abs(float(s.body_qd.numpy()[module, 2])))
            yield {"case": "push", "substep_s": f"2 x 1/240, {fraction:g} x grip",
                   "budget": f"{newton}x{default.linear_iterations}",
                   "iteration": "balanced" if default.replace(newton_iterations=newton).uses_momentum_balance else "plain",
                   "wheel_omega_max_rad_s": fastest, "kinetic_energy_max_j": energy, "module_vz_max_m_s": rising}


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
    parser.add_argument("--tag", default="", help="file name tag (light_wheels_TAG.csv/.md)")
    args = parser.parse_args(argv)
    cases = [case.strip() for case in args.cases.split(",") if case.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}: choose from {', '.join(CASES)}")
    out = make_output_folder(args.out)
    stem = "light_wheels" + (f"_{args.tag}" if args.tag else "")
    config = load_snake_config(resolution="coarse")
    header = ["# Light wheels on loaded axles", "",
              f"Written by experiments/light_wheels.py; device: cpu ({platform.machine()}); warp {wp.config.version}. "
              "Blow-up check off. Cases: the script's docstring."]
    rows = []
    makers = {"yaw": yaw_rows, "step": step_rows, "push": push_rows}
    for case in cases:
        for row in makers[case](config):
            rows.append(row)
            write_outputs(out, stem, rows, header)
            print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                           for key, value in row.items()), flush=True)
    print(f"wrote {out / stem}.csv/.md")


if __name__ == "__main__":
    main()
