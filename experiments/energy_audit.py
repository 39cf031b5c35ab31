"""Does an unconverged budget add energy to a passive body at rest? A sweep over bodies, materials, step
lengths and short budgets.

Each case sets a body at rest on the ground (no actuation, gravity only) and steps it with an
unconverged budget, the blow-up check off; a passive body that starts at rest can only settle, so any
speed it keeps or gains late in the run is energy the iteration added. Reported per case: the fastest
node (or body point's centre) in the last third of the steps [m/s] and whether it is above
``--rest-speed`` (default 0.01 m/s: the settling of these bodies leaves mm/s at most).

Bodies: a soft cube (10 cm, 2x2x2 cells), a soft bar lying down (20 x 4 x 4 cm, 4x1x1 cells), a soft
column standing (4 x 4 x 16 cm, 1x1x4 cells), all 1000 kg/m^3 with 0.01 s damping, and a rigid box
(5 cm, 500 kg/m^3). Soft bodies at Young's moduli ``--moduli`` and Poisson ratios ``--poisson``; ground
friction ``--frictions``; steps ``--dts``, one substep; budgets ``--budgets`` (Newton x linear); the
engine's warm start (``SolverSettings.elastic_warm_start`` "auto": the elastic warm start from 3 Newton
iterations on), cold with ``--cold``, or with the elastic warm start forced by ``--elastic-warm-start on|off``.

The CSV and the Markdown table are rewritten after every case, so an interrupted run keeps what it
finished. Files (into --out, default experiments/results): energy_audit[_cold|_elastic|_no_elastic].csv/.md.

Usage: python experiments/energy_audit.py [--budgets 1x10,1x40,2x40,2x160,3x40,4x160,8x40] [--moduli 1e5,1e6,1e8]
           [--poisson 0.3,0.49] [--frictions 0,0.5] [--dts 1/120,1/30] [--steps 90] [--cold | --elastic-warm-start on|off]
           [--out DIR]
"""

import itertools
import platform

import numpy as np
import warp as wp

import softsnake
from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.meshing import box_tet_mesh

from convergence import ELASTIC_CHOICES, add_elastic_option, elastic_options, parse_budgets, write_outputs

SOFT_BODIES = {"cube": ((0.1, 0.1, 0.1), (2, 2, 2)), "bar": ((0.2, 0.04, 0.04), (4, 1, 1)),
               "column": ((0.04, 0.04, 0.16), (1, 1, 4))}


def build(body, modulus, poisson, mu):
    builder = softsnake.ModelBuilder()
    builder.add_ground(mu=mu)
    if body == "box":
        box = builder.add_body((0.0, 0.0, 0.025))
        builder.add_shape_box(box, (0.025, 0.025, 0.025), density=500.0)
    else:
        size, cells = SOFT_BODIES[body]
        vertices, tets = box_tet_mesh(size=size, cells=cells)
        builder.add_soft_mesh(vertices, tets, 1000.0, modulus, poisson, position=(0.0, 0.0, 0.5 * size[2]),
                              damping=0.01)
    return builder.finalize("cpu")


def fastest_point(state):
    speeds = [0.0]
    if state.particle_qd.shape[0]:
        speeds.append(float(np.linalg.norm(state.particle_qd.numpy(), axis=1).max()))
    if state.body_qd.shape[0]:
        speeds.append(float(np.linalg.norm(state.body_qd.numpy()[:, :3], axis=1).max()))
    return max(speeds)


def run_case(model, newton, linear, dt, steps, warm_start, elastic=None, regularization=None):
    solver = softsnake.Solver(model, substeps=1, newton_iterations=newton, linear_iterations=linear,
                              warm_start=warm_start, check_finite=False, **elastic_options(elastic),
                              **regularization_options(regularization))
    state, control = model.state(), model.control()
    speeds = []
    for _ in range(steps):
        solver.step(state, state, control, dt)
        speeds.append(fastest_point(state))
    speeds = np.nan_to_num(np.asarray(speeds), nan=np.inf)
    return float(speeds[: steps // 3].max()), float(speeds[-(steps // 3):].max())


def parse_dt(text):
    if "/" in text:
        numerator, denominator = text.split("/")
        return float(numerator) / float(denominator)
    return float(text)


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    add_audit_options(parser, "1x10,1x40,2x40,2x160,3x40,4x160,8x40")
    parser.add_argument("--moduli", default="1e5,1e6,1e8", help="Young's moduli of the soft bodies [Pa]")
    parser.add_argument("--poisson", default="0.3,0.49", help="Poisson ratios of the soft bodies")
    add_elastic_option(parser, "the warm start")
    args = parser.parse_args(argv)
    if args.cold and args.elastic_warm_start != "default":
        parser.error("--elastic-warm-start needs the warm start: leave out --cold")
    elastic, elastic_suffix = ELASTIC_CHOICES[args.elastic_warm_start]
    out = make_output_folder(args.out)
    budgets = parse_budgets(args.budgets)
    moduli = [float(x) for x in args.moduli.split(",")]
    ratios = [float(x) for x in args.poisson.split(",")]
    frictions = [float(x) for x in args.frictions.split(",")]
    dts = [(text, parse_dt(text)) for text in args.dts.split(",")]
    cases = [(body, modulus, ratio) for body in SOFT_BODIES for modulus in moduli for ratio in ratios]
    cases.append(("box", float("nan"), float("nan")))
    stem = "energy_audit" + ("_cold" if args.cold else elastic_suffix) + regularization_suffix(args)
    start_name = "cold" if args.cold else {"default": "warm; elastic warm start from 3 Newton iterations",
                                           "on": "warm, elastic warm start", "off": "warm, no elastic warm start"}[
                                               args.elastic_warm_start]
    rows = []
    for (body, modulus, ratio), mu, (dt_text, dt), (label, newton, linear) in itertools.product(
            cases, frictions, dts, budgets):
        model = build(body, modulus, ratio, mu)
        first, last = run_case(model, newton, linear, dt, args.steps, not args.cold, elastic,
                               args.contact_regularization)
        rows.append({"body": body, "young_pa": modulus, "poisson": ratio, "mu": mu, "dt_s": dt_text,
                     "budget": label, "max_speed_first_third_m_s": first, "max_speed_last_third_m_s": last,
                     "at_rest": last <= args.rest_speed})
        write_audit(out, stem, rows, f"Energy audit: passive bodies at rest under unconverged budgets ({start_name} "
                    "start)", "energy_audit.py", args, "fastest point")
        print(f"{body} Y={modulus:g} nu={ratio:g} mu={mu:g} dt={dt_text} {label}: last third {last:.3g} m/s"
              f"{'' if rows[-1]['at_rest'] else '  NOT AT REST'}", flush=True)
    print(f"{len(rows)} cases, {sum(not row['at_rest'] for row in rows)} not at rest; wrote {out / stem}.csv/.md")


def add_audit_options(parser, budgets):
    """The options every audit takes: --budgets (default ``budgets``), --frictions, --dts, --steps, --rest-speed,
    --cold, --contact-regularization."""
    parser.add_argument("--budgets", default=budgets, help="NEWTONxLINEAR,...")
    parser.add_argument("--frictions", default="0,0.5", help="ground friction coefficients")
    parser.add_argument("--dts", default="1/120,1/30", help="step lengths [s] (one substep)")
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--rest-speed", type=float, default=0.01, help="fastest speed in the last third that "
                        "still counts as at rest [m/s]")
    parser.add_argument("--cold", action="store_true", help="start every substep cold (warm_start=False)")
    parser.add_argument("--contact-regularization", type=float, default=None,
                        help="SolverSettings.contact_regularization (default: the engine's); files end in _r<value>")


def regularization_options(regularization):
    """Solver keywords for ``--contact-regularization`` (none for the engine's default)."""
    return {} if regularization is None else {"contact_regularization": regularization}


def regularization_suffix(args):
    """The file name ending of a run with ``--contact-regularization`` ("" for the engine's default)."""
    return "" if args.contact_regularization is None else f"_r{args.contact_regularization:g}"


def write_audit(out, stem, rows, title, script, args, fastest, note=""):
    """Write an audit's rows (each with "at_rest") as ``stem``.csv/.md into ``out``, the Markdown under ``title``
    with the device, the run's ``args.steps`` and ``args.rest_speed``, what ``fastest`` measures, and ``note``."""
    device = wp.get_device("cpu")
    moving = sum(not row["at_rest"] for row in rows)
    header = [f"# {title}", "",
              f"Written by experiments/{script}; device: {device.alias} ({platform.machine()}); "
              f"warp {wp.config.version}. {args.steps} steps of one substep, blow-up check off; at rest: the "
              f"{fastest} in the last third of the steps at most {args.rest_speed} m/s.{note}",
              f"Cases run: {len(rows)}; not at rest: **{moving}**."]
    write_outputs(out, stem, rows, header)


if __name__ == "__main__":
    main()
