"""Pixels: bytes per stored transition, memory of a preference dataset of frames, dataset save and load
rates and CNN reward training (env stepping: ``bench_atari_envs.py``).

On Pong (``env=atari``: 84x84 grey, 4 frames stacked) with a random policy; the targets are in issue terms:
a stored transition at most 1.2x one 84x84 frame (7,056 B; naive stacks cost 4x, and a fragment pair that
keeps both observations and next observations 8x), and a preference dataset of 5,500 pairs of 25-step
fragments under 2.5 GB of peak RSS, measured in a fresh process. Beside each CNN training rate: the model's own
forward and backward passes alone (no data handling), its floating-point work a pair (counted by torch), and the
pairs a second that work allows at the device's float32 matrix-product rate: a bound that no float32 data path
can beat; and the training rate under bfloat16 autocast (``reward_net.precision=bfloat16``).

    python scripts/bench_pixels.py [--pairs 5500] [--out docs/benchmarks.md]
    python scripts/bench_pixels.py --device cuda --out docs/benchmarks.md --block bench_pixels_cuda  # a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from docblock import write_block
from torch.utils.flop_counter import FlopCounterMode

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import FragmentPairs, PreferenceDataset
from rlhp.data.frames import held_bytes
from rlhp.data.hf import load_trajectories, save_trajectories
from rlhp.envs import AtariEnv, MinAtarEnv
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.rewards import CnnRewardNet
from rlhp.training import RewardTrainer

FRAME = 84 * 84
PONG = {"id": "ALE/Pong-v5", "kwargs": {"frameskip": 1}, "max_episode_steps": 500}


def episodes(steps: int, n_envs: int = 2) -> tuple[AtariEnv, list]:
    """Random-policy Pong episodes covering ``steps`` transitions."""
    env = AtariEnv(**PONG, n_envs=n_envs)
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    return env, rollout(venv, random_policy(venv.action_space), steps, frame_stack=env.frame_stack)


def gb(n: int) -> str:
    """Bytes in GB and GiB."""
    return f"{n / 1e9:.2f} GB ({n / 2**30:.2f} GiB)"


def size(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def pairs_rss(n: int, tmp: Path) -> dict:
    """In this process: a preference dataset of ``n`` Pong pairs of 25-step fragments, grown 500 pairs a round
    as a run grows it and then saved as a checkpoint saves it; the peak RSS after each."""
    env, trajs = episodes(2000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Python, torch, the env, its episodes
    dataset = PreferenceDataset(capacity=n)
    fragmenter = RandomFragmenter(np.random.default_rng(0))
    for lo in range(0, n, 500):
        m = min(500, n - lo)
        dataset.push(fragmenter(trajs, 25, m), np.ones(m, np.float32), np.arange(lo, lo + m))
    built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    dataset.save(tmp / "p")
    return {"pairs": n, "bytes_held": held_bytes(dataset.pairs.frames), "before": before, "built": built,
            "saved": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def held(pairs: FragmentPairs) -> int:
    """Bytes that hold a batch of pairs: its frames and the steps' other arrays."""
    return sum(held_bytes(v) for v in pairs.columns().values())


def sync(device: torch.device) -> None:
    """Wait for the device's queue, so that a timer reads the work done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], object], device: torch.device, repeats: int = 5) -> float:
    """Seconds one ``step`` takes, after two warm-up calls."""
    for _ in range(2):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    sync(device)
    return (time.perf_counter() - start) / repeats


def matmul_gflops(device: torch.device, n: int = 2048) -> float:
    """The device's float32 matrix-product rate, GFLOP/s (the dense work a convolution can at best run at)."""
    a = torch.rand(n, n, device=device)
    return 2 * n**3 / timed(lambda: a @ a, device) / 1e9


def model_alone(net: CnnRewardNet, device: torch.device, pairs: int = 16, length: int = 25) -> tuple[float, float]:
    """(GFLOP a pair, pairs/s) of the members' forward and backward passes through their convolutions and dense
    layer over a batch of ``pairs`` pairs of ``length``-step fragments, inputs already in place: what training
    costs with no data handling."""
    x = torch.rand(net.members, 2 * pairs * length, net.body.in_dim, device=device)
    net.train()  # dropout and batch norm as training runs them

    def step() -> None:
        net.body.features(x).sum().backward()  # the output layer scores summed features once a fragment in training

    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops() / pairs / 1e9, pairs / timed(step, device)


def training_rate(env: AtariEnv | MinAtarEnv, pairs: FragmentPairs, device: torch.device,
                  precision: str) -> tuple[CnnRewardNet, float]:
    """A 3-member CNN reward model and the pairs a second it trains on ``pairs`` (two passes, after a warm-up)."""
    dataset = PreferenceDataset()
    dataset.push(pairs, np.ones(len(pairs), np.float32), np.arange(len(pairs)))
    torch.manual_seed(0)
    net = CnnRewardNet(*env.spaces(), members=3, precision=precision).to(device)
    trainer = RewardTrainer(net, np.random.default_rng(0), epochs=2, batch_size=16)
    trainer.train(dataset, epoch_multiplier=0.5)  # warm-up
    start = time.perf_counter()
    trainer.train(dataset)
    sync(device)  # the GPU's queue is part of the time
    return net, 2 * len(pairs) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5500, help="pairs in the measured preference dataset")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help="where the CNN reward model trains (cpu, cuda)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--block", default="bench_pixels", help="the marked block of --out to write")
    args = parser.parse_args()
    device = torch.device(args.device)
    # The machine in words: its CPU cores, and the GPU's name where the model trains on one.
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    machine = f"{os.cpu_count()}-core CPU" + (f" and one {where}" if device.type == "cuda" else ", no GPU")
    if args.child is not None:
        print(json.dumps(pairs_rss(args.pairs, args.child)))
        return
    rows = []
    env, trajs = episodes(2000)
    transitions = sum(map(len, trajs))
    in_memory = sum(held_bytes(t.obs) + t.acts.nbytes + t.rews.nbytes for t in trajs) / transitions
    rows.append(("trajectory in memory, bytes a transition", f"{in_memory:,.0f}", f"{in_memory / FRAME:.2f}x"))
    pairs = RandomFragmenter(np.random.default_rng(0))(trajs, 25, 100)
    per_pair_step = held(pairs) / pairs.dones.size
    rows.append(("fragment pair in memory, bytes a transition", f"{per_pair_step:,.0f}",
                 f"{per_pair_step / FRAME:.2f}x"))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        save_trajectories(trajs, Path(tmp) / "t", metadata={}, observation_space=env.observation_space,
                          action_space=env.action_space)
        save_s = time.perf_counter() - start
        start = time.perf_counter()
        loaded = load_trajectories(Path(tmp) / "t")
        float(sum(t.obs.sum(dtype=np.float64) for t in loaded))  # read every value once
        load_s = time.perf_counter() - start
        on_disk = size(Path(tmp) / "t") / transitions
        dataset = PreferenceDataset()
        dataset.push(pairs, np.ones(len(pairs), np.float32), np.arange(len(pairs)))
        dataset.save(Path(tmp) / "p")
        pref_disk = size(Path(tmp) / "p") / pairs.dones.size
        child = json.loads(subprocess.run([sys.executable, __file__, "--pairs", str(args.pairs), "--child", tmp],
                                          check=True, capture_output=True, text=True).stdout)
    rows.append(("trajectories dataset on disk, bytes a transition", f"{on_disk:,.0f}", f"{on_disk / FRAME:.2f}x"))
    rows.append(("preference dataset on disk, bytes a transition", f"{pref_disk:,.0f}", f"{pref_disk / FRAME:.2f}x"))
    rows.append(("trajectories dataset save, transitions/s", f"{transitions / save_s:,.0f}", ""))
    rows.append(("trajectories dataset load and read, transitions/s", f"{transitions / load_s:,.0f}", ""))
    rows.append((f"preference dataset of {args.pairs:,} pairs: its frames", gb(child["bytes_held"]), ""))
    rows.append(("the process before it (Python, torch, the env and its episodes): peak RSS", gb(child["before"]),
                 ""))
    rows.append(("the process with it, grown 500 pairs a round: peak RSS", gb(child["built"]), ""))
    rows.append(("the same, after saving it (a checkpoint): peak RSS", gb(child["saved"]), ""))
    rows.append(("the dataset's share of the peak (with it, saved, less before)", gb(child["saved"] - child["before"]),
                 "target < 2.5 GB"))
    flops = matmul_gflops(device)
    for name, net_env in (("Pong", env), ("MinAtar Breakout", MinAtarEnv("Breakout", n_envs=2))):
        source = pairs if net_env is env else RandomFragmenter(np.random.default_rng(0))(
            rollout(net_env.make(seed=0), random_policy(net_env.action_space), 4000), 25, 100)
        net, rate = training_rate(net_env, source, device, "float32")
        rows.append((f"CNN reward training (3 members, {where}), {name}: pairs/s", f"{rate:,.0f}", ""))
        fast = training_rate(net_env, source, device, "bfloat16")[1]
        rows.append((f"the same with `reward_net.precision=bfloat16`, {name}: pairs/s", f"{fast:,.0f}",
                     f"{fast / rate:.2f}x"))
        gflop, alone = model_alone(net, device)
        rows.append((f"the model alone, forward and backward, {name}: GFLOP a pair; pairs/s",
                     f"{gflop:.2f}; {alone:,.0f}", f"training runs at {rate / alone:.0%} of it"))
        rows.append((f"pairs/s at the float32 matrix-product rate ({flops:,.0f} GFLOP/s), {name}: a bound",
                     f"{flops / gflop:,.0f}", f"{flops / gflop / rate:.1f}x training's rate"))
    text = "\n".join([
        f"Written by `python scripts/bench_pixels.py --pairs {args.pairs}"
        f"{'' if args.device == 'cpu' else ' --device ' + args.device}` on a {machine} ({time.strftime('%Y-%m-%d')}). "
        f"Random-policy Pong, 84x84 grey, 4 frames stacked; one frame is {FRAME:,} B.", "",
        "| measure | value | of one frame / target |", "|---|---:|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows)])
    print(text)
    if args.out is not None:
        write_block(args.out, args.block, text)


if __name__ == "__main__":
    main()
