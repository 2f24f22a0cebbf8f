"""Trajectories <-> Hugging Face ``datasets.Dataset``: one row per episode, columns built whole.

Observations and actions may be arrays of any shape and dtype, or dicts and tuples of them
(Dict and Tuple spaces): each leaf becomes an Arrow list column (nested in a struct), so
dtypes and shapes come back exactly. The spaces and summary statistics travel in the
dataset's metadata.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import gymnasium as gym
import numpy as np
import pyarrow as pa
from datasets.fingerprint import generate_random_fingerprint

from rlhp.data.arrow import from_ragged, to_ragged
from rlhp.data.frames import stacks
from rlhp.data.spaces import space_from_json, space_to_json
from rlhp.data.trajectory import Nested, Trajectory
from rlhp.errors import DataError
from rlhp.files import written_whole

_META_KEY = "rlhp"


def _encode(per_episode: list[Nested]) -> pa.Array:
    first = per_episode[0]
    if isinstance(first, (dict, tuple)):
        keys = list(first) if isinstance(first, dict) else list(range(len(first)))
        children = [_encode([e[k] for e in per_episode]) for k in keys]
        return pa.StructArray.from_arrays(children, names=[str(k) for k in keys])
    return to_ragged([np.asarray(e) for e in per_episode])


def _decode(col: pa.Array | pa.ChunkedArray, space: gym.Space | None) -> list[Nested]:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_struct(col.type):
        return from_ragged(col)
    names = [col.type.field(i).name for i in range(col.type.num_fields)]
    subspaces = (space.spaces if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)) else {})
    children = {n: _decode(col.field(n), subspaces[int(n) if isinstance(space, gym.spaces.Tuple) else n]
                           if subspaces else None) for n in names}
    rows = [dict(zip(names, values)) for values in zip(*children.values())]
    if isinstance(space, gym.spaces.Tuple):
        return [tuple(row[str(i)] for i in range(len(names))) for row in rows]
    return rows


def summary(trajectories: list[Trajectory]) -> dict[str, float]:
    """Episodes, steps and return statistics, as stored in a dataset's metadata."""
    returns = np.array([float(t.rews.sum()) for t in trajectories])
    return {"episodes": len(trajectories), "steps": int(sum(len(t) for t in trajectories)),
            "return_mean": float(returns.mean()), "return_std": float(returns.std()),
            "return_min": float(returns.min()), "return_max": float(returns.max())}


def trajectories_to_dataset(trajectories: list[Trajectory], observation_space: gym.Space | None = None,
                            action_space: gym.Space | None = None, metadata: dict | None = None,
                            columns: dict[str, list | np.ndarray] | None = None) -> datasets.Dataset:
    """Columns obs, acts, rews, terminal, infos (JSON per episode) and any extra per-episode ``columns``
    (e.g. rank); spaces, stats and the frame stack in the info. Stacked observations are stored as a
    ``frames`` column instead of ``obs``: an episode's ``len + frame_stack`` frames, each once."""
    if not trajectories:
        raise ValueError("no trajectories to convert")
    stack = {t.frame_stack for t in trajectories}
    if len(stack) > 1:
        raise ValueError(f"the trajectories stack different numbers of frames ({sorted(stack)})")
    # Stacked observations as their frames, each once (k + len of them an episode): "frames", not "obs".
    observations = "frames" if stack != {1} else "obs"
    table = pa.table({**{k: pa.array(np.asarray(v)) for k, v in (columns or {}).items()},
        observations: _encode([t.frames for t in trajectories]),
        "acts": _encode([t.acts for t in trajectories]),
        "rews": to_ragged([t.rews for t in trajectories]),
        "terminal": pa.array([t.terminal for t in trajectories]),
        "infos": pa.array([json.dumps(t.infos, default=_jsonable) for t in trajectories]),
    })
    meta: dict[str, Any] = {**(metadata or {}), "summary": summary(trajectories), "frame_stack": stack.pop()}
    for key, space in (("observation_space", observation_space), ("action_space", action_space)):
        if space is not None:
            meta[key] = space_to_json(space)
    # A random fingerprint: hashing the whole table for one costs more than building it.
    return datasets.Dataset(table, info=datasets.DatasetInfo(description=json.dumps({_META_KEY: meta})),
                            fingerprint=generate_random_fingerprint())


def dataset_metadata(ds: datasets.Dataset) -> dict[str, Any]:
    """What rlhp stored about a dataset (spaces, env, policy, summary); {} for foreign datasets."""
    try:
        return json.loads(ds.info.description or "{}").get(_META_KEY, {})
    except json.JSONDecodeError:
        return {}


def dataset_to_trajectories(ds: datasets.Dataset, metadata: dict[str, Any] | None = None) -> list[Trajectory]:
    """Inverse of :func:`trajectories_to_dataset`; ``metadata`` replaces the dataset's own (e.g. from a card)."""
    meta = metadata or dataset_metadata(ds)
    spaces = {k: space_from_json(meta[k]) if k in meta else None for k in ("observation_space", "action_space")}
    table = ds.with_format("arrow")[:]
    stack = meta.get("frame_stack", 1)
    obs = [stacks(f, stack, axis=0) for f in from_ragged(table["frames"])] if stack > 1 \
        else _decode(table["obs"], spaces["observation_space"])
    acts = _decode(table["acts"], spaces["action_space"])
    rews = from_ragged(table["rews"])
    infos = _decode_infos(table["infos"]) if "infos" in table.column_names else [[] for _ in range(len(table))]
    ranks = table["rank"].to_pylist() if "rank" in table.column_names else [None] * len(table)
    return [
        Trajectory(obs=o, acts=a, rews=r, terminal=bool(t), infos=i, episode=row, rank=rank, frame_stack=stack)
        for row, (o, a, r, t, i, rank) in enumerate(zip(obs, acts, rews, table["terminal"].to_pylist(), infos, ranks))
    ]


def _decode_infos(col: pa.ChunkedArray) -> list[list[dict]]:
    """rlhp stores one JSON list per episode; imitation one (jsonpickle) JSON string per step."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return [json.loads(s) for s in col.to_pylist()]
    return [[json.loads(s) for s in episode] for episode in col.to_pylist()]


def save_trajectories(trajectories: list[Trajectory], path: str | Path, **kwargs: Any) -> None:
    """Write as a dataset folder (see :func:`save_dataset`)."""
    save_dataset(trajectories_to_dataset(trajectories, **kwargs), path)


def save_dataset(ds: datasets.Dataset, path: str | Path) -> None:
    """``save_to_disk`` into a temporary folder, then swap it in: a crash never leaves half a dataset."""
    with written_whole(Path(path)) as tmp:
        ds.save_to_disk(str(tmp))


def load_saved(path: str | Path) -> datasets.Dataset | datasets.DatasetDict:
    """``datasets.load_from_disk``, with a folder that is not such a dataset, or whose files are damaged or
    truncated, a :class:`~rlhp.errors.DataError` naming it (the folder is left as it is)."""
    where = repr(str(path))
    try:
        return datasets.load_from_disk(str(path))
    except FileNotFoundError as err:
        raise DataError(f"{where} is not a dataset saved with save_to_disk ({err})") from None
    except (OSError, pa.ArrowException, ValueError, KeyError, TypeError) as err:
        raise DataError(f"{where} could not be read, its files may be damaged or truncated "
                        f"({type(err).__name__}: {err})") from None


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a folder written by :func:`save_trajectories`."""
    return dataset_to_trajectories(load_saved(path))


def _jsonable(value: object) -> object:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
