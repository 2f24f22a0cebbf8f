"""Behavioural cloning: the agent's policy learns the demonstrated actions before the loop starts."""

from __future__ import annotations

import logging

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import set_random_seed
from tqdm.auto import tqdm

from rlhp.data.hub import open_trajectories
from rlhp.envs import GymEnv
from rlhp.errors import ConfigError
from rlhp.experiment.config import build
from rlhp.experiment.evaluation import policy_return
from rlhp.experiment.launch import Launch
from rlhp.logs import CONSOLE
from rlhp.runs import RunFolder, write_json

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


def clone_and_evaluate(cloning: BehaviourCloning, algorithm: BaseAlgorithm, env: GymEnv, episodes: int,
                       seed: int) -> dict[str, float]:
    """Clone the demonstrations into ``algorithm``; its loss and the cloned policy's true return over ``episodes``
    on fresh copies of ``env`` (``bc_true_return_mean``...), also on the console."""
    result = cloning(algorithm, seed)
    returns = policy_return(algorithm, env, episodes, seed + 40_000)
    result.update({f"bc_{k}": v for k, v in returns.items()})
    log.info("behavioural cloning: loss %.4f, true return %.1f ± %.1f", result["bc_loss"],
             result["bc_true_return_mean"], result["bc_true_return_std"], extra=CONSOLE)
    return result


def clone(cfg: DictConfig, launch: Launch) -> dict[str, float]:
    """``rlhp-bc``: a fresh agent cloned from demonstrations, evaluated (``eval.json``) and saved (``agent.zip``)."""
    if OmegaConf.is_missing(cfg.pretrain, "path"):
        raise ConfigError("pretrain.path", "is required: the demonstrations, e.g. rlhp-collect's dataset/ folder")
    torch.set_num_threads(cfg.torch_threads)
    run = RunFolder(launch.run_dir)
    set_random_seed(cfg.seed)
    env = build(cfg.env)
    algorithm = build(cfg.agent)(env=env.make(cfg.seed), seed=cfg.seed)
    result = clone_and_evaluate(build(cfg.pretrain), algorithm, env, cfg.evaluation.episodes, cfg.seed)
    algorithm.save(run.path / "agent.zip")
    write_json(run.eval_json, result)
    log.info("run folder: %s (agent.zip, eval.json)", run.path, extra=CONSOLE)
    return result
