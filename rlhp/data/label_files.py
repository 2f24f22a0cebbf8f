"""Preference labels as the field's offline datasets publish them: pairs of segments named by where each starts in
the dataset's transitions laid end to end (D4RL's arrays), and a label each, in Preference Transformer's files or
Uni-RLHF's.

- ``pt`` (Preference Transformer, Kim et al. 2023): a folder with ``indices_num<N>_q<L>`` and
  ``indices_2_num<N>_q<L>`` (the first and second segments' start indices) and ``label_human`` (the labels; the
  queries are its last N), each a pickled array.
- ``uni_rlhf`` (Uni-RLHF, Yuan et al. 2024): a folder with ``indices_1<suffix>.pkl``, ``indices_2<suffix>.pkl`` and
  ``human_label<suffix>.pkl``, the suffix ``_domain_<d>_env_<e>_num_<N>_len_<L>_<id>``.

Both label a pair 0 when the first segment is better, 1 when the second is, -1 when they are equal; rlhp's label
is the probability that the first is preferred (1, 0, 0.5). The files are pickles: read only files you trust.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from rlhp.errors import ArgumentError, DataError

LabelFormat = Literal["pt", "uni_rlhf"]
FORMATS: tuple[LabelFormat, ...] = ("pt", "uni_rlhf")
_TO_RLHP = {0: 1.0, 1: 0.0, -1: 0.5}
"""The files' codes -> rlhp's label (the probability that the first segment is preferred)."""


@dataclass(frozen=True)
class SegmentLabels:
    """Labelled pairs of ``length``-step segments: ``starts`` (pairs, 2), where each segment starts in the dataset's
    transitions laid end to end, and ``labels`` (pairs,), rlhp's float32 labels."""

    starts: np.ndarray
    labels: np.ndarray
    length: int

    def __len__(self) -> int:
        """Number of pairs."""
        return len(self.labels)


def _load(path: Path) -> np.ndarray:
    try:
        with open(path, "rb") as f:
            return np.asarray(pickle.load(f))
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as err:
        raise DataError(f"{str(path)!r} is not a pickled array ({type(err).__name__}: {err})") from None


def _one(folder: Path, pattern: str, what: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise ArgumentError("path", f"{str(folder)!r} holds {len(found)} files named {pattern} ({what}); a folder of "
                            "label files has one")
    return found[0]


def read_label_files(folder: str | Path, fmt: LabelFormat) -> SegmentLabels:
    """The labelled pairs in ``folder``, written in format ``fmt``."""
    folder = Path(folder).expanduser()
    if fmt not in FORMATS:
        raise ArgumentError("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not folder.is_dir():
        raise ArgumentError("path", f"{str(folder)!r} is no folder of label files")
    if fmt == "pt":
        first = _one(folder, "indices_num*_q*", "the first segments' starts")
        n, length = map(int, re.fullmatch(r"indices_num(\d+)_q(\d+)", first.name).groups())
        second = folder / f"indices_2_num{n}_q{length}"
        codes = _load(_one(folder, "label_human", "the labels"))[-n:]
    else:
        first = _one(folder, "indices_1_*.pkl", "the first segments' starts")
        match = re.search(r"_num_(\d+)_len_(\d+)_", first.name)
        if match is None:
            raise DataError(f"{first.name!r} does not say its pairs and length (_num_<N>_len_<L>_)")
        n, length = map(int, match.groups())
        suffix = first.name.removeprefix("indices_1")
        second, codes = folder / f"indices_2{suffix}", _load(folder / f"human_label{suffix}")
    starts = np.stack([_load(first), _load(second)], axis=1).astype(np.int64)
    if starts.shape != (n, 2) or codes.shape != (n,) or not np.isin(codes, list(_TO_RLHP)).all():
        raise DataError(f"{str(folder)!r} does not hold {n} pairs with labels 0, 1 or -1 (starts {starts.shape}, "
                        f"labels {codes.shape})")
    labels = np.vectorize(_TO_RLHP.get, otypes=[np.float32])(codes) if n else np.zeros(0, np.float32)
    return SegmentLabels(starts, labels, length)


def write_label_files(pairs: SegmentLabels, folder: str | Path, fmt: LabelFormat, env: str = "env") -> list[Path]:
    """Write ``pairs`` into ``folder`` (made if missing) in format ``fmt``; labels other than 1, 0 and 0.5 are
    refused (the formats hold no others). Returns the files written."""
    if fmt not in FORMATS:
        raise ArgumentError("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    codes = np.full(len(pairs), 2, np.int64)
    for code, label in _TO_RLHP.items():
        codes[pairs.labels == label] = code
    if (codes == 2).any():
        raise DataError(f"{int((codes == 2).sum())} labels are neither 1, 0 nor 0.5 (soft labels), which the "
                        f"{fmt} format cannot hold")
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    n, length = len(pairs), pairs.length
    if fmt == "pt":
        names = [f"indices_num{n}_q{length}", f"indices_2_num{n}_q{length}", "label_human"]
    else:
        suffix = f"_domain_rlhp_env_{env}_num_{n}_len_{length}_rlhp.pkl"
        names = [f"indices_1{suffix}", f"indices_2{suffix}", f"human_label{suffix}"]
    paths = [folder / name for name in names]
    for path, array in zip(paths, (pairs.starts[:, 0], pairs.starts[:, 1], codes), strict=True):
        with open(path, "wb") as f:
            pickle.dump(np.ascontiguousarray(array), f)
    return paths


def locate(starts: np.ndarray, lengths: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Which episode (its position in the dataset) and step each flat start index names, for segments of
    ``length`` steps; a segment that would run past its episode's end is refused."""
    ends = np.cumsum(lengths)
    flat = np.asarray(starts)
    position = np.searchsorted(ends, flat, side="right")
    if (flat < 0).any() or (position >= len(lengths)).any():
        raise DataError(f"a start index lies outside the dataset's {int(ends[-1]):,} transitions")
    step = flat - (ends - lengths)[position]
    if (step + length > lengths[position]).any():
        bad = int(np.argmax(step + length > lengths[position]))
        raise DataError(f"the segment starting at transition {int(flat.flat[bad])} runs past its episode's end: "
                        "the labels were made on another dataset (or its episodes in another order)")
    return position, step


def flat_starts(position: np.ndarray, step: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The flat start index of step ``step`` of the episode at ``position`` (the inverse of :func:`locate`)."""
    return (np.cumsum(lengths) - lengths)[position] + step
