"""Config values against the type hints of the constructor they go to, so that a wrong type is named
by its key before the library it reaches fails somewhere inside."""

from __future__ import annotations

import collections.abc
import inspect
import math
import types
import typing
from typing import Any

from omegaconf import DictConfig, ListConfig

_SIMPLE = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def hints(target: Any) -> dict[str, Any]:
    """The type hints of ``target``'s constructor (a class or a function), each resolved on its own.

    ``typing.get_type_hints`` gives up on all of them when one names a type imported only for type
    checkers (as stable-baselines3's ``VecEnv``); such a hint is skipped here, and the rest checked.
    """
    function = target.__init__ if inspect.isclass(target) else target
    namespace = getattr(inspect.unwrap(function), "__globals__", {})
    out = {}
    for name, param in inspect.signature(function).parameters.items():
        hint = param.annotation
        if isinstance(hint, str):
            try:
                hint = eval(hint, namespace)  # as typing.get_type_hints does, one hint at a time
            except Exception:
                continue
        if hint is not inspect.Parameter.empty:
            out[name] = hint
    return out


def mismatch(value: Any, hint: Any) -> str | None:
    """What ``value`` should have been when it does not fit ``hint``, else None.

    Checks what a config can hold (None, bool, int, float, str, lists, dicts) and lets any hint it
    cannot judge (classes, callables, spaces) pass.
    """
    if hint is Any or isinstance(value, DictConfig) and "_target_" in value:
        return None  # a nested part: checked when it is built
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        wrong = [mismatch(value, arg) for arg in args]
        return None if None in wrong else " or ".join(dict.fromkeys(w for w in wrong if w))
    if hint is type(None):
        return None if value is None else "null"
    if hint in _SIMPLE:
        ok = (isinstance(value, hint) and not (hint is not bool and isinstance(value, bool))
              or hint is float and isinstance(value, int) and not isinstance(value, bool))
        if ok and isinstance(value, float) and math.isnan(value):
            return "a number, not NaN"  # no part reads NaN as a setting; it would poison every sum it enters
        return None if ok else _SIMPLE[hint]
    container = origin or hint
    if container in (list, tuple, collections.abc.Sequence):
        if not isinstance(value, ListConfig | list | tuple):
            return "a list"
        homogeneous = len(args) == 1 or len(args) == 2 and args[1] is Ellipsis  # list[int], tuple[int, ...]
        bad = [mismatch(v, args[0]) for v in value] if homogeneous else []
        return next((f"a list of {b.removeprefix('a ').removeprefix('an ')}s" for b in bad if b), None)
    if container in (dict, collections.abc.Mapping):
        return None if isinstance(value, DictConfig | dict) else "a mapping"
    if container is collections.abc.Callable:
        return "a callable (a node with _target_)"  # a plain config value never is one
    return None
