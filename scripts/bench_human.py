"""People end to end on an experiment: ``rlhp-train <experiment> gatherer=human`` with scripted annotators
answering over HTTP from the published queries (rendered clips, for MuJoCo drawn from recorded physics
states), against the same agent on the true reward.

The annotators prefer the fragment with the higher true return (``rlhp.human.server.scripted``); ``--pause-s`` is
each one's wait after an answer. The ceiling is read from a finished ``reward_learning=none`` sweep
(``--ceiling``, e.g. the one ``bench_suite.py`` ran), and the run counts as reaching it at 90% of the way from
a random policy's return to the ceiling's mean (as in ``bench_suite.py``).

    python scripts/bench_human.py --experiment reacher --ceiling /work/bench_mujoco/reacher/ceiling \
        --out docs/human-labels.md
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_suite import FRACTION_OF_CEILING, final, random_return, train
from docblock import show

from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.report.folders import find_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="reacher")
    parser.add_argument("--ceiling", type=Path, required=True, help="a finished reward_learning=none sweep")
    parser.add_argument("--annotators", type=int, default=2)
    parser.add_argument("--pause-s", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=None, help="the run's folder (default: a new temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the result here (else print it)")
    parser.add_argument("--block", default="bench_human")
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="bench_human_")) / "run"
    overrides = [f"experiment={args.experiment}", "gatherer=human", "gatherer.port=0", f"seed={args.seed}",
                 "logger=none"]
    annotators = [ScriptedAnnotator(run_dir, f"annotator-{i}", pause_s=args.pause_s) for i in range(args.annotators)]
    for annotator in annotators:
        annotator.__enter__()
    start = time.perf_counter()
    try:
        train([*overrides, f"hydra.run.dir={run_dir}"])
    finally:
        for annotator in annotators:
            annotator.__exit__()
    wall = time.perf_counter() - start
    run, ceiling = find_runs(run_dir)[0], find_runs(args.ceiling)
    ceiling_returns = final(ceiling)
    floor = random_return(run)
    got = run.evaluation["true_return_mean"]
    share = (got - floor) / (ceiling_returns.mean() - floor)
    text = "\n".join([
        f"Written by `python scripts/bench_human.py --experiment {args.experiment} --ceiling <ceiling sweep> "
        f"--annotators {args.annotators} --pause-s {args.pause_s} --seed {args.seed} --block {args.block}` "
        f"({time.strftime('%Y-%m-%d')}); the run is `rlhp-train {' '.join(overrides)}`, answered by "
        f"{args.annotators} scripted annotators over HTTP.", "",
        "| experiment | true return | ceiling | of the way from random to the ceiling | labels answered | wall s |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {args.experiment} | {got:.1f} | {ceiling_returns.mean():.1f} ({len(ceiling_returns)} seeds) | "
        f"{share:.0%} (random: {floor:.1f}; target {FRACTION_OF_CEILING:.0%}) | "
        f"{sum(a.answered for a in annotators)} | {wall:.0f} |"])
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
