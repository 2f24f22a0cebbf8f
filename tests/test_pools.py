"""The query pools: which episodes a round's pairs are cut from."""

import numpy as np
import pytest
from helpers import trajectory
from test_loop import FakeAgent, FakeSource, make_loop

from rlhp.errors import ArgumentError
from rlhp.loop.pools import RecentEpisodes, ThisRound


def test_this_round_gives_the_round_its_own_sample():
    sampled = [trajectory(5), trajectory(5, offset=10)]
    assert ThisRound()(sampled) is sampled


def test_recent_episodes_keep_the_newest_across_rounds_oldest_first():
    pool = RecentEpisodes(3)
    first = [trajectory(5, offset=i) for i in range(2)]
    assert pool(first) == first
    second = [trajectory(5, offset=10 + i) for i in range(2)]
    assert pool(second) == [first[1], *second]  # the oldest went
    assert pool([]) == [first[1], *second]


@pytest.mark.parametrize("episodes", [0, -3])
def test_an_empty_window_is_refused_by_its_key(episodes):
    with pytest.raises(ArgumentError, match="^episodes must"):
        RecentEpisodes(episodes)


class RoundTagged(FakeSource):
    """Each round's episodes start at 1000 x the round: an observation says which round sampled it."""

    def sample(self, steps: int) -> list:
        self.asked.append(steps)
        return [trajectory(50, offset=1000 * (len(self.asked) - 1) + i) for i in range(int(np.ceil(steps / 50)))]


@pytest.mark.parametrize(("pool", "older_rounds_queried"), [(ThisRound(), False), (RecentEpisodes(1000), True)])
def test_a_round_queries_older_rounds_episodes_only_from_a_window(pool, older_rounds_queried):
    loop = make_loop(FakeAgent(), comparisons=(4, 40, 40), pool=pool, seed=1)
    loop.reward_learning.source = RoundTagged(loop.agent)
    loop.iterate()
    dataset = loop.reward_learning.dataset
    rounds = dataset.pairs.obs[..., 0, 0] // 1000  # (pairs, 2): the round that sampled each fragment
    asked = np.repeat(np.arange(3), [2, 20, 20])  # answered: the even ids of each round's queries
    assert (rounds == asked[:, None]).all() != older_rounds_queried
    assert (rounds <= asked[:, None]).all()  # never a later round's
