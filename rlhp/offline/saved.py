"""An offline agent's saved policy (``agent.npz``), run with NumPy alone: what a reader of a run folder needs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlhp.offline.scaling import Scaling

DENSE = re.compile(r"^actor\.(?:mean\.)?params\.Dense_(\d+)\.(kernel|bias)$")
"""The policy network's layers in ``agent.npz`` (IQL's under ``actor.mean``, TD3+BC's under ``actor``)."""


def saved_policy(path: str | Path) -> Callable[[np.ndarray], np.ndarray]:
    """The greedy policy saved in ``path``: a function from a batch of observations to the env's actions."""
    with np.load(path, allow_pickle=False) as saved:
        layers: dict[int, dict[str, np.ndarray]] = {}
        for name in saved.files:
            if match := DENSE.match(name):
                layers.setdefault(int(match[1]), {})[match[2]] = saved[name]
        weights = [(layers[i]["kernel"], layers[i]["bias"]) for i in sorted(layers)]
        scaling = Scaling(*(saved[k] for k in ("obs_mean", "obs_std", "action_low", "action_high")))

    def act(obs: np.ndarray) -> np.ndarray:
        x = scaling.obs(obs)
        for kernel, bias in weights[:-1]:
            x = np.maximum(x @ kernel + bias, 0)
        return scaling.to_env(np.tanh(x @ weights[-1][0] + weights[-1][1]))

    return act
