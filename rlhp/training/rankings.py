"""Learning a reward from a ranking as a list: the Plackett-Luce model on clips' returns, ties as Breslow's.

Plackett-Luce (Plackett 1975; Luce 1959) reads a ranking best first as a sequence of choices: the best clip is
chosen from all of them with probability ``exp(R_best) / Σ_j exp(R_j)``, the next from the rest, and so on. A level
of tied clips is chosen together from the clips at that level or below, each with its own softmax term (Breslow's
approximation, as in the Cox model's partial likelihood with tied times). Two clips alone give Bradley-Terry's
``σ(R_a - R_b)``, so a listwise reward sits on the pairs' scale. Where the implied pairs weight every pair of a
ranking alike (the ties of a large level outnumber the decided pairs), the list gives each clip one term: how it
compares with everything ranked at or below it.

Any subset of a Plackett-Luce ranking is itself Plackett-Luce-distributed over that subset, so a batch of clips
drawn from the ranking is trained as a ranking of its own.
"""

from __future__ import annotations

import torch


def plackett_luce_loss(returns: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """Each clip's negative log-probability of being chosen from the clips at its level or below, (..., clips), for
    returns and whole-number levels (0 the worst) of shape (..., clips): a ranking's loss is their sum."""
    at_or_below = levels[..., None, :] <= levels[..., :, None]  # [i, j]: clip j is ranked at clip i's level or below
    return torch.logsumexp(returns[..., None, :].masked_fill(~at_or_below, -torch.inf), -1) - returns


def ranking_concordance(returns: torch.Tensor, levels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(pairs of clips at different levels that the returns order as the ranking does, pairs at different levels),
    each summed over the last axis's pairs, per leading index."""
    higher = levels[..., :, None] > levels[..., None, :]
    return ((returns[..., :, None] > returns[..., None, :]) & higher).sum((-2, -1)), higher.sum((-2, -1))
