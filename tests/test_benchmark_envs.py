"""The field's benchmark envs: DeepMind Control's tasks flattened in a fixed key order, drawn again from their
physics states; Meta-World's tasks with goals drawn each reset and each episode's success; both end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rlhp.data import Trajectory
from rlhp.data.trajectory import SUCCESS, successes
from rlhp.envs import DmcEnv, MetaWorldEnv
from rlhp.envs.metaworld import EpisodeSuccess
from rlhp.errors import ArgumentError
from rlhp.runs import RunFolder


class Scripted(gym.Env):
    """Reports ``info["success"]`` from a script of steps; the episode ends after the script."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, script: list[bool]) -> None:
        self.script, self.t = script, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 0.0, False, self.t == len(self.script), {"success": self.script[self.t - 1]}


@pytest.mark.parametrize("script, succeeded", [([False, True, False], True), ([False, False, False], False),
                                               ([False, False, True], True)])
def test_an_episode_succeeds_if_any_of_its_steps_did_and_says_so_on_its_last_step(script, succeeded):
    env = EpisodeSuccess(Scripted(script))
    for _ in range(2):  # the second episode starts unsucceeded
        env.reset()
        infos = [env.step(0)[-1] for _ in script]
        assert SUCCESS not in infos[0] and infos[-1][SUCCESS] is succeeded


def test_successes_count_only_the_episodes_that_report_one():
    def episode(info: dict) -> Trajectory:
        return Trajectory(obs=np.zeros((3, 1), np.float32), acts=np.zeros(2, np.int64), rews=np.zeros(2, np.float32),
                          terminal=False, infos=[{}, info])

    got = successes([episode({SUCCESS: True}), episode({}), episode({SUCCESS: False}), episode({SUCCESS: 1.0})])
    assert got.dtype == bool and got.tolist() == [True, False, True]


def test_a_dmc_task_is_one_float32_vector_in_key_order_over_a_thousand_steps():
    pytest.importorskip("dm_control")
    env = DmcEnv("walker-walk", n_envs=1)
    assert env.id == "dm_control/walker-walk-v0" and env.horizon == 1000
    assert env.observation_space.shape == (24,) and env.observation_space.dtype == np.float32
    copy = env.make_single()
    obs, _ = copy.reset(seed=0)
    parts, _ = gym.make("dm_control/walker-walk-v0").reset(seed=0)  # the task's own dict, in its own order
    assert list(parts) != sorted(parts)
    np.testing.assert_allclose(obs, np.concatenate([np.ravel(parts[k]) for k in sorted(parts)]), rtol=1e-6)
    steps = 1
    while not copy.step(copy.action_space.sample())[3]:
        steps += 1
    assert steps == 1000


def test_a_dmc_task_leaves_the_warning_filters_as_they_were():
    # dm_control's composer turns on every library's DeprecationWarning at its import; a run's console would fill.
    pytest.importorskip("dm_control")
    script = ("import warnings; from rlhp.envs import DmcEnv; before = list(warnings.filters); "
              "DmcEnv('walker-walk', n_envs=1); assert warnings.filters == before, warnings.filters[:2]")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1000:]


def test_a_dmc_step_is_drawn_again_from_its_recorded_physics_state():
    pytest.importorskip("dm_control")
    env = DmcEnv("cheetah-run", n_envs=1)
    copy, painter = env.make_single(render_mode="rgb_array", width=64, height=48), env.make_single(
        render_mode="rgb_array", width=64, height=48)
    assert env.restorable(copy)
    copy.reset(seed=0)
    for _ in range(20):
        copy.step(copy.action_space.sample())
    painter.reset(seed=1)
    env.write_state(painter, env.read_state(copy))
    np.testing.assert_array_equal(painter.render(), copy.render())
    assert painter.render().shape == (48, 64, 3) and painter.metadata["render_fps"] == pytest.approx(100)


def test_a_metaworld_step_is_drawn_again_with_its_objects_and_goal_where_its_episode_had_them():
    pytest.importorskip("metaworld")
    env = MetaWorldEnv("door-open-v3", n_envs=1)
    copy, painter = (env.make_single(render_mode="rgb_array", width=64, height=48) for _ in range(2))
    copy.reset(seed=0)
    for _ in range(20):
        copy.step(copy.action_space.sample())
    bodies = painter.unwrapped.model.body_pos.size
    for seed in range(1, 20):  # another of the 50 goals: the door stands elsewhere in the model
        painter.reset(seed=seed)
        if not np.array_equal(env.read_state(painter)[:bodies], env.read_state(copy)[:bodies]):
            break
    assert not np.array_equal(env.read_state(painter)[:bodies], env.read_state(copy)[:bodies])
    # (Neither has rendered yet: gymnasium aims a viewer's camera at the scene it first draws.)
    env.write_state(painter, env.read_state(copy))
    np.testing.assert_array_equal(painter.render(), copy.render())
    assert painter.render().shape == (48, 64, 3)


def test_a_metaworld_task_draws_its_goal_each_reset_runs_500_steps_and_reports_success():
    pytest.importorskip("metaworld")
    env = MetaWorldEnv("door-open-v3", n_envs=1)
    assert env.horizon == 500 and env.restorable(env.make_single())
    assert env.observation_space.dtype == np.float32
    copy = env.make_single()
    goals = {tuple(copy.reset(seed=s)[0][-3:].round(4)) for s in range(6)}
    assert len(goals) > 1  # goals differ from reset to reset
    copy.reset(seed=0)
    steps, info = 0, {}
    while True:
        _, _, terminated, truncated, info = copy.step(copy.action_space.sample())
        steps += 1
        if terminated or truncated:
            break
    assert steps == 500 and not terminated and SUCCESS in info


@pytest.mark.parametrize("make, says", [
    (lambda: DmcEnv("walker-run-fast", n_envs=1), "must be a task of dm_control's suite"),
    (lambda: MetaWorldEnv("door-open-v2", n_envs=1), "must be a Meta-World v3 task"),
])
def test_an_unknown_task_is_refused_naming_the_tasks(make, says):
    pytest.importorskip("dm_control")
    pytest.importorskip("metaworld")
    with pytest.raises(ArgumentError, match=says) as err:
        make()
    assert err.value.argument == "id"


@pytest.mark.slow
@pytest.mark.parametrize("overrides, success", [
    (["experiment=bpref_cpu/walker_walk"], False),  # DMC as B-Pref runs it, on the CPU protocol
    (["env=metaworld", "env.id=door-open-v3"], True),
], ids=["dmc", "metaworld"])
def test_a_benchmark_task_trains_end_to_end_and_metaworld_reports_its_success_rate(train, overrides, success):
    pytest.importorskip("dm_control")
    pytest.importorskip("metaworld")
    run_dir, proc = train(*overrides)
    result = json.loads((run_dir / "eval.json").read_text())
    assert np.isfinite(result["true_return_mean"]) and ("success_rate" in result) is success
    assert ("success" in proc.stdout + proc.stderr) is success  # the console's last line says it too
    # The protocol a run followed is in eval.json and in the console's first line.
    cpu = ["agent.policy_kwargs.net_arch=[256,256]", "agent.batch_size=256"]
    assert result["protocol"] == ({"name": "cpu", "changed": cpu} if not success else {"name": "own", "changed": []})
    assert ("the cpu protocol, shrunk by debug" in proc.stdout) is not success
    if success:
        assert 0 <= result["success_rate"] <= 1
        rows = RunFolder(run_dir).metrics()
        assert any(r.get("success_rate") is not None for r in rows)
