"""What learning the reward costs in wall time: each seed's loop run beside its true-reward ceiling.

Two runs started together share the machine's speed (a VM's drifts by about 10% over an hour), so their
ratio is steadier than one of two sweeps run at different times. For each seed it starts
``rlhp-train experiment=<name> seed=N`` and the same with ``reward_learning=none`` at once, each in its own
folder under ``--root`` (a finished pair is reused), then reads both run folders' ``wall_s`` and prints a
table: per seed, and the ratio of the summed times. Run it on an otherwise idle machine with two cores.

    python scripts/bench_paired.py --experiment cartpole --seeds 10 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
from pathlib import Path

from bench_suite import BIN, wall
from docblock import show

from rlhp.report.folders import Run, find_runs


def run_pair(root: Path, experiment: str, seed: int) -> tuple[Run, Run]:
    """The finished loop and ceiling runs of ``seed``, both started at once unless both finished."""
    folders = {"loop": root / "loop" / str(seed), "ceiling": root / "ceiling" / str(seed)}
    extra = {"loop": [], "ceiling": ["reward_learning=none"]}
    done = {k: [r for r in find_runs(f) if r.status == "finished"] if f.is_dir() else [] for k, f in folders.items()}
    if not all(done.values()):
        if any(f.exists() for f in folders.values()):
            raise SystemExit(f"{root} holds an unfinished pair for seed {seed}: remove {folders['loop']} and "
                             f"{folders['ceiling']}")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs = [subprocess.Popen([str(BIN / "rlhp-train"), f"experiment={experiment}", f"seed={seed}", "logger=none",
                                   f"hydra.run.dir={folders[k]}", *extra[k]],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                 for k in folders]
        print(f"seed {seed}: the loop and its ceiling, in {root}", flush=True)
        if any([p.wait() for p in procs]):  # a list: wait for both, even when the first failed
            raise SystemExit(f"seed {seed}: a run failed; its train.log is in {root}")
        done = {k: find_runs(f) for k, f in folders.items()}
    return done["loop"][0], done["ceiling"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="cartpole")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--root", type=Path, default=Path("outputs/bench_paired"))
    parser.add_argument("--out", type=Path, default=None, help="write the page here (else print it)")
    parser.add_argument("--block", default="bench_paired", help="the marked block of --out to write")
    args = parser.parse_args()

    pairs = [run_pair(args.root, args.experiment, seed) for seed in range(args.seeds)]
    loop, ceiling = wall([loop for loop, _ in pairs]), wall([ceiling for _, ceiling in pairs])
    ratio = loop / ceiling
    rows = "\n".join(f"| {seed} | {a:.1f} | {b:.1f} | {r:.2f}x |"
                     for seed, (a, b, r) in enumerate(zip(loop, ceiling, ratio, strict=True)))
    text = (f"Written by `python scripts/bench_paired.py --experiment {args.experiment} --seeds {args.seeds}` on "
            f"{os.cpu_count()} cores ({datetime.date.today()}): each seed's `rlhp-train experiment={args.experiment} "
            f"seed=N` beside the same with `reward_learning=none`, started together; wall time is the loop's "
            f"`wall_s`.\n\n| seed | loop s | ceiling s | ratio |\n|---:|---:|---:|---:|\n{rows}\n"
            f"| all | {loop.sum():.1f} | {ceiling.sum():.1f} | {loop.sum() / ceiling.sum():.2f}x "
            f"({ratio.min():.2f}x-{ratio.max():.2f}x a pair) |")
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
