"""The label-filter benchmark reads, from a real run's metrics.csv, the labels left out and how many were wrong."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_filter import last_round, share  # noqa: E402

from rlhp.data import PreferenceDataset  # noqa: E402
from rlhp.report.folders import find_runs  # noqa: E402


@pytest.mark.slow
def test_a_filtered_run_against_an_erring_teacher_reports_what_the_benchmark_reads(train) -> None:
    # Pendulum: the debug budget's short CartPole fragments nearly all earn the same return, so its labels are ties.
    run_dir, _ = train("env=gym", "env.id=Pendulum-v1", "reward_trainer/label_filter=contradicted",
                       "gatherer.mistake=0.4", "reward_trainer.label_filter.max_fraction=0.5",
                       "reward_trainer.epochs=20")
    (run,) = find_runs(run_dir)
    labels, wrong, dropped, dropped_wrong, flipped, flipped_wrong = last_round(run)
    assert math.isnan(flipped) and flipped_wrong == 0  # this filter flips nothing: it reports no flips
    assert labels == 20
    # Wrong: a preference the true returns rank the other way, counted here from the saved labels.
    prefs = PreferenceDataset.load(run_dir / "checkpoints" / "final" / "preferences")
    returns, given = prefs.pairs.rews.sum(-1), prefs.labels
    contradicted = ((returns[:, 0] > returns[:, 1]) != (given > 0.5)) & (given != 0.5)
    assert wrong == contradicted.sum() and 0 < wrong < labels  # two in five flipped
    assert 0 < dropped <= 10  # at most max_fraction of them
    assert 0 <= dropped_wrong <= min(dropped, wrong)


def test_a_share_is_a_count_and_its_percentage_of_the_whole() -> None:
    assert share(3, 12) == "3 (25%)"
    assert share(0, 0) == "0"
    assert share(float("nan"), 12) == share(0, float("nan")) == "–"  # not reported by the run's filter
