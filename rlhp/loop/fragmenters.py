"""Fragment pairs and the fragmenters that cut them from trajectories."""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np
import torch

from rlhp.data import FragmentPairs, Trajectory
from rlhp.data.hub import open_trajectories
from rlhp.data.label_files import LabelFormat, locate, read_label_files
from rlhp.errors import ArgumentError, ConfigError, RunError
from rlhp.preference_model import preference_logprobs
from rlhp.rewards import RewardNet

log = logging.getLogger(__name__)


class Fragmenter(Protocol):
    """Cuts ``num_pairs`` fragment pairs of ``fragment_length`` steps from trajectories."""

    def __call__(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Return the pairs."""

    def uniform(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Pairs drawn uniformly, chosen by nothing (unlabelled pairs for pseudo-labels), overlapping freely."""


class RandomFragmenter:
    """Uniform fragments: trajectories drawn in proportion to length, a uniform start in each.

    Args:
        rng: random generator (seeded by the run).
        warning_threshold: warn when fewer than this many times the needed transitions exist
            (fragments are drawn with replacement, so they would overlap heavily); the warning
            is given once, later rounds log it to the log file only.
        snippet_rule: T-REX's rule for pairs from episodes of different quality: the better
            episode's fragment starts no earlier than the worse one's (progress shows late).
        max_start: fragments start at most this many steps into their trajectory (None: anywhere), to
            keep them where episodes differ, e.g. before fixed-horizon CartPole's long fallen tail.
    """

    def __init__(self, rng: np.random.Generator, warning_threshold: float = 10, snippet_rule: bool = False,
                 max_start: int | None = None) -> None:
        if max_start is not None and max_start < 0:
            raise ArgumentError("max_start", f"must be >= 0 or null, got {max_start}")
        self.rng = rng
        self.warning_threshold = warning_threshold
        self.snippet_rule = snippet_rule
        self.max_start = max_start
        self._warned = False

    def __call__(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Return ``num_pairs`` random pairs, warning when they will overlap heavily."""
        return self._cut(trajectories, fragment_length, num_pairs, warn=True)

    def uniform(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Random pairs, however much they overlap."""
        return self._cut(trajectories, fragment_length, num_pairs, warn=False)

    def _cut(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int, warn: bool) -> FragmentPairs:
        lengths = np.array([len(t) for t in trajectories])
        keep = np.flatnonzero(lengths >= fragment_length)
        if len(keep) < len(trajectories):
            log.info("dropped %d of %d trajectories shorter than fragment_length=%d",
                     len(trajectories) - len(keep), len(trajectories), fragment_length)
        if not len(keep):
            raise RunError(f"fragment_length ({fragment_length}) is longer than every sampled trajectory "
                           f"(longest: {lengths.max(initial=0)} steps); lower it")
        trajs, lengths = [trajectories[i] for i in keep], lengths[keep]
        needed = 2 * num_pairs * fragment_length
        # The transitions a fragment can cover: with max_start, only each trajectory's opening.
        reachable = lengths if self.max_start is None else np.minimum(lengths, self.max_start + fragment_length)
        if warn and reachable.sum() < self.warning_threshold * needed:
            log.log(logging.INFO if self._warned else logging.WARNING,
                    "only %d transitions for %d fragment pairs of length %d: fragments will overlap",
                    reachable.sum(), num_pairs, fragment_length)
            self._warned = True
        which = self.rng.choice(len(trajs), size=2 * num_pairs, p=lengths / lengths.sum())
        last_start = lengths[which] - fragment_length
        if self.max_start is not None:
            last_start = np.minimum(last_start, self.max_start)
        starts = self.rng.integers(0, last_start + 1)
        if self.snippet_rule:
            starts = self._snippet_rule(starts, quality_of(trajs)[which], last_start)
        return cut(trajs, which, starts, fragment_length)

    def _snippet_rule(self, starts: np.ndarray, quality: np.ndarray, last_start: np.ndarray) -> np.ndarray:
        """Redraw each better fragment's start uniformly from [the worse one's start, its last start]."""
        starts, quality, last_start = (a.reshape(-1, 2).copy() for a in (starts, quality, last_start))
        better = np.argmax(quality, axis=1)
        rows = np.flatnonzero(quality[:, 0] != quality[:, 1])
        b, w = better[rows], 1 - better[rows]
        low = np.minimum(starts[rows, w], last_start[rows, b])  # a shorter better episode ends sooner
        starts[rows, b] = self.rng.integers(low, last_start[rows, b] + 1)
        return starts.reshape(-1)


def quality_of(trajectories: list[Trajectory]) -> np.ndarray:
    """Each trajectory's quality: its rank where its dataset ranks episodes, else its true return."""
    return np.array([t.rank if t.rank is not None else float(t.rews.sum()) for t in trajectories])


def cut(trajectories: list[Trajectory], which: np.ndarray, starts: np.ndarray, fragment_length: int) -> FragmentPairs:
    """The pairs of fragments that start at step ``starts[i]`` of trajectory ``which[i]`` (first and second
    fragments alternating), in one gather each."""
    lengths = np.array([len(t) for t in trajectories])
    num_pairs = len(which) // 2
    # Index into the concatenation of all trajectories, so one gather builds every fragment; a trajectory
    # holds len + frame_stack frames and a fragment the length + frame_stack from its start.
    stack = trajectories[0].frame_stack
    act_off = np.concatenate([[0], np.cumsum(lengths)])[:-1]
    steps = starts[:, None] + np.arange(fragment_length)
    idx = act_off[which, None] + steps
    frame_idx = (act_off + stack * np.arange(len(trajectories)))[which, None] + starts[:, None] \
        + np.arange(fragment_length + stack)
    all_frames = np.concatenate([t.frames for t in trajectories])
    # Recorded states: one per observation, len + 1 a trajectory.
    state_idx = (act_off + np.arange(len(trajectories)))[which, None] + starts[:, None] \
        + np.arange(fragment_length + 1)
    all_states = np.concatenate([t.states for t in trajectories])
    terminal = np.array([t.terminal for t in trajectories])[which, None]
    shape = (num_pairs, 2, fragment_length)
    return FragmentPairs(
        frames=all_frames[frame_idx].reshape(num_pairs, 2, fragment_length + stack, *all_frames.shape[1:]),
        acts=(a := np.concatenate([t.acts for t in trajectories]))[idx].reshape(*shape, *a.shape[1:]),
        dones=(terminal & (steps == lengths[which, None] - 1)).reshape(shape),
        rews=np.concatenate([t.rews for t in trajectories])[idx].astype(np.float32).reshape(shape),
        episode=np.array([t.episode for t in trajectories])[which].reshape(num_pairs, 2),
        start=starts.reshape(num_pairs, 2),
        quality=quality_of(trajectories)[which].reshape(num_pairs, 2),
        frame_stack=stack,
        states=all_states[state_idx].reshape(num_pairs, 2, fragment_length + 1, all_states.shape[-1]),
    )


class LabelFilePairs:
    """The pairs a label file names (Preference Transformer's or Uni-RLHF's, :mod:`rlhp.data.label_files`), in the
    file's order, cut from the dataset it indexes; ``gatherer=label_file`` answers them with the file's labels.

    Args:
        path: the folder of label files.
        format: ``pt`` or ``uni_rlhf``.
        dataset: the dataset the file's start indices point into (``trajectories.path``), its episodes in order.
        rng: random generator, for the unlabelled pairs of SURF's pseudo-labels (drawn from the round's sample).
    """

    def __init__(self, path: str, format: LabelFormat, dataset: str, rng: np.random.Generator) -> None:
        labels = read_label_files(path, format)
        episodes, _ = open_trajectories(dataset, key="fragmenter.dataset")
        lengths = np.array([len(t) for t in episodes])
        position, step = locate(labels.starts, lengths, labels.length)
        # Cut once: the file's pairs are all there will be (the dataset's episodes are not kept).
        self.pairs = cut(episodes, position.reshape(-1), step.reshape(-1), labels.length)
        self.length, self.taken = labels.length, 0
        self.random = RandomFragmenter(rng)

    def __call__(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """The file's next ``num_pairs`` pairs (the sampled trajectories are not used)."""
        if fragment_length != self.length:
            raise ConfigError("fragment_length", f"is {fragment_length}, but the label file's segments are "
                              f"{self.length} steps: set fragment_length={self.length}")
        if self.taken + num_pairs > len(self.pairs):
            raise ConfigError("total_comparisons", f"asks for more pairs than the label file's {len(self.pairs)}: "
                              f"set total_comparisons={len(self.pairs)} or fewer")
        out = self.pairs[self.taken:self.taken + num_pairs]
        self.taken += num_pairs
        return out

    def uniform(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Random pairs of the sampled trajectories (no label file names unlabelled pairs)."""
        return self.random.uniform(trajectories, fragment_length, num_pairs)


class ActiveSelectionFragmenter:
    """Draws ``fragment_sample_factor`` times more pairs and keeps the most disputed ones.

    Uncertainty of a reward ensemble is measured on ``uncertainty_on``: ``logit`` (variance of the return
    difference over members), ``probability`` (variance of the predicted preference: B-Pref's disagreement
    sampling ranks by its square root), ``label`` (Bernoulli variance of the members' votes) or ``entropy``
    (the members' mean entropy of the predicted preference: B-Pref's entropy sampling).
    """

    MEASURES = ("logit", "probability", "label", "entropy")

    def __init__(self, base: Fragmenter, reward_net: RewardNet, fragment_sample_factor: float = 2.0,
                 uncertainty_on: str = "logit", discount_factor: float = 1.0) -> None:
        if uncertainty_on not in self.MEASURES:
            raise ArgumentError("uncertainty_on", f"must be one of {', '.join(self.MEASURES)}, got {uncertainty_on!r}")
        if reward_net.members < 2:  # the net comes from the reward_net group
            raise ConfigError("reward_net.members", "must be at least 2 for fragmenter=active (it measures "
                              "disagreement between members); use reward_net=ensemble")
        self.base, self.reward_net = base, reward_net
        self.fragment_sample_factor, self.uncertainty_on = fragment_sample_factor, uncertainty_on
        self.discount_factor = discount_factor

    @torch.no_grad()
    def disagreement(self, pairs: FragmentPairs) -> np.ndarray:
        """One uncertainty score per pair, higher meaning more disagreement."""
        rews = self.reward_net.score_in_chunks(*pairs.tensors(self.reward_net.device)).cpu()  # (members, pairs, 2, L)
        discounts = self.discount_factor ** torch.arange(rews.shape[-1], dtype=rews.dtype, device=rews.device)
        returns = (rews * discounts).sum(-1)
        diff = returns[..., 0] - returns[..., 1]
        if self.uncertainty_on == "logit":
            return diff.var(0).numpy()
        first, second = preference_logprobs(returns)
        if self.uncertainty_on == "entropy":
            return -(first.exp() * first + second.exp() * second).mean(0).numpy()
        prob = first.exp()
        if self.uncertainty_on == "probability":
            return prob.var(0).numpy()
        votes = (prob > 0.5).float().mean(0)
        return (votes * (1 - votes)).numpy()

    def __call__(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """Return the ``num_pairs`` most uncertain of the candidate pairs."""
        candidates = self.base(trajectories, fragment_length, int(np.ceil(self.fragment_sample_factor * num_pairs)))
        best = np.argsort(-self.disagreement(candidates), kind="stable")[:num_pairs]
        return candidates[best]

    def uniform(self, trajectories: list[Trajectory], fragment_length: int, num_pairs: int) -> FragmentPairs:
        """The base fragmenter's uniform pairs, unselected."""
        return self.base.uniform(trajectories, fragment_length, num_pairs)
