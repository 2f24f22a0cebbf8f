"""Binary insertion into a ranking with ties: where a new clip goes, one comparison at a time.

The ranking is a list of *groups*, worst first; the clips of a group are equally good. A new clip is compared
with a clip of the middle group among those its answers still allow, as in LiRE (Choi et al., ICML 2024): after
``ceil(log2(groups + 1))`` comparisons at most it joins a group (an "equal" answer) or opens a new one between
two. Every clip ranked implies a label against every other ranked clip, so one clip placed in a few comparisons
trains the reward on as many pairs as there are clips.

The rules here are pure: the query store keeps the groups and the answers, and asks :func:`next_step` what each
answer leads to. A clip's bounds are derived from its answers, never stored, so groups that others open meanwhile
(people place clips side by side) only add candidates, and a group that an undo empties only loosens a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Compare:
    """Compare the clip with a clip of this group next."""

    group: int


@dataclass(frozen=True)
class Join:
    """The clip is as good as this group's clips: it joins the group."""

    group: int


@dataclass(frozen=True)
class Open:
    """The clip opens a new group at this position (0: the worst); the groups from there on move up one."""

    position: int


Step = Compare | Join | Open


def next_step(order: Sequence[int], answers: Sequence[tuple[int, float]]) -> Step:
    """What a clip's answers so far lead to, given the ranking's group ids worst first.

    ``answers`` are (group compared with, label): 1 when the new clip was better, 0 worse, 0.5 equal; groups no
    longer in ``order`` are passed over.
    """
    position = {group: i for i, group in enumerate(order)}
    low, high = -1, len(order)  # the clip is better than the group at low and worse than the one at high
    for group, label in answers:
        if group not in position:
            continue
        if label == 0.5:
            return Join(group)
        if label > 0.5:
            low = max(low, position[group])
        else:
            high = min(high, position[group])
    between = order[low + 1:high]
    if not between:
        return Open(low + 1)
    return Compare(between[len(between) // 2])
