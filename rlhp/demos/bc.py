"""Behavioural cloning: the agent's policy learns the demonstrated actions before the loop starts."""

from __future__ import annotations

import logging

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from tqdm.auto import tqdm

from rlhp.data.hub import open_trajectories
from rlhp.errors import ConfigError

log = logging.getLogger(__name__)


class BehaviourCloning:
    """Maximum likelihood of the demonstrated actions (plus an entropy bonus) for an actor-critic policy.

    Args:
        path: the demonstrations (any dataset ``trajectories=dataset`` reads, e.g. rlhp-collect's).
        epochs: passes over the demonstrations.
        batch_size: transitions per gradient step.
        lr: Adam's learning rate (a fresh optimiser: the agent's own is left as it was).
        ent_weight: weight of the policy's entropy in the loss (keeps it from collapsing onto the demos).
    """

    def __init__(self, path: str, epochs: int = 20, batch_size: int = 256, lr: float = 1e-3,
                 ent_weight: float = 1e-3) -> None:
        self.trajectories, _ = open_trajectories(path, key="pretrain.path")
        self.epochs, self.batch_size, self.lr, self.ent_weight = epochs, batch_size, lr, ent_weight

    def __call__(self, algorithm: BaseAlgorithm, seed: int) -> dict[str, float]:
        """Train ``algorithm``'s policy on the demonstrations; return the last epoch's mean loss."""
        policy = algorithm.policy
        if not isinstance(policy, ActorCriticPolicy):
            raise ConfigError("pretrain", f"behavioural cloning needs an actor-critic agent (agent=ppo or a2c), not "
                              f"{type(algorithm).__name__}")
        obs = torch.as_tensor(np.concatenate([t.obs[:-1] for t in self.trajectories]), device=policy.device)
        acts = torch.as_tensor(np.concatenate([t.acts for t in self.trajectories]), device=policy.device)
        optimizer = torch.optim.Adam(policy.parameters(), lr=self.lr)
        generator = torch.Generator().manual_seed(seed)
        policy.set_training_mode(True)
        loss_mean = float("nan")
        for _ in tqdm(range(self.epochs), desc="behavioural cloning", unit="epoch", dynamic_ncols=True):
            order = torch.randperm(len(obs), generator=generator).to(policy.device)
            total = 0.0
            for batch in order.split(self.batch_size):
                _, log_prob, entropy = policy.evaluate_actions(obs[batch], acts[batch])
                loss = -log_prob.mean() - self.ent_weight * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch)
            loss_mean = total / len(obs)
        policy.set_training_mode(False)
        log.info("behavioural cloning on %d transitions: final loss %.4f", len(obs), loss_mean)
        return {"bc_loss": loss_mean, "bc_transitions": len(obs)}
