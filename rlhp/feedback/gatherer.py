"""The gatherer interface: queries wait as pending until their labels arrive."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from rlhp.data import FragmentPairs

Answered = tuple[FragmentPairs | None, np.ndarray, np.ndarray]
"""(pairs, float32 labels, int64 ids) of the queries answered since the last call; pairs is None when none."""


class PreferenceGatherer(ABC):
    """Holds pending queries; calling it returns the answered ones and keeps the rest pending.

    A label is the probability that the *first* fragment of the pair is better: 1, 0, or 0.5 for equal;
    NaN answers "can't tell": the query leaves the pending ones and is never trained on.
    """

    def __init__(self) -> None:
        self.pending: FragmentPairs | None = None
        self.pending_ids = np.zeros(0, dtype=np.int64)

    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """Queue queries for answering."""
        self.pending = pairs if self.pending is None else FragmentPairs.concat([self.pending, pairs])
        self.pending_ids = np.concatenate([self.pending_ids, ids])

    @abstractmethod
    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (mask of the answered queries, float32 labels of those)."""

    def metrics(self) -> dict[str, float]:
        """Figures about the last gathering, logged with the round (none unless overridden)."""
        return {}

    def __call__(self) -> Answered:
        """Answered pairs, their labels and ids; unanswered ones stay pending."""
        empty = (None, np.zeros(0, np.float32), np.zeros(0, np.int64))
        if self.pending is None:
            return empty
        done, labels = self.answer(self.pending, self.pending_ids)
        told = ~np.isnan(labels)  # the rest were skipped: answered, with no preference to learn
        answered, ids = self.pending[done][told], self.pending_ids[done][told]
        self.pending, self.pending_ids = self.pending[~done], self.pending_ids[~done]
        if not len(self.pending):
            self.pending = None
        return (answered, labels[told], ids) if len(ids) else empty

    def state_dict(self) -> dict[str, Any]:
        """The pending queries (pairs and ids)."""
        return {"pending": self.pending, "pending_ids": self.pending_ids}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.pending, self.pending_ids = state["pending"], np.asarray(state["pending_ids"], dtype=np.int64)
