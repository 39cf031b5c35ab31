"""The snake's figures: centre-of-mass paths of a gait run, link curvature against pressure
(Fig. 5), the chamber step response (Fig. 6) and the bench times beside the paper's (Table II)."""

import numpy as np

from softsnake.plotting import new_figure, save, styled
from softsnake.units import pa_to_psi

from .bench import PAPER_TABLE_2
from .curvature import FIT_LIMIT_PSI


def top_view(ax, *, mark_start=True):
    """Set up ``ax`` for a top view of centre-of-mass paths relative to their starts [m]: equal
    scales, axis labels and (``mark_start``) the start marked."""
    if mark_start:
        ax.plot(0.0, 0.0, "k+", markersize=10, label="start (head toward +x)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x from start [m]")
    ax.set_ylabel("y from start [m]")


@styled
def plot_trajectories(path, trajectories, labels, *, title):
    """Top view of every snake's centre-of-mass path, each relative to its own start [m]."""
    figure, ax = new_figure(6.4, 5.0)
    for s, label in enumerate(labels):
        xy = trajectories.com[:, s, :2] - trajectories.com[0, s, :2]
        ax.plot(xy[:, 0], xy[:, 1], color=f"C{s % 10}", linewidth=1.2, label=label)
        ax.plot(xy[-1, 0], xy[-1, 1], "o", color=f"C{s % 10}", markersize=4)
    top_view(ax)
    if len(labels) <= 12:
        ax.legend()
    ax.set_title(title)
    save(figure, path)


@styled
def plot_curvature(path, sweep, summary, *, title):
    """Fig. 5 layout: curvature against pressure with each side's linear fit (top) and the relative
    deviation from the fit (bottom); written complete or not at all."""
    psi = pa_to_psi(sweep.pressure)
    curvature = sweep.curvature
    order = np.argsort(psi)
    figure, (top, bottom) = new_figure(6.4, 5.6, 2, 1, sharex=True, height_ratios=(2, 1))
    top.plot(psi[order], curvature[order], "o-", color="C3", markersize=4, label="simulation")
    deviation = np.full_like(curvature, np.nan)
    for side, sign, color in (("left", -1.0, "C0"), ("right", 1.0, "C2")):
        def fit(p, side=side, sign=sign):
            return sign * (summary[f"{side}_slope"] * sign * p + summary[f"{side}_intercept"])

        line = np.linspace(0.0, FIT_LIMIT_PSI, 2) * sign
        top.plot(line, fit(line), "--", color=color,
                 label=f"{side} fit 0-{FIT_LIMIT_PSI:g} psi, R$^2$ = {summary[f'{side}_r2']:.5f}")
        chosen = sign * psi > 0
        deviation[chosen] = 100.0 * (curvature[chosen] / fit(psi[chosen]) - 1.0)
    top.axvspan(-FIT_LIMIT_PSI, FIT_LIMIT_PSI, color="0.9", zorder=0)
    top.set_ylabel("curvature [1/m]")
    top.legend()
    top.set_title(title)
    bottom.plot(psi[order], deviation[order], "o-", color="C3", markersize=4)
    bottom.axhline(0.0, color="0.4", linewidth=0.8)
    bottom.set_xlabel("over-pressure [psi]  (< 0 left chamber, > 0 right chamber)")
    bottom.set_ylabel("deviation from fit [%]")
    save(figure, path)


@styled
def plot_step_response(path, response):
    """Write a PNG with inflation (left) and deflation (right) panels: model lines, the paper's map
    as dots and the inflation targets dotted, pressures in psi."""
    figure, axes = new_figure(10, 4, 1, 2, sharey=True)
    colors = [f"C{j}" for j in range(len(response.levels))]
    for phase_index, (ax, title) in enumerate(zip(axes, ("Inflation", "Deflation"))):
        for j, level in enumerate(response.levels):
            ax.plot(response.time, pa_to_psi(response.pressure[phase_index, :, j]), color=colors[j],
                    label=f"{100.0 * level:g} % of supply")
            ax.plot(response.reference_time, pa_to_psi(response.reference_pressure[phase_index, :, j]),
                    ".", color=colors[j], markersize=2.5)
            if phase_index == 0:
                ax.axhline(pa_to_psi(level * response.supply_pressure), color=colors[j], linestyle=":",
                           linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("time [s]")
    axes[0].set_ylabel("chamber pressure [psi]")
    axes[0].plot([], [], ".", color="0.3", label="paper map, eq. 12 (every h0)")
    axes[0].legend(loc="lower right")
    figure.suptitle(f"Chamber step response, supply {pa_to_psi(response.supply_pressure):g} psi")
    save(figure, path)


@styled
def plot_bench(path, results, *, title):
    """Time per frame and per snake against the number of snakes, ours beside the paper's."""
    snakes = [s for s in results if s >= 1]
    figure, (left, right) = new_figure(9, 4, 1, 2)
    total = [1e3 * results[s]["total"] for s in snakes]
    solve = [1e3 * results[s]["solve"] for s in snakes]
    left.plot(snakes, total, "o-", color="C3", label="total (this run)")
    left.plot(snakes, solve, "s--", color="C3", markersize=4, label="solve (this run)")
    paper = [s for s in snakes if s in PAPER_TABLE_2]
    left.plot(paper, [PAPER_TABLE_2[s][2] for s in paper], "o-", color="C0", label="total (paper, GTX 1080 Ti)")
    left.plot(paper, [PAPER_TABLE_2[s][1] for s in paper], "s--", color="C0", markersize=4, label="solve (paper)")
    left.set_xlabel("snakes")
    left.set_ylabel("time per frame [ms]")
    left.set_yscale("log")
    left.legend()
    right.plot(snakes, [t / s for t, s in zip(total, snakes)], "o-", color="C3", label="this run")
    right.plot(paper, [PAPER_TABLE_2[s][2] / s for s in paper], "o-", color="C0", label="paper")
    right.set_xlabel("snakes")
    right.set_ylabel("time per frame and snake [ms]")
    right.set_yscale("log")
    right.legend()
    if len(snakes) > 1 and max(snakes) > 16:
        left.set_xscale("log")
        right.set_xscale("log")
    figure.suptitle(title)
    save(figure, path)
