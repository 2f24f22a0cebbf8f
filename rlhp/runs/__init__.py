"""Run folders: their layout, ``metrics.csv``, and readers that import nothing of the loop."""

from rlhp.runs.folder import RunFolder, write_json
from rlhp.runs.metrics import MetricsCSV, read_metrics

__all__ = ["MetricsCSV", "RunFolder", "read_metrics", "write_json"]
