"""Stacked observations stored as their frames: a stack of ``k`` frames shares ``k - 1`` of them with its
neighbour, so a run of stacks is kept as one run of frames and the stacks are read-only views over it."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view


def stacks(frames: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Read-only view of every run of ``size`` consecutive frames along ``axis``, the stack axis right after
    it: frames of shape (..., n, *frame) give stacks of shape (..., n - size + 1, size, *frame)."""
    return np.moveaxis(sliding_window_view(frames, size, axis=axis), -1, axis + 1)


def stacks_tensor(frames: torch.Tensor, size: int, axis: int) -> torch.Tensor:
    """:func:`stacks` for a tensor: a view, so indexing it gathers only the stacks asked for."""
    return frames.unfold(axis, size, 1).movedim(-1, axis + 1)


def as_tensor(x: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """``x`` as a tensor sharing its memory where it can. Frame stacks are read-only views, which torch warns
    it cannot mark read-only; the reward net only reads its inputs, so that warning is dropped."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(x, device=device)


def is_stack_view(x: np.ndarray, axis: int) -> bool:
    """Whether ``x`` is a window view over frames: its step and stack axes move through memory alike."""
    return x.base is not None and x.shape[axis] > 0 and x.strides[axis] == x.strides[axis + 1]


def frames_of(x: np.ndarray, axis: int) -> np.ndarray:
    """The frames under consecutive stacks along ``axis``: the first stack whole, then each later stack's newest
    frame. Raises ValueError when neighbouring stacks do not share their frames."""
    lead = (slice(None),) * axis  # views, so only the frames are copied, never the stacks
    frames = np.concatenate([x[(*lead, 0)], x[(*lead, slice(1, None), -1)]], axis=axis)
    if not is_stack_view(x, axis) and not np.array_equal(stacks(frames, x.shape[axis + 1], axis), x):
        raise ValueError("observations are not consecutive frame stacks (each stack the one before it, shifted "
                         "by one new frame)")
    return frames


def shared(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` as a view over its frames, each stored once (``x`` itself when it already is one)."""
    return x if is_stack_view(x, axis) else stacks(frames_of(x, axis), x.shape[axis + 1], axis)


def held_bytes(x: np.ndarray) -> int:
    """Bytes of the memory that keeps ``x`` alive (its base's, for a view): what it costs, not what it shows."""
    while getattr(x, "base", None) is not None:
        x = x.base
    return x.nbytes
