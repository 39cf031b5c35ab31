"""``softsnake gait --resume``: a run stopped by SIGTERM (a job scheduler's) and continued writes the files of a
run never stopped, bit for bit; other options are refused in one line before anything runs.

In this process (``softsnake.cli.main``), so that the stop lands at a known frame: the signal is sent just before
frame 13's step; the frame finishes, and the run stops after it. (Ctrl-C in a real process:
tests/cli/test_runs.py.)
"""

import json
import os
import signal

import numpy as np
import pytest

from softsnake.cli import main
from softsnake.cli.gait_resume import RESUME_NAME
from softsnake.robots.snake.simulation import SnakeSimulation

RUN = ["gait", "--snakes", "2", "--seconds", "0.2"]  # 24 frames; USD every 2nd, a picture every 10th
ONE_PROCESS = ["--workers", "1"]  # two snakes on several cores run in worker processes by default
STOP_BEFORE_STEP = 12
PARTIAL = ("gait.partial.usdc", "trajectories.partial.csv", "trajectories.partial.png", "gait.partial.gif")
WHOLE = ("gait.usdc", "trajectories.csv", "trajectories.png", "gait.gif")


def usd_samples(path):
    from pxr import Usd

    stage = Usd.Stage.Open(str(path))
    samples = {}
    for prim in stage.Traverse():
        for attribute in prim.GetAttributes():
            samples[str(attribute.GetPath())] = [(code, np.asarray(attribute.Get(code)))
                                                 for code in attribute.GetTimeSamples()]
    return samples, stage.GetEndTimeCode()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    straight, resumed = root / "straight", root / "resumed"
    assert main(RUN + ONE_PROCESS + ["--out", str(straight)]) == 0

    advance = SnakeSimulation._advance

    def advance_stopped_in_frame_13(simulation, *args):
        if simulation.solver.step_count == STOP_BEFORE_STEP:
            os.kill(os.getpid(), signal.SIGTERM)
        advance(simulation, *args)

    SnakeSimulation._advance = advance_stopped_in_frame_13
    try:
        stopped = main(RUN + ONE_PROCESS + ["--out", str(resumed)])
    finally:
        SnakeSimulation._advance = advance
    kept = sorted(path.name for path in resumed.iterdir())
    with np.load(resumed / RESUME_NAME) as saved:
        settings = json.loads(str(saved["settings"]))
    return straight, resumed, stopped, kept, settings


def test_sigterm_keeps_the_partial_files_and_the_resume_point(folders):
    _, _, stopped, kept, _ = folders
    assert stopped == 130
    assert kept == sorted(PARTIAL + (RESUME_NAME,))
    with np.load(folders[1] / RESUME_NAME) as saved:
        assert int(saved["frame"]) == STOP_BEFORE_STEP + 1  # the frame in progress finished


def test_other_options_are_refused_in_one_line(folders, capsys):
    _, resumed, _, _, _ = folders
    assert main(["gait", "--snakes", "2", "--seconds", "0.3", "--out", str(resumed), "--resume"]) == 2
    assert main(RUN + ["--offset", "0.1", "--out", str(resumed), "--resume"]) == 2
    assert main(RUN + ["--substeps", "3", "--out", str(resumed), "--resume"]) == 2
    assert main(RUN + ["--out", str(resumed / "nothing"), "--resume"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("softsnake gait: error: --resume: the run in ") and " had seconds 0.2, this command 0.3; " in errors[0]
    assert " had offset [-0.3, 0.3], this command [0.1, 0.1]" in errors[1]
    assert " had substeps 2, this command 3" in errors[2]
    assert "gait.resume.npz does not exist" in errors[3]
    assert len(errors) == 4


def same_files(straight, resumed):
    """The files of a straight and of a resumed run: byte for byte, and every USD time sample the same."""
    for name in ("trajectories.csv", "gait.gif", "gait.usdc"):
        assert (straight / name).read_bytes() == (resumed / name).read_bytes(), name
    (a, a_end), (b, b_end) = usd_samples(straight / "gait.usdc"), usd_samples(resumed / "gait.usdc")
    assert a_end == b_end == 12 and a.keys() == b.keys()
    for path, samples in a.items():
        assert [code for code, _ in samples] == [code for code, _ in b[path]], path
        assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(samples, b[path])), path


def test_the_resumed_run_writes_the_files_of_a_run_never_stopped(folders):
    """Stopped in one process, resumed in two worker processes."""
    straight, resumed, _, _, _ = folders
    assert main(RUN + ["--out", str(resumed), "--resume", "--workers", "2"]) == 0
    assert sorted(path.name for path in resumed.iterdir()) == sorted(WHOLE)  # the partial files went
    same_files(straight, resumed)


def test_worker_processes_stop_after_the_frames_sent_ahead_and_go_on_in_one_process(folders, tmp_path, capsys):
    """SIGTERM to a run in two worker processes during frame 13: the workers, which ignore it, finish the frames
    they were sent ahead and hand them back; the stop point lies after those, and one process goes on from it."""
    from softsnake.robots.snake.workers import FRAMES_AHEAD, SnakeSimulationWorkers

    straight = folders[0]
    advance = SnakeSimulationWorkers._advance

    def advance_stopped_in_frame_13(simulation, *args):
        if simulation.frames_done == STOP_BEFORE_STEP:
            os.kill(os.getpid(), signal.SIGTERM)
        advance(simulation, *args)

    SnakeSimulationWorkers._advance = advance_stopped_in_frame_13
    try:
        assert main(RUN + ["--out", str(tmp_path), "--workers", "2"]) == 130
    finally:
        SnakeSimulationWorkers._advance = advance
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.endswith("; the same command with --resume goes on from there"), message
    with np.load(tmp_path / RESUME_NAME) as saved:
        assert STOP_BEFORE_STEP + 1 <= int(saved["frame"]) <= STOP_BEFORE_STEP + 1 + FRAMES_AHEAD
    assert main(RUN + ONE_PROCESS + ["--out", str(tmp_path), "--resume"]) == 0
    same_files(straight, tmp_path)


def test_a_damaged_resume_point_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / RESUME_NAME).write_bytes(b"not an npz file")
    assert main(RUN + ["--out", str(tmp_path), "--resume"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"softsnake gait: error: --resume: cannot read {tmp_path / RESUME_NAME}: ")
    assert len(error.splitlines()) == 1


def test_a_point_saved_by_other_source_code_is_refused(folders, tmp_path, capsys):
    """The package version stays the same across a working tree's commits; the source digest does not."""
    settings = dict(folders[4], **{"softsnake source": "0123456789abcdef"})
    np.savez(tmp_path / RESUME_NAME, settings=np.array(json.dumps(settings)))  # settings are checked first
    assert main(RUN + ["--out", str(tmp_path), "--resume"]) == 2
    error = capsys.readouterr().err
    assert ' had softsnake source "0123456789abcdef", this command "' in error
    assert len(error.splitlines()) == 1
