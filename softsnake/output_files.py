"""Output files that are complete or absent: every CSV, PNG and table the commands and experiments
write goes through a temporary file beside its final path and is renamed into place only once it
is whole, so an interrupted run never leaves a truncated file under the final name."""

import contextlib
import csv
import os
from pathlib import Path


@contextlib.contextmanager
def replaced_when_complete(path):
    """Yield a temporary path beside ``path`` to write to; when the block completes it replaces
    ``path``, and when the block fails it is removed and ``path`` is left as it was."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def save_png(figure, path, *, dpi=90):
    """Save a matplotlib figure as a PNG file at ``path`` [dots per inch: dpi]."""
    with replaced_when_complete(path) as temporary:
        figure.savefig(temporary, format="png", dpi=dpi)


def write_csv(path, header, rows):
    """Write a CSV file: one header row, then ``rows`` (sequences of values)."""
    with replaced_when_complete(path) as temporary, open(temporary, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)


def write_dict_csv(path, rows):
    """Write a CSV file from a non-empty list of dicts with the same keys (the header)."""
    write_csv(path, list(rows[0]), [list(row.values()) for row in rows])
