"""A team's quality: runs labelled over HTTP by scripted annotators, one of them answering at random, with and
without gold queries that leave such a person out, against a team of honest annotators alone.

Three teams label ``--experiment`` (``gatherer=human``, the clips drawn and served as for people) on seeds
``--seeds``: two honest annotators; the same two and a third who answers every query left or right at random; and
that team with ``querent.gold_rate``, ``gatherer.min_gold_accuracy`` and ``gatherer.min_gold_answers`` set
(``--gold-rate``, ``--min-accuracy``, ``--min-gold-answers``).
Honest annotators prefer the fragment with the higher true return (``rlhp.human.server.scripted``). A finished run
under ``--root`` is reused. The table: each team's final true return (mean ± 95% interval), labels answered, the
share of the labels trained on that came from the random annotator, and how many runs left them out.

    python scripts/bench_team.py --seeds 5 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from bench_suite import cell, train
from docblock import add_run_options, show

from rlhp.data.hf import load_saved
from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.human.store import QueryStore
from rlhp.report.folders import Run, find_runs
from rlhp.runs import RunFolder

RANDOM = "random"
"""The name of the annotator who answers at random."""


def teams(gold_rate: float, min_accuracy: float, min_answers: int) -> dict[str, tuple[bool, list[str]]]:
    """Each team by name: whether a random annotator joins the two honest ones, and the run's extra settings."""
    return {"2 honest": (False, []),
            "2 honest + 1 random": (True, []),
            "2 honest + 1 random, gold queries": (True, [f"querent.gold_rate={gold_rate}",
                                                         f"gatherer.min_gold_accuracy={min_accuracy}",
                                                         f"gatherer.min_gold_answers={min_answers}"])}


def run_labelled(folder: Path, overrides: list[str], people: list[ScriptedAnnotator], seed: int) -> Run:
    """``rlhp-train`` with people (``gatherer=human``) answered by ``people`` over HTTP (reused when finished)."""
    if not (folder / "eval.json").is_file():
        with ExitStack() as stack:
            for person in people:
                stack.enter_context(person)
            train([*overrides, "gatherer=human", "querent=web", "gatherer.port=0", "logger=none", f"seed={seed}",
                   f"hydra.run.dir={folder}"])
    return find_runs(folder)[0]


def run_team(folder: Path, overrides: list[str], with_random: bool, pause_s: float, seed: int) -> Run:
    """One run labelled by the team (reused when finished)."""
    people = [ScriptedAnnotator(folder, f"honest-{i}", pause_s=pause_s, seed=seed) for i in range(2)]
    if with_random:
        people.append(ScriptedAnnotator(folder, RANDOM, pause_s=pause_s, random_rate=1.0, seed=seed + 100))
    return run_labelled(folder, overrides, people, seed)


def trained_from_random(run: RunFolder) -> float:
    """The share of the labels the run trained on that the random annotator gave."""
    names = [n for p in run.label_journal.rounds().values()
             for joined in load_saved(p)["annotator"] for n in joined.split(",")]
    return sum(n == RANDOM for n in names) / max(1, len(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="cartpole_100_labels")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--gold-rate", type=float, default=0.3)
    parser.add_argument("--min-accuracy", type=float, default=0.7)
    parser.add_argument("--min-gold-answers", type=int, default=3)
    parser.add_argument("--pause-s", type=float, default=0.05, help="each annotator's wait after an answer")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--machine", default="2-core CPU", help="where the runs ran, for the table's caption")
    add_run_options(parser, "multirun/bench_team", "bench_team")
    args = parser.parse_args()
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be positive")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    chosen = teams(args.gold_rate, args.min_accuracy, args.min_gold_answers)
    jobs = [(name, seed) for name in chosen for seed in seeds]

    def run(job: tuple[str, int]) -> Run:
        name, seed = job
        with_random, settings = chosen[name]
        folder = args.root / "".join(c if c.isalnum() else "_" for c in name) / str(seed)
        return run_team(folder, [f"experiment={args.experiment}", *settings, *args.override], with_random,
                        args.pause_s, seed)

    with ThreadPoolExecutor(args.jobs) as pool:
        runs = dict(zip(jobs, pool.map(run, jobs), strict=True))
    lines = [f"Written by `python scripts/bench_team.py --experiment {args.experiment} --seeds {args.seeds} "
             f"--first-seed {args.first_seed} --gold-rate {args.gold_rate} --min-accuracy {args.min_accuracy} "
             f"--min-gold-answers {args.min_gold_answers}` on a "
             f"{args.machine} ({time.strftime('%Y-%m-%d')}): `rlhp-train experiment={args.experiment} gatherer=human` "
             f"answered over HTTP by scripted annotators, {args.pause_s:g} s between answers; seeds "
             f"{seeds.start}-{seeds.stop - 1}, true return mean ± 95% CI.", "",
             "| team | true return | labels answered | trained-on labels from the random annotator | runs that "
             "left them out |", "|---|---:|---:|---:|---:|"]
    for name in chosen:
        done = [runs[(name, s)] for s in seeds]
        returns = np.array([r.evaluation["true_return_mean"] for r in done])
        people = [QueryStore(r.folder.queries_db).team() for r in done]
        answers = [sum(p.answers for p in team.values()) for team in people]
        random_share = np.array([trained_from_random(r.folder) for r in done])
        left = sum(RANDOM in team and bool(team[RANDOM].left_out) for team in people)
        lines.append(f"| {name} | {cell(returns)} | {np.mean(answers):.0f} | {100 * random_share.mean():.0f}% | "
                     f"{left} of {len(done)} |")
    show("\n".join(lines), args.out, args.block)


if __name__ == "__main__":
    main()
