"""The builder: every part of a run from its config, with no global state (no Hydra runtime needed).

``compose(cfg)`` validates the config, then hands it to the function its ``reward_learning`` option names:
:func:`preference_learning` (a reward learned from preferences, the default), its
:func:`asynchronous_preference_learning` (the reward trained beside the agent) or :func:`true_reward` (the
ceiling: the same agent on the env's own reward, which builds no querent, gatherer or reward trainer). Each
returns one :class:`~rlhp.loop.Loop`; they differ in its reward-learning part.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed

from rlhp.agents.offline import OfflineAgent
from rlhp.data import PreferenceDataset
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError
from rlhp.experiment.config import build, validate_train
from rlhp.experiment.protocols import expected_wall_time
from rlhp.feedback.gatherer import PreferenceGatherer
from rlhp.feedback.querent import Querent
from rlhp.loop import AsynchronousPreferenceLearning, Loop, PreferenceLearning, RewardLearning
from rlhp.loop.schedules import comparison_schedule
from rlhp.rewards import AgentReward, EnvReward, RewardNet
from rlhp.sources import TrajectorySource
from rlhp.training import RewardTrainer


def compose(cfg: DictConfig, run_dir: Path | None = None) -> Loop:
    """The run's loop with every part built (the config validated first); parts that write into the run
    folder (a web querent) are given ``run_dir``."""
    validate_train(cfg)
    set_random_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    env = build(cfg.env)
    return hydra.utils.get_method(cfg.reward_learning._target_)(cfg, env, rng, run_dir)


def resolve_device(device: str) -> torch.device:
    """``auto`` is the GPU when torch sees one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else torch.device(device)


def comparisons(cfg: DictConfig) -> list[int]:
    """Comparisons to query in each round of the run ``cfg`` configures (round 0 first)."""
    return comparison_schedule(cfg.total_comparisons, cfg.initial_comparison_frac, cfg.num_rounds,
                               build(cfg.query_schedule))


def preference_learning(cfg: DictConfig, env: GymEnv, rng: np.random.Generator, run_dir: Path | None) -> Loop:
    """``reward_learning=preferences``: the agent learns on a reward model trained from preferences."""
    return _preference_loop(cfg, env, rng, run_dir, asynchronous=False)


def asynchronous_preference_learning(cfg: DictConfig, env: GymEnv, rng: np.random.Generator,
                                     run_dir: Path | None) -> Loop:
    """``reward_learning=asynchronous``: as ``preferences``, with each reward update after round 0's trained in a
    second thread while the agent trains on the last one (:mod:`rlhp.loop.asynchronous`)."""
    return _preference_loop(cfg, env, rng, run_dir, asynchronous=True)


def _preference_loop(cfg: DictConfig, env: GymEnv, rng: np.random.Generator, run_dir: Path | None,
                     asynchronous: bool) -> Loop:
    horizon = env.horizon
    if horizon is not None and cfg.fragment_length > horizon:
        raise ConfigError("fragment_length", f"({cfg.fragment_length}) is longer than any episode of {env.id} "
                          f"(time limit {horizon} steps, env.max_episode_steps or the env's own); lower it")
    reward_net = _reward_net(cfg, env)
    context: dict[str, Any] = {"rng": rng, "reward_net": reward_net, "env": env}
    if run_dir is not None:
        context["run_dir"] = run_dir
    querent = build(cfg.querent, **context)
    if querent.needs_states:  # before the source makes its env copies
        env.record_states()
    # Trained beside the agent, the reward net is not what the agent reads: it reads a copy, published each round.
    published = copy.deepcopy(reward_net) if asynchronous else reward_net
    source = _source(cfg, env, rng, published)
    if not source.agent.trains and cfg.optimized_metric in ("true_return_mean", "true_return_std"):
        raise ConfigError("optimized_metric", f"is {cfg.optimized_metric}, but the trajectory source "
                          f"({type(source).__name__}) trains no agent to return a true return; use reward_correlation")
    fragmenter, gatherer = (build(cfg[key], **context) for key in ("fragmenter", "gatherer"))
    check_teacher(querent, gatherer)
    schedule = comparisons(cfg)
    reward_trainer = _reward_trainer(cfg, context, schedule, source)
    parts: dict[str, Any] = dict(
        source=source,
        fragmenter=fragmenter,
        querent=querent,
        gatherer=gatherer,
        dataset=PreferenceDataset(cfg.max_dataset_size, capacity=cfg.total_comparisons),
        reward_trainer=reward_trainer,
        reward_net_config=OmegaConf.to_container(cfg.reward_net, resolve=True),
        schedule=schedule,
        fragment_length=cfg.fragment_length,
        transition_oversampling=cfg.transition_oversampling,
        initial_epoch_multiplier=cfg.initial_epoch_multiplier,
        allow_variable_horizon=cfg.allow_variable_horizon,
        horizon_remedy=env.fixed_horizon_remedy,
        pool=build(cfg.query_pool),
        reward_updates=cfg.reward_updates,
    )
    try:  # the loop's own keys (reward_updates) are top-level keys
        learning = (AsynchronousPreferenceLearning(**parts, published=published) if asynchronous
                    else PreferenceLearning(**parts))
    except ArgumentError as err:
        raise ConfigError(err.argument, err.problem) from None
    # A source that trains no agent gets no timesteps.
    return Loop(env, source, source.agent, learning, len(schedule), cfg.total_timesteps if source.agent.trains else 0)


def _reward_trainer(cfg: DictConfig, context: dict[str, Any], schedule: list[int],
                    source: TrajectorySource) -> RewardTrainer:
    """The reward trainer the config builds, checked against the run's fragments, first labels and pre-training."""
    reward_trainer = build(cfg.reward_trainer, **context)
    try:  # rules between the trainer's keys and the run's
        reward_trainer.check_fragment_length(cfg.fragment_length)
        reward_trainer.check_first_labels(schedule[0])
    except ArgumentError as err:
        raise ConfigError(f"reward_trainer.{err.argument}", err.problem) from None
    if reward_trainer.warm_start.needs_pretraining:
        env = context["env"]
        check_warm_start(source, context["reward_net"], env.horizon, env.id)
    return reward_trainer


def _reward_net(cfg: DictConfig, env: GymEnv) -> RewardNet:
    """The reward net the config builds for ``env``'s spaces, on the run's device, checked against the fragments."""
    observation_space, action_space = env.spaces()
    reward_net = build(cfg.reward_net, observation_space=observation_space,
                       action_space=action_space).to(resolve_device(cfg.device))
    try:
        reward_net.check_fragment_length(cfg.fragment_length)
    except ArgumentError as err:
        raise ConfigError(f"reward_net.{err.argument}", err.problem) from None
    return reward_net


def check_teacher(querent: Querent, gatherer: PreferenceGatherer) -> None:
    """Raise :class:`ConfigError` where the gatherer needs what the querent does not do: publish its queries, ask
    pair by pair, rank, ask gold queries."""
    if gatherer.reads_published_queries and not querent.publishes:
        # People see only what a publishing querent shows them; any other would leave them nothing to label.
        raise ConfigError("querent", f"must publish the queries people label ({type(gatherer).__name__} reads "
                          f"them), e.g. querent=web, not {type(querent).__name__}; drop the querent override")
    if gatherer.withdraws_queries and not querent.one_query_a_pair:
        raise ConfigError("querent.mode", f"is {querent.mode}, but {type(gatherer).__name__} withdraws published "
                          "queries pair by pair (demonstration pairs go to T-REX): use querent.mode=pairs with it")
    if gatherer.hands_ranking_as_list and not querent.ranks:
        raise ConfigError("gatherer.ranking_as", "is list, which trains on the ranking people build, and this querent "
                          "asks for no ranking: set querent.mode=rank too, or leave ranking_as at pairs")
    if gatherer.judges_on_gold and not querent.asks_gold:
        raise ConfigError("gatherer.min_gold_accuracy", "judges people by their answers to gold queries, and the "
                          "querent asks none: set querent.gold_rate (e.g. 0.2) too, or leave min_gold_accuracy at 0")


def check_warm_start(source: TrajectorySource, reward_net: RewardNet, horizon: int | None, env_id: str) -> None:
    """Raise :class:`ConfigError` unless the source's unsupervised pre-training finishes episodes for a warm start
    to learn from, and the net has a per-step reward to fit."""
    steps = source.pretraining_steps
    if not steps:
        raise ConfigError("reward_trainer.warm_start", "learns from the agent's unsupervised pre-training, and this "
                          "run has none: set trajectories.unsupervised_steps (e.g. 9000, PEBBLE's) with "
                          "trajectories=agent, or drop the warm start")
    if horizon is not None and steps < horizon:
        raise ConfigError("trajectories.unsupervised_steps", f"gives each env copy {steps} steps of pre-training, "
                          f"fewer than an episode of {env_id} ({horizon}): the warm start would have no episode to "
                          "learn from; raise it or lower env.n_envs")
    if not reward_net.markovian:
        raise ConfigError("reward_trainer.warm_start", f"fits a reward to each step, and {type(reward_net).__name__} "
                          "scores whole segments; use a Markovian reward net or drop the warm start")


def true_reward(cfg: DictConfig, env: GymEnv, rng: np.random.Generator, run_dir: Path | None) -> Loop:
    """``reward_learning=none``: the same agent on the env's own reward, in the same rounds; nothing is queried."""
    source = _source(cfg, env, rng, EnvReward())
    if not source.agent.trains:
        raise ConfigError("reward_learning", f"is none, which trains an agent on the env's reward, but the trajectory "
                          f"source ({type(source).__name__}) trains none")
    return Loop(env, source, source.agent, RewardLearning(), cfg.num_rounds, cfg.total_timesteps)


def _source(cfg: DictConfig, env: GymEnv, rng: np.random.Generator, reward: AgentReward) -> TrajectorySource:
    return build(cfg.trajectories, algorithm=build(cfg.agent), env=env, reward=reward, seed=cfg.seed, rng=rng)


def describe(loop: Loop, cfg: DictConfig, choices: dict[str, str]) -> str:
    """One line saying what the composed run does (``choices``: the config options chosen)."""
    steps = "gradient steps after the last round" if isinstance(loop.agent, OfflineAgent) else "timesteps"
    if not loop.reward_learning.learns:
        return (f"{cfg.env.id}, agent={choices.get('agent')} on the true reward (the ceiling), seed {cfg.seed}: "
                f"{loop.total_timesteps:,} {steps}, {loop.num_rounds} rounds{protocol_note(cfg)}")
    return (f"{cfg.env.id}, agent={choices.get('agent')}, gatherer={choices.get('gatherer')}, seed {cfg.seed}: "
            f"{loop.total_timesteps:,} {steps}, {cfg.total_comparisons:,} comparisons, {loop.num_rounds} rounds"
            f"{protocol_note(cfg)}")


def protocol_note(cfg: DictConfig) -> str:
    """What the first console line says of the run's protocol: nothing for a run's own settings; the published or
    the CPU protocol (with the keys it changed) and its expected wall time on this machine."""
    protocol = cfg.get("protocol", {"name": "own"})
    if protocol["name"] == "own":
        return ""
    if "debug" in cfg:
        return f"; the {protocol['name']} protocol, shrunk by debug"
    changed = f" (changed: {', '.join(protocol['changed'])})" if protocol["changed"] else ""
    return (f"; the {protocol['name']} protocol{changed}: "
            f"{expected_wall_time(cfg.total_timesteps, cfg.agent.batch_size)}")
