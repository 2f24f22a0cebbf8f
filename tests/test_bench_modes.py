"""The labelling-modes benchmark counts a person's minutes and the labels trained on from a run's query store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_clips import cartpole_pairs
from test_ratings import answer_every_query

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_modes import person_minutes  # noqa: E402

from rlhp.human.querent import WebQuerent  # noqa: E402
from rlhp.human.server.answers import AnswerStore


def test_a_mixed_run_counts_a_pair_and_a_rating_at_their_own_time_and_each_label_taken_once(tmp_path):
    env, pairs = cartpole_pairs(10)
    querent = WebQuerent(env, tmp_path, width=160, mode="rate", rate_share=0.5)
    querent(pairs)  # 5 pairs asked, both clips of the other 5 rated
    answer_every_query(querent.store, 15)
    querent.store.take(querent.store.open_ids(), 0)
    status = AnswerStore(querent.store.path).status()
    assert person_minutes(status, 1.5, 1.0) == pytest.approx((5 * 1.5 + 10 * 1.0) / 60)
    assert status["in_training"] == 15  # the bench's labels trained on: 5 pairs and 10 rated clips, once each
    assert person_minutes({**status, "ratings": 0}, 1.5, 1.0) == pytest.approx(15 * 1.5 / 60)


def test_the_rating_scale_is_asked_of_rating_mode_alone_and_one_off_the_page_s_keys_is_refused(tmp_path,
                                                                                               monkeypatch):
    import bench_modes

    class Asked(Exception):
        """The rating run's settings were seen: nothing needs to run."""

    seen = []

    def run_labelled(folder, overrides, people, seed):
        seen.append(overrides)
        if "querent.mode=rate" in overrides:
            raise Asked

    monkeypatch.setattr(bench_modes, "run_labelled", run_labelled)
    given = ["bench_modes.py", "--seeds", "1", "--jobs", "1", "--modes", "pairs", "rate", "--root", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [*given, "--scale", "10"])
    with pytest.raises(Asked):
        bench_modes.main()
    pairs, rate = seen
    assert "querent.scale=10" in rate and not any(o.startswith("querent.scale") for o in pairs)
    monkeypatch.setattr(sys, "argv", [*given, "--scale", "11"])  # keys 1-9 and 0 for 10
    with pytest.raises(SystemExit) as refused:
        bench_modes.main()
    assert refused.value.code == 2 and len(seen) == 2
