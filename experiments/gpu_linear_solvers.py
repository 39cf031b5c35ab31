"""The linear solve of a Newton iteration on the GPU, chosen by measurement (issue 13, item 3).

Each case is a real Newton system: the worlds are stepped a few frames (snakes: the gait's pressures,
the paper's budget; vines: growing in the cluttered scene), and the last iteration's system
[J M^-1 J^T + E] dlambda = rhs is solved again and again by each solver, every one captured as a CUDA
graph and replayed, 20 Jacobi-preconditioned conjugate residual iterations, no tolerance:

* per_world: ``kernels.linear_solver.cr_solve_per_world``, one thread per world, the whole solve in one
  launch;
* batched: one launch per operation over all rows of all worlds, per-world reductions
  (``softsnake.linear_solve``, 4 launches per iteration);
* block: ``cr_solve_block_per_world``, one thread block per world, the whole solve in one launch, at
  ``linear_solve.whole_solve_threads``' size and at the sizes of ``BLOCK_THREADS`` ("block:N");
* warp_cr: Warp's own ``warp.optim.linear.cr`` with ``batch_offsets`` (one subproblem per world) on
  the same operator (our J M^-1 J^T + E product as its ``matvec``, the same Jacobi preconditioner).
  It iterates every world together and guards none of its divisions: a world whose right-hand side
  is zero (one the Newton loop holds once converged) or so small that its squares underflow in
  float32 (a converging vine: ~1e-7) turns NaN. The cases here keep every world iterating (no Newton
  tolerance) and scale each right-hand side to a largest entry of 1, so that all three solve the
  same systems.

Prints ms per solve (median of --repeats timed blocks of --replays replays) and each solution's
relative residual and its difference from the first solver's (per_world for worlds of at most
``BLOCK_MAX_ROWS`` rows, batched above: one GPU thread per world takes about a second per solve of
a snake) (same iterates: float round-off).

    python experiments/gpu_linear_solvers.py [--device cuda] [--cases snake:1,snake:32,vine:1,vine:4096]

A case "coarse:N" solves the system of N coarse-mesh snakes, the mesh of ``softsnake gait``.
"""

import argparse
import statistics
import sys
import time

import numpy as np
import warp as wp
from warp.optim.linear import LinearOperator, cr

from softsnake import linear_solve
from softsnake.linear_solve import multiply_commands, solve_commands
from softsnake.solver import BLOCK_MAX_ROWS
from softsnake.robots.snake.bench import case_model, device_name
from softsnake.robots.snake.config import load_snake_config
from softsnake.robots.snake.gait import GaitParams, gait_command
from softsnake.robots.snake.robot import chamber_pressures
from softsnake.robots.snake.simulation import DT_DEFAULT, PAPER_BUDGET, snake_solver
from softsnake.robots.vine.benchmarks import spread_batch_specs
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch

ITERATIONS = 20
"""Conjugate residual iterations per solve (the paper's budget)."""
BLOCK_THREADS = (32, 128, 256, 512)
"""Block sizes tried beside ``linear_solve.whole_solve_threads``' choice ("block")."""
CHOSEN_BLOCK_THREADS = linear_solve.whole_solve_threads


@wp.kernel
def scale_add(t: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float, beta: float, z: wp.array(dtype=float)):
    """z = alpha t + beta y (Warp's matvec contract: y is not read where beta is 0, as in BLAS; Warp's CR passes
    buffers it allocated with ``wp.empty`` there, and 0 times their NaN bit patterns turned its solves NaN)."""
    i = wp.tid()
    z[i] = alpha * t[i]
    if beta != 0.0:
        z[i] = z[i] + beta * y[i]


@wp.kernel
def jacobi(x: wp.array(dtype=float), y: wp.array(dtype=float), inv_diagonal: wp.array(dtype=float), alpha: float,
           beta: float, z: wp.array(dtype=float)):
    """z = alpha D^-1 x + beta y (y not read where beta is 0, as ``scale_add``)."""
    i = wp.tid()
    z[i] = alpha * inv_diagonal[i] * x[i]
    if beta != 0.0:
        z[i] = z[i] + beta * y[i]


def snake_system(snakes, device, resolution="paper"):
    """A solver holding the last Newton system of ``snakes`` snakes of the ``resolution`` mesh (paper; coarse:
    the gait's) after 3 gait frames."""
    config = load_snake_config(resolution=resolution)
    model, handle, count = case_model(snakes, config, resolution, device)
    solver = snake_solver(model, **PAPER_BUDGET, capture_graph=False, check_finite=False)
    state, control = model.state(), model.control()
    command = gait_command(GaitParams(snake_count=count), 0.1, handle.link_count)
    control.pressure.assign(chamber_pressures(model, handle.link_channels, command))
    for _ in range(3):
        solver.step(state, state, control, DT_DEFAULT)
    return solver


def vine_system(vines, device, links=15):
    """The same for ``vines`` vines of ``links`` links growing in the cluttered scene, 20 steps."""
    scene = load_scene("jitosho_cluttered_1")
    batch = VineBatch(spread_batch_specs(scene, links, vines, np.random.default_rng(0)), device=device)
    # Every world keeps iterating (no tolerance, no stop at the round-off floor): a converged world's
    # system has a zero right-hand side, on which Warp's batched CR divides 0 by 0 (NaN in that world;
    # ours stops the world instead), and every solver would time an empty solve.
    batch.solver.capture_graph, batch.solver.newton_tolerance, batch.solver.newton_floor = False, 0.0, 0.0
    for _ in range(20):
        batch.step(scene.sim.dt)
    return batch.solver


SYSTEMS = {"snake": snake_system, "coarse": lambda snakes, device: snake_system(snakes, device, "coarse"),
           "vine": vine_system}
"""The cases' systems by name: paper-mesh snakes (Table II's), coarse-mesh snakes (the gait's), vines."""


def operator_of(solver):
    """Warp LinearOperators of the solver's system and of its Jacobi preconditioner."""
    m = solver.model
    n = m.row_count
    t = wp.zeros(n, dtype=float, device=m.device)
    largest = m.largest_world_rows

    def matvec(x, y, z, alpha, beta):
        for command in multiply_commands(solver, x, t):
            command()
        wp.launch(scale_add, n, inputs=[t, y, float(alpha), float(beta), z], device=m.device)

    def precondition(x, y, z, alpha, beta):
        wp.launch(jacobi, n, inputs=[x, y, solver.inv_diagonal, float(alpha), float(beta), z], device=m.device)

    offsets = m.row_world_start_device
    A = LinearOperator((n, n), float, m.device, matvec, batch_offsets=offsets, max_batch_length=largest)
    P = LinearOperator((n, n), float, m.device, precondition, batch_offsets=offsets, max_batch_length=largest)
    return A, P


def capture(device, run):
    """A CUDA graph of ``run`` (on the CPU, for a dry run of this script, ``run`` itself)."""
    run()  # loads the modules (a capture cannot)
    if wp.get_device(device).is_cpu:
        return run
    with wp.ScopedCapture(device=device, force_module_load=False) as scope:
        run()
    return scope.graph


def replay(graph):
    graph() if callable(graph) else wp.capture_launch(graph)


def timed(device, graph, replays, repeats):
    """Median seconds per replay."""
    replay(graph)
    wp.synchronize_device(device)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(replays):
            replay(graph)
        wp.synchronize_device(device)
        seconds.append((time.perf_counter() - start) / replays)
    return statistics.median(seconds)


def relative_residual(solver, A, x):
    """|A x - rhs| / |rhs|."""
    r = wp.zeros_like(solver.rhs)
    A.matvec(x, solver.rhs, r, 1.0, -1.0)
    return float(np.linalg.norm(r.numpy()) / max(np.linalg.norm(solver.rhs.numpy()), 1e-30))


def measure(solver, replays, repeats):
    """{variant: (seconds per solve, relative residual, max |x - x_first| / max |x_first|)}."""
    device = solver.model.device
    solver.linear_iterations, solver.linear_tolerance = ITERATIONS, 0.0
    # Scaled to a largest entry of 1: a converging vine's right-hand side is ~1e-7 sqrt(kg) m, whose
    # squares Warp's CR divides unguarded (float32 underflow, then NaN); ours guards them. The
    # scaled system has the same iterates (scaled) for every solver, so it changes no time.
    rhs = solver.rhs.numpy()
    solver.rhs.assign(rhs / max(float(np.abs(rhs).max()), 1e-30))
    A, P = operator_of(solver)
    results, reference = {}, None
    largest = solver.model.largest_world_rows
    # One GPU thread per world takes ~1 s per solve of a paper-mesh snake: only for small worlds.
    first = ("per_world",) if largest <= BLOCK_MAX_ROWS else ()
    for variant in (*first, "batched", "block", *(f"block:{t}" for t in BLOCK_THREADS), "warp_cr"):
        x = wp.zeros_like(solver.rhs)
        if variant == "warp_cr":
            state = cr(A, solver.rhs, x, tol=0.0, atol=1e-30, maxiter=ITERATIONS, M=P, check_every=0,
                       use_cuda_graph=False, run=False)

            def run():
                x.zero_()
                state()
        else:
            solver.linear_solver, _, threads = variant.partition(":")
            if threads:  # a block size other than whole_solve_threads' choice
                linear_solve.whole_solve_threads = lambda *_, threads=int(threads): threads
            commands = solve_commands(solver)
            linear_solve.whole_solve_threads = CHOSEN_BLOCK_THREADS

            def run():
                for command in commands:
                    command()
                wp.copy(x, solver.dlam)
        graph = capture(device, run)
        seconds = timed(device, graph, replays, repeats)
        solution = x.numpy()
        if reference is None:
            reference = solution
        difference = float(np.abs(solution - reference).max() / max(np.abs(reference).max(), 1e-30))
        results[variant] = (seconds, relative_residual(solver, A, x), difference)
    return results


def parse_cases(text):
    cases = []
    for item in text.split(","):
        kind, _, count = item.partition(":")
        if kind not in SYSTEMS or not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"cases are snake:N, coarse:N or vine:N, got {item!r}")
        cases.append((kind, int(count)))
    return cases


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", type=parse_cases, default=parse_cases("snake:1,snake:32,vine:1,vine:4096"))
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"device: {device_name(args.device)}; {ITERATIONS} CR iterations per solve, no tolerance; median of "
          f"{args.repeats} blocks of {args.replays} graph replays")
    print(f"{'case':>12s} {'worlds':>6s} {'rows':>9s} {'largest':>8s} | {'solver':>9s} {'ms/solve':>9s} "
          f"{'rel. res.':>9s} {'vs first':>12s}")
    for kind, count in args.cases:
        solver = SYSTEMS[kind](count, args.device)
        m = solver.model
        largest = m.largest_world_rows
        for variant, (seconds, residual, difference) in measure(solver, args.replays, args.repeats).items():
            print(f"{kind + ':' + str(count):>12s} {m.world_count:6d} {m.row_count:9d} {largest:8d} | {variant:>9s} "
                  f"{1e3 * seconds:9.3f} {residual:9.2e} {difference:12.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
