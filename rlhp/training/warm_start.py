"""What the reward model learns before its first label: nothing (it starts from its initial weights), or RIME's
warm start (Cheng et al., ICML 2024), the intrinsic reward of the agent's unsupervised pre-training.

Without it, the agent's critic, trained on the state-entropy reward while it explored, meets a reward of another
scale and shape at the first update. RIME fits each member to that intrinsic reward, standardised and scaled into
[-1, 1], so the first preferences move the reward from there and the critic's values stay of use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from rlhp.data import Trajectory
from rlhp.data.frames import as_tensor
from rlhp.errors import ArgumentError
from rlhp.rewards import RewardNet
from rlhp.rewards.entropy import state_entropy
from rlhp.rewards.net import RewardInputs


class WarmStart(Protocol):
    """Fits a reward net to what the agent explored before any label."""

    needs_pretraining: bool
    """Whether it learns from an unsupervised pre-training's episodes (a run without one cannot use it)."""

    def fit(self, net: RewardNet, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
            inputs: Callable[[torch.Tensor], RewardInputs], next_obs: torch.Tensor) -> dict[str, float]:
        """Train ``net`` with ``optimizer`` on the pre-training's transitions (``inputs`` of an index tensor; their
        next observations ``next_obs``); return its metrics."""


class NoWarmStart:
    """The reward starts from its initial weights, as the paper's and PEBBLE's do."""

    needs_pretraining = False

    def fit(self, net: RewardNet, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
            inputs: Callable[[torch.Tensor], RewardInputs], next_obs: torch.Tensor) -> dict[str, float]:
        """Nothing learned."""
        return {}


class IntrinsicWarmStart:
    """RIME's warm start: each member regresses (mean squared error) the state-entropy reward of the pre-training's
    transitions, standardised and divided by its largest magnitude, as RIME scales it.

    RIME takes five reward updates per pre-training step while the agent explores, each on a batch of the buffer's
    transitions scored against the whole buffer; here the same number of updates runs once the pre-training has
    ended, on its finished episodes, each member on its own batches, every transition scored against all of them.

    Args:
        updates_per_step: gradient steps per pre-training transition (RIME: 5).
        batch_size: transitions per member and step (RIME: the agent's, 1,024 on DMC, 512 on Meta-World). RIME's
            5 steps of 1,024 cost 20 times the defaults' compute.
        k: the neighbour whose distance is the intrinsic reward (the pre-training's ``entropy_k``).
    """

    needs_pretraining = True

    def __init__(self, updates_per_step: float = 1.0, batch_size: int = 256, k: int = 5) -> None:
        if not isinstance(updates_per_step, int | float) or isinstance(updates_per_step, bool) \
                or not 0 < updates_per_step < 1e4:
            raise ArgumentError("updates_per_step", f"must be a number in (0, 1e4), got {updates_per_step!r}")
        ArgumentError.check_whole_count("batch_size", batch_size)
        ArgumentError.check_whole_count("k", k)
        self.updates_per_step, self.batch_size, self.k = updates_per_step, batch_size, k

    def targets(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The intrinsic reward of each transition, standardised and scaled into [-1, 1]."""
        flat = next_obs.reshape(len(next_obs), -1).float()
        entropy = state_entropy(flat, flat, self.k)
        centred = (entropy - entropy.mean()) / entropy.std().clamp_min(1e-8)
        return centred / centred.abs().max().clamp_min(1e-8)

    def fit(self, net: RewardNet, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
            inputs: Callable[[torch.Tensor], RewardInputs], next_obs: torch.Tensor) -> dict[str, float]:
        """``updates_per_step`` steps per transition; ``warm_start_loss``: the mean squared error of the last
        hundredth of them, ``warm_start_explained``: the share of the targets' variance it leaves unexplained taken
        from 1, ``warm_start_updates``: how many."""
        n = len(next_obs)
        target = self.targets(next_obs)
        updates = max(1, round(self.updates_per_step * n))
        net.train(True)
        losses = torch.zeros(updates, device=target.device)
        for step in range(updates):
            idx = torch.as_tensor(rng.integers(0, n, (net.members, min(self.batch_size, n))), device=target.device)
            optimizer.zero_grad(set_to_none=True)
            # Members are independent: the sum of their losses trains each at full rate, as RIME sums them.
            loss = (net.score(inputs(idx), per_member=True) - target[idx]).pow(2).mean(1).sum()
            loss.backward()
            optimizer.step()
            losses[step] = loss.detach() / net.members
        loss = float(losses[-max(1, updates // 100):].mean())
        return {"warm_start_loss": loss, "warm_start_explained": 1 - loss / max(float(target.var()), 1e-12),
                "warm_start_updates": updates}


def transitions(episodes: list[Trajectory], device: torch.device) -> tuple[torch.Tensor, ...]:
    """(obs, acts, next_obs, dones) of every step of ``episodes``, laid end to end, as the reward net takes them."""
    dones = np.concatenate([(np.arange(len(t)) == len(t) - 1) & t.terminal for t in episodes])
    obs = np.concatenate([t.obs[:-1] for t in episodes])
    next_obs = np.concatenate([t.obs[1:] for t in episodes])
    return (as_tensor(obs, device), as_tensor(np.concatenate([t.acts for t in episodes]), device),
            as_tensor(next_obs, device), torch.as_tensor(dones, device=device))
