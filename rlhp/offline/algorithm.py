"""An offline algorithm as the agent group configures it: one of rlhp's learners (IQL, TD3+BC), and how its data
is scaled.

The learners are JAX (:mod:`rlhp.offline.iql`, :mod:`rlhp.offline.td3bc`): a gradient step is one compiled
function and many run in one compiled loop, about 3.4 times d3rlpy's or TorchRL's speed on one core (see
docs/architecture.md), and the package needs nothing that pins gymnasium.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Any, Literal

from rlhp.errors import ArgumentError, ConfigError

LEARNERS = {"IQL": "rlhp.offline.iql", "TD3PlusBC": "rlhp.offline.td3bc"}
"""Each offline learner's name and the module that holds it (imported on use: JAX loads in seconds)."""


def learner_class(name: str) -> type:
    """The learner called ``name``, or an argument error listing the learners."""
    if name not in LEARNERS:
        raise ArgumentError("name", f"{name!r} is no offline learner of rlhp's ({', '.join(LEARNERS)})")
    if importlib.util.find_spec("flax") is None:
        raise ConfigError("agent", f"is an offline agent ({name}), which needs JAX: pip install 'rlhp[offline]'")
    return getattr(importlib.import_module(LEARNERS[name]), name)


def check_settings(name: str, settings: dict[str, Any]) -> None:
    """Raise an argument error naming the first of ``settings`` that learner ``name`` does not take."""
    taken = [p for p in inspect.signature(learner_class(name)).parameters if p not in ("obs_dim", "act_dim", "seed")]
    unknown = sorted(set(settings) - set(taken))
    if unknown:
        raise ArgumentError(unknown[0], f"is no setting of {name} (it has {', '.join(sorted(taken))})")


class OfflineAlgorithm:
    """What an offline agent is: a learner and its settings, where it runs, and how its inputs are scaled.

    Args:
        name: the learner (:data:`LEARNERS`: ``IQL``, ``TD3PlusBC``).
        learner: its settings, ``hidden_units`` (every network's hidden layers) among them; checked by the agent.
        device: cpu, cuda or auto (JAX's own devices: cuda needs JAX's CUDA build).
        reward_scaling: ``return_range`` scales the rewards so that the best and the worst episode's returns
            differ by ``return_range`` (IQL's scaling on MuJoCo; a learned reward's scale is arbitrary), ``none``
            keeps them.
        return_range: see ``reward_scaling``.
        reward_offset: ``nonnegative`` shifts a learned reward so that the dataset's lowest step pays 0 (before
            scaling): where episodes end on failure (a hopper's fall), a step alive is then never worth less than
            ending (the "survival instinct" of offline RL, Li et al., NeurIPS 2023). The preference loss cannot
            see a reward's offset, so a learned reward's is arbitrary; the env's own reward keeps its offset, part
            of its task (so the true-reward ceiling is unchanged). ``none`` keeps every reward's.
        normalize_observations: standardise observations by the dataset's mean and deviation (TD3+BC's).
    """

    def __init__(self, name: str, learner: dict[str, Any], device: str = "cpu",
                 reward_scaling: Literal["return_range", "none"] = "return_range", return_range: float = 1000.0,
                 normalize_observations: bool = False,
                 reward_offset: Literal["none", "nonnegative"] = "none") -> None:
        if reward_scaling not in ("return_range", "none"):
            raise ArgumentError("reward_scaling", f"must be return_range or none, got {reward_scaling!r}")
        if reward_offset not in ("none", "nonnegative"):
            raise ArgumentError("reward_offset", f"must be none or nonnegative, got {reward_offset!r}")
        if not return_range > 0:
            raise ArgumentError("return_range", f"must be > 0, got {return_range}")
        self.name, self.learner, self.device = name, dict(learner), device
        self.reward_scaling, self.return_range = reward_scaling, float(return_range)
        self.normalize_observations = normalize_observations
        self.reward_offset = reward_offset
