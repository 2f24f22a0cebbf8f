"""RIME's warm start: the reward net fitted to the intrinsic reward of the agent's unsupervised pre-training before
its first label, once, in the first round."""

import csv
import functools
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import composed
from stable_baselines3 import SAC

from rlhp.agents import AgentTrainer
from rlhp.agents.exploration import StateEntropyReward
from rlhp.data import Trajectory
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError
from rlhp.experiment.compose import compose
from rlhp.experiment.launch import Launch
from rlhp.experiment.train import train
from rlhp.rewards import RewardNet, entropy
from rlhp.rewards.entropy import state_entropy
from rlhp.training import IntrinsicWarmStart, RewardTrainer
from rlhp.training.warm_start import transitions

targets = IntrinsicWarmStart.targets
SPACES = (gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Box(-1, 1, (3,), np.float32))


def test_state_entropy_is_each_observations_distance_to_its_kth_neighbour_in_chunks(monkeypatch):
    x = torch.as_tensor(np.random.default_rng(0).normal(size=(50, 4)), dtype=torch.float32)
    brute = torch.log1p(torch.cdist(x, x).sort(dim=1).values[:, 3])  # column 0 is each point itself
    monkeypatch.setattr(entropy, "QUERY_CHUNK", 7)  # chunks that do not divide the queries
    torch.testing.assert_close(state_entropy(x, x, 3), brute)
    reward = StateEntropyReward(k=3, capacity=100)  # the pre-training's reward is the same measure
    np.testing.assert_allclose(reward(x.numpy()), brute.numpy(), rtol=1e-5)


def test_the_targets_are_standardised_into_minus_one_to_one_and_pay_the_lonely_most():
    crowd = np.random.default_rng(1).normal(scale=0.1, size=(40, 3)).astype(np.float32)
    crowd[7] = 10.0  # one observation far from the rest
    target = IntrinsicWarmStart(k=2).targets(torch.as_tensor(crowd))
    assert target.abs().max() == pytest.approx(1.0) and abs(float(target.mean())) < 1e-6
    assert int(target.argmax()) == 7 and target[7] == pytest.approx(1.0)


def episode(obs: np.ndarray, acts: np.ndarray, terminal: bool = False) -> Trajectory:
    return Trajectory(obs=obs, acts=acts, rews=np.zeros(len(acts), np.float32), terminal=terminal)


def explored(seed: int = 0) -> list[Trajectory]:
    """Episodes of a walk whose step is the action (so a step's intrinsic reward, paid on where it leads, is a
    function of the state and the action the net sees), crowded near the start and sparse far out."""
    rng = np.random.default_rng(seed)
    acts = [rng.uniform(-1, 1, (100, 3)).astype(np.float32) for _ in range(4)]
    return [episode(np.concatenate([np.zeros((1, 3), np.float32), a.cumsum(0)]), a) for a in acts]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_warm_start_fits_every_member_to_the_intrinsic_reward(seed, monkeypatch):
    torch.manual_seed(seed)
    net = RewardNet(*SPACES, hidden_sizes=[32, 32], members=3)
    trainer = RewardTrainer(net, np.random.default_rng(seed), lr=3e-3,
                            warm_start=IntrinsicWarmStart(updates_per_step=4.0, batch_size=64, k=3))
    episodes = explored(seed)
    obs, acts, next_obs, dones = transitions(episodes, net.device)
    scored = []
    monkeypatch.setattr(IntrinsicWarmStart, "targets", lambda self, x: scored.append(x) or targets(self, x))
    metrics = trainer.start_warm(episodes)
    assert metrics["warm_start_updates"] == 1600 and metrics["warm_start_explained"] > 0.85
    torch.testing.assert_close(scored[0], next_obs)  # a step is paid for where it leads, as in the pre-training
    target = targets(trainer.warm_start, next_obs)
    with torch.no_grad():
        rewards = net(obs, acts, next_obs, dones)
    assert not net.training
    for member in rewards:  # each member learned it, not just their mean
        assert np.corrcoef(member.numpy(), target.numpy())[0, 1] > 0.9
    assert ((rewards.mean(0) - target) ** 2).mean() == pytest.approx(metrics["warm_start_loss"], rel=0.5, abs=0.01)


def test_the_transitions_end_where_their_episodes_terminate():
    episodes = [episode(np.zeros((4, 3), np.float32), np.zeros((3, 3), np.float32), terminal=True),
                episode(np.ones((3, 3), np.float32), np.zeros((2, 3), np.float32), terminal=False)]
    obs, acts, next_obs, dones = transitions(episodes, torch.device("cpu"))
    assert obs.shape == next_obs.shape == acts.shape == (5, 3)
    assert dones.tolist() == [False, False, True, False, False] and next_obs[3:].eq(1).all()


@pytest.mark.parametrize(("key", "value"), [("updates_per_step", 0), ("updates_per_step", math.nan),
                                            ("updates_per_step", True), ("batch_size", 0), ("k", 1.5)])
def test_a_warm_start_refuses_values_outside_its_domain(key, value):
    with pytest.raises(ArgumentError, match=key):
        IntrinsicWarmStart(**{key: value})


def test_the_agent_trainer_hands_over_its_pre_trainings_episodes_once():
    env = GymEnv("Pendulum-v1", n_envs=2)
    source = AgentTrainer(functools.partial(SAC, "MlpPolicy", learning_starts=100, device="cpu"), env,
                          RewardNet(*env.spaces()), seed=0, rng=np.random.default_rng(0), unsupervised_steps=400)
    assert source.pretraining_steps == 200 and source.pretraining_episodes() == []
    sampled = source.sample(100)
    episodes = source.pretraining_episodes()
    assert len(episodes) == 2 and all(len(t) == 200 for t in episodes)  # each copy's one episode, whole
    assert any(t is s for t in episodes for s in sampled)  # the same episodes, not copies
    assert source.pretraining_episodes() == [] and source.pretraining_steps == 0


PENDULUM = ["experiment=pendulum", "debug=fast", "logger=none", "env.n_envs=2", "total_timesteps=1200"]


@pytest.mark.parametrize(("overrides", "warmed"), [
    ([], 0),
    (["initial_comparison_frac=0", "reward_learning=asynchronous"], 1),  # round 0 samples nothing: no pre-training
])
def test_the_round_of_the_first_sample_warm_starts_the_reward_and_no_other_round_does(overrides, warmed, tmp_path):
    cfg = composed("train", [*PENDULUM, "reward_trainer/warm_start=intrinsic", "trajectories.unsupervised_steps=400",
                             "callbacks=[metrics_csv]", *overrides])
    train(cfg, Launch(tmp_path))
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    assert int(rows[warmed]["warm_start_updates"]) == 400 and float(rows[warmed]["warm_start_explained"]) > 0.5
    assert [row["warm_start_updates"] == "" for row in rows] == [k != warmed for k in range(len(rows))]


@pytest.mark.parametrize(("overrides", "key"), [
    ([], "reward_trainer.warm_start"),  # no pre-training to learn from
    # 150 steps a copy: no episode of Pendulum's own 200 steps.
    (["trajectories.unsupervised_steps=300", "env.max_episode_steps=null"], "trajectories.unsupervised_steps"),
])
def test_a_warm_start_without_pre_training_episodes_is_a_config_error(overrides, key, tmp_path):
    cfg = composed("train", [*PENDULUM, "reward_trainer/warm_start=intrinsic", *overrides])
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        compose(cfg, tmp_path)
