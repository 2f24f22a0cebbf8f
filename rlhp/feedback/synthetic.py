"""The synthetic teacher: answers every query at once from the true reward."""

from __future__ import annotations

import numpy as np
import torch

from rlhp.data import FragmentPairs
from rlhp.feedback.gatherer import PreferenceGatherer
from rlhp.preference_model import discounted_returns, preference_logprobs


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

    def metrics(self) -> dict[str, float]:
        """``label_entropy``: the mean binary entropy (bits) of the last answers' probabilities."""
        return {"label_entropy": self.last_entropy}
