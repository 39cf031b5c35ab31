"""``softsnake step-response``: chamber pressure step response (seed 001, Fig. 6).

Runs ``softsnake.robots.snake.step_response``: one chamber inflated from rest to 60-100 % of the
supply pressure and vented from there, under the latency model, beside the paper's literal map.
Writes ``step_response.csv`` (time, level, pressure in Pa and psi) and ``step_response.png``
(inflation and deflation panels) into --out, and prints rise/fall times and the model-to-map
difference.
"""

from softsnake.errors import UsageError
from softsnake.robots.actuation import REFERENCE_DT_DEFAULT, SUPPLY_PRESSURE_DEFAULT
from softsnake.robots.snake.plots import plot_step_response
from softsnake.robots.snake.step_response import (BYTES_PER_STEP, DURATION_DEFAULT, simulate_step_response,
                                                  summarize_step_response, write_step_response_csv)
from softsnake.units import pa_to_psi, psi_to_pa

from .common import check_positive, check_run_size, make_output_folder

CSV_NAME = "step_response.csv"
PNG_NAME = "step_response.png"


def add_arguments(parser):
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    parser.add_argument("--supply-psi", type=float, default=pa_to_psi(SUPPLY_PRESSURE_DEFAULT),
                        help="supply pressure [psi] (default: %(default)g, an assumption)")
    parser.add_argument("--dt", type=float, default=REFERENCE_DT_DEFAULT,
                        help="controller time step [s] (default: 1/120)")
    parser.add_argument("--duration", type=float, default=DURATION_DEFAULT,
                        help="length of each response [s] (default: %(default)g)")


def run(args):
    for option, value in (("--supply-psi", args.supply_psi), ("--dt", args.dt), ("--duration", args.duration)):
        check_positive(option, value)
    if args.dt > args.duration:
        raise UsageError(f"--dt {args.dt} is longer than --duration {args.duration}")
    check_run_size(f"--duration {args.duration:g} with --dt {args.dt:g}", args.duration / args.dt * BYTES_PER_STEP)
    out = make_output_folder(args.out)

    response = simulate_step_response(
        supply_pressure=psi_to_pa(args.supply_psi), dt=args.dt, duration=args.duration, progress=True
    )
    write_step_response_csv(out / CSV_NAME, response)
    plot_step_response(out / PNG_NAME, response)

    print(f"supply {args.supply_psi:g} psi, dt {args.dt:.6g} s, duration {args.duration:g} s")
    print("level [%]  inflate t90 [s]  deflate t10 [s]  max |model - map| [psi]  shared samples")
    for row in summarize_step_response(response):
        print(f"{row['level_percent']:9.0f}  {row['inflate_t90_s']:15.4f}  {row['deflate_t10_s']:15.4f}"
              f"  {pa_to_psi(row['map_difference_pa']):23.4f}  {row['map_sample_count']:14d}")
    print(f"wrote {out / CSV_NAME} and {out / PNG_NAME}")
    return 0
