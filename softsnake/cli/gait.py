"""``softsnake gait``: simulate snakes under the open-loop gait; write USD, CSV, PNG and an animation.

By default three coarse snakes run for 10 s at gait offsets -0.3, 0 and +0.3: the offset makes a
snake turn (negative: right, positive: left), so the batch shows what running many worlds at once
is for. Every gait option takes one value for all snakes or a comma-separated list of one value per
snake; ``--sweep NAME=LOW:HIGH`` spreads the snakes' values of one option evenly from LOW to HIGH.

Files in DIR: ``gait.usdc`` (or ``.usda``; the scene, for a USD viewer), ``trajectories.csv``
(per frame and snake: centre of mass, heading, and per link curvature and commanded and actual
chamber pressures; see ``softsnake.robots.snake.trajectories``), ``trajectories.png`` (top view of
every snake's centre-of-mass path) and ``gait.gif`` (the snakes from above and in perspective, and
a close-up that follows the middle pictured snake: its links' bending, modules and wheels). The
USD scene and the GIF show the first ``--pictured-snakes`` snakes (default 16): pictures of a thousand
snakes take gigabytes and most of a GPU run's time (experiments/results/gpu.md, section 4).
A run that is interrupted (Ctrl-C or SIGTERM) or in which a snake blows up keeps what it computed as
``gait.partial.usdc``, ``trajectories.partial.csv``, ``trajectories.partial.png`` and
``gait.partial.gif``, and names them, and prints how the substeps so far ended. It first finishes the frame in
progress (worker processes, the frames they were sent ahead; a second interrupt stops at once) and also keeps
``gait.resume.npz``: the same command with ``--resume`` goes on from there, with or without ``--workers``, and
writes the whole run's files, bit for bit those of a run never stopped (``softsnake.cli.gait_resume``).

On the CPU, ``--workers W`` steps the snakes in W processes at once (0, the default there: one per CPU core, at
most one per snake; 1: this process alone): the same outputs bit for bit (softsnake.robots.snake.workers), in about
1/W of the time for a batch of at least W snakes.

Printed: per snake, the travel of its centre of mass (forward along the initial heading, lateral to
its left), the straight-line distance in metres and body lengths, and the change of heading
(positive: turned left), averaged over the last gait period; then whether the solver's substeps
converged within the snake's budget or ended at it (``softsnake.newton_counts``).
"""

import argparse
import math
import sys
import time as timer

import numpy as np

from softsnake.animation import FRAMES_MAX
from softsnake.errors import ConfigError, SimulationError, UsageError
from softsnake.robots.actuation import SUPPLY_PRESSURE_DEFAULT
from softsnake.robots.snake.gait import GaitParams
from softsnake.robots.snake.plots import plot_trajectories
from softsnake.robots.snake.simulation import SNAKE_BUDGET, SnakeSimulation, estimate_run
from softsnake.robots.snake.trajectories import CSV_NAME, write_trajectories_csv
from softsnake.solver_settings import SolverSettings
from softsnake.units import pa_to_psi, psi_to_pa

from . import gait_resume
from .common import (add_budget_option, add_snake_config_option, check_at_least, check_device, check_positive, check_run_size, duration_text,
                     make_output_folder, output_folder, parse_budget, snake_config)
from .workers import add_workers_option, check_workers, parallel_speedup, worker_processes

SNAKES_DEFAULT = 3
SECONDS_DEFAULT = 10.0
OFFSET_SPREAD_DEFAULT = (-0.3, 0.3)
"""Gait offsets of a batch when no offset is given: spread evenly over this range (0 for one snake)."""
GAIT_OPTIONS = {
    # option name: (GaitParams field, conversion to SI, default as given on the command line)
    "frequency": ("frequency", np.asarray, "2"),
    "phase-shift": ("phase_shift", np.asarray, repr(math.pi / 2.0)),
    "offset": ("offset", np.asarray, "0"),
    "amplitude-psi": ("amplitude", psi_to_pa, "8"),
}
PNG_NAME = "trajectories.png"
USD_STEM = "gait"
GIF_NAME = "gait.gif"
PARTIAL = {"csv": "trajectories.partial.csv", "png": "trajectories.partial.png", "gif": "gait.partial.gif"}


PICTURED_SNAKES_DEFAULT = 16
"""Snakes shown in the USD scene and the GIF by default (``--pictured-snakes``)."""


def add_arguments(parser):
    parser.add_argument("--snakes", type=int, default=SNAKES_DEFAULT, help="number of snakes (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=SECONDS_DEFAULT,
                        help="simulated time [s] (default: %(default)g)")
    parser.add_argument("--resolution", default="coarse", choices=("paper", "coarse"),
                        help="link mesh resolution (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default: %(default)s)")
    add_workers_option(parser, "snake")
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    add_snake_config_option(parser)
    parser.add_argument("--frequency", default=None, help="oscillation frequency f [Hz] (default: 2)")
    parser.add_argument("--phase-shift", default=None, help="phase shift alpha between links [rad] (default: pi/2)")
    parser.add_argument("--offset", default=None,
                        help="offset phi in [-1, 1], turns the snake: < 0 right, > 0 left (default: spread evenly "
                             "over -0.3..0.3 across the snakes, 0 for one snake)")
    parser.add_argument("--amplitude-psi", default=None, help="amplitude A [psi], at most 8 (default: 8)")
    parser.add_argument("--sweep", default=None, metavar="NAME=LOW:HIGH",
                        help="spread the snakes' values of one gait option evenly, e.g. offset=-0.5:0.5")
    parser.add_argument("--latency", action=argparse.BooleanOptionalAction, default=True,
                        help="pass commands through the valve latency model (default: on)")
    parser.add_argument("--supply-psi", type=float, default=pa_to_psi(SUPPLY_PRESSURE_DEFAULT),
                        help="supply pressure [psi] (default: %(default)g, an assumption)")
    parser.add_argument("--usd", action=argparse.BooleanOptionalAction, default=True,
                        help="write DIR/gait.usdc (default: on)")
    parser.add_argument("--usd-format", default="usdc", choices=("usdc", "usda"),
                        help="USD file format (default: %(default)s)")
    parser.add_argument("--video", action=argparse.BooleanOptionalAction, default=True,
                        help="write DIR/gait.gif, the snakes from above and in perspective and a close-up that "
                             "follows the middle pictured snake (default: on)")
    add_budget_option(parser, "per substep", "the snake's 8x40, whose travels lie about 1 %% from converged ones; "
                                             "16x160 is the converged reference, several times slower")
    parser.add_argument("--substeps", type=int, default=None, metavar="S",
                        help="implicit-Euler substeps per 1/120 s frame (default: seed 001's 2); the travel depends "
                             "on them too: experiments/results/snake.md, \"The gait against the time step\"")
    parser.add_argument("--compensated-positions", action=argparse.BooleanOptionalAction, default=None,
                        help="keep positions as float32 pairs, where float32 positions round the snake's velocities "
                             "(default: from 5 substeps on, substeps of 1/600 s and shorter: SolverSettings.compensated_positions's 'auto')")
    parser.add_argument("--resume", action="store_true",
                        help="go on with the interrupted run in --out DIR (its gait.resume.npz) and write the whole "
                             "run's files; give the interrupted run's options")
    parser.add_argument("--pictured-snakes", type=int, default=PICTURED_SNAKES_DEFAULT,
                        help="the first N snakes go into the USD scene and the GIF; all into the CSV and the "
                             "summary (0: all; default: %(default)s)")


def _parse_values(option, text, snakes):
    """One float per snake from "v" or "v1,v2,...,vN" (in the option's own unit)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--{option} must be a number or a comma-separated list of numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise UsageError(f"--{option} values must be finite, got {text!r}")
    if len(values) not in (1, snakes):
        raise UsageError(f"--{option} has {len(values)} values; give 1 or --snakes ({snakes})")
    return np.asarray(values if len(values) > 1 else values * snakes)


def _parse_sweep(text, snakes):
    """(option name, values) from "NAME=LOW:HIGH"."""
    name, _, bounds = text.partition("=")
    low, _, high = bounds.partition(":")
    if name not in GAIT_OPTIONS:
        raise UsageError(f"--sweep {text!r}: NAME must be one of {', '.join(GAIT_OPTIONS)}")
    try:
        low, high = float(low), float(high)
    except ValueError:
        raise UsageError(f"--sweep {text!r}: expected NAME=LOW:HIGH with numbers LOW and HIGH") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise UsageError(f"--sweep {text!r}: LOW and HIGH must be finite")
    return name, np.linspace(low, high, snakes)


def gait_from_args(args):
    """``GaitParams`` for ``args.snakes`` snakes from the gait options; UsageError on bad input."""
    check_at_least("--snakes", args.snakes, 1)
    given = {name: getattr(args, name.replace("-", "_")) for name in GAIT_OPTIONS}
    values = {}
    if args.sweep is not None:
        name, swept = _parse_sweep(args.sweep, args.snakes)
        if given[name] is not None:
            raise UsageError(f"--{name} is swept by --sweep; do not also give it")
        values[name] = swept
    elif given["offset"] is None:
        values["offset"] = np.linspace(*OFFSET_SPREAD_DEFAULT, args.snakes) if args.snakes > 1 else np.zeros(1)
    for name, (_, _, default) in GAIT_OPTIONS.items():
        if name not in values:
            values[name] = _parse_values(name, given[name] if given[name] is not None else default, args.snakes)
    fields = {GAIT_OPTIONS[name][0]: GAIT_OPTIONS[name][1](v) for name, v in values.items()}
    try:
        return GaitParams(**fields, snake_count=args.snakes)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def snake_labels(gait):
    """One short label per snake with the gait parameters that differ between snakes."""
    varying = [name for name in GAIT_OPTIONS
               if np.ptp(getattr(gait, GAIT_OPTIONS[name][0])) > 0.0]
    labels = []
    for s in range(gait.snake_count):
        parts = [f"snake {s}"]
        for name in varying:
            value = getattr(gait, GAIT_OPTIONS[name][0])[s]
            parts.append(f"{name} {pa_to_psi(value) if name == 'amplitude-psi' else value:.3g}")
        labels.append(", ".join(parts))
    return labels


def pictured_snakes(args):
    """How many snakes the USD scene and the GIF show."""
    return args.snakes if args.pictured_snakes == 0 else min(args.pictured_snakes, args.snakes)


def _check_size(args, budget, config):
    """UsageError unless the run fits this machine's memory and a week of wall time at ``budget`` (``parse_budget``
    with ``substeps``) with the snakes of ``config`` (``--config``: its mesh sizes the pictures)."""
    frames, record_bytes, wall = estimate_run(args.snakes, args.seconds, resolution=args.resolution,
                                              device=args.device)
    if wall is not None:
        # The estimate is the snake's budget's; a larger one costs up to its iterations' ratio (less where worlds stop).
        wall *= (budget["newton_iterations"] * budget["linear_iterations"] * budget["substeps"]
                 / (SNAKE_BUDGET["newton_iterations"] * SNAKE_BUDGET["linear_iterations"] * SolverSettings().substeps))
        wall /= parallel_speedup(args, args.snakes)
    section = config.resolution()
    particles = config.link_count * section.section_count * (section.outer_ring_points + 2 * section.chamber_ring_points)
    pictures = min(frames + 1, FRAMES_MAX + 1) * pictured_snakes(args) * particles * 12 if args.video else 0
    check_run_size(f"--seconds {args.seconds:g} with --snakes {args.snakes}", record_bytes + pictures, wall)
    return frames, wall


def _summary_lines(trajectories, labels, window):
    """The printed summary: one line per snake (see the module docstring)."""
    summary = trajectories.summary(window)
    lines = [f"centre-of-mass travel of each snake (body length {trajectories.body_length:.2f} m), "
             f"heading change averaged over the last {window:g} s:",
             f"  {'snake':<40s} {'forward [m]':>11s} {'lateral [m]':>11s} {'distance [m]':>12s} "
             f"{'body lengths':>12s} {'heading change [deg]':>20s}"]
    for s, label in enumerate(labels):
        lines.append(f"  {label:<40s} {summary['forward'][s]:+11.4f} {summary['lateral'][s]:+11.4f} "
                     f"{summary['distance'][s]:12.4f} {summary['body_lengths'][s]:12.2f} "
                     f"{math.degrees(summary['heading_change'][s]):+20.1f}")
    return lines


def _write_partial(out, simulation, animation, labels, title, usd_path):
    """Write what an interrupted or failed run computed; returns the files kept."""
    kept = []
    if usd_path is not None:
        partial_usd = usd_path.with_name(f"{usd_path.stem}.partial{usd_path.suffix}")
        if partial_usd.exists():
            kept.append(partial_usd)
    trajectories = simulation.trajectories
    if trajectories is not None and len(trajectories.time) > 1:
        write_trajectories_csv(out / PARTIAL["csv"], trajectories)
        plot_trajectories(out / PARTIAL["png"], trajectories, labels, title=f"{title} (partial)")
        kept += [out / PARTIAL["csv"], out / PARTIAL["png"]]
    if animation is not None and animation.frame_count > 1:
        animation.write(out / PARTIAL["gif"], title=f"{title} (partial)")
        kept.append(out / PARTIAL["gif"])
    return kept


def run(args):
    check_positive("--seconds", args.seconds)
    check_positive("--supply-psi", args.supply_psi)
    check_at_least("--pictured-snakes", args.pictured_snakes, 0)
    check_workers(args, args.snakes)
    budget = parse_budget(args.budget, SNAKE_BUDGET)
    budget["substeps"] = SolverSettings().substeps if args.substeps is None else args.substeps
    if args.compensated_positions is not None:
        budget["compensated_positions"] = args.compensated_positions
    check_at_least("--substeps", budget["substeps"], 1)
    gait = gait_from_args(args)
    config = snake_config(args)
    check_device(args.device, getattr(args, "verbose", False))
    frames, wall_estimate = _check_size(args, budget, config)
    settings = gait_resume.run_settings(args, gait, budget, config)
    resume = None
    if args.resume:
        resume = gait_resume.load(output_folder(args.out), settings)
    out = make_output_folder(args.out)
    options = {"resolution": args.resolution, "device": args.device, "gait": gait, "latency": args.latency,
               "supply_pressure": psi_to_pa(args.supply_psi), "seconds": args.seconds, "config": config,
               **budget}
    try:
        if args.workers == 1:
            simulation = SnakeSimulation(args.snakes, **options)
        else:
            from softsnake.robots.snake.workers import SnakeSimulationWorkers

            simulation = SnakeSimulationWorkers(args.snakes, workers=worker_processes(args), **options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    with simulation:  # stops the worker processes, also after an interrupt
        return _simulate(args, simulation, gait, out, wall_estimate, settings, resume)


def _simulate(args, simulation, gait, out, wall_estimate, settings, resume):
    """Run the simulation and write its outputs (or, interrupted or failed, what it computed); ``resume``: None, or
    the (``RunPoint``, pictures) of the interrupted run to go on from (``gait_resume.load``)."""
    usd_path = out / f"{USD_STEM}.{args.usd_format}" if args.usd else None
    labels = snake_labels(gait)
    title = (f"{args.snakes} snake(s), {args.resolution} mesh, {args.seconds:g} s, "
             f"latency {'on' if args.latency else 'off'}")
    animation = None
    if args.video:
        from softsnake.robots.snake.animation import SnakeAnimation

        animation = SnakeAnimation.for_run(simulation, pictured_snakes(args))
    start_point = None
    if resume is not None:
        start_point, pictures = resume
        if animation is not None:
            try:
                animation.restore(pictures)
            except (ConfigError, KeyError, TypeError) as exc:
                raise UsageError(f"--resume: the saved pictures: {exc}") from None
    if wall_estimate is not None and start_point is not None:  # the frames left
        wall_estimate *= 1.0 - start_point.frame / simulation.frame_count
    estimate = f", about {duration_text(wall_estimate)} on this CPU" if wall_estimate is not None else ""
    if args.workers != 1:
        estimate = f", {simulation.workers} worker processes{estimate}"
    going_on = ("" if start_point is None else
                f", going on after frame {start_point.frame} (t = {start_point.frame * simulation.dt:.3f} s)")
    substeps = settings["substeps"]
    print(f"{title}: {simulation.frame_count} frames of {simulation.dt:.6g} s in {substeps} "
          f"substep{'s' * (substeps != 1)}{going_on}{estimate}", flush=True)
    start = timer.perf_counter()
    try:
        trajectories = simulation.run(usd_path=usd_path, usd_snakes=pictured_snakes(args), progress=True,
                                      on_frame=None if animation is None else animation.record,
                                      on_frame_every=1 if animation is None else animation.stride,
                                      start=start_point)
    except ConfigError as exc:  # a saved point that does not fit this run, found before any step
        if start_point is None:
            raise
        raise UsageError(f"--resume: {exc}") from None
    except (SimulationError, KeyboardInterrupt) as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        reached = simulation.trajectories.time[-1] if simulation.trajectories is not None else 0.0
        kept = _write_partial(out, simulation, animation, labels, title, usd_path)
        point = simulation.stop_point if interrupted else None
        if point is not None:
            kept.append(gait_resume.save(out, settings, point, animation))
        what = f"interrupted at t = {reached:.3f} s" if interrupted else f"error: {exc}"
        files = ", ".join(str(path) for path in kept) if kept else "nothing (no frame was finished)"
        if args.workers == 1 or point is not None:  # workers stopped mid-frame (a second Ctrl-C) cannot answer
            print(simulation.newton_counts().summary("snake", study='README, "Known limitations"') + f" (up to t = "
                  f"{reached:.3f} s)", flush=True)
        going_on = "; the same command with --resume goes on from there" if point is not None else ""
        print(f"softsnake gait: {what}; kept the run up to t = {reached:.3f} s in {files}{going_on}", file=sys.stderr)
        return 130 if interrupted else 1
    wall = timer.perf_counter() - start
    write_trajectories_csv(out / CSV_NAME, trajectories)
    plot_trajectories(out / PNG_NAME, trajectories, labels, title=title)
    written = [out / CSV_NAME, out / PNG_NAME] + ([usd_path] if usd_path else [])
    if animation is not None:
        written.append(animation.write(out / GIF_NAME, title=title))
    # What an interrupted run of this folder kept is now out of date (or, resumed, this run's whole files).
    for stale in [out / gait_resume.RESUME_NAME] + [out / name for name in PARTIAL.values()]:
        stale.unlink(missing_ok=True)
    stepped = simulation.frame_count - (0 if start_point is None else start_point.frame)
    print(f"simulated {stepped} frames in {wall:.1f} s wall time ({1e3 * wall / stepped:.1f} ms per frame)")
    moving = gait.frequency[gait.frequency > 0.0]
    period = 1.0 / float(moving.min()) if moving.size else args.seconds
    for line in _summary_lines(trajectories, labels, min(period, args.seconds)):
        print(line)
    print(simulation.newton_counts().summary("snake", study='README, "Known limitations"'))
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
