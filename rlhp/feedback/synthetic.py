"""The synthetic teacher: answers every query at once from the true reward."""

from __future__ import annotations

import math

import numpy as np
import torch

from rlhp.data import FragmentPairs
from rlhp.errors import ArgumentError
from rlhp.feedback.gatherer import OracleGatherer
from rlhp.preference_model import discounted_returns, preference_logprobs


class SyntheticGatherer(OracleGatherer):
    """Answers from the true reward with the Bradley-Terry model, optionally as one of B-Pref's
    imperfect teachers (Lee et al. 2021); the options combine.

    Args:
        rng: random generator for sampled labels and mistakes.
        temperature: returns are divided by it (1 / the teacher's rationality beta); 0 gives
            1 / 0 / 0.5 (tie) deterministically.
        discount_factor: discount of the returns.
        sample: draw 0/1 labels from the probability instead of returning the probability.
        threshold: clip of the return difference.
        noise_prob: chance that a label is a coin flip.
        mistake: share of labels flipped (B-Pref's "mistake" teacher).
        myopic_gamma: step t of L counts ``myopic_gamma ** (L - 1 - t)``: later steps weigh more ("myopic").
        skip_frac: skip a query when both fragments' returns lie in this lowest fraction of the range of
            fragment returns seen so far ("skip"): it is answered, as "can't tell", and never trained on.
        equal_frac: label 0.5 when the returns differ by less than this fraction of that range ("equal").
            Like B-Pref's, both thresholds scale with the task's returns; measured from the lowest return
            rather than from 0 (B-Pref's rule where returns start at 0), they hold where rewards are negative.
    """

    annotator = "synthetic"

    def __init__(self, rng: np.random.Generator, temperature: float = 1.0, discount_factor: float = 1.0,
                 sample: bool = True, threshold: float = 50.0, noise_prob: float = 0.0, mistake: float = 0.0,
                 myopic_gamma: float = 1.0, skip_frac: float = 0.0, equal_frac: float = 0.0) -> None:
        super().__init__()
        if temperature < 0:
            raise ArgumentError("temperature", f"must be >= 0, got {temperature}")
        for name, value in (("mistake", mistake), ("skip_frac", skip_frac), ("equal_frac", equal_frac)):
            if not 0 <= value <= 1:
                raise ArgumentError(name, f"must lie in [0, 1], got {value}")
        if not 0 < myopic_gamma <= 1:
            raise ArgumentError("myopic_gamma", f"must lie in (0, 1], got {myopic_gamma}")
        self.rng = rng
        self.temperature, self.discount_factor = temperature, discount_factor
        self.sample, self.threshold, self.noise_prob = sample, threshold, noise_prob
        self.mistake, self.myopic_gamma, self.skip_frac, self.equal_frac = mistake, myopic_gamma, skip_frac, equal_frac
        self.lowest_return, self.highest_return = math.inf, -math.inf
        self.last_entropy = float("nan")
        self.last_skipped = 0

    def probabilities(self, pairs: FragmentPairs) -> np.ndarray:
        """P(first preferred) under the true reward, one per pair."""
        return self._probabilities(self.returns(pairs))

    def _probabilities(self, returns: torch.Tensor) -> np.ndarray:
        if self.temperature == 0:
            diff = returns[:, 0] - returns[:, 1]
            prob = 0.5 * (1 + torch.sign(diff))
            prob = self.noise_prob * 0.5 + (1 - self.noise_prob) * prob
        else:
            prob = preference_logprobs(returns / self.temperature, self.noise_prob, self.threshold)[0].exp()
        return prob.numpy()

    def returns(self, pairs: FragmentPairs) -> torch.Tensor:
        """The teacher's (pairs, 2) returns: discounted, and myopic when ``myopic_gamma`` < 1."""
        if np.isnan(pairs.rews).any():
            raise ValueError("the synthetic gatherer needs true rewards, and some fragments have none")
        rews = torch.as_tensor(pairs.rews, dtype=torch.float64)
        if self.myopic_gamma < 1:
            length = rews.shape[-1]
            rews = rews * self.myopic_gamma ** torch.arange(length - 1, -1, -1, dtype=rews.dtype)
        return discounted_returns(rews, self.discount_factor)

    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every query is answered at once (a skipped one with a NaN label)."""
        returns_t = self.returns(pairs)
        prob, returns = self._probabilities(returns_t), returns_t.numpy()
        if len(returns):
            self.lowest_return = min(self.lowest_return, float(returns.min()))
            self.highest_return = max(self.highest_return, float(returns.max()))
        spread = self.highest_return - self.lowest_return
        if self.equal_frac:
            prob = np.where(np.abs(returns[:, 0] - returns[:, 1]) < self.equal_frac * spread, 0.5, prob)
        p = np.clip(prob, 1e-12, 1 - 1e-12)
        self.last_entropy = float(np.mean(-(p * np.log2(p) + (1 - p) * np.log2(1 - p))))
        labels = (self.rng.binomial(1, prob) if self.sample else prob).astype(np.float32)
        if self.mistake:
            flip = self.rng.random(len(labels)) < self.mistake
            labels[flip] = 1 - labels[flip]
        skipped = (returns.max(axis=1) < self.lowest_return + self.skip_frac * spread) if self.skip_frac else \
            np.zeros(len(labels), dtype=bool)
        labels[skipped] = np.nan
        self.last_skipped = int(skipped.sum())
        return np.ones(len(pairs), dtype=bool), labels

    def metrics(self) -> dict[str, float]:
        """``label_entropy`` (mean binary entropy, bits, of the last answers' probabilities) and, for a
        skipping teacher, ``labels_skipped`` in the last answers."""
        return {"label_entropy": self.last_entropy, **({"labels_skipped": self.last_skipped} if self.skip_frac else {})}
