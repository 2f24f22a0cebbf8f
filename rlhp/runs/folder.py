"""The run folder's layout, and readers for it that need nothing of the training code.

A server, a report or a benchmark opens a finished (or running) run through :class:`RunFolder`;
``rlhp-train`` writes through the same paths, so the two cannot drift apart.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from rlhp.errors import DataError, RunError
from rlhp.files import HALF_WRITTEN, written_whole
from rlhp.runs.metrics import read_metrics
from rlhp.runs.reading import read_file

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Addresses only this machine reaches: a run's annotation server listens there without a token."""


@dataclass(frozen=True)
class Journal:
    """A folder of one file per round, each written once (under a half-written name first, then renamed) and read
    in round order: a run's labels, ratings or sampled trajectories. Its names are ``<prefix><round><suffix>``,
    the round in at least four digits (``round_0003``, ``round-0003.parquet``)."""

    folder: Path
    prefix: str
    suffix: str = ""

    def round(self, k: int) -> Path:
        """Round ``k``'s file."""
        return self.folder / f"{self.prefix}{k:04d}{self.suffix}"

    def rounds(self) -> dict[int, Path]:
        """The complete rounds' files, by round, oldest first (a half-written one left out); none when the folder
        is missing."""
        return dict(sorted((k, path) for k, path in self._numbered() if path == self.round(k)))

    def forget(self, first: int) -> None:
        """Delete the files of round ``first`` and later, half-written ones included (a resumed run writes them
        again)."""
        for k, path in self._numbered():
            if k < first:
                continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    def _numbered(self) -> Iterator[tuple[int, Path]]:
        """Every file named as a round's, with its round: complete or half-written."""
        digits = re.compile(f"{re.escape(self.prefix)}(\\d{{4,}})")
        for path in self.folder.glob(f"{self.prefix}*"):
            if m := digits.match(path.name):
                yield int(m.group(1)), path


class RunLock:
    """An exclusive lock on a run folder while a run writes it (``flock`` on ``.lock``: the system
    releases it when the process ends, however it ends)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.file = (folder / ".lock").open("a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise RunError(f"run folder {str(folder)!r} is in use by {holder}; wait for it to end, or run in "
                           "another folder") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"rlhp pid {os.getpid()}")
        self.file.flush()

    def release(self) -> None:
        """Unlock (closing the file releases the lock)."""
        self.file.close()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunFolder:
    """One run's folder: ``.hydra/``, the log, ``metrics.csv``, ``checkpoints/``, ``trajectories/``,
    ``labels/``, ``eval.json`` and ``wandb/``; with human labels, ``media/`` and ``queries.sqlite``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def config_yaml(self) -> Path:
        """The resolved config Hydra saved."""
        return self.path / ".hydra" / "config.yaml"

    @property
    def choices_yaml(self) -> Path:
        """The config options the run was launched with."""
        return self.path / ".hydra" / "choices.yaml"

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
    def chunks_dir(self) -> Path:
        """Large arrays of the checkpoints (a replay buffer's), in chunks named by content hash."""
        return self.path / "chunks"

    @property
    def trajectories_dir(self) -> Path:
        """Every trajectory sampled for fragments: one Parquet file per round and a dataset card."""
        return self.path / "trajectories"

    @property
    def labels_dir(self) -> Path:
        """Every label as it was gathered, before training on it: one dataset per round."""
        return self.path / "labels"

    @property
    def ratings_dir(self) -> Path:
        """Every rating of a clip as it was gathered, before training on it: one dataset per round."""
        return self.path / "ratings"

    @property
    def label_journal(self) -> Journal:
        """Each round's labels as gathered (``labels/round_XXXX``): a preference dataset a round."""
        return Journal(self.labels_dir, "round_")

    @property
    def rating_journal(self) -> Journal:
        """Each round's ratings as gathered (``ratings/round_XXXX``): a preference dataset of one fragment a row."""
        return Journal(self.ratings_dir, "round_")

    @property
    def trajectory_journal(self) -> Journal:
        """Each round's sampled trajectories (``trajectories/round-XXXX.parquet``): one Parquet file of the
        trajectories dataset."""
        return Journal(self.trajectories_dir, "round-", ".parquet")

    @property
    def media_dir(self) -> Path:
        """The clips of human queries, two per query."""
        return self.path / "media"

    @property
    def queries_db(self) -> Path:
        """Human queries, their leases and answers (SQLite, see :mod:`rlhp.human.schema`)."""
        return self.path / "queries.sqlite"

    @property
    def annotate_json(self) -> Path:
        """Where a running annotation server says it listens (its URL)."""
        return self.path / "annotate.json"

    def checkpoint(self, name: str) -> Path:
        """The folder of checkpoint ``name`` (``iter_0003``, ``final``)."""
        return self.checkpoints_dir / name

    def checkpoints(self) -> list[Path]:
        """The complete round checkpoints, oldest first (``final/`` not included)."""
        found = self.checkpoints_dir.glob("iter_*")
        return sorted(p for p in found if p.is_dir() and not p.name.endswith(HALF_WRITTEN))

    def half_written(self) -> list[Path]:
        """Checkpoints whose writing was cut off (never taken for whole)."""
        return sorted(self.checkpoints_dir.glob(f"*{HALF_WRITTEN}"))

    def saved_checkpoints(self) -> list[Path]:
        """The complete round checkpoints, oldest first, then ``final/`` if it exists."""
        final = self.checkpoint("final")
        return self.checkpoints() + ([final] if final.is_dir() else [])

    def latest_checkpoint(self) -> Path | None:
        """``final/`` if it exists, else the newest complete round checkpoint, else None."""
        saved = self.saved_checkpoints()
        return saved[-1] if saved else None

    def never_ran(self) -> bool:
        """Whether the folder holds only what a launch writes before the run starts (Hydra's record, the log and
        the lock): a command refused there made it, and it holds no result."""
        return all(p.name in (".hydra", ".lock") or p.suffix == ".log" for p in self.path.iterdir())

    def finished(self) -> bool:
        """Whether the run ended and evaluated (``eval.json`` is written last)."""
        return self.eval_json.is_file()

    def lock(self) -> RunLock:
        """Lock the folder for writing; raises :class:`~rlhp.errors.RunError` when a live run holds it."""
        return RunLock(self.path)

    def config(self) -> DictConfig:
        """The run's resolved config."""
        config = read_file(self.config_yaml, OmegaConf.load)
        if not isinstance(config, DictConfig):
            raise DataError(f"{str(self.config_yaml)!r} is not a run's config (a YAML mapping); it is left as it is")
        return config

    def overrides(self) -> list[str]:
        """The command-line overrides the run was started with (none when the file is missing)."""
        path = self.config_yaml.parent / "overrides.yaml"
        if not path.exists():
            return []
        overrides = read_file(path, OmegaConf.load)
        if not isinstance(overrides, ListConfig):
            raise DataError(f"{str(path)!r} is not a list of overrides; it is left as it is")
        return [str(o) for o in overrides]

    def write_record(self, cfg: DictConfig, overrides: list[str]) -> None:
        """Record how the run is configured (``.hydra/config.yaml`` and ``overrides.yaml``, Hydra's layout)."""
        self.config_yaml.parent.mkdir(parents=True, exist_ok=True)
        self.config_yaml.write_text(OmegaConf.to_yaml(cfg))
        (self.config_yaml.parent / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(list(overrides))))

    def write_choices(self, choices: dict[str, str]) -> None:
        """Record the config options the run was launched with (``.hydra/choices.yaml``)."""
        self.choices_yaml.write_text(OmegaConf.to_yaml(OmegaConf.create(dict(choices))))

    def choices(self) -> dict[str, str]:
        """The config options the run was launched with (``agent``: ``sac``, ...); a run recorded before
        ``choices.yaml`` existed has them in Hydra's own record, and one with neither has none."""
        hydra_yaml = self.config_yaml.parent / "hydra.yaml"
        if self.choices_yaml.is_file():
            choices = read_file(self.choices_yaml, OmegaConf.load)
        elif hydra_yaml.is_file():
            choices = read_file(hydra_yaml, OmegaConf.load)
            choices = OmegaConf.select(choices, "hydra.runtime.choices") if isinstance(choices, DictConfig) else None
        else:
            return {}
        if not isinstance(choices, DictConfig):
            raise DataError(f"the options recorded in {str(self.config_yaml.parent)!r} are not a mapping; they are "
                            "left as they are")
        return {str(k): str(v) for k, v in choices.items() if v is not None}

    def metrics(self) -> list[dict[str, float | None]]:
        """The rows of ``metrics.csv`` (None where a round has no value)."""
        return read_file(self.metrics_csv, read_metrics)

    def evaluation(self) -> dict[str, Any]:
        """``eval.json``."""
        result = read_file(self.eval_json, lambda path: json.loads(path.read_text()))
        if not isinstance(result, dict):
            raise DataError(f"{str(self.eval_json)!r} is not a run's evaluation (a JSON object); it is left as it is")
        return result



def write_json(path: Path, values: dict[str, Any]) -> None:
    """Strict JSON (NaN and infinities become null), written to a temporary file and renamed."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    with written_whole(path) as tmp:
        tmp.write_text(json.dumps(clean(values), indent=2, allow_nan=False))
