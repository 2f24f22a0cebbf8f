"""Reward-model throughput (vectorised vs a per-pair Python loop) and one loop round, timed.

Usage: python scripts/bench_reward.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from hydra import compose, initialize_config_module

from rlhp.data import FragmentPairs, PreferenceDataset
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.experiment.compose import compose as compose_run
from rlhp.preference_model import preference_logprobs
from rlhp.rewards import RewardNet
from rlhp.training import RewardTrainer

PAIRS, LENGTH, BATCH = 1000, 50, 32


def cartpole_pairs(seed: int = 0) -> tuple[PreferenceDataset, GymEnv]:
    """1,000 random CartPole-shaped fragment pairs with random labels."""
    rng = np.random.default_rng(seed)
    frames = rng.normal(size=(PAIRS, 2, LENGTH + 1, 4)).astype(np.float32)
    obs = frames[:, :, :-1]
    pairs = FragmentPairs(frames=frames, acts=rng.integers(0, 2, (PAIRS, 2, LENGTH)),
                          dones=np.zeros((PAIRS, 2, LENGTH), bool), rews=obs[..., 0],
                          episode=np.full((PAIRS, 2), -1), start=np.zeros((PAIRS, 2), np.int64),
                          quality=obs[..., 0].sum(-1))
    ds = PreferenceDataset()
    ds.push(pairs, rng.integers(0, 2, PAIRS).astype(np.float32), np.arange(PAIRS))
    return ds, GymEnv(FIXED_HORIZON_CARTPOLE)


def make_net(members: int) -> RewardNet:
    """The reward net as ``rlhp/conf/reward_net`` builds it, on CartPole's spaces."""
    env = GymEnv(FIXED_HORIZON_CARTPOLE).make_single()
    kwargs = {"hidden_sizes": [32, 32], "use_action": True, "input_clip": 5.0, "normalize_input": False}
    return RewardNet(env.observation_space, env.action_space, members=members, **kwargs)


def best_of(fn, repeats: int = 5) -> float:
    """Fastest wall time of ``repeats`` calls after one untimed warm-up call (allocator, caches)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def vectorised_train(members: int) -> float:
    """Pairs per second of one epoch of RewardTrainer."""
    ds, _ = cartpole_pairs()
    trainer = RewardTrainer(make_net(members), np.random.default_rng(0), batch_size=BATCH, epochs=1)
    return PAIRS / best_of(lambda: trainer.train(ds))


def vectorised_forward(members: int) -> float:
    """Pairs per second of the returns of whole minibatches, no gradient."""
    ds, _ = cartpole_pairs()
    net, inputs = make_net(members), ds.pairs.tensors()

    @torch.no_grad()
    def run() -> None:
        for start in range(0, PAIRS, BATCH):
            net(*(x[start:start + BATCH] for x in inputs)).sum(-1)

    return PAIRS / best_of(run)


def per_pair_loop(train: bool) -> float:
    """The reference design: each fragment flattened and scored alone, one loss per pair."""
    ds, _ = cartpole_pairs()
    net = make_net(1)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    pairs, labels = ds.pairs, torch.as_tensor(ds.labels)

    def run() -> None:
        for start in range(0, PAIRS, BATCH):
            losses = []
            for i in range(start, min(start + BATCH, PAIRS)):
                returns = []
                for j in range(2):
                    frag = [torch.as_tensor(getattr(pairs, k)[i, j]) for k in ("obs", "acts", "next_obs", "dones")]
                    returns.append(net(*frag)[0].sum())
                first, second = preference_logprobs(torch.stack(returns))
                losses.append(-(labels[i] * first + (1 - labels[i]) * second))
            if train:
                opt.zero_grad()
                torch.stack(losses).mean().backward()
                opt.step()

    # Best of 3, not 5 (a call takes about a second); best of one let a noisy neighbour slow the
    # reference alone and inflate the speed-up.
    if train:
        return PAIRS / best_of(run, 3)
    with torch.no_grad():
        return PAIRS / best_of(run, 3)


def loop_round() -> dict[str, float]:
    """Seconds per phase of round 1 of the default CartPole loop (after the initial round)."""
    with initialize_config_module("rlhp.conf", version_base="1.3"):
        cfg = compose("train", overrides=["logger=none"])
    loop = compose_run(cfg)
    loop.round()
    metrics = loop.round().metrics
    return {k[5:-2]: v for k, v in metrics.items() if k.startswith("time_")}


def main() -> None:
    """Print the table (or one JSON object with --json)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {
        "train_pairs_per_s": vectorised_train(1),
        "forward_pairs_per_s": vectorised_forward(1),
        "ensemble5_train_pairs_per_s": vectorised_train(5),
        "ensemble5_forward_pairs_per_s": vectorised_forward(5),
        "loop_train_pairs_per_s": per_pair_loop(train=True),
        "loop_forward_pairs_per_s": per_pair_loop(train=False),
    }
    result["round_s"] = loop_round()
    if args.json:
        print(json.dumps(result))
        return
    print(f"reward model, CartPole, fragment length {LENGTH}, batch {BATCH}, {PAIRS} pairs, 1 thread")
    print(f"{'':28}{'pairs/s':>12}{'per-pair loop':>15}{'speed-up':>10}")
    for name, key, ref in (("train, basic net", "train_pairs_per_s", "loop_train_pairs_per_s"),
                           ("forward, basic net", "forward_pairs_per_s", "loop_forward_pairs_per_s"),
                           ("train, 5-member ensemble", "ensemble5_train_pairs_per_s", None),
                           ("forward, 5-member ensemble", "ensemble5_forward_pairs_per_s", None)):
        loop = f"{result[ref]:15,.0f}{result[key] / result[ref]:9.1f}x" if ref else ""
        print(f"{name:28}{result[key]:12,.0f}{loop}")
    print("\none round of the default CartPole loop (round 1), seconds")
    for phase, secs in result["round_s"].items():
        print(f"  {phase:20}{secs:8.3f}")


if __name__ == "__main__":
    main()
