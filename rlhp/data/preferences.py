"""The preference dataset: labelled fragment pairs, saved as Arrow so they load without rlhp."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from rlhp.data.arrow import from_fixed, to_fixed
from rlhp.data.hf import load_saved, save_dataset
from rlhp.data.pairs import FragmentPairs


class PreferenceDataset:
    """Labelled fragment pairs, append-only, evicting the oldest beyond ``max_size``.

    Labels are float32 of shape (n,): 1 prefers the first fragment, 0 the second, 0.5 neither. The pairs'
    arrays grow in place: ``capacity`` rows are reserved at the first push (the run's label budget), and
    pages the pairs have not reached yet take no memory, so growing never holds the dataset twice.
    """

    def __init__(self, max_size: int | None = None, capacity: int = 0) -> None:
        self.max_size = max_size
        self.capacity = capacity if max_size is None else min(capacity, max_size)
        self._columns: dict[str, np.ndarray] = {}
        self._frame_stack = 1
        self.labels = np.zeros(0, dtype=np.float32)
        self.ids = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        """Number of labelled pairs."""
        return len(self.labels)

    @property
    def pairs(self) -> FragmentPairs:
        """The labelled pairs (views over the dataset's arrays)."""
        if not len(self):
            raise ValueError("the preference dataset is empty")
        return FragmentPairs.from_columns({k: v[:len(self)] for k, v in self._columns.items()}, self._frame_stack)

    def push(self, pairs: FragmentPairs, labels: np.ndarray, ids: np.ndarray) -> None:
        """Append answered queries."""
        if not isinstance(labels, np.ndarray) or labels.dtype != np.float32 or labels.shape != (len(pairs),):
            raise ValueError(f"labels must be a float32 array of shape ({len(pairs)},), got "
                             f"{getattr(labels, 'dtype', type(labels))} {getattr(labels, 'shape', '')}")
        n, m = len(self), len(pairs)
        # Recorded states only draw clips, which the query keeps; an Atari pair's would outweigh its frames.
        new = {k: v for k, v in pairs.columns().items() if k != "states"}
        if not n:
            self._columns = {k: np.empty((max(m, self.capacity), *v.shape[1:]), v.dtype) for k, v in new.items()}
            self._frame_stack = pairs.frame_stack
        elif pairs.frame_stack != self._frame_stack or any(v.shape[1:] != self._columns[k].shape[1:]
                                                           for k, v in new.items()):
            raise ValueError("these pairs do not match the dataset's: fragment length, observation shape and "
                             "frame stack must stay the same")
        if n + m > len(self._columns["frames"]):
            self._grow(max(n + m, 2 * n))
        for k, v in new.items():
            self._columns[k][n:n + m] = v
        self.labels = np.concatenate([self.labels, labels])
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
        if self.max_size is not None and len(self) > self.max_size:
            drop = len(self) - self.max_size
            for col in self._columns.values():
                col[:self.max_size] = col[drop:len(self)]
            self.labels, self.ids = self.labels[drop:], self.ids[drop:]

    def _grow(self, rows: int) -> None:
        n = len(self)
        for k, col in self._columns.items():
            self._columns[k] = np.empty((rows, *col.shape[1:]), col.dtype)
            self._columns[k][:n] = col[:n]

    def save_state(self) -> dict:
        """The rows in use only: the reserved rest holds nothing, and saving it would fill its pages."""
        return {**self.__dict__, "_columns": {k: v[:len(self)] for k, v in self._columns.items()}}

    def load_state(self, state: dict) -> None:
        """Take back :meth:`save_state`'s (it grows again when rows come)."""
        self.__dict__.update(state)

    def save(self, path: str | Path, **annotations: Sequence | np.ndarray) -> None:
        """Write as a Hugging Face dataset (Arrow): one row per pair, readable without rlhp; ``annotations``
        are extra columns, one value per pair (who labelled, when...)."""
        path = Path(path)
        if not len(self):
            raise ValueError("nothing to save: the preference dataset is empty")
        stored = self.pairs.columns()
        columns = {k: to_fixed(v) for k, v in stored.items()}
        table = pa.table({"id": self.ids, "label": self.labels, **annotations, **columns})
        meta = {"dtypes": {k: v.dtype.str for k, v in stored.items()}, "frame_stack": self._frame_stack}
        info = datasets.DatasetInfo(description=json.dumps(meta))
        # A fingerprint of its own: datasets would otherwise hash the whole table through dill (its cache
        # key for transforms, which a dataset written once never uses), a third of a CartPole checkpoint.
        save_dataset(datasets.Dataset(table, info=info, fingerprint=secrets.token_hex(8)), path)

    @classmethod
    def load(cls, path: str | Path, max_size: int | None = None) -> PreferenceDataset:
        """Read a dataset written by :meth:`save` (the labelled pairs; skipped ones and annotations are left out)."""
        ds = load_saved(path)
        meta = json.loads(ds.info.description)
        if "dtypes" not in meta:  # saved before frames: the dtypes alone, and no frame stacks
            meta = {"dtypes": meta, "frame_stack": 1}
        table = ds.with_format("arrow")[:]
        out = cls(max_size)
        columns = {k: from_fixed(table[k], dt) for k, dt in meta["dtypes"].items()}
        for key, fill in (("episode", -1), ("start", -1), ("quality", np.nan)):  # saved before provenance
            columns.setdefault(key, np.full(columns["dones"].shape[:2], fill))
        pairs = FragmentPairs.from_columns(columns, meta["frame_stack"])
        labels = table["label"].to_numpy().astype(np.float32)
        told = ~np.isnan(labels)  # a journal also keeps the "can't tell" answers, which teach nothing
        out.push(pairs if told.all() else pairs[told], labels[told], table["id"].to_numpy()[told])
        return out
