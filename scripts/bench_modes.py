"""Person-minutes per labelling mode: the same run labelled over HTTP by a scripted person who compares pairs
(``querent.mode=pairs``), one who places clips in a ranking (``querent.mode=rank``: ``rank`` trains on the pairs it
implies, ``rank_list`` on the ranking as a list, ``gatherer.ranking_as=list``) and one who rates clips alone
(``querent.mode=rate``).

Each mode labels ``--experiment`` (``gatherer=human``, the clips drawn and served as for people) on seeds
``--seeds``. The annotator answers from the fragments' true returns, ``--answer-delay-s`` after its last answer,
and each round waits for every answer (``gatherer.min_answered_frac=1``, no time-out), so the answers decide a
run, not the machine's pace. A person-minute counts the time a person takes: ``--pause-s`` to watch a pair (a
ranking's comparisons included) and ``--rate-pause-s`` to watch one clip and rate it. Ranking places both clips of
each of ``--rank-pairs`` pairs (``total_comparisons``) and trains on every pair the ranking implies; rating rates
both clips of a share ``--rate-share`` of ``--rate-pairs`` pairs on a scale of 1 to ``--scale`` and asks the rest
as pairs. A finished run under ``--root`` is reused. The table: each mode's final true return (mean ± 95%
interval), answers, person-minutes, labels trained on (pairs, implied pairs and rated clips), and person-minutes
over pairs'.

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

from rlhp.data.ratings import MAX_SCALE
from rlhp.human.server.answers import AnswerStore
from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.report.folders import Run

WAIT_S = 86_400
"""A round's time-out: a round waits for every answer."""
LIST_MODE = (" (`rank_list`: `querent.mode=rank gatherer.ranking_as=list`, the ranking trained on as one list; its "
             "labels trained on are the pairs it implies)")
"""What the table's caption says of the ``rank_list`` mode, where it has one."""


def person_minutes(status: dict, pair_s: float, rating_s: float) -> float:
    """A person's minutes behind a run's answers (its labelling status): ``pair_s`` for each choice between two
    clips (a ranking's comparisons included), ``rating_s`` for each rating of one clip."""
    return ((status["answers"] - status["ratings"]) * pair_s + status["ratings"] * rating_s) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="cartpole_100_labels")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=["pairs", "rank", "rank_list", "rate"],
                        default=["pairs", "rank", "rate"],
                        help="the modes to run (pairs always: the others are measured against it)")
    parser.add_argument("--rank-pairs", type=int, default=10, help="total_comparisons in ranking mode")
    parser.add_argument("--rate-pairs", type=int, default=25, help="total_comparisons in rating mode")
    parser.add_argument("--scale", type=int, default=5, help="rating mode's scale, 1 to SCALE (querent.scale)")
    parser.add_argument("--rate-share", type=float, default=1.0,
                        help="rating mode's share of pairs whose clips are rated (querent.rate_share)")
    parser.add_argument("--pause-s", type=float, default=1.5, help="a person's time per answer (watching a pair)")
    parser.add_argument("--rate-pause-s", type=float, default=1.0, help="a person's time per rating (one clip)")
    parser.add_argument("--answer-delay-s", type=float, default=0.05,
                        help="the scripted annotator's wait after each answer (the result does not depend on it)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--machine", default="2-core CPU", help="where the runs ran, for the table's caption")
    add_run_options(parser, "multirun/bench_modes", "bench_modes")
    args = parser.parse_args()
    if min(args.seeds, args.jobs, args.rank_pairs, args.rate_pairs) < 1 or \
            min(args.pause_s, args.rate_pause_s, args.answer_delay_s) < 0:
        parser.error("--seeds, --jobs, --rank-pairs and --rate-pairs must be positive, the pauses not negative")
    if not 2 <= args.scale <= MAX_SCALE:
        parser.error(f"--scale must lie in [2, {MAX_SCALE}], got {args.scale}")
    if not 0 < args.rate_share <= 1:
        parser.error(f"--rate-share must lie in (0, 1], got {args.rate_share}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    modes = {"pairs": [], "rank": ["querent.mode=rank", f"total_comparisons={args.rank_pairs}"],
             "rank_list": ["querent.mode=rank", "gatherer.ranking_as=list", f"total_comparisons={args.rank_pairs}"],
             "rate": ["querent.mode=rate", f"total_comparisons={args.rate_pairs}",
                      f"querent.rate_share={args.rate_share}", f"querent.scale={args.scale}"]}
    modes = {mode: settings for mode, settings in modes.items() if mode == "pairs" or mode in args.modes}
    waits = ["gatherer.min_answered_frac=1", f"gatherer.timeout_s={WAIT_S}"]
    jobs = [(mode, seed) for mode in modes for seed in seeds]

    def run(job: tuple[str, int]) -> Run:
        mode, seed = job
        folder = args.root / mode / str(seed)
        person = ScriptedAnnotator(folder, "person", pause_s=args.answer_delay_s, seed=seed)
        return run_labelled(folder, [f"experiment={args.experiment}", *modes[mode], *waits, *args.override], [person],
                            seed)

    with ThreadPoolExecutor(args.jobs) as pool:
        runs = dict(zip(jobs, pool.map(run, jobs), strict=True))
    lines = [f"Written by `python scripts/bench_modes.py --experiment {args.experiment} --seeds {args.seeds} "
             f"--modes {' '.join(modes)} "
             f"--first-seed {args.first_seed} --rank-pairs {args.rank_pairs} --rate-pairs {args.rate_pairs} "
             f"--scale {args.scale} --rate-share {args.rate_share:g} --pause-s {args.pause_s:g} "
             f"--rate-pause-s {args.rate_pause_s:g}` on a "
             f"{args.machine} ({time.strftime('%Y-%m-%d')}): `rlhp-train experiment={args.experiment} gatherer=human "
             f"querent=web querent.mode=<mode> gatherer.min_answered_frac=1`"
             f"{LIST_MODE if 'rank_list' in modes else ''} answered over HTTP by one scripted person; person-minutes "
             f"count {args.pause_s:g} s a pair and {args.rate_pause_s:g} s a rating; seeds "
             f"{seeds.start}-{seeds.stop - 1}, true return mean ± 95% CI.", "",
             "| mode | true return | answers | person-minutes | labels trained on | person-minutes vs pairs |",
             "|---|---:|---:|---:|---:|---:|"]
    minutes = {}
    for mode in modes:
        done = [runs[(mode, s)] for s in seeds]
        returns = np.array([r.evaluation["true_return_mean"] for r in done])
        status = [AnswerStore(r.folder.queries_db).status() for r in done]
        answers = np.array([s["answers"] for s in status])
        minutes[mode] = np.mean([person_minutes(s, args.pause_s, args.rate_pause_s) for s in status])
        trained = [s["in_training"] for s in status]  # pairs, implied pairs and rated clips taken
        lines.append(f"| {mode} | {cell(returns)} | {answers.mean():.0f} | {minutes[mode]:.1f} | "
                     f"{np.mean(trained):.0f} | {minutes[mode] / minutes['pairs']:.0%} |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
