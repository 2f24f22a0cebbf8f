"""Atari env stepping: rlhp's ``env.vectorize`` options against ALE's own vector env, and the env's share of
the agent's learning on Pong, which bounds what a faster env could save a run.

ALE's ``AtariVectorEnv`` (ale-py's C++ vector env: a thread pool with its own frame skip, grey, resize and
frame stack) is measured beside SB3's Atari wrappers in one process (``vectorize=dummy``) and in a process a
copy (``subproc``). The share: the steps a second of A2C learning with ``experiment=pong``'s settings (env
stepping included) over the env's own rate in the same process; the learned reward's predictions come on top
in a run, so a real round spends less of its time in the env than this.

    python scripts/bench_atari_envs.py [--copies 16] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from ale_py.vector_env import AtariVectorEnv
from docblock import write_block
from stable_baselines3 import A2C

from rlhp.envs import AtariEnv

ALE = "ALE's AtariVectorEnv"
PONG = {"id": "ALE/Pong-v5", "kwargs": {"frameskip": 1}, "max_episode_steps": 4000}


def steps_per_s(step: Callable[[np.ndarray], object], copies: int, batches: int) -> float:
    """Env steps a second over ``batches`` steps of every copy (after one step to warm up)."""
    acts = np.zeros(copies, np.int64)
    step(acts)
    start = time.perf_counter()
    for _ in range(batches):
        step(acts)
    return copies * batches / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=16, help="env copies (experiment=pong has 16)")
    parser.add_argument("--batches", type=int, default=250, help="steps of every copy to time")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rates = {}
    for vectorize in ("dummy", "subproc"):
        venv = AtariEnv(**PONG, n_envs=args.copies, vectorize=vectorize).make(seed=0)
        venv.reset()
        rates[f"vectorize={vectorize}"] = steps_per_s(venv.step, args.copies, args.batches)
        venv.close()
    ale = AtariVectorEnv(game="pong", num_envs=args.copies, num_threads=os.cpu_count() or 1)
    ale.reset(seed=0)
    rates[ALE] = steps_per_s(ale.step, args.copies, args.batches)
    ale.close()
    venv = AtariEnv(**PONG, n_envs=args.copies).make(seed=0)
    agent = A2C("CnnPolicy", venv, n_steps=5, learning_rate=7e-4, ent_coef=0.01, vf_coef=0.25, device="cpu", seed=0)
    agent.learn(5 * args.copies * 10)  # warm up
    start = time.perf_counter()
    agent.learn(args.copies * args.batches, reset_num_timesteps=False)
    learning = args.copies * args.batches / (time.perf_counter() - start)
    dummy = rates["vectorize=dummy"]
    share, speedup = learning / dummy, rates[ALE] / dummy
    text = "\n".join([
        f"Written by `python scripts/bench_atari_envs.py --copies {args.copies} --batches {args.batches}` on a "
        f"{os.cpu_count()}-core CPU, no GPU ({time.strftime('%Y-%m-%d')}). Pong, 84x84 grey, 4 frames stacked, frame "
        f"skip 4, {args.copies} copies, random actions; env steps/s (against `vectorize=dummy`); A2C: "
        "`experiment=pong`'s agent learning, env included; share: the env's part of that learning; saved: the most "
        "an env as fast as ALE's would save of it.", "",
        "| `vectorize=dummy` | `vectorize=subproc` | ALE's `AtariVectorEnv` | A2C steps/s | share | saved |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {dummy:,.0f} | {rates['vectorize=subproc']:,.0f} ({rates['vectorize=subproc'] / dummy:.2f}x) | "
        f"{rates[ALE]:,.0f} ({speedup:.2f}x) | {learning:,.0f} | {share:.0%} | {share * (1 - 1 / speedup):.0%} |"])
    print(text)
    if args.out:
        write_block(args.out, "bench_atari_envs", text)


if __name__ == "__main__":
    main()
