"""rlhp's public interfaces: what a researcher implements to try a method of their own, in one module.

A part is a class that a config node names by ``_target_`` (``fragmenter._target_=my_method.Selector``, or a
config file of one's own: docs/extending.md). The builder passes the node's keys as keyword arguments, and, by
name, any of :data:`INJECTED` that the constructor asks for. Once built, a part is checked against the interface
of the key it was built for (:data:`INTERFACES`): one lacking a member the run will use, or whose method cannot
take the arguments the loop passes, is a config error naming the key and the member, before anything trains.

What the loop calls, and when, a round at a time (``rlhp/loop/learning.py``):

1. the agent samples episodes; a :class:`QueryPool` keeps those pairs are cut from;
2. a :class:`Fragmenter` picks the pairs to ask about (``__call__``), and pairs chosen by nothing for
   SURF's pseudo-labels (``uniform``);
3. the querent publishes them; a :class:`PreferenceGatherer` answers (``add``, then ``__call__`` for the
   answers so far; a teacher of one's own subclasses :class:`OracleGatherer` and writes ``answer``);
4. the reward trainer fits the :class:`RewardNet` on the labels: each epoch a :class:`LabelReplay` draws the pairs
   a pass covers, a :class:`LabelFilter` judges which labels to train on (``judge``), a :class:`Crop` cuts the
   steps a batch scores, a :class:`PseudoLabeller` adds pseudo-labels (``label``, ``loss``); before the first
   labels a :class:`WarmStart` may fit the net (``fit``);
5. the agent trains on the reward through an :class:`AgentReward` (``agent_reward`` on its own rollouts,
   ``relabel`` of its replay buffer before each training phase).
"""

from __future__ import annotations

import inspect
from typing import Any

from rlhp.data import FragmentPairs, Trajectory
from rlhp.feedback.gatherer import Answers, OracleGatherer, PreferenceGatherer
from rlhp.loop.fragmenters import Fragmenter, RandomFragmenter
from rlhp.loop.pools import QueryPool
from rlhp.rewards import AgentReward, RewardInputs, RewardNet
from rlhp.training.augment import Crop
from rlhp.training.filters import LabelFilter
from rlhp.training.pseudo import PseudoLabeller
from rlhp.training.replay import LabelReplay
from rlhp.training.warm_start import WarmStart

__all__ = ["INJECTED", "INTERFACES", "AgentReward", "Answers", "Crop", "FragmentPairs", "Fragmenter", "LabelFilter",
           "LabelReplay", "OracleGatherer", "PreferenceGatherer", "PseudoLabeller", "QueryPool", "RandomFragmenter",
           "RewardInputs", "RewardNet", "Trajectory", "WarmStart", "misfit"]
"""The interfaces, and the building blocks a part of one's own starts from: trajectories and fragment pairs (the
data the loop hands a part), the uniform fragmenter (candidates to choose among), the teacher base class."""

INJECTED = {
    "rng": "numpy.random.Generator: the run's generator (seeded by `seed`; a part draws from it, never its own)",
    "env": "rlhp.envs.GymEnv: the run's env (its id, spaces, horizon)",
    "reward_net": "rlhp.api.RewardNet: the reward model being trained (fragmenters that score pairs read it)",
    "run_dir": "pathlib.Path: the run folder (parts that keep files of their own write there)",
    "observation_space": "gymnasium.Space: the env's observations (given to the reward net)",
    "action_space": "gymnasium.Space: the env's actions (given to the reward net)",
}
"""What the builder passes by name to a constructor that asks for it (a key in the config node wins)."""

INTERFACES: dict[str, type] = {
    "fragmenter": Fragmenter,
    "query_pool": QueryPool,
    "gatherer": PreferenceGatherer,
    "reward_net": RewardNet,
    "reward_trainer.label_filter": LabelFilter,
    "reward_trainer.crop": Crop,
    "reward_trainer.pseudo_labels": PseudoLabeller,
    "reward_trainer.replay": LabelReplay,
    "reward_trainer.warm_start": WarmStart,
}
"""The interface each config key's part must offer."""

BASES = (RewardNet,)
"""Interfaces that are base classes with behaviour of their own: a part must subclass them."""


def _members(interface: type) -> dict[str, Any]:
    """The public members of ``interface`` that a part must have: its methods (``__call__`` included) and the
    attributes it declares."""
    found: dict[str, Any] = {}
    for klass in reversed(interface.__mro__[:-1]):
        if klass.__module__ in ("typing", "abc", "builtins"):
            continue
        found.update({name: None for name in getattr(klass, "__annotations__", {}) if not name.startswith("_")})
        found.update({name: value for name, value in vars(klass).items()
                      if (not name.startswith("_") or name == "__call__") and callable(value)})
    return found


def _takes(method: Any, like: Any) -> bool:
    """Whether the bound ``method`` takes the positional arguments ``like`` (an interface's function) is called
    with."""
    try:
        wanted = [p for p in inspect.signature(like).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]  # past self
        inspect.signature(method).bind(*(None for _ in wanted))
    except TypeError:
        return False
    except ValueError:  # a builtin without a signature: nothing to check
        return True
    return True


def misfit(part: Any, interface: type) -> str | None:
    """What ``part`` lacks of ``interface`` (a member, or a method that cannot take the loop's arguments), as a
    phrase; None when it fits."""
    name = f"rlhp.api.{interface.__name__}"
    if interface in BASES:
        return None if isinstance(part, interface) else f"is no {name} (subclass it)"
    for member, like in _members(interface).items():
        if not hasattr(part, member):
            what = f"the method {member}()" if like is not None else f"the attribute {member}"
            return f"lacks {what} that {name} requires"
        if like is not None and not _takes(getattr(part, member), like):
            return f"has {member}{inspect.signature(getattr(part, member))}, which cannot take the arguments of " \
                   f"{name}.{member}{inspect.signature(like)}"
    return None
