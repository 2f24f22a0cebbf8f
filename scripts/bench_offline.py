"""The offline track: IQL on a reward learned from scripted labels against IQL on the true reward, in D4RL's
normalised scores, beside the published figures.

For each offline experiment (``conf/experiment/offline/<name>.yaml``: a dataset, its labels and the agent) it
runs three sweeps over ``--seeds`` seeds with ``rlhp-train -m`` (joblib, ``--jobs`` at a time) under ``--root``:
the experiment as it is (a Markovian reward), with ``reward_net=preference_transformer``, and with
``reward_learning=none`` (the same agent on the true reward, the ceiling). A finished sweep is reused. It reads the
run folders and writes a table: the dataset's size, each sweep's normalised score (mean ± 95% interval), the better
reward model's share of the ceiling, the wall time of a run, and the published figures the issue quotes.

    python scripts/bench_offline.py --experiments hopper_medium_replay --seeds 3 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from bench_suite import cell, final, seeds, sweep, wall
from docblock import add_run_options, show

from rlhp.data.hub import open_trajectories
from rlhp.report.folders import Run

REFERENCE = {"Hopper": (-20.272305, 3234.3), "Walker2d": (1.629008, 4592.3)}
"""D4RL's reference returns (a random policy's, an expert's) per body: a score of 100 is the expert's."""

PUBLISHED = {
    "hopper_medium_replay": ("hopper-medium-replay (500)", 83.1, 11.6, 84.5),
    "walker2d_medium_replay": ("walker2d-medium-replay (500)", 73.1, 72.1, 71.3),
}
"""Published figures as the issue quotes STAR (NeurIPS 2025), Table 2, with Preference Transformer's human labels
on D4RL's v2 datasets: the dataset, IQL on the true reward, IQL on a Markovian reward, IQL on Preference
Transformer's reward."""


def normalised(runs: list[Run], body: str) -> np.ndarray:
    """Each run's final true return as D4RL's normalised score."""
    low, high = REFERENCE[body]
    return 100 * (final(runs) - low) / (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=["hopper_medium_replay"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--reward-nets", nargs="+", choices=["markovian", "transformer"],
                        default=["markovian", "transformer"], help="the reward models to run (a column left out reads "
                        "'not run')")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU",
                        help="where the runs ran, for the table's caption (default: this machine)")
    add_run_options(parser, "multirun/bench_offline", "bench_offline")
    args = parser.parse_args()
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be positive")

    given = "".join(f" --override {o}" for o in args.override)
    if args.reward_nets != ["markovian", "transformer"]:
        given += f" --reward-nets {' '.join(args.reward_nets)}"
    lines = [f"Written by `python scripts/bench_offline.py --experiments {' '.join(args.experiments)} --seeds "
             f"{args.seeds}{given}` on a {args.machine}, a run a core ({time.strftime('%Y-%m-%d')}). D4RL's normalised "
             f"score of the final policy (100 = D4RL's expert), mean ± 95% CI over seeds 0-{args.seeds - 1}; wall: a "
             "run's loop (reward learning and the agent's training), mean. Published: STAR (NeurIPS 2025) Table 2 as "
             "the issue quotes it, human labels on D4RL's v2 datasets.",
             "", "| dataset (labels) | data | transitions (episodes) | IQL, true reward | Markovian reward "
             "+ IQL | PT + IQL | better: share of the ceiling | wall s (Markovian, PT) | published: IQL, true "
             "reward | Markovian + IQL | PT + IQL |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in args.experiments:
        learned, transformer, ceiling = (
            sweep(args.root / name / folder, [f"experiment=offline/{name}", *overrides, *args.override,
                                              seeds(args.seeds)], args.jobs) if wanted else []
            for folder, overrides, wanted in (
                ("learned", [], "markovian" in args.reward_nets),
                ("transformer", ["reward_net=preference_transformer"], "transformer" in args.reward_nets),
                ("ceiling", ["reward_learning=none"], True)))
        config = (learned or transformer)[0].folder.config()
        body = config.env.id.split("-")[0]
        episodes, meta = open_trajectories(config.trajectories.path)
        made = meta.get("collection", {})
        how = (f"`rlhp-collect` replay to return {made['stop_at_return']}" if made.get("replay")
               else f"`{config.trajectories.path}`")
        top = normalised(ceiling, body)
        scores = {model: normalised(runs, body) for model, runs in (("Markovian", learned), ("PT", transformer))
                  if runs}
        better = max(scores, key=lambda model: scores[model].mean())
        label, *published = PUBLISHED.get(name, (name, np.nan, np.nan, np.nan))
        ran = [cell(scores[model]) if model in scores else "not run" for model in ("Markovian", "PT")]
        walls = ", ".join(f"{wall(runs).mean():.0f}" if runs else "–" for runs in (learned, transformer))
        lines.append(f"| {label.split(' (')[0]} ({config.total_comparisons}) | {how} | "
                     f"{sum(map(len, episodes)):,} ({len(episodes)}) | {cell(top)} | {' | '.join(ran)} | "
                     f"{better}: {100 * scores[better].mean() / top.mean():.0f}% | {walls} | "
                     + " | ".join(f"{p:.1f}" for p in published) + " |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
