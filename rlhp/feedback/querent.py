"""The querent: turns fragment pairs into identified queries."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhp.data import FragmentPairs


class Querent:
    """Gives each query a run-unique integer id (and publishes it, in subclasses that show people)."""

    def __init__(self) -> None:
        self.next_id = 0

    def __call__(self, pairs: FragmentPairs) -> np.ndarray:
        """The ids of the new queries, in the order of ``pairs``."""
        ids = np.arange(self.next_id, self.next_id + len(pairs), dtype=np.int64)
        self.next_id += len(pairs)
        return ids

    def state_dict(self) -> dict[str, Any]:
        """The next id to give, so ids stay unique across a resume."""
        return {"next_id": self.next_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.next_id = int(state["next_id"])
