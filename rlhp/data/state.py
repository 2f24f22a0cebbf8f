"""A run's state as data: a tree of JSON values whose arrays are stored apart, loaded into the parts a config built.

Saving walks the loop's objects and writes what they hold: numbers, strings, lists, dicts, arrays, tensors,
random generators' states. Code is never written (functions, classes, modules, threads, locks, open files: the
config builds them again). Loading walks the tree beside the loop that the run's config built anew and puts each
value into the part at the same place, in place where it can (a list, a dict, a tensor, a generator keep their
identity, so whatever else holds them sees the loaded values). No object is built from a name in the file except
the plain records registered with :func:`record` (a trajectory, a batch of fragment pairs): a crafted file can set
data, never run code.

A part whose attributes include what its config builds again (a live env, a thread, data read from a path) names
them in a class attribute ``unsaved``: the walk leaves them out and the fresh part keeps its own. A part that holds
more than its attributes say (an emulator's state) says what it saves with ``save_state() -> dict`` and takes it back
with ``load_state(state)`` (:class:`Stateful`).

Node forms (each non-scalar node is a one-key JSON object, with ``id`` where another place may share it, and a
later place sharing it is ``{"ref": id}``): ``list``, ``tuple``, ``dict`` (string keys) or ``items`` (other keys),
``set``, ``deque``, ``bytes`` (base64), ``enum``, ``path``, ``ndarray`` (a name in ``arrays.npz``, or ``inline``
numbers, or ``chunks``, each with ``dtype`` and ``shape``, or ``zeros``), ``scalar`` (a NumPy scalar with its
``dtype``), ``tensor``, ``jax``, ``generator``, ``random``, ``optimizer``, ``pytree``, ``mjdata``, ``object`` (the
class's name, and its ``state``) and ``skip`` (code, built again by the config). docs/runs.md describes each for a
reader without rlhp.
"""

from __future__ import annotations

import base64
import collections
import enum
import functools
import io
import logging
import pathlib
import random
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlhp.errors import DataError

RECORDS: dict[str, type] = {}
"""The classes a checkpoint may make new instances of, by name: plain records, built without running their code."""

INLINE = 16
"""Arrays of at most this many numbers are written in the tree itself (JSON numbers round-trip exactly)."""

BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
"""NumPy's bit generators a saved generator may name."""


def record(cls: type) -> type:
    """Register ``cls`` as a plain record a checkpoint may hold new instances of (its attributes are data)."""
    if RECORDS.setdefault(cls.__name__, cls) is not cls:
        raise TypeError(f"two records named {cls.__name__}")
    return cls


@runtime_checkable
class Stateful(Protocol):
    """A part that says what it saves, instead of its attributes."""

    def save_state(self) -> dict[str, Any]:
        """What to save: data (and parts, which are saved in turn)."""

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back what :meth:`save_state` returned (loaded into the part's own values where they exist)."""


class _Skip:
    """A value the file does not hold (code): the freshly built part keeps its own."""


SKIP = _Skip()

_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.BuiltinMethodType, type,
         types.ModuleType, functools.partial, staticmethod, classmethod, property, io.IOBase, logging.Logger,
         logging.Handler, weakref.ReferenceType, threading.Thread, type(threading.Lock()), type(threading.RLock()),
         threading.Event, threading.Condition, types.GeneratorType, types.CodeType, types.MethodWrapperType,
         types.WrapperDescriptorType, types.MappingProxyType, types.GetSetDescriptorType,
         types.MemberDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)
"""Values a checkpoint never holds: code and what belongs to one process (threads, locks, open files, loggers)."""

_CODE_MODULES = ("jaxlib", "jax._src", "subprocess", "multiprocessing", "socket", "sqlite3", "_thread", "queue",
                 "concurrent", "asyncio", "uvicorn", "mujoco.renderer", "OpenGL", "mujoco.egl", "mujoco.glfw",
                 "ctypes", "dm_control._render", "pygame", "tqdm", "rich", "ale_py._ale_py",
                 "gymnasium.envs.mujoco.mujoco_rendering", "dm_control.mujoco.index")
"""Modules whose objects are code, live resources (a jitted function, a process, a connection, a GL context) or views
a model's build makes again (dm_control's named indexers)."""


DERIVED_ATTRIBUTES = frozenset({"class_attributes"})
"""Attributes no part's state holds: SB3's vectorised-env wrappers keep their class's members in
``class_attributes``, which the class gives back."""


def _is_code(obj: Any) -> bool:
    if isinstance(obj, _CODE):
        return True
    module = type(obj).__module__ or ""
    return module.startswith(_CODE_MODULES) and not _is_jax_array(obj)


def _is_jax_array(obj: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(obj, jax.Array)


def _is_pytree_node(obj: Any) -> bool:
    """A JAX pytree of a class of its own (a Flax train state): saved as its leaves, rebuilt on the fresh one."""
    if not type(obj).__module__.startswith(("flax", "optax", "chex", "sbx")):
        return False
    import jax

    return jax.tree_util.tree_structure(obj).num_nodes > 1


def _qualname(obj: Any) -> str:
    return type(obj).__qualname__


class Arrays:
    """Where a save puts the arrays of its tree, and a load finds them: by name in ``small`` (``arrays.npz``); the
    arrays of ``derived`` (a part recomputes them before reading them) by shape only. A checkpoint stores large ones
    apart (:class:`rlhp.experiment.checkpoints.ChunkedArrays`)."""

    def __init__(self, small: dict[str, np.ndarray], derived: Iterable[np.ndarray] = ()) -> None:
        self.small = small
        self.derived = {id(a) for a in derived}

    def put(self, array: np.ndarray) -> dict[str, Any]:
        """The node that finds ``array`` again."""
        if array.dtype.hasobject:
            raise DataError(f"an array of Python objects ({array.shape}) cannot be saved as data")
        if id(array) in self.derived:
            return {"zeros": array.dtype.str, "shape": list(array.shape)}
        if array.size <= INLINE and array.dtype.kind in "biuf":  # a space's bounds: cheaper in the tree than a file
            return {"inline": array.ravel().tolist(), "dtype": array.dtype.str, "shape": list(array.shape)}
        name = f"a{len(self.small)}"
        self.small[name] = array
        return {"array": name}

    def get(self, node: dict[str, Any]) -> np.ndarray:
        """The array a node of :meth:`put` finds."""
        if "zeros" in node:
            return np.zeros(node["shape"], checked_dtype(node["zeros"]))
        if "inline" in node:
            return np.array(node["inline"], checked_dtype(node["dtype"])).reshape(node["shape"])
        try:
            return self.small[node["array"]]
        except KeyError:
            raise DataError(f"array {node['array']!r} is missing from arrays.npz") from None


def checked_dtype(name: str) -> np.dtype:
    """The dtype ``name`` says, refused when it holds Python objects (which only a pickle could hold)."""
    dtype = np.dtype(name)
    if dtype.hasobject:
        raise DataError(f"arrays of Python objects ({name}) are not data")
    return dtype


class Saver:
    """Turns objects into a tree (one save: shared objects are written once and referred to after)."""

    def __init__(self, arrays: Arrays) -> None:
        self.arrays = arrays
        self.ids: dict[int, int] = {}
        self.kept: list[Any] = []  # what the ids belong to stays alive until the save ends (ids are not reused)
        self._by_type: dict[type, Callable[[Saver, Any], Any]] = {}

    def __call__(self, obj: Any) -> Any:
        """The node of ``obj``."""
        if obj is None or type(obj) in (bool, int, float, str):  # not their subclasses (an IntEnum, np.float64)
            return obj
        if id(obj) in self.ids:
            return {"ref": self.ids[id(obj)]}
        node = self._node(obj)
        if isinstance(node, dict) and "skip" not in node:
            self.ids[id(obj)] = node["id"] = len(self.ids)
            self.kept.append(obj)
        return node

    def _node(self, obj: Any) -> Any:
        kind = type(obj)
        handler = self._by_type.get(kind)
        if handler is None:  # chosen once per type: a save meets the same few types thousands of times
            handler = self._by_type[kind] = self._handler(obj)
        return handler(self, obj)

    @staticmethod
    def _handler(obj: Any) -> Callable[[Saver, Any], Any]:
        if type(obj) is tuple:  # a named tuple is an object (its class is part of it)
            return Saver._sequence
        for kind, handler in Saver._TYPED:
            if isinstance(obj, kind):
                return handler
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, (torch.Tensor, torch.optim.Optimizer, torch.Generator,
                                                  torch.dtype, torch.device)):
            return Saver._torch
        if torch is not None and isinstance(obj, torch.distributions.Distribution):
            return Saver._skip  # the last forward pass's, made again by the next one
        if _is_jax_array(obj):
            return Saver._jax
        if _is_code(obj) or (type(obj).__module__, type(obj).__name__) == ("mujoco._structs", "MjModel"):
            return Saver._skip  # a model is built again from the env's config
        if (type(obj).__module__, type(obj).__name__) == ("mujoco._structs", "MjData"):
            return Saver._mjdata
        if _is_pytree_node(obj):
            return Saver._pytree
        return Saver._object

    def _skip(self, obj: Any) -> dict[str, Any]:
        return {"skip": _qualname(obj)}

    def _jax(self, obj: Any) -> dict[str, Any]:
        return {"jax": self.arrays.put(np.asarray(obj))}

    def _pytree(self, obj: Any) -> dict[str, Any]:
        import jax

        return {"pytree": [self(leaf) for leaf in jax.tree_util.tree_leaves(obj)]}

    def _sequence(self, obj: Any) -> dict[str, Any]:
        kind = "tuple" if isinstance(obj, tuple) else "set" if isinstance(obj, (set, frozenset)) else "list"
        return {kind: [self(item) for item in obj]}

    def _deque(self, obj: collections.deque) -> dict[str, Any]:
        return {"deque": [self(item) for item in obj], "maxlen": obj.maxlen}

    def _dict(self, obj: dict) -> dict[str, Any]:
        if all(type(k) is str for k in obj):
            return {"dict": {k: self(v) for k, v in obj.items()}}
        return {"items": [[self(k), self(v)] for k, v in obj.items()]}

    def _array(self, obj: np.ndarray) -> dict[str, Any]:
        return {"ndarray": self.arrays.put(obj)}

    def _scalar(self, obj: np.generic) -> dict[str, Any]:
        return {"scalar": obj.item(), "dtype": obj.dtype.str}

    def _generator(self, obj: np.random.Generator) -> dict[str, Any]:
        return {"generator": self(obj.bit_generator.state)}

    def _random_state(self, obj: np.random.RandomState) -> dict[str, Any]:
        return {"randomstate": self(obj.get_state(legacy=False))}

    def _random(self, obj: random.Random) -> dict[str, Any]:
        return {"random": self(obj.getstate())}

    def _bytes(self, obj: bytes) -> dict[str, Any]:
        return {"bytes": base64.b64encode(obj).decode()}

    def _enum(self, obj: enum.Enum) -> dict[str, Any]:
        return {"enum": _qualname(obj), "value": self(obj.value)}

    def _path(self, obj: pathlib.PurePath) -> dict[str, Any]:
        return {"path": str(obj)}

    def _np_dtype(self, obj: np.dtype) -> dict[str, Any]:
        return {"npdtype": obj.str}

    def _torch(self, obj: Any) -> dict[str, Any]:
        import torch

        if isinstance(obj, torch.Tensor):
            data = obj.detach().cpu()
            node = {"tensor": self.arrays.put(data.numpy()), "parameter": isinstance(obj, torch.nn.Parameter),
                    "requires_grad": obj.requires_grad}
            if not data.is_contiguous():  # a layout of its own (channels last): kernels on it add in its order
                node["stride"] = list(data.stride())
            return node
        if isinstance(obj, torch.optim.Optimizer):
            return {"optimizer": self(obj.state_dict())}
        if isinstance(obj, torch.Generator):
            return {"torch_generator": self.arrays.put(obj.get_state().numpy())}
        return {"torch": str(obj)}

    def _mjdata(self, obj: Any) -> dict[str, Any]:
        import mujoco

        kind = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(obj.model, kind))
        mujoco.mj_getState(obj.model, obj, state, kind)
        return {"mjdata": self.arrays.put(state)}

    def _object(self, obj: Any) -> dict[str, Any]:
        if isinstance(obj, Stateful):
            state = obj.save_state()
        elif hasattr(obj, "__dict__"):
            left_out = DERIVED_ATTRIBUTES | getattr(obj, "unsaved", frozenset())
            state = {k: v for k, v in vars(obj).items() if not k.startswith("__") and k not in left_out}
        elif isinstance(obj, tuple):
            state = {}
        else:
            raise DataError(f"a {type(obj).__module__}.{_qualname(obj)} holds no attributes to save as data")
        node: dict[str, Any] = {"object": _qualname(obj)}
        if isinstance(obj, tuple):  # a named tuple
            node["fields"] = [self(item) for item in obj]
        node["state"] = {}
        for key, value in state.items():
            try:
                node["state"][key] = self(value)
            except DataError as err:  # the path to what cannot be saved, from the loop down
                raise DataError(f".{key}{'' if str(err).startswith(('.', ':')) else ': '}{err}") from None
        return node

    _TYPED: tuple[tuple[type | tuple[type, ...], Callable[..., Any]], ...] = (
        (np.ndarray, _array), (np.generic, _scalar), (np.random.Generator, _generator),
        (np.random.RandomState, _random_state), (random.Random, _random), ((bytes, bytearray), _bytes),
        (enum.Enum, _enum), (np.dtype, _np_dtype), (pathlib.PurePath, _path), (collections.deque, _deque),
        ((list, set, frozenset), _sequence), (dict, _dict))


class Loader:
    """Puts a tree back into the parts a config built (one load: shared objects come back shared)."""

    def __init__(self, arrays: Arrays) -> None:
        self.arrays = arrays
        self.done: dict[int, Any] = {}
        self.claimed: dict[int, Any] = {}  # a fresh value's id -> the node loaded into it
        self.optimisers: list[tuple[Any, Any]] = []

    def load(self, tree: Any, fresh: Any = None, where: str = "") -> Any:
        """The value of a whole tree, loaded into ``fresh``: optimisers last, once every part has made the
        parameters they optimise (a part may add some as it loads, as the rating model's cutpoints)."""
        value = self(tree, fresh, where)
        for optimiser, state in self.optimisers:
            optimiser.load_state_dict(state)
        self.optimisers.clear()
        return value

    def __call__(self, node: Any, fresh: Any = None, where: str = "") -> Any:
        """The value of ``node``, loaded into ``fresh`` (the freshly built value at the same place) where it can."""
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            raise DataError(f"{where or 'the tree'}: a bare list is not a node")
        if "ref" in node:
            try:
                return self.done[node["ref"]]
            except (KeyError, TypeError):
                raise DataError(f"{where}: refers to {node['ref']!r}, which nothing before it defined") from None
        kinds = [k for k in node if k != "id" and k in _LOADERS]
        if len(kinds) != 1:
            raise DataError(f"{where or 'the tree'}: not a node of the state format ({sorted(node)[:4]})")
        # (The fresh value is kept with its claim: its id stays its own until the load ends.)
        if fresh is not None and self.claimed.setdefault(id(fresh), (node.get("id"), fresh))[0] != node.get("id"):
            fresh = None  # one fresh value the config shares, two in the file: this one is made anew
        value = _LOADERS[kinds[0]](self, node, fresh, where)
        if "id" in node:
            self.done[node["id"]] = value
        return value

    def _get(self, ref: Any, where: str) -> np.ndarray:
        """The array a node refers to (see :meth:`Arrays.get`), a problem with it said where it was."""
        try:
            return self.arrays.get(ref)
        except DataError as err:
            raise DataError(f"{where}: {err}") from None
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{where}: not an array's place ({type(err).__name__}: {err})") from None

    def _items(self, nodes: list[Any], old: Sequence[Any], where: str) -> list[Any]:
        """Each node's value, loaded into the fresh item at its place; where it is code, the fresh item (None where
        there is none)."""
        values = []
        for i, item in enumerate(nodes):
            fresh = old[i] if i < len(old) else None
            value = self(item, fresh, f"{where}[{i}]")
            values.append(fresh if value is SKIP else value)
        return values

    def _early(self, node: dict[str, Any], value: Any) -> None:
        """Register a mutable value before its items load (an item may refer back to it)."""
        if "id" in node:
            self.done[node["id"]] = value

    def _list(self, node: dict[str, Any], fresh: Any, where: str) -> list:
        target = fresh if type(fresh) is list else []
        self._early(node, target)
        target[:] = self._items(node["list"], list(target), where)
        return target

    def _tuple(self, node: dict[str, Any], fresh: Any, where: str) -> tuple:
        return tuple(self._items(node["tuple"], fresh if isinstance(fresh, tuple) else (), where))

    def _set(self, node: dict[str, Any], fresh: Any, where: str) -> set:
        items = {self(item, None, where) for item in node["set"]}
        if isinstance(fresh, set):
            fresh.clear()
            fresh.update(items)
            return fresh
        return frozenset(items) if isinstance(fresh, frozenset) else items

    def _deque(self, node: dict[str, Any], fresh: Any, where: str) -> collections.deque:
        target = fresh if isinstance(fresh, collections.deque) and fresh.maxlen == node["maxlen"] \
            else collections.deque(maxlen=node["maxlen"])
        self._early(node, target)
        items = self._items(node["deque"], list(target), where)
        target.clear()
        target.extend(items)
        return target

    def _dict(self, node: dict[str, Any], fresh: Any, where: str) -> dict:
        target = fresh if isinstance(fresh, dict) else {}
        self._early(node, target)
        if "dict" in node:
            pairs = [(k, v) for k, v in node["dict"].items()]
        else:
            pairs = [(self(k, None, where), v) for k, v in node["items"]]
        values = {}
        for k, v in pairs:
            value = self(v, target.get(k), f"{where}[{k!r}]")
            if value is not SKIP:
                values[k] = value
            elif k in target:
                values[k] = target[k]
        target.clear()
        target.update(values)
        return target

    def _ndarray(self, node: dict[str, Any], fresh: Any, where: str) -> np.ndarray:
        array = self._get(node["ndarray"], where)
        if type(fresh) is np.ndarray and fresh.shape == array.shape and fresh.dtype == array.dtype \
                and fresh.flags.writeable:
            fresh[...] = array  # in place: views of it (a buffer's columns) see the loaded values
            return fresh
        return array

    def _scalar(self, node: dict[str, Any], fresh: Any, where: str) -> np.generic:
        return checked_dtype(node["dtype"]).type(node["scalar"])

    def _generator(self, node: dict[str, Any], fresh: Any, where: str) -> np.random.Generator:
        state = self(node["generator"], None, where)
        name = state.get("bit_generator") if isinstance(state, dict) else None
        if name not in BIT_GENERATORS:
            raise DataError(f"{where}: a random generator of an unknown kind ({name!r})")
        target = fresh if isinstance(fresh, np.random.Generator) and type(fresh.bit_generator).__name__ == name \
            else np.random.Generator(getattr(np.random, name)())
        target.bit_generator.state = state
        return target

    def _randomstate(self, node: dict[str, Any], fresh: Any, where: str) -> np.random.RandomState:
        target = fresh if isinstance(fresh, np.random.RandomState) else np.random.RandomState()
        target.set_state(self(node["randomstate"], None, where))
        return target

    def _random(self, node: dict[str, Any], fresh: Any, where: str) -> random.Random:
        target = fresh if isinstance(fresh, random.Random) else random.Random()
        target.setstate(self(node["random"], None, where))
        return target

    def _bytes(self, node: dict[str, Any], fresh: Any, where: str) -> bytes:
        return base64.b64decode(node["bytes"])

    def _enum(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        value = self(node["value"], None, where)
        # Without a fresh member of its class to say which class, it is its value (an IntEnum's number still equals it).
        return type(fresh)(value) if isinstance(fresh, enum.Enum) and _qualname(fresh) == node["enum"] else value

    def _path(self, node: dict[str, Any], fresh: Any, where: str) -> pathlib.Path:
        return pathlib.Path(node["path"])

    def _npdtype(self, node: dict[str, Any], fresh: Any, where: str) -> np.dtype:
        return checked_dtype(node["npdtype"])

    def _tensor(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import torch

        array = self._get(node["tensor"], where)
        if isinstance(fresh, torch.Tensor) and tuple(fresh.shape) == array.shape \
                and fresh.dtype == torch.from_numpy(np.empty(0, array.dtype)).dtype:
            with torch.no_grad():
                fresh.copy_(torch.from_numpy(array))
            return fresh
        tensor = torch.from_numpy(np.array(array))
        if "stride" in node:
            tensor = torch.empty_strided(tensor.shape, node["stride"], dtype=tensor.dtype).copy_(tensor)
        if isinstance(fresh, torch.Tensor):
            tensor = tensor.to(fresh.device)
        if node.get("parameter"):
            return torch.nn.Parameter(tensor, requires_grad=bool(node.get("requires_grad")))
        return tensor.requires_grad_(bool(node.get("requires_grad")))

    def _optimizer(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import torch

        if not isinstance(fresh, torch.optim.Optimizer):
            raise DataError(f"{where}: holds an optimiser, where this config builds {_qualname(fresh)}")
        self.optimisers.append((fresh, self(node["optimizer"], None, where)))
        return fresh

    def _torch_generator(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import torch

        target = fresh if isinstance(fresh, torch.Generator) else torch.Generator()
        target.set_state(torch.from_numpy(np.array(self._get(node["torch_generator"], where))))
        return target

    def _torch_value(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import torch

        if isinstance(fresh, (torch.dtype, torch.device)) and str(fresh) == node["torch"]:
            return fresh
        if node["torch"].startswith("torch."):
            dtype = getattr(torch, node["torch"][6:], None)
            if isinstance(dtype, torch.dtype):
                return dtype
        return torch.device(node["torch"])

    def _jax(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import jax.numpy as jnp

        return jnp.asarray(self._get(node["jax"], where))

    def _pytree(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import jax

        if fresh is None or not _is_pytree_node(fresh):
            raise DataError(f"{where}: holds a JAX tree, where this config builds {_qualname(fresh)}")
        leaves, tree = jax.tree_util.tree_flatten(fresh)
        saved = node["pytree"]
        if len(saved) != len(leaves):
            raise DataError(f"{where}: holds {len(saved)} arrays, where this config's {_qualname(fresh)} has "
                            f"{len(leaves)}")
        return jax.tree_util.tree_unflatten(tree, self._items(saved, leaves, where))

    def _mjdata(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        import mujoco

        if (type(fresh).__module__, type(fresh).__name__) != ("mujoco._structs", "MjData"):
            raise DataError(f"{where}: holds a MuJoCo simulation, where this config builds {_qualname(fresh)}")
        state = self._get(node["mjdata"], where)
        kind = mujoco.mjtState.mjSTATE_INTEGRATION
        if len(state) != mujoco.mj_stateSize(fresh.model, kind):
            raise DataError(f"{where}: a MuJoCo state of {len(state)} numbers, where this model's has "
                            f"{mujoco.mj_stateSize(fresh.model, kind)}")
        state = np.asarray(state, np.float64)
        mujoco.mj_setState(fresh.model, fresh, state, kind)
        # What a step computes from the state (positions, contacts): dm_control's step reads the last step's. The
        # state is set again after: computing it moved the solver's warm start, which the next step starts from.
        mujoco.mj_forward(fresh.model, fresh)
        mujoco.mj_setState(fresh.model, fresh, state, kind)
        return fresh

    def _skip(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        return SKIP

    def _object(self, node: dict[str, Any], fresh: Any, where: str) -> Any:
        name = node["object"]
        if fresh is not None and _qualname(fresh) == name:
            target = fresh
        elif name in RECORDS:
            target = object.__new__(RECORDS[name]) if "fields" not in node else None
        else:
            built = "nothing" if fresh is None else f"a {_qualname(fresh)}"
            raise DataError(f"{where or 'the loop'}: holds a {name}, where this config builds {built}")
        state = node.get("state")
        if not isinstance(state, dict) or any(not isinstance(k, str) or k.startswith("__") for k in state):
            raise DataError(f"{where}: the state of a {name} must map attribute names to values")
        if "fields" in node:  # a named tuple: immutable, so made anew from the fresh one's type
            kind = type(fresh) if target is not None else RECORDS[name]
            return kind(*self._items(node["fields"], tuple(fresh) if target is not None else (), where))
        self._early(node, target)
        current = target.save_state() if isinstance(target, Stateful) and target is fresh else \
            (vars(target) if hasattr(target, "__dict__") else {})
        values = {}
        for key, value in state.items():
            loaded = self(value, current.get(key), f"{where}.{key}")
            if loaded is not SKIP:
                values[key] = loaded
        if isinstance(target, Stateful):
            target.load_state(values)
        else:
            vars(target).update(values)
        return target


_LOADERS: dict[str, Callable[[Loader, dict[str, Any], Any, str], Any]] = {
    "list": Loader._list, "tuple": Loader._tuple, "set": Loader._set, "deque": Loader._deque,
    "dict": Loader._dict, "items": Loader._dict, "ndarray": Loader._ndarray, "scalar": Loader._scalar,
    "generator": Loader._generator, "randomstate": Loader._randomstate, "random": Loader._random,
    "bytes": Loader._bytes, "enum": Loader._enum, "path": Loader._path,
    "npdtype": Loader._npdtype, "tensor": Loader._tensor, "optimizer": Loader._optimizer,
    "torch_generator": Loader._torch_generator, "torch": Loader._torch_value, "jax": Loader._jax,
    "pytree": Loader._pytree, "mjdata": Loader._mjdata, "skip": Loader._skip, "object": Loader._object}
"""Each node kind's loader, by its key."""
