"""``softsnake gait``: simulate snakes under the open-loop gait; write USD, CSV and a PNG.

Every gait option takes one value for all snakes or a comma-separated list of one value per snake;
``--sweep NAME=LOW:HIGH`` spreads the snakes' values of one option evenly from LOW to HIGH. Files:
``DIR/gait.usdc`` (or ``.usda``), ``DIR/trajectories.csv`` (time, snake, centre of mass, link
curvatures) and ``DIR/trajectories.png`` (top view of every snake's centre-of-mass path). If a
snake diverges, what was recorded is written as ``trajectories.partial.csv`` / ``.png`` and the
USD file stays ``gait.partial.usdc``.
"""

import argparse
import math
import sys
import time as timer

import numpy as np

from softsnake.errors import ConfigError, SimulationError, UsageError
from softsnake.robots.actuation import SUPPLY_PRESSURE_DEFAULT
from softsnake.robots.snake.gait import GaitParams
from softsnake.robots.snake.plots import plot_trajectories
from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.robots.snake.trajectories import CSV_NAME, write_trajectories_csv
from softsnake.units import pa_to_psi, psi_to_pa

from .common import (add_snake_config_option, check_at_least, check_device, check_positive, make_output_folder,
                     output_folder, snake_config)

SNAKES_DEFAULT = 2
SECONDS_DEFAULT = 5.0
GAIT_OPTIONS = {
    # option name: (GaitParams field, conversion to SI, default as given on the command line)
    "frequency": ("frequency", np.asarray, "2"),
    "phase-shift": ("phase_shift", np.asarray, repr(math.pi / 2.0)),
    "offset": ("offset", np.asarray, "0"),
    "amplitude-psi": ("amplitude", psi_to_pa, "8"),
}
PNG_NAME = "trajectories.png"
USD_STEM = "gait"


def add_arguments(parser):
    parser.add_argument("--snakes", type=int, default=SNAKES_DEFAULT, help="number of snakes (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=SECONDS_DEFAULT,
                        help="simulated time [s] (default: %(default)g)")
    parser.add_argument("--resolution", default="coarse", choices=("paper", "coarse"),
                        help="link mesh resolution (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default: %(default)s)")
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    add_snake_config_option(parser)
    parser.add_argument("--frequency", default=None, help="oscillation frequency f [Hz] (default: 2)")
    parser.add_argument("--phase-shift", default=None, help="phase shift alpha between links [rad] (default: pi/2)")
    parser.add_argument("--offset", default=None, help="offset phi in [-1, 1], turns the snake (default: 0)")
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


def run(args):
    check_device(args.device)
    check_positive("--seconds", args.seconds)
    check_positive("--supply-psi", args.supply_psi)
    gait = gait_from_args(args)
    config = snake_config(args)
    out = output_folder(args.out)
    try:
        simulation = SnakeSimulation(args.snakes, resolution=args.resolution, device=args.device, gait=gait,
                                     latency=args.latency, supply_pressure=psi_to_pa(args.supply_psi),
                                     seconds=args.seconds, config=config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    make_output_folder(out)
    usd_path = out / f"{USD_STEM}.{args.usd_format}" if args.usd else None
    labels = snake_labels(gait)
    title = (f"{args.snakes} snake(s), {args.resolution} mesh, {args.seconds:g} s, "
             f"latency {'on' if args.latency else 'off'}")
    start = timer.perf_counter()
    try:
        trajectories = simulation.run(usd_path=usd_path, progress=True)
    except SimulationError as exc:
        write_trajectories_csv(out / "trajectories.partial.csv", simulation.trajectories)
        plot_trajectories(out / "trajectories.partial.png", simulation.trajectories, labels, title=f"{title} (partial)")
        print(f"softsnake gait: error: {exc}; wrote {out / 'trajectories.partial.csv'}", file=sys.stderr)
        return 1
    wall = timer.perf_counter() - start
    write_trajectories_csv(out / CSV_NAME, trajectories)
    plot_trajectories(out / PNG_NAME, trajectories, labels, title=title)

    travel = trajectories.travel()
    print(f"{args.snakes} snake(s), {args.resolution} mesh, {simulation.frame_count} frames of "
          f"{simulation.dt:.6g} s in {wall:.1f} s wall time ({1e3 * wall / simulation.frame_count:.1f} ms per frame)")
    print(f"body length {trajectories.body_length:.3f} m; travel of the centre of mass along the initial heading:")
    for s, label in enumerate(labels):
        print(f"  {label}: forward {travel[s, 0]:+.4f} m, lateral (left) {travel[s, 1]:+.4f} m")
    written = [str(out / CSV_NAME), str(out / PNG_NAME)] + ([str(usd_path)] if usd_path else [])
    print("wrote " + ", ".join(written))
    return 0
