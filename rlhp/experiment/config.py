"""Config checks and object building: fail early, naming the key and the fix."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

import hydra
import torch
from hydra.errors import InstantiationException
from omegaconf import DictConfig, ListConfig, OmegaConf

from rlhp.api import INTERFACES, misfit
from rlhp.data.minari import check_new_minari_id
from rlhp.envs import MAX_ENVS
from rlhp.errors import ArgumentError, ConfigError, RlhpError
from rlhp.experiment.preflight import quiet_object, unimportable
from rlhp.experiment.typecheck import hints, mismatch

SEEDS = 2**32 - 1
"""The largest seed: numpy's legacy seeding, which SB3 calls, takes 32 bits."""

OPTIMIZABLE = {
    # eval.json
    "true_return_mean": "the final policy's mean true return (deterministic episodes)",
    "true_return_std": "its standard deviation",
    "success_rate": "the share of its episodes that succeeded at any step (envs that say: env=metaworld)",
    "reward_correlation": "Pearson correlation of learned and true reward on held-out transitions",
    # the last round's metrics
    "reward_loss": "cross-entropy of the reward model on its training pairs",
    "reward_accuracy": "share of training pairs with a preference whose preferred fragment the model ranks higher",
    "reward_tie_gap": "mean |P(first preferred) - 0.5| of the model on tied training pairs",
    "gt_reward_loss": "cross-entropy of the true reward on the same pairs (a ceiling)",
    "val_loss": "cross-entropy on the validation split (needs reward_trainer.val_split > 0)",
    "val_accuracy": "accuracy on the validation split (needs reward_trainer.val_split > 0)",
    "wall_s": "seconds spent in the loop",
}
"""What ``optimized_metric`` may name: the number ``train(cfg)`` returns to a sweeper."""
FIT_METRICS = ("reward_loss", "reward_accuracy", "reward_tie_gap", "gt_reward_loss", "val_loss", "val_accuracy")
"""The names among them that the last round's reward update writes."""


def build(node: DictConfig, **context: Any) -> Any:
    """Instantiate ``node`` from its ``_target_``, passing the context objects it names.

    Parts declare what they need (``reward_net``, ``rng``, ``env``...) as constructor
    arguments; the loop offers every shared object and each part takes only its own.
    A bad value rejected by a part's constructor becomes a :class:`ConfigError` for the node.
    """
    key = node._get_full_key(None) or "config"
    try:
        target = quiet_object(node._target_)
    except Exception as err:
        raise unimportable(key, node._target_, err) from None
    params = inspect.signature(target).parameters
    _check_options(node, key, target, params)
    wanted = {k: v for k, v in context.items() if k in params and k not in node}
    # Nested parts (e.g. active selection's base fragmenter) get the same context.
    wanted.update({k: build(v, **context) for k, v in node.items()
                   if isinstance(v, DictConfig) and "_target_" in v})
    try:
        part = hydra.utils.instantiate(node, **wanted)
    except InstantiationException as err:
        cause = err.__cause__
        if isinstance(cause, ArgumentError):
            raise ConfigError(f"{key}.{cause.argument}", cause.problem) from None
        if isinstance(cause, RlhpError):
            raise cause from None
        if isinstance(cause, (ValueError, TypeError)):
            raise ConfigError(key, f"is invalid: {cause}") from None
        raise
    interface = INTERFACES.get(key)
    wrong = misfit(part, interface) if interface is not None and not node.get("_partial_", False) else None
    if wrong:
        raise ConfigError(f"{key}._target_", f"is {node._target_}, which {wrong}")
    return part


def _check_options(node: DictConfig, key: str, target: Any, params: Mapping[str, inspect.Parameter]) -> None:
    """Every key of ``node`` is an argument of ``target`` and fits its type hint (named in full if not)."""
    open_ended = any(p.kind == p.VAR_KEYWORD for p in params.values())
    hinted = hints(target)
    for name in node.keys():
        if name.startswith("_") and name.endswith("_") or OmegaConf.is_missing(node, name):
            continue  # _target_, _partial_, _args_; a missing value is named by the validation
        value = node[name]
        if name not in params and not open_ended:
            options = [p for p in params if params[p].kind not in (params[p].VAR_POSITIONAL, params[p].VAR_KEYWORD)]
            close = difflib.get_close_matches(name, options, n=1)
            hint = f"did you mean {key}.{close[0]}? " if close else ""
            if key in INTERFACES and "." not in key:  # a group's part swapped by its _target_ alone
                hint += f"(a class of one's own in place of an option: ~{key} +{key}._target_=... drops the option's " \
                        "keys) "
            raise ConfigError(f"{key}.{name}", f"is not an option of {getattr(target, '__name__', target)}; {hint}"
                              f"its options are {', '.join(options)}")
        wrong = mismatch(value, hinted[name]) if name in hinted else None
        if wrong:
            raise ConfigError(f"{key}.{name}", f"must be {wrong}, got {value!r}")


def _require(cfg: DictConfig, key: str, ok: bool, problem: str) -> None:
    if not ok:
        raise ConfigError(key, problem)


LARGEST = 2**53
"""The largest count a config may hold: every count is exact as a float64 and fits numpy's int64."""


def _int(cfg: DictConfig, key: str, minimum: int, maximum: int = LARGEST) -> int:
    value = OmegaConf.select(cfg, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"must be an integer, got {value!r}")
    _require(cfg, key, value >= minimum, f"must be at least {minimum}, got {value}")
    _require(cfg, key, value <= maximum, f"must be at most {maximum:,}, got {value:,}")
    return value


def _fraction(cfg: DictConfig, key: str) -> float:
    value = OmegaConf.select(cfg, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(key, f"must be a number, got {value!r}")
    _require(cfg, key, 0 <= value <= 1, f"must lie in [0, 1], got {value}")
    return float(value)


def check_known_keys(cfg: DictConfig, config_name: str) -> None:
    """Refuse a top-level key that the command does not have (``+total_comparison=5`` is a typo, not a setting)."""
    conf = files("rlhp.conf")
    primary = OmegaConf.load(str(conf / f"{config_name}.yaml"))
    known = {k for k in primary if k not in ("defaults", "hydra")}
    known |= {group.name for group in conf.iterdir() if group.is_dir() and group.name not in ("hydra", "__pycache__")}
    for key in cfg:
        if key not in known and key != "hydra":
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            guess = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(str(key), f"is not an option of rlhp-{config_name}{guess} (`rlhp-{config_name} --help` "
                              "lists them)")


def _positive(cfg: DictConfig, key: str) -> None:
    value = OmegaConf.select(cfg, key)
    _require(cfg, key, isinstance(value, int | float) and not isinstance(value, bool) and value > 0,
             f"must be a positive number, got {value!r}")


def validate_train(cfg: DictConfig) -> None:
    """Check the training config before anything is built or trained."""
    check_known_keys(cfg, "train")
    if OmegaConf.is_missing(cfg.env, "id"):
        raise ConfigError("env.id", "is required with env=gym, e.g. `env=gym env.id=Pendulum-v1`")
    if "path" in cfg.trajectories.keys() and OmegaConf.is_missing(cfg.trajectories, "path"):
        raise ConfigError("trajectories.path", "is required with trajectories=dataset or demos: a dataset "
                          "folder, e.g. a run's trajectories/ or rlhp-collect's dataset/")
    _int(cfg, "seed", 0, SEEDS)
    _int(cfg, "total_timesteps", 0)
    _int(cfg, "total_comparisons", 1)  # with none, the reward never trains and every metric is empty
    _int(cfg, "num_rounds", 2, 1_000_001)  # round 0 and one more at least; rounds each cost seconds: more is a typo
    _int(cfg, "fragment_length", 1)
    _int(cfg, "checkpoint_every", 0)
    _int(cfg, "keep_checkpoints", 1)
    _int(cfg, "torch_threads", 1)
    _int(cfg, "evaluation.episodes", 1)
    _int(cfg, "evaluation.correlation_steps", 2)
    if cfg.max_dataset_size is not None:
        _int(cfg, "max_dataset_size", 1)
    # A threshold of 0 clips every return difference to 0: no gradient, the reward never learns.
    _positive(cfg, "preference_model.threshold")
    discount = cfg.preference_model.discount_factor
    _require(cfg, "preference_model.discount_factor", isinstance(discount, int | float)
             and not isinstance(discount, bool) and 0 < discount <= 1,
             f"must lie in (0, 1], got {discount!r}")
    _fraction(cfg, "initial_comparison_frac")
    _fraction(cfg, "trajectories.exploration_frac") if "exploration_frac" in cfg.trajectories else None
    for key in ("initial_epoch_multiplier", "transition_oversampling"):
        value = cfg[key]
        _require(cfg, key, isinstance(value, (int, float)) and value > 0,
                 f"must be a positive number, got {value!r}")
    _fraction(cfg, "preference_model.noise_prob")
    _require(cfg, "device", cfg.device in ("cpu", "cuda", "auto") or str(cfg.device).startswith("cuda:"),
             f"must be cpu, cuda, cuda:<n> or auto, got {cfg.device!r}")
    _require(cfg, "device", not str(cfg.device).startswith("cuda") or torch.cuda.is_available(),
             f"is {cfg.device}, but torch sees no GPU here; use device=cpu or device=auto")
    metric = cfg.optimized_metric
    _require(cfg, "optimized_metric", metric is None or metric in OPTIMIZABLE,
             f"must be null or one of {', '.join(OPTIMIZABLE)}, got {metric!r}")
    # A round that brought no label trains no reward, so the last round's fit may be missing.
    _require(cfg, "optimized_metric", metric not in FIT_METRICS or cfg.get("reward_updates") != "new_labels",
             f"is {metric}, a metric of the last round's reward update, and with reward_updates=new_labels the last "
             "round may have none: optimise true_return_mean or reward_correlation, or set "
             "reward_updates=every_round")
    _require(cfg, "optimized_metric", metric not in ("val_loss", "val_accuracy") or cfg.reward_trainer.val_split > 0,
             f"is {metric}, which needs a validation split: set reward_trainer.val_split, e.g. 0.2")


def _optional_number(cfg: DictConfig, key: str) -> None:
    value = OmegaConf.select(cfg, key)
    _require(cfg, key, value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)),
             f"must be a number or null, got {value!r}")


def validate_collect(cfg: DictConfig) -> None:
    """Check the collection config before an expert is trained or loaded."""
    check_known_keys(cfg, "collect")
    for key, option in (("path", "zip: the model's .zip file"), ("repo_id", "hub: e.g. sb3/ppo-CartPole-v1")):
        if key in cfg.expert.keys() and OmegaConf.is_missing(cfg.expert, key):
            raise ConfigError(f"expert.{key}", f"is required with expert={option}")
    _int(cfg, "seed", 0, SEEDS)
    _int(cfg, "n_envs", 1, MAX_ENVS)
    _require(cfg, "episodes", (cfg.episodes is None) != (cfg.timesteps is None),
             f"and timesteps: set exactly one (got episodes={cfg.episodes}, timesteps={cfg.timesteps}); "
             "e.g. `episodes=null timesteps=10000`")
    _int(cfg, "episodes" if cfg.episodes is not None else "timesteps", 1)
    _fraction(cfg, "epsilon")
    _optional_number(cfg, "min_mean_return")
    _int(cfg, "video.episodes", 0)
    _int(cfg, "video.fps", 1)
    ranked = cfg.ranked
    for key in ("checkpoints", "epsilons"):
        _require(cfg, f"ranked.{key}", isinstance(ranked[key], ListConfig),
                 f"must be a list (e.g. [] or [0.5,0.0]), got {ranked[key]!r}")
    _require(cfg, "ranked", not (ranked.checkpoints and ranked.epsilons),
             "sets both checkpoints and epsilons; rank by one of them")
    for i in range(len(ranked.epsilons)):
        _fraction(cfg, f"ranked.epsilons.{i}")
    for i in range(len(ranked.checkpoints)):
        _int(cfg, f"ranked.checkpoints.{i}", 1)
    _require(cfg, "replay.keep", isinstance(cfg.replay.keep, bool), f"must be true or false, got {cfg.replay.keep!r}")
    _optional_number(cfg, "replay.stop_at_return")
    _int(cfg, "replay.window", 1)
    _require(cfg, "replay.keep", not (cfg.replay.keep and (ranked.checkpoints or ranked.epsilons)),
             "keeps the training replay, one dataset of every quality on the way; drop ranked.*")
    if cfg.minari_id is not None:
        check_new_minari_id(cfg.minari_id, "minari_id")
    repo_id = cfg.push_to_hub.repo_id
    _require(cfg, "push_to_hub.repo_id", repo_id is None or isinstance(repo_id, str),
             f"must be a dataset repo id like 'my-org/cartpole-expert', got {repo_id!r}")
