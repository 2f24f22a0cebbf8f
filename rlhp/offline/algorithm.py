"""An offline algorithm as the agent group configures it: one of d3rlpy's, and how its data is scaled.

d3rlpy (Seno & Imai, JMLR 2022) is the maintained library of offline RL algorithms (IQL, TD3+BC, CQL and more,
each reproduced on D4RL by its authors). rlhp uses its algorithms' public ``create``/``update``/``predict`` and
feeds them its own mini-batches, so the batches come from the run's generator and a checkpoint resumes exactly.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any, Literal

from rlhp.errors import ArgumentError, ConfigError

INSTALL = "pip install 'rlhp[offline]' && pip install --no-deps d3rlpy==2.8.1 gym==0.26.2"
"""d3rlpy pins gymnasium 1.0.0 exactly (it runs on later ones): installed without its pins, as ``make`` does."""


def d3rlpy_module() -> Any:
    """d3rlpy, imported quietly (it logs every step of its import at INFO), or a config error saying how to
    install it."""
    if importlib.util.find_spec("d3rlpy") is None:
        raise ConfigError("agent", f"is an offline agent, which needs d3rlpy: {INSTALL}")
    import structlog

    # d3rlpy configures structlog's processors at import; the level filter set first stays.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    import d3rlpy

    return d3rlpy


def algorithm_config(name: str, hidden_units: list[int], **kwargs: Any) -> Any:
    """The d3rlpy config of algorithm ``name`` (``IQL`` is ``d3rlpy.algos.IQLConfig``) with ``kwargs``, every
    network with ``hidden_units``."""
    d3rlpy = d3rlpy_module()
    config = getattr(d3rlpy.algos, f"{name}Config", None)
    if config is None:
        raise ArgumentError("name", f"{name!r} is no algorithm of d3rlpy's (IQL, TD3PlusBC, CQL, ...)")
    settings = [f for f in config.__dataclass_fields__ if not f.endswith(("factory", "scaler"))]
    unknown = sorted(set(kwargs) - set(settings))
    if unknown:
        raise ArgumentError(unknown[0], f"is no setting of d3rlpy's {name} (it has {', '.join(sorted(settings))})")
    factory = d3rlpy.models.VectorEncoderFactory(hidden_units=list(hidden_units))
    encoders = {f for f in config.__dataclass_fields__ if f.endswith("encoder_factory")}
    return config(**kwargs, **dict.fromkeys(encoders, factory))


class OfflineAlgorithm:
    """What an offline agent is: a d3rlpy algorithm's config, where it runs, and how its inputs are scaled.

    Args:
        name: the d3rlpy algorithm (``IQL``, ``TD3PlusBC``, ...).
        learner: its settings (d3rlpy's names), and ``hidden_units``, every network's hidden layers; checked and
            made into d3rlpy's config by the agent (:func:`algorithm_config`).
        device: cpu, cuda or auto.
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
