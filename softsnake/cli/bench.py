"""``softsnake bench``: time per frame for one link and for batches of snakes (seed 001, Table II).

Times the cases of ``softsnake.robots.snake.bench`` (the paper's settings; assembly and solve split
by the solver's own phase timing). Writes ``bench.csv`` (our times and the paper's) and
``bench.png`` into --out and prints the table beside the paper's.
"""

from softsnake.errors import SimulationError, UsageError
from softsnake.robots.snake.bench import (LINK_CASE, MB, PAPER_CPU_FRAME_S, PAPER_TABLE_2, device_name, run_bench,
                                          write_bench_csv)
from softsnake.robots.snake.plots import plot_bench
from softsnake.robots.snake.simulation import CPU_SECONDS_PER_SNAKE_FRAME, MODEL_BYTES_PER_SNAKE

from .common import (add_snake_config_option, check_at_least, check_device, check_run_size, make_output_folder, snake_config)

CSV_NAME = "bench.csv"
PNG_NAME = "bench.png"


def add_arguments(parser):
    parser.add_argument("--out", default=".", help="output folder (default: current folder)")
    parser.add_argument("--device", default="cpu", help="Warp device, cpu or cuda (default: %(default)s)")
    parser.add_argument("--resolution", default="paper", choices=("paper", "coarse"),
                        help="link mesh resolution (default: %(default)s, as in Table II)")
    add_snake_config_option(parser)
    parser.add_argument("--max-snakes", type=int, default=10, help="largest batch of 1..N snakes (default: 10)")
    parser.add_argument("--frames", type=int, default=5, help="timed frames per case (default: 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed frames first (default: 2)")


def run(args):
    for option, value in (("--max-snakes", args.max_snakes), ("--frames", args.frames), ("--warmup", args.warmup)):
        check_at_least(option, value, 1)
    # The largest case holds --max-snakes snakes; the cases run one after another.
    snake_frames = (args.frames + args.warmup) * args.max_snakes * (args.max_snakes + 1) // 2
    check_run_size(f"--max-snakes {args.max_snakes} with --frames {args.frames} --warmup {args.warmup}",
                   args.max_snakes * MODEL_BYTES_PER_SNAKE[args.resolution],
                   snake_frames * CPU_SECONDS_PER_SNAKE_FRAME[args.resolution] if args.device == "cpu" else None)
    config = snake_config(args)
    check_device(args.device, getattr(args, "verbose", False))
    out = make_output_folder(args.out)
    name = device_name(args.device)
    print(f"device: {name}; {args.resolution} mesh; h = 1/120 s, 2 substeps, 4 Newton, 20 CR; "
          f"median of {args.frames} frames after {args.warmup} warm-up")
    try:
        results = run_bench(device=args.device, resolution=args.resolution, max_snakes=args.max_snakes,
                            frames=args.frames, warmup=args.warmup, config=config)
    except SimulationError as exc:
        raise UsageError(f"a bench case blew up, so it cannot be timed: {exc}") from None
    write_bench_csv(out / CSV_NAME, results)
    plot_bench(out / PNG_NAME, results, title=f"Time per frame, {args.resolution} mesh, {name}")
    print("snakes    rows  assembly [ms]  solve [ms]  total [ms]  per snake [ms]  memory [MB]  | paper total [ms]  per snake")
    for snakes, r in results.items():
        label = "1 link" if snakes == LINK_CASE else f"{snakes:6d}"
        per_snake = f"{1e3 * r['total'] / snakes:14.2f}" if snakes >= 1 else " " * 14
        paper = PAPER_TABLE_2.get(snakes)
        paper_text = (f"{paper[2]:16.2f}  {paper[2] / snakes:9.2f}" if paper and snakes >= 1
                      else f"{paper[2]:16.2f}" if paper else "")
        print(f"{label:>6s} {r['rows']:7d}  {1e3 * r['assembly']:13.2f}  {1e3 * r['solve']:10.2f}  "
              f"{1e3 * r['total']:10.2f}  {per_snake}  {r['memory'] / MB:11.2f}  | {paper_text}")
    print(f"paper, one snake on a CPU (i7 5820k): {PAPER_CPU_FRAME_S:g} s per frame")
    print(f"wrote {out / CSV_NAME} and {out / PNG_NAME}")
    return 0
