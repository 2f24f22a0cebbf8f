"""``train(cfg)``: builds every part from the config, runs the loop, writes the run folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import datasets
import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed
from tqdm.auto import tqdm

from rlhp.agents import random_policy, rollout
from rlhp.config import ConfigError, build, validate_train
from rlhp.data import save_trajectories
from rlhp.evaluation import policy_return, reward_correlation
from rlhp.loggers import CSVMetrics
from rlhp.loop import PreferenceComparisons
from rlhp.preferences import PreferenceDataset
from rlhp.schedules import comparison_schedule

log = logging.getLogger(__name__)


class ProgressBar:
    """A tqdm bar over rounds showing timesteps, comparisons, reward accuracy and true return."""

    def __init__(self, total: int) -> None:
        self.bar = tqdm(total=total, desc="rounds", unit="round", dynamic_ncols=True)

    def __call__(self, loop: PreferenceComparisons, metrics: dict[str, float]) -> None:
        """Advance one round."""
        shown = {"steps": metrics["timesteps"], "prefs": metrics["comparisons"]}
        for key, name, fmt in (("reward_accuracy", "acc", "{:.2f}"), ("true_return_mean", "return", "{:.1f}")):
            if key in metrics:
                shown[name] = fmt.format(metrics[key])
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update()
        log.info("round %d: %s", metrics["iteration"], {k: round(v, 4) for k, v in metrics.items()})

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


class Checkpointer:
    """Saves the loop's state to ``checkpoints/iter_XXXX`` every ``every`` rounds (0: never),
    and the trajectories sampled so far to ``trajectories/``, so a crash loses at most a round."""

    def __init__(self, run_dir: Path, every: int, reward_net_config: dict, env_id: str) -> None:
        self.run_dir, self.every, self.reward_net_config = run_dir, every, reward_net_config
        self.metadata = {"env_id": env_id, "policy": {"name": "rlhp-train agent", "source": str(run_dir)}}

    def __call__(self, loop: PreferenceComparisons, metrics: dict[str, float]) -> None:
        """Save when due, and always after the last round."""
        if self.every and (loop.iteration % self.every == 0 or loop.iteration == loop.num_rounds - 1):
            self.save(loop, f"iter_{loop.iteration:04d}")

    def save(self, loop: PreferenceComparisons, name: str) -> None:
        """Write ``checkpoints/<name>`` and the trajectories."""
        loop.save(self.run_dir / "checkpoints" / name, self.reward_net_config)
        if loop.trajectories:
            save_trajectories(loop.trajectories, self.run_dir / "trajectories", metadata=self.metadata,
                              observation_space=loop.reward_trainer.net.observation_space,
                              action_space=loop.reward_trainer.net.action_space)


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
        transition_oversampling=cfg.transition_oversampling,
        initial_epoch_multiplier=cfg.initial_epoch_multiplier,
        allow_variable_horizon=cfg.allow_variable_horizon,
    )


def evaluate(loop: PreferenceComparisons, cfg: DictConfig) -> dict:
    """The final policy's true return and the learned reward's correlation on fresh transitions."""
    result: dict = {}
    env = build(cfg.env)
    if hasattr(loop.source, "algorithm"):
        result.update(policy_return(loop.source.algorithm, env, cfg.evaluation.episodes, cfg.seed + 20_000))
    # Held out: the source's unseen episodes and a random policy's, so true rewards vary.
    venv = env.make(cfg.seed + 30_000)
    venv.action_space.seed(cfg.seed)
    steps = cfg.evaluation.correlation_steps
    held_out = rollout(venv, random_policy(venv), steps // 2) + loop.source.held_out(steps // 2)
    result["reward_correlation"] = reward_correlation(loop.reward_trainer.net, held_out)
    result["correlation_transitions"] = sum(map(len, held_out))
    return result


def train(cfg: DictConfig) -> float:
    """Run preference comparisons as configured; return the final mean true return."""
    torch.set_num_threads(cfg.torch_threads)
    datasets.disable_progress_bars()  # one bar, the loop's, is enough
    run_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    loop = build_loop(cfg)
    logger = build(cfg.logger)
    logger.start(cfg, run_dir)
    bar = ProgressBar(loop.num_rounds)
    checkpointer = Checkpointer(run_dir, cfg.checkpoint_every, OmegaConf.to_container(cfg.reward_net, resolve=True),
                                cfg.env.id)
    try:
        loop.run([CSVMetrics(run_dir / "metrics.csv"), logger, bar, checkpointer])
        bar.close()
        checkpointer.save(loop, "final")
        result = evaluate(loop, cfg)
        (run_dir / "eval.json").write_text(json.dumps(result, indent=2))
        log.info("evaluation: %s", result)
        logger.summary(result)
    except BaseException:
        bar.close()
        logger.finish(exit_code=1)
        raise
    logger.finish()
    return result.get("true_return_mean", result["reward_correlation"] or 0.0)
