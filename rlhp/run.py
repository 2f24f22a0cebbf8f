"""``train(cfg)``: builds every part from the config, runs the loop, writes the run folder."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import datasets
import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed

from rlhp.callbacks import Checkpointer, MetricsWriter, ProgressBar
from rlhp.config import build, validate_train
from rlhp.data import PreferenceDataset
from rlhp.errors import ConfigError
from rlhp.evaluation import policy_return, reward_correlation
from rlhp.logs import CONSOLE
from rlhp.loop import PreferenceComparisons
from rlhp.policies import random_policy
from rlhp.rollout import rollout
from rlhp.runs import RunFolder
from rlhp.schedules import comparison_schedule

log = logging.getLogger(__name__)


def build_loop(cfg: DictConfig) -> PreferenceComparisons:
    """Instantiate every part of the loop from the config (validated first)."""
    validate_train(cfg)
    set_random_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    env = build(cfg.env)
    probe = env.make_single()
    horizon = probe.spec.max_episode_steps if probe.spec else None
    if horizon is not None and cfg.fragment_length > horizon:
        raise ConfigError("fragment_length", f"({cfg.fragment_length}) is longer than any episode of {env.id} "
                          f"(time limit {horizon} steps); lower it")
    reward_net = build(cfg.reward_net, observation_space=probe.observation_space,
                       action_space=probe.action_space)
    probe.close()
    source = build(cfg.trajectories, algorithm=hydra.utils.instantiate(cfg.agent), env=env,
                   reward_net=reward_net, seed=cfg.seed, rng=rng)
    if source.agent is None and cfg.optimized_metric in ("true_return_mean", "true_return_std"):
        raise ConfigError("optimized_metric", f"is {cfg.optimized_metric}, but trajectories="
                          f"{HydraConfig.get().runtime.choices.get('trajectories')} trains no agent to return "
                          "a true return; use reward_correlation")
    context = {"rng": rng, "reward_net": reward_net}
    return PreferenceComparisons(
        source=source,
        fragmenter=build(cfg.fragmenter, **context),
        querent=build(cfg.querent),
        gatherer=build(cfg.gatherer, **context),
        dataset=PreferenceDataset(cfg.max_dataset_size),
        reward_trainer=build(cfg.reward_trainer, **context),
        comparisons=comparison_schedule(cfg.total_comparisons, cfg.initial_comparison_frac,
                                        cfg.num_iterations, build(cfg.query_schedule)),
        total_timesteps=cfg.total_timesteps,
        fragment_length=cfg.fragment_length,
        rng=rng,
        transition_oversampling=cfg.transition_oversampling,
        initial_epoch_multiplier=cfg.initial_epoch_multiplier,
        allow_variable_horizon=cfg.allow_variable_horizon,
    )


def optimized_metric(cfg: DictConfig, trains_agent: bool) -> str:
    """The name of the number ``train`` returns: the config's, else the final true return where there is one."""
    return cfg.optimized_metric or ("true_return_mean" if trains_agent else "reward_correlation")


def evaluate(loop: PreferenceComparisons, cfg: DictConfig) -> dict[str, Any]:
    """The final policy's true return and the learned reward's correlation on fresh transitions."""
    result: dict[str, Any] = {}
    env = build(cfg.env)
    agent = loop.source.agent
    if agent is not None:
        result.update(policy_return(agent.algorithm, env, cfg.evaluation.episodes, cfg.seed + 20_000))
    # Held out: the source's unseen episodes and a random policy's, so true rewards vary.
    venv = env.make(cfg.seed + 30_000)
    venv.action_space.seed(cfg.seed)
    steps = cfg.evaluation.correlation_steps
    held_out = rollout(venv, random_policy(venv.action_space), steps // 2) + loop.source.held_out(steps // 2)
    result["reward_correlation"] = reward_correlation(loop.reward_trainer.net, held_out)
    result["correlation_transitions"] = sum(map(len, held_out))
    return result


def _describe(cfg: DictConfig) -> str:
    choices = HydraConfig.get().runtime.choices
    return (f"{cfg.env.id}, agent={choices.get('agent')}, gatherer={choices.get('gatherer')}, seed {cfg.seed}: "
            f"{cfg.total_timesteps:,} timesteps, {cfg.total_comparisons:,} comparisons, {cfg.num_iterations} "
            "iterations")


def train(cfg: DictConfig) -> float:
    """Run preference comparisons as configured; return the metric named by ``optimized_metric``."""
    torch.set_num_threads(cfg.torch_threads)
    datasets.disable_progress_bars()  # one bar, the loop's, is enough
    run = RunFolder(HydraConfig.get().runtime.output_dir)
    loop = build_loop(cfg)
    log.info("rlhp-train: %s", _describe(cfg), extra=CONSOLE)
    log.info("run folder: %s", run.path, extra=CONSOLE)
    logger = build(cfg.logger)
    logger.start(cfg, run.path)
    bar = ProgressBar(loop.num_rounds)
    checkpointer = Checkpointer(run, cfg.checkpoint_every, OmegaConf.to_container(cfg.reward_net, resolve=True),
                                cfg.env.id)
    try:
        final = loop.run([MetricsWriter(run), logger, bar, checkpointer])
        bar.close()
        checkpointer.save(loop, "final")
        result = evaluate(loop, cfg)
        name = optimized_metric(cfg, loop.source.agent is not None)
        value = {**final, **result}.get(name)
        result["optimized_metric"] = {"name": name, "value": value}
        run.eval_json.write_text(json.dumps(result, indent=2))
        logger.summary(result)
    except BaseException:
        bar.close()
        logger.finish(exit_code=1)
        raise
    logger.finish()
    log.info("evaluation: %s; %s = %s (eval.json)", _headline(result), name,
             "n/a" if value is None else f"{value:.4g}", extra=CONSOLE)
    return math.nan if value is None else float(value)


def _headline(result: dict[str, Any]) -> str:
    parts = []
    if "true_return_mean" in result:
        parts.append(f"true return {result['true_return_mean']:.1f} ± {result['true_return_std']:.1f} over "
                     f"{result['episodes']} episodes")
    corr = result["reward_correlation"]
    parts.append(f"reward correlation {'n/a' if corr is None else f'{corr:.3f}'}")
    return ", ".join(parts)
