"""A label file as the teacher: each pair is answered with the label a Preference Transformer or Uni-RLHF file
gives it (with ``fragmenter=label_file``, which cuts those pairs from the dataset)."""

from __future__ import annotations

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.data.hub import open_trajectories
from rlhp.data.label_files import LabelFormat, locate, read_label_files
from rlhp.errors import DataError
from rlhp.feedback.gatherer import OracleGatherer


class LabelFileGatherer(OracleGatherer):
    """Answers every pair a label file names with its label, matched by where both fragments start (their episode
    and step); a pair the file does not name stays unanswered.

    Args:
        path: the folder of label files.
        format: ``pt`` or ``uni_rlhf`` (see :mod:`rlhp.data.label_files`).
        dataset: the dataset the file's start indices point into, its episodes in order.
    """

    annotator = "label_file"

    def __init__(self, path: str, format: LabelFormat, dataset: str) -> None:
        super().__init__()
        labels = read_label_files(path, format)
        episodes, _ = open_trajectories(dataset, key="gatherer.dataset")
        position, step = locate(labels.starts, np.array([len(t) for t in episodes]), labels.length)
        ids = np.array([t.episode for t in episodes])[position]
        if max(ids.max(initial=0), step.max(initial=0)) >= 2**15:
            raise DataError(f"{path!r} names episodes or steps past 32,767, more than rlhp matches pairs by")
        self.keys = self._keys(ids, step)
        self.order = np.argsort(self.keys, kind="stable")
        self.labels = labels.labels

    @staticmethod
    def _keys(episode: np.ndarray, start: np.ndarray) -> np.ndarray:
        """One integer a pair, from both fragments' episodes and starts, 15 bits each (a pair outside, e.g. a
        fragment of no dataset, episode -1, gets a key no file pair has)."""
        parts = np.concatenate([episode, start], axis=1).astype(np.int64)  # (pairs, 4)
        outside = ((parts < 0) | (parts >= 2**15)).any(axis=1)
        keys = ((parts[:, 0] * 2**15 + parts[:, 1]) * 2**15 + parts[:, 2]) * 2**15 + parts[:, 3]
        return np.where(outside, -1, keys)

    def answer(self, pairs: FragmentPairs, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The file's label for each pair it names."""
        keys = self._keys(pairs.episode, pairs.start)
        found = np.searchsorted(self.keys, keys, sorter=self.order)
        found = np.minimum(found, len(self.keys) - 1)
        rows = self.order[found]
        named = (self.keys[rows] == keys) & (keys >= 0)
        return named, self.labels[rows[named]]
