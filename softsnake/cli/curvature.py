"""``softsnake curvature``: steady link curvature against chamber over-pressure (seed 001, Fig. 5).

One stand link per pressure, all in one batch (``softsnake.robots.snake.curvature``). Writes
``curvature.csv`` (pressure, steady curvature, settling residual) and ``curvature.png`` (Fig. 5
layout) into --out and prints the linear fits, their symmetry, the settling residual and how the
solver's substeps ended (``softsnake.newton_counts``; one stand per pressure, counted from 0).
"""

import math

from softsnake.errors import ConfigError, UsageError
from softsnake.robots.snake.curvature import (FIT_LIMIT_PSI, PRESSURE_MAX_PSI, SECONDS_DEFAULT, SETTLE_WINDOW,
                                              check_sweep, estimate_sweep, pressure_grid, simulate_curvature,
                                              summarize_curvature, write_curvature_csv)
from softsnake.robots.snake.plots import plot_curvature
from softsnake.units import psi_to_pa

from .common import (add_snake_config_option, check_device, check_positive, check_run_size, make_output_folder, snake_config)

CSV_NAME = "curvature.csv"
PNG_NAME = "curvature.png"


def add_arguments(parser):
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    parser.add_argument("--resolution", default="coarse", choices=("paper", "coarse"),
                        help="link mesh resolution (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default: %(default)s)")
    add_snake_config_option(parser)
    parser.add_argument("--seconds", type=float, default=SECONDS_DEFAULT,
                        help="simulated time to steady state [s] (default: %(default)g)")
    parser.add_argument("--min-psi", type=float, default=-PRESSURE_MAX_PSI,
                        help=f"lowest over-pressure [psi], at least -{PRESSURE_MAX_PSI:g} (default: %(default)g)")
    parser.add_argument("--max-psi", type=float, default=PRESSURE_MAX_PSI,
                        help=f"highest over-pressure [psi], at most {PRESSURE_MAX_PSI:g} (default: %(default)g)")
    parser.add_argument("--step-psi", type=float, default=1.0, help="pressure step [psi] (default: 1)")


def run(args):
    check_positive("--seconds", args.seconds)
    check_positive("--step-psi", args.step_psi)
    if not (math.isfinite(args.min_psi) and math.isfinite(args.max_psi)) or args.min_psi >= args.max_psi:
        raise UsageError(f"need --min-psi < --max-psi, got {args.min_psi} and {args.max_psi}")
    config = snake_config(args)
    for option, value in (("--min-psi", args.min_psi), ("--max-psi", args.max_psi)):
        if abs(value) > PRESSURE_MAX_PSI:
            raise UsageError(f"{option} {value:g}: chamber pressures must lie within -{PRESSURE_MAX_PSI:g}..{PRESSURE_MAX_PSI:g} "
                             "psi (the supply pressure)")
    count = int(math.floor((args.max_psi - args.min_psi) / args.step_psi + 1e-9)) + 1
    _, memory, wall = estimate_sweep(count, args.seconds, resolution=args.resolution, device=args.device)
    check_run_size(f"--seconds {args.seconds:g} with {count} pressures", memory, wall)
    psi = pressure_grid(args.min_psi, args.max_psi, args.step_psi)
    try:
        check_sweep(psi)
    except ConfigError as exc:
        raise UsageError(f"--min-psi {args.min_psi:g} --max-psi {args.max_psi:g} --step-psi {args.step_psi:g}: {exc}") from None
    check_device(args.device, getattr(args, "verbose", False))
    out = make_output_folder(args.out)
    try:
        sweep = simulate_curvature(psi_to_pa(psi), config=config, resolution=args.resolution, device=args.device,
                                   seconds=args.seconds)
        summary = summarize_curvature(sweep)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    write_curvature_csv(out / CSV_NAME, sweep)
    plot_curvature(out / PNG_NAME, sweep, summary,
                   title=f"Link curvature vs pressure ({args.resolution} mesh, {args.seconds:g} s per run)")
    print(f"{len(psi)} pressures, {args.resolution} mesh, {args.seconds:g} s each")
    print(" psi   curvature [1/m]")
    for p, k in zip(psi, sweep.curvature):
        print(f"{p:5.1f}  {k:10.4f}")
    for side in ("left", "right"):
        print(f"{side:5s}: slope {summary[f'{side}_slope']:.4f} 1/m per psi, R^2 {summary[f'{side}_r2']:.5f} "
              f"(0-{FIT_LIMIT_PSI:g} psi)")
    print(f"symmetry: slopes differ by {summary['symmetry_percent']:.2f} %")
    print(f"zero pressure: curvature {summary['zero_curvature']:.2e} 1/m")
    print(f"settling: largest change over the last {SETTLE_WINDOW:g} s {summary['max_residual']:.2e} 1/m")
    print(sweep.newton.summary("stand", study="experiments/results/snake.md"))
    print(f"wrote {out / CSV_NAME} and {out / PNG_NAME}")
    return 0
