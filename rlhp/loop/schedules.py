"""Query schedules: how the comparison budget is spread over the rounds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlhp.errors import ArgumentError


class Constant:
    """f(t) = 1: the same number of queries every iteration."""

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """Weights at training progress ``t`` in [0, 1]."""
        return np.ones_like(t)


class Hyperbolic:
    """f(t) = 1 / (1 + t): front-loaded, halving by the end."""

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """Weights at training progress ``t`` in [0, 1]."""
        return 1 / (1 + t)


class InverseQuadratic:
    """f(t) = 1 / (1 + t^2)."""

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """Weights at training progress ``t`` in [0, 1]."""
        return 1 / (1 + t**2)


class Until:
    """The same number of queries every iteration up to training progress ``until``, none after: B-Pref's
    protocol, a fixed batch of queries every ``num_interact`` agent steps until the label budget is spent (as a
    share of training, so a shorter run keeps its shape)."""

    def __init__(self, until: float) -> None:
        if not 0.0 <= until <= 1.0:
            raise ArgumentError("until", f"must be in [0, 1], got {until}")
        self.until = until

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """1 where ``t <= until``, else 0."""
        return (t <= self.until).astype(np.float64)


class FirstRounds:
    """The same number of queries in each of the first ``rounds`` rounds after round 0, none after: B-Pref's
    protocol, a fixed batch of queries every ``num_interact`` agent steps until the label budget is spent. Counted
    in rounds, so a run cut short keeps the full run's batches in the rounds it has (a run with fewer rounds spreads
    the budget over all of them)."""

    def __init__(self, rounds: int) -> None:
        ArgumentError.check_whole_count("rounds", rounds)
        self.rounds = rounds

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """1 for the first ``rounds`` of the rounds at progress ``t``, else 0."""
        return (np.arange(len(t)) < self.rounds).astype(np.float64)


def apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integers proportional to ``weights`` that sum exactly to it.

    Largest-remainder (Hamilton) rounding: floor every share, then give the leftover units to
    the largest fractional parts (earlier entries win ties).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if total < 0 or len(weights) == 0 or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"cannot apportion {total} over weights {weights}")
    exact = total * weights / weights.sum()
    shares = np.floor(exact).astype(np.int64)
    leftover = total - shares.sum()
    shares[np.argsort(-(exact - shares), kind="stable")[:leftover]] += 1
    return shares


def comparison_schedule(total_comparisons: int, initial_comparison_frac: float, num_rounds: int,
                        schedule: Callable[[np.ndarray], np.ndarray]) -> list[int]:
    """Comparisons to gather in each of the ``num_rounds`` rounds (round 0 first)."""
    # Rounded, not truncated: 100 * 0.57 is 56.99999999999999 in floating point.
    initial = round(total_comparisons * initial_comparison_frac)
    weights = schedule(np.linspace(0, 1, num_rounds - 1))
    return [initial, *apportion(total_comparisons - initial, weights).tolist()]
