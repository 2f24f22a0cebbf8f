"""Ranked clips: one fragment a row and its level in a ranking, stored as the preference dataset stores pairs."""

from __future__ import annotations

import numpy as np

from rlhp.data.pairs import FragmentPairs
from rlhp.data.preferences import PreferenceDataset
from rlhp.data.state import record


@record
class RankedClips(PreferenceDataset):
    """Clips placed in one ranking: a :class:`PreferenceDataset` whose rows hold one fragment (the second axis of
    :attr:`pairs` is 1) and whose labels are their levels, 0 the worst (clips of one level are equally good), so the
    ranking is stored, saved and scored as labelled pairs are. The ids are the clips'."""

    def push(self, pairs: FragmentPairs, labels: np.ndarray, ids: np.ndarray) -> None:
        """Append ranked clips (one fragment a row), each level a whole number from 0."""
        if pairs.dones.shape[1] != 1:
            raise ValueError(f"ranked clips hold one fragment a row, got {pairs.dones.shape[1]}")
        if not (np.isfinite(labels).all() and (labels >= 0).all() and (labels == np.round(labels)).all()):
            raise ValueError(f"levels must be whole numbers from 0, got {np.unique(labels)}")
        super().push(pairs, labels, ids)

