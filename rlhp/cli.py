"""Console entry points. The configs ship inside the package (``rlhp/conf/``), so any install finds them."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable

import hydra
from omegaconf import DictConfig

from rlhp.errors import RlhpError
from rlhp.logs import FILE_ONLY


def _run(command: str, fn: Callable[[DictConfig], object], cfg: DictConfig) -> object:
    """Run ``fn``; an rlhp error ends with one clear line and its own exit code, not a traceback."""
    try:
        return fn(cfg)
    except RlhpError as err:
        _leaving()
        logging.getLogger("rlhp").error("%s: %s", type(err).__name__, err, extra=FILE_ONLY)
        print(f"{command}: {err.kind}: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, keeping the last checkpoint
        _leaving()
        logging.getLogger("rlhp").error("interrupted", extra=FILE_ONLY)
        print(f"\n{command}: interrupted; the last checkpoint is kept", file=sys.stderr)
        sys.exit(130)


def _leaving() -> None:
    """Ignore further Ctrl-C: the process is exiting, and one more must not end it in a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def train_main(cfg: DictConfig) -> float:
    """``rlhp-train``: preference comparisons as configured in ``rlhp/conf/train.yaml``."""
    from rlhp.run import train  # imported here so that --help answers without loading torch

    return _run("rlhp-train", train, cfg)


@hydra.main(version_base="1.3", config_path="conf", config_name="collect")
def collect_main(cfg: DictConfig) -> float:
    """``rlhp-collect``: an expert's demonstrations as a dataset, as configured in ``rlhp/conf/collect.yaml``."""
    from rlhp.demos.collect import collect

    return _run("rlhp-collect", collect, cfg)["return_mean"]
