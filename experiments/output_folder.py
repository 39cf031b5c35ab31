"""The ``--out`` option the experiment scripts share."""

import argparse
from pathlib import Path

import warp as wp

RESULTS = Path(__file__).resolve().parent / "results"
"""Default output folder of the experiments: the results pages' figures and tables."""


def output_folder(doc, argv=None):
    """Parse ``[--out DIR]`` for a script whose module docstring is ``doc``, create DIR and return it.

    Also silences Warp's module-loading messages, so the script prints only its results.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS), help="output folder (default experiments/results)")
    out = Path(parser.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    wp.config.quiet = True
    return out
