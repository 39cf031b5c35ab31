"""Every bad option of every command: one line on standard error, exit status 2, and nothing
computed first.

The commands run in this process through ``softsnake.cli.main`` with Warp's kernel launches and
the engine's model finalisation made to fail the test: a command that starts computing before it
refuses an option does not pass. Two cases run as real processes too, to see the whole output.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
import warp as wp

import softsnake.finalize
from softsnake.builder import ModelBuilder
from softsnake.cli import main
from softsnake.robots.vine.reference import reference_available

CUDA = wp.is_cuda_available()


@pytest.fixture
def nothing_computed(monkeypatch):
    """Fail the test if a kernel is launched or a model is finalised."""

    def computed(*args, **kwargs):
        raise AssertionError("the command started computing before it refused its options")

    monkeypatch.setattr(wp, "launch", computed)
    monkeypatch.setattr(ModelBuilder, "finalize", computed)
    if hasattr(softsnake.finalize, "finalize"):
        monkeypatch.setattr(softsnake.finalize, "finalize", computed)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "afile"
    path.write_text("not a folder\n")
    return path


def refused(capfd, argv, *, mentions):
    """Run ``softsnake argv``: exit status 2, nothing on standard output, one error line naming
    ``mentions`` on standard error."""
    start = time.perf_counter()
    status = main(argv)
    elapsed = time.perf_counter() - start
    out, err = capfd.readouterr()
    assert status == 2, (status, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"softsnake {argv[0]}: error: ")
    assert mentions in lines[0], lines[0]
    assert elapsed < 30.0, f"took {elapsed:.1f} s to refuse"
    return lines[0]


VIDEOS = reference_available()
OUT_COMMANDS = [["gait"], ["curvature"], ["step-response"], ["bench"], ["vine", "jitosho_wall"],
                ["plan", "planner_navigation"]] + ([["fit", "linear"]] if VIDEOS else [])


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc, where no folder can be made")
@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
def test_out_that_cannot_be_created(capfd, nothing_computed, command):
    refused(capfd, command + ["--out", "/proc/x"], mentions="--out /proc/x")


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
def test_out_under_a_file(capfd, nothing_computed, a_file, command):
    line = refused(capfd, command + ["--out", str(a_file / "sub")], mentions="--out")
    assert "is a file" in line


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
def test_out_that_is_a_file(capfd, nothing_computed, a_file, command):
    line = refused(capfd, command + ["--out", str(a_file)], mentions="--out")
    assert "is a file" in line


CASES = [
    # (arguments, what the message names)
    (["gait", "--seconds", "1e9"], "memory"),
    (["gait", "--seconds", "1e5"], "would take"),
    (["gait", "--seconds", "-1"], "--seconds"),
    (["gait", "--seconds", "nan"], "--seconds"),
    (["gait", "--snakes", "0"], "--snakes"),
    (["gait", "--pictured-snakes", "-1"], "--pictured-snakes"),
    (["gait", "--snakes", "2", "--offset", "0,0.1,0.2"], "--offset"),
    (["gait", "--offset", "2"], "offset"),
    (["gait", "--amplitude-psi", "9"], "amplitude"),
    (["gait", "--frequency", "x"], "--frequency"),
    (["gait", "--sweep", "speed=0:1"], "--sweep"),
    (["gait", "--sweep", "offset=-0.3:0.3", "--offset", "0"], "--offset"),
    (["gait", "--supply-psi", "0"], "--supply-psi"),
    (["gait", "--device", "tpu"], "--device"),
    (["gait", "--budget", "16"], "--budget"),
    (["gait", "--budget", "0x40"], "--budget 0x40"),
    (["gait", "--budget", "8x-1"], "--budget 8x-1"),
    (["gait", "--substeps", "0"], "--substeps must be at least 1"),
    (["gait", "--seconds", "1000", "--budget", "64x400"], "would take"),
    (["curvature", "--min-psi", "90", "--max-psi", "100"], "psi"),
    (["curvature", "--min-psi", "-100", "--max-psi", "0"], "psi"),
    (["curvature", "--min-psi", "0", "--max-psi", "1"], "needs at least 3 pressures"),
    (["curvature", "--min-psi", "-1", "--max-psi", "8"], "left chamber"),
    (["curvature", "--min-psi", "2", "--max-psi", "1"], "--min-psi"),
    (["curvature", "--step-psi", "1e-12"], "memory"),
    (["curvature", "--seconds", "1e9"], "memory"),
    (["curvature", "--seconds", "0"], "--seconds"),
    (["curvature", "--device", "gpu"], "--device"),
    (["bench", "--max-snakes", "100000"], "memory"),
    (["bench", "--frames", "100000000"], "would take"),
    (["bench", "--frames", "0"], "--frames"),
    (["step-response", "--duration", "1e12"], "memory"),
    (["step-response", "--dt", "0"], "--dt"),
    (["vine", "jitosho_wall", "--seconds", "1e12"], "memory"),
    (["vine", "jitosho_wall", "--vines", "0"], "--vines"),
    (["vine", "jitosho_wall", "--workers", "-1"], "--workers"),
    (["vine", "jitosho_wall", "--spread-heading", "-1"], "--spread-heading"),
    (["vine", "no_such_scene"], "no_such_scene"),
    (["plan", "no_such_scene"], "no_such_scene"),
    (["plan", "jitosho_wall"], "[plan]"),
] + ([
    (["fit", "linear", "--evaluations", "0"], "--evaluations"),
    (["fit", "linear", "--train", "2,x"], "--train"),
    (["fit", "linear", "--test", "99"], "no video 99"),
    (["fit", "linear", "--train", ""], "--train"),
    (["fit", "mlp", "--start", "no_such_fit.json"], "--start"),
    (["fit", "linear", "--budget", "0x5"], "--budget"),
    (["fit", "wrinkling", "--budget", "30"], "--budget"),
    (["fit", "linear", "--workers", "-1"], "--workers"),
] if VIDEOS else [])


@pytest.mark.parametrize("argv, mentions", CASES, ids=[" ".join(case[0]) for case in CASES])
def test_bad_option(capfd, nothing_computed, tmp_path, argv, mentions):
    refused(capfd, argv + ["--out", str(tmp_path / "out")], mentions=mentions)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


CUDA_CASES = [["gait"], ["curvature"], ["bench"], ["vine", "jitosho_wall"], ["vine", "jitosho_wall", "--workers", "2"]]


@pytest.mark.skipif(CUDA, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("command", CUDA_CASES, ids=lambda c: " ".join(c))
def test_cuda_unavailable_is_one_line_in_every_command(capfd, nothing_computed, tmp_path, command):
    line = refused(capfd, command + ["--device", "cuda", "--out", str(tmp_path)], mentions="--device cuda")
    if "--workers" not in command:
        assert line.endswith("--device cuda: no CUDA GPU is available on this machine (use --device cpu)")


def test_bad_options_as_a_real_process(tmp_path, a_file):
    # The whole output of the installed command: no traceback, no Warp lines, one error line.
    for argv in (["gait", "--out", str(a_file / "sub")], ["curvature", "--min-psi", "90", "--max-psi", "100"]):
        result = subprocess.run([sys.executable, "-m", "softsnake", *argv], capture_output=True, text=True,
                                cwd=tmp_path, timeout=120)
        assert result.returncode == 2
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"softsnake {argv[0]}: error: ")


def test_version(capsys):
    import softsnake

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"softsnake {softsnake.__version__}"
    assert softsnake.__version__[0].isdigit()


def test_help_has_no_markup(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "softsnake gait --out results" in text
