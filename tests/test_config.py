"""Tier 2: every option of every config group composes and builds (no training)."""

from pathlib import Path

import numpy as np
import pytest
from helpers import composed

import rlhp.conf
from rlhp.config import build
from rlhp.data import save_trajectories
from rlhp.envs import GymEnv
from rlhp.loop import PreferenceComparisons
from rlhp.policies import random_policy
from rlhp.rollout import rollout
from rlhp.run import build_loop

CONF = Path(rlhp.conf.__file__).parent
COLLECT_ONLY = {"expert"}
TRAIN_GROUPS = sorted(d.name for d in CONF.iterdir() if d.is_dir() and d.name not in {"hydra", "__pycache__",
                                                                                     *COLLECT_ONLY})
PENDULUM = ["env=gym", "env.id=Pendulum-v1"]
# What some options need beside them to build: an env whose actions they support, a path.
NEEDS = {("env", "gym"): PENDULUM, ("agent", "sac"): PENDULUM}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture(scope="module")
def cartpole_dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "trajectories"
    env = GymEnv("rlhp/CartPole-FixedHorizon-v0", n_envs=2)
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    save_trajectories(rollout(venv, random_policy(venv.action_space), episodes=4), path, metadata={},
                      observation_space=venv.observation_space, action_space=venv.action_space)
    return path


def test_the_groups_are_found():
    assert {"env", "agent", "trajectories", "reward_net", "reward_trainer", "fragmenter", "querent", "gatherer",
            "query_schedule", "logger", "debug", "experiment"} <= set(TRAIN_GROUPS)
    assert options("expert") == ["hub", "ppo_cartpole", "sac_pendulum", "zip"]


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in TRAIN_GROUPS for o in options(g)])
def test_every_train_option_composes_and_builds(group, option, tmp_path, cartpole_dataset):
    extra = NEEDS.get((group, option), [])
    if (group, option) == ("trajectories", "dataset"):
        extra = [f"trajectories.path={cartpole_dataset}"]
    debug = [] if group == "debug" else ["debug=fast"]
    cfg = composed("train", [f"{group}={option}", *debug, *extra], tmp_path)
    assert cfg.hydra.runtime.choices[group] == option
    loop = build_loop(cfg)
    assert isinstance(loop, PreferenceComparisons)
    assert (loop.source.agent is None) == (option == "dataset")
    built = {"trajectories": loop.source, "fragmenter": loop.fragmenter, "querent": loop.querent,
             "gatherer": loop.gatherer, "reward_trainer": loop.reward_trainer, "reward_net": loop.reward_trainer.net,
             "logger": build(cfg.logger) if group == "logger" else None}
    if built.get(group) is not None:
        assert type(built[group]).__name__ == cfg[group]._target_.rsplit(".", 1)[-1]
    if group == "agent":
        assert type(loop.source.agent.algorithm).__name__ == cfg.agent._target_.rsplit(".", 1)[-1]
    if group == "query_schedule":
        assert sum(loop.comparisons) == cfg.total_comparisons


@pytest.mark.parametrize("option", options("expert"))
def test_every_expert_option_composes_and_builds(option, tmp_path):
    (tmp_path / "ppo-CartPole-v1").mkdir()  # a local folder in the zoo's layout
    extra = {"zip": ["expert.path=agent.zip"], "hub": [f"expert.repo_id={tmp_path / 'ppo-CartPole-v1'}"]}
    cfg = composed("collect", [f"expert={option}", *extra.get(option, [])], tmp_path)
    expert = build(cfg.expert)
    assert type(expert).__name__ == cfg.expert._target_.rsplit(".", 1)[-1]
    assert expert.env.id in {"rlhp/CartPole-FixedHorizon-v0", "Pendulum-v1", "CartPole-v1"}


def test_the_experiment_pins_the_readme_run(tmp_path):
    cfg = composed("train", ["experiment=cartpole", "total_comparisons=40"], tmp_path)
    assert cfg.total_comparisons == 40  # the command line still wins
    assert (cfg.total_timesteps, cfg.fragment_length, cfg.reward_net.members) == (150_000, 20, 5)
    assert not cfg.gatherer.sample and cfg.env.id == "rlhp/CartPole-FixedHorizon-v0"
    np.testing.assert_allclose(cfg.reward_trainer.lr, 3e-3)


def test_every_command_shares_the_hydra_output_and_logging(tmp_path):
    for config, name in (("train", "train"), ("collect", "collect")):
        cfg = composed(config, [], tmp_path)
        assert cfg.hydra.job.name == name and not cfg.hydra.job.chdir
        assert cfg.hydra.run.dir.startswith(f"outputs/{name}/") and cfg.hydra.sweep.dir.startswith(f"multirun/{name}/")
        assert cfg.hydra.job_logging.handlers.console.filters == ["console"]


def test_the_synthetic_teacher_and_the_model_share_one_discount_and_threshold(tmp_path):
    cfg = composed("train", ["debug=fast", "preference_model.discount_factor=0.9", "preference_model.threshold=7"],
                   tmp_path)
    loop = build_loop(cfg)
    assert loop.gatherer.discount_factor == loop.reward_trainer.discount_factor == 0.9
    assert loop.gatherer.threshold == loop.reward_trainer.threshold == 7
