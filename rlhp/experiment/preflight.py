"""Checks of a command line against the config it composes, before Hydra makes a run folder: a key that does not
exist (written with ``+`` or without) and a part whose extra is not installed, each refused in one line.

Hydra's own answer to a misspelt key is five lines that advise the wrong fix (``+key=...``); with ``+`` it takes
the key, and the part it reaches refuses it only after the run folder exists.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import itertools
import logging
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException, OverrideParseException
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from rlhp.errors import ConfigError

EXTRAS = {
    "hparams_search=": ("hydra_plugins.hydra_optuna_sweeper", "search", "Hydra's Optuna sweeper"),
    "hydra/sweeper=optuna": ("hydra_plugins.hydra_optuna_sweeper", "search", "Hydra's Optuna sweeper"),
    "hydra/launcher=ray": ("hydra_plugins.hydra_ray_launcher", "ray", "Hydra's Ray launcher"),
    "env=atari": ("ale_py", "atari", "the Atari games"),
    "env=minatar": ("minatar", "minatar", "the MinAtar games"),
    "env=dmc": ("shimmy", "dmc", "DeepMind Control's suite"),
    "env=metaworld": ("metaworld", "metaworld", "Meta-World's tasks"),
    "agent=sbx_sac": ("sbx", "jax", "SBX's JAX agents"),
    "agent=tqc": ("sbx", "jax", "SBX's JAX agents"),
    "agent=crossq": ("sbx", "jax", "SBX's JAX agents"),
    "agent=sbx_ppo": ("sbx", "jax", "SBX's JAX agents"),
    "agent=iql": ("flax", "offline", "the offline learners (JAX)"),
    "agent=td3bc": ("flax", "offline", "the offline learners (JAX)"),
}
"""Options (or a group's every option, ``hparams_search=``) whose feature lives in an extra: (the module it needs,
the extra, what it is)."""

MODULE_EXTRAS = {
    "sbx": "jax", "jax": "jax", "flax": "jax", "optax": "jax", "minari": "offline",
    "h5py": "offline", "metaworld": "metaworld", "shimmy": "dmc", "dm_control": "dmc", "ale_py": "atari",
    "cv2": "atari", "minatar": "minatar", "mujoco": "mujoco", "optuna": "search",
}
"""Top-level modules that only an extra installs, by the extra: a ``_target_`` whose import misses one names it."""

MAX_COMBINATIONS = 16
"""Group sweeps (``-m env=cartpole,dmc agent=ppo,sac``) are checked option by option up to this many
combinations; a larger product is checked on its first."""


def adds_config_folder(argv: list[str]) -> bool:
    """Whether the command line adds a config folder of the user's own (``-cd conf``, ``hydra.searchpath=...``)."""
    return any(a.startswith(("hydra.searchpath", "--config-dir", "-cd", "--config-path", "-cp")) for a in argv)


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (its parent package too)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def extra_for(choice: str) -> ConfigError | None:
    """The config error for an option (``group=option``) whose feature needs an extra that is not installed."""
    for prefix, (module, extra, what) in EXTRAS.items():
        if choice.startswith(prefix) and not _installed(module):
            return ConfigError(prefix.split("=")[0], f"needs {what}, which comes with an extra: "
                               f"pip install 'rlhp[{extra}]'")
    return None


def extra_in_overrides(argv: list[str]) -> ConfigError | None:
    """The config error for the first override that picks a feature whose extra is not installed: checked before
    Hydra composes, since a missing sweeper or launcher plug-in fails Hydra's composition itself."""
    for override in argv:
        error = extra_for(override.lstrip("+~"))
        if error is not None:
            return error
    return None


def _parse(argv: list[str]) -> list[Override]:
    """The overrides of a command line that Hydra's grammar reads (flags, their values and unreadable ones left
    out: the override checks name those)."""
    parser = OverridesParser.create()
    parsed = []
    for arg in argv:
        if arg.startswith("-") or not ("=" in arg or arg.startswith("~")):
            continue
        try:
            parsed += parser.parse_overrides([arg])
        except OverrideParseException:
            continue
    return parsed


def _is_group(override: Override) -> bool:
    """Whether ``override`` picks a config group's option (``env=dmc``, ``hydra/launcher=joblib``) rather than
    setting a key."""
    name = override.key_or_group
    return "/" in name or _is_group_name(name)


@functools.cache
def plugged_options(group: str) -> frozenset[str]:
    """The options of ``group`` that Hydra finds beyond rlhp's own folder: those of a package's search-path plug-in
    (``hydra_plugins/<name>/``, docs/extending.md), which a user installs to add options without touching rlhp."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("rlhp.conf", version_base="1.3"):
            return frozenset(GlobalHydra.instance().config_loader().get_group_options(group))
    finally:
        GlobalHydra.instance().clear()


def _is_group_name(name: str) -> bool:
    """Whether ``name`` is one of rlhp's config groups (``fragmenter``)."""
    return files("rlhp.conf").joinpath(name).is_dir()


def _combinations(groups: list[Override]) -> list[list[str]]:
    """The group options of a command line, one list per combination of swept options."""
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [o.input_line] for o in groups]
    combinations = [list(c) for c in itertools.islice(itertools.product(*choices), MAX_COMBINATIONS + 1)]
    return combinations[:1] if len(combinations) > MAX_COMBINATIONS else combinations


def _targets(node: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every ``_target_`` under ``node``: (its node's dotted key, the target)."""
    if isinstance(node, DictConfig):
        if isinstance(node.get("_target_"), str):
            yield key or "config", node._target_
        for name in node:
            if name != "hydra" and OmegaConf.is_dict(node._get_node(name)):
                yield from _targets(node[name], f"{key}.{name}" if key else str(name))


def missing_extra(cfg: DictConfig) -> ConfigError | None:
    """The config error for the first option or ``_target_`` of ``cfg`` whose extra is not installed, naming the
    extra: an experiment that picks ``agent=sbx_sac`` is refused as ``agent=sbx_sac`` itself is."""
    for group, option in cfg.hydra.runtime.choices.items():
        error = extra_for(f"{group}={option}") if option is not None else None
        if error is not None:
            return error
    for key, target in _targets(cfg):
        module = target.split(".")[0]
        if module in MODULE_EXTRAS and not _installed(module):
            return ConfigError(f"{key}._target_", f"is {target}, which comes with an extra: "
                               f"pip install 'rlhp[{MODULE_EXTRAS[module]}]'")
    return None


def quiet_object(path: str) -> Any:
    """The object a ``_target_`` names, imported with Hydra's own console error held back (it logs a failed import in
    several lines before raising it to the caller, who says it in one)."""
    hydra_utils = logging.getLogger("hydra.utils")
    hydra_utils.disabled = True
    try:
        return get_object(path)
    finally:
        hydra_utils.disabled = False


def unimportable(key: str, target: str, err: Exception) -> ConfigError:
    """The config error for the ``_target_`` of node ``key`` that cannot be imported, in one line (Hydra's message
    spans lines: its cause's first says it)."""
    cause = err.__cause__ or err
    said = str(cause).splitlines()[0] if str(cause) else ""
    return ConfigError(f"{key}._target_", f"is {target}, which cannot be imported ({type(cause).__name__}: {said}); "
                       "a module of one's own must be on PYTHONPATH or installed")


def _is_open(key: str) -> bool:
    """Whether ``key`` lies in a dict of free keyword arguments (``agent.policy_kwargs``, ``env.kwargs``), where
    ``+`` may add any key."""
    return any(part == "kwargs" or part.endswith("_kwargs") for part in key.split(".")[:-1])


def _options(node: DictConfig) -> tuple[list[str], str | None, bool]:
    """What a key under ``node`` may be: the names, the class that takes them (None for a plain dict) and whether
    it takes any keyword (``**kwargs``, or a signature that cannot be read). A ``_target_`` that cannot be imported
    raises, for the caller to name."""
    if not isinstance(node.get("_target_"), str):
        return [str(k) for k in node], None, False
    target = quiet_object(node._target_)
    owner = getattr(target, "__name__", str(target))
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return [str(k) for k in node], owner, True
    named = [p for p, v in params.items() if v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    return named, owner, any(v.kind == v.VAR_KEYWORD for v in params.values())


def unknown_key(cfg: DictConfig, override: Override, command: str) -> ConfigError | None:
    """The config error for an override that sets a key ``cfg`` does not have, naming the nearest keys; or that
    adds (``+``) a key it has."""
    key = override.key_or_group
    parts = key.split(".")
    node: Any = cfg
    for depth, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None  # below a list or a value: Hydra's own message is precise there
        if part in node.keys():  # `in node` is False for a missing value (???)
            node = node._get_node(part) if OmegaConf.is_missing(node, part) else node[part]
            continue
        where = ".".join(parts[:depth])
        try:
            names, owner, open_ended = _options(node)
        except Exception as err:
            return unimportable(where, node._target_, err)
        adding = override.type in (OverrideType.ADD, OverrideType.FORCE_ADD)
        full = f"{where}.{part}" if where else part
        if owner is not None and (part in names or open_ended):
            return None if adding else ConfigError(full, f"is an option of {owner} that this config leaves at its "
                                                   f"default; set it with +{key}=...")
        if adding and owner is None and (_is_open(key) and depth > 0 or depth == 0 and _is_group_name(part)):
            return None  # a keyword dict's key, or a part of one's own where ~<group> dropped rlhp's
        close = difflib.get_close_matches(part, names, n=3)
        hint = f"did you mean {', '.join(f'{where}.{c}' if where else c for c in close)}? " if close else ""
        if not where:
            return ConfigError(full, f"is not an option of {command}; {hint}(`{command} --help` lists the groups, "
                               f"`{command} --cfg job` every key)")
        what = owner or f"`{where}`"
        return ConfigError(full, f"is not an option of {what}; {hint}its options are {', '.join(names)}")
    if override.type == OverrideType.ADD:
        return ConfigError(key, f"is set already; drop the + ({key}=...)")
    return None


OFF_POLICY_KEYS = ("replay_buffer_class", "replay_buffer_kwargs", "buffer_size", "learning_starts")
"""Agent keys that only an off-policy agent (one with a replay buffer) takes."""


def method_misfit(cfg: DictConfig) -> ConfigError | None:
    """The config error for a method (``method=qpa``) that sets agent keys the chosen agent does not take, saying
    what kind of agent it needs (QPA's replay buffer: an off-policy one)."""
    method = cfg.hydra.runtime.choices.get("method")
    if method is None or not isinstance(cfg.get("agent"), DictConfig):
        return None
    try:
        names, owner, open_ended = _options(cfg.agent)
    except Exception:  # the builder names an agent that cannot be imported
        return None
    foreign = [str(k) for k in cfg.agent if str(k) not in names and not str(k).startswith("_")]
    if owner is None or open_ended or not foreign:
        return None
    if any(key in OFF_POLICY_KEYS for key in foreign):
        return ConfigError("method", f"is {method}, which needs an off-policy agent (a replay buffer: agent=sac, td3, "
                           f"sbx_sac, tqc or crossq); agent={cfg.hydra.runtime.choices.agent} is {owner}, which has "
                           f"none (agent.{foreign[0]})")
    return ConfigError("method", f"is {method}, which sets agent.{foreign[0]}, an option that "
                       f"agent={cfg.hydra.runtime.choices.agent} ({owner}) does not have")


def check_command_line(argv: list[str], config_name: str, command: str) -> ConfigError | None:
    """The first refusal of what ``argv`` asks of the ``config_name`` config: a key that does not exist, or a part
    whose extra is missing. None where the line is good, or where Hydra's composition itself fails (its answer
    stands)."""
    if adds_config_folder(argv):
        return None  # rlhp cannot know its keys
    overrides = [o for o in _parse(argv) if not o.key_or_group.startswith("hydra.") and "@" not in o.key_or_group
                 and (o.type != OverrideType.DEL or _is_group(o))]  # ~fragmenter drops a part: +fragmenter.x adds
    if "-m" not in argv and "--multirun" not in argv:
        for o in overrides:
            if o.is_sweep_override():
                return ConfigError(o.key_or_group, f"is given several values ({o.input_line.split('=', 1)[1]}): "
                                   "add -m to sweep over them, or write a list as [a,b]", noun="override")
    groups = [o for o in overrides if _is_group(o)]
    keys = [o for o in overrides if not _is_group(o)]
    # The keys are checked against what the groups compose; the extras against the whole config, so that a
    # `_target_` given on the command line counts too.
    settings = [o.input_line for o in keys if not o.is_sweep_override()]
    # A part's class given on the line is the one its keys are checked against.
    targets = [o.input_line for o in keys if o.key_or_group.endswith("._target_") and not o.is_sweep_override()]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("rlhp.conf", version_base="1.3"):
            for combination in _combinations(groups):
                cfg = compose(config_name, overrides=combination + targets, return_hydra_config=True)
                for error in (unknown_key(cfg, o, command) for o in keys if o.input_line not in targets):
                    if error is not None:
                        return error
                whole = compose(config_name, overrides=combination + settings, return_hydra_config=True) \
                    if settings else cfg
                error = missing_extra(whole) or method_misfit(whole)
                if error is not None:
                    return error
    except HydraException:
        return None
    finally:
        GlobalHydra.instance().clear()
    return None
