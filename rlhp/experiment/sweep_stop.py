"""Stopping a sweep whose jobs share one pool of processes (Hydra's joblib launcher): a Ctrl-C or SIGTERM
stops every running job after its round, with a checkpoint; the jobs still queued do not start; and the same
command, with the same ``hydra.sweep.dir``, continues the sweep (finished runs kept, stopped ones resumed).

joblib ends the whole pool as soon as one job exits, or as soon as the launching process is interrupted,
killing the jobs still finishing their round. So a job stopped by a signal returns instead of exiting, leaving
a mark in the sweep folder; the launching process, which a terminal's Ctrl-C reaches too, leaves the same mark
and waits; a queued job that finds the mark returns at once; and the launching process reports the stop (with
its exit code) once every job returned. A second Ctrl-C stops everything at once, as in a single run. Launchers
whose jobs are processes of their own (SLURM through submitit) keep each job's own exit.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

MARK = ".stopped"
"""The file in the sweep folder that says the sweep was stopped, holding the signal's name."""

POOLED = ("hydra_plugins.hydra_joblib_launcher.",)
"""Launchers (by their class's module) whose jobs share a pool that one job's exit ends."""


def _pooled(hydra_cfg: DictConfig) -> bool:
    return str(hydra_cfg.launcher._target_).startswith(POOLED)


def pooled_sweep(hydra_cfg: DictConfig) -> Path | None:
    """The sweep folder when the job that Hydra's runtime config (``hydra_cfg``) describes runs in a sweep of a
    pooled launcher, else None."""
    if hydra_cfg.mode != RunMode.MULTIRUN or not _pooled(hydra_cfg):
        return None
    return Path(hydra_cfg.sweep.dir)


def mark_stopped(sweep: Path, signum: int) -> None:
    """Mark the sweep as stopped by ``signum``."""
    (sweep / MARK).write_text(signal.Signals(signum).name)


def stopped_by(sweep: Path) -> str | None:
    """The name of the signal that stopped the sweep, if one did."""
    mark = sweep / MARK
    return mark.read_text().strip() if mark.is_file() else None


class SweepStop(Callback):
    """Hydra callback: a new launch of a sweep clears an earlier stop; a stopped sweep ends in one line with the
    signal's exit code once every job returned."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Forget a stop of an earlier launch of this sweep (the same command continues it); in a pooled sweep,
        a signal to the launching process marks the sweep stopped rather than ending the pool."""
        sweep = Path(config.hydra.sweep.dir)
        (sweep / MARK).unlink(missing_ok=True)
        if not _pooled(config.hydra):
            return

        def handle(signum: int, frame: FrameType | None) -> None:
            sweep.mkdir(parents=True, exist_ok=True)
            mark_stopped(sweep, signum)
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: everything stops at once
            print(f"{signal.Signals(signum).name}: the sweep's running jobs stop after their round and save a "
                  "checkpoint; no more start (Ctrl-C again to stop at once)", file=sys.stderr)

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, handle)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Say that the sweep was stopped and how to continue it."""
        sweep = Path(config.hydra.sweep.dir)
        name = stopped_by(sweep)
        if name is None:
            return
        print(f"rlhp-{config.hydra.job.name}: sweep stopped by {name}: the running jobs saved checkpoints and no "
              f"more started; continue it with the same command and hydra.sweep.dir={sweep}", file=sys.stderr)
        sys.exit(128 + signal.Signals[name].value)
