"""The files a command reads, checked before it makes anything: a missing input, or one of the wrong kind,
is refused naming its key and path, and no run folder is created for the refused command."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf

from rlhp.data.hub import check_source
from rlhp.demos.experts import check_model_file

INPUTS: dict[str, Callable[[str, str], object]] = {
    "trajectories.path": check_source,   # trajectories=dataset or demos
    "pretrain.path": check_source,       # pretrain=bc, and rlhp-bc
    "expert.path": check_model_file,     # rlhp-collect expert=zip
    "expert.vec_normalize": check_model_file,
}
"""Config keys that name an input, and the part's own check of it (``check(value, key)`` raises)."""


def check_inputs(cfg: DictConfig) -> None:
    """Check every input that ``cfg`` sets (a key it lacks, leaves missing or null is the part's to refuse)."""
    for key, check in INPUTS.items():
        value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)  # None when missing (???)
        if isinstance(value, str):
            check(value, key)
