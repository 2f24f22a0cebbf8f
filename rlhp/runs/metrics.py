"""``metrics.csv``: one row per round, a column for every key ever reported."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from rlhp.errors import DataError
from rlhp.files import written_whole
from rlhp.runs.reading import read_file


class MetricsCSV:
    """Appends one row per round and flushes it at once, so a crash loses nothing.

    A key not seen before adds a column: the file is rewritten with the wider header (earlier
    rows get blanks there) into a temporary file that replaces it, so it is never half-written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.columns: list[str] = []
        if self.path.exists():  # a resumed run's: refused, never rewritten, when it is not a metrics file
            # Every row but the last must read as numbers; the last may have been cut off mid-write.
            lines = read_file(self.path, lambda path: path.read_text().splitlines(keepends=True))
            self.columns = next(csv.reader(lines[:1]), [])
            read_file(self.path, lambda path: _numbers(lines[:-1]))
            if "iteration" not in self.columns:
                raise DataError(f"{str(self.path)!r} is not a run's metrics (no iteration column); it is left as "
                                "it is: move it away to start the file anew")

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
        with written_whole(self.path) as tmp, tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, self.columns)
            writer.writeheader()
            writer.writerows(rows)  # the text as written: a widened file reads back exactly


def _round(row: dict[str, str]) -> float:
    """The row's round; a row cut off mid-write counts as the latest."""
    try:
        return float(row["iteration"])
    except (TypeError, ValueError):
        return float("inf")


def read_metrics(path: str | Path) -> list[dict[str, float | None]]:
    """The rows of a ``metrics.csv`` as numbers (None where a round has no value, or where a row cut off
    mid-write ends early)."""
    with Path(path).open(newline="") as f:
        return _numbers(f)


def _numbers(lines: Iterable[str]) -> list[dict[str, float | None]]:
    """CSV rows under their header, as numbers."""
    return [{k: float(v) if v not in ("", None) else None for k, v in row.items() if k is not None}
            for row in csv.DictReader(lines)]
