"""The gatherer interface: queries wait as pending until their labels arrive."""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from rlhp.data import FragmentPairs, RankedClips
from rlhp.data.state import record


@record
@dataclass
class Ratings:
    """Clips rated since the last gathering, on a scale of 1 to ``scale``: ``clips`` holds one fragment a row (the
    second axis of a :class:`FragmentPairs` batch is 1), ``ratings`` are float32 (NaN: "can't tell", skipped), and
    per clip ``ids`` (its query), ``annotators`` and ``times`` as in :class:`Answers`."""

    clips: FragmentPairs
    ratings: np.ndarray
    ids: np.ndarray
    annotators: list[str]
    times: np.ndarray
    scale: int

    @property
    def told(self) -> np.ndarray:
        """Mask of the ratings given (not skipped)."""
        return ~np.isnan(self.ratings)


@record
@dataclass
class Answers:
    """The queries answered since the last gathering.

    ``labels`` are float32, the probability that the *first* (left) fragment is better: 1, 0, or
    0.5 for equal; NaN answers "can't tell" (skipped: answered, never trained on). Per query,
    ``annotators`` says who answered (comma-joined) and ``times`` when (Unix seconds). ``ratings`` holds the
    clips rated alone, where people were asked for ratings (none otherwise). ``ranking``, where a gatherer hands
    people's ranking over as a list, is the whole ranking in training so far: the pairs are the ones it implies, kept
    for the journal, and the list is trained on instead of them.
    """

    pairs: FragmentPairs | None
    labels: np.ndarray
    ids: np.ndarray
    annotators: list[str] = field(default_factory=list)
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ratings: Ratings | None = None
    ranking: RankedClips | None = None

    def __len__(self) -> int:
        """Number of answered queries (skipped ones included)."""
        return len(self.ids)

    @property
    def told(self) -> np.ndarray:
        """Mask of the answers that state a preference (not skipped)."""
        return ~np.isnan(self.labels)


def no_answers() -> Answers:
    """An empty :class:`Answers`."""
    return Answers(None, np.zeros(0, np.float32), np.zeros(0, np.int64), [], np.zeros(0))


class PreferenceGatherer(ABC):
    """Takes queries with :meth:`add`; calling it returns the answered ones and keeps the rest pending."""

    reads_published_queries: bool = False
    """Whether its answers come from people shown the queries a publishing querent put in the run folder."""
    judges_on_gold: bool = False
    """Whether it judges people by their answers to gold queries (then the querent must ask some)."""
    withdraws_queries: bool = False
    """Whether it withdraws published queries by their pairs' ids (then each pair must be one query)."""
    hands_ranking_as_list: bool = False
    """Whether it hands over the ranking people build as a list to train on (then the querent must rank clips)."""

    @abstractmethod
    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """Queue queries for answering."""

    @abstractmethod
    def __call__(self) -> Answers:
        """The queries answered since the last call; unanswered ones stay pending."""

    @abstractmethod
    def num_pending(self) -> int:
        """Queries added and not yet answered."""

    def counters(self) -> dict[str, int]:
        """What a checkpoint's ``state.json`` says of it: the queries still pending."""
        return {"pending_queries": self.num_pending()}

    def decline(self, ids: np.ndarray) -> None:
        """Queries the querent published that another teacher answers (see :class:`MixedGatherer`): a
        gatherer that finds published queries by itself must not wait for these (nothing to do here)."""
        return None

    def metrics(self) -> dict[str, float]:
        """Figures about the last gathering, logged with the round (none unless overridden)."""
        return {}

    @contextlib.contextmanager
    def session(self, stop: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """Whatever gathering needs while the loop runs (the human gatherer's web server; waiting that
        ends when ``stop()`` says so); nothing here."""
        yield


class OracleGatherer(PreferenceGatherer):
    """A teacher that answers pending queries itself, from what the pairs hold, as soon as asked."""

    annotator = "oracle"
    """The name its answers carry."""

    def __init__(self) -> None:
        self.pending: FragmentPairs | None = None
        self.pending_ids = np.zeros(0, dtype=np.int64)

    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """Queue queries for answering."""
        self.pending = pairs if self.pending is None else FragmentPairs.concat([self.pending, pairs])
        self.pending_ids = np.concatenate([self.pending_ids, ids])

    def num_pending(self) -> int:
        """Queries added and not yet answered."""
        return len(self.pending_ids)

    @abstractmethod
    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (mask of the answered queries, float32 labels of those; NaN for skipped)."""

    def __call__(self) -> Answers:
        """Answered pairs, their labels and ids; unanswered ones stay pending."""
        if self.pending is None:
            return no_answers()
        done, labels = self.answer(self.pending, self.pending_ids)
        answered, ids = self.pending[done], self.pending_ids[done]
        self.pending, self.pending_ids = self.pending[~done], self.pending_ids[~done]
        if not len(self.pending):
            self.pending = None
        return Answers(answered, labels, ids, [self.annotator] * len(ids), np.full(len(ids), time.time()))
