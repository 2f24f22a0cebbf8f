"""Experiment trackers: Weights & Biases (offline by default), or none."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlhp.errors import ArgumentError
from rlhp.experiment.launch import RunIdentity
from rlhp.loop import Callback, Loop, RoundResult


class NullLogger(Callback):
    """Logs nothing (``logger=none``); the base of the trackers, called after every round like a callback."""

    def init_run(self, cfg: DictConfig, run_dir: Path, identity: RunIdentity) -> None:
        """Nothing to start."""

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Drop the metrics."""

    def summary(self, values: dict[str, Any]) -> None:
        """Drop the final values."""

    def finish(self, exit_code: int = 0) -> None:
        """Nothing to finish."""


class WandbLogger(NullLogger):
    """Weights & Biases run with the resolved config; ``mode`` offline writes under the run folder.

    Args:
        project, group, name, tags: W&B run identity (name defaults to the run folder's name).
        mode: ``offline`` (default, no network), ``online`` (sync as it runs) or ``disabled``.
    """

    def __init__(self, project: str = "rlhp", group: str | None = None, name: str | None = None,
                 mode: str = "offline", tags: list[str] | None = None) -> None:
        if mode not in ("offline", "online", "disabled"):
            raise ArgumentError("mode", f"must be offline, online or disabled, got {mode!r}")
        self.project, self.group, self.name, self.mode, self.tags = project, group, name, mode, tags
        self.run = None

    def init_run(self, cfg: DictConfig, run_dir: Path, identity: RunIdentity) -> None:
        """``wandb.init`` with the resolved config; this logger's group and name, when set, win."""
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        # One W&B run per run folder: a resumed run logs on under the id its first launch chose.
        id_file = run_dir / "wandb" / "rlhp-run-id"
        id_file.parent.mkdir(parents=True, exist_ok=True)
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
        id_file.write_text(run_id)
        self.run = wandb.init(
            project=self.project, group=self.group or identity.group, name=self.name or identity.name,
            tags=self.tags, config=OmegaConf.to_container(cfg, resolve=True), dir=str(run_dir), mode=self.mode,
            job_type=identity.job_type, settings=wandb.Settings(console="off"), id=run_id, resume="allow",
        )

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Log one round, stepped by rounds."""
        self.run.log(result.metrics, step=result.iteration)

    def summary(self, values: dict[str, Any]) -> None:
        """Record final figures in the run summary."""
        self.run.summary.update(values)

    def finish(self, exit_code: int = 0) -> None:
        """Close the run, marking it failed on a non-zero code."""
        if self.run is not None:
            self.run.finish(exit_code=exit_code)
            self.run = None
