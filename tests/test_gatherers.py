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
    g.add(pairs, Querent()(pairs))
    answered, labels, ids = g()
    assert set(np.unique(labels)) == {0.0, 1.0} and labels.dtype == np.float32
    assert abs(labels.mean() - 1 / (1 + np.exp(-1))) < 0.03
    assert g.pending is None and len(ids) == 4000
    assert 0 < g.last_entropy < 1


def test_querent_ids_are_unique_across_calls():
    q = Querent()
    assert np.concatenate([q(random_pairs(3)), q(random_pairs(2))]).tolist() == [0, 1, 2, 3, 4]
