"""What the commands and the experiment scripts share: option checks, the device check, the output
folder, the size of a run and Warp's console output. Every failure is a ``UsageError`` with a
one-line message naming the option, raised before any computation starts."""

import argparse
import math
import os
import re
import tempfile
from pathlib import Path

import warp as wp

from softsnake.console import quiet_warp, start_warp
from softsnake.errors import ConfigError, UsageError

__all__ = ["quiet_warp", "start_warp", "check_device", "check_positive", "check_at_least", "output_folder",
           "make_output_folder", "available_memory", "duration_text", "check_run_size", "safe_file_stem",
           "results_folder", "experiment_parser", "experiment_output_folder"]

RUN_MEMORY_SHARE = 0.8
"""Largest share of the machine's available memory a run may plan to hold [-]."""

RUN_WALL_TIME_MAX = 7 * 24 * 3600.0
"""Longest estimated wall time a command starts [s]: a week."""


def check_device(device, verbose=False):
    """UsageError unless ``device`` is "cpu" or a CUDA device that exists (the same message in every
    command); starts Warp quietly (``start_warp``)."""
    device = str(device)
    if device != "cpu" and not re.fullmatch(r"cuda(:\d+)?", device):
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    start_warp(verbose)
    if device == "cpu":
        return
    if not wp.is_cuda_available():
        raise UsageError(f"--device {device}: no CUDA GPU is available on this machine (use --device cpu)")
    if not wp.is_device_available(device):
        raise UsageError(f"--device {device}: no such CUDA device (this machine has "
                         f"{wp.get_cuda_device_count()})")


def check_positive(option, value):
    """UsageError unless ``value`` of ``option`` (e.g. "--seconds") is a positive finite number."""
    if not (math.isfinite(value) and value > 0.0):
        raise UsageError(f"{option} must be a positive number, got {value}")


def add_budget_option(parser, steps, default):
    """``--budget NxL`` (read by ``parse_budget``): the solver budget of ``steps`` (e.g. "per substep"), its
    ``default`` described for the help."""
    parser.add_argument("--budget", default=None, metavar="NxL",
                        help=f"solver budget {steps}: N Newton x L conjugate residual iterations at most "
                             f"(default: {default})")


POSITION_SETTINGS = {"auto": "auto", "compensated": True, "float32": False}
"""``add_positions_option``'s choices: the value of ``SolverSettings.compensated_positions`` of each."""


def add_positions_option(parser):
    """``--compensated`` / ``--float32`` (an experiment script's): force ``SolverSettings.compensated_positions`` on or
    off; neither keeps the engine's "auto" (on from substeps of 1/600 s). ``args.positions`` holds the choice, a key
    of ``POSITION_SETTINGS``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--compensated", dest="positions", action="store_const", const="compensated", default="auto",
                       help="keep positions as float32 pairs at every substep (SolverSettings.compensated_positions)")
    group.add_argument("--float32", dest="positions", action="store_const", const="float32",
                       help="float32 positions at every substep, the engine before its 'auto' compensation")


def positions_suffix(args):
    """The file-name ending (``_compensated``, ``_float32``, or nothing for "auto") and the option as typed."""
    return ("", "") if args.positions == "auto" else (f"_{args.positions}", f" --{args.positions}")


def parse_budget(text, default):
    """A solver budget {"newton_iterations": N, "linear_iterations": L} from "NxL" (``--budget``); None gives a copy
    of ``default``. UsageError naming the option unless N and L are whole numbers of at least 1."""
    if text is None:
        return dict(default)
    newton, _, linear = text.lower().partition("x")
    try:
        budget = {"newton_iterations": int(newton), "linear_iterations": int(linear)}
    except ValueError:
        raise UsageError(f"--budget must be NxL with whole numbers N and L (e.g. 16x160), got {text!r}") from None
    if min(budget.values()) < 1:
        raise UsageError(f"--budget {text}: N and L must be at least 1")
    return budget


def check_at_least(option, value, minimum):
    """UsageError unless the integer ``value`` of ``option`` is at least ``minimum``."""
    if value < minimum:
        raise UsageError(f"{option} must be at least {minimum}, got {value}")


def add_snake_config_option(parser):
    """``--config FILE``: the snake parameter file of a snake command (default: the shipped one)."""
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="snake parameter file, laid out as softsnake/assets/snake/snake.toml (default: that file)")


def snake_config(args):
    """The ``SnakeConfig`` of ``--config`` (the shipped one if not given) at ``--resolution``; UsageError
    with the file's one-line message if it cannot be used."""
    from softsnake.robots.snake.config import load_snake_config  # only the snake commands need it

    try:
        return load_snake_config(args.config, resolution=args.resolution)
    except ConfigError as exc:
        raise UsageError(f"--config: {exc}") from None


def output_folder(path):
    """The ``--out`` folder as a Path, checked but not created (UsageError if it or a parent is a file)."""
    out = Path(path)
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            what = "is a file" if folder == out else f"lies under {folder}, which is a file"
            raise UsageError(f"--out {out} {what}, not a folder")
    return out


def make_output_folder(path):
    """Create the ``--out`` folder (and its parents) if needed, check that files can be written in it,
    and return it as a Path. Commands call it before they compute anything."""
    out = output_folder(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write files there ({exc.strerror or exc})") from None
    return out


def available_memory():
    """Memory this process may still use [B]: MemAvailable of /proc/meminfo, else the physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return math.inf


def duration_text(seconds):
    """A duration for messages: seconds, minutes, hours or days, 3 significant digits."""
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2.0 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def check_run_size(options, memory_bytes, wall_seconds=None):
    """UsageError unless a run fits the machine: ``memory_bytes`` [B], what it will hold, at most
    RUN_MEMORY_SHARE of the available memory, and ``wall_seconds`` [s], its estimated wall time
    (None: unknown, e.g. on a GPU), at most RUN_WALL_TIME_MAX. ``options``: the options that set
    the size, as the message names them (e.g. "--seconds 1e+09")."""
    available = available_memory()
    if memory_bytes > RUN_MEMORY_SHARE * available:
        raise UsageError(f"{options}: the run would need about {memory_bytes / 2**30:.3g} GiB of memory, "
                         f"more than this machine has free ({available / 2**30:.3g} GiB); shorten it")
    if wall_seconds is not None and wall_seconds > RUN_WALL_TIME_MAX:
        raise UsageError(f"{options}: the run would take about {duration_text(wall_seconds)} on this machine, "
                         f"more than {duration_text(RUN_WALL_TIME_MAX)}; shorten it")


def safe_file_stem(name):
    """``name`` (a scene's, say) as a file name stem: every character but letters, digits, ``_``,
    ``.`` and ``-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def results_folder(script):
    """The ``results/`` folder beside an experiment script (``script``: its ``__file__``): where
    the results pages' figures and tables are."""
    return Path(script).resolve().parent / "results"


def positive_int_list(text):
    """Comma-separated positive integers, an experiment option's value ("1,8,64")."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def float_list(text):
    """Comma-separated numbers, an experiment option's value ("0,10,100")."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    return values


def chosen_variants(parser, text, known):
    """The names a ``--variants`` option chose (comma-separated ``text``; None: every name in ``known``), in the
    order given; an unknown name is the parser's one-line error, listing the known ones."""
    names = list(known) if text is None else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def experiment_parser(doc, script):
    """The argument parser of an experiment script: described by the first line of its docstring
    ``doc``, with ``--out`` defaulting to ``results_folder(script)``. Warp's module-loading
    messages are silenced, so the script prints only its results."""
    quiet_warp()
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=str(results_folder(script)), help="output folder (default: experiments/results)")
    return parser


def experiment_output_folder(doc, script, argv=None):
    """Parse ``[--out DIR]`` for an experiment script (see ``experiment_parser``), create DIR and
    return it."""
    return make_output_folder(experiment_parser(doc, script).parse_args(argv).out)
