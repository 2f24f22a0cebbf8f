"""Checkpoints: rlhp's one save contract, written whole or not at all and read back to resume a run.

The contract: **a checkpoint is the loop pickled whole** (``resume.pt``: every part, with its envs, agent,
replay buffer, reward model, optimisers, preference dataset, pending queries and the shared generator),
beside the global random states of Python, NumPy and torch. A part needs no save code of its own; one
that holds what pickle cannot take (a live process, a rendering env) says in ``__getstate__`` what builds
it again. A resumed run therefore continues exactly as the uninterrupted one would.

What keeps a round's checkpoint small, whatever the run's size:

- Arrays of at least :data:`LARGE` bytes (a replay buffer's columns) are not in ``resume.pt``: they are
  cut into :data:`CHUNK`-byte chunks stored in the run's ``chunks/`` (made at the first such array), each
  named by its content hash and shared by every checkpoint. A round writes only the chunks that changed (a
  buffer's newest transitions); a checkpoint's ``chunks.txt`` lists the chunks it uses, and chunks that no
  kept checkpoint uses are deleted.
- Arrays a part recomputes before reading them again are stored by shape only (see
  :meth:`rlhp.sources.Agent.derived_arrays`: a replay buffer's rewards, relabelled before every agent phase).
- A part that reads its data from a path keeps the path and a content hash, not the data
  (:class:`rlhp.sources.DatasetSource`).

Beside it, the files a person reads without rlhp, each written by the part that holds it (:meth:`rlhp.loop.Loop.save`
asks each part; the checkpoint reaches into none): ``reward_net.pt`` (weights and the config that built
them), ``trainer.pt`` (its optimiser), ``agent.zip`` (SB3's format), ``preferences/`` (a dataset),
``state.json`` (counters) and the run's ``config.yaml`` and ``overrides.yaml``. ``resume.pt`` is a
pickle: load only run folders you trust.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import json
import logging
import pickle
import random
import shutil
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlhp.data.torch_files import save_torch
from rlhp.errors import DataError, RlhpError
from rlhp.experiment.renamed import upgrade
from rlhp.experiment.stops import interrupts_held
from rlhp.files import written_whole
from rlhp.loop import Loop
from rlhp.runs import RunFolder

log = logging.getLogger(__name__)

FORMAT = 3
"""Version of ``resume.pt``; a run folder written by another version is refused, not misread."""
LARGE = 1 << 16
"""Arrays of at least this many bytes are stored in chunks outside ``resume.pt``."""
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


class _Chunks:
    """The chunk store of one save or load: ``folder`` holds chunks named by their content hash."""

    def __init__(self, folder: Path, derived: list[np.ndarray] = ()) -> None:
        self.folder, self.derived = folder, {id(a) for a in derived}
        self.used: list[str] = []
        self.written = 0

    def store(self, array: np.ndarray) -> tuple:
        """Write the array's chunks that the store lacks; return what rebuilds it."""
        if id(array) in self.derived:
            return _zeros, (array.dtype.str, array.shape)
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        hashes = [hashlib.blake2b(data[i:i + CHUNK], digest_size=16).hexdigest() for i in range(0, len(data), CHUNK)]
        self.folder.mkdir(exist_ok=True)
        for i, name in enumerate(hashes):
            path = self.folder / name
            if not path.exists():
                with written_whole(path) as tmp:
                    tmp.write_bytes(data[i * CHUNK:(i + 1) * CHUNK])
                self.written += min(CHUNK, len(data) - i * CHUNK)
        self.used += hashes
        return _from_chunks, (array.dtype.str, array.shape, hashes)


_STORE: contextvars.ContextVar[_Chunks] = contextvars.ContextVar("rlhp_chunk_store")


def _zeros(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A derived array's stand-in until its part recomputes it."""
    return np.zeros(shape, dtype)


def _from_chunks(dtype: str, shape: tuple[int, ...], hashes: list[str]) -> np.ndarray:
    """An array read back from the chunk store of the checkpoint being loaded."""
    out = np.empty(shape, dtype)
    view, folder = memoryview(out).cast("B"), _STORE.get().folder
    for i, name in enumerate(hashes):
        with (folder / name).open("rb") as f:
            f.readinto(view[i * CHUNK:(i + 1) * CHUNK])
    return out


def _exposed(module: str, name: str) -> type:
    """A class by the name its module exposes it under (see :meth:`_ChunkingPickler.reducer_override`)."""
    return getattr(importlib.import_module(module), name)


def _exposed_name(cls: type) -> str | None:
    """The name a class's module exposes it under, where its qualified name leads nowhere (``jax.Array`` says it
    is ``jaxlib._jax.Array`` of module ``jax``): cloudpickle would store such a class by value, and its properties
    cannot be set again on load. None for any other class."""
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__ == "__main__":
        return None
    found: Any = module
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is cls:
        return None
    return next((name for name, value in sorted(vars(module).items()) if value is cls), None)


def _unpickled(blob: np.ndarray) -> Any:
    """An object pickled as bytes into the chunk store (see :data:`AS_BYTES`)."""
    return pickle.loads(blob.tobytes())


AS_BYTES = {("mujoco._structs", "MjModel"), ("mujoco._structs", "MjData")}
"""Types pickled as bytes in the chunk store: MuJoCo pickles a model whole (a data with its model), tens of MB of
meshes alike in every env copy of a run and every checkpoint; chunked, they are kept once."""


class _ChunkingPickler(cloudpickle.Pickler):
    """A pickler that sends large arrays to the chunk store of the save in progress.

    It is cloudpickle's (SB3 saves its agents' schedules with it too): a JAX agent holds closures (optax's
    optimisers) and jitted functions that the standard pickler refuses, and cloudpickle stores those by value;
    whatever can be imported is still stored by reference, and the file loads with the standard unpickler.
    """

    def reducer_override(self, obj: Any) -> Any:
        """Large plain arrays go to the chunk store, and the types of :data:`AS_BYTES` as bytes there; a class whose
        qualified name leads nowhere is stored by the name its module exposes it under; everything else pickles as
        cloudpickle does."""
        if type(obj) is np.ndarray and obj.nbytes >= LARGE and not obj.dtype.hasobject:
            return _STORE.get().store(obj)
        if (type(obj).__module__, type(obj).__name__) in AS_BYTES:
            return _unpickled, (np.frombuffer(pickle.dumps(obj), np.uint8),)
        if isinstance(obj, type) and (name := _exposed_name(obj)) is not None:
            return _exposed, (obj.__module__, name)
        return super().reducer_override(obj)


_chunking = types.ModuleType("rlhp_chunking_pickle")
_chunking.Pickler = _ChunkingPickler  # torch.save subclasses pickle_module.Pickler for its tensors


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
        chunks = _Chunks(run.chunks_dir, loop.derived_arrays())
        token = _STORE.set(chunks)
        try:
            save_torch({"format": FORMAT, "loop": loop, "random": global_random_state(),
                        "record": _digest(record.config_yaml, record.overrides_yaml)}, tmp / "resume.pt",
                        pickle_module=_chunking)
        finally:
            _STORE.reset(token)
        (tmp / "chunks.txt").write_text("\n".join(dict.fromkeys(chunks.used)))
    return path


def prune_checkpoints(run: RunFolder, keep: int) -> None:
    """Delete all but the newest ``keep`` round checkpoints (``final/`` is always kept), and the chunks
    that no checkpoint left uses (or whose writing was cut off)."""
    for old in run.checkpoints()[:-keep] if keep > 0 else []:
        shutil.rmtree(old)
    if not run.chunks_dir.is_dir():
        return
    used = {name for path in run.saved_checkpoints() for name in (path / "chunks.txt").read_text().split()}
    for chunk in run.chunks_dir.iterdir():
        if chunk.name not in used:
            chunk.unlink()


def _digest(config_yaml: str, overrides_yaml: str) -> str:
    """What a checkpoint's run record must hash to: its two files as written."""
    return hashlib.blake2b(f"{config_yaml}\0{overrides_yaml}".encode(), digest_size=16).hexdigest()


def load_checkpoint(path: Path) -> tuple[Loop, DictConfig, list[str]]:
    """The loop saved in ``path`` (global random state restored), the run's config and its overrides."""
    token = _STORE.set(_Chunks(RunFolder(path.parent.parent).chunks_dir))  # <run>/checkpoints/<name>
    try:
        # Unpickling imports the parts' libraries; dm_control's composer turns on every DeprecationWarning of
        # every library for the whole process at its import, so the libraries imported after it (SBX's
        # tensorflow-probability) would warn on the console. The filters come back after the load, and the
        # warnings it raised are replayed under them: a fresh run shows the same.
        with warnings.catch_warnings(record=True) as raised:
            saved = torch.load(path / "resume.pt", weights_only=False)
        for each in raised:
            warnings.warn_explicit(each.message, each.category, each.filename, each.lineno)
        config_yaml, overrides_yaml = ((path / name).read_text() for name in ("config.yaml", "overrides.yaml"))
        cfg, overrides = upgrade(OmegaConf.create(config_yaml), list(OmegaConf.create(overrides_yaml)))
    except RlhpError:  # a part refused to come back (its data changed): no older checkpoint would do better
        raise
    except Exception as err:  # torch.load re-raises whatever unpickling raised
        raise DataError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None
    finally:
        _STORE.reset(token)
    if saved.get("format") != FORMAT:
        raise DataError(f"checkpoint {str(path)!r} has format {saved.get('format')}, this rlhp reads {FORMAT}")
    if saved.get("record") != _digest(config_yaml, overrides_yaml):  # half a YAML file often still reads
        raise DataError(f"checkpoint {str(path)!r}: its config.yaml or overrides.yaml is not the one it was saved "
                        "with (damaged or edited)")
    set_global_random_state(saved["random"])
    return saved["loop"], cfg, overrides


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
