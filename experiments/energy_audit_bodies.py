"""Does an unconverged budget add energy to passive rigid bodies at rest, alone and jointed? The energy audit
(``energy_audit.py``) for bodies: free shapes, a hinged arm, a wheeled cart and a chain of capsules with angular
springs, each set at rest on the ground.

Each case places its bodies touching the ground (no gap, no penetration), under gravity only, and steps it with a
given budget, the blow-up check off. A passive system that starts at rest can only settle, so speed kept or gained
late in the run is energy the iteration added. Reported per case: the fastest body centre in the first and the last
third of the steps [m/s], whether the last third is above ``--rest-speed`` (default 0.01 m/s), and the largest rise
of the mechanical energy (kinetic plus gravitational) in one step after the first third [J], relative to the
bodies' weight times 1 cm (what a body dropped by a centimetre would gain).

Bodies (density 500 kg/m^3):

- ``free``: a box (5 cm cube), a sphere (2 cm radius) and a capsule (1.5 cm radius, 8 cm long) lying apart;
- ``arm``: two 10 x 4 x 4 cm boxes end to end, hinged about the horizontal axis across their joint;
- ``cart``: a 12 x 6 x 3 cm box on two cylinder wheels (2.5 cm radius, 1 cm wide), each on a hinge about its axle
  (the snake's module in shape; tests/engine_scenes.py's ``wheeled_cart``, which tests/test_energy.py steps);
- ``chain``: six capsules (1.5 cm radius, 6 cm long) end to end, hinged about the vertical with angular springs of
  0.05 N m/rad between neighbours (a vine lying on the ground).

Ground friction ``--frictions``; steps ``--dts``, one substep; budgets ``--budgets`` (Newton x linear, ``default``
the engine's); the engine's warm start, cold with ``--cold``. The CSV and the Markdown table are rewritten after every
case. Files (into --out, default experiments/results): energy_audit_bodies[_cold].csv/.md.

Usage: python experiments/energy_audit_bodies.py [--budgets 1x10,1x40,2x40,3x40,8x40,default] [--frictions 0,0.5]
           [--dts 1/120,1/30] [--steps 90] [--cold] [--out DIR]
"""

import itertools
import math
import sys
from pathlib import Path

import numpy as np

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder

from convergence import parse_budgets
from energy_audit import add_audit_options, parse_dt, regularization_options, regularization_suffix, write_audit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from engine_scenes import wheeled_cart  # noqa: E402  (the cart of tests/test_energy.py)

DENSITY = 500.0
GRAVITY = 9.81
BODIES = ("free", "arm", "cart", "chain")


LYING = (0.0, math.sin(0.25 * math.pi), 0.0, math.cos(0.25 * math.pi))
"""A quarter turn about y: a capsule's axis (its body z) along the world's x, lying on the ground."""


def build(body, mu):
    if body == "cart":
        return wheeled_cart(mu)
    b = softsnake.ModelBuilder()
    b.add_ground(mu=mu)
    if body == "free":
        box = b.add_body((0.0, 0.0, 0.025))
        b.add_shape_box(box, (0.025, 0.025, 0.025), density=DENSITY)
        ball = b.add_body((0.1, 0.0, 0.02))
        b.add_shape_sphere(ball, 0.02, density=DENSITY)
        capsule = b.add_body((0.0, 0.1, 0.015), LYING)
        b.add_shape_capsule(capsule, 0.015, 0.025, density=DENSITY)
    elif body == "arm":
        first = b.add_body((0.05, 0.0, 0.02))
        b.add_shape_box(first, (0.05, 0.02, 0.02), density=DENSITY)
        second = b.add_body((0.15, 0.0, 0.02))
        b.add_shape_box(second, (0.05, 0.02, 0.02), density=DENSITY)
        b.add_hinge(first, second, (0.1, 0.0, 0.02), (0.0, 1.0, 0.0))
    elif body == "chain":
        radius, half = 0.015, 0.015
        links = []
        for k in range(6):
            link = b.add_body((0.06 * k + 0.03, 0.0, radius), LYING)
            b.add_shape_capsule(link, radius, half, density=DENSITY)
            links.append(link)
        for k in range(5):
            joint = (0.06 * (k + 1), 0.0, radius)
            b.add_hinge(links[k], links[k + 1], joint, (0.0, 0.0, 1.0))
            b.add_angular_spring(links[k], links[k + 1], (0.0, 0.0, 1.0), stiffness=0.05)
    else:
        raise ValueError(f"unknown body {body!r}")
    return b.finalize("cpu")


def mechanical_energy(model, state):
    """Kinetic (``Model.kinetic_energy``: translation and rotation) plus gravitational energy of the bodies [J]."""
    mass = 1.0 / model.body_inv_mass.numpy().astype(np.float64)
    height = state.body_q.numpy().astype(np.float64)[:, 2]
    return float(model.kinetic_energy(state).sum() + GRAVITY * (mass * height).sum())


def run_case(model, settings, dt, steps, warm_start):
    solver = softsnake.Solver(model, substeps=1, warm_start=warm_start, check_finite=False, **settings)
    state, control = model.state(), model.control()
    weight = GRAVITY * float((1.0 / model.body_inv_mass.numpy().astype(np.float64)).sum())
    speeds, energies = [], [mechanical_energy(model, state)]
    for _ in range(steps):
        solver.step(state, state, control, dt)
        speeds.append(float(np.linalg.norm(state.body_qd.numpy()[:, :3], axis=1).max()))
        energies.append(mechanical_energy(model, state))
    speeds = np.nan_to_num(np.asarray(speeds), nan=np.inf)
    rises = np.diff(np.nan_to_num(np.asarray(energies), nan=np.inf))[steps // 3:]
    return float(speeds[: steps // 3].max()), float(speeds[-(steps // 3):].max()), float(rises.max()) / (0.01 * weight)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    add_audit_options(parser, "1x10,1x40,2x40,3x40,8x40,default")
    parser.add_argument("--bodies", default=",".join(BODIES))
    args = parser.parse_args(argv)
    bodies = args.bodies.split(",")
    for body in bodies:
        if body not in BODIES:
            parser.error(f"--bodies: unknown body {body!r} (choose from {', '.join(BODIES)})")
    out = make_output_folder(args.out)
    budgets = parse_budgets(args.budgets)
    frictions = [float(x) for x in args.frictions.split(",")]
    dts = [(text, parse_dt(text)) for text in args.dts.split(",")]
    stem = "energy_audit_bodies" + ("_cold" if args.cold else "") + regularization_suffix(args)
    rows = []
    for body, mu, (dt_text, dt), (label, newton, linear) in itertools.product(bodies, frictions, dts, budgets):
        settings = {} if label == "default" else {"newton_iterations": newton, "linear_iterations": linear}
        settings.update(regularization_options(args.contact_regularization))
        first, last, rise = run_case(build(body, mu), settings, dt, args.steps, not args.cold)
        rows.append({"body": body, "mu": mu, "dt_s": dt_text, "budget": label, "max_speed_first_third_m_s": first,
                     "max_speed_last_third_m_s": last, "largest_energy_rise_late_per_cm_drop": rise,
                     "at_rest": last <= args.rest_speed})
        write_audit(out, stem, rows, f"Energy audit: passive rigid bodies at rest under short budgets "
                    f"({'cold' if args.cold else 'warm'} start)", "energy_audit_bodies.py", args, "fastest body centre",
                    " Energy rise: the largest one-step rise of kinetic plus gravitational energy after the first "
                    "third, over the bodies' weight times 1 cm.")
        print(f"{body} mu={mu:g} dt={dt_text} {label}: first {first:.3g} last {last:.3g} m/s rise {rise:.3g}"
              f"{'' if rows[-1]['at_rest'] else '  NOT AT REST'}", flush=True)
    print(f"{len(rows)} cases, {sum(not row['at_rest'] for row in rows)} not at rest; wrote {out / stem}.csv/.md")


if __name__ == "__main__":
    main()
