"""The Bradley-Terry (Boltzmann-rational) preference model: P(first fragment preferred) from returns."""

from __future__ import annotations

import math

import torch


def discounted_returns(rews: torch.Tensor, discount_factor: float = 1.0) -> torch.Tensor:
    """Sum over the last (time) axis, step t weighted by ``discount_factor ** t``."""
    if discount_factor == 1.0:
        return rews.sum(-1)
    return (rews * discount_factor ** torch.arange(rews.shape[-1], dtype=rews.dtype, device=rews.device)).sum(-1)


def preference_logprobs(returns: torch.Tensor, noise_prob: float = 0.0, threshold: float = 50.0
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """log P(first preferred) and log P(second preferred) for returns of shape (..., 2).

    P = noise_prob / 2 + (1 - noise_prob) * sigmoid(clip(R1 - R2, -threshold, threshold)),
    computed in log space so that neither probability underflows to log(0).
    """
    diff = (returns[..., 0] - returns[..., 1]).clamp(-threshold, threshold)
    first, second = torch.nn.functional.logsigmoid(diff), torch.nn.functional.logsigmoid(-diff)
    if noise_prob == 0:
        return first, second
    floor = torch.full_like(diff, math.log(noise_prob / 2))
    keep = math.log1p(-noise_prob) if noise_prob < 1 else -math.inf
    return torch.logaddexp(floor, keep + first), torch.logaddexp(floor, keep + second)
