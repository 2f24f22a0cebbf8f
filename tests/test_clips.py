"""What people see: each env's fragments drawn as frames, chosen by what its observations are."""

import gc
import sqlite3
import subprocess
import sys
import time
import weakref

import gymnasium as gym
import imageio
import numpy as np
import pytest
from helpers import NO_PICTURES, loaded_into, saved_state

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import FragmentPairs
from rlhp.data.state import Arrays, Saver
from rlhp.envs import FIXED_HORIZON_CARTPOLE, AtariEnv, GymEnv, MinAtarEnv
from rlhp.envs.states import shrunk_screen
from rlhp.errors import ArgumentError, ConfigError
from rlhp.human.clips import (
    ClipRenderer,
    GameFrames,
    NewestFrames,
    PaletteFrames,
    PhysicsFrames,
    RestoredFrames,
    ScreenFrames,
    drawer,
    without_shadows,
)
from rlhp.human.prefetch import ClipPrefetcher, DrawOnPublish
from rlhp.human.querent import WebQuerent
from rlhp.human.server.answers import AnswerStore
from rlhp.human.store import QueryStore
from rlhp.loop.fragmenters import RandomFragmenter


def test_a_minatar_cell_shows_the_colour_of_its_highest_lit_channel():
    palette = PaletteFrames(channels=4, cell=32)
    obs = np.zeros((2, 4, 10, 10), np.uint8)
    obs[0, 1, 3, 4] = 1  # one object alone
    obs[0, 0, 7, 2] = obs[0, 2, 7, 2] = 1  # two objects in one cell: the later channel is drawn
    frames = palette.frames(obs, np.zeros(2, np.int64), np.zeros((4, 10, 10), np.uint8), np.zeros((3, 0)))
    assert frames.shape == (3, 320, 320, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames[0, 3 * 32:4 * 32, 4 * 32:5 * 32], np.broadcast_to(palette.colours[2],
                                                                                          (32, 32, 3)))
    np.testing.assert_array_equal(frames[0, 7 * 32 + 5, 2 * 32 + 5], palette.colours[3])
    assert (frames[0, :32, :32] == 0).all() and (frames[1:] == 0).all()  # empty cells are black
    assert len({tuple(c) for c in palette.colours}) == 5  # the background and a colour per channel


def test_minatar_clips_have_the_colours_minatar_renders_itself():
    import gymnasium as gym
    import minatar.gym

    minatar.gym.register_envs()
    env = gym.make("MinAtar/Breakout-v1", render_mode="rgb_array")
    env.reset(seed=3)
    for _ in range(5):
        env.step(1)
    state = env.unwrapped.game.state()  # (10, 10, channels)
    ours = PaletteFrames(channels=state.shape[-1], cell=2).frames(state.transpose(2, 0, 1)[None], np.zeros(1),
                                                                   state.transpose(2, 0, 1), np.zeros((2, 0)))
    np.testing.assert_allclose(ours[0, ::2, ::2] / 255, env.unwrapped.render(), atol=0.5 / 255)


def test_an_image_observation_shows_its_newest_frame_scaled():
    obs = np.zeros((3, 4, 84, 84), np.uint8)
    obs[:, -1, 10, 20] = 200  # only the newest frame of each stack has the dot
    obs[:, 0] = 99
    frames = NewestFrames(fps=15.0, scale=4).frames(obs, np.zeros(3), obs[-1], np.zeros((4, 0)))
    assert frames.shape == (4, 336, 336, 3)
    assert (frames[:, 40:44, 80:84] == 200).all() and (frames[:, :40] == 0).all()


class GreyStacks(gym.Env):
    """Stacks of four 8x8 grey frames, channel first, with a dot that moves down a row a step; draws nothing."""

    observation_space = gym.spaces.Box(0, 255, (4, 8, 8), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode, self.t = render_mode, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return self.obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self.obs(), 0.0, False, False, {}

    def obs(self) -> np.ndarray:
        stack = np.zeros((4, 8, 8), np.uint8)
        stack[-1, self.t % 8, 0] = 255
        return stack


class ShownGreyStacks(GreyStacks):
    """The same, drawing its screen (channels last, as gymnasium's image envs observe), at no rate it names."""

    metadata = {"render_modes": ["rgb_array"]}

    def render(self) -> np.ndarray:
        return np.repeat(self.obs()[-1][..., None], 3, axis=-1)


gym.register("rlhp-test/GreyStacks-v0", entry_point=GreyStacks, max_episode_steps=20)
gym.register("rlhp-test/ShownGreyStacks-v0", entry_point=ShownGreyStacks, max_episode_steps=20)


@pytest.mark.filterwarnings("ignore:.*No render fps was declared:UserWarning")  # the case under test
def test_images_are_drawn_from_the_env_s_screens_where_it_has_them_else_as_their_newest_frame():
    shown = drawer(GymEnv("rlhp-test/ShownGreyStacks-v0", n_envs=1), width=320)
    assert type(shown) is ScreenFrames and shown.fps == 30  # where the env names no frame rate
    with pytest.raises(ValueError, match="^these fragments carry no screens: the env did not record them$"):
        shown.frames(np.zeros((2, 4, 8, 8)), np.zeros(2), np.zeros((4, 8, 8)), np.zeros((3, 0)))
    newest = drawer(GymEnv("rlhp-test/GreyStacks-v0", n_envs=1), width=330)
    assert type(newest) is NewestFrames and newest.fps == 15 and newest.scale == 42  # whole pixels, >= 330 wide
    obs = np.stack([GreyStacks().obs()] * 2)
    assert newest.frames(obs, np.zeros(2), obs[-1], np.zeros((3, 0))).shape == (3, 336, 336, 3)


@pytest.mark.parametrize(("env", "kind", "asked", "width"), [
    (lambda: MinAtarEnv("Breakout"), PaletteFrames, 320, 320),
    (lambda: MinAtarEnv("Breakout"), PaletteFrames, 325, 330),  # whole pixels a cell, at least as wide
    (lambda: GymEnv(FIXED_HORIZON_CARTPOLE), RestoredFrames, 320, 600),
])
def test_each_env_is_drawn_by_what_its_observations_are(env, kind, asked, width):
    env = env()
    draw = drawer(env, width=asked)
    assert type(draw) is kind
    if kind is PaletteFrames:  # black and a colour for each of Breakout's 4 channels
        assert draw.colours.shape == (5, 3)
    venv = env.make(seed=0, n_envs=1)
    obs = np.stack([venv.reset()[0], venv.step(np.array([1]))[0][0]])
    frames = draw.frames(obs, np.array([1, 1]), obs[-1], np.zeros((3, 0)))
    assert frames.shape[0] == 3 and frames.shape[2] == width and frames.dtype == np.uint8
    assert frames.std() > 0  # a picture


@pytest.mark.parametrize("env_id", ["Acrobot-v1", "MountainCar-v0", "CartPole-v1"])
def test_a_classic_control_fragment_is_drawn_as_the_env_showed_it_live(env_id):
    import gymnasium as gym

    live = gym.make(env_id, render_mode="rgb_array").unwrapped
    obs, shown, acts = [live.reset(seed=1)[0]], [live.render()], []
    for t in range(6):
        acts.append(t % 2)
        obs.append(live.step(acts[-1])[0])
        shown.append(live.render())
    frames = drawer(GymEnv(env_id), width=320).frames(np.stack(obs[:-1]), np.array(acts), obs[-1], np.zeros((7, 0)))
    np.testing.assert_array_equal(frames, np.stack(shown))


def test_a_pendulum_swinging_under_a_steady_torque_is_drawn_as_the_env_showed_it_live():
    import gymnasium as gym

    live = gym.make("Pendulum-v1", render_mode="rgb_array").unwrapped
    torque = np.array([0.7], np.float32)  # the same every step: the live arrow (the torque just applied) agrees
    obs, shown = [live.reset(seed=1)[0]], [live.render()]
    for _ in range(6):
        obs.append(live.step(torque)[0])
        shown.append(live.render())
    frames = drawer(GymEnv("Pendulum-v1"), width=320).frames(np.stack(obs[:-1]), np.stack([torque] * 6), obs[-1],
                                                             np.zeros((7, 0)))
    np.testing.assert_array_equal(frames[1:], np.stack(shown[1:]))  # the first live frame has no torque yet
    assert (frames[1] != frames[-1]).any()  # it swings


def test_a_pendulum_frame_draws_the_torque_about_to_be_applied_and_the_last_frame_the_last_one():
    draw = drawer(GymEnv("Pendulum-v1"), width=320)
    assert type(draw) is RestoredFrames and draw.fps == 30  # Pendulum's own render_fps
    obs = np.array([[1.0, 0.0, 0.0]] * 3, np.float32)  # upright, three times
    frames = draw.frames(obs, np.array([[2.0], [-2.0], [1.0]], np.float32), obs[-1], np.zeros((4, 0)))
    assert all((frames[i] != frames[j]).any() for i, j in ((0, 1), (1, 2), (0, 2)))  # the arrows differ
    np.testing.assert_array_equal(frames[3], frames[2])  # the last observation shows the last torque again
    assert drawer(GymEnv(FIXED_HORIZON_CARTPOLE), width=320).fps == 50


def test_an_env_that_cannot_be_drawn_is_refused_by_its_id():
    with pytest.raises(ConfigError, match="^config key `env.id` rlhp-test/NoPictures-v0 draws no rgb_array pictures"
                       ) as refused:
        drawer(GymEnv(NO_PICTURES), width=320)
    # It says which envs people can label: those drawn again from their observations, by name.
    assert "AcrobotEnv, CartPoleEnv, Continuous_MountainCarEnv, MountainCarEnv, PendulumEnv, on MuJoCo envs" in \
        str(refused.value)


def test_any_other_env_that_renders_shows_the_screens_it_recorded_while_sampling():
    env = GymEnv("FrozenLake-v1", n_envs=1, max_episode_steps=8, kwargs={"is_slippery": False})
    draw = drawer(env, width=320)
    assert type(draw) is ScreenFrames and draw.needs_states and draw.fps == 4  # FrozenLake's own render_fps
    env.record_states()
    venv = env.make(seed=3)
    path = iter([1, 1, 2, 1, 2, 2])  # down, down, right, down, right, right: to the goal, moving every step
    episode = rollout(venv, lambda obs: np.array([next(path)]), episodes=1)[0]
    assert episode.states.dtype == np.uint8 and episode.states.shape == (7, 256 * 256 * 3)
    live = gym.make("FrozenLake-v1", render_mode="rgb_array", is_slippery=False)
    live.reset(seed=3)
    shown = [live.render()]
    for act in episode.acts:
        live.step(act)
        shown.append(live.render())
    np.testing.assert_array_equal(draw.frames(episode.obs[:-1], episode.acts, episode.obs[-1], episode.states),
                                  np.stack(shown))
    with pytest.raises(ValueError, match="carry no screens"):
        draw.frames(episode.obs[:-1], episode.acts, episode.obs[-1], np.zeros((7, 0)))


def test_a_wide_screen_is_kept_at_most_320_pixels_wide_by_whole_strides():
    frame = np.arange(400 * 600 * 3, dtype=np.int64).reshape(400, 600, 3).astype(np.uint8)
    np.testing.assert_array_equal(shrunk_screen(frame), frame[::2, ::2])
    assert shrunk_screen(frame[:, :320]).shape == (400, 320, 3) and shrunk_screen(frame[:, :321]).shape[1] == 161


def hopper_episode(steps: int):
    """A recorded Hopper episode of random actions, and the env that made it."""
    pytest.importorskip("mujoco")
    env = GymEnv("Hopper-v5", n_envs=1, max_episode_steps=steps, kwargs={"terminate_when_unhealthy": False})
    env.record_states()
    venv = env.make(seed=3)
    venv.action_space.seed(0)
    return env, rollout(venv, random_policy(venv.action_space), episodes=1)[0]


def assert_same_pictures(drawn: np.ndarray, shown: np.ndarray) -> None:
    """The same frames, up to a few edge pixels: a state set and forwarded rasterises a hair off one stepped
    into (about 1 value in 60,000 differs here; a frame one step off differs in thousands)."""
    assert drawn.shape == shown.shape
    assert (drawn != shown).mean() < 1e-4, (drawn != shown).mean()


def test_a_mujoco_fragment_is_drawn_from_its_recorded_physics_exactly_as_the_env_showed_it_live():
    env, episode = hopper_episode(12)
    assert episode.states.shape == (13, 12) and not any("recorded_state" in info for info in episode.infos)
    live = env.make_single(render_mode="rgb_array", width=160, height=120)
    without_shadows(live)  # as clips are drawn
    live.reset(seed=3)  # the vec env's only copy got the run's seed
    shown = [live.render()]
    for act in episode.acts:
        live.step(act)
        shown.append(live.render())
    draw = drawer(env, width=160, fps=125)  # Hopper's own rate: every step
    assert type(draw) is PhysicsFrames and draw.needs_states and draw.stride == 1
    model = draw.env.unwrapped.model  # Hopper has a shadow-casting light and a reflecting floor
    assert not model.light_castshadow.any() and (model.mat_reflectance == 0).all()
    drawn = draw.frames(episode.obs[:-1], episode.acts, episode.obs[-1], episode.states)
    assert_same_pictures(drawn, np.stack(shown))
    unrecorded = GymEnv("Hopper-v5", n_envs=1, kwargs={"terminate_when_unhealthy": False})  # a copy of its own
    np.testing.assert_array_equal(drawer(unrecorded, width=160, fps=125).frames(
        episode.obs[:-1], episode.acts, episode.obs[-1], episode.states), drawn)
    assert (drawn[0] != drawn[-1]).mean() > 1e-3  # it moves: far more differs than the tolerance allows
    slow = drawer(env, width=160)  # a person needs 25 frames a second: every 5th of Hopper's 125, and the last
    assert slow.stride == 5 and slow.fps == 25
    assert_same_pictures(slow.frames(episode.obs[:-1], episode.acts, episode.obs[-1], episode.states),
                         np.stack(shown)[[0, 5, 10, 12]])
    # A dataset's fragments carry no states: Hopper's observation is its state but for its x position, and they
    # are drawn so, at x = 0 (the camera follows the body as it does live).
    at_origin = episode.states.copy()
    at_origin[:, 0] = 0.0
    np.testing.assert_array_equal(
        slow.frames(episode.obs[:-1], episode.acts, episode.obs[-1], np.zeros((13, 0))),
        slow.frames(episode.obs[:-1], episode.acts, episode.obs[-1], at_origin))


def test_a_mujoco_fragment_with_no_states_whose_observations_do_not_hold_them_is_refused():
    pytest.importorskip("mujoco")
    env = GymEnv("Reacher-v5", n_envs=1)  # its observation holds angles' cosines and sines, and the target's offset
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    episode = rollout(venv, random_policy(venv.action_space), steps=5)[0]
    with pytest.raises(ValueError, match="carry no physics states, and the env's observations do not hold them"):
        drawer(env, width=160).frames(episode.obs[:-1], episode.acts, episode.obs[-1], np.zeros((len(episode) + 1, 0)))


def test_an_atari_fragment_is_replayed_in_the_colours_the_game_showed_live():
    env = AtariEnv("ALE/Pong-v5", n_envs=1, max_episode_steps=40, kwargs={"frameskip": 1})
    env.record_states()
    venv = env.make(seed=3)
    venv.action_space.seed(0)
    episode = rollout(venv, random_policy(venv.action_space), episodes=1)[0]
    assert episode.states.dtype == np.uint8 and episode.states.shape[0] == 41
    live = env.make_single(render_mode="rgb_array")
    live.reset(seed=3)  # the vec env's only copy got the run's seed
    shown = []
    for act in episode.acts:
        live.step(act)
        shown.append(live.render())
    draw = drawer(env, width=320)
    assert type(draw) is GameFrames and draw.needs_states and draw.fps == 15  # 60 Hz, a step every 4 frames
    drawn = draw.frames(episode.obs[:-1], episode.acts, episode.obs[-1], episode.states)
    assert drawn.shape == (40, 210, 160, 3)
    np.testing.assert_array_equal(drawn, np.stack(shown))
    assert (drawn[1:] != drawn[:-1]).any(axis=(1, 2, 3)).mean() > 0.5  # a frame one step off would not pass
    with pytest.raises(ValueError, match="^these fragments carry no emulator states: the env did not record them$"):
        draw.frames(episode.obs[:-1], episode.acts, episode.obs[-1], np.zeros((41, 0)))


def test_people_labelling_atari_get_its_colour_screens_and_the_labels_keep_no_emulator_states(tmp_path):
    from helpers import composed

    from rlhp.data import PreferenceDataset
    from rlhp.experiment.compose import compose
    loop = compose(composed("train", ["env=atari", "gatherer=human", "debug=fast"]), tmp_path)
    assert loop.reward_learning.querent.needs_states and loop.source.env.recording
    assert type(loop.reward_learning.querent.renderer.drawer) is GameFrames
    dataset = PreferenceDataset()
    pairs = FragmentPairs(frames=np.zeros((1, 2, 6, 84, 84), np.uint8), acts=np.zeros((1, 2, 3), np.int64),
                          dones=np.zeros((1, 2, 3), bool), rews=np.zeros((1, 2, 3), np.float32),
                          episode=np.zeros((1, 2), np.int64), start=np.zeros((1, 2), np.int64),
                          quality=np.zeros((1, 2)), frame_stack=3, states=np.ones((1, 2, 4, 100), np.uint8))
    dataset.push(pairs, np.array([1.0], np.float32), np.array([0]))
    assert dataset.pairs.states.shape == (1, 2, 4, 0)  # clips are drawn from the query's own copy


def test_fragments_carry_the_physics_states_of_their_steps_and_the_one_after(tmp_path):
    env, episode = hopper_episode(40)
    pairs = RandomFragmenter(np.random.default_rng(0))([episode], 10, 3)
    assert pairs.states.shape == (3, 2, 11, 12)
    for i, side in np.ndindex(3, 2):
        start = pairs.start[i, side]
        np.testing.assert_array_equal(pairs.states[i, side], episode.states[start:start + 11])
        np.testing.assert_array_equal(pairs.frames[i, side], episode.obs[start:start + 11])
    again = FragmentPairs.from_columns(pairs.columns())
    np.testing.assert_array_equal(again.states, pairs.states)
    plain = FragmentPairs.from_columns({k: v for k, v in pairs.columns().items() if k != "states"})
    assert plain.states.shape == (3, 2, 11, 0) and "states" not in plain.columns()
    querent = WebQuerent(env, tmp_path, width=160, prefetch=2)  # states kept with the query, drawn lazily
    assert querent.needs_states
    ids = querent(pairs)
    np.testing.assert_array_equal(querent.store.pairs(ids).states, pairs.states)
    drawn = wait_until_drawn(querent.store, 2)
    assert drawn == [2, 1]  # the newest first, two ahead of people; the oldest waits
    assert all((tmp_path / "media" / f"q{q:06d}-{side}.mp4").stat().st_size > 1000 for q in drawn
               for side in ("left", "right"))
    assert not (tmp_path / "media" / "q000000-left.mp4").exists()
    desk = AnswerStore(querent.store.path)
    assert desk.lease_next("alice", 60).id == 2
    assert desk.lease_next("alice", 60).id == 1  # one waiting: the next is drawn
    assert desk.lease_next("alice", 60) is None  # not before it is drawn
    assert wait_until_drawn(querent.store, 3) == [2, 1, 0] and desk.lease_next("alice", 60).id == 0
    assert querent.drawing.running
    querent.drawing.stop()
    assert not querent.drawing.running
    fresh = WebQuerent(env, tmp_path / "again", width=160, prefetch=2)
    drawing = fresh.drawing
    again = loaded_into(querent, fresh)  # a checkpoint: the thread is this process's, not saved
    assert again.drawing is drawing and again.next_id == querent.next_id == 3  # its own, not the saved one


def cartpole_pairs(n: int) -> tuple[GymEnv, FragmentPairs]:
    """CartPole and ``n`` random pairs of 5-step fragments from two of its episodes."""
    env = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=1)
    venv = env.make(seed=0)
    episodes = rollout(venv, random_policy(venv.action_space), episodes=2)
    return env, RandomFragmenter(np.random.default_rng(0))(episodes, 5, n)


def test_a_cheap_drawer_draws_each_query_as_it_is_published(tmp_path):
    env, pairs = cartpole_pairs(2)
    querent = WebQuerent(env, tmp_path, width=160)
    assert isinstance(querent.drawing, DrawOnPublish) and not querent.needs_states
    ids = querent(pairs)
    with sqlite3.connect(querent.run.queries_db) as db:  # queries asked with no round named are round 0's
        assert db.execute("SELECT DISTINCT round FROM queries").fetchall() == [(0,)]
    with sqlite3.connect(querent.store.path) as db:  # every one drawn before anyone could lease it
        assert sorted(r[0] for r in db.execute("SELECT id FROM queries WHERE drawn = 1")) == ids.tolist()
    for q in ids:
        for side in ("left", "right"):
            clip = imageio.v3.imread(tmp_path / "media" / f"q{q:06d}-{side}.mp4")
            assert clip.shape == (6, 106, 160, 3)  # 5 steps and the last observation, 160 px wide


def test_a_querent_resumed_from_an_older_checkpoint_never_reuses_the_ids_published_since(tmp_path):
    env, pairs = cartpole_pairs(3)
    querent = WebQuerent(env, tmp_path, width=160)
    checkpoint = saved_state(querent)  # saved before any query; the run goes on and publishes three
    assert querent(pairs).tolist() == [0, 1, 2]
    resumed = checkpoint(WebQuerent(env, tmp_path, width=160))  # the store kept the three published since
    assert resumed(pairs[:2]).tolist() == [3, 4]


def test_a_process_that_ends_without_stopping_its_clip_drawing_still_exits(tmp_path):
    # The drawing thread waits for queries for ever: the interpreter must not wait for it at exit.
    code = ("from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv\n"
            "from rlhp.human.clips import ClipRenderer\n"
            "from rlhp.human.prefetch import ClipPrefetcher\n"
            "from rlhp.human.store import QueryStore\n"
            f"ClipPrefetcher(QueryStore({str(tmp_path / 'queries.sqlite')!r}), "
            f"ClipRenderer(GymEnv(FIXED_HORIZON_CARTPOLE)), {str(tmp_path)!r}, 2).start()\n")
    subprocess.run([sys.executable, "-c", code], timeout=60, check=True)


def test_a_process_that_drew_mujoco_clips_ends_without_a_traceback():
    # MuJoCo's EGL display ends at exit; a renderer freed after it printed "Exception ignored ... EGLError".
    code = ("import numpy as np\n"
            "from rlhp.envs import GymEnv\n"
            "from rlhp.human.clips import drawer\n"
            "env = GymEnv('Hopper-v5', n_envs=1)\n"
            "draw = drawer(env, width=64, fps=125)\n"
            "state = np.zeros(12)\n"
            "print(draw.frames(np.zeros((1, 11)), np.zeros((1, 3)), np.zeros(11), np.stack([state, state])).shape)\n")
    done = subprocess.run([sys.executable, "-c", code], timeout=120, check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "(2, 48, 64, 3)" and done.stderr == ""


def test_a_stopped_clip_drawing_is_not_kept_until_the_process_ends(tmp_path):
    drawing = ClipPrefetcher(QueryStore(tmp_path / "queries.sqlite"), ClipRenderer(GymEnv(FIXED_HORIZON_CARTPOLE)),
                             tmp_path, 2)
    drawing.start()
    assert drawing.running
    drawing.stop()
    left = weakref.ref(drawing)
    del drawing
    gc.collect()
    assert left() is None  # its exit hook went with it: the renderer's env is freed now, not at exit


def test_a_querent_refuses_bad_values_by_name_and_keeps_its_drawing_through_a_checkpoint(tmp_path):
    env = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=1)
    for key, bad in (("labels_per_query", 0), ("width", 15), ("width", 17), ("width", 14), ("prefetch", 0),
                     ("gold_rate", 1.5), ("gold_labels", 0)):
        with pytest.raises(ArgumentError) as refused:
            WebQuerent(env, tmp_path, **{key: bad})
        assert refused.value.argument == key and f"got {bad}" in refused.value.problem
    plain = WebQuerent(env, tmp_path, labels_per_query=1, width=16)  # the smallest allowed
    assert plain.renderer.width == 16 and plain.instructions == "" and plain.prefetch == 6
    assert WebQuerent(env, tmp_path, prefetch=1).prefetch == 1  # one clip ahead is the least
    assert WebQuerent(env, tmp_path).renderer.width == 320  # the documented default
    saved = Saver(Arrays({}))(WebQuerent(env, tmp_path))["state"]
    assert "renderer" not in saved  # a live env: the config builds it again


def test_a_clip_that_cannot_be_drawn_stops_the_drawing_and_says_so_on_the_console(tmp_path, caplog):
    env, pairs = cartpole_pairs(1)
    store = QueryStore(tmp_path / "queries.sqlite")
    store.publish(np.array([7]), 0, [("q7-left.mp4", "q7-right.mp4")], pairs, 1, "", drawn=False)
    renderer = ClipRenderer(env)

    def broken(*args) -> None:
        raise RuntimeError("no GPU context")

    renderer.write = broken
    drawing = ClipPrefetcher(store, renderer, tmp_path, 2)
    with caplog.at_level("ERROR", logger="rlhp.human.prefetch"):
        drawing.start()
        deadline = time.monotonic() + 10
        while drawing.running and time.monotonic() < deadline:  # the thread ends by itself
            time.sleep(0.01)
    assert not drawing.running and wait_until_drawn(store, 1, timeout_s=0) == []
    [record] = caplog.records
    assert record.getMessage() == "drawing query 7's clips failed; no more clips are drawn"
    assert getattr(record, "console", False) and "no GPU context" in caplog.text  # the cause, with its traceback


def wait_until_drawn(store, n: int, timeout_s: float = 60) -> list[int]:
    """The ids of the drawn queries, newest first, once there are ``n``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with sqlite3.connect(store.path) as db:
            drawn = [r[0] for r in db.execute("SELECT id FROM queries WHERE drawn = 1 ORDER BY id DESC")]
        if len(drawn) >= n or time.monotonic() > deadline:
            return drawn
        time.sleep(0.05)


def test_people_teaching_a_backflip_get_mujoco_clips_and_the_task_s_instructions(tmp_path):
    pytest.importorskip("mujoco")
    from helpers import composed

    from rlhp.envs.tasks import BACKFLIP
    from rlhp.experiment.compose import compose
    loop = compose(composed("train", ["experiment=backflip", "gatherer=human", "debug=fast", "fragment_length=10"]),
                   tmp_path)
    querent = loop.reward_learning.querent
    assert querent.needs_states and loop.source.env.recording  # recorded from the first sampled step
    assert querent.instructions == BACKFLIP
    plain = compose(composed("train", ["env=gym", "env.id=Hopper-v5", "agent=sac", "debug=fast"]), tmp_path / "b")
    assert not plain.source.env.recording  # nobody looks: nothing recorded


def test_a_renderer_writes_every_clip_ending_on_its_fragment_s_last_observation_at_its_frame_rate(tmp_path):
    env, pairs = cartpole_pairs(5)  # 10 clips: more than the 8 that wait for its 4 encoders at once
    renderer = ClipRenderer(env, width=160, fps=20)
    assert (ClipRenderer(env).width, ClipRenderer(env).workers) == (320, 4)  # the documented defaults
    ends = []
    draw = renderer.drawer.frames
    renderer.drawer.frames = lambda obs, acts, last_obs, states: ends.append(last_obs) or draw(obs, acts, last_obs,
                                                                                              states)
    names = [(f"{i}-left.mp4", f"{i}-right.mp4") for i in range(5)]
    renderer.write(pairs, names, tmp_path / "run" / "media")  # folders made as needed
    np.testing.assert_array_equal(np.stack(ends), pairs.next_obs[:, :, -1].reshape(10, -1))
    for name in (n for pair in names for n in pair):
        clip = tmp_path / "run" / "media" / name
        assert imageio.v3.immeta(clip)["fps"] == 20 and len(imageio.v3.imread(clip)) == 6  # 5 steps and the last


def test_where_clips_are_drawn_from_recorded_states_their_drawer_sets_the_frame_rate():
    env, _ = hopper_episode(2)
    assert ClipRenderer(env, width=160, fps=125).drawer.stride == 1  # every step: Hopper's own 125 a second
    slow = ClipRenderer(env, width=160, fps=10)  # every 12th step of 125 a second: 10.4, not the 10 asked for
    assert slow.drawer.stride == 12 and slow.fps == slow.drawer.fps == 125 / 12
