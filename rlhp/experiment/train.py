"""``train(cfg, launch)``: a run's lifecycle. Start (or resume from the run folder), run the rounds with
their callbacks, evaluate, finish; the metrics come back in memory. The parts come from
:func:`rlhp.experiment.compose.compose`."""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path
from typing import Any

import datasets
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm

from rlhp.demos.bc import BehaviourCloning
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError, RunError, Stopped
from rlhp.experiment.checkpoints import RunRecord, latest_loadable
from rlhp.experiment.cloning import clone_and_evaluate
from rlhp.experiment.compose import comparisons, compose, describe
from rlhp.experiment.config import build, validate_train
from rlhp.experiment.evaluation import evaluate, headline
from rlhp.experiment.launch import Launch, override_key
from rlhp.experiment.stops import StopRequest
from rlhp.logs import CONSOLE
from rlhp.loop import Callback, Loop
from rlhp.runs import RunFolder, write_json

log = logging.getLogger(__name__)

SAVING = ("checkpoint_every", "keep_checkpoints")
"""Keys that say how often a run saves itself, not what it computes: a resumed run takes the command's values
(a long run can be saved more often from its next start on)."""

BUDGET = ("total_timesteps", "num_rounds", "total_comparisons", "initial_comparison_frac")
"""Keys that say how long a run is: ``resume=<folder>`` naming them runs it on (a finished run too) as a run given
that budget from the start would, where the rounds it has run are that run's first rounds (as long, as labelled)."""


def train(cfg: DictConfig, launch: Launch) -> dict[str, Any]:
    """Run as configured, in ``launch``'s run folder; return the final evaluation (``eval.json``: with
    ``optimized_metric``, the name and value of the metric a sweeper optimises) and ``last_round``, the last
    round's metrics."""
    torch.set_num_threads(cfg.torch_threads)
    # On a GPU, cuDNN's fastest convolutions may add in a racing order, and a run (or its resume after a kill)
    # would then differ from itself: exact resume is worth their speed. No effect on a CPU.
    torch.backends.cudnn.deterministic = True
    datasets.disable_progress_bars()  # one bar, the loop's, is enough
    run = RunFolder(launch.run_dir)
    with run.lock():
        if launch.sweep_dir is not None and run.finished():  # a sweep launched again continues where it was
            log.info("%s: finished before, kept as it is (eval.json)", run.path, extra=CONSOLE)
            return {**run.evaluation(), "last_round": run.metrics()[-1]}
        loop, cfg, overrides, fresh = start_or_resume(run, cfg, launch.overrides)
        if fresh:
            run.write_choices(launch.choices)
        if fresh and cfg.get("pretrain") is not None:
            pretrain(loop, build(cfg.pretrain), cfg.evaluation.episodes, cfg.seed, run)
        log.info("rlhp-train: %s", describe(loop, cfg, run.choices()), extra=CONSOLE)
        log.info("run folder: %s", run.path, extra=CONSOLE)
        env = loop.env.unrecorded()  # the writers and the evaluation draw no clips
        logger, callbacks = _callbacks(cfg, run, env, overrides)
        logger.init_run(cfg, run.path, launch.identity)
        try:
            for callback in callbacks:
                callback.start(loop)
            with StopRequest() as stop, loop.session(stop=lambda: bool(stop)):
                last_round = loop.iterate(callbacks, stop=lambda: bool(stop))
            for callback in callbacks:
                callback.end(loop)
            if stop:
                raise Stopped(f"{stop.signal.name} after round {loop.iteration - 1} of {loop.num_rounds}; the "
                              f"checkpoint is saved: continue with `rlhp-train resume={run.path}`", stop.signal)
            result = final_result(loop, env, cfg, last_round)
            write_json(run.eval_json, result)
            logger.summary(result)
        except BaseException as err:
            for callback in callbacks:
                callback.close()
            logger.finish(exit_code=130 if isinstance(err, Stopped | KeyboardInterrupt) else 1)
            raise
        for callback in callbacks:
            callback.close()
        logger.finish()
    name, value = result["optimized_metric"]["name"], result["optimized_metric"]["value"]
    log.info("evaluation: %s; %s = %s (eval.json)", headline(result), name,
             "n/a" if value is None else f"{value:.4g}", extra=CONSOLE)
    return {**result, "last_round": last_round}


def _callbacks(cfg: DictConfig, run: RunFolder, env: GymEnv, overrides: list[str]) -> tuple[Any, list[Callback]]:
    """The run's logger, and its callbacks with the logger among them, in the order they are told of a round."""
    context = {"run": run, "env": env, "record": RunRecord(cfg, overrides)}
    logger = build(cfg.logger)
    callbacks = sorted([*(build(node, **context) for node in cfg.get("callbacks", {}).values()), logger],
                       key=lambda callback: callback.order)
    return logger, callbacks


def final_result(loop: Loop, env: GymEnv, cfg: DictConfig, last_round: dict[str, float]) -> dict[str, Any]:
    """What ``eval.json`` holds: the final evaluation, the metric a sweeper optimises (``optimized_metric``: its
    name and value, from the evaluation or the last round) and the protocol the run followed."""
    result = evaluate(loop, env, cfg.evaluation.episodes, cfg.evaluation.correlation_steps, cfg.seed)
    name = cfg.optimized_metric or ("true_return_mean" if "true_return_mean" in result else "reward_correlation")
    result["optimized_metric"] = {"name": name, "value": {**last_round, **result}.get(name)}
    if "protocol" in cfg:  # a run made before protocols were recorded has none
        result["protocol"] = OmegaConf.to_container(cfg.protocol)
    return result


def optimized_value(result: dict[str, Any]) -> float:
    """The value of ``optimized_metric`` in :func:`train`'s result, for a sweeper (NaN where it has none)."""
    value = result["optimized_metric"]["value"]
    return math.nan if value is None else float(value)


def pretrain(loop: Loop, cloning: BehaviourCloning, episodes: int, seed: int, run: RunFolder) -> None:
    """Behavioural cloning of the loop's agent before its first round (``pretrain.json``)."""
    if not loop.agent.trains:
        raise ConfigError("pretrain", "needs an agent to pretrain; this trajectory source trains none")
    if not isinstance(loop.agent.algorithm, BaseAlgorithm):
        raise ConfigError("pretrain", "clones into a stable-baselines3 agent; an offline agent learns from its "
                          "dataset itself (IQL's and TD3+BC's losses hold their own behaviour cloning)")
    write_json(run.path / "pretrain.json",
               clone_and_evaluate(cloning, loop.agent.algorithm, loop.env.unrecorded(), episodes, seed))


def start_or_resume(run: RunFolder, cfg: DictConfig, overrides: list[str]
                    ) -> tuple[Loop, DictConfig, list[str], bool]:
    """A new loop, or the one saved in the run folder's newest loadable checkpoint, with the config and
    overrides it runs under and whether it is new. A folder that holds checkpoints resumes by itself when the
    config is the same (a requeued job re-running its command); ``resume=<folder>`` resumes with the saved
    config. Either way the :data:`SAVING` keys may change: the command's values apply from then on; and
    ``resume=`` with :data:`BUDGET` keys runs the run on (a finished one too) to the budget they say."""
    if cfg.resume is not None and Path(cfg.resume).resolve() != run.path.resolve():
        raise ConfigError("resume", f"is {cfg.resume!r} but hydra.run.dir is {str(run.path)!r}; give resume alone")
    keys = {override_key(o) for o in overrides}
    budget = keys & set(BUDGET) if cfg.resume is not None else set()
    if run.finished() and not budget:
        raise RunError(f"run folder {str(run.path)!r} holds a finished run (see its eval.json); start new runs in "
                       f"another folder, or run it on to a longer budget: resume={run.path} total_timesteps=N "
                       "num_rounds=M")
    found = latest_loadable(run)
    if found is None:
        if cfg.resume is not None:
            raise ConfigError("resume", f"{cfg.resume!r} holds no complete checkpoint to resume from")
        loop = compose(cfg, run.path)
        run.write_record(cfg, overrides)  # a folder holding an older record keeps it until now
        return loop, cfg, overrides, True
    path, loop, saved, saved_overrides = found
    # The saving keys are the command's: those it names after resume=, all of them when it is the same command.
    named = (keys & set(SAVING) if cfg.resume is not None else set(SAVING)) | budget
    saved = saved.copy()
    for key in named:
        saved[key] = cfg[key]  # keys that interpolate them (the checkpoint callback's) follow
    validate_train(saved)  # the command's values of them are checked as a new run's are
    saved_overrides = [o for o in saved_overrides if override_key(o) not in named] \
        + [o for o in overrides if override_key(o) in named]
    if cfg.resume is not None:
        extra = [o for o in overrides if not o.startswith(("resume=", "hydra."))
                 and override_key(o) not in (*SAVING, *BUDGET)]
        if extra:
            raise ConfigError("resume", f"continues the run as it was configured ({' '.join(saved_overrides)}); "
                              f"drop the other overrides {extra} or start a new run")
    else:
        differ = _differences(saved, cfg)
        if differ:
            raise ConfigError(differ[0], f"differs from the run already in {str(run.path)!r} ({len(differ)} keys "
                              f"differ: {', '.join(differ[:5])}); run in another folder, or resume={run.path}")
    if budget:  # the last change: a refused command leaves the folder as it was
        lengthen(run, loop, saved)
    log.info("resuming from %s: %d of %d rounds done", path, loop.iteration, loop.num_rounds, extra=CONSOLE)
    return loop, saved, saved_overrides, False


def lengthen(run: RunFolder, loop: Loop, cfg: DictConfig) -> None:
    """Give ``loop`` the budget ``cfg`` says (:data:`BUDGET`), refusing one its rounds run so far do not begin. A
    finished run's evaluation is kept as ``eval_<steps>.json``, and a ``final`` checkpoint (the same loop as its
    last round's) goes: the run is unfinished again until its new last round."""
    try:
        loop.lengthen(cfg.total_timesteps, cfg.num_rounds, comparisons(cfg))
    except ArgumentError as err:
        raise ConfigError(err.argument, err.problem) from None
    if run.finished():
        run.eval_json.rename(run.path / f"eval_{loop.timesteps}.json")
    # A resume reads final/ before any round's checkpoint: the rounds to come must not be resumed from it.
    final, last = run.checkpoint("final"), run.checkpoint(f"iter_{loop.iteration - 1:04d}")
    if final.is_dir() and last.is_dir():
        shutil.rmtree(final)
    elif final.is_dir():  # a run that kept no round checkpoint
        final.rename(last)
    log.info("run on to total_timesteps=%d over %d rounds", cfg.total_timesteps, loop.num_rounds, extra=CONSOLE)


def _differences(saved: DictConfig, cfg: DictConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (``resume`` and ``hydra`` aside)."""
    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            return {k: v for key, value in node.items() for k, v in flat(value, f"{prefix}{key}.").items()}
        return {prefix[:-1]: node}

    a, b = (flat({k: v for k, v in OmegaConf.to_container(c, resolve=True).items() if k not in ("resume", "hydra")})
            for c in (saved, cfg))
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
