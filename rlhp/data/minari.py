"""Minari datasets (Farama's standard, which replaced D4RL): read by id from the local Minari root, and written
from rlhp's trajectories. Nothing downloads here: ``minari download <id>`` fetches a dataset where there is a
network, into the root that ``MINARI_DATASETS_PATH`` names (default ``~/.minari/datasets``)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlhp.data.spaces import space_to_json
from rlhp.data.trajectory import Trajectory
from rlhp.errors import ConfigError, DataError

_MINARI_ID = re.compile(r"^[\w.-]+(/[\w.-]+)*-v\d+$")
"""Minari's dataset ids: ``[namespace/]name-v<version>``, e.g. ``mujoco/hopper/medium-v0``."""
INSTALL = "pip install 'rlhp[offline]'"

RLHP_NAMESPACE = "rlhp/"
"""The Minari namespace of the datasets rlhp makes (``rlhp-collect minari_id=rlhp/...``): no server has them."""

_REPLAY = ("rlhp-collect expert=sac_pendulum expert.env.id={env} expert.algorithm._target_=sbx.SAC "
           "expert.algorithm.learning_rate=3e-4 +expert.algorithm.learning_starts=10000 expert.total_timesteps={steps} "
           "replay.keep=true replay.stop_at_return={stop} minari_id={id}")
RECIPES = {
    "rlhp/hopper/medium-replay-v0": _REPLAY.format(env="Hopper-v5", steps=300_000, stop=1000,
                                                   id="rlhp/hopper/medium-replay-v0"),
    "rlhp/walker2d/medium-replay-v0": _REPLAY.format(env="Walker2d-v5", steps=500_000, stop=1500,
                                                     id="rlhp/walker2d/medium-replay-v0"),
}
"""The command that makes each dataset the shipped experiments read (a SAC agent's whole training replay until its
last 10 episodes average about a third of D4RL's expert return; hours on one core)."""


def looks_like_minari_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Minari dataset id (``namespace/name-v0``)."""
    return bool(_MINARI_ID.match(text))


def _minari() -> Any:
    """The ``minari`` module, or a config error saying how to install it."""
    if importlib.util.find_spec("minari") is None:
        raise ConfigError("trajectories.path", f"names a Minari dataset, and minari is not installed: {INSTALL}")
    import minari

    return minari


def root() -> Path:
    """The local Minari root (``MINARI_DATASETS_PATH``, default ``~/.minari/datasets``)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    return get_dataset_path()


def local_minari_id(source: str) -> bool:
    """Whether ``source`` is the id of a dataset in the local Minari root (False when minari is not installed)."""
    if not looks_like_minari_id(source) or importlib.util.find_spec("minari") is None:
        return False
    return (root() / source / "data").is_dir()


def open_minari(dataset_id: str, key: str) -> tuple[list[Trajectory], dict[str, Any]]:
    """The episodes of the local Minari dataset ``dataset_id`` as trajectories (``episode`` its Minari episode
    id), with its spaces as rlhp's metadata; a config error naming ``key`` where no such dataset is local."""
    minari = _minari()
    if not local_minari_id(dataset_id):
        where = f"{dataset_id!r} is not a local path, nor a dataset in the local Minari root ({str(root())!r}, " \
                "MINARI_DATASETS_PATH)"
        if dataset_id.startswith(RLHP_NAMESPACE):  # made here, never downloaded
            recipe = RECIPES.get(dataset_id, f"rlhp-collect expert=<an expert> replay.keep=true minari_id={dataset_id}")
            raise ConfigError(key, f"{where}: rlhp makes it, once (hours on one core): `{recipe}`")
        raise ConfigError(key, f"{where}: fetch it where there is a network with `minari download {dataset_id}` and "
                          "copy the root here")
    try:
        dataset = minari.load_dataset(dataset_id)
        episodes = list(dataset.iterate_episodes())
    except (OSError, ValueError, KeyError) as err:
        raise DataError(f"Minari dataset {dataset_id!r} could not be read ({type(err).__name__}: {err})") from None
    if not episodes:
        raise DataError(f"Minari dataset {dataset_id!r} holds no episodes")
    trajectories = [Trajectory(obs=e.observations, acts=e.actions, rews=np.asarray(e.rewards, np.float64),
                               terminal=bool(e.terminations[-1]), episode=int(e.id)) for e in episodes]
    meta = {"env_id": dataset.spec.env_spec.id if dataset.spec.env_spec is not None else None,
            "observation_space": space_to_json(dataset.observation_space),
            "action_space": space_to_json(dataset.action_space), "minari_id": dataset_id}
    return trajectories, meta


def check_new_minari_id(dataset_id: Any, key: str) -> None:
    """Refuse (naming ``key``) a Minari id that is malformed or already in the local root: nothing is overwritten,
    and a command checks this before it trains or collects anything."""
    if not isinstance(dataset_id, str) or not looks_like_minari_id(dataset_id):
        raise ConfigError(key, f"{dataset_id!r} is not a Minari dataset id like 'rlhp/hopper/medium-replay-v0'")
    _minari()
    if (root() / dataset_id).exists():
        raise ConfigError(key, f"{dataset_id!r} already exists in the Minari root ({str(root())!r}); pick another "
                          "id or version, or delete it with `minari delete`")


def save_minari(trajectories: list[Trajectory], dataset_id: str, observation_space: gym.Space,
                action_space: gym.Space, env_id: str, algorithm: str, description: str) -> Path:
    """Write ``trajectories`` as the Minari dataset ``dataset_id`` in the local Minari root (refused when that id
    exists there: nothing is overwritten); return its folder."""
    check_new_minari_id(dataset_id, "minari_id")
    minari = _minari()
    from minari.data_collector.episode_buffer import EpisodeBuffer

    buffers = [EpisodeBuffer(id=i, observations=t.obs, actions=t.acts, rewards=list(t.rews),
                             terminations=[False] * (len(t) - 1) + [t.terminal],
                             truncations=[False] * (len(t) - 1) + [not t.terminal])
               for i, t in enumerate(trajectories)]
    # Minari records the env's id for recover_environment(); ids it cannot make (rlhp's own options) are kept
    # in the description instead. HDF5, as D4RL's datasets in Minari: its Arrow storage measures the whole
    # folder after each episode it writes, a time that grows with the square of the episodes (minutes at 1,000).
    env = env_id if env_id in gym.registry else None
    minari.create_dataset_from_buffers(
        dataset_id, buffers, env=env, eval_env=env, observation_space=observation_space,
        action_space=action_space, algorithm_name=algorithm, author="rlhp", author_email="rlhp@localhost",
        code_permalink="https://github.com/rlhp", description=description, data_format="hdf5")
    return root() / dataset_id
