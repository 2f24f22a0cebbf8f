"""QPA's hybrid experience replay: a share of each batch from the newest transitions."""

import numpy as np
import pytest
from gymnasium import spaces

from rlhp.agents.hybrid_replay import HybridReplayBuffer
from rlhp.errors import ArgumentError

OBS, ACT = spaces.Box(-np.inf, np.inf, (1,), np.float32), spaces.Box(-1, 1, (1,), np.float32)


def filled(steps: int, size: int = 1000, **kwargs) -> HybridReplayBuffer:
    """A buffer holding ``steps`` transitions whose observation is the step's index."""
    buffer = HybridReplayBuffer(size, OBS, ACT, device="cpu", **kwargs)
    for t in range(steps):
        buffer.add(np.array([[t]]), np.array([[t + 1]]), np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    return buffer


@pytest.mark.parametrize("optimize", [False, True])
def test_a_share_of_each_batch_comes_from_the_newest_steps_and_the_rest_from_all(optimize):
    np.random.seed(0)
    buffer = filled(1500, recent_frac=0.25, recent_steps=100, optimize_memory_usage=optimize,
                    handle_timeout_termination=not optimize)  # wrapped: it holds steps 500-1499
    steps = buffer.sample(4000).observations[:, 0].numpy()
    newest, rest = steps[-1000:], steps[:-1000]
    assert newest.min() >= 1400 and newest.max() == 1499  # the last 100 steps
    assert rest.min() < 600 and rest.max() > 1400 and rest.min() >= 500  # the whole buffer, nothing overwritten
    assert abs(np.mean(rest >= 1000) - 0.5) < 0.05  # uniform over it
    # The memory-saving layout keeps the newest next observation in the oldest row's place: never drawn as a step.
    assert (steps <= 1499).all()


def test_before_the_window_fills_the_newest_steps_are_all_there_are():
    np.random.seed(1)
    steps = filled(30, recent_frac=1.0, recent_steps=100).sample(500).observations[:, 0].numpy()
    assert set(steps.tolist()) == set(range(30))


@pytest.mark.parametrize(("kwargs", "key"), [({"recent_frac": 1.5}, "recent_frac"),
                                             ({"recent_frac": -0.1}, "recent_frac"),
                                             ({"recent_steps": 0}, "recent_steps")])
def test_settings_outside_their_range_are_refused_by_their_key(kwargs, key):
    with pytest.raises(ArgumentError, match=f"agent.replay_buffer_kwargs.{key}"):
        HybridReplayBuffer(10, OBS, ACT, device="cpu", **kwargs)
