"""Which steps of a labelled pair a training batch scores: the whole fragments, or SURF's temporal crops
(Park et al. 2022), a new random window of each fragment every batch, and QPA's several crops of each pair
(Hu et al. 2024)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from rlhp.errors import ArgumentError
from rlhp.rewards import RewardInputs


class Crop(Protocol):
    """Picks the steps of a batch's fragments that are scored."""

    copies: int
    """How many crops of each pair a training batch scores, each with the pair's label."""

    def __call__(self, inputs: RewardInputs, rng: np.random.Generator) -> RewardInputs:
        """The inputs of the scored steps; the last leading axis of ``inputs`` is time."""

    def check_length(self, length: int) -> None:
        """Raise :class:`ArgumentError` when the crop cannot be taken from fragments of ``length`` steps."""


class WholeFragments:
    """Every step of both fragments, as labelled (draws no random numbers)."""

    copies = 1

    def __call__(self, inputs: RewardInputs, rng: np.random.Generator) -> RewardInputs:
        """The inputs, unchanged."""
        return inputs

    def check_length(self, length: int) -> None:
        """Any length will do."""


class TemporalCrop:
    """SURF's and QPA's temporal cropping: each batch scores windows of one length drawn uniformly from
    ``[length - max_shorten, length - min_shorten]``, each fragment's window starting at its own uniform step, on
    the assumption that a teacher who prefers one clip prefers most of its stretches too. The label is kept.

    Args:
        max_shorten: the most steps a window drops (SURF crops up to 5 steps of 50, QPA 15); a window keeps at
            least one step.
        min_shorten: the fewest steps a window drops (QPA's 5; SURF's 0, the whole fragment among its windows).
        copies: how many crops of each pair a batch trains on, each pair's label on each (QPA's ``data_aug_ratio``,
            20; SURF's 1).
    """

    def __init__(self, max_shorten: int = 5, min_shorten: int = 0, copies: int = 1) -> None:
        if max_shorten < 1:
            raise ArgumentError("max_shorten", "must be at least 1 (reward_trainer/crop=whole scores whole "
                                f"fragments), got {max_shorten}")
        if not 0 <= min_shorten <= max_shorten:
            raise ArgumentError("min_shorten", f"must lie in [0, max_shorten={max_shorten}], got {min_shorten}")
        ArgumentError.check_whole_count("copies", copies)
        self.max_shorten, self.min_shorten, self.copies = max_shorten, min_shorten, copies

    def check_length(self, length: int) -> None:
        """A window must keep at least one step of a ``length``-step fragment."""
        if self.max_shorten >= length:
            raise ArgumentError("max_shorten", f"({self.max_shorten}) must be less than the fragments' length "
                                f"(fragment_length={length}): a window keeps at least one step, so the crop would "
                                f"score single steps; lower it, e.g. to {max(1, length // 10)}")

    def __call__(self, inputs: RewardInputs, rng: np.random.Generator) -> RewardInputs:
        """A window of one drawn length from each fragment, at a drawn start of its own."""
        *lead, length = inputs.x.shape[:-1]
        shortest = max(1, length - self.max_shorten)
        size = int(rng.integers(shortest, max(shortest, length - self.min_shorten) + 1))
        starts = torch.as_tensor(rng.integers(0, length - size + 1, size=lead), device=inputs.x.device)
        return inputs.window(starts, size)
