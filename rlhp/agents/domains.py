"""The domains of stable-baselines3's algorithm arguments (and of those SBX, its JAX twin, adds). SB3 checks few
of them: it accepts ``gamma=1.5`` and trains on, overflowing, and refuses a negative learning rate only from
inside its optimiser. Here each is checked before anything is built, and a value outside is named by its full
key (``agent.gamma``)."""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from rlhp.errors import ConfigError


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _interval(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Callable[[Any], bool]:
    def inside(value: Any) -> bool:
        return (_number(value) and math.isfinite(value) and (low < value if low_open else low <= value)
                and (value < high if high_open else value <= high))
    return inside


_positive = _interval(0, math.inf, low_open=True, high_open=True)
_non_negative = _interval(0, math.inf, high_open=True)
_fraction = _interval(0, 1)


def _count(minimum: int, maximum: float = math.inf) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum


def _train_freq(value: Any) -> bool:
    """An int of at least 1, or ``[n, "step" | "episode"]``."""
    if isinstance(value, list | tuple):
        return len(value) == 2 and _count(1)(value[0]) and value[1] in ("step", "episode")
    return _count(1)(value)


DOMAINS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "learning_rate": (lambda v: callable(v) or _positive(v), "a positive finite number (or a schedule)"),
    "gamma": (_interval(0, 1, low_open=True), "in (0, 1]"),
    "gae_lambda": (_fraction, "in [0, 1]"),
    "tau": (_interval(0, 1, low_open=True), "in (0, 1]"),
    "clip_range": (lambda v: callable(v) or _positive(v), "a positive finite number (or a schedule)"),
    "clip_range_vf": (lambda v: v is None or callable(v) or _positive(v), "null or a positive finite number"),
    "target_kl": (lambda v: v is None or _positive(v), "null or a positive finite number"),
    "n_steps": (_count(1), "an integer of at least 1"),
    "batch_size": (_count(2), "an integer of at least 2"),
    "n_epochs": (_count(1), "an integer of at least 1"),
    "buffer_size": (_count(1), "an integer of at least 1"),
    "learning_starts": (_count(0), "an integer of at least 0"),
    "train_freq": (_train_freq, "an integer of at least 1, or [n, step|episode]"),
    "gradient_steps": (lambda v: v == -1 or _count(1)(v), "an integer of at least 1, or -1 (as many as env steps)"),
    "target_update_interval": (_count(1), "an integer of at least 1"),
    "policy_delay": (_count(1), "an integer of at least 1"),
    "ent_coef": (lambda v: _non_negative(v) or isinstance(v, str) and v.startswith("auto"),
                 "a non-negative finite number, or auto (SAC)"),
    "vf_coef": (_non_negative, "a non-negative finite number"),
    "max_grad_norm": (_positive, "a positive finite number"),
    "exploration_fraction": (_fraction, "in [0, 1]"),
    "exploration_initial_eps": (_fraction, "in [0, 1]"),
    "exploration_final_eps": (_fraction, "in [0, 1]"),
    "target_policy_noise": (_non_negative, "a non-negative finite number"),
    "target_noise_clip": (_non_negative, "a non-negative finite number"),
    "rms_prop_eps": (_positive, "a positive finite number"),
    "device": (lambda v: isinstance(v, str) and re.fullmatch(r"cpu|auto|cuda(:\d+)?", v) is not None,
               "cpu, cuda, cuda:<n> or auto"),
    "verbose": (lambda v: v in (0, 1, 2) and not isinstance(v, float), "0, 1 or 2"),
    "sde_sample_freq": (lambda v: v == -1 or _count(1)(v), "an integer of at least 1, or -1"),
    # SBX's own (agent=sbx_sac, tqc, crossq).
    "qf_learning_rate": (lambda v: v is None or _positive(v), "null (the learning rate) or a positive finite number"),
    "top_quantiles_to_drop_per_net": (_count(0), "an integer of at least 0"),
}
"""Argument -> (the test its value must pass, what the domain is)."""



def _widths(value: Any) -> bool:
    """A non-empty list of layer widths in [1, 65536]."""
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) > 0
            and all(_count(1)(w) and w <= 65_536 for w in value))


OFFLINE_DOMAINS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "actor_learning_rate": (_positive, "a positive finite number"),
    "critic_learning_rate": (_positive, "a positive finite number"),
    "batch_size": DOMAINS["batch_size"],
    "gamma": DOMAINS["gamma"],
    "tau": DOMAINS["tau"],
    # SAC-N's largest ensembles (An et al. 2021) have 500 critics; 2**63 of them would hang building.
    "n_critics": (_count(1, 1_000), "an integer in [1, 1000]"),
    "expectile": (_interval(0, 1, low_open=True, high_open=True), "in (0, 1)"),
    "weight_temp": (_positive, "a positive finite number"),
    "max_weight": (_positive, "a positive finite number"),
    "target_smoothing_sigma": (_non_negative, "a non-negative finite number"),
    "target_smoothing_clip": (_non_negative, "a non-negative finite number"),
    "alpha": (_non_negative, "a non-negative finite number"),
    "update_actor_interval": (_count(1), "an integer of at least 1"),
    "hidden_units": (_widths, "a non-empty list of layer widths in [1, 65536]"),
}
"""The offline learners' arguments (the offline agents' ``learner`` keys), as :data:`DOMAINS`."""


def _configured(algorithm: Callable[..., Any]) -> tuple[type, Mapping[str, Any]]:
    """The SB3 class and the configured arguments of ``algorithm`` (a class, or a partial of one)."""
    if isinstance(algorithm, functools.partial):
        return algorithm.func, algorithm.keywords
    return algorithm, {}


def check_domains(algorithm: Callable[..., Any], key: str = "agent") -> None:
    """Raise a :class:`ConfigError` naming ``<key>.<argument>`` for the first argument of ``algorithm`` (an
    SB3 class, or a partial of one with the configured arguments) outside its domain."""
    cls, arguments = _configured(algorithm)
    aliases = getattr(cls, "policy_aliases", {})
    policy = arguments.get("policy", next(iter(aliases), None))
    if aliases and not (isinstance(policy, str) and policy in aliases):
        raise ConfigError(f"{key}.policy", f"must be one of {', '.join(aliases)} for {cls.__name__}, got {policy!r}")
    policy_kwargs = arguments.get("policy_kwargs") or {}
    if not isinstance(policy_kwargs, Mapping):
        raise ConfigError(f"{key}.policy_kwargs", f"must be a mapping (e.g. {{net_arch: [64, 64]}}), got "
                          f"{policy_kwargs!r}")
    if cls.__module__.startswith("sbx.") and "features_extractor_class" in policy_kwargs:
        raise ConfigError(f"{key}.policy_kwargs.features_extractor_class", f"is a torch network, which SBX's "
                          f"{cls.__name__} (JAX) cannot run: drop it, or use SB3's agent of the same name")
    net_arch = policy_kwargs.get("net_arch", [])
    widths = net_arch if isinstance(net_arch, Sequence) and not isinstance(net_arch, str) else [net_arch]
    if isinstance(net_arch, Mapping):  # separate actor and critic (pi/vf, pi/qf)
        widths = [w for part in net_arch.values() for w in (part if isinstance(part, Sequence) else [part])]
    if not all(_count(1)(w) and w <= 65_536 for w in widths):
        raise ConfigError(f"{key}.policy_kwargs.net_arch", f"must be layer widths in [1, 65536] (a list, or pi/vf "
                          f"lists), got {net_arch!r}")
    for name, value in arguments.items():
        if name in DOMAINS and not DOMAINS[name][0](value):
            raise ConfigError(f"{key}.{name}", f"must be {DOMAINS[name][1]}, got {value!r}")


def check_learner(settings: Mapping[str, Any], device: Any, key: str = "agent") -> None:
    """Raise a :class:`ConfigError` naming ``<key>.device`` or ``<key>.learner.<argument>`` for the first of an
    offline agent's settings outside its domain."""
    if not DOMAINS["device"][0](device):
        raise ConfigError(f"{key}.device", f"must be {DOMAINS['device'][1]}, got {device!r}")
    for name, value in settings.items():
        if name in OFFLINE_DOMAINS and not OFFLINE_DOMAINS[name][0](value):
            raise ConfigError(f"{key}.learner.{name}", f"must be {OFFLINE_DOMAINS[name][1]}, got {value!r}")


def _arguments(algorithm: Callable[..., Any]) -> dict[str, Any]:
    """Every argument ``algorithm`` will be built with: the SB3 class's defaults under the configured ones."""
    cls, arguments = _configured(algorithm)
    defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}
    return {**defaults, **arguments}


def check_rollout_batch(algorithm: Callable[..., Any], n_envs: int, key: str = "agent") -> None:
    """Refuse a mini-batch larger than an on-policy rollout (``n_steps * n_envs``): SB3's PPO would train on the
    whole rollout at once and say so only in a warning."""
    if not issubclass(_configured(algorithm)[0], OnPolicyAlgorithm):
        return  # an off-policy n_steps is the length of its n-step returns
    arguments = _arguments(algorithm)
    batch, steps = arguments.get("batch_size"), arguments.get("n_steps")
    if isinstance(batch, int) and isinstance(steps, int) and batch > steps * n_envs:
        raise ConfigError(f"{key}.batch_size", f"({batch}) is larger than a rollout of {key}.n_steps x env.n_envs = "
                          f"{steps} x {n_envs} = {steps * n_envs} steps; lower it, or raise either of those")


def _bytes_per_item(space: gym.Space) -> int:
    """Bytes SB3's buffers spend on one value of ``space`` (as it stores them: the space's dtype)."""
    if isinstance(space, gym.spaces.Dict):
        return sum(_bytes_per_item(s) for s in space.spaces.values())
    return int(np.prod(space.shape or (1,))) * np.dtype(space.dtype or np.float32).itemsize


def check_buffer_memory(algorithm: Callable[..., Any], observation_space: gym.Space, action_space: gym.Space,
                        n_envs: int, key: str = "agent") -> None:
    """Refuse (naming the argument) a rollout or replay buffer larger than this machine's memory, which SB3
    would try to allocate whole: numpy's "array is too big", or the kernel's OOM killer."""
    arguments = _arguments(algorithm)
    name = "buffer_size" if "buffer_size" in arguments else "n_steps"
    size = arguments.get(name)
    if not isinstance(size, int):
        return
    observations = 2 if name == "buffer_size" else 1  # a replay buffer keeps the next observation too
    row = observations * _bytes_per_item(observation_space) + _bytes_per_item(action_space) + 32
    need = size * (n_envs if name == "n_steps" else 1) * row
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if need > memory:
        raise ConfigError(f"{key}.{name}", f"({size:,}) needs a {need / 2**30:,.1f} GiB buffer, more than this "
                          f"machine's {memory / 2**30:,.1f} GiB of memory; lower it")
