"""Command runs as a user meets them, in real processes: what a CPU run prints, and what an
interrupted run (Ctrl-C) leaves behind."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from softsnake.robots.snake.trajectories import read_trajectories_csv, trajectory_columns

# What `softsnake gait` prints on standard output, line by line (softsnake.cli.gait).
GAIT_LINES = [
    r"\d+ snake\(s\), (coarse|paper) mesh, [\d.e+-]+ s, latency (on|off): \d+ frames of [\d.]+ s in \d+ substeps?(, \d+ worker processes)?, about .+ on this CPU",
    r"simulated \d+ frames in [\d.]+ s wall time \([\d.]+ ms per frame\)",
    r"centre-of-mass travel of each snake \(body length [\d.]+ m\), heading change averaged over the last [\d.]+ s:",
    r"  snake +forward \[m\] +lateral \[m\] +distance \[m\] +body lengths +heading change \[deg\]",
    r"  snake \d+.* [+-][\d.]+ +[+-][\d.]+ +[\d.]+ +[\d.]+ +[+-][\d.]+",
    r"Newton, budget \d+ iterations? \([\d.]+ per substep\): .*",
    r"wrote .*",
]


@pytest.fixture(scope="module", autouse=True)
def kernels_in_the_cache():
    """The interrupted runs below wait a fixed time for frames before Ctrl-C, so their first step must not
    compile kernels (35-47 s for all modules, cold, on 2 cores: test_backward_options.py): every kernel module
    the gait and the vine load, compiled for the CPU into Warp's kernel cache, which the command's process
    reads too."""
    import warp as wp

    import softsnake.robots.snake.simulation  # noqa: F401  (their kernel modules, imported)
    import softsnake.robots.vine.simulation  # noqa: F401

    wp.force_load(device="cpu")


def _default_interrupt():
    """SIGINT back to its default in the command's process, as in a terminal: a test run started as a
    background job (``pytest &``, ``nohup``) has SIGINT ignored, which its children inherit, and Python then
    never turns Ctrl-C into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def softsnake(*argv, cwd, **options):
    return subprocess.Popen([sys.executable, "-m", "softsnake", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_interrupt, **options)


def test_stdout_of_a_cpu_run_holds_only_softsnake_lines(tmp_path):
    process = softsnake("gait", "--snakes", "2", "--seconds", "0.1", "--no-usd", "--no-video", "--out", "out",
                        cwd=tmp_path)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 8, out
    for line in lines:
        assert any(re.fullmatch(pattern, line) for pattern in GAIT_LINES), f"not softsnake's: {line!r}"
    # Nothing from Warp on either stream: no banner, no module loads, no CUDA driver warning; and
    # no progress notes for a run this short.
    assert "Warp" not in out + err and "Module" not in out + err
    assert err == ""


def test_budget_reaches_the_solver(tmp_path):
    """``--budget NxL`` and ``--substeps S`` run the snakes at that budget and substep: the Newton line names the
    budget (3 iterations, which the gait never converges in), the first line the substeps, and the trajectory is
    not the default substeps' one."""
    outputs = {}
    for substeps in ("3", None):
        process = softsnake("gait", "--snakes", "1", "--seconds", "0.025", "--budget", "3x7",
                            *(("--substeps", substeps) if substeps else ()), "--no-usd", "--no-video",
                            "--out", f"out{substeps}", cwd=tmp_path)
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert f"3 frames of 0.00833333 s in {substeps or 2} substeps, about" in out, out
        assert "Newton, budget 3 iterations (3.0 per substep): no substep converged" in out, out
        outputs[substeps] = read_trajectories_csv(tmp_path / f"out{substeps}" / "trajectories.csv")[1]
    assert not np.array_equal(outputs["3"], outputs[None])


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
    for name in ("gait.partial.usdc", "trajectories.partial.csv", "trajectories.partial.png", "gait.partial.gif",
                 "gait.resume.npz"):
        assert (out_folder / name).is_file(), name
        assert str(os.path.join("out", name)) in message, message
    assert message.endswith("; the same command with --resume goes on from there"), message
    assert not (out_folder / "trajectories.csv").exists() and not (out_folder / "gait.usdc").exists()
    # How the substeps so far ended, on standard output (the one message of standard error stays one line).
    assert re.search(r"^Newton, budget 8 iterations .* \(up to t = [\d.]+ s\)$", out, re.MULTILINE), out

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


def test_a_schedulers_sigterm_stops_a_command_as_ctrl_c_does(tmp_path):
    """SIGTERM (what a job scheduler sends at its time limit) to a vine run: exit status 130, one message, and the
    run kept up to then, as after Ctrl-C (softsnake.cli.sigterm_as_interrupt)."""
    process = softsnake("vine", "jitosho_cluttered_1", "--seconds", "100", "--out", "out", cwd=tmp_path)
    _wait_for_start(process)
    time.sleep(4.0)  # some steps
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if not re.match(r"vine \S+: \d+/\d+ ", line)]  # progress notes
    assert len(lines) == 1 and "interrupted at t = " in lines[0], err
    for name in ("jitosho_cluttered_1.partial.usdc", "jitosho_cluttered_1_tips.partial.csv"):
        assert (tmp_path / "out" / name).is_file(), name


def _interrupt_workers(process, folder, kept):
    """Ctrl-C to a command that runs worker processes (start_new_session) and the whole of what it
    then says: exit status 130, no traceback, no Warp line, one message on standard error besides the
    progress notes, which names every file of ``kept``, each in ``folder``. Ctrl-C in a terminal
    reaches the whole process group: the command and its worker processes."""
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "Warp" not in err + out
    lines = [line for line in err.splitlines() if not re.match(r"(vine \S+|gait): \d+/\d+ ", line)]  # progress notes
    assert len(lines) == 1 and "interrupted at t = " in lines[0], err
    for name in kept:
        assert (folder / name).is_file()
        assert name in lines[0]


def test_interrupted_vine_workers_leave_no_tracebacks(tmp_path):
    process = softsnake("vine", "jitosho_cluttered_1", "--vines", "2", "--workers", "0", "--seconds", "100",
                        "--out", "out", cwd=tmp_path, start_new_session=True)
    _wait_for_start(process)
    time.sleep(8.0)  # the workers started and stepping
    _interrupt_workers(process, tmp_path / "out",
                       ("jitosho_cluttered_1.partial.usdc", "jitosho_cluttered_1_tips.partial.csv"))


def _children(pid):
    """Process ids whose parent is ``pid`` (from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            children.append(int(stat.parent.name))
    return children


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes in /proc")
def test_interrupted_gait_workers_keep_their_frames_and_leave_no_process(tmp_path):
    process = softsnake("gait", "--snakes", "2", "--workers", "0", "--seconds", "30", "--out", "out", cwd=tmp_path,
                        start_new_session=True)
    start = _wait_for_start(process)  # printed once the workers hold their snakes
    assert f"{min(2, os.cpu_count())} worker processes" in start, start
    children = _children(process.pid)
    assert len(children) >= min(2, os.cpu_count())
    time.sleep(8.0)  # some frames
    _interrupt_workers(process, tmp_path / "out", ("gait.partial.usdc", "trajectories.partial.csv"))
    assert not (tmp_path / "out" / "trajectories.csv").exists()
    # The workers are joined before the command ends; multiprocessing's resource tracker, a child too,
    # ends when it reads the end of its pipe from the ended command.
    deadline = time.monotonic() + 10.0
    while (left := [pid for pid in children if Path(f"/proc/{pid}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, "a process of the run outlived it"
