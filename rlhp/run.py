"""``train(cfg)``: builds every part from the config (or resumes them from the run folder), runs the
loop, writes the run folder."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed

from rlhp.callbacks import Checkpointer, LabelJournal, MetricsWriter, ProgressBar, TrajectoryWriter
from rlhp.checkpoints import latest_loadable
from rlhp.config import build, validate_train
from rlhp.data import PreferenceDataset
from rlhp.demos.bc import clone_and_evaluate
from rlhp.errors import ConfigError, RunError, Stopped
from rlhp.evaluation import policy_return, reward_correlation
from rlhp.loggers import RunIdentity
from rlhp.logs import CONSOLE
from rlhp.loop import PreferenceComparisons
from rlhp.policies import random_policy
from rlhp.rollout import rollout
from rlhp.runs import MetricsCSV, RunFolder, write_json
from rlhp.schedules import comparison_schedule
from rlhp.stops import StopRequest

log = logging.getLogger(__name__)


def build_loop(cfg: DictConfig, run: RunFolder | None = None) -> PreferenceComparisons:
    """Instantiate every part of the loop from the config (validated first); parts that write into the
    run folder (human queries) are given ``run``."""
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
                       action_space=probe.action_space).to(resolve_device(cfg.device))
    probe.close()
    true_reward = cfg.feedback.true_reward
    source = build(cfg.trajectories, algorithm=build(cfg.agent), env=env,
                   reward_net=None if true_reward else reward_net, seed=cfg.seed, rng=rng)
    if true_reward and source.agent is None:
        raise ConfigError("feedback", f"is true_reward, which trains an agent on the env's reward, but trajectories="
                          f"{HydraConfig.get().runtime.choices.get('trajectories')} trains none")
    if source.agent is None and cfg.optimized_metric in ("true_return_mean", "true_return_std"):
        raise ConfigError("optimized_metric", f"is {cfg.optimized_metric}, but trajectories="
                          f"{HydraConfig.get().runtime.choices.get('trajectories')} trains no agent to return "
                          "a true return; use reward_correlation")
    context = {"rng": rng, "reward_net": reward_net, "env": env}
    if run is not None:
        context["run_dir"] = run.path
    return PreferenceComparisons(
        source=source,
        fragmenter=build(cfg.fragmenter, **context),
        querent=build(cfg.querent, **context),
        gatherer=build(cfg.gatherer, **context),
        dataset=PreferenceDataset(cfg.max_dataset_size),
        reward_trainer=build(cfg.reward_trainer, **context),
        # The true-reward ceiling queries nothing: every round only trains the agent.
        comparisons=[0] * (cfg.num_iterations + 1) if true_reward else comparison_schedule(
            cfg.total_comparisons, cfg.initial_comparison_frac, cfg.num_iterations, build(cfg.query_schedule)),
        total_timesteps=cfg.total_timesteps,
        fragment_length=cfg.fragment_length,
        rng=rng,
        transition_oversampling=cfg.transition_oversampling,
        initial_epoch_multiplier=cfg.initial_epoch_multiplier,
        allow_variable_horizon=cfg.allow_variable_horizon,
    )


def resolve_device(device: str) -> torch.device:
    """``auto`` is the GPU when torch sees one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else torch.device(device)


def optimized_metric(cfg: DictConfig, trains_agent: bool) -> str:
    """The name of the number ``train`` returns: the config's, else the final true return where there is one."""
    return cfg.optimized_metric or ("true_return_mean" if trains_agent else "reward_correlation")


def evaluate(loop: PreferenceComparisons, cfg: DictConfig) -> dict[str, Any]:
    """The final policy's true return and the learned reward's correlation on fresh transitions (none for
    the true-reward ceiling, which learns no reward)."""
    result: dict[str, Any] = {}
    env = build(cfg.env)
    agent = loop.source.agent
    if agent is not None:
        result.update(policy_return(agent.algorithm, env, cfg.evaluation.episodes, cfg.seed + 20_000))
    if cfg.feedback.true_reward:
        return result
    # Held out: the source's unseen episodes and a random policy's, so true rewards vary.
    venv = env.make(cfg.seed + 30_000)
    venv.action_space.seed(cfg.seed)
    steps = cfg.evaluation.correlation_steps
    random, held_out = rollout(venv, random_policy(venv.action_space), steps // 2), loop.source.held_out(steps // 2)
    net = loop.reward_trainer.net
    result["reward_correlation"] = reward_correlation(net, random + held_out)
    result["correlation_transitions"] = sum(map(len, random + held_out))
    # Where the reward can be trusted, each alone: held-out episodes of its source (the agent's own for an
    # agent trainer, unseen data for a dataset), a random policy's states, the trained agent's states.
    result["reward_correlation_held_out"] = reward_correlation(net, held_out)
    result["reward_correlation_random"] = reward_correlation(net, random)
    if agent is not None:  # the states the trained agent visits
        agent_episodes = rollout(venv, lambda obs: agent.algorithm.predict(obs, deterministic=False)[0], steps // 2)
        result["reward_correlation_agent"] = reward_correlation(net, agent_episodes)
    return result


def pretrain(loop: PreferenceComparisons, cfg: DictConfig, run: RunFolder) -> None:
    """Behavioural cloning of the agent before the first round; its loss and the cloned policy's true
    return go to ``pretrain.json`` and the console."""
    agent = loop.source.agent
    if agent is None:
        raise ConfigError("pretrain", "needs an agent to pretrain; this trajectory source trains none")
    write_json(run.path / "pretrain.json", clone_and_evaluate(cfg, agent.algorithm))


def start_or_resume(run: RunFolder, cfg: DictConfig, overrides: list[str]
                    ) -> tuple[PreferenceComparisons, DictConfig, list[str]]:
    """A new loop, or the one saved in the run folder's newest loadable checkpoint, with the config and
    overrides it runs under. A folder that holds checkpoints resumes by itself when the config is the
    same (a requeued job re-running its command); ``resume=<folder>`` resumes with the saved config."""
    if cfg.resume is not None and Path(cfg.resume).resolve() != run.path.resolve():
        raise ConfigError("resume", f"is {cfg.resume!r} but hydra.run.dir is {str(run.path)!r}; give resume alone")
    if run.finished():
        raise RunError(f"run folder {str(run.path)!r} holds a finished run (see its eval.json); start new runs in "
                       "another folder")
    found = latest_loadable(run)
    if found is None:
        if cfg.resume is not None:
            raise ConfigError("resume", f"{cfg.resume!r} holds no complete checkpoint to resume from")
        loop = build_loop(cfg, run)
        if cfg.get("pretrain") is not None:
            pretrain(loop, cfg, run)
        return loop, cfg, overrides
    path, loop, saved, saved_overrides = found
    if cfg.resume is not None:
        extra = [o for o in overrides if not o.startswith(("resume=", "hydra."))]
        if extra:
            raise ConfigError("resume", f"continues the run as it was configured ({' '.join(saved_overrides)}); "
                              f"drop the other overrides {extra} or start a new run")
        # Hydra has just written this launch's config into .hydra/; the record must stay the run's.
        (run.path / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(saved))
        (run.path / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(saved_overrides)))
    else:
        differ = _differences(saved, cfg)
        if differ:
            raise ConfigError(differ[0], f"differs from the run already in {str(run.path)!r} ({len(differ)} keys "
                              f"differ: {', '.join(differ[:5])}); run in another folder, or resume={run.path}")
    log.info("resuming from %s: %d of %d rounds done", path, loop.iteration, loop.num_rounds, extra=CONSOLE)
    return loop, saved, saved_overrides


def _differences(saved: DictConfig, cfg: DictConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (``resume`` and ``hydra`` aside)."""
    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            return {k: v for key, value in node.items() for k, v in flat(value, f"{prefix}{key}.").items()}
        return {prefix[:-1]: node}

    a, b = (flat({k: v for k, v in OmegaConf.to_container(c, resolve=True).items() if k not in ("resume", "hydra")})
            for c in (saved, cfg))
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def identity(run: RunFolder) -> RunIdentity:
    """The run's place in a tracker: alone, its folder's name; in a sweep, grouped by the sweep."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return RunIdentity(name=run.path.name)
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith("hydra.")]
    return RunIdentity(name=",".join(overrides) or run.path.name, group=Path(hydra_cfg.sweep.dir).name,
                       job_type=",".join(o for o in overrides if not o.startswith("seed=")) or "train")


def _describe(cfg: DictConfig) -> str:
    choices = HydraConfig.get().runtime.choices
    if cfg.feedback.true_reward:
        return (f"{cfg.env.id}, agent={choices.get('agent')} on the true reward (the ceiling), seed {cfg.seed}: "
                f"{cfg.total_timesteps:,} timesteps, {cfg.num_iterations + 1} rounds")
    return (f"{cfg.env.id}, agent={choices.get('agent')}, gatherer={choices.get('gatherer')}, seed {cfg.seed}: "
            f"{cfg.total_timesteps:,} timesteps, {cfg.total_comparisons:,} comparisons, {cfg.num_iterations} "
            "iterations")


def train(cfg: DictConfig) -> float:
    """Run preference comparisons as configured; return the metric named by ``optimized_metric``."""
    torch.set_num_threads(cfg.torch_threads)
    datasets.disable_progress_bars()  # one bar, the loop's, is enough
    hydra_cfg = HydraConfig.get()
    run = RunFolder(hydra_cfg.runtime.output_dir)
    with run.lock():
        loop, cfg, overrides = start_or_resume(run, cfg, list(hydra_cfg.overrides.task))
        return _train(run, loop, cfg, overrides)


def _train(run: RunFolder, loop: PreferenceComparisons, cfg: DictConfig, overrides: list[str]) -> float:
    log.info("rlhp-train: %s", _describe(cfg), extra=CONSOLE)
    log.info("run folder: %s", run.path, extra=CONSOLE)
    metrics = MetricsCSV(run.metrics_csv)
    shards = TrajectoryWriter(run, cfg.env.id, *_spaces(loop))
    loop.label_sink = journal = LabelJournal(run)
    # What rounds after the checkpoint wrote, the resumed run writes again, identically.
    metrics.keep_rounds(loop.iteration)
    shards.forget_after(loop.iteration)
    journal.forget_after(loop.iteration)
    logger = build(cfg.logger)
    logger.start(cfg, run.path, identity(run))
    bar = ProgressBar(loop.num_rounds, done=loop.iteration)
    checkpointer = Checkpointer(run, cfg.checkpoint_every, cfg.keep_checkpoints, cfg, overrides,
                                OmegaConf.to_container(cfg.reward_net, resolve=True))
    try:
        with StopRequest() as stop, loop.gatherer.session(stop=lambda: bool(stop)):
            loop.run([MetricsWriter(metrics), shards, logger, bar, checkpointer], stop=lambda: bool(stop))
        bar.close()
        if stop:
            if checkpointer.saved_rounds != loop.iteration:
                checkpointer.save(loop, f"iter_{loop.iteration - 1:04d}")
            raise Stopped(f"{stop.signal.name} after round {loop.iteration - 1} of {loop.num_rounds}; the checkpoint "
                          f"is saved: continue with `rlhp-train resume={run.path}`", stop.signal)
        checkpointer.save(loop, "final")
        result = evaluate(loop, cfg)
        name = optimized_metric(cfg, loop.source.agent is not None)
        rounds = run.metrics()
        value = {**(rounds[-1] if rounds else {}), **result}.get(name)
        result["optimized_metric"] = {"name": name, "value": value}
        write_json(run.eval_json, result)
        logger.summary(result)
    except BaseException as err:
        bar.close()
        logger.finish(exit_code=130 if isinstance(err, Stopped | KeyboardInterrupt) else 1)
        raise
    logger.finish()
    log.info("evaluation: %s; %s = %s (eval.json)", _headline(result), name,
             "n/a" if value is None else f"{value:.4g}", extra=CONSOLE)
    return math.nan if value is None else float(value)


def _spaces(loop: PreferenceComparisons) -> tuple:
    net = loop.reward_trainer.net
    return net.observation_space, net.action_space


def _headline(result: dict[str, Any]) -> str:
    parts = []
    if "true_return_mean" in result:
        parts.append(f"true return {result['true_return_mean']:.1f} ± {result['true_return_std']:.1f} over "
                     f"{result['episodes']} episodes")
    if "reward_correlation" in result:
        corr = result["reward_correlation"]
        parts.append(f"reward correlation {'n/a' if corr is None else f'{corr:.3f}'}")
    return ", ".join(parts)
