"""Which labelled pairs one pass (an epoch) of reward training covers: every label, so that a round's cost
grows with the dataset, or a window of the newest labels and a replay sample of older ones, so that it does not.

Both draw from each member's bootstrap resample of the training pairs, (members, pairs) dataset indices; the
dataset holds its pairs oldest first, so a larger index is a newer label.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from rlhp.errors import ArgumentError


class LabelReplay(Protocol):
    """Picks the pairs each member trains on in one pass."""

    def draw(self, sample: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The pass's pairs from each member's resample ``sample`` (members, pairs), in the order they train:
        (members, k) dataset indices."""


class AllLabels:
    """Every pair of each member's resample, every pass, in a new order: the paper's epochs."""

    def draw(self, sample: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The whole resample, its columns shuffled."""
        return sample[:, rng.permutation(sample.shape[1])]


class RecentWindow:
    """At most ``recent + older`` pairs a pass: each member's ``recent`` newest pairs (the labels of the latest
    policies, the ones the reward has yet to fit) and ``older`` drawn uniformly from the rest of its resample
    without replacement (a replay sample, so the old labels keep their hold). A round's cost is then bounded
    whatever the dataset's size; while the resample holds no more than the window, a pass is every pair.
    """

    def __init__(self, recent: int = 256, older: int = 256) -> None:
        ArgumentError.check_whole_count("recent", recent)
        if not isinstance(older, int) or isinstance(older, bool) or older < 0:
            raise ArgumentError("older", f"must be a non-negative integer, got {older!r}")
        self.recent, self.older = recent, older

    def draw(self, sample: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each member's newest ``recent`` pairs and ``older`` of the rest, shuffled."""
        members, pairs = sample.shape
        if pairs <= self.recent + self.older:
            return sample[:, rng.permutation(pairs)]
        by_age = -np.sort(-sample, axis=1)  # newest first, per member
        # A uniform draw without replacement per member: the first ``older`` of a random order of the rest.
        chosen = self.recent + rng.random((members, pairs - self.recent)).argsort(axis=1)[:, :self.older]
        window = np.concatenate([by_age[:, :self.recent], np.take_along_axis(by_age, chosen, axis=1)], axis=1)
        return window[:, rng.permutation(window.shape[1])]
