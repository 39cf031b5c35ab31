"""The ``--workers`` option of the commands that can split a batch over CPU processes (``gait``, ``vine``;
softsnake.robots.workers): the same text, checks and meaning in both."""

from softsnake.errors import UsageError
from softsnake.machine import usable_cores


def add_workers_option(parser):
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="CPU processes that share the batch (default 1; 0: one per CPU core this process may use)")


def check_workers(args):
    """UsageError unless ``args.workers`` is 0 or positive, and 1 unless ``args.device`` is the CPU."""
    if args.workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU core) or a positive number, got {args.workers}")
    if args.workers != 1 and str(args.device) != "cpu":
        raise UsageError(f"--workers splits a batch over CPU processes; with --device {args.device} use --workers 1")


def worker_processes(args):
    """The ``workers`` argument of a robot's worker-process batch: None (one per CPU core) for 0."""
    return args.workers or None


def cores_used(args, count):
    """CPU cores a batch of ``count`` worlds runs on with ``args.workers`` (at most one per world)."""
    return 1 if args.workers == 1 else max(1, min(count, args.workers or usable_cores()))
