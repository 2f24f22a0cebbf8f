"""The preference dataset: labelled fragment pairs, saved as Arrow so they load without rlhp."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from rlhp.data.arrow import from_fixed, to_fixed
from rlhp.data.hf import save_dataset
from rlhp.data.pairs import FragmentPairs


class PreferenceDataset:
    """Labelled fragment pairs, append-only, evicting the oldest beyond ``max_size``.

    Labels are float32 of shape (n,): 1 prefers the first fragment, 0 the second, 0.5 neither.
    """

    def __init__(self, max_size: int | None = None) -> None:
        self.max_size = max_size
        self.pairs: FragmentPairs | None = None
        self.labels = np.zeros(0, dtype=np.float32)
        self.ids = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        """Number of labelled pairs."""
        return len(self.labels)

    def push(self, pairs: FragmentPairs, labels: np.ndarray, ids: np.ndarray) -> None:
        """Append answered queries."""
        if not isinstance(labels, np.ndarray) or labels.dtype != np.float32 or labels.shape != (len(pairs),):
            raise ValueError(f"labels must be a float32 array of shape ({len(pairs)},), got "
                             f"{getattr(labels, 'dtype', type(labels))} {getattr(labels, 'shape', '')}")
        self.pairs = pairs if self.pairs is None else FragmentPairs.concat([self.pairs, pairs])
        self.labels = np.concatenate([self.labels, labels])
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
        if self.max_size is not None and len(self) > self.max_size:
            keep = slice(len(self) - self.max_size, None)
            self.pairs, self.labels, self.ids = self.pairs[keep], self.labels[keep], self.ids[keep]

    def save(self, path: str | Path, **annotations: Sequence | np.ndarray) -> None:
        """Write as a Hugging Face dataset (Arrow): one row per pair, readable without rlhp; ``annotations``
        are extra columns, one value per pair (who labelled, when...)."""
        path = Path(path)
        if self.pairs is None:
            raise ValueError("nothing to save: the preference dataset is empty")
        columns = {f.name: to_fixed(getattr(self.pairs, f.name)) for f in fields(self.pairs)}
        table = pa.table({"id": self.ids, "label": self.labels, **annotations, **columns})
        dtypes = {f.name: getattr(self.pairs, f.name).dtype.str for f in fields(self.pairs)}
        info = datasets.DatasetInfo(description=json.dumps(dtypes))
        # A fingerprint of its own: datasets would otherwise hash the whole table through dill (its cache
        # key for transforms, which a dataset written once never uses), a third of a CartPole checkpoint.
        save_dataset(datasets.Dataset(table, info=info, fingerprint=secrets.token_hex(8)), path)

    @classmethod
    def load(cls, path: str | Path, max_size: int | None = None) -> PreferenceDataset:
        """Read a dataset written by :meth:`save` (the labelled pairs; skipped ones and annotations are left out)."""
        ds = datasets.load_from_disk(str(path))
        dtypes = json.loads(ds.info.description)
        table = ds.with_format("arrow")[:]
        out = cls(max_size)
        columns = {k: from_fixed(table[k], dt) for k, dt in dtypes.items()}
        for key, fill in (("episode", -1), ("start", -1), ("quality", np.nan)):  # saved before provenance
            columns.setdefault(key, np.full(columns["dones"].shape[:2], fill))
        pairs = FragmentPairs(**columns)
        labels = table["label"].to_numpy().astype(np.float32)
        told = ~np.isnan(labels)  # a journal also keeps the "can't tell" answers, which teach nothing
        out.push(pairs[told], labels[told], table["id"].to_numpy()[told])
        return out
