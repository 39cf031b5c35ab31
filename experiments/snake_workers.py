"""Speed-up of ``softsnake gait --workers 0`` (the snakes over one process per CPU core) against one process.

Runs ``softsnake gait --snakes N --seconds T --no-video`` (USD streamed, CSV and PNG written) as a
user does, in a fresh process each time, with ``--workers 1`` and ``--workers 0``, alternately,
``REPEATS`` times each, and reports the medians of two times: the frame loop (the command's own
"simulated ... in X s wall time": stepping, observations, USD, the workers' replies) and the whole
command (interpreter start to exit: imports, model building, the workers' start, the files). It
checks that every run wrote the same trajectories CSV, byte for byte (softsnake.robots.snake.workers).
A short untimed run first puts the kernels in Warp's cache.

The machine may be shared, and another process that keeps a core busy slows the split run (which
needs every core) and hardly the one-process run: every run prints the CPU time that other
processes took meanwhile (Linux: /proc/stat's busy time less this run's, from getrusage), and the
table gives the medians. Prints the CPU, its core count and a table (Markdown); writes
snake_workers.csv into --out (default experiments/results).

Usage: python experiments/snake_workers.py [--out DIR] [--snakes 8] [--seconds 1] [--repeats 3]
       [--video]
"""

import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.machine import usable_cores
from softsnake.output_files import write_dict_csv

REPEATS = 3
"""Runs of each kind; the medians are reported."""

SNAKES = 8
SECONDS = 1.0
"""Simulated time of each run [s]: 120 frames, about 2.5 minutes for 8 coarse snakes in one process."""

TARGET_SPEEDUP = 1.8
"""Issue 13's target for 8 snakes on 2 cores."""

FRAME_LOOP = re.compile(r"simulated (\d+) frames in ([\d.]+) s wall time")


def cpu_name():
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what ``platform`` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_cpu_seconds():
    """CPU time the whole machine has been busy since boot [s] (Linux /proc/stat; NaN elsewhere)."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and waiting for I/O
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    """CPU time of this script's ended child processes and theirs [s]."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_gait(workers, snakes, seconds, video, folder):
    """One ``softsnake gait`` process: (frame loop [s], whole command [s], CPU time other processes took
    meanwhile [s], trajectories CSV bytes)."""
    argv = [sys.executable, "-m", "softsnake", "gait", "--snakes", str(snakes), "--seconds", f"{seconds:g}",
            "--workers", str(workers), "--video" if video else "--no-video", "--out", str(folder)]
    busy, own = busy_cpu_seconds(), children_cpu_seconds()
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    whole = time.perf_counter() - start
    others = max(0.0, busy_cpu_seconds() - busy - (children_cpu_seconds() - own))
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} failed ({result.returncode}): {result.stderr.strip()}")
    loop = float(FRAME_LOOP.search(result.stdout).group(2))
    return loop, whole, others, (folder / "trajectories.csv").read_bytes()


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--snakes", type=int, default=SNAKES, help="snakes of each run (default %(default)s)")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="simulated time [s] (default %(default)g)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each kind (default %(default)s)")
    parser.add_argument("--video", action="store_true", help="also write the GIF (off: its drawing is one process's)")
    args = parser.parse_args(argv)
    out = make_output_folder(args.out)
    cores = usable_cores()
    print(f"CPU: {cpu_name()}, {cores} cores; Warp device cpu; load average before: "
          f"{', '.join(f'{load:.2f}' for load in os.getloadavg())}", flush=True)
    times = {1: ([], [], []), 0: ([], [], [])}
    reference = None
    with tempfile.TemporaryDirectory() as scratch:
        # Untimed: a short run compiles the kernels into Warp's cache if they are not there yet.
        run_gait(1, 1, 0.02, False, Path(scratch) / "warm_up")
        for repeat in range(args.repeats):
            for workers in (1, 0):
                loop, whole, others, csv = run_gait(workers, args.snakes, args.seconds, args.video,
                                                    Path(scratch) / f"{workers}_{repeat}")
                reference = csv if reference is None else reference
                if csv != reference:
                    raise SystemExit(f"--workers {workers} (run {repeat + 1}) wrote other trajectories than the first run")
                for kind, value in enumerate((loop, whole, others)):
                    times[workers][kind].append(value)
                print(f"  run {repeat + 1}, --workers {workers}: frame loop {loop:.1f} s, whole command {whole:.1f} s, "
                      f"other processes' CPU meanwhile {others:.1f} s", flush=True)
    rows = []
    for workers, label in ((1, "1 (one process)"), (0, f"0 ({min(cores, args.snakes)} processes)")):
        loop, whole, others = (statistics.median(values) for values in times[workers])
        rows.append({"workers": label, "frame_loop_s": loop, "whole_command_s": whole,
                     "frame_loop_speedup": statistics.median(times[1][0]) / loop,
                     "whole_command_speedup": statistics.median(times[1][1]) / whole, "others_cpu_s": others})
    frames = round(args.seconds * 120)
    print(f"\n`softsnake gait --snakes {args.snakes} --seconds {args.seconds:g}` ({frames} frames, coarse mesh, "
          f"{'with' if args.video else 'no'} GIF), medians of {args.repeats} runs; {cpu_name()}, {cores} cores, "
          "Warp device cpu; every run's trajectories CSV byte for byte the same")
    print("\n| --workers | frame loop [s] | speed-up | whole command [s] | speed-up | other processes' CPU [s] |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['workers']} | {row['frame_loop_s']:.1f} | {row['frame_loop_speedup']:.2f}x "
              f"| {row['whole_command_s']:.1f} | {row['whole_command_speedup']:.2f}x | {row['others_cpu_s']:.1f} |")
    print(f"\nload average after: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    verdict = "meets" if rows[1]["frame_loop_speedup"] >= TARGET_SPEEDUP else "misses"
    print(f"\nframe loop speed-up {rows[1]['frame_loop_speedup']:.2f}x: {verdict} the target {TARGET_SPEEDUP}x")
    write_dict_csv(out / "snake_workers.csv", rows)
    print(f"wrote {out / 'snake_workers.csv'}")


if __name__ == "__main__":
    main()
