"""The field's online benchmark: B-Pref's tasks, rlhp's methods beside the published figures.

For each task (``conf/experiment/bpref/<task>.yaml``) and method (``conf/method/<method>.yaml``) it runs
``rlhp-train -m experiment=bpref/<task> method=<method>`` over ``--seeds`` seeds, and the same agent on the task's
own reward (``reward_learning=none``, the ceiling), each sweep into its own folder under ``--root`` (a finished
sweep is reused). ``--override`` settings go to every run (a smaller budget: ``--override total_timesteps=100000``;
the table says the steps each run trained). It then reads the run folders (never the training code) and writes a
Markdown table: per task, the published figures (PEBBLE, SURF, RUNE, QPA, PPE), rlhp's per method and its ceiling
(mean ± 95% CI over seeds: DMC's return, Meta-World's success rate in percent), the labels and steps, and the
command. Tasks in ``--not-run`` are listed with their command, never guessed.

    python scripts/bench_bpref.py --tasks walker_walk --methods pebble qpa --seeds 3 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import time

from bench_suite import cell, final, seeds, sweep
from docblock import add_run_options, show

from rlhp.report.folders import Run

# PPE (NeurIPS 2025), Table 1: scripted teacher, 5 seeds, every method rerun in one setup; DMC: return at 500k
# steps (quadruped-walk, humanoid-stand: see their experiments), Meta-World (v2): success rate in percent.
PUBLISHED = {
    "walker_walk": (100, [453, 661, 415, 796, 908]),
    "cheetah_run": (100, [546, 557, 509, 579, 645]),
    "quadruped_walk": (1_000, [364, 554, 507, 622, 661]),
    "humanoid_stand": (10_000, [249, 307, 279, 454, 577]),
    "drawer_open": (4_000, [20, 40, 67, 40, 80]),
    "door_open": (3_000, [72, 91, 98, 100, 100]),
    "sweep_into": (10_000, [75, 58, 99.6, 81, 96]),
    "button_press": (2_000, [77, 79, 89, 72, 90]),
    "window_open": (400, [87, 87, 97, 90, 100]),
    "hammer": (10_000, [41, 85, 92, 79, 96]),
}
METHODS = ["PEBBLE", "SURF", "RUNE", "QPA", "PPE"]


def score(runs: list[Run]) -> str:
    """The final success rate in percent where the env reports one (Meta-World), else the final return (DMC); with
    the runs' count."""
    if all("success_rate" in r.evaluation for r in runs):
        value = f"{cell(100 * final(runs, 'success_rate'), 0)}%"
    else:
        value = cell(final(runs))
    return f"{value} ({len(runs)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["walker_walk"], choices=sorted(PUBLISHED))
    parser.add_argument("--methods", nargs="+", default=["pebble", "qpa"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ceiling-seeds", type=int, default=None,
                        help="seeds of the ceiling (default: --seeds; 0: listed as not yet run)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--not-run", nargs="*", default=[], choices=sorted(PUBLISHED),
                        help="tasks listed with their command as not yet run")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, for the table's caption (default: this machine)")
    add_run_options(parser, "outputs/bench_bpref", "bench_bpref")
    args = parser.parse_args()
    ceiling_seeds = args.seeds if args.ceiling_seeds is None else args.ceiling_seeds
    rows = []
    for task in args.tasks:
        base = [f"experiment=bpref/{task}", *args.override]
        measured = [sweep(args.root / task / method, [*base, f"method={method}", seeds(args.seeds)], args.jobs)
                    for method in args.methods]
        ceiling = score(sweep(args.root / task / "ceiling", [*base, "reward_learning=none", seeds(ceiling_seeds)],
                              args.jobs)) if ceiling_seeds else "not yet run"
        labels, published = PUBLISHED[task]
        steps = int(measured[0][0].rows[-1]["timesteps"])
        most = max(len(runs) for runs in measured)  # a reused sweep may hold more seeds than --seeds
        rows.append(f"| {task} | {labels:,} | {' | '.join(map(str, published))} | "
                    f"{' | '.join(score(runs) for runs in measured)} | {ceiling} | {steps:,} | "
                    f"`rlhp-train -m experiment=bpref/{task} method={','.join(args.methods)} "
                    f"{' '.join(args.override)} {seeds(most)}` |".replace("  ", " "))
    for task in args.not_run:
        labels, published = PUBLISHED[task]
        rows.append(f"| {task} | {labels:,} | {' | '.join(map(str, published))} | "
                    f"{' | '.join('not yet run' for _ in args.methods)} | not yet run | | "
                    f"`rlhp-train -m experiment=bpref/{task} method={','.join(args.methods)} {seeds(args.seeds)}` |")
    text = "\n".join([
        f"Written by `python scripts/bench_bpref.py --tasks {' '.join(args.tasks)} --methods {' '.join(args.methods)} "
        f"--seeds {args.seeds} --ceiling-seeds {ceiling_seeds} --jobs {args.jobs} "
        + "".join(f"--override {o} " for o in args.override)
        + f"--not-run {' '.join(args.not_run)} --root <runs> --block {args.block}`; the runs ran on a {args.machine} "
        f"({time.strftime('%Y-%m-%d')}). "
        "DMC: final return; Meta-World: final success rate (success at any step of an episode), %. rlhp: mean ± 95% "
        "CI (Student t) over the seeds in brackets; the ceiling is the same agent on the task's own reward; "
        "published: PPE (NeurIPS 2025) Table 1, 5 seeds, Meta-World v2 (rlhp runs v3).", "",
        f"| task | labels | {' | '.join(METHODS)} | {' | '.join(f'rlhp {m}' for m in args.methods)} | ceiling "
        "| steps | command |",
        f"|---|---:|{'---:|' * len(METHODS)}{'---:|' * len(args.methods)}---:|---:|---|", *rows])
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
