"""Checkpoints: rlhp's one save contract, written whole or not at all and read back to resume a run.

The contract: **a checkpoint is data** (``resume.json`` and ``arrays.npz``, see :mod:`rlhp.data.state`): the
state of every part of the loop (envs mid-episode, agent, replay buffer, reward model, optimisers, preference
dataset, pending queries, the shared generator) as a tree of JSON values and arrays, beside the global random
states of Python, NumPy and torch. Resuming builds the loop again from the checkpoint's ``config.yaml`` and loads
each part's state into it; nothing in a run folder is unpickled, so a folder from anyone runs no code of theirs. A
resumed run continues exactly as the uninterrupted one would.

What keeps a round's checkpoint small, whatever the run's size:

- Arrays of at least :data:`LARGE` bytes (a replay buffer's columns) are not in ``arrays.npz``: they are
  cut into :data:`CHUNK`-byte chunks stored in the run's ``chunks/`` (made at the first such array), each
  named by its content hash and shared by every checkpoint. A round writes only the chunks that changed (a
  buffer's newest transitions); a checkpoint's ``chunks.txt`` lists the chunks it uses, and chunks that no
  kept checkpoint uses are deleted.
- Arrays a part recomputes before reading them again are stored by shape only (see
  :meth:`rlhp.agents.Agent.derived_arrays`: a replay buffer's rewards, relabelled before every agent phase).
- A part that reads its data from a path keeps the path and a content hash, not the data
  (:class:`rlhp.sources.DatasetSource`).

Beside it, the files a person reads without rlhp, each written by the part that holds it (:meth:`rlhp.loop.Loop.save`
asks each part; the checkpoint reaches into none): ``reward_net.pt`` (weights and the config that built
them), ``trainer.pt`` (its optimiser), ``agent.zip`` (SB3's format), ``preferences/`` (a dataset),
``state.json`` (counters) and the run's ``config.yaml`` and ``overrides.yaml``. docs/runs.md describes each file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlhp.data.state import Arrays, Loader, Saver, checked_dtype
from rlhp.errors import DataError, RlhpError, RunError
from rlhp.experiment.compose import compose
from rlhp.experiment.renamed import upgrade
from rlhp.experiment.stops import interrupts_held
from rlhp.files import written_whole
from rlhp.loop import Loop
from rlhp.runs import RunFolder

log = logging.getLogger(__name__)

FORMAT = 4
"""Version of ``resume.json``; a run folder written by another version is refused, not misread (3 was the pickle)."""
LARGE = 1 << 16
"""Arrays of at least this many bytes are stored in chunks outside ``arrays.npz``."""
CHUNK = 1 << 16
"""Bytes per chunk: a round rewrites the chunks its new data touch, so smaller chunks write less."""


class RunRecord:
    """How the run was configured, saved in every checkpoint: the config and the overrides (as YAML text,
    made once: writing the config out costs more than the rest of a CartPole checkpoint's small files)."""

    def __init__(self, config: DictConfig, overrides: list[str]) -> None:
        self.config, self.overrides = config, list(overrides)
        self.config_yaml = OmegaConf.to_yaml(config)
        self.overrides_yaml = OmegaConf.to_yaml(OmegaConf.create(self.overrides))


def global_random_state() -> dict[str, Any]:
    """The process-wide generators that SB3 and torch draw from (actions, dropout, ...), a GPU's among them."""
    # On device=cuda, dropout and the agent's action sampling draw from the GPU's generators.
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": cuda}


def set_global_random_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_random_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda"):  # a run that never used a GPU (or a checkpoint older than this key) has none
        torch.cuda.set_rng_state_all(state["cuda"])


class Chunks:
    """The chunk store of one save or load: ``folder`` holds chunks named by their content hash."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.used: list[str] = []

    def store(self, array: np.ndarray) -> list[str]:
        """Write the array's chunks that the store lacks; return their names."""
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        hashes = [_hash(data[i:i + CHUNK]) for i in range(0, len(data), CHUNK)]
        self.folder.mkdir(exist_ok=True)
        for i, name in enumerate(hashes):
            path = self.folder / name
            if not path.exists():
                with written_whole(path) as tmp:
                    tmp.write_bytes(data[i * CHUNK:(i + 1) * CHUNK])
        self.used += hashes
        return hashes

    def read(self, hashes: list[str], dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The array stored as ``hashes``, each chunk checked against its name."""
        out = np.empty(shape, dtype)
        view = memoryview(out).cast("B")
        if len(hashes) != -(-len(view) // CHUNK):
            raise DataError(f"an array of {len(view)} bytes listed as {len(hashes)} chunks")
        for i, name in enumerate(hashes):
            piece = view[i * CHUNK:(i + 1) * CHUNK]
            try:
                data = (self.folder / str(name)).read_bytes()
            except OSError as err:
                raise DataError(f"chunk {name!r} cannot be read ({err.strerror})") from None
            if len(data) != len(piece) or _hash(data) != name:
                raise DataError(f"chunk {name!r} does not hold what it was named for (damaged or replaced)")
            piece[:] = data
        return out


class ChunkedArrays(Arrays):
    """A checkpoint's arrays: those of at least :data:`LARGE` bytes in the run's chunk store, the rest by name."""

    def __init__(self, small: dict[str, np.ndarray], chunks: Chunks, derived: Iterable[np.ndarray] = ()) -> None:
        super().__init__(small, derived)
        self.chunks = chunks

    def put(self, array: np.ndarray) -> dict[str, Any]:
        """The node that finds ``array`` again: its chunks' names, where it is large."""
        if array.nbytes < LARGE or id(array) in self.derived or array.dtype.hasobject:
            return super().put(array)
        return {"chunks": self.chunks.store(array), "dtype": array.dtype.str, "shape": list(array.shape)}

    def get(self, node: dict[str, Any]) -> np.ndarray:
        """The array a node of :meth:`put` finds."""
        if "chunks" not in node:
            return super().get(node)
        return self.chunks.read(node["chunks"], checked_dtype(node["dtype"]), tuple(node["shape"]))


def _hash(data: bytes | memoryview) -> str:
    """BLAKE2b-128 in hex: a chunk's name, and a run record's digest."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def save_checkpoint(run: RunFolder, loop: Loop, name: str, record: RunRecord) -> Path:
    """Write ``checkpoints/<name>`` into a temporary folder, then rename it: never half a checkpoint."""
    with interrupts_held():
        return _save_checkpoint(run, loop, name, record)


def _save_checkpoint(run: RunFolder, loop: Loop, name: str, record: RunRecord) -> Path:
    path = run.checkpoint(name)
    # The same round written again after a resume: the new copy replaces the old.
    with written_whole(path) as tmp:
        tmp.mkdir(parents=True)
        counters = loop.save(tmp)
        (tmp / "state.json").write_text(json.dumps(counters, indent=1))
        (tmp / "config.yaml").write_text(record.config_yaml)
        (tmp / "overrides.yaml").write_text(record.overrides_yaml)
        write_state(tmp, run, loop, global_random_state())
    return path


def write_state(folder: Path, run: RunFolder, loop: Loop, random_state: dict[str, Any],
                also_used: Sequence[str] = ()) -> None:
    """Write the loop's state into a checkpoint's ``folder`` (beside its config.yaml and overrides.yaml):
    ``arrays.npz``, ``chunks.txt`` (listing ``also_used`` too) and, last, ``resume.json``."""
    chunks = Chunks(run.chunks_dir)
    arrays = ChunkedArrays({}, chunks, loop.derived_arrays())
    save = Saver(arrays)
    config_yaml, overrides_yaml = ((folder / name).read_text() for name in ("config.yaml", "overrides.yaml"))
    tree = {"format": FORMAT, "record": _digest(config_yaml, overrides_yaml), "random": save(random_state),
            "loop": save(loop)}
    with written_whole(folder / "arrays.npz") as tmp, tmp.open("wb") as f:
        np.savez(f, **arrays.small)
    with written_whole(folder / "chunks.txt") as tmp:
        tmp.write_text("\n".join(dict.fromkeys([*also_used, *chunks.used])))
    with written_whole(folder / "resume.json") as tmp:
        tmp.write_text(json.dumps(tree, separators=(",", ":")))


def prune_checkpoints(run: RunFolder, keep: int) -> None:
    """Delete all but the newest ``keep`` round checkpoints (``final/`` is always kept), and the chunks
    that no checkpoint left uses (or whose writing was cut off)."""
    for old in run.checkpoints()[:-keep] if keep > 0 else []:
        shutil.rmtree(old)
    if not run.chunks_dir.is_dir():
        return
    used = {name for path in run.saved_checkpoints() for name in _chunk_list(path)}
    for chunk in run.chunks_dir.iterdir():
        if chunk.name not in used:
            chunk.unlink()


def _chunk_list(path: Path) -> list[str]:
    listed = path / "chunks.txt"
    return listed.read_text().split() if listed.is_file() else []


def _digest(config_yaml: str, overrides_yaml: str) -> str:
    """What a checkpoint's run record must hash to: its two files as written."""
    return _hash(f"{config_yaml}\0{overrides_yaml}".encode())


def load_checkpoint(path: Path) -> tuple[Loop, DictConfig, list[str]]:
    """The loop saved in ``path``, built from its config and loaded with its state (global random state restored),
    the run's config and its overrides."""
    run = RunFolder(path.parent.parent)  # <run>/checkpoints/<name>
    if not (path / "resume.json").is_file() and (path / "resume.pt").is_file():
        raise RunError(f"checkpoint {str(path)!r} is a pickle (resume.pt, written by rlhp 0.1), which resuming "
                       "never loads (a pickle runs whatever code it holds): if you trust who made the run, convert "
                       f"it with rlhp-convert {run.path} --trust")
    try:
        config_yaml, overrides_yaml = ((path / name).read_text() for name in ("config.yaml", "overrides.yaml"))
        tree = json.loads((path / "resume.json").read_text())
        if not isinstance(tree, dict):
            raise DataError("resume.json holds no tree")
        with np.load(path / "arrays.npz", allow_pickle=False) as npz:
            small = dict(npz)
    except DataError as err:
        raise DataError(f"checkpoint {str(path)!r} cannot be read ({err})") from None
    except Exception as err:  # a damaged or replaced file: JSON's, NumPy's or the OS's error says which
        raise DataError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None
    if tree.get("format") != FORMAT:
        raise DataError(f"checkpoint {str(path)!r} has format {tree.get('format')!r}, this rlhp reads {FORMAT}")
    if tree.get("record") != _digest(config_yaml, overrides_yaml):  # half a YAML file often still reads
        raise DataError(f"checkpoint {str(path)!r}: its config.yaml or overrides.yaml is not the one it was saved "
                        "with (damaged or edited)")
    cfg, overrides = upgrade(OmegaConf.create(config_yaml), list(OmegaConf.create(overrides_yaml)))
    loop = compose(cfg, run.path)
    load = Loader(ChunkedArrays(small, Chunks(run.chunks_dir)))
    try:
        load.load(tree.get("loop"), loop, "loop")
        set_global_random_state(load.load(tree.get("random"), None, "random"))
    except RlhpError as err:  # a part refused to come back (its data changed): no older checkpoint would do better
        if isinstance(err, DataError):
            raise DataError(f"checkpoint {str(path)!r} cannot be loaded ({err})") from None
        raise
    except Exception as err:  # the tree does not fit the parts its config builds
        raise DataError(f"checkpoint {str(path)!r} cannot be loaded ({type(err).__name__}: {err})") from None
    return loop, cfg, overrides


def latest_loadable(run: RunFolder) -> tuple[Path, Loop, DictConfig, list[str]] | None:
    """The newest checkpoint that loads, warning about any skipped; None when the run has none."""
    for stale in run.half_written():
        log.warning("ignoring %s: its writing was cut off", stale)
        shutil.rmtree(stale)
    for path in reversed(run.saved_checkpoints()):
        try:
            return (path, *load_checkpoint(path))
        except DataError as err:
            log.warning("ignoring %s; trying the one before", err)
    return None
