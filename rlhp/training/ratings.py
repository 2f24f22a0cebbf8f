"""Learning a reward from ratings: the cumulative-logit (ordered logistic) model on a clip's return.

A person rates a clip ``k`` on a scale of 1 to K when its return R plus logistic noise falls between the cutpoints
``θ[k-1]`` and ``θ[k]``: ``P(rating <= k) = σ(θ[k] - R)`` (McCullagh 1980). The noise is the Bradley-Terry model's:
``P(a preferred to b) = σ(R_a - R_b)`` is the same latent model asked about two clips, so ratings and pairs train
one reward on one scale and mix in a run. The K - 1 cutpoints are learned with the reward, increasing by
construction. RbRL (White et al., AAAI 2024) instead normalises the predicted returns within each batch and places
the class boundaries by the ratings' shares, which ties the reward's scale to the batch it sees and sets it apart
from the pairs'.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rlhp.data.state import record

FAR = 1e4
"""Stands for an infinite cutpoint (below the lowest rating, above the highest) where infinity would give NaN."""


@record
class Cutpoints(nn.Module):
    """Each ensemble member's K - 1 increasing cutpoints: the first free, the gaps after it positive (softplus).
    They start a unit apart around 0."""

    def __init__(self, members: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.first = nn.Parameter(torch.full((members, 1), -(scale - 2) / 2))
        self.gaps = nn.Parameter(torch.full((members, scale - 2), math.log(math.e - 1)))  # softplus gives 1

    def save_state(self) -> dict[str, Any]:
        """Its scale and its two parameters' values (a checkpoint makes it anew from them)."""
        return {"scale": self.scale, "first": self.first.detach(), "gaps": self.gaps.detach()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Made anew (the rating model's first ratings came after the run was built): built from the saved shapes,
        then given the saved values."""
        nn.Module.__init__(self)
        self.scale = state["scale"]
        self.first, self.gaps = nn.Parameter(state["first"]), nn.Parameter(state["gaps"])

    def forward(self) -> torch.Tensor:
        """The cutpoints, (members, scale - 1), increasing along the last axis."""
        return torch.cat([self.first, self.first + F.softplus(self.gaps).cumsum(-1)], dim=-1)


def rating_logprobs(returns: torch.Tensor, cutpoints: torch.Tensor) -> torch.Tensor:
    """log P(rating = k) for k = 1..K, (members, clips, K), for returns (members, clips) and cutpoints (members, K-1).

    ``σ(a) - σ(b) = σ(a) σ(-b) (1 - exp(b - a))`` keeps each class's probability exact in log space where both
    sigmoids saturate."""
    far = cutpoints.new_full((*cutpoints.shape[:-1], 1), FAR)
    high = torch.cat([cutpoints, far], dim=-1)[:, None] - returns[..., None]
    low = torch.cat([-far, cutpoints], dim=-1)[:, None] - returns[..., None]
    return F.logsigmoid(high) + F.logsigmoid(-low) + torch.log(-torch.expm1(low - high))


def rating_loss(returns: torch.Tensor, ratings: torch.Tensor, cutpoints: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of each rating (1..K, (members, clips)) under :func:`rating_logprobs`."""
    return -rating_logprobs(returns, cutpoints).gather(-1, (ratings - 1)[..., None]).squeeze(-1)
