"""Experts for ``rlhp-collect``: trained from per-env hyperparameters, or loaded from a .zip or a Hub repo.

Each expert yields :class:`Snapshot` s: the final policy, and for a trained expert also the
policies saved part-way through training (for ranked demonstrations).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import yaml
from huggingface_hub import snapshot_download
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from rlhp.agents.domains import check_domains
from rlhp.agents.policies import Policy
from rlhp.agents.reward_env import RewardVecEnvWrapper
from rlhp.data import Trajectory, TrajectoryRecorder
from rlhp.data.hub import is_repo_id
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError, DataError, NetworkError
from rlhp.rewards import EnvReward

log = logging.getLogger(__name__)

ALGOS: dict[str, type[BaseAlgorithm]] = {"a2c": A2C, "ddpg": DDPG, "dqn": DQN, "ppo": PPO, "sac": SAC, "td3": TD3}


@dataclass
class Snapshot:
    """A policy to collect from, with the training steps behind it."""

    model: BaseAlgorithm
    steps: int
    normalizer: VecNormalize | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def policy(self, deterministic: bool) -> Policy:
        """Actions for raw observations (normalised first when the expert was trained on normalised ones)."""
        norm = self.normalizer.normalize_obs if self.normalizer is not None else (lambda obs: obs)
        return lambda obs: self.model.predict(norm(obs), deterministic=deterministic)[0]


class Expert(Protocol):
    """Where demonstrations come from: an env and the policies to collect from in it."""

    env: GymEnv

    def snapshots(self, folder: Path, seed: int, checkpoints: Sequence[int] = (),
                  stop: Callable[[], bool] = lambda: False) -> list[Snapshot]:
        """The policies, worst first (the last is the expert itself); its model is saved as ``expert.zip``."""
        ...


class _SnapshotsAt(BaseCallback):
    """Saves the model once training passes each of the given steps, and ends training when ``stop()``.

    SB3's CheckpointCallback saves every N calls; ranked demonstrations need chosen steps.
    """

    def __init__(self, steps: Sequence[int], folder: Path, stop: Callable[[], bool]) -> None:
        super().__init__()
        self.pending, self.folder, self.stop = sorted(steps), folder, stop
        self.saved: list[tuple[int, Path]] = []

    def _on_step(self) -> bool:
        while self.pending and self.num_timesteps >= self.pending[0]:
            self.pending.pop(0)
            path = self.folder / f"step_{self.num_timesteps:08d}.zip"
            self.model.save(path)
            self.saved.append((self.num_timesteps, path))
        return not self.stop()


def _check_spaces(model: BaseAlgorithm, env: GymEnv, key: str, source: str) -> None:
    for name, space in zip(("observation_space", "action_space"), env.spaces()):
        if getattr(model, name) != space:
            raise ConfigError(key, f"{source} was trained with {name} {getattr(model, name)}, but env "
                              f"{env.id!r} has {space}; set the matching env")


def check_model_file(path: str, key: str) -> None:
    """Refuse (naming ``key``) a model path that is missing or a folder: a command checks this before it
    makes anything."""
    where = Path(path).expanduser()
    if where.is_dir():
        raise ConfigError(key, f"{path!r} is a folder; give the model's .zip file (SB3's model.save)")
    if not where.is_file():
        raise ConfigError(key, f"{path!r} does not exist")


def _load_model(algo: str, path: Path, key: str) -> BaseAlgorithm:
    if algo not in ALGOS:
        raise ConfigError(key, f"names algorithm {algo!r}; use one of {', '.join(ALGOS)}")
    check_model_file(str(path), key)
    try:
        return ALGOS[algo].load(path, device="cpu")
    except Exception as err:  # SB3 raises whatever zipfile, pickle or torch raised
        raise DataError(f"{str(path)!r} (from {key}) is not a {algo.upper()} model saved by stable-baselines3 "
                        f"({type(err).__name__}: {err})") from None


def _load_normalizer(path: Path | None, env: GymEnv) -> VecNormalize | None:
    if path is None:
        return None
    norm = VecNormalize.load(str(path), env.make(seed=0, n_envs=1))
    norm.training = False  # collection must not move the expert's statistics
    return norm


class TrainedExpert:
    """Trains an SB3 agent on the env's true reward, from per-env hyperparameters (as rl-baselines3-zoo).

    Args:
        algorithm: builds the SB3 algorithm from ``env`` and ``seed`` (a partial from config).
        env: the environment to train and collect in.
        total_timesteps: training budget.
    """

    def __init__(self, algorithm: Callable[..., BaseAlgorithm], env: GymEnv, total_timesteps: int) -> None:
        ArgumentError.check_whole_count("total_timesteps", total_timesteps)
        check_domains(algorithm, "expert.algorithm")
        self.algorithm, self.env, self.total_timesteps = algorithm, env, total_timesteps

    def snapshots(self, folder: Path, seed: int, checkpoints: Sequence[int] = (),
                  stop: Callable[[], bool] = lambda: False) -> list[Snapshot]:
        """Train, saving ``expert.zip`` and ``checkpoints/step_*.zip``; return the checkpoints, then the final.

        When ``stop()`` turns true, training ends there and what was trained is saved all the same."""
        early = sorted(int(c) for c in checkpoints)
        key = "ranked.checkpoints"
        if any(c < 1 for c in early) or len(set(early)) < len(early):
            raise ConfigError(key, f"must be distinct positive training steps, got {list(checkpoints)}")
        late = [c for c in early if c >= self.total_timesteps]
        if late:
            raise ConfigError(key, f"has {late} at or after the end of training (expert.total_timesteps="
                              f"{self.total_timesteps}); each must come before it (the final model is the top rank)")
        if early:
            (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
        progress = _SnapshotsAt(early, folder / "checkpoints", stop)
        model = self._train(self.env.make(seed), seed, folder, progress)
        log.info("saved %d checkpoints", len(progress.saved))
        info = {"algorithm": type(model).__name__, "source": "trained by rlhp-collect"}
        out = [Snapshot(type(model).load(path, device="cpu"), steps, info=info) for steps, path in progress.saved]
        return out + [Snapshot(model, model.num_timesteps, info=info)]

    def replay(self, folder: Path, seed: int, stop_at_return: float | None, window: int,
               stop: Callable[[], bool] = lambda: False) -> tuple[list[Trajectory], Snapshot]:
        """Train, keeping every episode trained on (the replay, D4RL's medium-replay recipe), until the last
        ``window`` of them average ``stop_at_return`` (None: the whole budget) or ``stop()``; return the finished
        training episodes, oldest first, and the model as trained (saved as ``expert.zip``)."""
        recorder = TrajectoryRecorder(self.env.n_envs, self.env.frame_stack)
        venv = RewardVecEnvWrapper(self.env.make(seed), EnvReward(), recorder)
        model = self._train(venv, seed, folder, _StopAtReturn(recorder, stop_at_return, window, stop))
        info = {"algorithm": type(model).__name__, "source": "trained by rlhp-collect"}
        return recorder.finished, Snapshot(model, model.num_timesteps, info=info)

    def _train(self, venv: VecEnv, seed: int, folder: Path, callback: BaseCallback) -> BaseAlgorithm:
        """The algorithm trained on ``venv`` for the budget (or until ``callback`` ends it), saved as
        ``expert.zip``."""
        model = self.algorithm(env=venv, seed=seed)
        model.set_logger(Logger(folder=None, output_formats=[]))  # not an empty /tmp/SB3-<time> folder
        log.info("training %s on %s for %d steps", type(model).__name__, self.env.id, self.total_timesteps)
        model.learn(self.total_timesteps, callback=callback, progress_bar=True)
        model.save(folder / "expert.zip")
        log.info("trained %d steps; saved expert.zip", model.num_timesteps)
        return model


class _StopAtReturn(BaseCallback):
    """Ends training once the last ``window`` finished episodes average ``target`` (never when None), or when
    ``stop()``."""

    def __init__(self, recorder: TrajectoryRecorder, target: float | None, window: int,
                 stop: Callable[[], bool]) -> None:
        super().__init__()
        self.recorder, self.target, self.window, self.stop = recorder, target, window, stop

    def _on_step(self) -> bool:
        episodes = self.recorder.finished[-self.window:]
        reached = (self.target is not None and len(episodes) == self.window
                   and float(np.mean([t.rews.sum() for t in episodes])) >= self.target)
        if reached:
            log.info("the last %d training episodes average %.1f >= %.1f: training ends at %d steps", self.window,
                     np.mean([t.rews.sum() for t in episodes]), self.target, self.num_timesteps)
        return not (reached or self.stop())


class _LoadedExpert:
    """An expert loaded from files: no training checkpoints; the model is checked against the env
    and copied to ``expert.zip``."""

    algo: str
    key: str  # the config key that names the files, for errors
    env: GymEnv

    def _files(self) -> tuple[Path, Path | None, str]:
        """The model's .zip, its VecNormalize statistics (or None), and where they came from."""
        raise NotImplementedError

    def snapshots(self, folder: Path, seed: int, checkpoints: Sequence[int] = (),
                  stop: Callable[[], bool] = lambda: False) -> list[Snapshot]:
        """The loaded model, with its normalisation when it has one (nothing to stop)."""
        if checkpoints:
            raise ConfigError("ranked.checkpoints", "needs an expert trained here; for a loaded expert rank by "
                              "noise instead, e.g. ranked.epsilons=[1.0,0.5,0.0]")
        model_path, stats, source = self._files()
        model = _load_model(self.algo, model_path, self.key)
        _check_spaces(model, self.env, self.key, source)
        model.save(folder / "expert.zip")
        info = {"algorithm": type(model).__name__, "source": source}
        return [Snapshot(model, model.num_timesteps, _load_normalizer(stats, self.env), info)]


class ZipExpert(_LoadedExpert):
    """An SB3 model saved as a ``.zip`` (``model.save``), optionally with its VecNormalize statistics.

    Args:
        path: the ``.zip`` file.
        algo: the SB3 algorithm that saved it (ppo, sac, ...).
        env: the environment to collect in; its spaces must match the model's.
        vec_normalize: ``vec_normalize.pkl`` when the model was trained on normalised observations.
    """

    key = "expert.path"

    def __init__(self, path: str, algo: str, env: GymEnv, vec_normalize: str | None = None) -> None:
        self.path = Path(path).expanduser()
        self.algo, self.env = algo.lower(), env
        self.vec_normalize = Path(vec_normalize).expanduser() if vec_normalize else None

    def _files(self) -> tuple[Path, Path | None, str]:
        if self.vec_normalize is not None:
            check_model_file(str(self.vec_normalize), "expert.vec_normalize")
        return self.path, self.vec_normalize, str(self.path)


_ZOO_NAME = re.compile(r"^(?P<algo>[a-z0-9]+)-(?P<env>.+)$")
_UNSUPPORTED_ZOO_KEYS = ("env_wrapper", "frame_stack")


class _ZooConfigLoader(yaml.SafeLoader):
    """Reads the zoo's config.yml (an OrderedDict dump) without executing arbitrary Python tags."""


_ZooConfigLoader.add_constructor(
    "tag:yaml.org,2002:python/object/apply:collections.OrderedDict",
    lambda loader, node: dict(loader.construct_sequence(node.value[0], deep=True)),
)


def _read_zoo_yaml(path: Path) -> dict[str, Any]:
    """A zoo repo's config.yml or env_kwargs.yml; {} when the repo has none."""
    return (yaml.load(path.read_text(), _ZooConfigLoader) or {}) if path.is_file() else {}


class HubExpert(_LoadedExpert):
    """A model repo in rl-baselines3-zoo's layout: ``{algo}-{env}.zip``, ``config.yml``,
    ``env_kwargs.yml`` and, when trained with normalisation, ``vec_normalize.pkl``.

    Args:
        repo_id: Hub model repo id (``sb3/ppo-CartPole-v1``) or a local folder in the same layout.
        env: overrides the environment named by the repo (``null``: take it from the repo name).
        revision: branch, tag or commit on the Hub.
    """

    key = "expert.repo_id"

    def __init__(self, repo_id: str, env: GymEnv | None = None, revision: str | None = None) -> None:
        name = Path(repo_id).name
        match = _ZOO_NAME.match(name)
        if not match or match["algo"] not in ALGOS:
            raise ConfigError(self.key, f"{repo_id!r} is not named like a zoo repo '<algo>-<env id>' "
                              f"with algo one of {', '.join(ALGOS)}, e.g. sb3/ppo-CartPole-v1")
        self.repo_id, self.name, self.algo, self.revision = repo_id, name, match["algo"], revision
        self._env_id, self._env = match["env"], env

    @cached_property
    def folder(self) -> Path:
        """The repo's files: the local folder itself, or a download (once) into the Hub cache."""
        local = Path(self.repo_id).expanduser()
        if local.is_dir():
            return local
        if not is_repo_id(self.repo_id):
            raise ConfigError(self.key, f"{self.repo_id!r} is neither a local folder nor a Hub repo id like "
                              "sb3/ppo-CartPole-v1")
        try:
            return Path(snapshot_download(self.repo_id, revision=self.revision,
                                          allow_patterns=["*.zip", "*.yml", "vec_normalize.pkl"]))
        except (HfHubHTTPError, OfflineModeIsEnabled, OSError, ValueError) as err:
            raise NetworkError(f"could not download model repo {self.repo_id!r} ({self.key}) from the Hub "
                               f"({type(err).__name__}: {err}); check the id, your network or HF_TOKEN") from None

    @property
    def env(self) -> GymEnv:
        """The env given in config, else the one the repo was trained on (with its env_kwargs.yml)."""
        if self._env is None:
            self._env = GymEnv(self._env_id, n_envs=8, kwargs=_read_zoo_yaml(self.folder / "env_kwargs.yml"))
        return self._env

    def _files(self) -> tuple[Path, Path | None, str]:
        config = _read_zoo_yaml(self.folder / "config.yml")
        for key in _UNSUPPORTED_ZOO_KEYS:
            if config.get(key):
                raise ConfigError(self.key, f"{self.repo_id!r} was trained with {key}={config[key]!r}, "
                                  "which rlhp-collect does not apply; its policy would see other observations")
        stats = self.folder / "vec_normalize.pkl"
        if config.get("normalize") and not stats.is_file():
            raise ConfigError(self.key, f"{self.repo_id!r} was trained with normalize but has no vec_normalize.pkl")
        return self.folder / f"{self.name}.zip", stats if stats.is_file() else None, f"hf://{self.repo_id}"
