"""Where the robots' shipped files are: the snake's parameters and the vine scenes, in
``softsnake/assets/<robot>/`` (package data, the same in a checkout and in an installed copy)."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The ``softsnake`` package folder."""

REPOSITORY_ROOT = PACKAGE_DIR.parent
"""The folder that holds the package: the repository root in a source checkout (where ``../shared``
with the reference data is looked for)."""


def asset_folder(robot):
    """The folder of the shipped files of ``robot`` ("snake" or "vine")."""
    return PACKAGE_DIR / "assets" / robot
