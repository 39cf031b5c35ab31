"""``softsnake gait --workers W``: the snakes stepped in W processes write what one process writes; bad
values are refused in one line; by default a CPU batch takes one process per core. (An interrupted run:
tests/cli/test_runs.py.)"""

import argparse

import pytest

from softsnake.builder import ModelBuilder
from softsnake.cli import main
from softsnake.cli.workers import check_workers, parallel_speedup

RUN = ["gait", "--snakes", "2", "--seconds", "0.05", "--no-usd", "--no-video"]


@pytest.mark.parametrize("argv, message", [
    (["--workers", "-1"], "--workers must be 0 (one per CPU core) or a positive number, got -1"),
    (["--workers", "2", "--device", "cuda"], "--workers splits a batch over CPU processes; with --device cuda use --workers 1"),
    (["--workers", "0", "--device", "cuda:0"], "with --device cuda:0 use --workers 1"),
])
def test_bad_workers_are_one_line(capfd, monkeypatch, tmp_path, argv, message):
    monkeypatch.setattr(ModelBuilder, "finalize", lambda *a, **k: pytest.fail("a model was built"))
    monkeypatch.setattr("multiprocessing.context.SpawnProcess.start", lambda self: pytest.fail("a process started"))
    assert main(["gait", *argv, "--out", str(tmp_path / "out")]) == 2
    out, err = capfd.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("softsnake gait: error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_workers_write_the_same_trajectories(tmp_path, capsys):
    """``--workers 2`` and ``--workers 0`` (one per core) write the trajectories CSV of one process byte
    for byte."""
    csv = {}
    for workers in ("1", "2", "0"):
        out = tmp_path / workers
        assert main([*RUN, "--workers", workers, "--out", str(out)]) == 0
        csv[workers] = (out / "trajectories.csv").read_bytes()
    start = capsys.readouterr().out.splitlines()
    assert csv["2"] == csv["1"] and csv["0"] == csv["1"]
    assert any("frames of 0.00833333 s in 2 substeps, 2 worker processes, about" in line for line in start), start



@pytest.mark.parametrize("device_name, count, cores, expected", [
    ("cpu", 3, 2, 0),  # several worlds, several cores: one process per core
    ("cpu", 3, 1, 1),  # one core: this process alone
    ("cpu", 1, 8, 1),  # one world: no worker processes
    ("cuda", 3, 8, 1),  # a GPU steps the whole batch
    ("cuda:0", 1024, 8, 1),
])
def test_the_default_is_one_process_per_core_on_the_cpu(monkeypatch, device_name, count, cores, expected):
    monkeypatch.setattr("softsnake.cli.workers.usable_cores", lambda: cores)
    args = argparse.Namespace(workers=None, device=device_name)
    check_workers(args, count)
    assert args.workers == expected


@pytest.mark.parametrize("workers, count, cores, speedup", [
    (0, 3, 2, 1.5),  # shares of 2 and 1 snakes: the run takes as long as two snakes in one process
    (0, 8, 2, 2.0), (3, 8, 16, 8 / 3), (0, 2, 16, 2.0), (1, 8, 16, 1.0), (5, 3, 16, 3.0)])
def test_the_time_estimate_follows_the_largest_share(monkeypatch, workers, count, cores, speedup):
    monkeypatch.setattr("softsnake.cli.workers.usable_cores", lambda: cores)
    assert parallel_speedup(argparse.Namespace(workers=workers), count) == pytest.approx(speedup, rel=1e-12)
