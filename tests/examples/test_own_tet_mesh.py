"""examples/own_tet_mesh.py, as the README tells a user to run it: a TetGen beam written and read
back with meshio, and a mesh file in another format; pressure bends the clamped body."""

import importlib.util
from pathlib import Path

import meshio
import numpy as np

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_tet_mesh.py"


def load_example():
    spec = importlib.util.spec_from_file_location("own_tet_mesh", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sample_mesh_bends_under_pressure(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sag = load_example().main(["--seconds", "0.5"])
    assert (tmp_path / "beam.vtu").is_file()
    assert np.all(np.isfinite(sag))
    assert sag[1] < sag[0] - 1e-3  # the top rows lengthen: the free end bends down by more than 1 mm
    out = capsys.readouterr().out
    assert "tetrahedra" in out and "the pressure bends it by" in out


def test_a_users_mesh_in_another_format(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    example = load_example()
    beam = meshio.read(example.write_sample_mesh(tmp_path / "beam.vtu"))
    # A user's file: gmsh format, tetrahedra given with the opposite orientation.
    tets = beam.cells_dict["tetra"][:, [0, 2, 1, 3]]
    meshio.Mesh(beam.points, [("tetra", tets)]).write(tmp_path / "part.msh", file_format="gmsh22", binary=False)
    vertices, oriented = example.read_tet_mesh(tmp_path / "part.msh")
    x = vertices[oriented]
    assert np.all(np.linalg.det(np.stack([x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]], axis=2)) > 0)
    sag = example.main([str(tmp_path / "part.msh"), "--seconds", "0.25"])
    assert np.all(np.isfinite(sag)) and sag[1] < sag[0]
