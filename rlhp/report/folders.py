"""Finding the runs under a folder and reading what each wrote, without the training code."""

from __future__ import annotations

import fcntl
import functools
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlhp.runs import RunFolder

SEED = "seed"


@dataclass
class Run:
    """One run folder as the report sees it."""

    folder: RunFolder
    overrides: dict[str, str]
    status: str  # finished | running | crashed
    rows: list[dict[str, float | None]] = field(default_factory=list)
    evaluation: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The folder's name (a sweep job's number)."""
        return self.folder.path.name

    @functools.cached_property
    def recorded(self) -> tuple[dict[str, str], DictConfig | None]:
        """The options and the config the run recorded (read once: every swept key of every run asks)."""
        return self.folder.choices(), self.folder.config() if self.folder.config_yaml.is_file() else None

    def setting(self, key: str) -> str:
        """This run's value of ``key``: its override, else the option or value its recorded config has."""
        if key in self.overrides:
            return self.overrides[key]
        choices, config = self.recorded
        if key in choices:
            return choices[key]
        value = OmegaConf.select(config, key, default=None) if config is not None else None
        return "null" if value is None else str(value)

    def configuration(self, swept: list[str]) -> str:
        """This run's values of the ``swept`` keys: runs that share them are seeds of one configuration."""
        return ",".join(f"{k}={self.setting(k)}" for k in swept) or "all runs"


def swept_keys(runs: list[Run]) -> list[str]:
    """The override keys whose values differ between runs, the seed aside (a key one run overrides with the value
    the others have by default is not one)."""
    keys = sorted({k for run in runs for k in run.overrides} - {SEED})
    return [k for k in keys if len({run.setting(k) for run in runs}) > 1]


def overrides_by_key(overrides: list[str]) -> dict[str, str]:
    """Command-line overrides as key -> value (``+``/``~`` dropped, ``hydra.*`` left out, the last of a key wins)."""
    pairs = [o.lstrip("+~") for o in overrides]
    return {k: v for k, _, v in (o.partition("=") for o in pairs) if not k.startswith("hydra.")}


def _status(run: RunFolder) -> str:
    if run.finished():
        return "finished"
    lock = run.path / ".lock"
    if lock.exists():
        with lock.open("a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return "running"
    return "crashed"


def find_runs(folder: str | Path) -> list[Run]:
    """Every run in ``folder``: the folder itself, or the jobs of a sweep (any depth), in folder order."""
    root = Path(folder)
    found = sorted({p.parent.parent for p in root.rglob(".hydra/config.yaml")},
                   key=lambda p: [int(s) if s.isdigit() else s for s in p.relative_to(root).parts])
    runs = []
    for path in found:
        run = RunFolder(path)
        status = _status(run)
        if status == "crashed" and run.never_ran():  # a launch refused before its run began: nothing to report
            continue
        runs.append(Run(run, overrides_by_key(run.overrides()), status,
                        run.metrics() if run.metrics_csv.exists() else [],
                        run.evaluation() if status == "finished" else {}))
    return runs
