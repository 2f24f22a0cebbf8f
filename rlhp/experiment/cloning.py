"""Behavioural cloning as commands use it: ``rlhp-bc`` (a fresh agent cloned and saved) and the cloning before a
run (``pretrain=bc``), each evaluated on the true reward."""

from __future__ import annotations

import logging

import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import set_random_seed

from rlhp.demos.bc import BehaviourCloning
from rlhp.envs import GymEnv
from rlhp.errors import ConfigError
from rlhp.experiment.config import build
from rlhp.experiment.evaluation import policy_return
from rlhp.experiment.launch import Launch
from rlhp.logs import CONSOLE
from rlhp.runs import RunFolder, write_json

log = logging.getLogger(__name__)


def clone_and_evaluate(cloning: BehaviourCloning, algorithm: BaseAlgorithm, env: GymEnv, episodes: int,
                       seed: int) -> dict[str, float]:
    """Clone the demonstrations into ``algorithm``; its loss and the cloned policy's true return over ``episodes``
    on fresh copies of ``env`` (``bc_true_return_mean``...), also on the console."""
    result = cloning(algorithm, seed)
    returns = policy_return(algorithm, env, episodes, seed + 40_000)
    result.update({f"bc_{k}": v for k, v in returns.items()})
    log.info("behavioural cloning: loss %.4f, true return %.1f ± %.1f", result["bc_loss"],
             result["bc_true_return_mean"], result["bc_true_return_std"], extra=CONSOLE)
    return result


def clone(cfg: DictConfig, launch: Launch) -> dict[str, float]:
    """``rlhp-bc``: a fresh agent cloned from demonstrations, evaluated (``eval.json``) and saved (``agent.zip``)."""
    if OmegaConf.is_missing(cfg.pretrain, "path"):
        raise ConfigError("pretrain.path", "is required: the demonstrations, e.g. rlhp-collect's dataset/ folder")
    torch.set_num_threads(cfg.torch_threads)
    run = RunFolder(launch.run_dir)
    set_random_seed(cfg.seed)
    env = build(cfg.env)
    algorithm = build(cfg.agent)(env=env.make(cfg.seed), seed=cfg.seed)
    result = clone_and_evaluate(build(cfg.pretrain), algorithm, env, cfg.evaluation.episodes, cfg.seed)
    algorithm.save(run.path / "agent.zip")
    write_json(run.eval_json, result)
    log.info("run folder: %s (agent.zip, eval.json)", run.path, extra=CONSOLE)
    return result
