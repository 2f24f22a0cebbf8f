"""Rated clips: one fragment a row and its rating on a scale, stored as the preference dataset stores pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlhp.data.pairs import FragmentPairs
from rlhp.data.preferences import PreferenceDataset
from rlhp.data.state import record
from rlhp.errors import ArgumentError

MAX_SCALE = 10
"""The longest rating scale: the keys 1 to 9 and 0 for ten."""


@record
class RatingDataset(PreferenceDataset):
    """Clips rated on a scale of 1 to ``scale``: a :class:`PreferenceDataset` whose rows hold one fragment (the
    second axis of :attr:`pairs` is 1) and whose labels are the ratings, so rated clips are stored, saved and
    scored as labelled pairs are."""

    def __init__(self, scale: int, max_size: int | None = None) -> None:
        if not 2 <= scale <= MAX_SCALE:
            raise ArgumentError("scale", f"must lie in [2, {MAX_SCALE}], got {scale}")
        super().__init__(max_size)
        self.scale = scale

    def push(self, pairs: FragmentPairs, labels: np.ndarray, ids: np.ndarray) -> None:
        """Append rated clips (one fragment a row), each rating a whole number in 1..scale."""
        if pairs.dones.shape[1] != 1:
            raise ValueError(f"rated clips hold one fragment a row, got {pairs.dones.shape[1]}")
        if not np.isin(labels, np.arange(1, self.scale + 1)).all():
            raise ValueError(f"ratings must be whole numbers in 1..{self.scale}, got {np.unique(labels)}")
        super().push(pairs, labels, ids)

    @classmethod
    def load(cls, path: str | Path, max_size: int | None = None, *, scale: int) -> RatingDataset:
        """Read rated clips written by :meth:`save`, on a scale of 1 to ``scale`` (the saved dataset does not say)."""
        loaded = PreferenceDataset.load(path, max_size)
        out = cls(scale, max_size)
        out.push(loaded.pairs, loaded.labels, loaded.ids)
        return out
