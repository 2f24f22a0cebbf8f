"""Keys and modules that were renamed: a command line that uses an old name is answered with the new one, and a run
recorded under the old name (its ``.hydra/`` and checkpoints) reads as if it had used the new."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

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

MOVED = {f"rlhp.sources.{name}": f"rlhp.agents.{name}" for name in (
    "agent", "base", "critic_reset", "domains", "exploration", "extractors", "hybrid_replay", "offline", "policies",
    "reward_env", "rollout", "AgentTrainer", "Agent", "AgentReport", "NoAgent", "OfflineAgent", "RewardVecEnvWrapper")}
"""Modules and classes that moved, by their old dotted name (a config's ``_target_`` or class path names them)."""


def moved(name: str) -> str:
    """Where the module or class once called ``name`` (or a name inside it) is now."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return name


def renamed_key(argv: list[str]) -> ConfigError | None:
    """The config error for an override that names a key by its old name, saying the new one."""
    for override in argv:
        if "=" in override and override_key(override) in RENAMED:
            key = override_key(override)
            return ConfigError(key, RENAMED[key].advice)
    return None


def upgrade(cfg: DictConfig, overrides: list[str]) -> tuple[DictConfig, list[str]]:
    """A run's recorded config and overrides with every old key under its new name, and every moved module or class
    it names at its new place (as they are when none is)."""
    cfg = _moved_targets(cfg)
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


def _moved_targets(cfg: DictConfig) -> DictConfig:
    """``cfg`` with every string value that names a moved module or class (see :data:`MOVED`) naming it anew."""
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return moved(node) if isinstance(node, str) else node

    plain = OmegaConf.to_container(cfg, resolve=False)
    upgraded = walk(plain)
    return cfg if upgraded == plain else OmegaConf.create(upgraded)
