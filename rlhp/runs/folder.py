"""The run folder's layout, and readers for it that need nothing of the training code.

A server, a report or a benchmark opens a finished (or running) run through :class:`RunFolder`;
``rlhp-train`` writes through the same paths, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlhp.runs.metrics import read_metrics


class RunFolder:
    """One run's folder: ``.hydra/``, the log, ``metrics.csv``, ``checkpoints/``, ``trajectories/``,
    ``eval.json`` and ``wandb/``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def config_yaml(self) -> Path:
        """The resolved config Hydra saved."""
        return self.path / ".hydra" / "config.yaml"

    @property
    def metrics_csv(self) -> Path:
        """One row per round."""
        return self.path / "metrics.csv"

    @property
    def eval_json(self) -> Path:
        """The final evaluation and the optimised metric."""
        return self.path / "eval.json"

    @property
    def checkpoints_dir(self) -> Path:
        """``iter_XXXX/`` per saved round, and ``final/``."""
        return self.path / "checkpoints"

    @property
    def trajectories_dir(self) -> Path:
        """Every trajectory sampled for fragments, as a Hugging Face dataset."""
        return self.path / "trajectories"

    def checkpoint(self, name: str) -> Path:
        """The folder of checkpoint ``name`` (``iter_0003``, ``final``)."""
        return self.checkpoints_dir / name

    def checkpoints(self) -> list[Path]:
        """The round checkpoints, oldest first (``final/`` not included)."""
        return sorted(p for p in self.checkpoints_dir.glob("iter_*") if p.is_dir())

    def config(self) -> DictConfig:
        """The run's resolved config."""
        return OmegaConf.load(self.config_yaml)

    def metrics(self) -> list[dict[str, float | None]]:
        """The rows of ``metrics.csv`` (None where a round has no value)."""
        return read_metrics(self.metrics_csv)

    def evaluation(self) -> dict[str, Any]:
        """``eval.json``."""
        return json.loads(self.eval_json.read_text())
