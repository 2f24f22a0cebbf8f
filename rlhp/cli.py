"""Console entry points; config lives in the repository's ``conf/`` folder."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rlhp.config import ConfigError
from rlhp.loop import VariableHorizonError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def _run(command: str, fn: Callable[[DictConfig], object], cfg: DictConfig) -> object:
    """Run ``fn``; a bad config ends with one clear line and exit code 2, not a traceback."""
    try:
        return fn(cfg)
    except (ConfigError, VariableHorizonError) as err:
        logging.getLogger("rlhp").error("%s", err)
        print(f"{command}: error: {err}", file=sys.stderr)
        sys.exit(2)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def train_main(cfg: DictConfig) -> float:
    """``rlhp-train``: preference comparisons as configured in ``conf/train.yaml``."""
    from rlhp.run import train

    return _run("rlhp-train", train, cfg)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="collect")
def collect_main(cfg: DictConfig) -> float:
    """``rlhp-collect``: an expert's demonstrations as a dataset, as configured in ``conf/collect.yaml``."""
    from rlhp.collect import collect

    return _run("rlhp-collect", collect, cfg)["return_mean"]
