"""What people see: each env's fragments drawn as frames, chosen by what its observations are."""

import numpy as np
import pytest

from rlhp.envs import FIXED_HORIZON_CARTPOLE, AtariEnv, GymEnv, MinAtarEnv
from rlhp.errors import ConfigError
from rlhp.feedback.clips import NewestFrames, PaletteFrames, RestoredFrames, drawer


def test_a_minatar_cell_shows_the_colour_of_its_highest_lit_channel():
    palette = PaletteFrames(channels=4, cell=32)
    obs = np.zeros((2, 4, 10, 10), np.uint8)
    obs[0, 1, 3, 4] = 1  # one object alone
    obs[0, 0, 7, 2] = obs[0, 2, 7, 2] = 1  # two objects in one cell: the later channel is drawn
    frames = palette.frames(obs, np.zeros(2, np.int64), np.zeros((4, 10, 10), np.uint8))
    assert frames.shape == (3, 320, 320, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames[0, 3 * 32:4 * 32, 4 * 32:5 * 32], np.broadcast_to(palette.colours[2],
                                                                                          (32, 32, 3)))
    np.testing.assert_array_equal(frames[0, 7 * 32 + 5, 2 * 32 + 5], palette.colours[3])
    assert (frames[0, :32, :32] == 0).all() and (frames[1:] == 0).all()  # empty cells are black
    assert len({tuple(c) for c in palette.colours}) == 5  # the background and a colour per channel


def test_an_image_observation_shows_its_newest_frame_scaled():
    obs = np.zeros((3, 4, 84, 84), np.uint8)
    obs[:, -1, 10, 20] = 200  # only the newest frame of each stack has the dot
    obs[:, 0] = 99
    frames = NewestFrames(fps=15.0, scale=4).frames(obs, np.zeros(3), obs[-1])
    assert frames.shape == (4, 336, 336, 3)
    assert (frames[:, 40:44, 80:84] == 200).all() and (frames[:, :40] == 0).all()


@pytest.mark.parametrize(("env", "kind", "width"), [
    (lambda: MinAtarEnv("Breakout"), PaletteFrames, 320),
    (lambda: AtariEnv("ALE/Pong-v5", kwargs={"frameskip": 1}), NewestFrames, 336),
    (lambda: GymEnv(FIXED_HORIZON_CARTPOLE), RestoredFrames, 600),
])
def test_each_env_is_drawn_by_what_its_observations_are(env, kind, width):
    env = env()
    draw = drawer(env, width=320)
    assert type(draw) is kind
    venv = env.make(seed=0, n_envs=1)
    obs = np.stack([venv.reset()[0], venv.step(np.array([1]))[0][0]])
    frames = draw.frames(obs, np.array([1, 1]), obs[-1])
    assert frames.shape[0] == 3 and frames.shape[2] == width and frames.dtype == np.uint8
    assert frames.std() > 0  # a picture


def test_an_env_that_cannot_be_drawn_is_refused_by_its_id():
    with pytest.raises(ConfigError, match="env.id.*neither give its whole state nor are images"):
        drawer(GymEnv("FrozenLake-v1"), width=320)
