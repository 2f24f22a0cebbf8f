"""``rlhp-convert <run folder> --trust``: the checkpoints rlhp 0.1 pickled (``resume.pt``, format 3) rewritten as data
(format 4, :mod:`rlhp.experiment.checkpoints`), so that the run resumes.

The one place rlhp unpickles a run folder, and only on the command's ``--trust``: a pickle runs whatever code it
holds, so convert only a run from someone you trust. What the parts of rlhp 0.1 did when they were unpickled (their
``__setstate__``, since replaced by ``save_state``/``load_state``) lives here, in :data:`OLD`, and nowhere else.
Each checkpoint's new files are written beside ``resume.pt`` and loaded back (into the loop its config builds)
before the next is converted; ``resume.pt`` is kept, with the chunks it uses, so nothing is lost whatever stops
the command.
"""

from __future__ import annotations

import argparse
import contextvars
import importlib
import inspect
import pickle
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhp.data.frames import stacks
from rlhp.errors import DataError, RlhpError, RunError
from rlhp.experiment.checkpoints import Chunks, load_checkpoint, write_state
from rlhp.experiment.renamed import moved
from rlhp.runs import RunFolder

OLD_FORMAT = 3
"""The format of ``resume.pt`` this converts."""

_CHUNKS: contextvars.ContextVar[Chunks] = contextvars.ContextVar("rlhp_old_chunks")


def _from_chunks(dtype: str, shape: tuple[int, ...], hashes: list[str]) -> np.ndarray:
    """rlhp 0.1's large array, read from the run's chunk store."""
    return _CHUNKS.get().read(hashes, np.dtype(dtype), tuple(shape))


def _zeros(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """rlhp 0.1's derived array (a replay buffer's rewards), stored by shape only."""
    return np.zeros(shape, dtype)


def _unpickled(blob: np.ndarray) -> Any:
    """rlhp 0.1's MuJoCo model or data, pickled as bytes into the chunk store."""
    return pickle.loads(blob.tobytes())


def _exposed(module: str, name: str) -> type:
    """A class by the name its module exposes it under (rlhp 0.1 stored ``jax.Array`` so)."""
    return getattr(importlib.import_module(module), name)


READERS = {"_from_chunks": _from_chunks, "_zeros": _zeros, "_unpickled": _unpickled, "_exposed": _exposed}
"""What rlhp 0.1's ``rlhp.experiment.checkpoints`` pickled references to, by name."""


def _trajectory(self: Any, state: dict[str, Any]) -> None:
    k = state.get("frame_stack", 1)
    recorded = state.pop("physics", None)  # rlhp 0.1's name when only MuJoCo's states were recorded
    state = {"states": np.zeros((len(state["rews"]) + 1, 0)) if recorded is None else recorded, **state}
    self.__dict__.update(state, infos=state["infos"].unpack(),
                         obs=stacks(state["obs"], k, axis=0) if k > 1 else state["obs"])


def _recorder(self: Any, state: dict[str, Any]) -> None:
    infos = state["_infos"].unpack()
    state = {"frame_stack": 1, "_heads": None, "_last": None, **state}
    n = state["n_envs"]
    self.__dict__.update(state, **{k: list(state[k]) for k in ("_obs", "_acts", "_rews")},
                         _infos=[infos[i:i + n] for i in range(0, len(infos), n)])


def _game(self: Any, state: dict[str, Any]) -> None:
    game_state, np_random = state.pop("game_state"), state.pop("np_random")
    self.__dict__.update(state)
    game = self.env.unwrapped
    game.ale.restoreState(game_state)
    game.np_random = np_random


def _physics(self: Any, state: dict[str, Any]) -> None:
    import mujoco

    placed, integration = state.pop("_physics")
    self.__dict__.update(state)
    model, data = self.env.unwrapped.model, self.env.unwrapped.data
    for key, array in placed.items():
        getattr(model, key)[:] = array
    mujoco.mj_setState(model, data, integration, mujoco.mjtState.mjSTATE_INTEGRATION)


def _reward_env(self: Any, state: dict[str, Any]) -> None:
    # SB3's wrapper finds an attribute through its class's members: without them, any lookup recurses.
    self.__dict__.update(state, class_attributes=dict(inspect.getmembers(type(self))))


def _querent(self: Any, state: dict[str, Any]) -> None:
    state.pop("_renderer_args")  # the config builds the renderer again
    self.__dict__.update(state)


OLD: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("rlhp.data.trajectory", "Trajectory"): _trajectory,
    ("rlhp.data.trajectory", "TrajectoryRecorder"): _recorder,
    ("rlhp.envs.atari", "KeepGameState"): _game,
    ("rlhp.envs.metaworld", "WholePhysics"): _physics,
    ("rlhp.human.querent", "WebQuerent"): _querent,
    ("rlhp.agents.reward_env", "RewardVecEnvWrapper"): _reward_env,
}
"""How each part of rlhp 0.1 that pickled its own way comes back: its ``__setstate__`` as it was."""

_SHIMS: dict[type, type] = {}


def _shim(cls: type, restore: Callable[[Any, dict[str, Any]], None]) -> type:
    """A subclass of ``cls`` that unpickles as rlhp 0.1's did, then is ``cls`` again."""
    def setstate(self: Any, state: dict[str, Any]) -> None:
        self.__class__ = cls
        restore(self, dict(state))

    return _SHIMS.setdefault(cls, type(cls.__name__, (cls,), {"__setstate__": setstate}))


class _OldUnpickler(pickle.Unpickler):
    """Finds what rlhp 0.1's checkpoints name: its readers here, its parts through :data:`OLD`."""

    def find_class(self, module: str, name: str) -> Any:
        """The class or function ``module.name`` stands for now."""
        if module == "rlhp.experiment.checkpoints" and name in READERS:
            return READERS[name]
        module = moved(module)
        found = super().find_class(module, name)
        return _shim(found, OLD[module, name]) if (module, name) in OLD else found


_OLD_PICKLE = types.ModuleType("rlhp_old_pickle")
_OLD_PICKLE.Unpickler = _OldUnpickler  # torch.load subclasses pickle_module.Unpickler for its tensors
_OLD_PICKLE.load = pickle.load


def convert_checkpoint(path: Path) -> None:
    """Write ``path``'s state (``resume.pt``, format 3) as data beside it, and check that it loads."""
    run = RunFolder(path.parent.parent)
    old_chunks = (path / "chunks.txt").read_text().split() if (path / "chunks.txt").is_file() else []
    token = _CHUNKS.set(Chunks(run.chunks_dir))
    try:
        saved = torch.load(path / "resume.pt", weights_only=False, pickle_module=_OLD_PICKLE)
    except Exception as err:  # whatever unpickling raised
        raise DataError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None
    finally:
        _CHUNKS.reset(token)
    if not isinstance(saved, dict) or saved.get("format") != OLD_FORMAT:
        raise DataError(f"checkpoint {str(path)!r}: resume.pt is not of format {OLD_FORMAT}")
    loop = saved["loop"]
    vars(loop).setdefault("agent", loop.source.agent)  # rlhp 0.1's loop reached its agent through the source
    write_state(path, run, loop, saved["random"], also_used=old_chunks)
    try:
        load_checkpoint(path)
    except RlhpError:
        (path / "resume.json").unlink()  # not converted: the folder is as it was, but for a harmless arrays.npz
        raise


def convert_run(folder: str | Path) -> list[Path]:
    """Convert every checkpoint of the run in ``folder`` that holds only ``resume.pt``; return them."""
    run = RunFolder(Path(folder))
    if not run.checkpoints_dir.is_dir():
        raise RunError(f"{str(folder)!r} holds no checkpoints/ (is it a run folder?)")
    with run.lock():  # a run still writing the folder is refused, as a second rlhp-train would be
        todo = [p for p in run.saved_checkpoints()
                if (p / "resume.pt").is_file() and not (p / "resume.json").is_file()]
        for path in todo:
            convert_checkpoint(path)
    return todo


def main(argv: list[str] | None = None) -> int:
    """``rlhp-convert <run folder> --trust``: rewrite a run's pickled checkpoints (rlhp 0.1) as data."""
    parser = argparse.ArgumentParser(prog="rlhp-convert", description=__doc__ and main.__doc__)
    parser.add_argument("folder", help="a run folder written by rlhp 0.1 (its checkpoints hold resume.pt)")
    parser.add_argument("--trust", action="store_true",
                        help="unpickle its checkpoints, which runs whatever code they hold: only for a run you trust")
    args = parser.parse_args(argv)
    if not args.trust:
        print(f"rlhp-convert: refused: converting unpickles {args.folder}'s checkpoints, which runs whatever code "
              "they hold; add --trust if you trust who made the run", file=sys.stderr)
        return 2
    try:
        done = convert_run(args.folder)
    except RlhpError as err:
        print(f"rlhp-convert: {err.kind}: {err}", file=sys.stderr)
        return err.exit_code
    print(f"rlhp-convert: {len(done)} checkpoint(s) of {args.folder} converted; resume it with "
          f"rlhp-train resume={args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
