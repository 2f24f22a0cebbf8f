"""Tier 2: every option of every config group composes and builds (no training)."""

import inspect
from pathlib import Path

import hydra.utils
import numpy as np
import pytest
import torch
from helpers import CONF, NO_PICTURES, OPTION_NEEDS, composed, config_groups, group_options, random_dataset
from omegaconf import OmegaConf

from rlhp.data.label_files import SegmentLabels, write_label_files
from rlhp.errors import ConfigError
from rlhp.experiment.compose import compose
from rlhp.experiment.config import build
from rlhp.loop import PreferenceLearning, RewardLearning

COLLECT_ONLY = {"expert"}
TRAIN_GROUPS = config_groups(skip=COLLECT_ONLY)
PENDULUM = ["env=gym", "env.id=Pendulum-v1"]
# What some options need beside them to build: an env whose actions they support, a path.


options = group_options


@pytest.fixture(scope="module")
def cartpole_dataset(tmp_path_factory) -> Path:
    """Four 500-step episodes of fixed-horizon CartPole."""
    return random_dataset(tmp_path_factory.mktemp("data") / "trajectories", "rlhp/CartPole-FixedHorizon-v0", episodes=4)


@pytest.fixture(scope="module")
def pendulum_dataset(tmp_path_factory) -> Path:
    """A random policy's episodes on Pendulum: continuous actions, for the offline agents."""
    return random_dataset(tmp_path_factory.mktemp("data") / "pendulum", "Pendulum-v1", episodes=4)


@pytest.fixture(scope="module")
def label_folder(tmp_path_factory) -> Path:
    """Preference Transformer's label files naming 20 pairs of 10-step segments of the CartPole dataset (four
    500-step episodes)."""
    path = tmp_path_factory.mktemp("labels")
    starts = np.random.default_rng(0).integers(0, 4, (20, 2)) * 500 + 100
    write_label_files(SegmentLabels(starts, np.ones(20, np.float32), 10), path, "pt")
    return path


@pytest.fixture(scope="module")
def walker_datasets(tmp_path_factory) -> dict[str, Path]:
    """A random policy's episodes on Hopper and on Walker2d, for the offline experiments."""
    return {body: random_dataset(tmp_path_factory.mktemp("data") / body, f"{body}-v5", steps=400)
            for body in ("Hopper", "Walker2d")}


OFFLINE_AGENTS = {"iql", "td3bc"}
"""The agent options that train on a dataset (trajectories=dataset)."""


def test_the_groups_are_found():
    assert {"env", "agent", "trajectories", "reward_net", "reward_trainer", "fragmenter", "querent", "gatherer",
            "query_schedule", "logger", "debug", "experiment", "reward_trainer/crop", "reward_trainer/pseudo_labels",
            "reward_trainer/label_filter"} <= set(TRAIN_GROUPS)
    assert options("expert") == ["hub", "ppo_cartpole", "sac_pendulum", "zip"]


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in TRAIN_GROUPS for o in options(g)])
def test_every_train_option_composes_and_builds(group, option, tmp_path, cartpole_dataset, pendulum_dataset,
                                                label_folder, walker_datasets):
    extra = OPTION_NEEDS.get((group, option), [])
    if (group, option) in (("trajectories", "dataset"), ("trajectories", "demos"), ("experiment", "trex_cartpole")):
        extra = [f"trajectories.path={cartpole_dataset}"]
    if option == "label_file":  # the fragmenter and the gatherer read one label file, on a dataset
        extra = ["trajectories=dataset", f"trajectories.path={cartpole_dataset}", "fragmenter=label_file",
                 "gatherer=label_file", f"fragmenter.path={label_folder}"]
    if group == "experiment" and option.startswith("offline/"):  # its dataset, made here
        extra = [f"trajectories.path={walker_datasets['Walker2d' if 'walker' in option else 'Hopper']}"]
    offline = (group == "agent" and option in OFFLINE_AGENTS) or option.startswith("offline/")
    if offline or (group, option) == ("reward_net", "preference_transformer"):  # it pays offline agents only
        extra = ["env=gym", "env.id=Pendulum-v1", "trajectories=dataset", f"trajectories.path={pendulum_dataset}",
                 *([] if offline else ["agent=iql"])]
        offline = True
    debug = [] if group == "debug" else ["debug=fast"]
    cfg = composed("train", [f"{group}={option}", *debug, *extra], hydra=True)
    assert cfg.hydra.runtime.choices[group] in (option, [option])
    loop = compose(cfg, tmp_path)
    if (group, option) == ("reward_learning", "none"):  # the ceiling builds only the agent's side
        assert type(loop.reward_learning) is RewardLearning and loop.source.venv.reward.reads_env_reward
        return
    assert isinstance(loop.reward_learning, PreferenceLearning)
    # Demos train an agent on the learned reward; a dataset trains only an offline one.
    on_dataset = option == "dataset" or "trajectories=dataset" in extra
    assert loop.agent.trains == (offline or not on_dataset)
    learning = loop.reward_learning
    built = {"trajectories": loop.source, "fragmenter": learning.fragmenter, "querent": learning.querent,
             "gatherer": learning.gatherer, "reward_trainer": learning.reward_trainer,
             "reward_net": learning.reward_trainer.net,
             "logger": build(cfg.logger) if group == "logger" else None,
             "task": loop.source.env.task if group == "task" else None}
    if built.get(group) is not None:
        node = cfg.env.task if group == "task" else cfg[group]  # the task's keys sit in the env's
        assert type(built[group]).__name__ == node._target_.rsplit(".", 1)[-1]
    if offline:
        assert type(loop.agent).__name__ == "OfflineAgent" and loop.agent.spec.name == cfg.agent.name
    elif group == "agent":
        assert type(loop.agent.algorithm).__name__ == cfg.agent._target_.rsplit(".", 1)[-1]
    if group == "query_schedule":
        assert sum(learning.schedule) == cfg.total_comparisons


@pytest.mark.parametrize("option", options("expert"))
def test_every_expert_option_composes_and_builds(option, tmp_path):
    (tmp_path / "ppo-CartPole-v1").mkdir()  # a local folder in the zoo's layout
    extra = {"zip": ["expert.path=agent.zip"], "hub": [f"expert.repo_id={tmp_path / 'ppo-CartPole-v1'}"]}
    cfg = composed("collect", [f"expert={option}", *extra.get(option, [])])
    expert = build(cfg.expert)
    assert type(expert).__name__ == cfg.expert._target_.rsplit(".", 1)[-1]
    assert expert.env.id in {"rlhp/CartPole-FixedHorizon-v0", "Pendulum-v1", "CartPole-v1"}


def test_the_experiment_pins_the_readme_run(tmp_path):
    cfg = composed("train", ["experiment=cartpole", "total_comparisons=40"])
    assert cfg.total_comparisons == 40  # the command line still wins
    assert (cfg.total_timesteps, cfg.fragment_length, cfg.reward_net.members) == (150_000, 20, 5)
    assert not cfg.gatherer.sample and cfg.env.id == "rlhp/CartPole-FixedHorizon-v0"
    np.testing.assert_allclose(cfg.reward_trainer.lr, 3e-3)


def test_the_100_label_experiment_changes_only_what_it_names_on_top_of_the_readme_run(tmp_path):
    base = composed("train", ["experiment=cartpole"])
    few = composed("train", ["experiment=cartpole_100_labels"])
    assert (few.total_comparisons, few.fragment_length, few.reward_trainer.epochs) == (100, 10, 10)
    assert (base.trajectories.max_episode_steps, few.trajectories.max_episode_steps) == (None, 100)
    assert (base.agent.gamma, few.agent.gamma) == (0.98, 0.99)
    base, few = (OmegaConf.to_container(c) for c in (base, few))
    for cfg in (base, few):
        del cfg["total_comparisons"], cfg["fragment_length"], cfg["reward_trainer"]["epochs"]
        del cfg["trajectories"]["max_episode_steps"], cfg["agent"]["gamma"]
    assert few == base


def test_the_10_label_experiment_asks_all_its_labels_at_once_and_changes_nothing_else():
    hundred, ten = (OmegaConf.to_container(composed("train", [f"experiment=cartpole_{n}_labels"])) for n in (100, 10))
    assert (ten["total_comparisons"], ten["initial_comparison_frac"]) == (10, 1.0)
    for cfg in (hundred, ten):
        del cfg["total_comparisons"], cfg["initial_comparison_frac"]
    assert ten == hundred


def test_the_trex_experiment_is_the_defaults_with_ranked_demos_ranked_by_return_and_whole_episodes(tmp_path):
    trex = ["gatherer=ranked", "trajectories=demos", "trajectories.path=demos", "trajectories.rank_by=return",
            "trajectories.max_episode_steps=100", "fragment_length=500"]
    expected, got = (OmegaConf.to_container(composed("train", over)) for over in
                     (trex, ["experiment=trex_cartpole", "trajectories.path=demos"]))
    assert got == expected and got["gatherer"]["_target_"] == "rlhp.feedback.RankedGatherer"


@pytest.mark.parametrize("option", ["reward_trainer/crop/temporal", "reward_trainer/pseudo_labels/surf",
                                    "reward_trainer/label_filter/contradicted"])
def test_a_label_saving_method_s_config_is_its_class_s_defaults(option):
    # The published settings live twice, in the class for Python users and in the option for the CLI: one value.
    values = OmegaConf.to_container(OmegaConf.load(CONF / f"{option}.yaml"))
    part = hydra.utils.get_class(values.pop("_target_"))
    defaults = {name: p.default for name, p in inspect.signature(part).parameters.items()}
    assert values == defaults


def test_every_command_shares_the_hydra_output_and_logging(tmp_path):
    for config, name in (("train", "train"), ("collect", "collect")):
        cfg = composed(config, [], hydra=True)
        assert cfg.hydra.job.name == name and not cfg.hydra.job.chdir
        assert cfg.hydra.run.dir.startswith(f"outputs/{name}/") and cfg.hydra.sweep.dir.startswith(f"multirun/{name}/")
        assert cfg.hydra.job_logging.handlers.console.filters == ["console"]


def test_the_synthetic_teacher_and_the_model_share_one_discount_and_threshold(tmp_path):
    cfg = composed("train", ["debug=fast", "preference_model.discount_factor=0.9", "preference_model.threshold=7"])
    loop = compose(cfg)
    assert loop.reward_learning.gatherer.discount_factor == loop.reward_learning.reward_trainer.discount_factor == 0.9
    assert loop.reward_learning.gatherer.threshold == loop.reward_learning.reward_trainer.threshold == 7


@pytest.mark.parametrize(("overrides", "message"), [
    (["+total_comparison=5"], "`total_comparison` is not an option of rlhp-train; did you mean total_comparisons?"),
    (["+reward_net.hidden_size=[8]"],
     "`reward_net.hidden_size` is not an option of RewardNet; did you mean reward_net.hidden_sizes?"),
    (["fragmenter=active", "+fragmenter.base.warn=1"], "`fragmenter.base.warn` is not an option of RandomFragmenter"),
    (["+fragmenter.base.warn=1"], "`fragmenter.base` is not an option of RandomFragmenter"),
    (["reward_trainer.lr=abc"], "`reward_trainer.lr` must be a number, got 'abc'"),
    (["reward_trainer.lr=0"], "`reward_trainer.lr` must be a positive finite number, got 0"),
    (["reward_trainer.val_split=1"], "`reward_trainer.val_split` must lie in [0, 1), got 1"),
    (["reward_net.members=0"], "`reward_net.members` must lie in [1, 256], got 0"),
    (["reward_net.hidden_sizes=[0]"], "`reward_net.hidden_sizes` must be widths in [1, 65536], got [0]"),
    (["agent.learning_rate=-1"], "`agent.learning_rate` must be a positive finite number (or a schedule), got -1"),
    (["agent.gamma=1.5"], "`agent.gamma` must be in (0, 1], got 1.5"),
    (["agent=dqn", "agent.exploration_final_eps=2"], "`agent.exploration_final_eps` must be in [0, 1], got 2"),
    (["agent=sac", *PENDULUM, "+agent.tau=0"], "`agent.tau` must be in (0, 1], got 0"),
    (["agent.n_steps=0"], "`agent.n_steps` must be an integer of at least 1, got 0"),
    (["agent.n_steps=100"], "`agent.batch_size` (512) is larger than a rollout of agent.n_steps x env.n_envs = 100 x "
                            "4 = 400 steps; lower it, or raise either of those"),
    (["trajectories.max_episode_steps=0"], "`trajectories.max_episode_steps` must be >= 1 (or null), got 0"),
    (["reward_trainer.weight_decay=heavy"], "`reward_trainer.weight_decay` must be a number, got 'heavy'"),
    (["reward_net.hidden_sizes=[8,x]"], "`reward_net.hidden_sizes` must be a list of integers, got [8, 'x']"),
    (["agent.n_steps=many"], "`agent.n_steps` must be an integer, got 'many'"),
    (["agent.learning_rate=fast"], "`agent.learning_rate` must be a number or a callable"),
    (["env.n_envs=2.5"], "`env.n_envs` must be an integer, got 2.5"),
    (["gatherer.sample=maybe"], "`gatherer.sample` must be a boolean, got 'maybe'"),
    (["preference_model.threshold=0"], "`preference_model.threshold` must be a positive number, got 0"),
    (["preference_model.discount_factor=1.5"], "`preference_model.discount_factor` must lie in (0, 1], got 1.5"),
    (["max_dataset_size=0"], "`max_dataset_size` must be at least 1, got 0"),
    (["total_comparisons=0"], "`total_comparisons` must be at least 1, got 0"),
    (["evaluation.episodes=-1"], "`evaluation.episodes` must be at least 1, got -1"),
    (["keep_checkpoints=0"], "`keep_checkpoints` must be at least 1, got 0"),
    (["reward_trainer.epochs=-2"], "`reward_trainer.epochs` must be at least 1, got -2"),
    (["device=tpu"], "`device` must be cpu, cuda, cuda:<n> or auto, got 'tpu'"),
    (["gatherer=human", "querent=ids"], "`querent` must publish the queries people label (HumanGatherer reads them), "
                                        "e.g. querent=web, not Querent"),
    (["gatherer=mixed", "gatherer@gatherer.teacher=human", "querent=ids"], "`querent` must publish"),
    (["gatherer=mixed", "gatherer@gatherer.teacher=human", "querent=web", "querent.mode=rank"],
     "`querent.mode` is rank, but MixedGatherer withdraws published queries pair by pair"),
    (["gatherer=mixed", "gatherer@gatherer.teacher=human", "querent=web", "querent.mode=rate"],
     "`querent.mode` is rate, but MixedGatherer withdraws"),
    (["gatherer=human", "querent=web", "querent.mode=ranks"], "`querent.mode` must be one of pairs, rank, rate"),
    (["gatherer=human", "querent=web", "querent.mode=rate", "querent.scale=11"], "`querent.scale` must lie in [2, 10]"),
    (["gatherer=human", "querent=web", "querent.mode=rank", "querent.gold_rate=0.2"],
     "`querent.gold_rate` gold queries are measured in mode=pairs"),
    (["gatherer=human", "gatherer.ranking_as=list"],
     "`gatherer.ranking_as` is list, which trains on the ranking people build, and this querent asks for no ranking"),
    (["gatherer=human", "querent.mode=rank", "gatherer.ranking_as=tree"],
     "`gatherer.ranking_as` must be one of pairs, list, got 'tree'"),
    (["gatherer=human", "gatherer.timeout_s=0"], "`gatherer.timeout_s` must be positive, got 0"),
    (["gatherer=human", "querent.labels_per_query=0"], "`querent.labels_per_query` must be at least 1, got 0"),
    (["gatherer=human", "gatherer.min_gold_accuracy=0.7"],
     "`gatherer.min_gold_accuracy` judges people by their answers to gold queries, and the querent asks none"),
    (["gatherer=human", "querent.instructions=/no/such/task.md"],
     "`querent.instructions` names '/no/such/task.md', which is not a file"),
    (["gatherer=human", "querent.instructions=[1]"], "`querent.instructions` must be a string, got [1]"),
    (["gatherer=human", "env=gym", f"env.id={NO_PICTURES}"], f"`env.id` {NO_PICTURES} draws no rgb_array pictures"),
    (["reward_trainer/crop=temporal", "reward_trainer.crop.max_shorten=50", "fragment_length=10"],
     "`reward_trainer.crop.max_shorten` (50) must be less than the fragments' length (fragment_length=10)"),
    (["reward_trainer/crop=temporal", "reward_trainer.crop.max_shorten=10", "fragment_length=10"],
     "`reward_trainer.crop.max_shorten` (10) must be less than"),
    (["reward_trainer.val_split=0.5", "total_comparisons=2"],
     "`reward_trainer.val_split` (0.5) leaves an empty validation set with 1 labelled pairs"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
def test_bad_values_anywhere_are_refused_before_training_naming_the_full_key(tmp_path, overrides, message):
    cfg = composed("train", ["debug=fast", *overrides])
    with pytest.raises(ConfigError) as err:
        compose(cfg, tmp_path)
    assert str(err.value) == f"config key {message}" or str(err.value).startswith(f"config key {message}")


def test_a_crop_that_leaves_a_step_of_the_fragment_is_accepted(tmp_path):
    loop = compose(composed("train", ["debug=fast", "reward_trainer/crop=temporal", "reward_trainer.crop.max_shorten=9",
                                      "fragment_length=10"]), tmp_path)
    assert loop.reward_learning.reward_trainer.crop.max_shorten == 9


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cuda_without_a_gpu_is_refused_and_auto_falls_back_to_the_cpu(tmp_path):
    with pytest.raises(ConfigError, match="`device` is cuda, but torch sees no GPU here"):
        compose(composed("train", ["debug=fast", "device=cuda"]))
    loop = compose(composed("train", ["debug=fast", "device=auto"]))
    assert loop.reward_learning.reward_trainer.net.device.type == "cpu"
    assert loop.agent.algorithm.device.type == "cpu"


def test_every_domain_names_an_argument_of_an_sb3_algorithm_and_every_numeric_agent_key_has_one():
    import inspect

    import sbx
    import stable_baselines3 as sb3

    from rlhp.agents.domains import DOMAINS, OFFLINE_DOMAINS
    from rlhp.offline.algorithm import LEARNERS, learner_class
    arguments = {name for algo in (sb3.PPO, sb3.A2C, sb3.DQN, sb3.SAC, sb3.TD3, sbx.SAC, sbx.TQC, sbx.CrossQ,
                                   sbx.PPO)
                 for name in inspect.signature(algo.__init__).parameters}
    assert set(DOMAINS) <= arguments
    offline = {f for name in LEARNERS for f in inspect.signature(learner_class(name)).parameters}
    assert set(OFFLINE_DOMAINS) <= offline
    for option in options("agent"):
        node = OmegaConf.to_container(OmegaConf.load(CONF / "agent" / f"{option}.yaml"))  # unresolved
        if option in OFFLINE_AGENTS:  # the offline agent's own keys are checked where it is made
            node, domains = node["learner"], OFFLINE_DOMAINS
        else:
            domains = DOMAINS
        numeric = {k for k, v in node.items() if isinstance(v, int | float | list) and not isinstance(v, bool)
                   and k not in ("verbose",)}
        assert numeric <= set(domains), (option, numeric - set(domains))


@pytest.mark.parametrize(("name", "bad", "good"), [
    ("gamma", [0, -0.1, 1.01, float("nan"), float("inf")], [1e-3, 0.99, 1]),
    ("learning_rate", [0, -1e-3, float("nan"), float("inf")], [1e-5, 3, lambda progress: 1e-3]),
    ("tau", [0, 1.5], [0.005, 1]),
    ("batch_size", [1, 0, 2.5, True], [2, 256]),
    ("train_freq", [0, [0, "step"], [1, "day"]], [1, [1, "episode"], (4, "step")]),
    ("gradient_steps", [0, -2], [-1, 1, 64]),
    ("ent_coef", [-0.1, "best"], [0, 0.01, "auto", "auto_0.1"]),
    ("exploration_final_eps", [-0.01, 1.01], [0, 0.05, 1]),
    ("device", ["", "gpu", 0, None, "cuda:x"], ["cpu", "cuda", "cuda:1", "auto"]),
    ("policy", ["MlpPolicyy", 1, None, "CnnPolicy "], ["MlpPolicy", "CnnPolicy", "MultiInputPolicy"]),
])
def test_sb3_domains_refuse_what_lies_outside_and_accept_what_lies_inside(name, bad, good):
    import functools

    import stable_baselines3 as sb3

    from rlhp.agents.domains import check_domains
    for value in bad:
        with pytest.raises(ConfigError, match=f"`agent.{name}` must be"):
            check_domains(functools.partial(sb3.PPO, **{name: value}))
    for value in good:
        check_domains(functools.partial(sb3.PPO, **{name: value}))


def test_an_sbx_agent_given_a_torch_feature_extractor_is_refused_naming_it():
    # SB3's agents run the MinAtar experiments' torch CNN; SBX's (JAX) would fail inside flax with a type error.
    import functools

    import sbx
    import stable_baselines3 as sb3

    from rlhp.agents.domains import check_domains
    from rlhp.agents.extractors import SmallGridCNN
    torch_cnn = {"policy": "CnnPolicy", "policy_kwargs": {"features_extractor_class": SmallGridCNN}}
    with pytest.raises(ConfigError, match=r"`agent.policy_kwargs.features_extractor_class` is a torch network, "
                                          r"which SBX's PPO \(JAX\) cannot run"):
        check_domains(functools.partial(sbx.PPO, **torch_cnn))
    check_domains(functools.partial(sb3.PPO, **torch_cnn))
    check_domains(functools.partial(sbx.PPO, policy="CnnPolicy"))
