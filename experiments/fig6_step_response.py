"""Seed 001, Fig. 6: chamber step response of the pressure latency model.

Runs ``softsnake step-response`` with experiments/results/ as the default output folder; any of
the command's options (--out, --supply-psi, --dt, --duration) may be given.

    python experiments/fig6_step_response.py
"""

import sys

from softsnake import cli
from softsnake.cli.common import results_folder

RESULTS_DIR = results_folder(__file__)

if __name__ == "__main__":
    # A later --out on the command line overrides this default (argparse keeps the last value).
    sys.exit(cli.main(["step-response", "--out", str(RESULTS_DIR), *sys.argv[1:]]))
