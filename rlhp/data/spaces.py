"""Gymnasium spaces <-> JSON, so a dataset can carry the spaces it was recorded in."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlhp.data.state import record

SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of those"

for _space in (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary,
               gym.spaces.Dict, gym.spaces.Tuple):
    record(_space)  # plain data: an env may make one during a run (Meta-World's observation space, at reset)


def _bound(values: np.ndarray) -> Any:
    """A scalar when every entry is equal (an image's 0..255), else the nested list."""
    flat = values.reshape(-1)
    if len(flat) and (flat == flat[0]).all():
        return _scalar(flat[0])
    return [_scalar(v) for v in flat]


def _scalar(v: Any) -> Any:
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and not np.isfinite(v):
        return "inf" if v > 0 else "-inf"
    return v


def _unbound(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    values = value if isinstance(value, list) else [value]
    arr = np.array([float(v) if isinstance(v, str) else v for v in values], dtype=object).astype(dtype)
    return np.full(shape, arr[0], dtype=dtype) if len(arr) == 1 else arr.reshape(shape)


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON-able description from which :func:`space_from_json` rebuilds an equal space."""
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": np.dtype(space.dtype).str,
                "low": _bound(space.low), "high": _bound(space.high)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": np.dtype(space.dtype).str}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise TypeError(f"unsupported space {space}: rlhp stores {SUPPORTED}")


def space_from_json(d: dict[str, Any]) -> gym.Space:
    """Inverse of :func:`space_to_json`."""
    kind = d["type"]
    if kind == "Box":
        shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
        low, high = (_unbound(d[k], shape, dtype) for k in ("low", "high"))
        return gym.spaces.Box(low, high, shape, dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.array(d["nvec"]), dtype=np.dtype(d["dtype"]))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_json(s) for k, s in d["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in d["spaces"]])
    raise ValueError(f"unknown space type {kind!r} in dataset metadata")
