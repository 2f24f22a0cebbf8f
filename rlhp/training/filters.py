"""Which labels a reward trainer believes: all of them, or not those its ensemble confidently contradicts
(a defence against a teacher who errs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from rlhp.errors import ArgumentError


class LabelFilter(Protocol):
    """Decides, each epoch, which labelled pairs the members train on."""

    judges: bool
    """Whether it may leave labels out (the trainer then says how many of those the true reward contradicts)."""

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
             trained_on: torch.Tensor) -> torch.Tensor:
        """A float mask over pairs (1: train on it) from ``label_probs()``, each member's probability of the
        given label, (members, pairs), which is computed only when called; ``trained_on`` (members, pairs) says
        which members' bootstrap resamples hold each pair."""

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """Figures of an epoch's mask over the training pairs."""


class KeepAll:
    """Every label is believed, as the paper does."""

    judges = False

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
             trained_on: torch.Tensor) -> torch.Tensor:
        """Every pair, without scoring any."""
        return torch.ones_like(labels)

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """None: nothing is judged."""
        return {}


class DropContradicted:
    """Leaves out of an epoch the labelled pairs whose label the ensemble, on average over its members, gives a
    probability under ``1 - confidence``: the model, fitted to the other labels, is confident the teacher erred.

    With ``out_of_bag``, a pair is judged only by the members whose bootstrap resample left it out (by all where
    every member holds it): those members never fitted its label, so a wrong label they contradict stays
    contradicted however long the others train on it (the cross-validated filter of Brodley and Friedl 1999,
    with the ensemble's own resamples as folds). Judged by every member, a wrong label met in a long first
    round is memorised before it is contradicted.

    Neural nets fit the consistent majority of labels before they memorise the odd ones (the "early learning"
    of training on noisy labels; RIME, Cheng et al. 2024, filters preferences by the same loss), so a wrong
    label is contradicted before it is learned, and once left out it is not learned. It is judged again each
    epoch: a label the model comes to agree with is trained on again. Ties (label 0.5) are always kept.

    At most ``max_fraction`` of the pairs are left out, the most contradicted first (co-teaching's budget,
    Han et al. 2018, set near the teacher's error rate): where the model is still wrong about much of the task,
    it contradicts right labels too, and leaving them all out would lock its errors in.

    Args:
        confidence: how sure the ensemble must be of the other answer, in (0.5, 1).
        max_fraction: the largest share of the pairs left out in one epoch, in (0, 1] (B-Pref's erring teacher
            flips a tenth).
        out_of_bag: judge each pair by the members that did not train on it.
    """

    judges = True

    def __init__(self, confidence: float = 0.7, max_fraction: float = 0.1, out_of_bag: bool = True) -> None:
        if not 0.5 < confidence < 1:
            raise ArgumentError("confidence", f"must lie in (0.5, 1), got {confidence}")
        if not 0 < max_fraction <= 1:
            raise ArgumentError("max_fraction", f"must lie in (0, 1], got {max_fraction}")
        self.confidence, self.max_fraction, self.out_of_bag = confidence, max_fraction, out_of_bag

    def keep(self, label_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
             trained_on: torch.Tensor) -> torch.Tensor:
        """0 where the judging members' mean probability of the label is below ``1 - confidence``, for at most
        ``max_fraction`` of the pairs, those of lowest probability."""
        judges = ~trained_on if self.out_of_bag else torch.ones_like(trained_on)
        judges = judges | ~judges.any(0)  # a pair every member trained on is judged by all
        probs = (label_probs() * judges).sum(0) / judges.sum(0)
        drop = (probs < 1 - self.confidence) & (labels != 0.5)
        limit = int(self.max_fraction * len(labels))
        if int(drop.sum()) > limit:
            worst = torch.topk(probs.masked_fill(~drop, 2.0), limit, largest=False).indices
            drop = torch.zeros_like(drop).index_fill_(0, worst, True)
        return (~drop).to(labels.dtype)

    def metrics(self, keep: torch.Tensor) -> dict[str, float]:
        """``reward_labels_dropped``: the training pairs left out of the last epoch."""
        return {"reward_labels_dropped": float(len(keep) - keep.sum())}
