"""The domains of stable-baselines3's algorithm arguments. SB3 checks few of them: it accepts ``gamma=1.5``
and trains on, overflowing, and refuses a negative learning rate only from inside its optimiser. Here
each is checked before anything is built, and a value outside is named by its full key (``agent.gamma``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

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


def _count(minimum: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= minimum


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
    "sde_sample_freq": (lambda v: v == -1 or _count(1)(v), "an integer of at least 1, or -1"),
}
"""Argument -> (the test its value must pass, what the domain is)."""


def check_domains(arguments: Mapping[str, Any], key: str = "agent") -> None:
    """Raise a :class:`ConfigError` naming ``<key>.<argument>`` for the first value outside its domain."""
    for name, value in arguments.items():
        if name in DOMAINS and not DOMAINS[name][0](value):
            raise ConfigError(f"{key}.{name}", f"must be {DOMAINS[name][1]}, got {value!r}")
