"""Where the robots' shipped files are: the snake's parameters and the vine scenes live in
``assets/<robot>/`` beside the package in a source checkout, and in ``softsnake/assets/<robot>/``
in an installed copy (pyproject maps the top-level ``assets/`` folder there)."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The ``softsnake`` package folder."""

REPOSITORY_ROOT = PACKAGE_DIR.parent
"""The folder that holds the package: the repository root in a source checkout."""


def asset_folders(robot):
    """Folders searched, in order, for the shipped files of ``robot`` ("snake" or "vine")."""
    return [REPOSITORY_ROOT / "assets" / robot, PACKAGE_DIR / "assets" / robot]
