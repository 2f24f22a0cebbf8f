"""Builders shared by the tests (tests never import each other)."""

from __future__ import annotations

import functools
import importlib
import json
import multiprocessing
import os
import signal
import struct
import subprocess
import sys
import tempfile
import traceback
from collections import OrderedDict
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TypeVar

import datasets
import gymnasium as gym
import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import DictConfig
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecNormalize

import rlhp.experiment.options as config_options
from rlhp.data import FragmentPairs, Trajectory
from rlhp.data.state import Arrays, Loader, Saver
from rlhp.data.trajectory import Nested


def random_pairs(n: int, length: int = 5, obs_dim: int = 3, seed: int = 0) -> FragmentPairs:
    """Fragment pairs with Box(obs_dim) observations, Discrete(2) actions and true rewards."""
    rng = np.random.default_rng(seed)
    frames = rng.normal(size=(n, 2, length + 1, obs_dim)).astype(np.float32)
    obs = frames[:, :, :-1]
    return FragmentPairs(
        frames=frames, acts=rng.integers(0, 2, (n, 2, length)),
        dones=np.zeros((n, 2, length), bool), rews=obs[..., 0].astype(np.float32),
        episode=np.arange(2 * n).reshape(n, 2), start=np.zeros((n, 2), np.int64),
        quality=obs[..., 0].sum(-1).astype(np.float64),
    )


def spaces(obs_dim: int = 3) -> tuple[gym.Space, gym.Space]:
    """The spaces of :func:`random_pairs`."""
    return gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32), gym.spaces.Discrete(2)


def trajectory(length: int, offset: float = 0.0, terminal: bool = False) -> Trajectory:
    """A trajectory whose observation at step t is [offset + t] and reward is offset + t."""
    obs = (offset + np.arange(length + 1, dtype=np.float32))[:, None]
    return Trajectory(obs=obs, acts=np.arange(length) % 2, rews=obs[:-1, 0].copy(), terminal=terminal,
                      infos=[{"t": t} for t in range(length)])


T = TypeVar("T")


def saved_state(original: object) -> Callable[[T], T]:
    """``original``'s state saved now as data, as a checkpoint saves it (its arrays kept in memory, the rest through
    JSON text); call the result with a part built as ``original`` was to load the state into it."""
    arrays = Arrays({})
    tree = json.loads(json.dumps(Saver(arrays)(original)))

    def load(fresh: T) -> T:
        Loader(arrays).load(tree, fresh, "part")
        return fresh

    return load


def loaded_into(original: object, fresh: T) -> T:
    """``fresh`` (built as ``original`` was) with ``original``'s state saved and loaded into it."""
    return saved_state(original)(fresh)


def random_dataset(path: Path, env_id: str, episodes: int = 0, steps: int = 0) -> Path:
    """A random policy's episodes of ``env_id`` (at least ``episodes``, covering ``steps``) saved as an rlhp
    trajectory dataset at ``path``."""
    from rlhp.agents.policies import random_policy
    from rlhp.agents.rollout import rollout
    from rlhp.data import save_trajectories
    from rlhp.envs import GymEnv

    venv = GymEnv(env_id, n_envs=2).make(seed=0)
    venv.action_space.seed(0)
    save_trajectories(rollout(venv, random_policy(venv.action_space), steps=steps, episodes=episodes), path,
                      metadata={}, observation_space=venv.observation_space, action_space=venv.action_space)
    return path


CONF = Path(__file__).resolve().parent.parent / "rlhp" / "conf"

OPTION_NEEDS = {
    ("env", "gym"): ["env.id=Pendulum-v1", "agent=sac"],
    ("agent", "sac"): ["env=gym", "env.id=Pendulum-v1"],  # continuous actions
    ("agent", "td3"): ["env=gym", "env.id=Pendulum-v1"],
    ("agent", "sbx_sac"): ["env=gym", "env.id=Pendulum-v1"],
    ("agent", "tqc"): ["env=gym", "env.id=Pendulum-v1"],
    ("agent", "crossq"): ["env=gym", "env.id=Pendulum-v1"],
    ("reward_net", "cnn"): ["env=minatar"],  # image observations
    ("task", "backflip"): ["env=gym", "env.id=Hopper-v5", "agent=sac"],  # a MuJoCo body that can turn
    ("method", "qpa"): ["env=gym", "env.id=Pendulum-v1", "agent=sac"],  # its hybrid replay: an off-policy agent
    ("method", "qpa_dmc"): ["env=gym", "env.id=Pendulum-v1", "agent=sac", "fragment_length=20"],  # crops of 5-15 short
    ("method", "qpa_metaworld"): ["env=gym", "env.id=Pendulum-v1", "agent=sac"],
    # A warm start learns from the pre-training: 512 steps on each of debug=fast's 4 env copies, five whole episodes.
    ("reward_trainer/warm_start", "intrinsic"): ["trajectories.unsupervised_steps=2048"],
    ("method", "rime"): ["trajectories.unsupervised_steps=2048"],
    # One copy of each DMC or Meta-World env (debug=fast asks for 4; a Meta-World copy takes seconds to build).
    **{("experiment", o): ["env.n_envs=1"] for o in config_options.group_options("experiment")
       if o.startswith(("bpref/", "bpref_cpu/"))},
}
"""Overrides an option of rlhp-train needs beside it to compose and build (its required keys, a matching env)."""


def config_groups(skip: set[str] = frozenset()) -> list[str]:
    """Every config group with options, a nested one by its path (``reward_trainer/crop``); Hydra's own and
    ``skip`` left out."""
    return sorted(str(d.relative_to(CONF)) for d in CONF.rglob("*") if d.is_dir() and any(d.glob("*.yaml"))
                  and d.relative_to(CONF).parts[0] not in {"hydra", "__pycache__", *skip}
                  and str(d.parent.relative_to(CONF)) not in config_options.OPTION_FOLDERS)


def group_options(group: str) -> list[str]:
    """The options of a config group (its YAML files' names), as the command line reads them."""
    options = config_options.group_options(group)
    assert options is not None, f"{group} is not a config group of rlhp's"
    return options


def composed(config: str, overrides: list[str], hydra: bool = False) -> DictConfig:
    """``config`` composed with ``overrides`` as the command line would: the task's config (with Hydra's own
    node only when ``hydra``), and no Hydra runtime state: the builder and ``train`` need none."""
    with initialize_config_module("rlhp.conf", version_base="1.3"):
        return compose(config, overrides=overrides, return_hydra_config=hydra)


class NoPictures(gym.Env):
    """An env that draws nothing (every env gymnasium registers renders rgb_array)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Always the same start."""
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Nothing moves."""
        return np.zeros(2, np.float32), 0.0, False, False, {}


NO_PICTURES = "rlhp-test/NoPictures-v0"
gym.register(NO_PICTURES, entry_point=NoPictures, max_episode_steps=50)

BIN = Path(sys.executable).parent
FAST = ["debug=fast", "logger=none"]


COMMANDS = {e.name: e for e in entry_points(group="console_scripts") if e.name.startswith("rlhp-")}
"""The installed rlhp commands: what each console script calls."""

# The commands run in processes forked from a server that has imported what every command imports (torch,
# datasets, Hydra, SB3, and torch's compiler, which its optimisers load) and what the JAX agents add (JAX, Flax,
# Optax, SBX: 2 s more): a fresh interpreter spends about 3 s on the first, and the suite starts hundreds of
# commands. Each child is still a process of its own, with its own argv, folder, environment, output and exit
# status, and runs what the console script runs.
_FORKS = multiprocessing.get_context("forkserver")
_FORKS.set_forkserver_preload(["torch", "torch._dynamo", "datasets", "hydra", "stable_baselines3", "jax", "flax.linen",
                               "optax", "sbx", "rlhp.experiment.cli", "rlhp.experiment.train"])


def _run_command(cmd: str, argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """In the forked child: run ``cmd`` as its console script would, its output to the files ``out`` and ``err``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
    sys.argv = [str(BIN / cmd), *argv]
    code = 0
    try:
        sys.exit(COMMANDS[cmd].load()())  # as the console script does: what main returns is the exit status
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # as the interpreter would exit, but without multiprocessing's own reporting


def _run_killed(target: tuple[str, str, int], argv: list[str], cwd: str, env: dict[str, str], out: str,
                err: str) -> None:
    """In the forked child: ``rlhp-train`` with ``argv``, killed (SIGKILL) at the ``nth`` call of a function."""
    module, path, nth = target
    *parents, name = path.split(".")
    owner = importlib.import_module(module)
    for parent in parents:
        owner = getattr(owner, parent)
    original, calls = getattr(owner, name), []

    def killer(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, killer)
    _run_command("rlhp-train", argv, cwd, env, out, err)


LOAD_NEWEST = ("import sys; from rlhp.experiment.checkpoints import load_checkpoint; from rlhp.runs import RunFolder; "
               "load_checkpoint(RunFolder(sys.argv[1]).saved_checkpoints()[-1])")
"""Loads the newest checkpoint of the run folder given as the first argument."""


def assert_loads_in_a_fresh_interpreter(run_dir: Path) -> None:
    """The run's newest checkpoint loads in a fresh interpreter, as ``rlhp-train resume=`` from a shell reads it: the
    fork server's children share what it imported, and a class cloudpickle stored by value may load only there (SBX's
    activation names jax.Array)."""
    fresh = subprocess.run([sys.executable, "-c", LOAD_NEWEST, str(run_dir)], capture_output=True, text=True,
                           timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]


def run_killed(module: str, path: str, nth: int, *overrides: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``rlhp-train`` with ``overrides`` until the ``nth`` call of ``path`` (``Class.method`` or a function) in
    ``module`` kills it with SIGKILL, as a crash would; in a child of the fork server, as :func:`run_cli`. The
    function must be looked up where it is defined when called (a name imported elsewhere keeps the original)."""
    if not _forkable():
        changed = set(_read_at_import(os.environ).items()) ^ set(_read_at_import(_SERVER_ENV).items())
        pytest.fail(f"run_killed forks from the command server, and these variables, read at import, changed: "
                    f"{sorted(changed)}")
    return _forked("rlhp-train", list(overrides), cwd, _command_env(), functools.partial(_run_killed, (module, path,
                                                                                                        nth)))


def start_command_server() -> None:
    """Start the fork server now, with the environment the suite starts with (see :func:`run_cli`)."""
    global _SERVER_ENV
    _SERVER_ENV = dict(os.environ)
    child = _FORKS.Process(target=os._exit, args=(0,))
    child.start()
    child.join()


_SERVER_ENV: dict[str, str] = {}
"""The environment the fork server started with."""


def run_cli(cmd: str, *overrides: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run an installed rlhp command; fail with its output when it exits non-zero unexpectedly.

    The command runs in a child of the fork server, unless the test changed a variable that a preloaded library
    reads once, at import (huggingface_hub's ``HF_HUB_OFFLINE``): such a command gets a fresh interpreter, as its
    console script."""
    env = _command_env()
    if not _forkable():
        proc = subprocess.run([str(BIN / cmd), *overrides], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=600)
    else:
        proc = _forked(cmd, list(overrides), cwd, env, functools.partial(_run_command, cmd))
    if check and proc.returncode != 0:
        pytest.fail(f"{cmd} {' '.join(overrides)} exited {proc.returncode}\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def _command_env() -> dict[str, str]:
    """The test's environment, with W&B offline and Hydra's short errors, for a command."""
    return {**os.environ, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0"}


def _forkable() -> bool:
    """Whether a command can run forked: the server is up and the variables read at import are as it found them."""
    return bool(_SERVER_ENV) and _read_at_import(os.environ) == _read_at_import(_SERVER_ENV)


IMPORT_TIME_PREFIXES = ("HF_", "HUGGINGFACE_", "TORCH", "PYTORCH", "CUDA", "OMP_", "MKL_", "JAX_", "XLA_",
                        "PYTHONPATH")
"""Variables the preloaded libraries read once, at import (huggingface_hub's and datasets' settings, torch's, JAX's
config), and PYTHONPATH, which the interpreter reads at its start (a user's own modules); the rest are read when
used, and a child sees the test's values of them."""


def _read_at_import(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)}


def _forked(cmd: str, argv: list[str], cwd: Path, env: dict[str, str],
            target: Callable[[list[str], str, dict[str, str], str, str], None]) -> subprocess.CompletedProcess:
    """``cmd`` run by ``target`` (:func:`_run_command` bound to it, or a variant) in a child of the fork server, as
    :func:`subprocess.run` reports a process."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        child = _FORKS.Process(target=target, args=(argv, str(cwd), env, out, err))
        child.start()
        child.join(600)
        if child.exitcode is None:
            child.kill()
            child.join()
            pytest.fail(f"{cmd} {' '.join(argv)} ran over 600 s")
        return subprocess.CompletedProcess([cmd, *argv], child.exitcode, Path(out).read_text(), Path(err).read_text())


SPACES = [
    gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
    gym.spaces.Box(0, 255, (6, 5, 3), np.uint8),
    gym.spaces.Box(-3, 3, (), np.int64),
    gym.spaces.Box(-1, 1, (2, 2), np.float16),
    gym.spaces.Discrete(5, start=-2),
    gym.spaces.MultiDiscrete([3, 4, 2]),
    gym.spaces.MultiBinary([2, 3]),
    gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (4, 4, 1), np.uint8), "pos": gym.spaces.Discrete(3)}),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Dict({"v": gym.spaces.Box(-1, 1, (3,), np.float64)}),
                      gym.spaces.MultiBinary(4)]),
]


def stacked(space: gym.Space, n: int) -> Nested:
    """``n`` samples of ``space`` with a leading time axis, nested like the space."""
    samples = [space.sample() for _ in range(n)]
    if isinstance(space, gym.spaces.Dict):
        return {k: stacked_from([s[k] for s in samples]) for k in space.spaces}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(stacked_from([s[i] for s in samples]) for i in range(len(space.spaces)))
    return np.stack(samples)


def stacked_from(samples: list) -> Nested:
    if isinstance(samples[0], dict):
        return {k: stacked_from([s[k] for s in samples]) for k in samples[0]}
    if isinstance(samples[0], tuple):
        return tuple(stacked_from([s[i] for s in samples]) for i in range(len(samples[0])))
    return np.stack(samples)


def assert_nested_equal(got: Nested, want: Nested) -> None:
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_nested_equal(got[k], want[k])
    elif isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_nested_equal(g, w)
    else:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def imitation_dataset(trajs):
    """What imitation.data.huggingface_utils.trajectories_to_dataset writes: Dataset.from_dict of
    per-episode arrays, with infos as one (jsonpickle) JSON string per step."""
    return datasets.Dataset.from_dict({
        "obs": [t.obs for t in trajs], "acts": [t.acts for t in trajs],
        "infos": [[json.dumps(i) for i in t.infos] for t in trajs],
        "terminal": [t.terminal for t in trajs], "rews": [t.rews for t in trajs],
    })


def zoo_repo(tmp_path, normalize: bool, **config):
    """A local folder in rl-baselines3-zoo's Hub layout for a tiny PPO on CartPole-v1."""
    repo = tmp_path / "ppo-CartPole-v1"
    repo.mkdir()
    venv = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    if normalize:
        venv = VecNormalize(venv, norm_reward=False)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))  # not an empty /tmp/SB3-<time> folder per test
    model.learn(256)
    model.save(repo / "ppo-CartPole-v1.zip")
    if normalize:
        venv.save(str(repo / "vec_normalize.pkl"))
    # The zoo dumps its hyperparameters as an OrderedDict.
    (repo / "config.yml").write_text(yaml.dump(OrderedDict([("n_envs", 2), ("normalize", normalize), *config.items()])))
    (repo / "env_kwargs.yml").write_text(yaml.dump({}))
    return repo


class Counter(gym.Env):
    """obs = [tag * 10_000 + episode * 100 + t]; true reward 0.5 * t; terminates after ``terminate_at``
    steps (0: never). The tag tells env copies apart."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(5)

    def __init__(self, terminate_at: int = 0, tag: int = 0) -> None:
        self.terminate_at, self.tag, self.episode, self.t = terminate_at, tag, -1, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.tag * 10_000 + self.episode * 100 + self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.5 * self.t, self.t == self.terminate_at, False, {}


def wandb_records(run_dir: Path, kind: str) -> list:
    """The records of one kind (``history``, ``run``, ...) of the offline W&B run in ``run_dir/wandb``.

    The ``.wandb`` file is a LevelDB-style log (32 KiB blocks of records, each with a 7-byte header:
    checksum, length, type; 1 = whole, 2/3/4 = first/middle/last part) after a 7-byte W&B header, and
    each record is a ``wandb_internal_pb2.Record``. wandb itself no longer ships a Python reader.
    """
    from wandb.proto import wandb_internal_pb2  # here: a machine without wandb (a lent GPU) still runs the rest

    (path,) = run_dir.glob("wandb/offline-run-*/*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, pending, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _, length, part = struct.unpack("<IHB", data[pos:pos + 7])
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if part in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == kind:
                records.append(getattr(record, kind))
    return records


def wandb_history(run_dir: Path) -> list[dict[str, float]]:
    """The history rows of the offline W&B run in ``run_dir/wandb``."""
    return [{item.nested_key[0] if item.nested_key else item.key: json.loads(item.value_json) for item in row.item}
            for row in wandb_records(run_dir, "history")]
