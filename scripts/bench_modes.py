"""Person-minutes per labelling mode: the same run labelled over HTTP by a scripted person who compares pairs
(``querent.mode=pairs``), one who places clips in a ranking (``querent.mode=rank``) and one who rates clips alone
(``querent.mode=rate``).

Each mode labels ``--experiment`` (``gatherer=human``, the clips drawn and served as for people) on seeds
``--seeds``. The annotator answers from the fragments' true returns and waits after each answer the time a person
takes, ``--pause-s`` to watch a pair and ``--rate-pause-s`` to watch one clip, so the run waits on it as it would
on a person; a person-minute is that time summed over the answers. Ranking places both clips of each of
``--rank-pairs`` pairs (``total_comparisons``) and trains on every pair the ranking implies; rating rates both clips
of each of ``--rate-pairs`` pairs. A finished run under ``--root`` is reused. The table: each mode's final true
return (mean ± 95% interval), answers, person-minutes, labels trained on (pairs, or rated clips), and
person-minutes over pairs'.

    python scripts/bench_modes.py --seeds 5 --first-seed 6 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from bench_suite import cell
from bench_team import run_labelled
from docblock import add_run_options, show

from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.human.store import QueryStore
from rlhp.report.folders import Run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="cartpole_100_labels")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=["pairs", "rank", "rate"], default=["pairs", "rank", "rate"],
                        help="the modes to run (pairs always: the others are measured against it)")
    parser.add_argument("--rank-pairs", type=int, default=10, help="total_comparisons in ranking mode")
    parser.add_argument("--rate-pairs", type=int, default=25, help="total_comparisons in rating mode")
    parser.add_argument("--pause-s", type=float, default=1.5, help="a person's time per answer (watching a pair)")
    parser.add_argument("--rate-pause-s", type=float, default=1.0, help="a person's time per rating (one clip)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--machine", default="2-core CPU", help="where the runs ran, for the table's caption")
    add_run_options(parser, "multirun/bench_modes", "bench_modes")
    args = parser.parse_args()
    if min(args.seeds, args.jobs, args.rank_pairs, args.rate_pairs) < 1 or min(args.pause_s, args.rate_pause_s) < 0:
        parser.error("--seeds, --jobs, --rank-pairs and --rate-pairs must be positive, the pauses not negative")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    modes = {"pairs": [], "rank": ["querent.mode=rank", f"total_comparisons={args.rank_pairs}"],
             "rate": ["querent.mode=rate", f"total_comparisons={args.rate_pairs}"]}
    modes = {mode: settings for mode, settings in modes.items() if mode == "pairs" or mode in args.modes}
    pause = {"pairs": args.pause_s, "rank": args.pause_s, "rate": args.rate_pause_s}
    jobs = [(mode, seed) for mode in modes for seed in seeds]

    def run(job: tuple[str, int]) -> Run:
        mode, seed = job
        folder = args.root / mode / str(seed)
        person = ScriptedAnnotator(folder, "person", pause_s=pause[mode], seed=seed)
        return run_labelled(folder, [f"experiment={args.experiment}", *modes[mode], *args.override], [person], seed)

    with ThreadPoolExecutor(args.jobs) as pool:
        runs = dict(zip(jobs, pool.map(run, jobs), strict=True))
    lines = [f"Written by `python scripts/bench_modes.py --experiment {args.experiment} --seeds {args.seeds} "
             f"--modes {' '.join(modes)} "
             f"--first-seed {args.first_seed} --rank-pairs {args.rank_pairs} --rate-pairs {args.rate_pairs} "
             f"--pause-s {args.pause_s:g} --rate-pause-s {args.rate_pause_s:g}` on a {args.machine} "
             f"({time.strftime('%Y-%m-%d')}): `rlhp-train experiment={args.experiment} gatherer=human querent=web "
             f"querent.mode=<mode>` answered over HTTP by one scripted person, {args.pause_s:g} s a pair, "
             f"{args.rate_pause_s:g} s a rating; seeds {seeds.start}-{seeds.stop - 1}, true return mean ± 95% CI.", "",
             "| mode | true return | answers | person-minutes | labels trained on | person-minutes vs pairs |",
             "|---|---:|---:|---:|---:|---:|"]
    minutes = {}
    for mode in modes:
        done = [runs[(mode, s)] for s in seeds]
        returns = np.array([r.evaluation["true_return_mean"] for r in done])
        status = [QueryStore(r.folder.queries_db).status() for r in done]
        answers = np.array([s["answers"] for s in status])
        minutes[mode] = answers.mean() * pause[mode] / 60
        trained = [r.folder.metrics()[-1]["ratings"] if mode == "rate" else s["in_training"]
                   for s, r in zip(status, done, strict=True)]
        lines.append(f"| {mode} | {cell(returns)} | {answers.mean():.0f} | {minutes[mode]:.1f} | "
                     f"{np.mean(trained):.0f} | {minutes[mode] / minutes['pairs']:.0%} |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
