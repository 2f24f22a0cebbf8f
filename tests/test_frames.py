"""Stacked observations are stored as their frames, each once: in trajectories, fragment pairs and datasets."""


import numpy as np
import pytest
import torch

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import PreferenceDataset, TrajectoryRecorder, load_trajectories, save_trajectories
from rlhp.data.frames import frames_of, held_bytes
from rlhp.data.state import Arrays, Loader, Saver
from rlhp.envs import AtariEnv
from rlhp.human.schema import pair_to_blob, pairs_from_blobs
from rlhp.loop.fragmenters import RandomFragmenter

pytest.importorskip("ale_py")

PONG = {"id": "ALE/Pong-v5", "kwargs": {"frameskip": 1}}


def held_frames(array: np.ndarray) -> int:
    """How many 84x84 frames the memory under ``array`` holds (what keeps it alive, not what it shows)."""
    return held_bytes(array) // (84 * 84)


def episodes(steps: int, frame_stack: int = 4, n_envs: int = 1) -> list:
    """``n_envs`` random-policy Pong episodes of ``steps`` steps, recorded with ``frame_stack``."""
    env = AtariEnv(**PONG, max_episode_steps=steps, n_envs=n_envs)
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    return rollout(venv, random_policy(venv.action_space), steps, frame_stack=frame_stack)


@pytest.fixture(scope="module")
def long_episodes():
    """Two 1,000-step Pong episodes, stacks of 4 frames, numbered as a dataset's rows are."""
    got = episodes(1000, n_envs=2)
    for i, t in enumerate(got):
        t.episode = i
    return got


@pytest.fixture(scope="module")
def long_episode(long_episodes):
    """A 1,000-step Pong episode, stacks of 4 frames."""
    return long_episodes[0]


def test_a_1000_step_episode_holds_each_of_its_frames_once(long_episode, tmp_path):
    t = long_episode
    assert len(t) == 1000 and t.obs.shape == (1001, 4, 84, 84)
    # 1,001 observations (the last one is the final step's next observation) share 1,004 frames
    assert held_frames(t.obs) == 1004
    save_trajectories([t], tmp_path / "trajs")
    back = load_trajectories(tmp_path / "trajs")[0]
    assert held_frames(back.obs) == 1004
    np.testing.assert_array_equal(back.obs, t.obs)
    arrays = Arrays({})  # what a checkpoint holds
    tree = Saver(arrays)(t)
    assert 1004 * 84 * 84 <= sum(a.nbytes for a in arrays.small.values()) < 1005 * 84 * 84 + 100_000
    back = Loader(arrays)(tree)
    np.testing.assert_array_equal(back.obs, t.obs)
    assert held_frames(back.obs) == 1004


def test_a_25_step_fragment_holds_29_frames_and_not_its_episode(long_episodes, tmp_path):
    pairs = RandomFragmenter(np.random.default_rng(0))(long_episodes, 25, 3)
    assert pairs.obs.shape == (3, 2, 25, 4, 84, 84)
    assert held_frames(pairs.obs) == 3 * 2 * 29  # 25 observations and the next: 26 stacks of 4, 29 frames
    assert not any(np.shares_memory(pairs.frames, t.obs) for t in long_episodes)
    assert set(pairs.episode.ravel()) == {0, 1}
    for i, side in np.ndindex(3, 2):  # the right stacks, each step's and the next one's
        start, source = pairs.start[i, side], long_episodes[pairs.episode[i, side]]
        np.testing.assert_array_equal(pairs.obs[i, side], source.obs[start:start + 25])
        np.testing.assert_array_equal(pairs.next_obs[i, side], source.obs[start + 1:start + 26])
    dataset = PreferenceDataset()
    dataset.push(pairs, np.ones(3, np.float32), np.arange(3))
    dataset.save(tmp_path / "prefs")
    back = PreferenceDataset.load(tmp_path / "prefs").pairs
    assert held_frames(back.obs) == 3 * 2 * 29
    np.testing.assert_array_equal(back.obs, pairs.obs)
    blobs = pairs_from_blobs([pair_to_blob(pairs, i) for i in range(3)])  # what the labelling page stores
    assert blobs.frame_stack == 4
    np.testing.assert_array_equal(blobs.next_obs, pairs.next_obs)


def test_the_stacks_are_the_observations_the_env_gave():
    stacked, whole = episodes(300), episodes(300, frame_stack=1)  # the same seeds: the same episode
    assert held_frames(whole[0].obs) == 4 * 301 and held_frames(stacked[0].obs) == 304
    np.testing.assert_array_equal(stacked[0].obs, whole[0].obs)


def test_the_reward_nets_inputs_are_views_that_gather_only_what_is_indexed(long_episode):
    pairs = RandomFragmenter(np.random.default_rng(1))([long_episode], 25, 4)
    obs, _, next_obs, _ = pairs.tensors()
    assert obs.untyped_storage().nbytes() == pairs.frames.nbytes  # no stack copied
    np.testing.assert_array_equal(obs[[2, 0]].numpy(), pairs.obs[[2, 0]])
    np.testing.assert_array_equal(next_obs[1].numpy(), pairs.next_obs[1])
    assert torch.equal(obs[:, :, 1:], next_obs[:, :, :-1])


def test_observations_that_are_not_consecutive_stacks_are_refused():
    recorder = TrajectoryRecorder(1, frame_stack=2)
    step = np.zeros((1, 2, 3, 3), np.uint8)
    recorder.record(step, np.zeros(1), np.zeros(1), np.zeros(1, bool), [{}], step + 1)
    jumped = np.full((1, 2, 3, 3), 7, np.uint8)  # its older frame is not the last stack's newer one
    with pytest.raises(ValueError, match="not stacks of 2 consecutive frames"):
        recorder.record(jumped, np.zeros(1), np.zeros(1), np.zeros(1, bool), [{}], jumped)
    with pytest.raises(ValueError, match="not consecutive frame stacks"):
        frames_of(np.arange(12).reshape(3, 2, 2), axis=0)
