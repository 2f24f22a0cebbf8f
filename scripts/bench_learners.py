"""The learners: each agent option on one env's true reward, at a fixed budget of steps, one run at a time.

For each agent (``conf/agent/<name>.yaml``) and seed it runs ``rlhp-train reward_learning=none env=gym
env.id=<env> agent=<name> total_timesteps=<steps> seed=N`` into its own folder under ``--root`` (a finished run
is reused), alone on the machine, then reads the run folders and writes a table: agent steps per second of the
agent's training phase, the final true return (mean and 95% Student-t interval) and wall time. Steps/s is the
speed of a learner; the return says what it bought at this budget (a short budget favours fast starters).

    python scripts/bench_learners.py --env HalfCheetah-v5 --steps 20000 --seeds 1 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

import numpy as np
from bench_suite import train
from docblock import add_run_options, show

from rlhp.report.folders import Run, find_runs
from rlhp.report.stats import mean_ci

AGENTS = ["sac", "sbx_sac", "tqc", "crossq"]


def run(root: Path, env: str, agent: str, steps: int, seed: int, overrides: list[str]) -> Run:
    """The finished run of ``agent`` on ``env`` at ``seed``, trained unless it already finished."""
    folder = root / env / agent / str(seed)
    done = [r for r in find_runs(folder) if r.status == "finished"] if folder.is_dir() else []
    if not done:
        if folder.exists():
            raise SystemExit(f"{folder} holds an unfinished run: remove it")
        command = ["reward_learning=none", "env=gym", f"env.id={env}", f"agent={agent}",
                   f"total_timesteps={steps}", f"seed={seed}", "logger=none", f"hydra.run.dir={folder}", *overrides]
        print(f"$ rlhp-train {' '.join(command)}", flush=True)
        train(command)
        done = find_runs(folder)
    return done[0]


def speed(run: Run) -> float:
    """Agent steps per second of the agent's training phase over the run's second half: the first holds the
    steps before learning starts and a JAX agent's compiling."""
    half = len(run.rows) // 2
    later = run.rows[half:]
    return (later[-1]["timesteps"] - run.rows[half - 1]["timesteps"]) / sum(r["time_agent_training_s"] for r in later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--agents", nargs="+", default=AGENTS)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=1)
    add_run_options(parser, "outputs/bench_learners", "bench_learners")
    args = parser.parse_args()

    rows = []
    for agent in args.agents:
        runs = [run(args.root, args.env, agent, args.steps, seed, args.override) for seed in range(args.seeds)]
        returns = np.array([r.evaluation["true_return_mean"] for r in runs])
        mean, half = mean_ci(returns)
        ci = f" ± {float(half):.1f}" if len(runs) > 1 else ""
        rows.append(f"| `{agent}` | {np.mean([speed(r) for r in runs]):,.0f} | {float(mean):.1f}{ci} | "
                    f"{np.mean([r.rows[-1]['wall_s'] for r in runs]):,.0f} |")
    options = "".join(f" --override {o}" for o in args.override)
    text = (f"Written by `python scripts/bench_learners.py --env {args.env} --agents {' '.join(args.agents)} --steps "
            f"{args.steps} --seeds {args.seeds}{options}` on {os.cpu_count()} cores, one run at a time "
            f"({datetime.date.today()}): each agent option with its config's settings on {args.env}'s own reward "
            f"(`reward_learning=none`), {args.steps:,} steps, seeds 0-{args.seeds - 1}; steps/s is the agent's "
            "training phase over the run's second half (the first holds the steps before learning starts and a JAX "
            "agent's compiling), return the final true return (eval.json), wall s the whole loop's.\n\n"
            "| agent | steps/s | true return | wall s |\n|---|---:|---:|---:|\n" + "\n".join(rows))
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
