"""The Bradley-Terry (Boltzmann-rational) preference model: P(first fragment preferred) from returns."""

from __future__ import annotations

import math

import torch


def discount_weights(steps: int, discount_factor: float, like: torch.Tensor) -> torch.Tensor:
    """``discount_factor ** t`` for t < ``steps``, with ``like``'s dtype and device."""
    return discount_factor ** torch.arange(steps, dtype=like.dtype, device=like.device)


def discounted_returns(rews: torch.Tensor, discount_factor: float = 1.0) -> torch.Tensor:
    """Sum over the last (time) axis, step t weighted by ``discount_factor ** t``."""
    if discount_factor == 1.0:
        return rews.sum(-1)
    return (rews * discount_weights(rews.shape[-1], discount_factor, rews)).sum(-1)


def preference_logprobs(returns: torch.Tensor, noise_prob: float = 0.0, threshold: float = 50.0
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """log P(first preferred) and log P(second preferred) for returns of shape (..., 2).

    P = noise_prob / 2 + (1 - noise_prob) * sigmoid(clip(R1 - R2, -threshold, threshold)),
    computed in log space so that neither probability underflows to log(0).
    """
    diff = clipped_difference(returns, threshold)
    first, second = torch.nn.functional.logsigmoid(diff), torch.nn.functional.logsigmoid(-diff)
    if noise_prob == 0:
        return first, second
    floor = torch.full_like(diff, math.log(noise_prob / 2))
    keep = math.log1p(-noise_prob) if noise_prob < 1 else -math.inf
    return torch.logaddexp(floor, keep + first), torch.logaddexp(floor, keep + second)


def clipped_difference(returns: torch.Tensor, threshold: float = 50.0) -> torch.Tensor:
    """R1 - R2 clipped to +-threshold, for returns of shape (..., 2): the logit of P without noise."""
    first, second = returns.unbind(-1)  # one backward op (a stack), where two selects take three
    return (first - second).clamp(-threshold, threshold)


def preference_loss(returns: torch.Tensor, labels: torch.Tensor, noise_prob: float = 0.0,
                    threshold: float = 50.0) -> torch.Tensor:
    """Per-pair cross-entropy between the label (P(first preferred) as judged) and the model's P."""
    if noise_prob == 0:
        # The same value as the general form below in one fused op: it runs on every training step.
        logits = clipped_difference(returns, threshold)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels.expand_as(logits), reduction="none")
    first, second = preference_logprobs(returns, noise_prob, threshold)
    return -(labels * first + (1 - labels) * second)
