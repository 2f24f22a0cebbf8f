"""Console and log file: every record goes to the run's log file; the console shows only a few."""

from __future__ import annotations

import logging

CONSOLE = {"console": True}
"""``log.info(..., extra=CONSOLE)`` also shows the line on the console (start, run folder, result)."""

FILE_ONLY = {"console": False}
"""``log.error(..., extra=FILE_ONLY)`` keeps a record off the console (e.g. one printed there already)."""


class ConsoleFilter(logging.Filter):
    """Lets warnings and errors through, and the records marked with :data:`CONSOLE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether the console shows ``record``."""
        return getattr(record, "console", record.levelno >= logging.WARNING)
