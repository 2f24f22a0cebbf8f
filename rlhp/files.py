"""Files and folders written whole or not at all: under a half-written name first, renamed once complete.

Every writer of a run's files goes through :func:`written_whole`, so that a crash at any point leaves either the
old file, the new one, or a half-written one under a name that readers skip (:data:`HALF_WRITTEN`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

HALF_WRITTEN = ".tmp"
"""Suffix of a file or folder being written; it is renamed to its real name only once complete."""


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """The half-written name beside ``path`` for the block to write a file or folder under; when the block ends it
    replaces ``path`` (a folder there is removed first), and when the block fails it is removed."""
    tmp = path.with_name(path.name + HALF_WRITTEN)
    _remove(tmp)  # left by a crash
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if tmp.is_dir() and path.is_dir():
        shutil.rmtree(path)
    os.replace(tmp, path)
