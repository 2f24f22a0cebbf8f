"""The particle estimate of state entropy (Lee et al. 2021): PEBBLE's pre-training reward and RIME's warm start
read it."""

from __future__ import annotations

import torch

QUERY_CHUNK = 1024
"""Observations scored at once: a chunk's distances to every remembered one are held together."""


def state_entropy(queries: torch.Tensor, memory: torch.Tensor, k: int) -> torch.Tensor:
    """``log(1 + d)`` for each flat observation of ``queries``, ``d`` its distance to its ``k``-th nearest
    neighbour in ``memory``, which holds the queries themselves (each is its own nearest, at 0, and not counted)."""
    k = min(k + 1, len(memory))
    return torch.cat([torch.log1p(torch.cdist(queries[lo:lo + QUERY_CHUNK], memory)
                                  .topk(k, largest=False).values[:, -1])
                      for lo in range(0, len(queries), QUERY_CHUNK)])
