"""Lossless numpy <-> Arrow conversion for arrays of any shape and dtype, without row loops."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def to_fixed(arr: np.ndarray) -> pa.Array:
    """Array of shape (n, *shape) -> Arrow array of n nested fixed-size lists."""
    arr = np.ascontiguousarray(arr)
    out: pa.Array = pa.array(arr.reshape(-1))
    for size in reversed(arr.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, size)
    return out


def to_ragged(arrays: list[np.ndarray]) -> pa.Array:
    """Arrays of shape (len_i, *shape) -> Arrow list array, one row per array."""
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32 if lengths.sum() < 2**31 else np.int64)
    flat = np.concatenate(arrays) if arrays else np.zeros((0,))
    cls = pa.ListArray if offsets.dtype == np.int32 else pa.LargeListArray
    return cls.from_arrays(pa.array(offsets), to_fixed(flat))


def _values(col: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, list[int]]:
    """Unnest per-step lists to flat values and a shape; variable-size lists (as ``Dataset.from_dict``
    writes nested Python lists) must have one size throughout."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    shape = []
    while True:
        if pa.types.is_fixed_size_list(col.type):
            shape.append(col.type.list_size)
        elif pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            sizes = np.unique(pc.list_value_length(col).to_numpy(zero_copy_only=False))
            if len(sizes) > 1:
                raise ValueError(f"rows have different sizes {sizes[:5].tolist()}: not an array column")
            shape.append(int(sizes[0]) if len(sizes) else 0)
        else:
            return col, shape
        col = col.flatten()


def from_fixed(col: pa.Array | pa.ChunkedArray, dtype: np.dtype | str | None = None) -> np.ndarray:
    """Inverse of :func:`to_fixed`; the dtype is Arrow's own unless ``dtype`` is given."""
    values, shape = _values(col)
    arr = values.to_numpy(zero_copy_only=False)
    return (arr if dtype is None else arr.astype(dtype, copy=False)).reshape(-1, *shape)


def from_ragged(col: pa.Array | pa.ChunkedArray, dtype: np.dtype | str | None = None) -> list[np.ndarray]:
    """Inverse of :func:`to_ragged`."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    offsets = col.offsets.to_numpy() - col.offsets[0].as_py()
    flat = from_fixed(col.flatten(), dtype)
    return np.split(flat, offsets[1:-1])
