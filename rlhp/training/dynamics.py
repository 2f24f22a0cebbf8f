"""Self-supervised, dynamics-aware reward features (after REED, Metcalf et al. 2024): beside the preference loss,
each member's last hidden layer learns to predict the next step's input from the current one, on the labelled
fragments and on unlabelled ones, so that its features carry what the labels alone are too few to teach."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch
from torch import nn

from rlhp.errors import ArgumentError
from rlhp.rewards import RewardInputs, RewardNet

Inputs = Callable[[torch.Tensor], RewardInputs]
"""Encoded pairs at an index tensor (see ``RewardTrainer``): leading shape ``(*index, 2, length)``."""


class SelfSupervision(Protocol):
    """What a reward trainer learns from the dynamics in its fragments, beside the labels."""

    ratio: int
    """Unlabelled pairs drawn beside each labelled pair of a batch, and kept per labelled pair (0: none)."""

    def head(self, net: RewardNet) -> nn.Module:
        """The trainable parts it adds to ``net`` (trained with it, by the same optimiser)."""

    def loss(self, head: nn.Module, net: RewardNet, labelled: torch.Tensor, inputs: Inputs,
             unlabelled: Inputs, pool: int, rng: np.random.Generator) -> torch.Tensor:
        """The loss, summed over members, on the labelled pairs at ``labelled`` (members, B) and unlabelled pairs
        it draws from the ``pool`` kept (none when 0)."""


class NoSelfSupervision:
    """Features learned from the labels alone, as the paper trains: no head, no loss."""

    ratio = 0

    def head(self, net: RewardNet) -> nn.Module:
        """A module without parameters."""
        return nn.Module()

    def loss(self, head: nn.Module, net: RewardNet, labelled: torch.Tensor, inputs: Inputs,
             unlabelled: Inputs, pool: int, rng: np.random.Generator) -> torch.Tensor:
        """Zero (and draws no random numbers)."""
        return torch.zeros((), device=net.device)


class NextInputHead(nn.Module):
    """``members`` linear maps from a member's features to a predicted input, evaluated together."""

    def __init__(self, members: int, width: int, out_dim: int) -> None:
        super().__init__()
        bound = 1 / math.sqrt(width)  # nn.Linear's default init, per member
        self.weight = nn.Parameter(torch.empty(members, width, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out_dim).uniform_(-bound, bound))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(members, N, width) -> (members, N, out_dim)."""
        return torch.baddbmm(self.bias, features, self.weight)


class NextInputPrediction:
    """Each member predicts, from its last hidden layer at a step of a fragment, its own standardised input at the
    next step (the next state, and the next action where the net sees actions), by a linear head; the mean
    squared error, times ``weight``, joins the loss. A batch of ``B`` labelled pairs (each member's own, as it
    trains on them) comes with ``ratio * B`` unlabelled ones, drawn as SURF's are.

    Args:
        weight: the prediction loss's weight against the preference loss's per-pair cross-entropy.
        ratio: unlabelled pairs per labelled pair (0: the labelled fragments only).
    """

    def __init__(self, weight: float = 1.0, ratio: int = 4) -> None:
        if not 0 < weight < math.inf:
            raise ArgumentError("weight", f"must be a positive finite number, got {weight}")
        if ratio < 0:
            raise ArgumentError("ratio", f"must be at least 0, got {ratio}")
        self.weight, self.ratio = weight, ratio

    def head(self, net: RewardNet) -> NextInputHead:
        """A linear head per member from its features to its input."""
        width = net.body.features(torch.zeros(1, 1, net.input_dim, device=net.device)).shape[-1]
        return NextInputHead(net.members, width, net.input_dim).to(net.device)

    def loss(self, head: nn.Module, net: RewardNet, labelled: torch.Tensor, inputs: Inputs,
             unlabelled: Inputs, pool: int, rng: np.random.Generator) -> torch.Tensor:
        """``weight`` times the mean squared error of the predicted next inputs, summed over members."""
        steps = [inputs(labelled).x]
        if pool and self.ratio:
            drawn = rng.integers(0, pool, (net.members, self.ratio * labelled.shape[1]))
            steps.append(unlabelled(torch.as_tensor(drawn, device=labelled.device)).x)
        x = torch.cat([s.reshape(net.members, -1, *s.shape[-2:]) for s in steps], dim=1)  # (members, F, L, in)
        members, fragments, length, width = x.shape
        if length < 2:
            raise ArgumentError("fragment_length", "must be at least 2 for next-input prediction")
        features = net.body.features(x[:, :, :-1].reshape(members, -1, width))
        error = head(features) - x[:, :, 1:].reshape(members, -1, width)
        return self.weight * error.square().mean(dim=(1, 2)).sum()
