"""The ``softsnake`` command line.

Each sub-command lives in its own module that defines ``add_arguments(parser)`` and
``run(args) -> int``; modules are imported only when their command runs, so ``softsnake --help``
stays fast and one broken command cannot break the others.
"""

import argparse
import importlib
import sys

COMMANDS = {
    "gait": ("softsnake.robots.snake.cmd_gait", "simulate snakes under the open-loop gait (USD, CSV, PNG)"),
    "curvature": ("softsnake.robots.snake.cmd_curvature", "steady link curvature against chamber pressure (Fig. 5)"),
    "step-response": ("softsnake.robots.snake.cmd_step_response", "chamber pressure step response (Fig. 6)"),
    "bench": ("softsnake.robots.snake.cmd_bench", "time per frame for links and snakes (Table II)"),
    "vine": ("softsnake.robots.vine.cmd_vine", "grow vine robots through a scene (USD, CSV, PNG)"),
    "plan": ("softsnake.robots.vine.cmd_plan", "obstacle-interaction plans for a vine scene"),
}


class UsageError(Exception):
    """A bad option or input file; reported as one line, without a traceback."""


def build_parser():
    parser = argparse.ArgumentParser(prog="softsnake", description=__doc__.splitlines()[0])
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
    module = importlib.import_module(COMMANDS[name][0])
    cmd_parser = argparse.ArgumentParser(prog=f"softsnake {name}", description=COMMANDS[name][1])
    module.add_arguments(cmd_parser)
    args = cmd_parser.parse_args(argv[1:])
    try:
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


if __name__ == "__main__":
    # Run as "python -m softsnake.cli": dispatch through the importable module so that the
    # commands' UsageError (softsnake.cli.UsageError) is the class caught in main().
    from softsnake.cli import main as _main

    sys.exit(_main())
