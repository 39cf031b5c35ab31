"""Solver budget against results: snake gait travel, link curvature and vine tip error per Newton x linear budget.

For every budget (Newton iterations x conjugate residual iterations per Newton iteration; default
the grid {2, 4, 8} x {10, 20, 40, 80, 160} and "default", the budget of ``SolverSettings()``,
8 x 100), with the tolerances of ``SolverSettings()`` (a world stops early once converged):

- snake: one soft snake (``SnakeSimulation``, paper or coarse mesh) under the paper's gait for
  ``--seconds``: forward and lateral travel of the centre of mass, the change of the forward travel
  relative to the finest budget run (largest Newton x linear product), wall time per simulated
  second, whether it blew up (SimulationError: when), and the residual norms
  (``Solver.residual_norms``: momentum, compliant rows, contact normal rows, friction rows, in
  sqrt(kg) m) of the last step. The snake's solver is ``snake_solver``: the engine's policy (2
  substeps, warm started, tolerances), only the two iteration counts changed. (The pages
  convergence_paper_2s and convergence_coarse_5s were measured cold, before the engine warm started
  the snake; their warm_start column says so.)
- block: a stiff soft block (10 cm cube, 2x2x2 cells, Y = 1 MPa, nu = 0.3, 1000 kg/m^3, damping
  0.01 s; omega h ~ 10) dropped onto ground with mu = 0.5, 60 steps of 1/60 s with 1 substep, the
  blow-up check off: the largest particle speed in the first and the last 30 steps (a block at rest
  moves by mm/s; m/s means it went unstable), the deepest penetration of the ground, and the median
  residual norms over the steps. ``--block-variants`` adds the same block on frictionless ground,
  clamped by its bottom face (no contact), and on the ground started cold every substep:
  convergence_block_frictionless, convergence_block_clamped and convergence_block_cold.
- stand: the link of ``softsnake curvature`` (Fig. 5; ``--resolution``) on its stand at -8 and +8 psi,
  2 s, the engine's settings with the budget's iteration counts: the steady curvature of each side
  [1/m], its change over the last 0.25 s (settled: far below the differences between budgets), and
  the wall time. A static equilibrium: converged, it depends on the link's physics only.
- vine: the cluttered reference scenes 1 and 2 (seed 000's rollouts, shared/reference/vine) with
  the vine's own settings (``solver_settings``: 1 substep, warm start) and the budget's iteration
  counts: median and largest tip error against the reference [tube diameters], whether the vine
  passes every obstacle on the reference's side, and the residual norms at the end.

``--elastic-warm-start on|off`` runs the snake, the stand and the block with ``SolverSettings.elastic_warm_start``
forced on or off (file names end in _elastic or _no_elastic; by default each runs its own: the engine's "auto",
on from 3 Newton iterations, for the stand and the block, the snake's ``SNAKE_START``, off, for the gait; the
vine has no soft rows). ``--cold`` starts every substep of the snake and
vine runs cold (``warm_start=False``; file names end in _cold), to see whether a result depends on the start.

Budgets run cheapest first; after each one the CSV and a Markdown table are rewritten, so an
interrupted run keeps what it finished. Files (into --out, default experiments/results):
convergence_<tag>_snake.csv/.md, convergence_<tag>_vine.csv/.md, convergence_stand_<resolution>.csv/.md and
convergence_block.csv/.md,
tag default "<resolution>_<seconds>s".

Usage: python experiments/convergence.py [--seconds 10] [--resolution paper|coarse]
           [--budgets 2x10,4x20,default] [--skip-block] [--skip-snake] [--skip-vine] [--skip-stand] [--tag NAME]
           [--block-variants ground,frictionless,clamped,cold]
           [--momentum-balance] [--cold] [--elastic-warm-start default|on|off] [--out DIR]
"""

import math
import platform
import sys
import time

import numpy as np
import warp as wp

from softsnake.cli.common import experiment_parser, make_output_folder
from softsnake.errors import SimulationError
from softsnake.output_files import write_dict_csv
from softsnake.residuals import KINDS
from softsnake.solver_settings import SolverSettings

NEWTON = (2, 4, 8)
LINEAR = (10, 20, 40, 80, 160)
DEFAULT_BUDGETS = ",".join([f"{n}x{k}" for n in NEWTON for k in LINEAR] + ["default"])


def parse_budgets(text):
    """[(label, newton, linear)] from "2x10,8x100,default", cheapest (Newton x linear) first."""
    budgets = []
    for item in text.split(","):
        item = item.strip()
        if item == "default":
            settings = SolverSettings()
            budgets.append(("default", settings.newton_iterations, settings.linear_iterations))
            continue
        newton, linear = item.split("x")
        budgets.append((item, int(newton), int(linear)))
    return sorted(budgets, key=lambda b: (b[1] * b[2], b[1]))


def residual_columns(norms):
    if norms is None:
        return {f"res_{kind}": math.nan for kind in KINDS}
    return {f"res_{kind}": float(getattr(norms, kind)[0]) for kind in KINDS}


FAR_PAST_CONVERGED = {"newton_iterations": 64, "linear_iterations": 400, "newton_tolerance": 1e-7,
                      "linear_tolerance": 1e-6, "newton_floor": 0.0, "momentum_balance": True, "warm_start": False}
"""The reference solve of the start and budget studies (start_independence.py, vine_solver_settings.py): the
balanced iteration, cold, 64 x 400, tolerances 1e-7 / 1e-6, never stopping at the round-off floor."""

ELASTIC_CHOICES = {"default": (None, ""), "on": (True, "_elastic"), "off": (False, "_no_elastic")}
"""``--elastic-warm-start``: the value of SolverSettings.elastic_warm_start (None: the run's own) and the file
name suffix."""


def add_elastic_option(parser, runs):
    parser.add_argument("--elastic-warm-start", choices=ELASTIC_CHOICES, default="default",
                        help=f"SolverSettings.elastic_warm_start for {runs}: default (the run's own: the engine's "
                             "'auto', the snake gait's SNAKE_START), on or off (file names end in _elastic or "
                             "_no_elastic)")


def elastic_options(elastic):
    """Solver options that set elastic_warm_start to ``elastic``, or none for the run's own (None)."""
    return {} if elastic is None else {"elastic_warm_start": elastic}


def snake_run(resolution, seconds, newton, linear, balance=False, warm_start=True, elastic=None):
    from softsnake.robots.snake.simulation import SnakeSimulation

    sim = SnakeSimulation(1, resolution=resolution, seconds=seconds, newton_iterations=newton,
                          linear_iterations=linear)
    sim.solver.momentum_balance = balance
    sim.solver.warm_start = warm_start
    if elastic is not None:
        sim.solver.elastic_warm_start = elastic
    blew_up = ""
    start = time.perf_counter()
    try:
        trajectories = sim.run(progress=False)
    except SimulationError:
        trajectories = sim.trajectories
        blew_up = f"t = {trajectories.time[-1] + sim.dt:.3f} s"
    wall = time.perf_counter() - start
    simulated = float(trajectories.time[-1])
    norms = None
    if not blew_up:
        norms = sim.solver.residual_norms(sim.state, sim.control, sim.dt)
    forward, lateral = trajectories.travel()[0]
    s = sim.solver
    return {"newton_tolerance": s.newton_tolerance, "linear_tolerance": s.linear_tolerance,
            "warm_start": s.warm_start, "elastic_start": s.elastic_start_on, "substeps": s.substeps,
            "simulated_s": simulated,
            "forward_m": float(forward), "lateral_m": float(lateral),
            "wall_per_simulated_s": wall / simulated if simulated > 0 else math.nan, "blew_up": blew_up,
            **residual_columns(norms)}


def stand_run(resolution, newton, linear, balance=False, warm_start=True, elastic=None):
    from softsnake.robots.snake.curvature import simulate_curvature
    from softsnake.units import psi_to_pa

    start = time.perf_counter()
    sweep = simulate_curvature(psi_to_pa(np.array([-8.0, 8.0])), resolution=resolution, progress=False, solver_options={
        "newton_iterations": newton, "linear_iterations": linear, "momentum_balance": balance, "warm_start": warm_start,
        **elastic_options(elastic)})
    return {"curvature_minus8_per_m": float(sweep.curvature[0]), "curvature_plus8_per_m": float(sweep.curvature[1]),
            "settle_minus8_per_m": float(sweep.residual[0]), "settle_plus8_per_m": float(sweep.residual[1]),
            "wall_s": time.perf_counter() - start}


def vine_run(number, newton, linear, balance=False, warm_start=True):
    from softsnake.robots.vine.comparison import compare_with_reference
    from softsnake.robots.vine.reference import load_jitosho_rollout
    from softsnake.robots.vine.scene import load_scene
    from softsnake.robots.vine.simulation import VineBatch, rollout, specs_from_scene

    scene = load_scene(f"jitosho_cluttered_{number}")
    times, q_ref, _ = load_jitosho_rollout(number)
    batch = VineBatch(specs_from_scene(scene), solver_options={"newton_iterations": newton,
                                                               "linear_iterations": linear,
                                                               "momentum_balance": balance,
                                                               "warm_start": warm_start})
    start = time.perf_counter()
    try:
        result = rollout(batch, len(times) - 1, scene.sim.dt)
    except SimulationError:
        return {f"c{number}_blew_up": True}
    wall = time.perf_counter() - start
    error, same_side = compare_with_reference(scene, result.poses[:, 0], result.tips[:, 0], q_ref)
    norms = batch.solver.residual_norms(batch.state, batch.control, scene.sim.dt)
    return {f"c{number}_tip_median_D": float(np.median(error)), f"c{number}_tip_max_D": float(error.max()),
            f"c{number}_same_side": bool(same_side.all()), f"c{number}_wall_s": wall,
            **{f"c{number}_{key}": value for key, value in residual_columns(norms).items()}}


BLOCK_VARIANTS = ("ground", "frictionless", "clamped", "cold")
"""The block's supports: on the ground with mu = 0.5 (the page convergence_block), on frictionless ground,
or clamped (its bottom face attached to a fixed body, no contact); "cold": on the ground with mu = 0.5,
every substep started cold (warm_start=False). Which rows, and which start, an unconverged budget fails
on."""


def block_run(newton, linear, steps=60, dt=1.0 / 60.0, balance=False, variant="ground", elastic=None):
    import softsnake
    from softsnake.meshing import box_tet_mesh

    verts, tets = box_tet_mesh(size=(0.1, 0.1, 0.1), cells=(2, 2, 2))
    builder = softsnake.ModelBuilder()
    if variant == "clamped":
        first = builder.add_soft_mesh(verts, tets, 1000.0, 1.0e6, 0.3, position=(0.0, 0.0, 0.05), damping=0.01,
                                      collide="none")
        wall = builder.add_body((0.0, 0.0, 0.0), kinematic=True)
        for i in np.flatnonzero(np.isclose(verts[:, 2], verts[:, 2].min())):
            builder.add_attachment(wall, first + int(i))
    else:
        builder.add_ground(mu=0.0 if variant == "frictionless" else 0.5)
        builder.add_soft_mesh(verts, tets, 1000.0, 1.0e6, 0.3, position=(0.0, 0.0, 0.05), damping=0.01)
    model = builder.finalize("cpu")
    solver = softsnake.Solver(model, substeps=1, newton_iterations=newton, linear_iterations=linear,
                              check_finite=False, momentum_balance=balance, warm_start=variant != "cold",
                              **elastic_options(elastic))
    state, control = model.state(), model.control()
    speeds, depths, norms = [], [], []
    for _ in range(steps):
        solver.step(state, state, control, dt)
        speeds.append(float(np.abs(state.particle_qd.numpy()).max()))
        depths.append(max(0.0, -float(state.particle_q.numpy()[:, 2].min())))
        norms.append(solver.residual_norms(state, control, dt).as_dict())
    half = steps // 2
    penetration = {} if variant == "clamped" else {
        "penetration_after_step_1_mm": 1e3 * depths[0], "max_penetration_mm": 1e3 * max(depths)}
    return {"max_speed_first_half_m_s": max(speeds[:half]), "max_speed_last_half_m_s": max(speeds[half:]),
            **penetration,
            **{f"median_res_{kind}": float(np.median([n[kind][0] for n in norms])) for kind in (*KINDS, "rows")}}


def fmt(value):
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def write_outputs(out, stem, rows, header_lines):
    keys = list(dict.fromkeys(key for row in rows for key in row))
    table = [{key: row.get(key, "") for key in keys} for row in rows]
    write_dict_csv(out / f"{stem}.csv", [{key: fmt(value) for key, value in row.items()} for row in table])
    lines = [*header_lines, "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(row[key]) for key in keys) + " |" for row in table]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


def add_relative_change(rows):
    """Forward travel change [%] relative to the finest budget that finished without blowing up."""
    finished = [row for row in rows if not row["blew_up"]]
    if not finished:
        return
    finest = max(finished, key=lambda row: (row["newton"] * row["linear"], row["newton"]))
    for row in rows:
        row["forward_change_pct"] = 100.0 * (row["forward_m"] / finest["forward_m"] - 1.0)
        row["relative_to"] = finest["budget"]


def main(argv=None):
    parser = experiment_parser(__doc__, __file__)
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated time of each snake run [s]")
    parser.add_argument("--resolution", default="paper", choices=("paper", "coarse"), help="snake mesh")
    parser.add_argument("--budgets", default=DEFAULT_BUDGETS, help="NEWTONxLINEAR,... and/or default")
    parser.add_argument("--skip-block", action="store_true")
    parser.add_argument("--block-variants", default="ground", type=lambda text: text.split(","),
                        help=f"the block's supports, of {','.join(BLOCK_VARIANTS)} (default ground)")
    parser.add_argument("--skip-snake", action="store_true")
    parser.add_argument("--skip-vine", action="store_true")
    parser.add_argument("--skip-stand", action="store_true")
    parser.add_argument("--tag", default=None, help="file name tag (default <resolution>_<seconds>s)")
    parser.add_argument("--momentum-balance", action="store_true",
                        help="run with SolverSettings.momentum_balance (file names end in _balanced)")
    parser.add_argument("--cold", action="store_true",
                        help="start every substep of the snake and vine runs cold (warm_start=False; file names end "
                             "in _cold); the block's cold run is --block-variants cold")
    add_elastic_option(parser, "the snake, stand and block")
    options = parser.parse_args(argv)
    unknown = sorted(set(options.block_variants) - set(BLOCK_VARIANTS))
    if unknown:
        parser.error(f"unknown block variant(s) {', '.join(unknown)}; known: {', '.join(BLOCK_VARIANTS)}")
    balance = options.momentum_balance
    warm_start = not options.cold
    elastic, elastic_suffix = ELASTIC_CHOICES[options.elastic_warm_start]
    suffix = ("_balanced" if balance else "") + ("" if warm_start else "_cold") + elastic_suffix
    out = make_output_folder(options.out)
    budgets = parse_budgets(options.budgets)
    tag = options.tag or f"{options.resolution}_{options.seconds:g}s"
    device = wp.get_device("cpu")
    device_line = f"device: {device} ({device.name}; {platform.processor() or platform.machine()})"
    print(device_line, flush=True)
    start_note = "each run's own" if elastic is None else repr(elastic)
    common = [f"Written by experiments/convergence.py; {device_line}; warp {wp.config.version}; "
              f"elastic_warm_start: {start_note}; momentum_balance: {balance}; warm_start: {warm_start}.",
              f"Budgets run: {', '.join(label for label, _, _ in budgets)} (cheapest first).",
              ("Residual norms (res_*): Solver.residual_norms at the end of the run, world 0, sqrt(kg) m "
              "(softsnake/residuals.py).")]

    for variant in ([] if options.skip_block else options.block_variants):
        rows = []
        stem = ("convergence_block" + ("" if variant == "ground" else f"_{variant}") + ("_balanced" if balance else "")
                + elastic_suffix)
        support = {"ground": "resting on the ground (mu 0.5)", "frictionless": "resting on frictionless ground",
                   "clamped": "clamped by its bottom face (no contact)",
                   "cold": "resting on the ground (mu 0.5), every substep started cold"}[variant]
        for label, newton, linear in budgets:
            rows.append({"budget": label, "newton": newton, "linear": linear,
                         **block_run(newton, linear, balance=balance, variant=variant, elastic=elastic)})
            print(f"block {variant} " + ", ".join(f"{k} {fmt(v)}" for k, v in rows[-1].items()), flush=True)
            write_outputs(out, stem, rows, [
                f"# Stiff soft block {support}: stability and residuals per budget", "", *common,
                ("1 MPa block (10 cm, 2x2x2 cells, nu 0.3, damping 0.01 s), 60 steps of 1/60 s, 1 substep, "
                 "blow-up check off; residuals: median over the 60 steps; penetration: the deepest node below "
                 "the ground at the end of a step [mm].")])

    if not options.skip_stand:
        rows = []
        for label, newton, linear in budgets:
            rows.append({"budget": label, "newton": newton, "linear": linear,
                         **stand_run(options.resolution, newton, linear, balance, warm_start, elastic)})
            print("stand " + ", ".join(f"{k} {fmt(v)}" for k, v in rows[-1].items()), flush=True)
            write_outputs(out, f"convergence_stand_{options.resolution}{suffix}", rows, [
                f"# Link stand ({options.resolution} mesh) at -8 and +8 psi: steady curvature per budget", "",
                *common[:2], ("The stand of `softsnake curvature`, 2 s of 1/120 s frames (2 substeps), the engine's "
                          "settings with the budget's iteration counts; settle: the change over the last 0.25 s.")])

    if not options.skip_vine:
        rows = []
        for label, newton, linear in budgets:
            row = {"budget": label, "newton": newton, "linear": linear}
            for number in (1, 2):
                row.update(vine_run(number, newton, linear, balance, warm_start))
            rows.append(row)
            print("vine " + ", ".join(f"{k} {fmt(v)}" for k, v in row.items()), flush=True)
            write_outputs(out, f"convergence_{tag}_vine{suffix}", rows, [
                "# Vine, cluttered reference scenes 1 and 2: tip error per budget", "", *common,
                ("Tip error in tube diameters against seed 000's rollouts; the vine's settings (1 substep, "
                "warm start) with the budget's iteration counts.")])

    if not options.skip_snake:
        rows = []
        for label, newton, linear in budgets:
            row = {"budget": label, "newton": newton, "linear": linear,
                   **snake_run(options.resolution, options.seconds, newton, linear, balance, warm_start, elastic)}
            rows.append(row)
            add_relative_change(rows)
            print("snake " + ", ".join(f"{k} {fmt(v)}" for k, v in row.items()), flush=True)
            write_outputs(out, f"convergence_{tag}_snake{suffix}", rows, [
                f"# Snake gait ({options.resolution} mesh, {options.seconds:g} s): travel per budget", "",
                *common,
                ("forward_change_pct: forward travel relative to the finest budget finished so far (relative_to). "
                "wall_per_simulated_s: one core of a shared 2-core machine.")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
