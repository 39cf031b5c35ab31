"""experiments/gpu_gait_agreement.py: the GPU's three snakes beside the CPU's, positions from each snake's start."""

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "gpu_gait_agreement.py"
HEADER = "time_s,snake,com_x_m,com_y_m,com_z_m,heading_rad,curvature_link0_head_per_m,pressure_link0_head_left_pa\n"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_gait_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_csv(path, rows):
    path.write_text(HEADER + "".join(",".join(str(v) for v in row) + "\n" for row in rows))
    return str(path)


def test_differences_are_measured_from_each_snakes_start(tmp_path, capsys):
    # GPU snake 7 lies 7 m out in y (its world's offset) and ends 0.5 mm further in x than the CPU's snake 0;
    # its heading differs by 1e-3 rad at the end.
    gpu = write_csv(tmp_path / "gpu.csv", [(0.0, 7, 0.0, 7.0, 0.025, 0.0, 0.0, 0.0),
                                           (0.1, 7, 0.1005, 7.0, 0.025, 0.001, 2.0, 100.0)])
    cpu = write_csv(tmp_path / "cpu.csv", [(0.0, 0, 0.0, 0.0, 0.025, 0.0, 0.0, 0.0),
                                           (0.1, 0, 0.1, 0.0, 0.025, 0.0, 2.0, 100.0)])
    assert load_script().main([gpu, cpu, "--gpu-snakes", "7"]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    assert row == "| 7 | 2 | 0.100500 / 0.100000 | 5.0e-04 / 0.0e+00 / 0.0e+00 | 1.0e-03 | 0.0e+00 | 0.0e+00 |"


def test_snakes_missing_from_a_file_are_named(tmp_path):
    gpu = write_csv(tmp_path / "gpu.csv", [(0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)])
    cpu = write_csv(tmp_path / "cpu.csv", [(0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)])
    with pytest.raises(SystemExit, match="the GPU file holds snakes \\[0\\]"):
        load_script().main([gpu, cpu, "--gpu-snakes", "512"])
