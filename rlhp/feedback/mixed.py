"""T-REX mixed with another teacher: ranks label pairs of demonstrations, the teacher the rest."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.feedback.gatherer import Answers, PreferenceGatherer, no_answers
from rlhp.feedback.ranked import RankedGatherer


class MixedGatherer(PreferenceGatherer):
    """Routes each query by where its fragments came from: a pair of two demonstration fragments
    goes to the ranking teacher (T-REX), any pair with a fragment of the agent's own to ``teacher``
    (synthetic labels, or people). Both kinds of label land in one preference dataset.

    Args:
        teacher: labels the pairs that hold an agent fragment.
    """

    def __init__(self, teacher: PreferenceGatherer) -> None:
        self.ranked, self.teacher = RankedGatherer(), teacher
        self.reads_published_queries = self.withdraws_queries = teacher.reads_published_queries

    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """Queue each query with the teacher that answers it."""
        demos = (pairs.episode >= 0).all(axis=1)  # episode is -1 for fragments not from a dataset
        for gatherer, mask in ((self.ranked, demos), (self.teacher, ~demos)):
            if mask.any():
                gatherer.add(pairs[mask], ids[mask])
        if demos.any():
            self.teacher.decline(ids[demos])  # a web querent published them for people too

    def __call__(self) -> Answers:
        """The ranked answers and the teacher's, together."""
        parts = [a for a in (self.ranked(), self.teacher()) if len(a)]
        if not parts:
            return no_answers()
        return Answers(FragmentPairs.concat([a.pairs for a in parts]), np.concatenate([a.labels for a in parts]),
                       np.concatenate([a.ids for a in parts]), [name for a in parts for name in a.annotators],
                       np.concatenate([a.times for a in parts]))

    def num_pending(self) -> int:
        """Queries waiting with either teacher."""
        return self.ranked.num_pending() + self.teacher.num_pending()

    def metrics(self) -> dict[str, float]:
        """The teacher's figures, and how many queries each teacher holds."""
        return {**self.teacher.metrics(), "pending_ranked": self.ranked.num_pending(),
                "pending_teacher": self.teacher.num_pending()}

    @contextlib.contextmanager
    def session(self, stop: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """The teacher's session (the human gatherer's web server)."""
        with self.teacher.session(stop):
            yield
