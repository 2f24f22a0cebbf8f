"""What learning the reward costs in wall time: each seed's loop run beside its true-reward ceiling.

Two runs started together share the machine's speed (a VM's drifts by about 10% over an hour), so their
ratio is steadier than one of two sweeps run at different times. For each seed it starts
``rlhp-train experiment=<name> seed=N`` and the same with ``reward_learning=none`` at once, each in its own
folder under ``--root`` (a finished pair is reused), then reads both run folders' ``wall_s`` and prints a
table: per seed, the wall times and true returns, and the ratio of the summed times. Each run gets one core
(``OMP_NUM_THREADS=1``); run it on an otherwise idle machine with two cores, or with ``--jobs N`` on a machine
with 2N cores (N pairs side by side). ``--sequential`` runs the loop, then its ceiling, each with the pair's two
cores: the fair pairing for a loop that uses a second core (``reward_learning=asynchronous``). ``--override``
changes both runs (a setting under test), ``--first-seed`` starts the seeds elsewhere (fresh seeds).

    python scripts/bench_paired.py --experiment cartpole --seeds 10 --out docs/benchmarks.md
    python scripts/bench_paired.py --experiment minatar_breakout --seeds 3 --first-seed 3 --root <runs>
    python scripts/bench_paired.py --experiment minatar_breakout --seeds 3 --sequential \
        --override reward_learning=asynchronous --root <runs>
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from bench_suite import BIN, finished_run, wall
from docblock import add_run_options, show

from rlhp.report.folders import Run, find_runs


def run_pair(root: Path, experiment: str, seed: int, overrides: list[str], sequential: bool) -> tuple[Run, Run]:
    """The finished loop and ceiling runs of ``seed``, both started at once (or one after the other) unless both
    finished."""
    folders = {"loop": root / "loop" / str(seed), "ceiling": root / "ceiling" / str(seed)}
    settings = {k: [f"experiment={experiment}", f"seed={seed}", "logger=none", *overrides, *extra]
                for k, extra in (("loop", []), ("ceiling", ["reward_learning=none"]))}
    done = {k: finished_run(f, settings[k]) for k, f in folders.items()}
    if not all(done.values()):
        if any(f.exists() for f in folders.values()):
            raise SystemExit(f"{root} holds an unfinished pair for seed {seed}: remove {folders['loop']} and "
                             f"{folders['ceiling']}")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}

        def start(k: str) -> subprocess.Popen:
            return subprocess.Popen([str(BIN / "rlhp-train"), f"hydra.run.dir={folders[k]}", *settings[k]],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

        print(f"seed {seed}: the loop and its ceiling, in {root}", flush=True)
        codes = [start(k).wait() for k in folders] if sequential else [p.wait() for p in map(start, folders)]
        if any(codes):  # both waited for, even when the first failed
            raise SystemExit(f"seed {seed}: a run failed; its train.log is in {root}")
        done = {k: find_runs(f)[0] for k, f in folders.items()}
    return done["loop"], done["ceiling"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="cartpole")
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (the rest follow it)")
    parser.add_argument("--jobs", type=int, default=1, help="pairs run side by side (each takes two cores)")
    parser.add_argument("--sequential", action="store_true",
                        help="each pair's loop, then its ceiling, each with the pair's two cores (for a loop that "
                             "uses a second core: reward_learning=asynchronous)")
    add_run_options(parser, "outputs/bench_paired", "bench_paired")
    args = parser.parse_args()

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {args.jobs}")
    with ThreadPoolExecutor(args.jobs) as pool:  # threads only wait on the runs' processes
        pairs = list(pool.map(lambda seed: run_pair(args.root, args.experiment, seed, args.override,
                                                     args.sequential), seeds))
    loop, ceiling = wall([loop for loop, _ in pairs]), wall([ceiling for _, ceiling in pairs])
    returns = np.array([[run.evaluation["true_return_mean"] for run in pair] for pair in pairs])
    ratio = loop / ceiling
    rows = "\n".join(f"| {seed} | {a:.1f} | {b:.1f} | {r:.2f}x | {ra:.1f} | {rb:.1f} |"
                     for seed, a, b, r, (ra, rb) in zip(seeds, loop, ceiling, ratio, returns, strict=True))
    loop_mean, ceiling_mean = returns.mean(0)
    # A share of a ceiling says something only when returns are positive (Pendulum's are costs).
    share = f" ({100 * loop_mean / ceiling_mean:.0f}% of it)" if ceiling_mean > 0 else ""
    options = "".join(f" --override {o}" for o in args.override)
    first = f" --first-seed {args.first_seed}" if args.first_seed else ""
    jobs = f" --jobs {args.jobs}" if args.jobs > 1 else ""
    jobs += " --sequential" if args.sequential else ""
    together = ("run one after the other, each with the pair's two cores (one torch thread a Python thread)"
                if args.sequential else "started together, one core each")
    text = (f"Written by `python scripts/bench_paired.py --experiment {args.experiment} --seeds {args.seeds}{first}"
            f"{jobs}{options}` on {os.cpu_count()} cores ({datetime.date.today()}): each seed's `rlhp-train "
            f"experiment={args.experiment}{''.join(' ' + o for o in args.override)} seed=N` beside the same with "
            f"`reward_learning=none`, {together}; wall time is the loop's `wall_s`, return the "
            "final true return (eval.json).\n\n| seed | loop s | ceiling s | ratio | loop return | ceiling return |\n"
            f"|---:|---:|---:|---:|---:|---:|\n{rows}\n"
            f"| all | {loop.sum():.1f} | {ceiling.sum():.1f} | {loop.sum() / ceiling.sum():.2f}x "
            f"({ratio.min():.2f}x-{ratio.max():.2f}x a pair) | {loop_mean:.1f} | {ceiling_mean:.1f}{share} |")
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
