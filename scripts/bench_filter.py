"""Which labels do the label filters leave out or flip, and what does that do to the return? Against B-Pref's
erring teacher, per env, error rate and filter.

For each env, share of flipped labels (``--mistakes``) and filter (``--filters``: ``all`` believes every label,
``contradicted`` is rlhp's filter, ``rime`` is RIME's) it runs ``rlhp-train -m experiment=<env's>
total_comparisons=<labels> reward_trainer/label_filter=<filter> gatherer.mistake=<share> <--override ...>`` over
``--seeds`` seeds into ``--root/<env>/mistake<share>/<filter>`` (a finished sweep is reused, as in
``bench_suite.sweep``), then reads each run's last round from metrics.csv: the labels trained on, how many of them
the true reward contradicts (``gt_labels_wrong``: the teacher answers from the true returns, so these are its
flips; a flipped tie stays a tie), the labels the filter left out of the last epoch (``reward_labels_dropped``)
and flipped (``reward_labels_flipped``), and how many of those were wrong (``gt_labels_dropped_wrong``,
``gt_labels_flipped_wrong``), each summed over seeds; and the final true return. A filter that judges well acts
mostly on wrong labels, far above their share of all labels. ``all`` judges nothing: its cells are dashes.

    python scripts/bench_filter.py --envs cartpole pendulum reacher --out docs/label-methods.md
    python scripts/bench_filter.py --envs pendulum --filters all contradicted rime --mistakes 0.1 0.2 0.3 \
        --override gatherer.temperature=0 --out docs/label-methods.md --block bench_rime
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from bench_labels import ENVS, command, result
from bench_suite import final, seeds, sweep
from docblock import add_run_options, show

from rlhp.experiment.cli import group_options
from rlhp.report.folders import Run

KEYS = ("comparisons", "gt_labels_wrong", "reward_labels_dropped", "gt_labels_dropped_wrong", "reward_labels_flipped",
        "gt_labels_flipped_wrong")
"""What :func:`last_round` reads, in its order."""


def last_round(run: Run) -> tuple[float, ...]:
    """The last round's labels, labels the true reward contradicts, labels left out, wrong ones left out, labels
    flipped and wrong ones flipped; NaN where the filter does not report it (one that judges nothing, or flips
    nothing)."""
    row = run.rows[-1]
    return tuple(float(row[key]) if row.get(key) not in (None, "") else float("nan") for key in KEYS)


def share(part: float, whole: float) -> str:
    """``part (percent of whole)``; a dash where either was not reported."""
    if np.isnan(part) or np.isnan(whole):
        return "–"
    return f"{part:.0f} ({100 * part / whole:.0f}%)" if whole else f"{part:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=["cartpole", "pendulum", "reacher"])
    parser.add_argument("--labels", type=int, default=100, help="labels a run (B-Pref's teachers' budget)")
    parser.add_argument("--mistakes", nargs="+", type=float, default=[0.1], help="shares of labels the teacher flips")
    parser.add_argument("--filters", nargs="+", choices=sorted(group_options("reward_trainer/label_filter")),
                        default=["contradicted"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU",
                        help="where the runs ran, for the table's caption (default: this machine)")
    add_run_options(parser, "multirun/bench_filter", "bench_filter")
    args = parser.parse_args()
    if args.labels < 1 or not all(0 < m < 1 for m in args.mistakes) or args.seeds < 1 or args.jobs < 1:
        parser.error("--labels, --seeds and --jobs must be positive and each of --mistakes must lie in (0, 1)")

    given = "".join(f" --override {o}" for o in args.override)
    lines = [f"Written by `python scripts/bench_filter.py --envs {' '.join(args.envs)} --labels {args.labels} "
             f"--mistakes {' '.join(map(str, args.mistakes))} --filters {' '.join(args.filters)}{given} "
             f"--seeds {args.seeds}` on a {args.machine} ({time.strftime('%Y-%m-%d')}). Labels of each run's last "
             f"round, summed over {args.seeds} seeds; \"wrong\": the true reward ranks the pair the other way; left "
             "out, flipped: in the last epoch; final true return, mean ± 95% CI (seeds solved).",
             "", "| env | mistake | filter | labels | wrong | left out | of them wrong | flipped | of them wrong | "
             "wrong ones left out or flipped | final return | command |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for env in args.envs:
        task = ENVS[env]
        for mistake in args.mistakes:
            for name in args.filters:
                overrides = [f"total_comparisons={args.labels}", f"reward_trainer/label_filter={name}",
                             f"gatherer.mistake={mistake}", *args.override]
                runs = sweep(args.root / env / f"mistake{mistake}" / name,
                             [f"experiment={task.experiment}", *overrides, seeds(args.seeds)], args.jobs)
                labels, wrong, dropped, dropped_wrong, flipped, flipped_wrong = np.sum(
                    [last_round(r) for r in runs], axis=0)
                caught = dropped_wrong + np.nan_to_num(flipped_wrong)
                lines.append(f"| {env} | {mistake} | {name} | {labels:.0f} | {share(wrong, labels)} | "
                             f"{share(dropped, labels)} | {share(dropped_wrong, dropped)} | {share(flipped, labels)} | "
                             f"{share(flipped_wrong, flipped)} | {share(caught, wrong)} | "
                             f"{result(final(runs), task.target)} | "
                             f"`{command(task.experiment, overrides, args.seeds)}` |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
