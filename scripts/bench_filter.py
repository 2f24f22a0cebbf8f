"""Does the label filter leave out the wrong labels? Against B-Pref's erring teacher, per env.

For each env it runs ``rlhp-train -m experiment=<env's> total_comparisons=<labels>
reward_trainer/label_filter=contradicted gatherer.mistake=<share>`` over ``--seeds`` seeds into ``--root/<env>``
(a finished sweep is reused, as in ``bench_suite.sweep``), then reads each run's last round from metrics.csv:
the labels trained on, how many of them the true reward contradicts (``gt_labels_wrong``: the teacher answers
the probability from the true returns, so these are its flips; a flipped tie stays a tie), the labels the filter
left out of the last epoch (``reward_labels_dropped``) and how many of those were wrong
(``gt_labels_dropped_wrong``), each summed over seeds. A filter that judges well leaves out mostly wrong labels,
far above their share of all labels.

    python scripts/bench_filter.py --envs cartpole pendulum reacher --out docs/label-methods.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from bench_labels import ENVS, command, result
from bench_suite import final, seeds, sweep
from docblock import show

from rlhp.report.folders import Run


def last_round(run: Run) -> tuple[float, float, float, float]:
    """The last round's labels, labels the true reward contradicts, labels left out, and wrong ones left out."""
    row = run.rows[-1]
    return tuple(float(row[key]) for key in
                 ("comparisons", "gt_labels_wrong", "reward_labels_dropped", "gt_labels_dropped_wrong"))


def share(part: float, whole: float) -> str:
    """``part (percent of whole)``."""
    return f"{part:.0f} ({100 * part / whole:.0f}%)" if whole else f"{part:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=["cartpole", "pendulum", "reacher"])
    parser.add_argument("--labels", type=int, default=100, help="labels a run (B-Pref's teachers' budget)")
    parser.add_argument("--mistake", type=float, default=0.1, help="share of labels the teacher flips")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--root", type=Path, default=Path("multirun/bench_filter"))
    parser.add_argument("--out", type=Path, default=None, help="docs page whose block to rewrite")
    parser.add_argument("--block", default="bench_filter")
    args = parser.parse_args()
    if args.labels < 1 or not 0 < args.mistake < 1 or args.seeds < 1 or args.jobs < 1:
        parser.error("--labels, --seeds and --jobs must be positive and --mistake must lie in (0, 1)")

    overrides = [f"total_comparisons={args.labels}", "reward_trainer/label_filter=contradicted",
                 f"gatherer.mistake={args.mistake}"]
    lines = [f"Written by `python scripts/bench_filter.py --envs {' '.join(args.envs)} --labels {args.labels} "
             f"--mistake {args.mistake} --seeds {args.seeds}` on a 2-core CPU ({time.strftime('%Y-%m-%d')}). "
             f"Labels of each run's last round, summed over {args.seeds} seeds; \"wrong\": the true reward ranks "
             "the pair the other way; left out: of the last epoch; final true return, mean ± 95% CI (seeds solved).",
             "", "| env | labels | wrong | left out | of them wrong | wrong ones left out | final return | command |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for env in args.envs:
        task = ENVS[env]
        given = [f"experiment={task.experiment}", *overrides, seeds(args.seeds)]
        runs = sweep(args.root / env, given, args.jobs)
        labels, wrong, dropped, dropped_wrong = np.sum([last_round(r) for r in runs], axis=0)
        lines.append(f"| {env} | {labels:.0f} | {share(wrong, labels)} | {dropped:.0f} | "
                     f"{share(dropped_wrong, dropped)} | {share(dropped_wrong, wrong)} | "
                     f"{result(final(runs), task.target)} | `{command(task.experiment, overrides, args.seeds)}` |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
