"""Console entry points. The configs ship inside the package (``rlhp/conf/``), so any install finds them."""

from __future__ import annotations

import difflib
import errno
import logging
import math
import os
import shutil
import signal
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from rlhp.errors import ConfigError, DataError, RlhpError, Stopped, StorageError
from rlhp.experiment.launch import Launch, override_key
from rlhp.experiment.options import OPTION_FOLDERS, group_options
from rlhp.experiment.preflight import adds_config_folder, check_command_line, extra_in_overrides, plugged_options
from rlhp.experiment.renamed import renamed_key
from rlhp.experiment.sweep_stop import mark_stopped, pooled_sweep, stopped_by
from rlhp.logs import FILE_ONLY
from rlhp.runs import RunFolder

# Errors of the disk, not of rlhp: reported as a StorageError naming the path.
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def storage_error(err: OSError, folder: str) -> StorageError | None:
    """The :class:`StorageError` for a failed write under ``folder``, or None for other OS errors."""
    if err.errno not in _STORAGE_ERRNOS and "No space left" not in str(err):
        return None
    where = err.filename or folder
    return StorageError(f"cannot write {str(where)!r}: {err.strerror or err}; free space or choose another "
                        "folder (hydra.run.dir=...); a resumed run continues from the last checkpoint")


def _say(error: RlhpError, command: str) -> None:
    """The error's one line on stderr."""
    print(f"{command}: {error.kind}: {error}", file=sys.stderr)


def _refuse(error: RlhpError | None, command: str) -> None:
    """End in one line with the error's exit code, if there is an error."""
    if error is not None:
        _say(error, command)
        sys.exit(error.exit_code)


class OutputFolderCheck(Callback):
    """Hydra callback: a run folder that cannot be created or written fails in one line, before Hydra
    sets up logging there (which would end in a traceback)."""

    made: list[Path] = []  # noqa: RUF012 (one launch a process)
    """The folders the launch made (the run or sweep folder and the parents that did not exist): a refused
    launch removes those it left empty."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check ``hydra.run.dir``."""
        self._check(config.hydra.run.dir, config.hydra.job.name)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check ``hydra.sweep.dir``."""
        self._check(config.hydra.sweep.dir, config.hydra.job.name)

    @staticmethod
    def _check(folder: str, job: str) -> None:
        probe = Path(folder) / ".rlhp-write-check"
        OutputFolderCheck.made += [p.absolute() for p in (probe.parent, *probe.parent.parents) if not p.exists()]
        try:
            probe.parent.mkdir(parents=True, exist_ok=True)
            probe.write_text("ok")
            probe.unlink()
        except OSError as err:
            _refuse(storage_error(err, folder) or StorageError(f"cannot write {folder!r}: {err}"), f"rlhp-{job}")


class InputCheck(Callback):
    """Hydra callback: an input path (a dataset, a model) that is missing or of the wrong kind is refused in
    one line before Hydra makes the run folder (:mod:`rlhp.experiment.inputs`)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check the run's inputs."""
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check the inputs the sweep's base config names (a swept path is checked by its job)."""
        self._check(config)

    @staticmethod
    def _check(config: DictConfig) -> None:
        from rlhp.experiment.inputs import check_inputs  # imported here so that --help answers without loading torch

        try:
            check_inputs(config)
        except RlhpError as err:
            _refuse(err, f"rlhp-{config.hydra.job.name}")


def _launch() -> Launch:
    """What Hydra's runtime says of this launch (the entry points alone read it)."""
    hydra_cfg = HydraConfig.get()
    sweep = Path(hydra_cfg.sweep.dir) if hydra_cfg.mode == RunMode.MULTIRUN else None
    return Launch(Path(hydra_cfg.runtime.output_dir), list(hydra_cfg.overrides.task),
                  dict(hydra_cfg.runtime.choices), sweep)


def _run(command: str, fn: Callable[[DictConfig, Launch], Any], cfg: DictConfig,
         value: Callable[[Any], float]) -> float:
    """Run ``fn`` and return ``value`` of its result; an rlhp error ends with one clear line and its own exit
    code, not a traceback. In a pooled sweep a stopped job returns NaN instead (:mod:`rlhp.experiment.sweep_stop`),
    as does a job queued behind the stop."""
    logging.raiseExceptions = False  # a full disk must not print a traceback for every log line
    sweep = pooled_sweep(HydraConfig.get())
    if sweep is not None and stopped_by(sweep) is not None:
        logging.getLogger("rlhp").info("not started: the sweep was stopped", extra=FILE_ONLY)
        return math.nan
    launch = _launch()
    try:
        try:
            return value(fn(cfg, launch))
        except OSError as err:
            raise storage_error(err, HydraConfig.get().runtime.output_dir) or err from err
    except RlhpError as err:
        logging.getLogger("rlhp").error("%s: %s", type(err).__name__, err, extra=FILE_ONLY)
        if isinstance(err, Stopped) and sweep is not None:  # the pool's other jobs finish their round too
            _say(err, command)
            mark_stopped(sweep, err.signum)
            return math.nan
        _leaving()
        if isinstance(err, ConfigError | DataError):
            _discard_unused(launch.run_dir, launch.sweep_dir)
        _refuse(err, command)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, keeping the last checkpoint
        _leaving()
        logging.getLogger("rlhp").error("interrupted", extra=FILE_ONLY)
        print(f"\n{command}: interrupted; the last checkpoint is kept", file=sys.stderr)
        sys.exit(130)


def unreadable_override(argv: list[str]) -> ConfigError | None:
    """The config error for the first override that Hydra's grammar cannot read, naming it: Hydra's own message
    says what it met but not in which override."""
    parser = OverridesParser.create()
    for override in argv:
        if override.startswith("-") or not ("=" in override or override.startswith("~")):
            continue  # a flag (-m, --cfg), or a flag's value (--cfg job)
        try:
            parser.parse_overrides([override])
        except OverrideParseException as err:
            problem = str(err).splitlines()[0]
            return ConfigError(override, f"cannot be read ({problem}); quote a value that holds '=', brackets, "
                               "commas or spaces (key='a=b')", noun="override")
    return None


MOVED_GROUPS = {
    "crop": ("reward_trainer/crop", "reward_trainer/crop=temporal"),
    "pseudo_labels": ("reward_trainer/pseudo_labels", "reward_trainer/pseudo_labels=surf"),
    "label_filter": ("reward_trainer/label_filter", "reward_trainer/label_filter=contradicted"),
    "feedback": ("reward_learning", "reward_learning=none for the ceiling, or reward_learning=preferences"),
}
"""Config groups that moved, by their old name: where they are now, and an example."""


def moved_group(argv: list[str]) -> ConfigError | None:
    """The config error for an override of a group by its old name (``crop=temporal``), naming the new key."""
    for override in argv:
        key = override_key(override)
        if "=" in override and key in MOVED_GROUPS:
            new, example = MOVED_GROUPS[key]
            return ConfigError(key, f"is now the group {new}, which configures the part it belongs to: write "
                               f"{example}")
    return None


def nested_option(argv: list[str]) -> ConfigError | None:
    """The config error for an option in a sub-folder of an :data:`OPTION_FOLDERS` group spelt as a group of its
    own (``experiment/bpref=walker_walk``), with the right spelling (``experiment=bpref/walker_walk``)."""
    for override in argv:
        key, _, value = override.lstrip("+~").partition("=")
        group, _, sub = key.partition("/")
        if value and group in OPTION_FOLDERS and sub and files("rlhp.conf").joinpath(group, sub).is_dir():
            return ConfigError(key, f"is a folder of {group}'s options, not a group: write {group}={sub}/{value}",
                               noun="config group")
    return None


def unknown_option(argv: list[str]) -> ConfigError | None:
    """The config error for the first option of a config group that does not exist, naming the group and its
    options: Hydra would run an optional group's misspelt option as if none were chosen (``experiment=pendullum``
    trains the default CartPole). Each value of a sweep or a list (``callbacks=[...]``) is checked. Skipped where
    the command line adds a config folder, whose options rlhp cannot see."""
    if adds_config_folder(argv):
        return None
    parser = OverridesParser.create()
    for override in argv:
        if override.startswith("-") or "=" not in override:
            continue
        try:
            (parsed,) = parser.parse_overrides([override])
        except OverrideParseException:
            continue  # unreadable_override names it
        options = group_options(parsed.key_or_group)
        if options is None or parsed.is_delete():
            continue
        if parsed.is_sweep_override():
            values = list(parsed.sweep_string_iterator())
        else:
            value = parsed.value()
            values = value if isinstance(value, list) else [value]
        for value in values:
            if value is not None and str(value) not in options:
                options = sorted({*options, *plugged_options(parsed.key_or_group)})  # a plug-in's too
                if str(value) in options:
                    continue
                close = difflib.get_close_matches(str(value), options, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                return ConfigError(parsed.key_or_group, f"has no option {value!r}; {hint}its options are "
                                   f"{', '.join(options)}", noun="config group")
    return None


def _check_overrides(command: str, argv: list[str]) -> None:
    """What every command checks of its overrides before Hydra makes a run folder, ending in one line at the first
    refusal: Hydra's grammar, groups by an old name, options that do not exist, a feature whose extra is missing
    (before Hydra reads an override it cannot resolve), then keys that do not exist and the extras of what the
    config composes (:mod:`rlhp.experiment.preflight`)."""
    for check in (unreadable_override, moved_group, renamed_key, nested_option, unknown_option, extra_in_overrides):
        _refuse(check(argv), command)
    if not any(flag in argv for flag in ("--help", "-h", "--hydra-help", "--info", "-i")):
        _refuse(check_command_line(argv, command.removeprefix("rlhp-"), command), command)


def _discard_unused(run_dir: Path, sweep: Path | None) -> None:
    """Remove the folder a refused launch made, when it holds nothing but the launch's own files, with the folders
    above it that this launch made and that are left empty (a sweep folder holding only Hydra's multirun.yaml
    counts as empty): a refused command writes no run folder. A folder that was there before (``hydra.run.dir`` of
    one's own) keeps all but the launch's files."""
    if not RunFolder(run_dir).never_ran():
        return
    sweep = sweep.absolute() if sweep is not None else None
    if run_dir.absolute() in OutputFolderCheck.made or run_dir.absolute().parent == sweep:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        for made in run_dir.iterdir():  # never_ran: Hydra's record, the log and the lock only
            shutil.rmtree(made) if made.is_dir() else made.unlink()
    for folder in sorted(OutputFolderCheck.made, key=lambda p: -len(p.parts)):  # the deepest first
        if folder.is_dir() and {p.name for p in folder.iterdir()} <= ({"multirun.yaml"} if folder == sweep else set()):
            shutil.rmtree(folder, ignore_errors=True)


def _leaving() -> None:
    """Ignore further Ctrl-C: the process is exiting, and one more must not end it in a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


JAX_CACHE: dict[str, Any] = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": 0.0,
                             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": 0, "JAX_COMPILATION_CACHE_MAX_SIZE": 1 << 30}
"""JAX's persistent compilation cache keeps every compiled program (its own defaults keep those that took 1 s), up to
1 GiB, the least recently used dropped first; with a size, its reads and writes take a file lock, so the processes of
a sweep share it safely."""


def use_compilation_cache() -> None:
    """Keep JAX's compiled programs between commands (``~/.cache/rlhp/jax``, or ``$JAX_COMPILATION_CACHE_DIR``):
    an SBX agent or an offline learner compiles in 5-7 s, once; the programs loaded are the ones compiling makes,
    so a run's figures do not change. Set before JAX is imported, and into its config where it already was (a forked
    process)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlhp" / "jax"
    wanted = {"JAX_COMPILATION_CACHE_DIR": str(cache), **JAX_CACHE}
    for key, value in wanted.items():
        os.environ.setdefault(key, str(value))
    jax = sys.modules.get("jax")  # None where JAX is not installed, or held out (as a test does)
    if jax is not None:
        for key, value in wanted.items():
            jax.config.update(key.lower(), type(value)(os.environ[key]))


def train_main() -> None:
    """``rlhp-train``: preference comparisons as configured in ``rlhp/conf/train.yaml``."""
    use_compilation_cache()
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        from rlhp.experiment.help import train_help

        print(train_help())
        return
    _check_overrides("rlhp-train", sys.argv[1:])
    _refuse(_keep_run_record(sys.argv), "rlhp-train")
    _train_main()


def _override(argv: list[str], key: str) -> str | None:
    """The value of the last ``key=value`` override on the command line, if any."""
    values = [a.split("=", 1)[1] for a in argv[1:] if a.lstrip("+").startswith(f"{key}=")]
    return values[-1] if values else None


def _keep_run_record(argv: list[str]) -> RlhpError | None:
    """Before Hydra makes or writes anything: refuse ``resume=`` of a folder that holds no run, and keep the
    record (``.hydra/``) of a run folder that a launch continues, so a refused launch leaves it as it was."""
    resume = _override(argv, "resume")
    if resume is not None:
        folder = RunFolder(resume)
        if not folder.path.is_dir():
            return ConfigError("resume", f"is {resume!r}, which is not a folder; give the folder of a run")
        if not folder.config_yaml.is_file():
            return ConfigError("resume", f"is {resume!r}, which holds no rlhp run (no .hydra/config.yaml)")
    target = resume or _override(argv, "hydra.run.dir")
    if target is not None and RunFolder(target).config_yaml.is_file():
        argv.append("hydra.output_subdir=null")  # the run's own record stays; rlhp-train keeps it
    return None


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def _train_main(cfg: DictConfig) -> float:
    from rlhp.experiment.train import optimized_value, train  # here, so that --help answers without loading torch

    return _run("rlhp-train", train, cfg, optimized_value)


def bc_main() -> None:
    """``rlhp-bc``: behavioural cloning alone, as configured in ``rlhp/conf/bc.yaml``."""
    use_compilation_cache()
    _check_overrides("rlhp-bc", sys.argv[1:])
    _bc_main()


@hydra.main(version_base="1.3", config_path="../conf", config_name="bc")
def _bc_main(cfg: DictConfig) -> float:
    from rlhp.experiment.cloning import clone

    return _run("rlhp-bc", clone, cfg, lambda result: result["bc_true_return_mean"])


def collect_main() -> None:
    """``rlhp-collect``: an expert's demonstrations as a dataset, as configured in ``rlhp/conf/collect.yaml``."""
    use_compilation_cache()
    _check_overrides("rlhp-collect", sys.argv[1:])
    _collect_main()


@hydra.main(version_base="1.3", config_path="../conf", config_name="collect")
def _collect_main(cfg: DictConfig) -> float:
    from rlhp.experiment.collect import collect

    return _run("rlhp-collect", collect, cfg, lambda result: result["return_mean"])
