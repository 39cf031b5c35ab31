"""Seed 001, Fig. 5: steady link curvature against chamber over-pressure, -10 to 10 psi.

Runs ``softsnake curvature`` (one stand link per pressure, one batch) at the paper's mesh
resolution into experiments/results/ (curvature.csv, curvature.png); any of the command's options
may be added.

    python experiments/fig5_curvature.py
    python experiments/fig5_curvature.py --resolution coarse --out experiments/results/curvature_coarse
"""

import sys

from softsnake import cli
from softsnake.cli.common import results_folder

RESULTS_DIR = results_folder(__file__)

if __name__ == "__main__":
    # Later options on the command line override these defaults (argparse keeps the last value).
    sys.exit(cli.main(["curvature", "--resolution", "paper", "--out", str(RESULTS_DIR), *sys.argv[1:]]))
