"""The B-Pref benchmark's table cells: DMC's return, Meta-World's success rate in percent, each with its runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_bpref import PUBLISHED, score  # noqa: E402
from test_bpref import TASKS  # noqa: E402

from rlhp.report.folders import Run  # noqa: E402
from rlhp.runs import RunFolder  # noqa: E402


def runs(tmp_path: Path, *evaluations: dict) -> list[Run]:
    return [Run(RunFolder(tmp_path / str(i)), {}, "finished", [], e) for i, e in enumerate(evaluations)]


def test_dmc_scores_its_return_and_metaworld_its_success_in_percent(tmp_path):
    assert score(runs(tmp_path, {"true_return_mean": 300.0}, {"true_return_mean": 200.0})) \
        == "250.0 ± 635.3 (2)"
    assert score(runs(tmp_path, {"true_return_mean": 4000.0, "success_rate": 0.6})) == "60% (1)"


def test_the_published_figures_are_at_the_experiments_own_label_budgets():
    assert {task: labels for task, (labels, _) in PUBLISHED.items()} == {t: v[1] for t, v in TASKS.items()}
