"""Ledgers of benchmark runs: CSV files in the repository, one row per finished run, because a run at a paper's
budget takes hours and its folder may not outlive the machine it ran on. A benchmark's table is written from its
ledger alone, so runs made on different days (and machines, named in each row) add up."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Row = dict[str, str]


def read_rows(path: Path, fields: list[str], what: str) -> list[Row]:
    """The rows of the ledger at ``path`` (none when it does not exist yet); refused when its columns are not
    ``fields`` (``what`` names the ledger in the message)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    if reader.fieldnames != fields:
        raise SystemExit(f"{path} is not a ledger of {what}: its columns are {reader.fieldnames}, not {fields}")
    return rows


def write_rows(path: Path, rows: list[Row], fields: list[str], order: Callable[[Row], Any]) -> None:
    """Write ``rows`` sorted by ``order``, so that the file's diffs show what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(sorted(rows, key=order))


def merge_rows(ledger: list[Row], new: list[Row], key: Sequence[str]) -> list[Row]:
    """``ledger`` with ``new`` rows added; a new row replaces the rows that agree with it on every field of ``key``."""
    replaced = {tuple(r[k] for k in key) for r in new}
    return [r for r in ledger if tuple(r[k] for k in key) not in replaced] + new
