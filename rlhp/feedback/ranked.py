"""The ranking teacher (T-REX): the fragment from the better-ranked episode is preferred."""

from __future__ import annotations

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.feedback.gatherer import OracleGatherer


class RankedGatherer(OracleGatherer):
    """Labels each pair by the quality of the episodes its fragments came from: their rank in a ranked
    demonstration dataset (``rlhp-collect ranked...``), else their true return. Equal quality is a tie.

    With no reward looked at inside the fragments, a reward learned from these labels can rank
    behaviour better than the best demonstration (Brown et al. 2019, T-REX).
    """

    annotator = "ranked"

    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every query is answered at once: 1 when the first episode ranks higher, 0 lower, 0.5 equal."""
        labels = 0.5 * (1 + np.sign(pairs.quality[:, 0] - pairs.quality[:, 1]))
        return np.ones(len(pairs), dtype=bool), labels.astype(np.float32)
