"""Re-evaluate finished runs' final agents over more episodes than their own evaluation took, on fresh start states.

Where returns vary widely with the start state (Pendulum: a policy's episodes spread by about 90), a 20-episode
mean sits within about 20 of the policy's own, so a run near a target passes or fails by its draw of starts; more
episodes say on which side it is. Where the env reports success (Meta-World), the success rate too. Each run is
read from its folder (its config and a checkpoint's agent: the final one, or a round's with ``--checkpoint
iter_0040`` to see what the agent did part-way); nothing is written.

    python scripts/bench_reevaluate.py <run or sweep folder> ... --episodes 200 --target -200
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from hydra.utils import get_class, instantiate

from rlhp.experiment.evaluation import policy_return
from rlhp.report.folders import Run, find_runs

SEED_OFFSET = 50_000
"""Added to a run's seed for the starts of its re-evaluation: apart from its training's and its own evaluation's."""


def reevaluate(run: Run, episodes: int, checkpoint: str = "final") -> dict[str, float]:
    """The mean and std of the true return of the run's agent at ``checkpoint`` over ``episodes`` deterministic
    episodes, and their success rate where the env reports one."""
    config = run.folder.config()
    agent = get_class(config.agent._target_).load(run.folder.checkpoint(checkpoint) / "agent.zip", device="cpu")
    return policy_return(agent, instantiate(config.env), episodes, int(config.seed) + SEED_OFFSET)


def success(result: dict) -> str:
    """A table cell: the success rate in percent, where the evaluation has one."""
    return f"{100 * result['success_rate']:.0f}%" if "success_rate" in result else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="run or sweep folders")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--target", type=float, default=-np.inf, help="count the runs at or above this return")
    parser.add_argument("--checkpoint", default="final",
                        help="the checkpoint whose agent to evaluate: final, or a round's (iter_0040)")
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    runs = [run for folder in args.folders for run in find_runs(folder) if run.status == "finished"]
    if not runs:
        parser.error(f"no finished run under {', '.join(map(str, args.folders))}")
    lacking = [str(run.folder.path) for run in runs
               if not (run.folder.checkpoint(args.checkpoint) / "agent.zip").is_file()]
    if lacking:
        parser.error(f"no checkpoint {args.checkpoint!r} in {', '.join(lacking)} (a round's is kept where the run's "
                     "checkpoint_every and keep_checkpoints kept it)")
    print(f"| run | seed | own evaluation: return, success | {args.checkpoint}, over {args.episodes} episodes: "
          "return (± standard error), success |\n|---|---:|---:|---:|")
    recorded, again = [], []
    for run in runs:
        result = reevaluate(run, args.episodes, args.checkpoint)
        recorded.append(run.evaluation["true_return_mean"])
        again.append(result["true_return_mean"])
        print(f"| {run.folder.path} | {run.overrides.get('seed', '-')} | {recorded[-1]:.1f}, {success(run.evaluation)} "
              f"({run.evaluation.get('episodes', '?')} episodes) | {again[-1]:.1f} ± "
              f"{result['true_return_std'] / np.sqrt(args.episodes):.1f}, {success(result)} |")
    if np.isfinite(args.target):
        print(f"\nAt or above {args.target}: {sum(r >= args.target for r in recorded)}/{len(runs)} by their own "
              f"evaluation, {sum(r >= args.target for r in again)}/{len(runs)} over {args.episodes} episodes.")


if __name__ == "__main__":
    main()
