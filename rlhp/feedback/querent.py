"""Querents: turn fragment pairs into identified queries (the web querent, which publishes them where people
see them, is :class:`rlhp.human.querent.WebQuerent`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhp.data import FragmentPairs


class Querent:
    """Gives each query a run-unique integer id (and publishes it, in subclasses that show people)."""

    publishes: bool = False
    """Whether it publishes its queries (clips and a store entry) where people see them."""
    needs_states: bool = False
    """Whether its clips are drawn from the states the env records (then the run records them)."""
    asks_gold: bool = False
    """Whether some of its queries are gold: their answer known, to measure the people who label."""
    one_query_a_pair: bool = True
    """Whether each id it returns is one query of one pair, so a gatherer may withdraw a query by its pair's id."""
    ranks: bool = False
    """Whether people place its clips in one ranking rather than judge its pairs."""

    def __init__(self) -> None:
        self.next_id = 0

    def __call__(self, pairs: FragmentPairs, round_: int = 0) -> np.ndarray:
        """The ids of the new queries of round ``round_``, in the order of ``pairs``."""
        ids = np.arange(self.next_id, self.next_id + len(pairs), dtype=np.int64)
        self.next_id += len(pairs)
        return ids

    def counters(self) -> dict[str, Any]:
        """What a checkpoint's ``state.json`` says of it: the next query's id."""
        return {"next_query_id": self.next_id}
