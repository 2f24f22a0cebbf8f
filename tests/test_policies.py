import gymnasium as gym
import numpy as np
import pytest

from rlhp.agents.policies import GaussianActionNoise, mixed_policy, random_policy


def always_zero(obs):
    return np.zeros(len(obs), dtype=np.int64)


def test_epsilon_greedy_replaces_that_share_of_actions():
    space = gym.spaces.Discrete(5, seed=0)
    assert mixed_policy(always_zero, space, np.random.default_rng(0), random_prob=0.0) is always_zero
    noisy = mixed_policy(always_zero, space, np.random.default_rng(0), random_prob=0.5)
    acts = np.stack([noisy(np.zeros((100, 1))) for _ in range(40)])
    assert 0.35 < (acts != 0).mean() < 0.45  # half replaced, 4/5 of those by a non-zero action
    # switch_prob 1: every step re-chooses, so random steps do not come in runs.
    random = acts != 0
    assert abs(random[1:][random[:-1]].mean() - random.mean()) < 0.05


def test_sticky_exploration_comes_in_runs_of_the_expected_length():
    space = gym.spaces.Discrete(1000, seed=0)
    policy = mixed_policy(always_zero, space, np.random.default_rng(1), random_prob=0.5, switch_prob=0.1)
    random = np.stack([policy(np.zeros((50, 1))) for _ in range(400)]) != 0  # (steps, copies)
    assert 0.4 < random.mean() < 0.6
    # A copy in random mode stays there unless it switches (0.1) and then draws the agent (0.5).
    stay = random[1:][random[:-1]].mean()
    assert abs(stay - (1 - 0.1 * 0.5)) < 0.02


def test_random_policy_samples_the_seeded_space():
    space = gym.spaces.Box(-1, 1, (2,), seed=3)
    acts = random_policy(space)(np.zeros((7, 4)))
    assert acts.shape == (7, 2) and np.abs(acts).max() <= 1
    again = random_policy(gym.spaces.Box(-1, 1, (2,), seed=3))(np.zeros((7, 4)))
    np.testing.assert_array_equal(acts, again)


def test_gaussian_action_noise_takes_the_action_spaces_shape_and_its_std():
    noise = GaussianActionNoise(0.2)
    with pytest.raises(RuntimeError, match="bind"):
        noise()
    noise.bind(gym.spaces.Box(-2.0, 2.0, (3,)))
    np.random.seed(0)
    draws = np.stack([noise() for _ in range(10_000)])
    assert draws.shape == (10_000, 3)
    np.testing.assert_allclose(draws.std(0), 0.2, rtol=0.03)
    np.testing.assert_allclose(draws.mean(0), 0.0, atol=0.01)
    with pytest.raises(ValueError, match="std"):
        GaussianActionNoise(-0.1)
