"""The derivatives of a gait's outcome with respect to its parameters: the adjoint against central differences.

One coarse snake runs a turning gait (eq. 9: f = 2 Hz, alpha = pi/2, offset 0.2, amplitude 7 psi, so that every
parameter can move both ways inside its bounds) through the valve latency model for ``--seconds``, at the gradient's
budget (``gait_gradient.GRADIENT_BUDGET``: balanced, 30 x 200, every substep the implicit step the adjoint
differentiates). Losses: the centre of mass' displacement along x (travel) and y (lateral: the turn). The adjoint
(``softsnake.robots.snake.gait_gradient``: the engine's per-frame pressure adjoint, chained with the host latency
model's derivative) gives each loss's derivative with respect to all four parameters from one recorded rollout;
central differences rerun the whole rollout at each parameter +- d (d relative for frequency, phase shift and
amplitude, absolute for the offset), both losses from the same rollouts.

Prints a table (device, the adjoint, each central difference, the adjoint's distance from them, wall times) and
writes snake_gait_gradient_<T>s.csv into --out (default experiments/results), rewritten after every row, so an
interrupted run keeps what it finished. ``--methods adjoint`` and ``--methods central`` in two processes (different
--out folders) split the work over two cores.

Usage: python experiments/snake_gait_gradient.py [--seconds 0.5] [--methods adjoint,central] [--steps 0.01,0.03]
           [--out DIR]
"""

import math
import platform
import time

import warp as wp

from softsnake.cli.common import experiment_parser, float_list, make_output_folder
from softsnake.output_files import write_dict_csv
from softsnake.robots.snake.gait import GAIT_FIELDS, GaitParams
from softsnake.robots.snake.gait_gradient import LOSSES, gait_displacement, gait_gradient
from softsnake.units import psi_to_pa

BASE = {"frequency": 2.0, "phase_shift": math.pi / 2.0, "offset": 0.2, "amplitude": psi_to_pa(7.0)}
"""The gait differentiated (eq. 9's parameters in SI units)."""
ABSOLUTE = {"offset"}
"""Parameters whose central-difference steps are absolute (the others' are relative to BASE)."""


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--seconds", type=float, default=0.5, help="simulated time [s] (default 0.5)")
    parser.add_argument("--methods", default="adjoint,central", help="adjoint, central or both (default both)")
    parser.add_argument("--steps", type=float_list, default=[0.01, 0.03],
                        help="central-difference steps (relative; the offset's absolute), default 0.01,0.03")
    args = parser.parse_args(argv)
    methods = {name.strip() for name in args.methods.split(",") if name.strip()}
    if not methods or methods - {"adjoint", "central"}:
        parser.error(f"--methods takes adjoint and/or central, got {args.methods!r}")
    if not 1.0 / 120.0 <= args.seconds <= 60.0:
        parser.error("--seconds must lie between one frame (1/120 s) and 60 s")
    if not all(0.0 < d < 0.2 for d in args.steps):
        parser.error(f"--steps must lie between 0 and 0.2, got {args.steps}")
    out = make_output_folder(args.out)
    path = out / f"snake_gait_gradient_{args.seconds:g}s.csv"
    print(f"Gait gradient: device cpu ({platform.machine()}), warp {wp.config.version}; coarse snake, "
          f"{args.seconds:g} s of the gait {BASE} (SI) with latency; balanced 30 x 200")
    rows = []

    def add(row):
        rows.append(row)
        write_dict_csv(path, rows)
        print(" ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)

    if "adjoint" in methods:
        for loss in LOSSES:
            start = time.perf_counter()
            result = gait_gradient(args.seconds, gait=GaitParams(**BASE), loss=loss)
            wall = time.perf_counter() - start
            for name in GAIT_FIELDS:
                add({"loss": loss, "parameter": name, "method": "adjoint", "step": "", "loss_m": result.loss,
                     "derivative": result.gradient[name], "wall_s": wall})
    if "central" in methods:
        for name in GAIT_FIELDS:
            for d in args.steps:
                step = d if name in ABSOLUTE else d * BASE[name]
                start = time.perf_counter()
                plus = gait_displacement(args.seconds, gait=GaitParams(**{**BASE, name: BASE[name] + step}))
                minus = gait_displacement(args.seconds, gait=GaitParams(**{**BASE, name: BASE[name] - step}))
                wall = time.perf_counter() - start
                for loss, axis in LOSSES.items():
                    add({"loss": loss, "parameter": name, "method": "central", "step": d, "loss_m": "",
                         "derivative": float((plus[axis] - minus[axis]) / (2.0 * step)), "wall_s": wall})
    summarize(rows)


def summarize(rows):
    """Per loss and parameter: the adjoint beside each central difference, and how far apart."""
    print(f"\n{'loss':>8} {'parameter':>12} {'adjoint':>12} {'central (step)':>40} {'adjoint vs smallest':>20}")
    for loss in LOSSES:
        for name in GAIT_FIELDS:
            adjoint = [r["derivative"] for r in rows if (r["loss"], r["parameter"], r["method"]) == (loss, name, "adjoint")]
            central = sorted((r["step"], r["derivative"]) for r in rows
                             if (r["loss"], r["parameter"], r["method"]) == (loss, name, "central"))
            text = ", ".join(f"{v:.5g} ({d:g})" for d, v in central)
            gap = f"{100.0 * (adjoint[0] / central[0][1] - 1.0):+.2f} %" if adjoint and central and central[0][1] else "-"
            print(f"{loss:>8} {name:>12} {adjoint[0] if adjoint else float('nan'):>12.5g} {text:>40} {gap:>20}")


if __name__ == "__main__":
    main()
