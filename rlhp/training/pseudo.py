"""SURF's semi-supervised reward learning (Park et al. 2022): unlabelled fragment pairs, labelled by the reward
model itself where it is confident, train it beside the teacher's labels."""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import torch

from rlhp.errors import ArgumentError
from rlhp.preference_model import clipped_difference, preference_loss


class PseudoLabelled(NamedTuple):
    """A model's own labels of unlabelled pairs, each of shape ``(..., pairs)``."""

    labels: torch.Tensor
    """1.0 where the model prefers the first fragment, else 0.0."""
    mask: torch.Tensor
    """1.0 where it is confident enough for the label to be trained on, else 0.0."""

    def columns(self, keep: torch.Tensor) -> PseudoLabelled:
        """The pairs of an ensemble's labels (members, pairs) where the boolean ``keep`` (pairs) holds."""
        return PseudoLabelled(self.labels[:, keep], self.mask[:, keep])


class PseudoLabeller(Protocol):
    """How many unlabelled pairs a reward trainer draws, how the model labels them, and what it learns."""

    ratio: int
    """Unlabelled pairs drawn beside each labelled pair of a batch, and kept per labelled pair (0: none)."""

    def label(self, returns: torch.Tensor, clip: float) -> PseudoLabelled:
        """The model's own labels of unlabelled pairs and where it is confident, from their returns (..., 2) as
        the model scores them for use (without dropout), return differences clipped to ``clip``."""

    def loss(self, returns: torch.Tensor, pseudo: PseudoLabelled, clip: float) -> torch.Tensor:
        """Per-pair loss of the returns (..., 2) being trained against the labels, where they are given."""


class NoPseudoLabels:
    """The teacher's labels only, as the paper trains: no unlabelled pair is drawn."""

    ratio = 0

    def label(self, returns: torch.Tensor, clip: float) -> PseudoLabelled:
        """No pair labelled: labels and a mask of zeros."""
        zeros = returns.new_zeros(returns.shape[:-1])
        return PseudoLabelled(zeros, zeros)

    def loss(self, returns: torch.Tensor, pseudo: PseudoLabelled, clip: float) -> torch.Tensor:
        """A loss of zeros."""
        return returns.new_zeros(returns.shape[:-1])


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
            raise ArgumentError("ratio", "must be at least 1 (reward_trainer/pseudo_labels=none draws none), "
                                f"got {ratio}")
        self.threshold, self.weight, self.ratio = threshold, weight, ratio

    def label(self, returns: torch.Tensor, clip: float) -> PseudoLabelled:
        """The returns' rounded prediction, where its probability is above ``threshold``.

        The model is the trainer's, its ``clip`` included, less its label noise: a pseudo-label is the model's
        own answer, never a random one, and with noise no probability would reach a threshold near 1."""
        logit = clipped_difference(returns.detach(), clip)
        # P(first preferred) above threshold or below 1 - threshold, read on the logit.
        confident = logit.abs() > math.log(self.threshold / (1 - self.threshold))
        return PseudoLabelled((logit > 0).to(returns.dtype), confident.to(returns.dtype))

    def loss(self, returns: torch.Tensor, pseudo: PseudoLabelled, clip: float) -> torch.Tensor:
        """Cross-entropy against the pseudo-labels, times ``weight``, where they are given."""
        return self.weight * pseudo.mask * preference_loss(returns, pseudo.labels, threshold=clip)
