"""The config groups' options as the command line reads them: what the option check, ``--help`` and the tests list."""

from __future__ import annotations

from importlib.resources import files

OPTION_FOLDERS = frozenset({"experiment"})
"""Groups whose sub-folders hold more of their options, not groups of their own (``experiment=bpref/walker_walk``;
``reward_trainer/crop`` is a group)."""


def group_options(group: str) -> list[str] | None:
    """The options of one of rlhp's config groups (``reward_trainer/crop`` for a nested one), with those in
    sub-folders of an :data:`OPTION_FOLDERS` group; None when ``group`` is not one of them (a key, a folder of
    options, or Hydra's own group)."""
    folder = files("rlhp.conf").joinpath(*group.split("/"))
    if group.split("/")[0] == "hydra" or "/".join(group.split("/")[:-1]) in OPTION_FOLDERS or not folder.is_dir():
        return None
    options = [p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")]
    if group in OPTION_FOLDERS:
        options += [f"{sub.name}/{p.name[:-5]}" for sub in folder.iterdir() if sub.is_dir()
                    for p in sub.iterdir() if p.name.endswith(".yaml")]
    return sorted(options)
