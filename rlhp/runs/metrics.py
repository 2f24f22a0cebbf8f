"""``metrics.csv``: one row per round, a column for every key ever reported."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping
from pathlib import Path


class MetricsCSV:
    """Appends one row per round and flushes it at once, so a crash loses nothing.

    A key not seen before adds a column: the file is rewritten with the wider header (earlier
    rows get blanks there) into a temporary file that replaces it, so it is never half-written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.columns: list[str] = []
        if self.path.exists():
            with self.path.open(newline="") as f:
                self.columns = next(csv.reader(f), [])

    def append(self, metrics: Mapping[str, float]) -> None:
        """Write one row (blank where a column has no value)."""
        new = [k for k in metrics if k not in self.columns]
        if new or not self.path.exists():
            self._widen(new)
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([metrics.get(c, "") for c in self.columns])

    def keep_rounds(self, rounds: int) -> None:
        """Drop the rows of rounds ``rounds`` and later (a resumed run writes them again)."""
        if self.path.exists():
            self._rewrite(lambda row: _round(row) < rounds)

    def _widen(self, new: list[str]) -> None:
        self.columns += new
        self._rewrite(lambda row: True)

    def _rewrite(self, keep: Callable[[dict[str, str]], bool]) -> None:
        rows: list[dict[str, str]] = []
        if self.path.exists():
            with self.path.open(newline="") as f:
                rows = [row for row in csv.DictReader(f) if keep(row)]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, self.columns)
            writer.writeheader()
            writer.writerows(rows)  # the text as written: a widened file reads back exactly
        os.replace(tmp, self.path)


def _round(row: dict[str, str]) -> float:
    """The row's round; a row cut off mid-write counts as the latest."""
    try:
        return float(row["iteration"])
    except (TypeError, ValueError):
        return float("inf")


def read_metrics(path: str | Path) -> list[dict[str, float | None]]:
    """The rows of a ``metrics.csv`` as numbers (None where a round has no value)."""
    with Path(path).open(newline="") as f:
        return [{k: float(v) if v != "" else None for k, v in row.items()} for row in csv.DictReader(f)]
