"""tools/gpu/session.sh's stages for a gait longer than a GPU session, dry-run on the CPU (DEVICE=cpu): they run
only on a GPU machine, where a broken stage costs device time that cannot be had back.

Session 1: ``gait_start`` (the gait in the background, stopping itself after GAIT_LIMIT seconds), ``gait_collect``
(waits for it; packs its resume point in parts), ``resume_fetch`` (brings the parts back). Here: the parts go into
``.gpu/resume``. Session 2, on a fresh stash: ``stash`` keeps them, ``RESUME=1 gait_start`` goes on with
``--resume``, ``gait_collect`` finds the whole run's files. (That a resumed run's files are those of a run never
stopped, bit for bit: tests/cli/test_gait_resume.py.) The script runs from a copy of tools/gpu in a temporary
folder, as from a checkout, so that its ``.gpu/`` is that folder's.
"""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "gpu" / "session.sh"
GAIT_SECONDS = 3.0  # 360 frames: 20-40 s for one coarse snake on one core, longer than GAIT_LIMIT
GAIT_LIMIT = 10  # [s]: the start (2-4 s) and some frames


@pytest.fixture(scope="module", autouse=True)
def kernels_in_the_cache():
    """The gait must be past its start (Warp's kernels compiled: 35-47 s cold on 2 cores) when GAIT_LIMIT stops it:
    the gait's kernel modules, compiled for the CPU into Warp's kernel cache, which the script's processes read."""
    import warp as wp

    import softsnake.robots.snake.simulation  # noqa: F401  (their kernel modules, imported)

    wp.force_load(device="cpu")


def session(checkout, stash, out, *stages, **env):
    environment = {**os.environ, "PYTHON": sys.executable, "DEVICE": "cpu", "SNAKES": "1",
                   "GAIT_SECONDS": str(GAIT_SECONDS), "STASH": str(stash), "OUT": str(out), "STAGE_SECONDS": "120",
                   **{name: str(value) for name, value in env.items()}}
    done = subprocess.run(["bash", str(checkout / "tools" / "gpu" / "session.sh"), *stages], env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("setsid", "xz", "split", "sha256sum", "pkill")),
                    reason="session.sh needs setsid, xz, split, sha256sum and pkill")
def test_an_interrupted_gait_goes_on_in_a_later_session(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "tools" / "gpu").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "tools" / "gpu" / "session.sh")

    printed = session(checkout, tmp_path / "stash1", tmp_path / "out1", "gait_start", "gait_collect", "resume_fetch",
                      GAIT_LIMIT=GAIT_LIMIT)
    assert "gait_collect: exit status 124" in printed, printed  # stopped by its limit, at a frame's end
    assert "the same command with --resume goes on from there" in printed, printed
    fetched = sorted(path.name for path in (tmp_path / "out1" / "resume").iterdir())
    assert fetched == ["manifest", "part-00"], fetched

    shutil.copytree(tmp_path / "out1" / "resume", checkout / ".gpu" / "resume")
    printed = session(checkout, tmp_path / "stash2", tmp_path / "out2", "stash", "gait_start", "gait_collect",
                      RESUME=1, GAIT_LIMIT=300)
    assert "stash: resume manifest part-00" in printed, printed
    assert "gait_start: going on from gait.partial.usdc gait.resume.npz" in printed, printed
    assert "gait_collect: exit status 0" in printed, printed
    assert "going on after frame " in printed, printed
    with tarfile.open(tmp_path / "out2" / "gait.tar.gz") as packed:
        listing = packed.extractfile("gait/files.txt").read().decode()
    for name in ("gait.usdc", "trajectories.csv", "trajectories.png", "gait.gif"):
        assert f" {name}\n" in listing, listing
    assert "partial" not in listing and "resume" not in listing, listing


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("setsid", "xz", "split", "sha256sum", "pkill")),
                    reason="session.sh needs setsid, xz, split, sha256sum and pkill")
def test_gait_collect_waits_for_the_gait_it_interrupts_to_save(tmp_path):
    """gait_collect's own interrupt (the gait's GAIT_LIMIT far off): it waits for the gait to end its frame and write
    its files before it lists and packs them. On the H100 (twenty-sixth session) a fixed 60 s wait listed the
    1024-snake gait's folder before its resume point was written (~95 s), and the resume point was lost."""
    checkout = tmp_path / "checkout"
    (checkout / "tools" / "gpu").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "tools" / "gpu" / "session.sh")
    session(checkout, tmp_path / "stash", tmp_path / "out", "gait_start", GAIT_LIMIT=300)
    printed = session(checkout, tmp_path / "stash", tmp_path / "out", "gait_collect", "resume_fetch",
                      STAGE_SECONDS=GAIT_LIMIT)
    assert "interrupted (it ends its frame" in printed, printed
    assert "s after the interrupt" in printed and "gait_collect: exit status 130" in printed, printed
    with tarfile.open(tmp_path / "out" / "gait.tar.gz") as packed:
        listing = packed.extractfile("gait/files.txt").read().decode()
    for name in ("gait.partial.usdc", "trajectories.partial.csv", "gait.partial.gif", "gait.resume.npz"):
        assert f" {name}\n" in listing, listing
    assert sorted(path.name for path in (tmp_path / "out" / "resume").iterdir()) == ["manifest", "part-00"]


def test_tet_stage_dry_run(tmp_path):
    """The ``tet`` stage (gpu.md 23.4: the tetrahedra's rows stored or matrix-free, cost and agreement) on the CPU at
    its smallest: both tables printed, both CSV files packed in ``tet.tar.gz``."""
    environment = {**os.environ, "PYTHON": sys.executable, "DEVICE": "cpu", "STASH": str(tmp_path / "stash"),
                   "OUT": str(tmp_path / "out"), "STAGE_SECONDS": "120",
                   "TET_ARGS": "--cases 1 --solvers per_world --frames 1 --warmup 0 --repeats 1 --agree-seconds 0.02 "
                               "--agree-budgets 2x10"}
    done = subprocess.run(["bash", str(SCRIPT), "tet"], env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "free/stored" in done.stdout and "end apart mm" in done.stdout, done.stdout
    with tarfile.open(tmp_path / "out" / "tet.tar.gz") as packed:
        names = {Path(name).name for name in packed.getnames()}
    assert {"tetrahedron_operator_cost.csv", "tetrahedron_operator_agreement.csv"} <= names
