"""``provenance.source_digest``: any edit to the package's sources or assets changes it, nothing else does."""

import shutil

from softsnake.provenance import PACKAGE_ROOT, source_digest


def test_the_digest_follows_the_sources_and_assets_only(tmp_path):
    copy = tmp_path / "softsnake"
    shutil.copytree(PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    digest = source_digest(copy)
    assert digest == source_digest(PACKAGE_ROOT) and len(digest) == 16

    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "solver.cpython-312.pyc").write_bytes(b"compiled")
    (copy / "notes.txt").write_text("not part of the package")
    assert source_digest.__wrapped__(copy) == digest

    solver = copy / "solver.py"
    solver.write_text(solver.read_text() + "\n")
    assert source_digest.__wrapped__(copy) != digest
    solver.write_text(solver.read_text()[:-1])
    assert source_digest.__wrapped__(copy) == digest

    asset = next(copy.rglob("*.toml"))
    asset.write_text(asset.read_text().replace("=", " = ", 1))
    assert source_digest.__wrapped__(copy) != digest
