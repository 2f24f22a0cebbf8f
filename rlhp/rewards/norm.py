"""Running statistics that standardise a reward net's inputs and outputs."""

from __future__ import annotations

import torch
from torch import nn


class RunningNorm(nn.Module):
    """Running mean/variance over the leading axes (Chan et al. parallel update)."""

    def __init__(self, shape: tuple[int, ...] = (), eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def forward(self, x: torch.Tensor, update: bool = False) -> torch.Tensor:
        """Normalise ``x``, first folding it into the statistics when ``update``."""
        if update and x.numel():
            flat = x.reshape(-1, *self.mean.shape)
            n, mean, var = len(flat), flat.mean(0), flat.var(0, unbiased=False)
            total = self.count + n
            delta = mean - self.mean
            # In place, so the buffers stay ordinary tensors even when updated under inference mode.
            self.var.copy_((self.var * self.count + var * n + delta**2 * self.count * n / total) / total)
            self.mean += delta * n / total
            self.count.copy_(total)
        return (x - self.mean) / torch.sqrt(self.var + self.eps)

    def reset(self) -> None:
        """Forget the statistics."""
        self.mean.zero_(), self.var.fill_(1), self.count.zero_()
