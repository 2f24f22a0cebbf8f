"""Console entry points; config lives in the repository's ``conf/`` folder."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rlhp.config import ConfigError
from rlhp.loop import VariableHorizonError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def train_main(cfg: DictConfig) -> float:
    """``rlhp-train``: preference comparisons as configured in ``conf/train.yaml``."""
    from rlhp.run import train

    try:
        return train(cfg)
    except (ConfigError, VariableHorizonError) as err:
        logging.getLogger("rlhp").error("%s", err)
        print(f"rlhp-train: error: {err}", file=sys.stderr)
        sys.exit(2)
