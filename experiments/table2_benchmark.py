"""Seed 001, Table II: time per frame for one link and for 1..10 snakes (on a GPU also 32..1024).

Runs ``softsnake bench`` at the paper's mesh resolution into experiments/results/ (bench.csv,
bench.png); any of the command's options may be added, e.g. ``--device cuda``.

    python experiments/table2_benchmark.py
"""

import sys

from softsnake import cli
from softsnake.cli.common import results_folder

RESULTS_DIR = results_folder(__file__)

if __name__ == "__main__":
    # Later options on the command line override these defaults (argparse keeps the last value).
    sys.exit(cli.main(["bench", "--resolution", "paper", "--out", str(RESULTS_DIR), *sys.argv[1:]]))
