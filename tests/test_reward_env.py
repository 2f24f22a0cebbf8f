"""The agent sees the learned reward, computed on the right transition; the record keeps the true one."""


import numpy as np
from gymnasium.wrappers import TimeLimit
from helpers import Counter, loaded_into
from stable_baselines3.common.vec_env import DummyVecEnv

from rlhp.agents import RewardVecEnvWrapper
from rlhp.data import TrajectoryRecorder


class StubNet:
    """Records what it is asked to score; its reward encodes next obs, action and termination."""

    def __init__(self) -> None:
        self.calls = []

    reads_env_reward = False

    def agent_reward(self, obs, acts, next_obs, dones, env_rewards):
        self.calls.append((obs.copy(), np.array(acts), next_obs.copy(), dones.copy()))
        return 1000.0 * dones + 10.0 * next_obs[:, 0] + acts


def test_the_agent_gets_the_learned_reward_and_the_recorder_the_true_one():
    # Copy 0 terminates after 2 steps; copy 1 is truncated by a time limit after 3.
    venv = DummyVecEnv([lambda: Counter(terminate_at=2), lambda: TimeLimit(Counter(), max_episode_steps=3)])
    net, recorder = StubNet(), TrajectoryRecorder(2)
    env = RewardVecEnvWrapper(venv, net, recorder)
    obs = env.reset()
    np.testing.assert_array_equal(obs[:, 0], [0, 0])
    rewards = []
    for acts in ([1, 2], [3, 4], [0, 1]):
        env.step_async(np.array(acts))
        obs, rews, dones, infos = env.step_wait()
        rewards.append(rews)
    # Step 2: copy 0 terminated at obs 2 (reset to 100); step 3: copy 1 truncated at obs 3 (reset to 100).
    seen_obs, seen_acts, seen_next, seen_dones = (np.stack(x) for x in zip(*net.calls))
    np.testing.assert_array_equal(seen_obs[..., 0], [[0, 0], [1, 1], [100, 2]])
    np.testing.assert_array_equal(seen_acts, [[1, 2], [3, 4], [0, 1]])
    np.testing.assert_array_equal(seen_next[..., 0], [[1, 1], [2, 2], [101, 3]])  # the last obs, not the reset one
    np.testing.assert_array_equal(seen_dones, [[False, False], [True, False], [False, False]])  # truncation is no end
    np.testing.assert_array_equal(np.stack(rewards), [[11, 12], [1023, 24], [1010, 31]])
    assert np.stack(rewards).dtype == np.float32
    first, second = recorder.finished
    np.testing.assert_array_equal(first.obs[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(first.rews, [0.5, 1.0])  # true rewards
    assert first.terminal and not second.terminal
    np.testing.assert_array_equal(second.obs[:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(second.acts, [2, 4, 1])
    np.testing.assert_array_equal(second.rews, [0.5, 1.0, 1.5])


def test_a_loaded_wrapper_still_reaches_the_attributes_of_the_env_inside():
    env = RewardVecEnvWrapper(DummyVecEnv([Counter, Counter]), StubNet(), TrajectoryRecorder(2))
    env.reset()
    copy = loaded_into(env, RewardVecEnvWrapper(DummyVecEnv([Counter, Counter]), StubNet(), TrajectoryRecorder(2)))
    assert len(copy.envs) == 2  # found through SB3's wrapper lookup, which reads the class's members
    copy.step_async(np.array([1, 1]))
    assert copy.step_wait()[0].shape[0] == 2
