"""The ``--workers`` option of the commands that can split a batch over CPU processes (``gait``, ``vine``, ``fit``;
softsnake.robots.workers): the same text, checks and meaning in all.

By default a CPU run of several worlds uses every core this process may use (at most one per world): the outputs
are bit for bit those of one process (tests/cli/test_gait_workers.py), and a run of a few seconds or more finishes
sooner (the main job of three snakes: 3.4 minutes in one process on a 2-core machine, 2.4 with two). Starting the
processes costs about 0.7 s."""

from softsnake.errors import UsageError
from softsnake.machine import usable_cores
from softsnake.robots.workers import shares


def add_workers_option(parser, worlds):
    """``worlds``: what one world of the command's batch is, for the help ("snake", "vine")."""
    parser.add_argument("--workers", type=int, default=None, metavar="W",
                        help=f"CPU processes that share the batch (0: one per CPU core this process may use, at most "
                             f"one per {worlds}; 1: this process alone; default: 0 on the CPU, 1 on a GPU)")


def check_workers(args, count):
    """UsageError unless ``args.workers`` is 0 or positive, and 1 unless ``args.device`` is the CPU. The default
    (None) becomes 0 for a CPU batch of ``count`` > 1 worlds on a machine that lends this process several cores,
    else 1 (no worker processes)."""
    if args.workers is None:
        args.workers = 0 if str(args.device) == "cpu" and min(count, usable_cores()) > 1 else 1
    if args.workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU core) or a positive number, got {args.workers}")
    if args.workers != 1 and str(args.device) != "cpu":
        raise UsageError(f"--workers splits a batch over CPU processes; with --device {args.device} use --workers 1")


def worker_processes(args):
    """The ``workers`` argument of a robot's worker-process batch: None (one per CPU core) for 0."""
    return args.workers or None


def parallel_speedup(args, count):
    """How many times faster a batch of ``count`` worlds runs with ``args.workers`` than in one process: the worlds
    over the largest share (``softsnake.robots.workers.shares``), the worker that finishes last (3 snakes on 2 cores:
    1.5)."""
    if args.workers == 1:
        return 1.0
    return count / max(end - begin for begin, end in shares(count, worker_count(args, count)))


def worker_count(args, count):
    """How many processes ``args.workers`` starts for a batch of ``count`` worlds (at most one per world)."""
    return max(1, min(count, args.workers or usable_cores()))
