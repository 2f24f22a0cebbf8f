"""Which labels a reward trainer believes: all of them, not those its ensemble confidently contradicts, or
RIME's trusted ones with the surest contradictions flipped (defences against a teacher who errs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

import torch
from stable_baselines3.common.running_mean_std import RunningMeanStd

from rlhp.errors import ArgumentError


class Judgement(NamedTuple):
    """An epoch's verdict on the labelled pairs."""

    keep: torch.Tensor
    """Float mask over pairs: 1 where the members train on the pair."""
    flip: torch.Tensor
    """Boolean mask over pairs: True where they train on the opposite of its label."""

    def labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The labels trained on: the given ones, flipped where the verdict flips them."""
        return torch.where(self.flip, 1 - labels, labels)

    def select(self, idx: torch.Tensor) -> Judgement:
        """The verdict on the pairs at ``idx``."""
        return Judgement(self.keep[idx], self.flip[idx])

    def left_out(self) -> float:
        """How many pairs it leaves out."""
        return float(len(self.keep) - self.keep.sum())


def believe(labels: torch.Tensor, keep: torch.Tensor) -> Judgement:
    """A verdict that keeps the pairs ``keep`` marks, each with its label."""
    return Judgement(keep, torch.zeros_like(labels, dtype=torch.bool))


def label_probabilities(first_probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each member's probability of each pair's label from its probability that the first fragment is preferred
    (a tie's is 1/2 whatever the members think)."""
    return labels * first_probs + (1 - labels) * (1 - first_probs)


class LabelFilter(Protocol):
    """Decides, each epoch, which labelled pairs the members train on, and with which labels."""

    judges: bool
    """Whether it may leave labels out (the trainer then says how many of those the true reward contradicts)."""

    def judge(self, first_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
              trained_on: torch.Tensor) -> Judgement:
        """The epoch's verdict from ``first_probs()``, each member's probability that a pair's first fragment is
        preferred, (members, pairs), which is computed only when called; ``trained_on`` (members, pairs) says
        which members' bootstrap resamples hold each pair."""

    def metrics(self, judgement: Judgement) -> dict[str, float]:
        """Figures of an epoch's verdict on the training pairs."""


class KeepAll:
    """Every label is believed, as the paper does."""

    judges = False

    def judge(self, first_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
              trained_on: torch.Tensor) -> Judgement:
        """Every pair with its label, without scoring any."""
        return believe(labels, torch.ones_like(labels))

    def metrics(self, judgement: Judgement) -> dict[str, float]:
        """None: nothing is judged."""
        return {}


class DropContradicted:
    """Leaves out of an epoch the labelled pairs whose label the ensemble, on average over its members, gives a
    probability under ``1 - confidence``: the model, fitted to the other labels, is confident the teacher erred.

    With ``out_of_bag``, a pair is judged only by the members whose bootstrap resample left it out (by all where
    every member holds it): those members never fitted its label, so a wrong label they contradict stays
    contradicted however long the others train on it (the cross-validated filter of Brodley and Friedl 1999,
    with the ensemble's own resamples as folds). Judged by every member, a wrong label met in a long first
    round is memorised before it is contradicted.

    Neural nets fit the consistent majority of labels before they memorise the odd ones (the "early learning"
    of training on noisy labels; RIME, Cheng et al. 2024, filters preferences by the same loss), so a wrong
    label is contradicted before it is learned, and once left out it is not learned. It is judged again each
    epoch: a label the model comes to agree with is trained on again. Ties (label 0.5) are always kept.

    At most ``max_fraction`` of the pairs are left out, the most contradicted first (co-teaching's budget,
    Han et al. 2018, set near the teacher's error rate): where the model is still wrong about much of the task,
    it contradicts right labels too, and leaving them all out would lock its errors in.

    Args:
        confidence: how sure the ensemble must be of the other answer, in (0.5, 1).
        max_fraction: the largest share of the pairs left out in one epoch, in (0, 1] (B-Pref's erring teacher
            flips a tenth).
        out_of_bag: judge each pair by the members that did not train on it.
    """

    judges = True

    def __init__(self, confidence: float = 0.7, max_fraction: float = 0.1, out_of_bag: bool = True) -> None:
        if not 0.5 < confidence < 1:
            raise ArgumentError("confidence", f"must lie in (0.5, 1), got {confidence}")
        if not 0 < max_fraction <= 1:
            raise ArgumentError("max_fraction", f"must lie in (0, 1], got {max_fraction}")
        self.confidence, self.max_fraction, self.out_of_bag = confidence, max_fraction, out_of_bag

    def judge(self, first_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
              trained_on: torch.Tensor) -> Judgement:
        """Leaves out the pairs whose label the judging members' mean probability puts below ``1 - confidence``,
        at most ``max_fraction`` of them, those of lowest probability; flips none."""
        judges = ~trained_on if self.out_of_bag else torch.ones_like(trained_on)
        judges = judges | ~judges.any(0)  # a pair every member trained on is judged by all
        probs = (label_probabilities(first_probs(), labels) * judges).sum(0) / judges.sum(0)
        drop = (probs < 1 - self.confidence) & (labels != 0.5)
        limit = int(self.max_fraction * len(labels))
        if int(drop.sum()) > limit:
            worst = torch.topk(probs.masked_fill(~drop, 2.0), limit, largest=False).indices
            drop = torch.zeros_like(drop).index_fill_(0, worst, True)
        return believe(labels, (~drop).to(labels.dtype))

    def metrics(self, judgement: Judgement) -> dict[str, float]:
        """``reward_labels_dropped``: the training pairs left out of the last epoch."""
        return {"reward_labels_dropped": judgement.left_out()}


class TrustAndFlip:
    """RIME's denoising discriminator (Cheng et al., ICML 2024): each epoch, a pair is trained on when the KL
    divergence of the ensemble's mean prediction from its label is under a lower bound, with its label flipped
    when that divergence is over an upper one, and left out in between.

    The lower bound is ``-ln(rho) + alpha * rho + min(beta_t * var, max_uncertainty)``. ``rho`` follows the largest
    divergence among the pairs trusted so far (a moving average at rate ``rate``): RIME bounds a corrupted label's
    divergence from below by this function of the clean labels' largest, ``rho``. ``var`` is the variance of the
    trusted pairs' divergences, pooled over the epochs, and ``beta_t`` goes linearly from ``beta_start`` to
    ``beta_end`` over ``decay_epochs`` epochs: lenient while the model is young and its divergences spread. As in
    RIME's code, ``rho`` starts at 0 (every pair is trusted in the first epoch) and moves towards each epoch's
    largest trusted divergence, so the bound starts high and tightens over the first tens of epochs. The upper bound
    is ``-ln(flip_below)``: the members all but certain the teacher answered the other way. Ties (label 1/2) are
    judged by the same divergence and never flipped.

    The judge is every member, as in RIME; its other half (a reward warm-started on the pre-training's intrinsic
    reward) is not part of this filter.

    Args:
        alpha: weight of ``rho`` in the lower bound.
        beta_start, beta_end: the weight of the divergences' variance at the first epoch and from
            ``decay_epochs`` on, linear in between (both at least 0; RIME's falls).
        decay_epochs: epochs over which that weight falls (RIME: 60 on DMC, 600 on Meta-World).
        max_uncertainty: the most the variance term adds.
        flip_below: a label whose probability under the mean prediction is below it is flipped, in [0, 1/2) (0:
            none is).
        rate: the moving average's rate for ``rho``, in (0, 1].
    """

    judges = True

    def __init__(self, alpha: float = 0.5, beta_start: float = 3.0, beta_end: float = 1.0, decay_epochs: int = 60,
                 max_uncertainty: float = 3.0, flip_below: float = 0.001, rate: float = 0.1) -> None:
        checks = (("alpha", alpha >= 0, "must be at least 0"), ("beta_end", beta_end >= 0, "must be at least 0"),
                  ("beta_start", beta_start >= 0, "must be at least 0"),
                  ("decay_epochs", decay_epochs >= 1, "must be at least 1"),
                  ("max_uncertainty", max_uncertainty >= 0, "must be at least 0"),
                  ("flip_below", 0 <= flip_below < 0.5, "must lie in [0, 0.5)"),
                  ("rate", 0 < rate <= 1, "must lie in (0, 1]"))
        for name, ok, rule in checks:
            if not ok:
                raise ArgumentError(name, f"{rule}, got {locals()[name]}")
        self.alpha, self.beta_start, self.beta_end, self.decay_epochs = alpha, beta_start, beta_end, decay_epochs
        # flip_below=0 flips nothing: no probability is under it.
        self.flip_above = -math.log(flip_below) if flip_below else math.inf
        self.max_uncertainty, self.rate = max_uncertainty, rate
        self.epochs, self.rho, self.bound = 0, 0.0, math.inf
        # The pooled mean and variance of every trusted divergence so far (epsilon 0: no prior count).
        self.divergences = RunningMeanStd(epsilon=0.0)

    def lower_bound(self) -> float:
        """The divergence under which a pair is trusted this epoch."""
        if not self.rho:
            return math.inf
        beta = self.beta_start + (self.beta_end - self.beta_start) * min(1.0, self.epochs / self.decay_epochs)
        return -math.log(self.rho) + self.alpha * self.rho + min(beta * float(self.divergences.var),
                                                                 self.max_uncertainty)

    def judge(self, first_probs: Callable[[], torch.Tensor], labels: torch.Tensor,
              trained_on: torch.Tensor) -> Judgement:
        """Trusts the pairs under the lower bound, flips those over the upper one, leaves out the rest."""
        p = first_probs().mean(0).double().clamp(1e-12, 1 - 1e-12)
        t = labels.double()
        # KL(label || prediction) over the two outcomes; xlogy makes 0 ln 0 = 0 for a one-hot label.
        kl = torch.xlogy(t, t) - torch.xlogy(t, p) + torch.xlogy(1 - t, 1 - t) - torch.xlogy(1 - t, 1 - p)
        self.bound = self.lower_bound()
        trust = kl < self.bound
        flip = (kl > self.flip_above) & (labels != 0.5)
        self._remember(kl[trust])
        self.epochs += 1
        return Judgement((trust | flip).to(labels.dtype), flip)

    def _remember(self, trusted: torch.Tensor) -> None:
        """Moves ``rho`` towards the trusted pairs' largest divergence and pools their variance."""
        if not len(trusted):
            return
        self.rho += self.rate * (float(trusted.max()) - self.rho)
        self.divergences.update(trusted.cpu().numpy())

    def metrics(self, judgement: Judgement) -> dict[str, float]:
        """``reward_labels_dropped`` and ``reward_labels_flipped`` among the training pairs in the last epoch, and
        the lower bound it trusted under (``reward_trust_bound``)."""
        return {"reward_labels_dropped": judgement.left_out(),
                "reward_labels_flipped": float(judgement.flip.sum()),
                **({"reward_trust_bound": self.bound} if math.isfinite(self.bound) else {})}
