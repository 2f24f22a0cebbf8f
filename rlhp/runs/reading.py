"""Reading a run's files: whatever is wrong with one (missing, unreadable, damaged, of the wrong kind) is a
:class:`~rlhp.errors.DataError` that names it, and the file is left as it is."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from omegaconf.errors import OmegaConfBaseException

from rlhp.errors import DataError

T = TypeVar("T")


def read_file(path: Path, read: Callable[[Path], T]) -> T:
    """``read(path)``; a file that is missing, unreadable, damaged or of the wrong kind is a
    :class:`~rlhp.errors.DataError` naming it (the file is left as it is)."""
    try:
        return read(path)
    except FileNotFoundError:
        raise DataError(f"{str(path)!r} is missing") from None
    except (OSError, UnicodeDecodeError, ValueError, csv.Error, yaml.YAMLError, OmegaConfBaseException) as err:
        first = (str(err).splitlines() or [""])[0][:200]
        raise DataError(f"{str(path)!r} cannot be read ({type(err).__name__}: {first}); it is left as it is") from None
