"""What the command line said to one launch: its run folder, overrides, chosen options and place in a sweep.

The entry points read it from Hydra's runtime; everything below them takes it as a plain argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


def override_key(override: str) -> str:
    """The dotted key a command-line override sets (``+a.b=1``, ``~a.b``: ``a.b``)."""
    return override.lstrip("+~").split("=", 1)[0]


@dataclass
class RunIdentity:
    """Where a run belongs in a tracker: under a sweep, the group is the sweep folder's name, the job
    type its overrides without the seed (the seeds of one configuration) and the name all its overrides."""

    name: str
    group: str | None = None
    job_type: str = "train"


@dataclass
class Launch:
    """One launch of a command: where it writes, the overrides it was given and the options they chose."""

    run_dir: Path
    overrides: list[str] = field(default_factory=list)
    choices: dict[str, str] = field(default_factory=dict)
    sweep_dir: Path | None = None
    """The sweep folder under ``-m``, else None."""

    @property
    def identity(self) -> RunIdentity:
        """The run's place in a tracker: alone, its folder's name; in a sweep, grouped by the sweep."""
        if self.sweep_dir is None:
            return RunIdentity(name=self.run_dir.name)
        overrides = [o for o in self.overrides if not o.startswith("hydra.")]
        return RunIdentity(name=",".join(overrides) or self.run_dir.name, group=self.sweep_dir.name,
                           job_type=",".join(o for o in overrides if not o.startswith("seed=")) or "train")
