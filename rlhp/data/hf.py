"""Trajectories <-> Hugging Face ``datasets.Dataset``: one row per episode, columns built whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from rlhp.data.arrow import from_ragged, to_ragged
from rlhp.data.trajectory import Trajectory

_DTYPES_KEY = "rlhp"


def trajectories_to_dataset(trajectories: list[Trajectory], metadata: dict | None = None) -> datasets.Dataset:
    """Columns obs, acts, rews, terminal, infos (JSON per step); dtypes kept in the metadata."""
    if not trajectories:
        raise ValueError("no trajectories to convert")
    first = trajectories[0]
    table = pa.table({
        "obs": to_ragged([t.obs for t in trajectories]),
        "acts": to_ragged([t.acts for t in trajectories]),
        "rews": to_ragged([t.rews for t in trajectories]),
        "terminal": pa.array([t.terminal for t in trajectories]),
        "infos": pa.array([json.dumps(t.infos, default=_jsonable) for t in trajectories]),
    })
    meta = {"dtypes": {"obs": first.obs.dtype.str, "acts": first.acts.dtype.str, "rews": first.rews.dtype.str}}
    meta.update(metadata or {})
    info = datasets.DatasetInfo(description=json.dumps({_DTYPES_KEY: meta}))
    return datasets.Dataset(table, info=info)


def dataset_to_trajectories(ds: datasets.Dataset) -> list[Trajectory]:
    """Inverse of :func:`trajectories_to_dataset`."""
    meta = json.loads(ds.info.description or "{}").get(_DTYPES_KEY, {})
    dtypes = meta.get("dtypes", {"obs": "<f4", "acts": "<i8", "rews": "<f4"})
    table = ds.with_format("arrow")[:]
    cols = {k: from_ragged(table[k], dtypes[k]) for k in ("obs", "acts", "rews")}
    infos = [json.loads(s) for s in table["infos"].to_pylist()]
    return [
        Trajectory(obs=o, acts=a, rews=r, terminal=bool(t), infos=i)
        for o, a, r, t, i in zip(cols["obs"], cols["acts"], cols["rews"], table["terminal"].to_pylist(), infos)
    ]


def save_trajectories(trajectories: list[Trajectory], path: str | Path, metadata: dict | None = None) -> None:
    """Write with ``save_to_disk`` via a temporary folder, so a crash never leaves half a dataset."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trajectories_to_dataset(trajectories, metadata).save_to_disk(str(tmp))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a folder written by :func:`save_trajectories`."""
    return dataset_to_trajectories(datasets.load_from_disk(str(path)))


def _jsonable(value: object) -> object:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
