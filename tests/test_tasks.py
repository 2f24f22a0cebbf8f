"""Tasks: the true reward is the env's own, or a behaviour's that replaces it everywhere (a backflip)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import composed

from rlhp.envs import GymEnv
from rlhp.envs.tasks import Backflip
from rlhp.errors import ConfigError
from rlhp.experiment.compose import compose
from rlhp.experiment.config import build

pytest.importorskip("mujoco")


def hopper(**kwargs) -> GymEnv:
    return GymEnv("Hopper-v5", n_envs=1, kwargs={"terminate_when_unhealthy": False}, task=Backflip(), **kwargs)


def test_a_positive_pitch_leans_the_hopper_forward_so_backward_rotation_lowers_it():
    env = hopper().make_single().unwrapped
    env.reset(seed=0)
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    qpos[env.model.joint("rooty").qposadr[0]] = 0.3
    env.set_state(qpos, qvel)
    up = env.data.body("torso").xmat.reshape(3, 3)[:, 2]  # the torso's own z axis, in the world
    assert up[0] > 0.25  # its top moved to +x, the way the hopper faces (its forward reward is +x velocity)


def test_a_backflip_return_counts_backward_turns_and_replaces_the_env_reward():
    venv = hopper().make(seed=0)
    inner = venv.envs[0].unwrapped
    rooty = inner.model.joint("rooty").qposadr[0]
    venv.reset()
    start = inner.data.qpos[rooty]
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(200):
        before = inner.data.qpos[rooty]
        _, reward, _, _ = venv.step(rng.uniform(-1, 1, (1, 3)))
        turned = (before - inner.data.qpos[rooty]) / (2 * math.pi)
        assert reward[0] == pytest.approx(turned, rel=1e-6, abs=1e-9)  # a VecEnv's rewards are float32
        total += float(reward[0])
    assert total == pytest.approx((start - inner.data.qpos[rooty]) / (2 * math.pi), abs=1e-6)  # net turns
    assert abs(total) < 1  # random actions do not flip a hopper: the env's own forward reward is not here
    venv.reset()  # a new episode counts from its own start
    before = inner.data.qpos[rooty]
    _, reward, _, _ = venv.step(rng.uniform(-1, 1, (1, 3)))
    assert reward[0] == pytest.approx((before - inner.data.qpos[rooty]) / (2 * math.pi), rel=1e-6, abs=1e-9)


def test_the_task_reaches_the_loop_through_the_env_and_an_unreadable_env_is_refused_by_key():
    loop = compose(composed("train", ["debug=fast", "env=gym", "env.id=Hopper-v5", "env.n_envs=1",
                                      "+env.kwargs.terminate_when_unhealthy=false", "task=backflip", "agent=sac",
                                      "fragment_length=10"]))
    assert isinstance(loop.source.env.task, Backflip)
    with pytest.raises(ConfigError, match=r"`env.task.joint` needs a MuJoCo env to read the 'rooty' joint from; "
                                          "FixedHorizonCartPole is not one"):
        build(composed("train", ["task=backflip"]).env)
    with pytest.raises(ConfigError, match="`env.task.joint` HopperEnv has no joint 'spine'; its joints are rootx, "
                                          "rootz, rooty, thigh_joint"):
        build(composed("train", ["env=gym", "env.id=Hopper-v5", "task=backflip", "env.task.joint=spine"]).env)
    assert type(build(composed("train", []).env).task).__name__ == "Task"  # the env's own reward by default
