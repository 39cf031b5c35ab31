"""The softsnake command line.

Each sub-command lives in its own module of this package that defines ``add_arguments(parser)``
and ``run(args) -> int``; a command module only parses and checks its options, calls the robot
packages' library functions, prints messages and writes files. Modules are imported only when
their command runs, so ``softsnake --help`` stays fast and one broken command cannot break the
others.

A job scheduler's SIGTERM stops a command as Ctrl-C does (a KeyboardInterrupt: the command keeps what it computed
and exits with status 130), unless the process ignores SIGTERM.
"""

import argparse
import importlib
import signal
import sys

from softsnake.errors import UsageError
from softsnake.interrupts import signal_handlers

DESCRIPTION = ("Simulate pneumatic soft robots (the four-link soft snake and the vine robot) with softsnake's "
               "constraint-dynamics engine on NVIDIA Warp. Run 'softsnake COMMAND --help' for a command's options.")
EPILOG = "The main job: softsnake gait --out results (three snakes for 10 s; writes a CSV, a PNG, a USD file and a GIF)."

COMMANDS = {
    "gait": ("softsnake.cli.gait", "simulate snakes under the open-loop gait (USD, CSV, PNG, GIF)"),
    "curvature": ("softsnake.cli.curvature", "steady link curvature against chamber pressure (Fig. 5)"),
    "step-response": ("softsnake.cli.step_response", "chamber pressure step response (Fig. 6)"),
    "bench": ("softsnake.cli.bench", "time per frame for links and snakes (Table II)"),
    "vine": ("softsnake.cli.vine", "grow vine robots through a scene (USD, CSV, PNG, GIF)"),
    "plan": ("softsnake.cli.plan", "obstacle-interaction plans for a vine scene"),
    "fit": ("softsnake.cli.fit", "fit a vine stiffness model to the real videos with gradients (seed 003)"),
}


def version():
    """softsnake's version, from the installed package's metadata (pyproject.toml)."""
    from softsnake import __version__

    return __version__


def _terminated(_number, _frame):
    raise KeyboardInterrupt


def sigterm_as_interrupt():
    """Context manager: SIGTERM raises KeyboardInterrupt inside the block (in the main thread, where its handler is
    the default)."""
    return signal_handlers((signal.SIGTERM,), _terminated, replaces=lambda current: current is signal.SIG_DFL)


def build_parser():
    parser = argparse.ArgumentParser(prog="softsnake", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"softsnake {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text)
        cmd.set_defaults(_module=module_name)
    return parser, sub


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, sub = build_parser()
    # Parse the command name first, then let that command's module add its own options.
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv or ["--help"])
        return 2
    name = argv[0]
    try:
        module = importlib.import_module(COMMANDS[name][0])
        cmd_parser = argparse.ArgumentParser(prog=f"softsnake {name}", description=COMMANDS[name][1])
        module.add_arguments(cmd_parser)
        cmd_parser.add_argument("--verbose", action="store_true",
                                help="also show Warp's start-up banner, kernel module loads and CUDA driver messages")
        args = cmd_parser.parse_args(argv[1:])
        from .common import quiet_warp

        quiet_warp(args.verbose)
        with sigterm_as_interrupt():
            return int(module.run(args) or 0)
    except UsageError as exc:
        print(f"softsnake {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"softsnake {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (e.g. "| head"): not an error of the command.
        sys.stderr.close()
        return 0
