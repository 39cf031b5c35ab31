"""``python -m softsnake``: the same command line as the ``softsnake`` script."""

import sys

from softsnake.cli import main

if __name__ == "__main__":
    sys.exit(main())
