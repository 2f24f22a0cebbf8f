import time

import numpy as np
import pytest
from helpers import random_pairs

from rlhp.feedback import Querent, SyntheticGatherer


def with_returns(r1: list[float], r2: list[float]):
    pairs = random_pairs(len(r1), length=2)
    pairs.rews[:, 0] = np.array(r1, np.float32)[:, None] / 2
    pairs.rews[:, 1] = np.array(r2, np.float32)[:, None] / 2
    return pairs


def test_temperature_zero_is_deterministic_with_ties_at_half():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False)
    assert g.probabilities(with_returns([3, 1, 2], [1, 3, 2])).tolist() == [1.0, 0.0, 0.5]


def test_temperature_scales_the_difference():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=2.0, sample=False)
    assert g.probabilities(with_returns([4], [0]))[0] == pytest.approx(1 / (1 + np.exp(-2.0)), rel=1e-12)


def test_sampled_labels_are_binary_and_follow_the_probability():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=1.0, sample=True)
    pairs = with_returns([1.0] * 4000, [0.0] * 4000)
    answered, labels, ids = gathered(g, pairs)
    assert set(np.unique(labels)) == {0.0, 1.0} and labels.dtype == np.float32
    assert abs(labels.mean() - 1 / (1 + np.exp(-1))) < 0.03
    assert g.pending is None and len(ids) == 4000
    assert 0 < g.last_entropy < 1


def test_querent_ids_are_unique_across_calls():
    q = Querent()
    assert np.concatenate([q(random_pairs(3)), q(random_pairs(2))]).tolist() == [0, 1, 2, 3, 4]


def gathered(gatherer, pairs):
    gatherer.add(pairs, Querent()(pairs))
    answers = gatherer()
    return answers.pairs, answers.labels, answers.ids


def test_the_mistake_teacher_flips_its_share_of_labels():
    rng = np.random.default_rng(0)
    r1, r2 = rng.normal(size=10_000), rng.normal(size=10_000)
    g = SyntheticGatherer(np.random.default_rng(1), temperature=0, sample=False, mistake=0.2)
    answered, labels, _ = gathered(g, with_returns(list(r1), list(r2)))
    wrong = labels != (r1 > r2).astype(np.float32)
    assert abs(wrong.mean() - 0.2) < 0.01  # within 1 point of the setting over 10,000 labels


def test_the_myopic_teacher_weighs_later_steps_more():
    pairs = random_pairs(2, length=4)
    pairs.rews[:] = 0
    pairs.rews[:, 0, 0] = 1.0  # the first fragment earns early
    pairs.rews[:, 1, 3] = 1.0  # the second as much, late
    perfect = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False)
    myopic = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, myopic_gamma=0.9)
    assert gathered(perfect, pairs)[1].tolist() == [0.5, 0.5] and gathered(myopic, pairs)[1].tolist() == [0.0, 0.0]


def test_the_skip_teacher_skips_pairs_that_both_return_little_and_never_trains_on_them():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.1)
    answered, labels, ids = gathered(g, with_returns([10, 0.5, 0.2, 3], [0, 0.4, 0.9, 0]))
    # The largest return is 10, so pairs whose better fragment returns under 1 are skipped: answered
    # "can't tell" (NaN), which the loop keeps in the journal and never trains on.
    assert ids.tolist() == [0, 1, 2, 3] and g.pending is None
    assert labels[[0, 3]].tolist() == [1.0, 1.0] and np.isnan(labels[[1, 2]]).all()
    assert g.metrics()["labels_skipped"] == 2


def test_the_equal_teacher_ties_close_returns():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, equal_frac=0.1)
    _, labels, _ = gathered(g, with_returns([10, 5, 5, 2], [0, 5.5, 4.5, 3.5]))
    assert labels.tolist() == [1.0, 0.5, 0.5, 0.0]  # within 1 (10% of 10) of each other: equal


def test_a_teacher_answers_everything_added_since_it_was_last_asked_in_typed_fields():
    gatherer = SyntheticGatherer(np.random.default_rng(0), sample=False)
    empty = gatherer()  # nothing pending: an empty answer of the same types as a full one
    assert empty.labels.dtype == np.float32 and empty.labels.shape == (0,) and empty.ids.dtype == np.int64
    assert len(empty) == 0 and empty.annotators == [] and empty.times.shape == (0,)
    pairs = random_pairs(6)
    gatherer.add(pairs[:2], np.array([7, 8]))
    gatherer.add(pairs[2:], np.array([9, 10, 11, 12]))  # added again before anyone asked
    before = time.time()
    answers = gatherer()
    assert answers.ids.tolist() == [7, 8, 9, 10, 11, 12] and answers.ids.dtype == np.int64
    np.testing.assert_array_equal(answers.pairs.obs, pairs.obs)
    assert answers.annotators == ["synthetic"] * 6 and answers.times.shape == (6,)
    assert before <= answers.times.min() <= answers.times.max() <= time.time()
    assert gatherer.num_pending() == 0 and len(gatherer()) == 0
