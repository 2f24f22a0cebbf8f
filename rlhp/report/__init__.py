"""``rlhp-report``: curves over seeds, a final table and a search summary for a run or sweep folder.

Reads only what runs wrote (``.hydra/``, ``metrics.csv``, ``eval.json``); imports no training code.
"""

from rlhp.report.folders import Run, find_runs
from rlhp.report.writer import write_report

__all__ = ["Run", "find_runs", "write_report"]
