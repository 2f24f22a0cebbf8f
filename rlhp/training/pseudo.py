"""SURF's semi-supervised reward learning (Park et al. 2022): unlabelled fragment pairs, labelled by the reward
model itself where it is confident, train it beside the teacher's labels."""

from __future__ import annotations

import math
from typing import Protocol

import torch

from rlhp.errors import ArgumentError
from rlhp.preference_model import clipped_difference, preference_loss


class PseudoLabeller(Protocol):
    """How many unlabelled pairs a reward trainer draws, and what it learns from them."""

    ratio: int
    """Unlabelled pairs drawn beside each labelled pair of a batch, and kept per labelled pair (0: none)."""

    def loss(self, returns: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-pair loss on the model's own labels and the mask of the pairs it labels, for the returns (..., 2)
        of unlabelled pairs, with return differences clipped to ``clip`` as the preference model's are."""


class NoPseudoLabels:
    """The teacher's labels only, as the paper trains: no unlabelled pair is drawn."""

    ratio = 0

    def loss(self, returns: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
        """No pair labelled: a loss and a mask of zeros."""
        zeros = returns.new_zeros(returns.shape[:-1])
        return zeros, zeros


class PseudoLabels:
    """Each batch of ``B`` labelled pairs comes with ``ratio * B`` unlabelled ones, drawn with replacement for
    each member on its own from ``ratio`` times as many pairs as are labelled, cut uniformly from the latest
    round's sampled trajectories. A member's own prediction labels a pair when it gives either fragment a
    probability above ``threshold``; that pair's cross-entropy against it, times ``weight``, joins the loss.

    Args:
        threshold: the confidence a pseudo-label needs, in (0.5, 1) (SURF: 0.99).
        weight: the pseudo-labels' loss weight against the teacher's (SURF's lambda, 1).
        ratio: unlabelled pairs per labelled pair (SURF's mu, 4).
    """

    def __init__(self, threshold: float = 0.99, weight: float = 1.0, ratio: int = 4) -> None:
        if not 0.5 < threshold < 1:
            raise ArgumentError("threshold", f"must lie in (0.5, 1), got {threshold}")
        if not 0 < weight < math.inf:
            raise ArgumentError("weight", f"must be a positive finite number, got {weight}")
        if ratio < 1:
            raise ArgumentError("ratio", f"must be at least 1 (pseudo_labels=none draws none), got {ratio}")
        self.threshold, self.weight, self.ratio = threshold, weight, ratio

    def loss(self, returns: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy against the returns' own rounded prediction, times ``weight``, where it is confident.

        The model is the trainer's, its ``clip`` included, less its noise: a pseudo-label is the model's own
        answer, never a random one, and with noise no probability would reach a threshold near 1."""
        logit = clipped_difference(returns.detach(), clip)
        # P(first preferred) above threshold or below 1 - threshold, read on the logit.
        labelled = (logit.abs() > math.log(self.threshold / (1 - self.threshold))).to(returns.dtype)
        labels = (logit > 0).to(returns.dtype)
        return self.weight * labelled * preference_loss(returns, labels, threshold=clip), labelled
