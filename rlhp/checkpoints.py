"""Checkpoints: written whole or not at all, and read back to resume a run where it stopped.

A checkpoint folder holds what a person reads without rlhp (``reward_net.pt``, ``trainer.pt``,
``agent.zip``, ``preferences/``, ``state.json``, the run's ``config.yaml`` and ``overrides.yaml``)
and ``resume.pt``: the loop with every part (envs, agent, replay buffer, reward model, optimisers,
preference dataset, pending queries, the shared generator) pickled as one object graph, beside the
global random states of Python, NumPy and torch. A resumed run therefore continues exactly as the
uninterrupted one would. ``resume.pt`` is a pickle: load only run folders you trust.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlhp.errors import DataError
from rlhp.loop import PreferenceComparisons
from rlhp.runs import RunFolder
from rlhp.runs.folder import HALF_WRITTEN
from rlhp.stops import interrupts_held

log = logging.getLogger(__name__)

FORMAT = 1
"""Version of ``resume.pt``; a run folder written by another version is refused, not misread."""


def global_random_state() -> dict[str, Any]:
    """The process-wide generators that SB3 and torch draw from (actions, dropout, ...)."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_global_random_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_random_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run: RunFolder, loop: PreferenceComparisons, name: str, cfg: DictConfig,
                    overrides: list[str], reward_net_config: dict) -> Path:
    """Write ``checkpoints/<name>`` into a temporary folder, then rename it: never half a checkpoint."""
    with interrupts_held():
        return _save_checkpoint(run, loop, name, cfg, overrides, reward_net_config)


def _save_checkpoint(run: RunFolder, loop: PreferenceComparisons, name: str, cfg: DictConfig,
                     overrides: list[str], reward_net_config: dict) -> Path:
    path = run.checkpoint(name)
    tmp = path.with_name(name + HALF_WRITTEN)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = loop.state_dict()
    trainer = state["reward_trainer"]
    _save_torch({"state_dict": trainer["net"], "config": reward_net_config}, tmp / "reward_net.pt")
    _save_torch({"optimizer": trainer["optimizer"], "torch_rng": torch.get_rng_state()}, tmp / "trainer.pt")
    if loop.source.agent is not None:
        loop.source.agent.save(tmp / "agent.zip")
    if len(loop.dataset):
        loop.dataset.save(tmp / "preferences")
    counters = {k: state[k] for k in ("iteration", "timesteps", "comparisons", "timestep_targets",
                                      "episode_lengths", "wall_s", "rng")}
    counters["next_query_id"] = state["querent"]["next_id"]
    counters["pending_queries"] = loop.gatherer.num_pending()
    (tmp / "state.json").write_text(json.dumps(counters, indent=1, default=int))
    (tmp / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    (tmp / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(list(overrides))))
    _save_torch({"format": FORMAT, "loop": loop, "random": global_random_state()}, tmp / "resume.pt")
    if path.exists():  # the same round written again after a resume: the new copy replaces it
        shutil.rmtree(path)
    os.replace(tmp, path)
    return path


def _save_torch(obj: Any, path: Path) -> None:
    """``torch.save`` through memory: a full disk then raises OSError (ENOSPC), not torch's RuntimeError."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    path.write_bytes(buffer.getbuffer())


def prune_checkpoints(run: RunFolder, keep: int) -> None:
    """Delete all but the newest ``keep`` round checkpoints (``final/`` is always kept)."""
    for old in run.checkpoints()[:-keep] if keep > 0 else []:
        shutil.rmtree(old)


def load_checkpoint(path: Path) -> tuple[PreferenceComparisons, DictConfig, list[str]]:
    """The loop saved in ``path`` (global random state restored), the run's config and its overrides."""
    try:
        saved = torch.load(path / "resume.pt", weights_only=False)
        cfg = OmegaConf.load(path / "config.yaml")
        overrides = list(OmegaConf.load(path / "overrides.yaml"))
    except Exception as err:  # torch.load re-raises whatever unpickling raised
        raise DataError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None
    if saved.get("format") != FORMAT:
        raise DataError(f"checkpoint {str(path)!r} has format {saved.get('format')}, this rlhp reads {FORMAT}")
    set_global_random_state(saved["random"])
    return saved["loop"], cfg, overrides


def latest_loadable(run: RunFolder) -> tuple[Path, PreferenceComparisons, DictConfig, list[str]] | None:
    """The newest checkpoint that loads, warning about any skipped; None when the run has none."""
    for stale in run.half_written():
        log.warning("ignoring %s: its writing was cut off", stale)
        shutil.rmtree(stale)
    candidates = run.checkpoints()
    if run.checkpoint("final").is_dir():
        candidates.append(run.checkpoint("final"))
    for path in reversed(candidates):
        try:
            return (path, *load_checkpoint(path))
        except DataError as err:
            log.warning("ignoring %s; trying the one before", err)
    return None
