"""Which labels a reward trainer believes: all of them, or not those its ensemble confidently contradicts
(a defence against a teacher who errs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from rlhp.errors import ArgumentError


class LabelFilter(Protocol):
    """Decides, each epoch, which labelled pairs the members train on."""

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        """A float mask over pairs (1: train on it) from ``label_probs()``, each member's probability of the
        given label, (members, pairs), which is computed only when called."""

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """Figures of an epoch's mask over the training pairs."""


class KeepAll:
    """Every label is believed, as the paper does."""

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        """Every pair, without scoring any."""
        return torch.ones_like(labels)

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """None: nothing is judged."""
        return {}


class DropContradicted:
    """Leaves out of an epoch the labelled pairs whose label the ensemble, on average over its members, gives a
    probability under ``1 - confidence``: the model, fitted to the other labels, is confident the teacher erred.

    Neural nets fit the consistent majority of labels before they memorise the odd ones (the "early learning"
    of training on noisy labels; RIME, Cheng et al. 2024, filters preferences by the same loss), so a wrong
    label is contradicted before it is learned, and once left out it is not learned. It is judged again each
    epoch: a label the model comes to agree with is trained on again. Ties (label 0.5) are always kept.

    Args:
        confidence: how sure the ensemble must be of the other answer, in (0.5, 1).
    """

    def __init__(self, confidence: float = 0.6) -> None:
        if not 0.5 < confidence < 1:
            raise ArgumentError("confidence", f"must lie in (0.5, 1), got {confidence}")
        self.confidence = confidence

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        """0 where the members' mean probability of the label is below ``1 - confidence``."""
        return ((label_probs().mean(0) >= 1 - self.confidence) | (labels == 0.5)).to(labels.dtype)

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """``reward_labels_dropped``: the training pairs left out of the last epoch."""
        return {"reward_labels_dropped": float(len(keep) - keep.sum())}
