"""Command runs as a user meets them, in real processes: what a CPU run prints, and what an
interrupted run (Ctrl-C) leaves behind."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from softsnake.robots.snake.trajectories import read_trajectories_csv, trajectory_columns

# What `softsnake gait` prints on standard output, line by line (softsnake.cli.gait).
GAIT_LINES = [
    r"\d+ snake\(s\), (coarse|paper) mesh, [\d.e+-]+ s, latency (on|off): \d+ frames of [\d.]+ s, about .+ on this CPU",
    r"simulated \d+ frames in [\d.]+ s wall time \([\d.]+ ms per frame\)",
    r"centre-of-mass travel of each snake \(body length [\d.]+ m\), heading change averaged over the last [\d.]+ s:",
    r"  snake +forward \[m\] +lateral \[m\] +distance \[m\] +body lengths +heading change \[deg\]",
    r"  snake \d+.* [+-][\d.]+ +[+-][\d.]+ +[\d.]+ +[\d.]+ +[+-][\d.]+",
    r"wrote .*",
]


def softsnake(*argv, cwd, **options):
    return subprocess.Popen([sys.executable, "-m", "softsnake", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **options)


def test_stdout_of_a_cpu_run_holds_only_softsnake_lines(tmp_path):
    process = softsnake("gait", "--snakes", "2", "--seconds", "0.1", "--no-usd", "--no-video", "--out", "out",
                        cwd=tmp_path)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 7, out
    for line in lines:
        assert any(re.fullmatch(pattern, line) for pattern in GAIT_LINES), f"not softsnake's: {line!r}"
    # Nothing from Warp on either stream: no banner, no module loads, no CUDA driver warning; and
    # no progress notes for a run this short.
    assert "Warp" not in out + err and "Module" not in out + err
    assert err == ""


def test_verbose_brings_warps_messages_back(tmp_path):
    process = softsnake("gait", "--snakes", "1", "--seconds", "0.02", "--no-usd", "--no-video", "--verbose",
                        "--out", "out", cwd=tmp_path)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert "Warp" in out + err


def _wait_for_start(process):
    """Wait for the first line of the process's standard output: the run's start line, printed
    once the model is built and before the first step."""
    line = process.stdout.readline()
    assert line, "the command ended before it started its run"
    return line


def test_interrupted_gait_keeps_a_readable_partial_usd_and_csv(tmp_path):
    process = softsnake("gait", "--snakes", "2", "--seconds", "30", "--out", "out", cwd=tmp_path)
    _wait_for_start(process)
    time.sleep(15.0)  # some frames: at least two of the animation (one every few frames)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    message = err.strip().splitlines()[-1]
    out_folder = tmp_path / "out"
    for name in ("gait.partial.usdc", "trajectories.partial.csv", "trajectories.partial.png", "gait.partial.gif"):
        assert (out_folder / name).is_file(), name
        assert str(os.path.join("out", name)) in message, message
    assert not (out_folder / "trajectories.csv").exists() and not (out_folder / "gait.usdc").exists()

    reached = float(re.search(r"interrupted at t = ([\d.]+) s", message).group(1))
    assert 0.0 < reached < 30.0
    header = (out_folder / "trajectories.partial.csv").read_text().splitlines()[0]
    assert header.split(",") == trajectory_columns(4)
    times, com, curvature = read_trajectories_csv(out_folder / "trajectories.partial.csv")
    assert times[-1] == pytest.approx(reached, abs=1e-3)  # the message gives 3 decimals
    assert com.shape[1] == 2 and np.all(np.isfinite(com)) and np.all(np.isfinite(curvature))

    from pxr import Usd

    stage = Usd.Stage.Open(str(out_folder / "gait.partial.usdc"))
    assert stage.GetPrimAtPath("/World/snake_000/link_0").IsValid()
    assert stage.GetEndTimeCode() > 0


def test_interrupted_vine_workers_leave_no_tracebacks(tmp_path):
    # Ctrl-C in a terminal reaches the whole process group: the command and its worker processes.
    process = softsnake("vine", "jitosho_cluttered_1", "--vines", "2", "--workers", "0", "--seconds", "100",
                        "--out", "out", cwd=tmp_path, start_new_session=True)
    _wait_for_start(process)
    time.sleep(8.0)  # the workers started and stepping
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "Warp" not in err + out
    lines = [line for line in err.splitlines() if not line.startswith("vine ")]  # progress notes aside
    assert len(lines) == 1 and "interrupted at t = " in lines[0], err
    for name in ("jitosho_cluttered_1.partial.usdc", "jitosho_cluttered_1_tips.partial.csv"):
        assert (tmp_path / "out" / name).is_file()
        assert name in lines[0]
