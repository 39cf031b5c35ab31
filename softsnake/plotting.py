"""One plotting style for every figure softsnake writes: the commands' and the experiments'.

A plotting function is decorated with ``@styled``, makes its figure with ``new_figure`` and writes
it with ``save``:

    @styled
    def plot_something(path, ...):
        figure, axes = new_figure(6.4, 4.8)
        axes.plot(...)
        save(figure, path)

``styled`` draws under ``STYLE`` (font sizes, grid), so no function sets its own; ``new_figure``
uses matplotlib's object interface (``Figure``, constrained layout), never pyplot: no display
backend to choose, no global figure list to close; ``save`` writes the PNG through
``softsnake.output_files``, complete or absent.
"""

import functools

import matplotlib
from matplotlib.figure import Figure

from .output_files import save_png

STYLE = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "figure.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
"""The matplotlib settings every figure is drawn under."""

DPI = 90
"""Resolution of the written PNG files [dots per inch]."""


def styled(plot):
    """Decorator: run the plotting function ``plot`` under ``STYLE``."""

    @functools.wraps(plot)
    def plot_in_style(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)

    return plot_in_style


def new_figure(width, height, rows=1, columns=1, **subplots):
    """A figure of ``width`` x ``height`` inches with a ``rows`` x ``columns`` grid of axes, laid out
    by matplotlib's constrained layout; ``subplots``: options of ``Figure.subplots`` (sharex,
    squeeze, ...). Returns (figure, axes) as ``Figure.subplots`` does."""
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(rows, columns, **subplots)


def save(figure, path, *, dpi=DPI):
    """Write ``figure`` as a PNG file at ``path`` (complete or absent)."""
    save_png(figure, path, dpi=dpi)
