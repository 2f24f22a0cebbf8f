"""The fixed-horizon envs: episodes always run to the time limit, and their rewards say what happened."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from helpers import loaded_into

from rlhp.envs import (
    FIXED_HORIZON_CARTPOLE,
    FIXED_HORIZON_INVERTED_DOUBLE_PENDULUM,
    FIXED_HORIZON_MOUNTAIN_CAR,
    AtariEnv,
    GymEnv,
    MinAtarEnv,
)
from rlhp.envs.base import FIXED_HORIZON_ADVICE
from rlhp.errors import ArgumentError
from rlhp.human.clips import restorer


def run_episode(env: gym.Env, action) -> tuple[list[float], list[bool]]:
    env.reset(seed=0)
    rewards, terminated = [], []
    while True:
        _, reward, term, trunc, _ = env.step(action)
        rewards.append(reward)
        terminated.append(term)
        if term or trunc:
            return rewards, terminated


def test_cartpole_pays_only_while_upright_and_never_ends_early():
    rewards, terminated = run_episode(gym.make(FIXED_HORIZON_CARTPOLE), 0)  # always push left: it falls
    assert len(rewards) == 500 and not any(terminated)
    assert rewards[0] == 1.0 and rewards[-1] == 0.0 and set(rewards) == {0.0, 1.0}


def test_mountain_car_pays_its_bonus_every_step_at_the_goal_and_never_ends_early():
    env = gym.make(FIXED_HORIZON_MOUNTAIN_CAR)
    env.reset(seed=0)
    env.unwrapped.state = np.array([0.5, 0.02])  # past the goal, moving on
    _, reward, terminated, _, _ = env.step(np.array([0.0], np.float32))
    assert reward == 100.0 and not terminated
    rewards, terminated = run_episode(env, np.array([0.0], np.float32))
    assert len(rewards) == 999 and not any(terminated) and max(rewards) == 0.0  # idle: never reaches the goal
    assert restorer(env) is not None  # its clips can be drawn for people


def test_the_double_pendulum_swings_on_after_it_falls_paying_no_alive_bonus_while_down():
    pytest.importorskip("mujoco")
    push = np.array([1.0], np.float32)  # always push right: the poles fall within a few dozen steps
    own, ended = run_episode(gym.make("InvertedDoublePendulum-v5"), push)
    env = gym.make(FIXED_HORIZON_INVERTED_DOUBLE_PENDULUM)
    env.reset(seed=0)
    fixed, up = [], []
    for _ in range(1000):
        _, reward, terminated, truncated, _ = env.step(push)
        assert not terminated
        fixed.append(reward)
        up.append(env.unwrapped.data.site_xpos[0][2] > 1)  # the tip above the env's own limit
    assert truncated and ended[-1] and len(own) < 100  # the env's own episode ends when the poles fall
    assert fixed[:len(own)] == own  # the same physics and reward up to the fall, the fall's step included
    assert [r > 0 for r in fixed] == up and up.count(False) > 500  # the alive bonus only while the tip is up


def test_an_unrecorded_twin_records_nothing_and_leaves_the_run_s_env_recording():
    env = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=1)
    env.record_states()
    twin = env.unrecorded()
    assert env.recording and not twin.recording and (twin.id, twin.n_envs) == (env.id, env.n_envs)
    venv = twin.make(0)
    venv.reset()
    assert venv.get_attr("render_mode") == [None]  # a recording copy draws rgb_array pictures
    venv.close()


def test_an_env_that_can_keep_going_says_which_argument_makes_it():
    pytest.importorskip("mujoco")
    assert GymEnv("Hopper-v5", n_envs=1).fixed_horizon_remedy.startswith(
        "add +env.kwargs.terminate_when_unhealthy=false (Hopper-v5's episodes then run to the time limit)")
    # Given already, or not an argument of the env: the general advice.
    for env in (GymEnv("Hopper-v5", n_envs=1, kwargs={"terminate_when_unhealthy": False}),
                GymEnv("Pendulum-v1", n_envs=1)):
        assert env.fixed_horizon_remedy == FIXED_HORIZON_ADVICE


def test_a_game_continues_after_game_over_on_a_fixed_horizon():
    env = MinAtarEnv("Breakout", max_episode_steps=300)
    rewards, terminated = run_episode(env.make_single(), 0)  # never moving, the paddle loses ball after ball
    assert len(rewards) == 300 and not any(terminated)
    single = env.make_single()
    single.reset(seed=0)
    infos = [single.step(0)[-1] for _ in range(300)]
    assert sum(info.get("game_over", False) for info in infos) >= 2  # several games inside one episode


def test_a_game_keeps_its_own_episodes_when_asked_and_then_needs_no_horizon():
    env = MinAtarEnv("Breakout", max_episode_steps=None, continue_after_game_over=False)
    _, terminated = run_episode(env.make_single(), 0)
    assert terminated[-1]
    with pytest.raises(ArgumentError, match="max_episode_steps"):
        MinAtarEnv("Breakout", max_episode_steps=None)


def test_minatar_frames_are_channel_first_bytes():
    venv = MinAtarEnv("SpaceInvaders", n_envs=2).make(seed=0)
    obs = venv.reset()
    assert venv.observation_space == gym.spaces.Box(0, 1, (6, 10, 10), np.uint8)
    assert obs.shape == (2, 6, 10, 10) and obs.dtype == np.uint8 and obs.max() == 1


def test_atari_stacks_four_84_pixel_frames_that_shift_by_one_each_step():
    venv = AtariEnv("ALE/Pong-v5", n_envs=1, kwargs={"frameskip": 1}).make(seed=0)
    assert venv.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    previous = venv.reset()
    for _ in range(40):
        obs, *_ = venv.step(np.array([2]))
        np.testing.assert_array_equal(obs[0, :3], previous[0, 1:])  # the oldest frame drops out
        previous = obs
    assert obs[0, 3].std() > 0  # a picture, not a blank


def test_an_atari_copy_loaded_into_a_fresh_one_resumes_the_same_game():
    env = AtariEnv("ALE/Pong-v5", n_envs=2, kwargs={"frameskip": 1, "repeat_action_probability": 0.25})
    venv = env.make(0)
    venv.reset()
    for _ in range(30):
        venv.step(np.array([2, 3]))
    copy = loaded_into(venv, env.make(0))
    for step in range(30):
        acts = np.array([step % 6, (step + 1) % 6])
        np.testing.assert_array_equal(venv.step(acts)[0], copy.step(acts)[0])


@pytest.mark.parametrize(("make", "says"), [
    (lambda: MinAtarEnv("Pong"), "must be a MinAtar game"),
    (lambda: AtariEnv("ALE/Pong-v5"), "kwargs.frameskip"),
    (lambda: AtariEnv("ALE/Pong-v5", kwargs={"frameskip": 1}, frame_skip=0), "frame_skip"),
    (lambda: GymEnv("CartPole-v1", vectorize="threads"), "vectorize"),
])
def test_bad_env_options_are_refused_by_name(make, says):
    with pytest.raises(ArgumentError, match=says):
        make()


def test_subprocess_copies_step_as_the_in_process_ones_do():
    env = MinAtarEnv("Breakout", n_envs=2)
    here, there = env.make(seed=3), MinAtarEnv("Breakout", n_envs=2, vectorize="subproc").make(seed=3)
    try:
        np.testing.assert_array_equal(here.reset(), there.reset())
        for step in range(50):
            acts = np.array([step % 3, (step + 1) % 3])
            a, b = here.step(acts), there.step(acts)
            np.testing.assert_array_equal(a[0], b[0]), np.testing.assert_array_equal(a[1], b[1])
    finally:
        there.close()
