"""Which episodes a round cuts its fragment pairs from: the round's own sample of the current policy (rlhp's
default, and QPA's policy-aligned queries), or a window of recent episodes across rounds (B-Pref and PEBBLE
query from their last 100 episodes)."""

from __future__ import annotations

from collections import deque
from typing import Protocol

from rlhp.data import Trajectory
from rlhp.errors import ArgumentError


class QueryPool(Protocol):
    """Takes each round's sampled episodes; gives the episodes that round's fragments are cut from."""

    def __call__(self, sampled: list[Trajectory]) -> list[Trajectory]:
        """The episodes to cut this round's pairs from, given the round's ``sampled`` ones."""


class ThisRound:
    """Only the round's own sample: every query shows the policy the agent has now."""

    def __call__(self, sampled: list[Trajectory]) -> list[Trajectory]:
        """``sampled`` itself."""
        return sampled


THIS_ROUND = ThisRound()
"""The default pool (it holds nothing)."""


class RecentEpisodes:
    """The newest ``episodes`` episodes sampled so far, this round's among them (older rounds' episodes stay
    until newer ones push them out); the window is saved with the loop, so a resumed run queries the same."""

    def __init__(self, episodes: int) -> None:
        if episodes < 1:
            raise ArgumentError("episodes", f"must be >= 1, got {episodes}")
        self.window: deque[Trajectory] = deque(maxlen=episodes)

    def __call__(self, sampled: list[Trajectory]) -> list[Trajectory]:
        """The window after ``sampled`` joined it, oldest first."""
        self.window.extend(sampled)
        return list(self.window)
