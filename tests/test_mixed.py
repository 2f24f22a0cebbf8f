"""T-REX mixed with another teacher: demonstration pairs by rank, the rest by the teacher, and the
demonstrations source's share of agent episodes."""

import functools

import numpy as np
import pytest
from helpers import random_pairs
from stable_baselines3 import PPO
from test_annotate import publish

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import trajectories_to_dataset
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.errors import ArgumentError
from rlhp.feedback import MixedGatherer, SyntheticGatherer
from rlhp.human.gatherer import HumanGatherer
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.rewards import RewardNet
from rlhp.sources import DemoSource


def test_demonstration_pairs_are_ranked_and_every_pair_with_an_agent_fragment_goes_to_the_teacher():
    pairs = random_pairs(40, 6)
    pairs.episode[20:, 1] = -1  # the second half holds one fragment of the agent's own each
    pairs.quality[:, :] = np.arange(80).reshape(40, 2)[:, ::-1] % 7  # ranks unrelated to the returns
    gatherer = MixedGatherer(SyntheticGatherer(np.random.default_rng(0), sample=False))
    gatherer.add(pairs, np.arange(100, 140))
    assert gatherer.num_pending() == 40
    assert gatherer.metrics()["pending_ranked"] == 20 and gatherer.metrics()["pending_teacher"] == 20
    answers = gatherer()
    assert sorted(answers.ids.tolist()) == list(range(100, 140)) and gatherer.num_pending() == 0
    by_id = dict(zip(answers.ids.tolist(), answers.labels.tolist(), strict=True))
    returns = pairs.rews.sum(-1)
    for i in range(40):
        if i < 20:
            expected = 0.5 * (1 + np.sign(pairs.quality[i, 0] - pairs.quality[i, 1]))
        else:  # the synthetic teacher's Bradley-Terry probability of the true returns
            expected = 1 / (1 + np.exp(returns[i, 1] - returns[i, 0]))
        assert by_id[100 + i] == pytest.approx(expected, abs=1e-5)
    assert set(answers.annotators) == {"ranked", "synthetic"} and not gatherer.reads_published_queries
    assert len(answers.pairs) == 40 and answers.times.shape == (40,)  # every answered pair, and when
    assert gatherer.metrics()["label_entropy"] == gatherer.teacher.metrics()["label_entropy"]


def test_a_human_teacher_is_never_asked_about_the_pairs_the_ranks_answer(tmp_path):
    store = publish(tmp_path, 6)
    pairs = store.pairs(np.arange(6))
    pairs.episode[3:, 0] = -1
    gatherer = MixedGatherer(HumanGatherer(tmp_path, serve=False))
    assert gatherer.reads_published_queries  # as its teacher does: the run must publish queries for people
    gatherer.add(pairs, np.arange(6))
    assert store.open_ids().tolist() == [3, 4, 5]
    with gatherer.session(stop=lambda: True):  # the human teacher's wait for a first label ends at once
        answers = gatherer()  # the ranked three; nobody has answered the rest yet
    assert sorted(answers.ids.tolist()) == [0, 1, 2] and gatherer.num_pending() == 3


def test_the_demonstrations_source_mixes_in_the_agents_episodes(tmp_path):
    env = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=2)
    venv = env.make(seed=0)
    episodes = rollout(venv, random_policy(venv.action_space), episodes=4)
    trajectories_to_dataset(episodes, columns={"rank": [0, 1, 2, 3]}).save_to_disk(str(tmp_path / "d"))
    net = RewardNet(*env.spaces(), hidden_sizes=[8])
    algo = functools.partial(PPO, "MlpPolicy", device="cpu", n_steps=64, batch_size=64)
    source = DemoSource(str(tmp_path / "d"), algo, env, net, seed=0, rng=np.random.default_rng(0),
                        held_out_frac=0.0, agent_frac=0.5)
    sampled = source.sample(2000)
    demos = [t for t in sampled if t.episode >= 0]
    own = [t for t in sampled if t.episode < 0]
    assert sum(map(len, demos)) >= 1000 and sum(map(len, own)) >= 1000 and all(t.rank is None for t in own)
    pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(sampled, 10, 50)
    assert ((pairs.episode >= 0).all(axis=1)).any() and ((pairs.episode < 0).any(axis=1)).any()
    with pytest.raises(ArgumentError, match="agent_frac must be in"):
        DemoSource(str(tmp_path / "d"), algo, env, net, seed=0, rng=np.random.default_rng(0), agent_frac=1.5)
