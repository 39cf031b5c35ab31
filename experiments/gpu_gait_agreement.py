"""Does a GPU gait agree with the CPU's? (issue 13; experiments/results/gpu.md, sections 11.2, 13.1, 17)

``softsnake gait --device cuda --snakes 1024`` writes ~250 MB of trajectories; the GPU session brings back the
rows of snakes 0, 512 and 1023 only (``tools/gpu/session.sh gait_collect``). This script sets them beside the
same three snakes run on the CPU (``softsnake gait --snakes 3 --offset=-0.3,0.000293255132,0.3 --seconds T
--no-usd --no-video``: the gait's offsets are evenly spread from -0.3 to 0.3, snake k's is -0.3 + 0.6 k / 1023)
and prints, per snake, the travel on both devices and the largest difference of every column over the samples
both files hold. Positions are measured from each snake's start (the GPU's snake k lies k metres out in y, in
its own world's frame), so the columns compare the worlds' own motion.

    python experiments/gpu_gait_agreement.py GPU_CSV CPU_CSV [--gpu-snakes 0,512,1023]
"""

import argparse
import csv
import sys

import numpy as np

POSITION_COLUMNS = ("com_x_m", "com_y_m", "com_z_m")


def read_rows(path):
    """{snake: {column: array over time}} of a trajectories CSV (every column as float)."""
    by_snake = {}
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            columns = by_snake.setdefault(int(row["snake"]), {})
            for name, value in row.items():
                columns.setdefault(name, []).append(float(value))
    return {snake: {name: np.array(values) for name, values in columns.items()} for snake, columns in by_snake.items()}


def largest_differences(gpu, cpu):
    """Samples compared and the largest |GPU - CPU| per column (positions from each snake's start)."""
    count = min(len(gpu["time_s"]), len(cpu["time_s"]))
    if not np.allclose(gpu["time_s"][:count], cpu["time_s"][:count], atol=1e-9):
        raise SystemExit("gpu_gait_agreement.py: the two files sample different times")
    differences = {}
    for name in gpu:
        if name in ("time_s", "snake") or name not in cpu:
            continue
        a, b = gpu[name][:count], cpu[name][:count]
        if name in POSITION_COLUMNS:
            a, b = a - a[0], b - b[0]
        differences[name] = float(np.max(np.abs(a - b)))
    return count, differences


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gpu_csv")
    parser.add_argument("cpu_csv")
    parser.add_argument("--gpu-snakes", default="0,512,1023", help="the GPU file's snakes, in the CPU file's order")
    args = parser.parse_args(argv)
    gpu, cpu = read_rows(args.gpu_csv), read_rows(args.cpu_csv)
    gpu_snakes = [int(k) for k in args.gpu_snakes.split(",")]
    if sorted(cpu) != list(range(len(gpu_snakes))) or any(k not in gpu for k in gpu_snakes):
        raise SystemExit(f"gpu_gait_agreement.py: the GPU file holds snakes {sorted(gpu)}, the CPU file "
                         f"{sorted(cpu)}; --gpu-snakes names {gpu_snakes}")
    print("| snake | samples | travel in x, GPU / CPU [m] | largest difference x / y / z [m] | heading [rad] "
          "| curvature [1/m] | pressure [Pa] |")
    print("|---|---:|---|---|---:|---:|---:|")
    for cpu_snake, gpu_snake in enumerate(gpu_snakes):
        g, c = gpu[gpu_snake], cpu[cpu_snake]
        count, d = largest_differences(g, c)
        curvature = max(v for k, v in d.items() if k.startswith("curvature"))
        pressure = max(v for k, v in d.items() if k.startswith("pressure") or k.startswith("command"))
        travel = (g["com_x_m"][count - 1] - g["com_x_m"][0], c["com_x_m"][count - 1] - c["com_x_m"][0])
        print(f"| {gpu_snake} | {count} | {travel[0]:.6f} / {travel[1]:.6f} | {d['com_x_m']:.1e} / "
              f"{d['com_y_m']:.1e} / {d['com_z_m']:.1e} | {d['heading_rad']:.1e} | {curvature:.1e} | {pressure:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
