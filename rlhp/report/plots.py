"""Learning curves over seeds: one line per configuration, the mean with a 95% confidence band."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rlhp.report.folders import Run  # noqa: E402
from rlhp.report.stats import mean_ci  # noqa: E402


def curve(runs: Sequence[Run], x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rounds of the runs aligned by index: mean x, mean y and the y band's half-width."""
    rounds = min(len(run.rows) for run in runs)
    def column(key: str) -> np.ndarray:
        return np.array([[np.nan if r.get(key) is None else r[key] for r in run.rows[:rounds]] for run in runs])
    xs, ys = column(x), column(y)
    mean, half = mean_ci(ys)
    return np.nanmean(xs, axis=0), mean, half


def plot_curves(groups: dict[str, list[Run]], x: str, y: str, path: Path, title: str) -> Path | None:
    """Write one PNG of ``y`` against ``x``; None when no run has both."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    drawn = False
    for name, runs in groups.items():
        runs = [r for r in runs if r.rows and any(row.get(y) is not None for row in r.rows)]
        if not runs:
            continue
        xs, mean, half = curve(runs, x, y)
        keep = ~np.isnan(mean)
        line, = ax.plot(xs[keep], mean[keep], marker="o", markersize=3, label=f"{name} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(xs[keep], (mean - half)[keep], (mean + half)[keep], color=line.get_color(), alpha=0.2)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel=x, ylabel=y, title=title)
    ax.grid(alpha=0.3)
    # Beside the axes, so that long configuration names neither hide the curves nor squeeze the plot; the saved
    # picture grows to hold them (tight_layout would warn and give up instead).
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_effect(values: list[float], scores: list[float], parameter: str, metric: str, path: Path) -> Path:
    """A scatter of the optimised metric against one searched parameter."""
    fig, ax = plt.subplots(figsize=(4.8, 3.6), dpi=110)
    ax.scatter(values, scores)
    ax.set(xlabel=parameter, ylabel=metric, title=f"{metric} by {parameter}")
    ax.grid(alpha=0.3)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
