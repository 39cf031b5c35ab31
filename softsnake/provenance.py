"""Which softsnake computed a result: a digest of the package's own source files.

The package version (pyproject.toml's ``version``) stays the same across the commits of a working tree, so it
cannot tell two engines apart; a run continued from a saved point (``softsnake gait --resume``) must run the same
code as the run that saved it, or its files are no longer those of one run. ``source_digest`` reads every Python
source and asset file of the package as it is installed (or checked out), so any edit to the engine, a robot or
an asset changes it, and nothing else does (compiled caches and other files beside them are left out).
"""

import functools
import hashlib
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".py", ".toml")
"""The files that make up the package: its modules and its assets (pyproject.toml's package data)."""


@functools.cache
def source_digest(root=PACKAGE_ROOT):
    """The first 16 hexadecimal digits of the SHA-256 of the package's source files under ``root`` (their paths
    relative to it and their bytes, in path order)."""
    root = Path(root)
    digest = hashlib.sha256()
    files = sorted(path for path in root.rglob("*") if path.suffix in SOURCE_SUFFIXES and path.is_file()
                   and "__pycache__" not in path.parts)
    for path in files:
        name = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(name).to_bytes(8, "little") + name + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:16]
