"""Output files are complete or absent: written beside their final path and renamed only when whole."""

import csv

import pytest
from matplotlib.figure import Figure

from softsnake.output_files import replaced_when_complete, save_png, write_csv, write_dict_csv


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with replaced_when_complete(path) as temporary:
            temporary.write_text("half a ta")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_csv_and_png_land_whole_under_their_names(tmp_path):
    write_csv(tmp_path / "a.csv", ["x", "y"], [[1, 2], [3, 4]])
    write_dict_csv(tmp_path / "b.csv", [{"x": 1, "y": 2}, {"x": 3, "y": 4}])
    for name in ("a.csv", "b.csv"):
        with open(tmp_path / name, newline="") as stream:
            assert list(csv.reader(stream)) == [["x", "y"], ["1", "2"], ["3", "4"]]
    figure = Figure()
    figure.subplots().plot([0, 1], [0, 1])
    save_png(figure, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "plot.png"]
