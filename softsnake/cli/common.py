"""What the commands and the experiment scripts share: option checks, the device check and the
output folder. Every failure is a ``UsageError`` with a one-line message naming the option."""

import argparse
import math
import re
from pathlib import Path

import warp as wp

from softsnake.errors import ConfigError, UsageError


def check_device(device):
    """UsageError unless ``device`` is "cpu" or a CUDA device that exists."""
    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise UsageError(f"--device must be cpu or cuda, got {device!r}")
    if not wp.is_cuda_available():
        raise UsageError(f"--device {device}: no CUDA GPU is available on this machine")


def check_positive(option, value):
    """UsageError unless ``value`` of ``option`` (e.g. "--seconds") is a positive finite number."""
    if not (math.isfinite(value) and value > 0.0):
        raise UsageError(f"{option} must be a positive number, got {value}")


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
    """The ``--out`` folder as a Path, checked but not created yet (UsageError if it is a file)."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    return out


def make_output_folder(path):
    """Create the ``--out`` folder (and its parents) if needed and return it as a Path."""
    out = output_folder(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder: {exc.strerror}") from None
    return out


def safe_file_stem(name):
    """``name`` (a scene's, say) as a file name stem: every character but letters, digits, ``_``,
    ``.`` and ``-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def results_folder(script):
    """The ``results/`` folder beside an experiment script (``script``: its ``__file__``): where
    the results pages' figures and tables are."""
    return Path(script).resolve().parent / "results"


def experiment_parser(doc, script):
    """The argument parser of an experiment script: described by the first line of its docstring
    ``doc``, with ``--out`` defaulting to ``results_folder(script)``. Warp's module-loading
    messages are silenced, so the script prints only its results."""
    wp.config.quiet = True
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=str(results_folder(script)), help="output folder (default: experiments/results)")
    return parser


def experiment_output_folder(doc, script, argv=None):
    """Parse ``[--out DIR]`` for an experiment script (see ``experiment_parser``), create DIR and
    return it."""
    return make_output_folder(experiment_parser(doc, script).parse_args(argv).out)
