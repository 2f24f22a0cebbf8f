"""Small builders shared by the unit tests."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from rlhp.data import FragmentPairs, Trajectory


def random_pairs(n: int, length: int = 5, obs_dim: int = 3, seed: int = 0) -> FragmentPairs:
    """Fragment pairs with Box(obs_dim) observations, Discrete(2) actions and true rewards."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 2, length, obs_dim)).astype(np.float32)
    return FragmentPairs(
        obs=obs, acts=rng.integers(0, 2, (n, 2, length)), next_obs=obs + 0.1,
        dones=np.zeros((n, 2, length), bool), rews=obs[..., 0].astype(np.float32),
    )


def spaces(obs_dim: int = 3) -> tuple[gym.Space, gym.Space]:
    """The spaces of :func:`random_pairs`."""
    return gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32), gym.spaces.Discrete(2)


def trajectory(length: int, offset: float = 0.0, terminal: bool = False) -> Trajectory:
    """A trajectory whose observation at step t is [offset + t] and reward is offset + t."""
    obs = (offset + np.arange(length + 1, dtype=np.float32))[:, None]
    return Trajectory(obs=obs, acts=np.arange(length) % 2, rews=obs[:-1, 0].copy(), terminal=terminal,
                      infos=[{"t": t} for t in range(length)])


def composed(config: str, overrides: list[str], run_dir: Path) -> DictConfig:
    """``config`` composed with ``overrides`` as the command line would, and set as the current Hydra
    config with ``run_dir`` as the run folder (what ``@hydra.main`` does before calling the task)."""
    with initialize_config_module("rlhp.conf", version_base="1.3"):
        cfg = compose(config, overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
    HydraConfig.instance().set_config(cfg)
    return cfg
