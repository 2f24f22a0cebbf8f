"""Reward-model training on preferences: cross-entropy under the Bradley-Terry model.

A batch of B pairs is one tensor of shape (members, B, 2, length, ...) and the loss of the
whole ensemble is one forward and one backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from rlhp.data import FragmentPairs, Trajectory
from rlhp.data.preferences import PreferenceDataset
from rlhp.data.rankings import RankedClips
from rlhp.data.ratings import RatingDataset
from rlhp.data.torch_files import save_torch
from rlhp.errors import ArgumentError
from rlhp.preference_model import clipped_difference, discounted_returns, preference_logprobs, preference_loss
from rlhp.rewards import RewardInputs, RewardNet
from rlhp.training.augment import Crop, WholeFragments
from rlhp.training.filters import Judgement, KeepAll, LabelFilter
from rlhp.training.pseudo import NoPseudoLabels, PseudoLabeller
from rlhp.training.rankings import plackett_luce_loss, ranking_concordance
from rlhp.training.ratings import Cutpoints, rating_logprobs, rating_loss
from rlhp.training.replay import AllLabels, LabelReplay
from rlhp.training.warm_start import NoWarmStart, WarmStart, transitions

WHOLE_FRAGMENTS, NO_PSEUDO_LABELS, KEEP_ALL, ALL_LABELS = WholeFragments(), NoPseudoLabels(), KeepAll(), AllLabels()
NO_WARM_START = NoWarmStart()


class PairScores(NamedTuple):
    """Per-pair figures of a preference model against labels (each of shape ``(..., pairs)``)."""

    loss: torch.Tensor
    """Cross-entropy between the predicted probability and the label."""
    correct: torch.Tensor
    """1 where the label prefers a fragment and the model ranks that one higher; 0 on ties."""
    decided: torch.Tensor
    """1 where the label prefers a fragment, 0 where it is a tie (0.5)."""
    tie_gap: torch.Tensor
    """|P(first preferred) - 0.5| on ties, 0 elsewhere: how far the model is from calling them equal."""

    def totals(self) -> torch.Tensor:
        """The four sums, for accumulating over batches."""
        return torch.stack([self.loss.detach().sum(), self.correct.sum(), self.decided.sum(), self.tie_gap.sum()])


def summarise(totals: torch.Tensor, pairs: int, prefix: str) -> dict[str, float]:
    """``<prefix>loss`` (mean), ``<prefix>accuracy`` on the pairs with a preference, and
    ``<prefix>tie_gap`` (mean) on the ties; a figure with no pair to average over is left out."""
    loss, correct, decided, gap = (float(t) for t in totals)
    out = {f"{prefix}loss": loss / pairs}
    if decided:
        out[f"{prefix}accuracy"] = correct / decided
    if pairs - decided:
        out[f"{prefix}tie_gap"] = gap / (pairs - decided)
    return out


class RewardTrainer:
    """Fits a reward net to a preference dataset.

    Metrics (the last epoch's): ``reward_loss``, ``reward_accuracy`` on pairs with a preference,
    ``reward_tie_gap`` on tied pairs (label 0.5), the same with ``val_`` on the validation split,
    and with ``gt_reward_`` for the true reward under the same model (a ceiling); with a label filter that
    judges, ``gt_labels_wrong``: how many of the training labels the true reward contradicts, and
    ``gt_labels_dropped_wrong``: how many of those it left out of the last epoch (the rest of
    ``reward_labels_dropped`` were right), and ``gt_labels_flipped_wrong``: how many it flipped (corrected; the
    rest of ``reward_labels_flipped`` it made wrong). Given rated clips, it also fits them under the cumulative-logit
    model (:mod:`rlhp.training.ratings`, its cutpoints learned beside the net), each member on its own bootstrap
    sample, a pass over them after each epoch's pairs: ``rating_loss`` and ``rating_accuracy`` (the most likely
    rating is the one given). Given a ranking of clips, it fits it as a list under Plackett-Luce
    (:mod:`rlhp.training.rankings`) in the same way: ``ranking_loss`` and ``ranking_accuracy``.

    Args:
        reward_net: the net to train (each ensemble member on its own bootstrap sample, or on every pair).
        rng: random generator for shuffling and bootstrapping.
        lr: AdamW learning rate.
        batch_size: pairs per optimiser step.
        minibatch_size: pairs per forward/backward (gradient accumulation); divides batch_size.
        epochs: passes per call of :meth:`train` (each over the pairs ``replay`` draws).
        stop_accuracy: end a call's passes early once a pass's training accuracy exceeds this (B-Pref's 0.97);
            at 1 every pass runs.
        bootstrap: each member trains on its own resample of the pairs, drawn with replacement each call; else
            every member on all of them, each in its own order (B-Pref's ensembles).
        weight_decay: AdamW weight decay (the starting value when it adapts).
        val_split: fraction of pairs held out to measure over-fitting (0: none).
        weight_decay_adapt: when > 1 and val_split > 0, multiply the weight decay by it after an
            epoch whose validation loss exceeds the training loss by more than ``adapt_tolerance``
            (relative), and divide by it when below by as much. It stays within
            ``[weight_decay / WEIGHT_DECAY_RANGE, weight_decay * WEIGHT_DECAY_RANGE]`` (a factor of
            100 either way), so a long run of over-fitting epochs cannot decay the weights to zero.
        noise_prob, discount_factor, threshold: the preference model (see ``preference_logprobs``).
        crop: the steps of each pair a training batch scores (SURF's temporal crops, or whole fragments).
        pseudo_labels: what it learns from unlabelled pairs (SURF's confident pseudo-labels, or nothing).
        label_filter: which labels it trains on each epoch (all, not those it confidently contradicts, or RIME's
            trusted ones with the surest contradictions flipped).
        replay: which pairs a pass covers (every label, or a bounded window of new ones and a replay sample).
        warm_start: what the net learns before its first label (nothing, or RIME's fit to the intrinsic reward of
            the agent's unsupervised pre-training): ``warm_start_`` metrics, in the first round.
    """

    cutpoints: Cutpoints | None = None
    """The rating model's cutpoints, once there are ratings to learn from."""
    WEIGHT_DECAY_RANGE = 100.0
    ENCODE_ONCE_BYTES = 2**30
    JUDGE_CHUNK = 4096
    """Pairs scored at once when a label filter judges the labels."""

    def __init__(self, reward_net: RewardNet, rng: np.random.Generator, lr: float = 1e-3, batch_size: int = 32,
                 minibatch_size: int | None = None, epochs: int = 3, stop_accuracy: float = 1.0,
                 bootstrap: bool = True, weight_decay: float = 0.0,
                 val_split: float = 0.0, weight_decay_adapt: float | None = None, adapt_tolerance: float = 0.1,
                 noise_prob: float = 0.0, discount_factor: float = 1.0, threshold: float = 50.0,
                 crop: Crop = WHOLE_FRAGMENTS, pseudo_labels: PseudoLabeller = NO_PSEUDO_LABELS,
                 label_filter: LabelFilter = KEEP_ALL, replay: LabelReplay = ALL_LABELS,
                 warm_start: WarmStart = NO_WARM_START) -> None:
        for name, value in (("batch_size", batch_size), ("epochs", epochs),
                            ("minibatch_size", 1 if minibatch_size is None else minibatch_size)):
            if value < 1:
                raise ArgumentError(name, f"must be at least 1, got {value}")
        if minibatch_size is not None and minibatch_size > batch_size:
            raise ArgumentError("minibatch_size", f"({minibatch_size}) must not exceed batch_size ({batch_size})")
        ArgumentError.check_share("stop_accuracy", stop_accuracy)
        if not 0 < lr < math.inf:
            raise ArgumentError("lr", f"must be a positive finite number, got {lr}")
        if not 0 <= weight_decay < math.inf:
            raise ArgumentError("weight_decay", f"must be a non-negative finite number, got {weight_decay}")
        if not 0 <= val_split < 1:
            raise ArgumentError("val_split", f"must lie in [0, 1), got {val_split}")
        if minibatch_size is not None and batch_size % minibatch_size:
            raise ArgumentError("batch_size", f"({batch_size}) must be a multiple of minibatch_size "
                                f"({minibatch_size}); set one so that it divides the other, e.g. batch_size="
                                f"{minibatch_size * max(1, batch_size // minibatch_size)}")
        if weight_decay_adapt is not None and (weight_decay_adapt <= 1 or weight_decay <= 0 or val_split <= 0):
            raise ArgumentError("weight_decay_adapt", "needs a factor > 1, weight_decay > 0 (any multiple of 0 "
                                "stays 0) and val_split > 0 (the validation loss drives it); got weight_decay_adapt="
                                f"{weight_decay_adapt}, weight_decay={weight_decay}, val_split={val_split}")
        self.weight_decay_bounds = (weight_decay / self.WEIGHT_DECAY_RANGE, weight_decay * self.WEIGHT_DECAY_RANGE)
        self.net, self.rng = reward_net, rng
        self.batch_size, self.minibatch_size = batch_size, minibatch_size or batch_size
        self.epochs, self.stop_accuracy, self.bootstrap, self.val_split = epochs, stop_accuracy, bootstrap, val_split
        self.weight_decay_adapt, self.adapt_tolerance = weight_decay_adapt, adapt_tolerance
        self.noise_prob, self.discount_factor, self.threshold = noise_prob, discount_factor, threshold
        self.crop, self.pseudo_labels, self.label_filter, self.replay = crop, pseudo_labels, label_filter, replay
        self.warm_start = warm_start
        self.unlabelled: FragmentPairs | None = None  # given by remember_unlabelled
        self.optimizer = torch.optim.AdamW(reward_net.parameters(), lr=lr, weight_decay=weight_decay, fused=True)

    def _validation_pairs(self, labelled: int) -> int:
        """How many of ``labelled`` pairs the validation split holds; raises :class:`ArgumentError` when it
        would leave either set empty."""
        n_val = int(round(labelled * self.val_split))
        if self.val_split and (n_val == 0 or n_val == labelled):
            raise ArgumentError("val_split", f"({self.val_split}) leaves an empty "
                                f"{'validation' if n_val == 0 else 'training'} set with {labelled} labelled pairs; "
                                "ask more comparisons in the first round or change val_split")
        return n_val

    def check_first_labels(self, labelled: int) -> None:
        """Raise :class:`ArgumentError` when the first round's ``labelled`` pairs cannot be split as configured."""
        self._validation_pairs(labelled)

    def check_fragment_length(self, length: int) -> None:
        """Raise :class:`ArgumentError` (naming ``crop.<argument>``) when its crop does not fit fragments of
        ``length`` steps."""
        try:
            self.crop.check_length(length)
        except ArgumentError as err:
            raise ArgumentError(f"crop.{err.argument}", err.problem) from None

    def save(self, folder: Path, net_config: dict[str, Any]) -> None:
        """Write ``reward_net.pt`` (the net's weights and ``net_config``, the config that built it) and
        ``trainer.pt`` (the optimiser, and torch's random state) into ``folder``."""
        save_torch({"state_dict": self.net.state_dict(), "config": net_config}, folder / "reward_net.pt")
        save_torch({"optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state()},
                   folder / "trainer.pt")

    def unlabelled_wanted(self, labelled: int) -> int:
        """Unlabelled pairs to keep beside a dataset of ``labelled`` pairs (0 without pseudo-labels)."""
        return self.pseudo_labels.ratio * labelled

    def remember_unlabelled(self, pairs: FragmentPairs) -> None:
        """Unlabelled pairs (the latest agent's) for pseudo-labels, kept until replaced."""
        self.unlabelled = pairs

    def loss(self, returns: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Per-pair cross-entropy between the predicted preference and the label, for returns
        (..., 2) and labels (...)."""
        return preference_loss(returns, labels, self.noise_prob, self.threshold)

    def scores(self, returns: torch.Tensor, labels: torch.Tensor) -> PairScores:
        """:meth:`loss`, correctness (on pairs with a preference) and tie gap, for returns (..., 2)
        and labels (...)."""
        decided = (labels != 0.5).float()
        # P(first preferred) rises with the difference of returns: > 1/2 exactly when it is > 0.
        diff = clipped_difference(returns.detach(), self.threshold)
        correct = ((diff > 0) == (labels > 0.5)).float() * decided
        tie_gap = (preference_logprobs(returns.detach(), self.noise_prob, self.threshold)[0].exp() - 0.5).abs()
        return PairScores(self.loss(returns, labels), correct, decided, tie_gap * (1 - decided))

    def _encoder(self, raw: tuple[torch.Tensor, ...]) -> Callable[[torch.Tensor], RewardInputs]:
        """The encoded transitions of the pairs at an index: encoded once here when they fit in
        ``ENCODE_ONCE_BYTES`` (the encoding has nothing to learn), else per batch (large images)."""
        if self.net.input_dim * raw[-1].numel() * 4 > self.ENCODE_ONCE_BYTES:
            return lambda idx: self.net.encode(*(x[idx] for x in raw))
        with torch.no_grad():
            return self.net.encode(*raw).select

    def _returns(self, inputs: Callable[[torch.Tensor], RewardInputs], idx: torch.Tensor) -> torch.Tensor:
        """Returns of the pairs at ``idx``: (pairs) scored by every member, or (members, pairs) each member
        scoring its own, as training does, on the crop's steps."""
        if idx.dim() == 1:
            return self.net.returns(inputs(idx), self.discount_factor)
        return self.net.returns(self.crop(inputs(idx), self.rng), self.discount_factor, per_member=True)

    @contextmanager
    def _judging(self) -> Iterator[None]:
        """The net in eval mode without grad, as the agent's reward reads it (a CNN's dropout off), then back."""
        training = self.net.training
        self.net.train(False)
        try:
            with torch.no_grad():
                yield
        finally:
            self.net.train(training)

    def first_probs(self, inputs: Callable[[torch.Tensor], RewardInputs], n: int, device: torch.device) -> torch.Tensor:
        """Each member's probability that each of the ``n`` pairs' first fragment is preferred, (members, pairs),
        in eval mode on whole fragments."""
        chunks = torch.arange(n, device=device).split(self.JUDGE_CHUNK)
        with self._judging():
            return torch.cat([preference_logprobs(self._returns(inputs, idx), self.noise_prob, self.threshold)[0].exp()
                              for idx in chunks], dim=1)

    def train(self, dataset: PreferenceDataset, epoch_multiplier: float = 1.0, ratings: RatingDataset | None = None,
              ranking: RankedClips | None = None) -> dict[str, float]:
        """Train for ``epochs * epoch_multiplier`` epochs on the labelled pairs, the rated clips and the ranked ones;
        return the final epoch's metrics."""
        try:
            if not len(dataset):
                if not any(clips is not None and len(clips) for clips in (ratings, ranking)):
                    raise ValueError("nothing to train on: no labelled pair, no rated clip and no ranked one")
                return self._train_clips(ratings, ranking, epoch_multiplier)
            return self._train(dataset, epoch_multiplier, ratings, ranking)
        finally:
            self.net.train(False)  # dropout and batch norm train here only; everything else scores in eval mode

    def start_warm(self, explored: list[Trajectory]) -> dict[str, float]:
        """Before the first labels: fit the net as its warm start says to the episodes the agent ``explored`` in its
        unsupervised pre-training; return its metrics."""
        raw = transitions(explored, self.net.device)
        self.net.fit_input_norm(*raw)
        try:
            return self.warm_start.fit(self.net, self.optimizer, self.rng, self._encoder(raw), raw[2])
        finally:
            self.net.train(False)

    def _train_clips(self, ratings: RatingDataset | None, ranking: RankedClips | None,
                     epoch_multiplier: float) -> dict[str, float]:
        """Train on rated or ranked clips alone (no pair is labelled)."""
        clips = self._clip_tensors(ratings, ranking)
        self.net.fit_input_norm(*clips[0][1])
        passes = self._clip_passes(clips)
        metrics: dict[str, float] = {}
        for _ in range(max(1, round(self.epochs * epoch_multiplier))):
            for one_pass in passes:
                metrics.update(one_pass())
        return metrics

    def _clip_tensors(self, ratings: RatingDataset | None,
                      ranking: RankedClips | None) -> list[tuple[PreferenceDataset, tuple[torch.Tensor, ...]]]:
        """The rated and the ranked clips, where there are any, each with its tensors on the net's device."""
        return [(clips, clips.pairs.tensors(self.net.device)) for clips in (ratings, ranking)
                if clips is not None and len(clips)]

    def _clip_passes(self, clips: list[tuple[PreferenceDataset, tuple[torch.Tensor, ...]]]
                     ) -> list[Callable[[], dict[str, float]]]:
        """A pass over each set of clips (:meth:`_clip_tensors`): ratings' or a ranking's."""
        return [self._rating_pass(c, raw) if isinstance(c, RatingDataset) else self._ranking_pass(c, raw)
                for c, raw in clips]

    def _optimise_cutpoints(self) -> None:
        # Free of weight decay: it would pull the cutpoints together, not the net's weights towards 0.
        self.optimizer.add_param_group({"params": list(self.cutpoints.parameters()), "weight_decay": 0.0})

    def save_state(self) -> dict[str, Any]:
        """Its attributes (see :mod:`rlhp.data.state`)."""
        return dict(self.__dict__)

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back :meth:`save_state`'s; cutpoints made since the run was built join the optimiser (whose saved
        state a checkpoint loads last, so it finds them there)."""
        made = self.cutpoints is None and state.get("cutpoints") is not None
        self.__dict__.update(state)
        if made:
            self.cutpoints.to(self.net.device)
            self._optimise_cutpoints()

    def _members_sample(self, n: int) -> np.ndarray:
        """Each member's bootstrap sample of ``n`` rows, (members, n): the rows in order for a single net."""
        return self.rng.integers(0, n, (self.net.members, n)) if self.net.members > 1 else np.arange(n)[None]

    def _rating_pass(self, ratings: RatingDataset, raw: tuple[torch.Tensor, ...]) -> Callable[[], dict[str, float]]:
        """One pass over the rated clips in batches, each member on its own bootstrap sample; returns the pass's
        ``rating_loss`` and ``rating_accuracy``."""
        device, members = self.net.device, self.net.members
        if self.cutpoints is None:
            self.cutpoints = Cutpoints(members, ratings.scale).to(device)
            self._optimise_cutpoints()
        elif self.cutpoints.scale != ratings.scale:
            raise ValueError(f"ratings on a scale of 1 to {ratings.scale} cannot join those on 1 to "
                             f"{self.cutpoints.scale}")
        inputs = self._encoder(raw)
        given = torch.as_tensor(ratings.labels, device=device).long()
        n = len(ratings)
        sample = self._members_sample(n)

        def rate() -> dict[str, float]:
            self.net.train(True)
            shuffled = torch.as_tensor(sample[:, self.rng.permutation(n)], device=device)
            losses, hits = [], []
            for start in range(0, n, self.batch_size):
                idx = shuffled[:, start:start + self.batch_size]
                self.optimizer.zero_grad(set_to_none=True)
                returns = self.net.returns(inputs(idx), self.discount_factor, per_member=True)[..., 0]
                cutpoints = self.cutpoints()
                loss = rating_loss(returns, given[idx], cutpoints)
                (loss.sum() / idx.shape[1]).backward()
                self.optimizer.step()
                losses.append(loss.detach())
                likeliest = rating_logprobs(returns.detach(), cutpoints.detach()).argmax(-1) + 1
                hits.append((likeliest == given[idx]).float())
            return {"rating_loss": float(torch.cat(losses, 1).mean()),
                    "rating_accuracy": float(torch.cat(hits, 1).mean())}
        return rate

    def _ranking_pass(self, ranking: RankedClips, raw: tuple[torch.Tensor, ...]) -> Callable[[], dict[str, float]]:
        """One pass over the ranked clips, each member on its own bootstrap sample: as many batches as a pass over the
        pairs the ranking implies has, so that a list and its pairs train with as many steps; each batch is
        ``batch_size`` clips drawn at random, a ranking of its own under Plackett-Luce (:mod:`rlhp.training.rankings`).
        Returns the pass's ``ranking_loss`` (per clip) and ``ranking_accuracy`` (pairs of clips at different levels
        ordered as ranked)."""
        device = self.net.device
        inputs = self._encoder(raw)
        levels = torch.as_tensor(ranking.labels, device=device)
        n = len(ranking)
        sample = self._members_sample(n)
        size = min(n, self.batch_size)
        batches = max(1, math.ceil(n * (n - 1) / 2 / self.batch_size))

        def rank() -> dict[str, float]:
            self.net.train(True)
            losses, agreed, compared = [], 0, 0
            for _ in range(batches):
                idx = torch.as_tensor(sample[:, self.rng.choice(n, size, replace=False)], device=device)
                self.optimizer.zero_grad(set_to_none=True)
                returns = self.net.returns(inputs(idx), self.discount_factor, per_member=True)[..., 0]
                loss = plackett_luce_loss(returns, levels[idx])
                (loss.sum() / size).backward()
                self.optimizer.step()
                losses.append(loss.detach())
                right, pairs = ranking_concordance(returns.detach(), levels[idx])
                agreed, compared = agreed + int(right.sum()), compared + int(pairs.sum())
            return {"ranking_loss": float(torch.cat(losses, 1).mean()),
                    **({"ranking_accuracy": agreed / compared} if compared else {})}
        return rank

    def _train(self, dataset: PreferenceDataset, epoch_multiplier: float, ratings: RatingDataset | None = None,
               ranking: RankedClips | None = None) -> dict[str, float]:
        pairs: FragmentPairs = dataset.pairs
        device = self.net.device
        raw = pairs.tensors(device)
        self.net.fit_input_norm(*raw)
        inputs = self._encoder(raw)
        passes = self._clip_passes(self._clip_tensors(ratings, ranking))
        labels = torch.as_tensor(dataset.labels, device=device)
        n, members = len(dataset), self.net.members
        order = self.rng.permutation(n)
        n_val = self._validation_pairs(n)
        val, train = torch.as_tensor(order[:n_val], device=device), order[n_val:]
        sample = self._member_rows(train)
        ratio = self.pseudo_labels.ratio if self.unlabelled is not None and len(self.unlabelled) else 0
        unlabelled = self._encoder(self.unlabelled.tensors(device)) if ratio else None
        trained_on = torch.zeros((members, n), dtype=torch.bool, device=device)
        trained_on.scatter_(1, torch.as_tensor(sample, device=device), True)
        metrics: dict[str, float] = {}
        for _ in range(max(1, round(self.epochs * epoch_multiplier))):
            judgement = self.label_filter.judge(lambda: self.first_probs(inputs, n, device), labels, trained_on)
            self.net.train(True)
            shuffled = torch.as_tensor(self.replay.draw(sample, self.rng), device=device)
            # Trained on the verdict's labels; the epoch's figures are against the labels given.
            shuffled_labels, trained_labels = labels[shuffled], judgement.labels(labels)[shuffled]
            shuffled_keep = judgement.keep[shuffled]
            seen, pseudo = self._epoch(inputs, shuffled, trained_labels, shuffled_keep, unlabelled, ratio)
            totals = self.scores(torch.cat(seen, dim=1), shuffled_labels).totals()
            metrics = summarise(totals, shuffled.numel(), "reward_")
            metrics.update(self.label_filter.metrics(judgement.select(torch.as_tensor(train, device=device))))
            if pseudo:
                metrics["reward_pseudo_labelled"] = float(torch.stack(pseudo).mean())
            if n_val:
                metrics.update(self._validate(inputs, labels, val, metrics["reward_loss"]))
            for one_pass in passes:
                metrics.update(one_pass())
            if metrics.get("reward_accuracy", 0.0) > self.stop_accuracy:
                break
        metrics.update(self.gt_reward_metrics(pairs, dataset.labels, torch.as_tensor(train),
                                              Judgement(judgement.keep.cpu(), judgement.flip.cpu())))
        return metrics

    def _member_rows(self, train: np.ndarray) -> np.ndarray:
        """Each member's rows of the training pairs, (members, n): its own bootstrap resample, or all of them."""
        members = self.net.members
        if members == 1:
            return train[None]
        if self.bootstrap:
            return train[self.rng.integers(0, len(train), (members, len(train)))]
        return self.rng.permuted(np.tile(train, (members, 1)), axis=1)

    def _epoch(self, inputs: Callable[[torch.Tensor], RewardInputs], shuffled: torch.Tensor,
               labels: torch.Tensor, keep: torch.Tensor, unlabelled: Callable[[torch.Tensor], RewardInputs] | None,
               ratio: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """One pass in batches over the members' ``shuffled`` rows, trained on ``labels`` where ``keep``, with
        ``ratio`` pseudo-labelled pairs a labelled one; each batch's returns as trained on, and the pseudo-labelled
        shares (the epoch's figures come from them at once)."""
        copies, members, device = self.crop.copies, self.net.members, self.net.device
        seen, pseudo = [], []
        for start in range(0, shuffled.shape[1], self.batch_size):
            stop = min(start + self.batch_size, shuffled.shape[1])
            self.optimizer.zero_grad(set_to_none=True)
            for mini in range(start, stop, self.minibatch_size):
                part = slice(mini, min(mini + self.minibatch_size, stop))
                # Each pair ``copies`` times (QPA's crops), each copy at a start of its own; together one pair.
                returns = self._returns(inputs, shuffled[:, part].repeat(1, copies))
                # Members are independent, so summing their losses trains each at full rate.
                loss = (self.loss(returns, labels[:, part].repeat(1, copies))
                        * keep[:, part].repeat(1, copies)).sum() / copies
                returns = returns[:, :part.stop - part.start]  # the first crops: the epoch's figures
                if ratio:
                    drawn = self.rng.integers(0, len(self.unlabelled), (members, ratio * returns.shape[1]))
                    extra, labelled = self._pseudo_loss(unlabelled, torch.as_tensor(drawn, device=device))
                    loss = loss + extra / ratio
                    pseudo.append(labelled)
                (loss / (stop - start)).backward()
                seen.append(returns.detach())
            self.optimizer.step()
        return seen, pseudo

    def _pseudo_loss(self, inputs: Callable[[torch.Tensor], RewardInputs],
                     idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The summed pseudo-label loss of the unlabelled pairs at ``idx`` (members, pairs), on the crop's steps,
        and the share of them labelled.

        Each member labels its pairs with its answer in eval mode, as the agent's reward and the label filter
        read it: in train mode a CNN's dropout would make every answer a noisy one. Only the pairs that some
        member labels are scored again, in train mode, for the backward pass."""
        cropped = self.crop(inputs(idx), self.rng)
        with self._judging():
            pseudo = self.pseudo_labels.label(
                self.net.returns(cropped, self.discount_factor, per_member=True), self.threshold)
        used = pseudo.mask.bool().any(0)
        if not used.any():
            return pseudo.mask.new_zeros(()), pseudo.mask.mean()
        returns = self.net.returns(cropped.columns(used), self.discount_factor, per_member=True)
        return self.pseudo_labels.loss(returns, pseudo.columns(used), self.threshold).sum(), pseudo.mask.mean()

    @torch.no_grad()
    def _validate(self, inputs: Callable[[torch.Tensor], RewardInputs], labels: torch.Tensor, val: torch.Tensor,
                  train_loss: float) -> dict[str, float]:
        self.net.train(False)
        metrics = summarise(self.scores(self._returns(inputs, val), labels[val]).totals(), len(val), "val_")
        if self.weight_decay_adapt is not None:
            self.adapt_weight_decay(metrics["val_loss"] / max(train_loss, 1e-8))
        return {**metrics, "weight_decay": self.optimizer.param_groups[0]["weight_decay"]}

    def adapt_weight_decay(self, ratio: float) -> None:
        """Scale the weight decay up by ``weight_decay_adapt`` when validation loss / training loss is
        above ``1 + adapt_tolerance`` (over-fitting), down when below ``1 - adapt_tolerance``; bounded."""
        low, high = self.weight_decay_bounds
        for group in self.optimizer.param_groups[:1]:  # the net's: the cutpoints' (with ratings) keep none
            if ratio > 1 + self.adapt_tolerance:
                group["weight_decay"] = min(high, group["weight_decay"] * self.weight_decay_adapt)
            elif ratio < 1 - self.adapt_tolerance:
                group["weight_decay"] = max(low, group["weight_decay"] / self.weight_decay_adapt)

    @torch.no_grad()
    def gt_reward_metrics(self, pairs: FragmentPairs, labels: np.ndarray, train: torch.Tensor,
                          judgement: Judgement) -> dict[str, float]:
        """Loss, accuracy and tie gap of the true reward under the same model: a ceiling for the net; and, where
        the label filter judges, how many of the training pairs ``train`` (indices) it contradicts, in all, among
        those the last epoch's ``judgement`` left out and among those it flipped."""
        if np.isnan(pairs.rews).any():
            return {}
        returns = discounted_returns(torch.as_tensor(pairs.rews, dtype=torch.float32), self.discount_factor)
        scores = self.scores(returns, torch.as_tensor(labels))
        metrics = summarise(scores.totals(), len(labels), "gt_reward_")
        if self.label_filter.judges:
            wrong = scores.decided - scores.correct  # a preference the true returns rank the other way
            metrics["gt_labels_wrong"] = float(wrong[train].sum())
            metrics["gt_labels_dropped_wrong"] = float((wrong[train] * (1 - judgement.keep[train])).sum())
            metrics["gt_labels_flipped_wrong"] = float(wrong[train][judgement.flip[train]].sum())
        return metrics
