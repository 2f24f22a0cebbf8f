"""Keys that were renamed: a command line that uses an old name is answered with the new one, and a run recorded
under the old name (its ``.hydra/`` and checkpoints) reads as if it had used the new."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from omegaconf import DictConfig, open_dict

from rlhp.errors import ConfigError
from rlhp.experiment.launch import override_key


@dataclass(frozen=True)
class Rename:
    """One renamed key: its new name, the new value from the old, and the one line that says so."""

    new: str
    value: Callable[[int], int]
    advice: str


RENAMED = {
    "num_iterations": Rename("num_rounds", lambda iterations: iterations + 1,
                             "is now num_rounds, the rounds in all with the first: num_iterations=N is num_rounds=N+1"),
}
"""Renamed top-level keys, by their old name."""


def renamed_key(argv: list[str]) -> ConfigError | None:
    """The config error for an override that names a key by its old name, saying the new one."""
    for override in argv:
        if "=" in override and override_key(override) in RENAMED:
            key = override_key(override)
            return ConfigError(key, RENAMED[key].advice)
    return None


def upgrade(cfg: DictConfig, overrides: list[str]) -> tuple[DictConfig, list[str]]:
    """A run's recorded config and overrides with every old key under its new name (as they are when none is)."""
    old = [key for key in RENAMED if key in cfg]
    if not old:
        return cfg, overrides
    cfg = cfg.copy()
    for key in old:
        rename = RENAMED[key]
        with open_dict(cfg):
            cfg[rename.new] = rename.value(cfg.pop(key))
        overrides = [f"{rename.new}={rename.value(int(o.split('=', 1)[1]))}" if override_key(o) == key else o
                     for o in overrides]
    return cfg, overrides
