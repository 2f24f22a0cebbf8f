"""``report.md`` and its PNG plots for a run or a sweep folder."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from rlhp.report.folders import Run, find_runs, swept_keys
from rlhp.report.plots import plot_curves, plot_effect
from rlhp.report.stats import mean_ci

CURVES = [  # (x, y, title)
    ("timesteps", "true_return_mean", "true return"),
    ("comparisons", "true_return_mean", "true return per label"),
    ("timesteps", "reward_accuracy", "reward model accuracy"),
    ("timesteps", "sampled_reward_correlation", "learned vs true reward"),
    ("timesteps", "success_rate", "success rate of the training episodes"),  # only envs that report one
]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:,.{digits}f}"


def _success(runs: list[Run]) -> str:
    """The final success rate, mean ± 95% CI in percent, over the runs whose env reports one."""
    rates = np.array([r.evaluation["success_rate"] for r in runs if "success_rate" in r.evaluation], dtype=float)
    if not len(rates):
        return "n/a"
    mean, half = mean_ci(100 * rates)
    return f"{_fmt(mean)}%" + ("" if not np.isfinite(half) else f" ± {_fmt(half)}")


def _figure(run: Run, key: str) -> float:
    """A figure of the run's eval.json; NaN where it is missing or null (a return of 0 stays 0)."""
    value = run.evaluation.get(key)
    return np.nan if value is None else float(value)


def _final_table(groups: dict[str, list[Run]]) -> list[str]:
    # A success column only where some env reports success (Meta-World's tasks).
    success = any("success_rate" in r.evaluation for runs in groups.values() for r in runs if r.status == "finished")
    lines = ["| configuration | seeds | final true return, mean ± std | 95% CI | reward correlation | labels | "
             "timesteps | wall s |" + (" success rate |" if success else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if success else "")]
    for name, runs in groups.items():
        done = [r for r in runs if r.status == "finished"]
        if not done:
            continue
        returns = np.array([_figure(r, "true_return_mean") for r in done])
        corr = np.array([_figure(r, "reward_correlation") for r in done])
        mean, half = mean_ci(returns)
        std = np.nanstd(returns, ddof=1) if len(done) > 1 else 0.0
        last = [r.rows[-1] for r in done if r.rows]
        labels = np.mean([row["comparisons"] for row in last]) if last else None
        steps = np.mean([row["timesteps"] for row in last]) if last else None
        wall = np.mean([row["wall_s"] for row in last]) if last else None
        ci = "n/a" if not np.isfinite(half) else f"[{_fmt(mean - half)}, {_fmt(mean + half)}]"
        lines.append(f"| {name} | {len(done)} | {_fmt(mean)} ± {_fmt(std)} | {ci} | {_fmt(mean_ci(corr)[0], 3)} | "
                     f"{_fmt(labels, 0)} | {_fmt(steps, 0)} | {_fmt(wall)} |" + (f" {_success(done)} |" if success
                                                                                else ""))
    return lines


def _search(folder: Path, runs: list[Run], swept: list[str], out: Path) -> list[str]:
    results = folder / "optimization_results.yaml"
    if not results.exists():
        return []
    best = OmegaConf.to_container(OmegaConf.load(results))
    trials = [(r.evaluation["optimized_metric"]["value"], r) for r in runs
              if r.status == "finished" and r.evaluation.get("optimized_metric", {}).get("value") is not None]
    name = trials[0][1].evaluation["optimized_metric"]["name"] if trials else "metric"
    lines = ["## Search", "", f"Best {name}: {_fmt(best.get('best_value'), 4)} with "
             f"`{' '.join(f'{k}={v}' for k, v in best.get('best_params', {}).items())}`.", "",
             f"| trial | {name} | parameters |", "|---:|---:|---|"]
    for value, run in sorted(trials, key=lambda t: -t[0])[:5]:
        lines.append(f"| {run.name} | {_fmt(value, 4)} | `{run.configuration(swept)}` |")
    lines.append("")
    for parameter in best.get("best_params", {}):
        points = [(float(r.overrides[parameter]), v) for v, r in trials if parameter in r.overrides]
        if points:
            png = plot_effect(*map(list, zip(*points)), parameter, name, out / f"effect_{parameter}.png")
            lines += [f"![{name} by {parameter}]({png.name})", ""]
    return lines


def write_report(folder: str | Path) -> Path:
    """Write ``report.md`` and the plots into ``folder``; return the report's path."""
    folder = Path(folder)
    runs = find_runs(folder)
    if not runs:
        raise FileNotFoundError(f"no rlhp-train run under {str(folder)!r} (no .hydra/config.yaml)")
    swept = swept_keys(runs)
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[run.configuration(swept)].append(run)
    counts = {s: sum(r.status == s for r in runs) for s in ("finished", "running", "crashed")}
    lines = [f"# Report: {folder.name}", "",
             f"{len(runs)} runs: {counts['finished']} finished, {counts['running']} running, "
             f"{counts['crashed']} crashed. Curves are means over seeds with a 95% confidence band "
             "(Student t), rounds aligned by index.", "", "## Curves", ""]
    for x, y, title in CURVES:
        png = plot_curves(groups, x, y, folder / f"{y}_vs_{x}.png", title)
        if png is not None:
            lines += [f"![{title}]({png.name})", ""]
    lines += ["## Final results", "", *_final_table(groups), ""]
    lines += _search(folder, runs, swept, folder)
    unfinished = [r for r in runs if r.status != "finished"]
    if unfinished:
        lines += ["## Runs not finished", "", "| run | configuration | status | rounds done |", "|---|---|---|---:|",
                  *(f"| {r.name} | `{r.configuration(swept)}` | {r.status} | {len(r.rows)} |" for r in unfinished), ""]
    report = folder / "report.md"
    report.write_text("\n".join(lines))
    return report
