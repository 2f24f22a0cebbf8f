"""Querying and gathering preferences, split so that answers may arrive later than questions.

A :class:`Querent` publishes fragment pairs as identified queries; a gatherer keeps them
pending and, when called, returns those answered so far. The synthetic gatherer answers
every query at once from the true reward.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from rlhp.data import FragmentPairs
from rlhp.preferences import discounted_returns, preference_logprobs

log = logging.getLogger(__name__)


class Querent:
    """Gives each query a run-unique integer id (and publishes it, in subclasses that show people)."""

    def __init__(self) -> None:
        self.next_id = 0

    def __call__(self, pairs: FragmentPairs) -> np.ndarray:
        """The ids of the new queries, in the order of ``pairs``."""
        ids = np.arange(self.next_id, self.next_id + len(pairs), dtype=np.int64)
        self.next_id += len(pairs)
        return ids


class PreferenceGatherer:
    """Holds pending queries; calling it returns (pairs, labels, ids) of the answered ones."""

    def __init__(self) -> None:
        self.pending: FragmentPairs | None = None
        self.pending_ids = np.zeros(0, dtype=np.int64)

    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """Queue queries for answering."""
        self.pending = pairs if self.pending is None else FragmentPairs.concat([self.pending, pairs])
        self.pending_ids = np.concatenate([self.pending_ids, ids])

    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (mask of answered queries, float32 labels of those)."""
        raise NotImplementedError

    def __call__(self) -> tuple[FragmentPairs | None, np.ndarray, np.ndarray]:
        """Answered pairs, their labels and ids; unanswered ones stay pending."""
        empty = (None, np.zeros(0, np.float32), np.zeros(0, np.int64))
        if self.pending is None:
            return empty
        done, labels = self.answer(self.pending, self.pending_ids)
        answered, ids = self.pending[done], self.pending_ids[done]
        self.pending, self.pending_ids = self.pending[~done], self.pending_ids[~done]
        if not len(self.pending):
            self.pending = None
        return (answered, labels, ids) if len(ids) else empty


class SyntheticGatherer(PreferenceGatherer):
    """Answers from the true reward with the Bradley-Terry model.

    Args:
        rng: random generator for sampled labels.
        temperature: returns are divided by it; 0 gives 1 / 0 / 0.5 (tie) deterministically.
        discount_factor: discount of the returns.
        sample: draw 0/1 labels from the probability instead of returning the probability.
        threshold: clip of the return difference.
        noise_prob: chance that a label is a coin flip.
    """

    def __init__(self, rng: np.random.Generator, temperature: float = 1.0, discount_factor: float = 1.0,
                 sample: bool = True, threshold: float = 50.0, noise_prob: float = 0.0) -> None:
        super().__init__()
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.rng = rng
        self.temperature, self.discount_factor = temperature, discount_factor
        self.sample, self.threshold, self.noise_prob = sample, threshold, noise_prob
        self.last_entropy = float("nan")

    def probabilities(self, pairs: FragmentPairs) -> np.ndarray:
        """P(first preferred) under the true reward, one per pair."""
        if np.isnan(pairs.rews).any():
            raise ValueError("the synthetic gatherer needs true rewards, and some fragments have none")
        returns = discounted_returns(torch.as_tensor(pairs.rews, dtype=torch.float64), self.discount_factor)
        if self.temperature == 0:
            diff = returns[:, 0] - returns[:, 1]
            prob = 0.5 * (1 + torch.sign(diff))
            prob = self.noise_prob * 0.5 + (1 - self.noise_prob) * prob
        else:
            prob = preference_logprobs(returns / self.temperature, self.noise_prob, self.threshold)[0].exp()
        return prob.numpy()

    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every query is answered at once."""
        prob = self.probabilities(pairs)
        p = np.clip(prob, 1e-12, 1 - 1e-12)
        self.last_entropy = float(np.mean(-(p * np.log2(p) + (1 - p) * np.log2(1 - p))))
        labels = self.rng.binomial(1, prob) if self.sample else prob
        return np.ones(len(pairs), dtype=bool), labels.astype(np.float32)
