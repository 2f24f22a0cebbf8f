"""Config fuzzing: every key of every option of every config group, read from the composed configs (not a
hand list), set to wrong types and extreme values by hypothesis.

The property: the command's validation path (``rlhp-train``: the builder, and behavioural cloning's part;
``rlhp-collect``: the config check and the expert's part) either refuses the value with an rlhp error whose
message names that full key (a config error, or a data error naming the key of a path), or builds everything.
Any other exception (a library's traceback) fails.

The fast form (the suite) tries a few values per key with a fixed seed. ``RLHP_FUZZ_DEEP=1`` tries more, and
runs the real command on every accepted value: it must end with exit 2 and one line naming the key, or train
a ``debug=fast`` run whose metrics.csv and eval.json hold only finite numbers.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import subprocess
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import BIN, OPTION_NEEDS, composed, config_groups, group_options
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, OmegaConf

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import save_trajectories
from rlhp.data.label_files import SegmentLabels, write_label_files
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.errors import RlhpError
from rlhp.experiment.collect import prepare
from rlhp.experiment.compose import compose
from rlhp.experiment.config import build
from rlhp.experiment.launch import Launch
from rlhp.experiment.train import optimized_value, train
from rlhp.runs import RunFolder

DEEP = os.environ.get("RLHP_FUZZ_DEEP") == "1"
EXAMPLES = 40 if DEEP else 4

CONF = files("rlhp.conf")
NOT_OPTIONS = {"hydra", "experiment", "method", "hparams_search", "debug", "__pycache__"}
"""Folders of rlhp/conf that are no component group (Hydra's own, named records of whole runs, and methods: settings
of other groups)."""
COLLECT_GROUPS = {"expert"}
SKIPPED = {
    ("expert", "hub"): "builds by downloading a Hub repo, which this machine cannot reach",
}
DATASET = Path(tempfile.gettempdir()) / "rlhp-fuzz-dataset"
"""A small CartPole trajectories dataset, for the options that read one (made once per machine; the path is
fixed because it is part of the test ids, which every xdist worker must collect alike)."""
LABELS = Path(tempfile.gettempdir()) / "rlhp-fuzz-labels"
"""Preference Transformer's label files naming pairs of :data:`DATASET`'s segments."""
CONTINUOUS = Path(tempfile.gettempdir()) / "rlhp-fuzz-pendulum"
"""A small Pendulum trajectories dataset, for the offline agents (continuous actions)."""
NEEDS = {
    ("trajectories", "dataset"): [f"trajectories.path={DATASET}"],
    **{("agent", offline): ["env=gym", "env.id=Pendulum-v1", "trajectories=dataset", f"trajectories.path={CONTINUOUS}"]
       for offline in ("iql", "td3bc")},
    ("reward_net", "preference_transformer"): ["env=gym", "env.id=Pendulum-v1", "agent=iql", "trajectories=dataset",
                                               f"trajectories.path={CONTINUOUS}"],  # it pays offline agents only
    **{(group, "label_file"): ["trajectories=dataset", f"trajectories.path={DATASET}", "fragmenter=label_file",
                               "gatherer=label_file", f"fragmenter.path={LABELS}"]
       for group in ("fragmenter", "gatherer")},
    ("trajectories", "demos"): [f"trajectories.path={DATASET}"],
    ("pretrain", "bc"): [f"pretrain.path={DATASET}"],
    ("expert", "zip"): ["expert.path=README.md"],
    **OPTION_NEEDS,
}
"""Overrides an option needs before it composes (its required keys)."""


def leaves(node: DictConfig, prefix: str) -> list[str]:
    """The full keys of ``node``'s values (nested nodes walked; ``_target_`` and the like left out)."""
    keys = []
    for name in node.keys():
        if str(name).startswith("_") and str(name).endswith("_"):
            continue
        full = f"{prefix}.{name}" if prefix else str(name)
        child = node._get_node(name)
        keys += leaves(child, full) if isinstance(child, DictConfig) and not child._is_none() else [full]
    return keys


def package(group: str, option: str) -> str:
    """Where an option's keys sit in the composed config: its group, unless its file names a package other
    than the root (an option of the root, e.g. an expert, still keeps its own keys under its group's name)."""
    first = (CONF / group / f"{option}.yaml").read_text().splitlines()[0]
    named = first.removeprefix("# @package ").strip() if first.startswith("# @package ") else "_global_"
    return group.replace("/", ".") if named == "_global_" else named


def cases() -> list[tuple[str, tuple[str, ...], str]]:
    """(command, the overrides that pick an option, full key) for every key of every option."""
    found = []
    top = composed("train", ["debug=fast"])
    found += [("train", (), key) for key in leaves(top, "") if not isinstance(top[key.split(".")[0]], DictConfig)
              or key.split(".")[0] in ("preference_model", "evaluation")]
    collect = composed("collect", [])
    found += [("collect", (), key) for key in leaves(collect, "") if key.split(".")[0] not in COLLECT_GROUPS]
    for group in config_groups(skip=NOT_OPTIONS):
        command = "collect" if group in COLLECT_GROUPS else "train"
        for option in group_options(group):
            if (group, option) in SKIPPED:
                continue
            pick = f"{group}=[{option}]" if group == "callbacks" else f"{group}={option}"
            overrides = (pick, *NEEDS.get((group, option), []))
            cfg = composed(command, ["debug=fast", *overrides] if command == "train" else list(overrides))
            where = package(group, option)
            found += [(command, overrides, key) for key in leaves(OmegaConf.select(cfg, where), where)]
    return found


NUMBERS = st.sampled_from([0, -1, 1, 2, 0.5, -0.5, 1e-12, 1e300, -1e300, 2**63, float("nan"), float("inf"),
                           float("-inf")])
WRONG = st.sampled_from(["", "abc", True, False, None, [], [0], [-1, 2], {"a": 1}])


def values(default: Any) -> st.SearchStrategy:
    """Wrong types and extreme values for a key whose default is ``default``; the extremes come first."""
    if isinstance(default, bool):
        return st.one_of(st.sampled_from([0, 1, 2, "yes", None]), WRONG)
    if isinstance(default, int | float):
        return st.one_of(NUMBERS, WRONG, st.floats(allow_nan=True, allow_infinity=True), st.integers())
    if isinstance(default, list):
        return st.one_of(st.lists(NUMBERS, max_size=3), WRONG, NUMBERS)
    return st.one_of(WRONG, NUMBERS, st.text(max_size=12))


def configured(command: str, overrides: tuple[str, ...]) -> DictConfig:
    return composed(command, ["debug=fast", "logger=none", *overrides] if command == "train" else list(overrides))


def validate(command: str, cfg: DictConfig, run_dir: Path) -> None:
    """The command's validation path: everything built that the run would build before it trains."""
    if command == "collect":
        prepare(cfg)
        return
    compose(cfg, run_dir)
    if cfg.get("pretrain") is not None:
        build(cfg.pretrain)


def cli_value(value: Any) -> str:
    """``value`` as Hydra's override grammar writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ",".join(cli_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{cli_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def numbers(text: str) -> list[float]:
    """The numbers among a CSV's cells or a JSON's values."""
    def number(cell: Any) -> float | None:
        try:
            return float(cell) if not isinstance(cell, bool) else None
        except (TypeError, ValueError):
            return None

    def walk(v: Any) -> list[Any]:
        if isinstance(v, dict):
            return [x for u in v.values() for x in walk(u)]
        return [x for u in v for x in walk(u)] if isinstance(v, list) else [v]

    cells = walk(json.loads(text)) if text.lstrip().startswith("{") else \
        [c for row in csv.reader(text.splitlines()[1:]) for c in row]
    return [x for x in map(number, cells) if x is not None]


def run_command(command: str, overrides: tuple[str, ...], key: str, value: Any, folder: Path) -> None:
    """The deep form: the real command with the value on its command line."""
    args = ["debug=fast", "logger=none"] if command == "train" else ["episodes=2", "expert.total_timesteps=256"]
    proc = subprocess.run([str(BIN / f"rlhp-{command}"), *args, *overrides, f"{key}={cli_value(value)}",
                           f"hydra.run.dir={folder}"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HYDRA_FULL_ERROR": "0"}, cwd=Path(__file__).parent.parent)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.count("\n") == 1 and key in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    for written in (folder / "metrics.csv", folder / "eval.json", folder / "collect.json"):
        assert not written.is_file() or all(map(math.isfinite, numbers(written.read_text()))), written.read_text()


@pytest.fixture(scope="module", autouse=True)
def dataset() -> None:
    """The trajectories the dataset options read."""
    for path, env_id in ((DATASET, FIXED_HORIZON_CARTPOLE), (CONTINUOUS, "Pendulum-v1")):
        if not (path / "state.json").is_file():
            venv = GymEnv(env_id).make(0, n_envs=2)
            staged = Path(tempfile.mkdtemp(dir=path.parent))
            save_trajectories(rollout(venv, random_policy(venv.action_space), episodes=4), staged / "data")
            with contextlib.suppress(OSError):  # another worker was first
                (staged / "data").rename(path)
            shutil.rmtree(staged)
    if not LABELS.is_dir():  # 20 pairs of 10-step segments of the four 500-step episodes
        staged = Path(tempfile.mkdtemp(dir=LABELS.parent))
        starts = np.random.default_rng(0).integers(0, 4, (20, 2)) * 500 + 100
        write_label_files(SegmentLabels(starts, np.ones(20, np.float32), 10), staged, "pt")
        with contextlib.suppress(OSError):
            staged.rename(LABELS)
        shutil.rmtree(staged, ignore_errors=True)  # gone when renamed


CASES = cases()


@pytest.mark.parametrize(("command", "overrides", "key"), CASES,
                         ids=[f"{c}:{' '.join(o)}:{k}" for c, o, k in CASES])
def test_every_value_of_every_key_is_refused_by_its_full_key_or_builds(command, overrides, key, tmp_path,
                                                                      tmp_path_factory):
    base = configured(command, overrides)
    default = OmegaConf.select(base, key)

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(value=values(default))
    def check(value: Any) -> None:
        cfg = base.copy()
        OmegaConf.update(cfg, key, value, merge=False)
        try:
            validate(command, cfg, Path(tempfile.mkdtemp(dir=tmp_path)))
        except RlhpError as err:  # a config error, or a data error naming the path and its key
            assert err.exit_code != 1 and key in str(err), f"{key}={value!r}: the error names another key: {err}"
            return
        if DEEP:
            run_command(command, overrides, key, value, tmp_path_factory.mktemp("run") / "run")

    check()


def test_the_fuzz_reads_every_group_and_option():
    groups = {o[0].split("=")[0] for _, o, _ in CASES if o}
    keyless = {"reward_learning"}  # its options take no keys (checked: they have no cases)
    assert groups == set(config_groups(skip=NOT_OPTIONS)) - keyless
    keys = {k for _, _, k in CASES}
    assert {"agent.gamma", "reward_net.hidden_sizes", "seed", "preference_model.threshold", "expert.algorithm.gamma",
            "episodes", "gatherer.teacher.mistake", "fragmenter.base.max_start"} <= keys
    assert len(CASES) > 150 and np.all([isinstance(k, str) for k in keys])


CALLBACK_OPTIONS = group_options("callbacks")


@settings(max_examples=25 if DEEP else 1, deadline=None, derandomize=not DEEP,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picked=st.lists(st.sampled_from(CALLBACK_OPTIONS), unique=True))
@example(picked=[])
@example(picked=["progress"])
@example(picked=list(reversed(CALLBACK_OPTIONS)))
def test_any_list_of_callbacks_in_any_order_runs_with_finite_metrics(picked, tmp_path_factory):
    # A list of parts, fuzzed: any subset in any order composes, builds and runs; what a run returns does not
    # depend on which files the callbacks write.
    run_dir = tmp_path_factory.mktemp("run")
    cfg = composed("train", ["debug=fast", "logger=none", f"callbacks=[{','.join(picked)}]",
                             "optimized_metric=reward_loss"])
    returned = train(cfg, Launch(run_dir))
    assert math.isfinite(optimized_value(returned)) and returned["last_round"]["iteration"] == 2
    assert all(math.isfinite(v) for v in returned["last_round"].values())
    run = RunFolder(run_dir)
    assert run.eval_json.is_file()
    assert run.metrics_csv.is_file() == ("metrics_csv" in picked)
    assert bool(run.checkpoints()) == ("checkpoint" in picked)
    assert (run_dir / "labels").is_dir() == ("labels" in picked)


PAIRED = {
    "fragment_length": [1, 5, 50, 200, 600], "total_comparisons": [1, 2, 5, 50], "num_rounds": [2, 3, 11],
    "initial_comparison_frac": [0.0, 0.1, 1.0], "transition_oversampling": [0.1, 1.0, 10.0],
    "initial_epoch_multiplier": [0.01, 1, 50], "max_dataset_size": [1, 3, None],
    "reward_trainer.batch_size": [1, 7, 1000], "reward_trainer.epochs": [1, 5],
    "reward_trainer.val_split": [0.0, 0.2, 0.9], "reward_net.members": [1, 2, 7],
    "agent.n_steps": [8, 128, 1024], "agent.batch_size": [8, 64, 512], "env.n_envs": [1, 4, 16],
}
"""Keys the loop's parts read beside each other, each with values that are valid alone (the key fuzzer sends
wrong ones): a rule between two of them shows only when both are set."""


@settings(max_examples=60 if DEEP else 3, deadline=None, derandomize=not DEEP, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_two_keys_valid_alone_are_refused_naming_one_of_them_or_run_with_finite_metrics(data, tmp_path_factory):
    first, second = data.draw(st.lists(st.sampled_from(sorted(PAIRED)), min_size=2, max_size=2, unique=True))
    values = {key: data.draw(st.sampled_from(PAIRED[key]), label=key) for key in (first, second)}
    cfg = configured("train", ())
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, merge=False)
    run_dir = tmp_path_factory.mktemp("pair")
    try:
        returned = train(cfg, Launch(run_dir))
    except RlhpError as err:
        assert err.exit_code != 1 and (first in str(err) or second in str(err)), f"{values}: {err}"
        return
    assert all(math.isfinite(v) for v in returned["last_round"].values()), values
