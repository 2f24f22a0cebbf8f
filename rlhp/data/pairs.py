"""A batch of fragment pairs: the unit that is queried, labelled and trained on."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch


@dataclass
class FragmentPairs:
    """A batch of fragment pairs: the steps have leading shape (pairs, 2, length), the provenance (pairs, 2).

    ``rews`` are the true rewards (NaN where unknown); ``dones`` marks the last step of a
    terminal trajectory. Provenance: ``episode`` is the fragment's episode (its dataset row, -1 when
    it has none), ``start`` its first step there, ``quality`` the episode's rank when its dataset
    ranks episodes, else its true return (what a ranking teacher compares).
    """

    obs: np.ndarray
    acts: np.ndarray
    next_obs: np.ndarray
    dones: np.ndarray
    rews: np.ndarray
    episode: np.ndarray
    start: np.ndarray
    quality: np.ndarray

    def __len__(self) -> int:
        """Number of pairs."""
        return len(self.dones)

    def __getitem__(self, idx: np.ndarray | slice) -> FragmentPairs:
        """The pairs at ``idx``."""
        return FragmentPairs(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def concat(batches: list[FragmentPairs]) -> FragmentPairs:
        """Stack batches along the pair axis."""
        names = [f.name for f in fields(FragmentPairs)]
        return FragmentPairs(**{n: np.concatenate([getattr(b, n) for b in batches]) for n in names})

    def tensors(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """(obs, acts, next_obs, dones) as tensors on ``device``, the reward net's inputs."""
        return tuple(torch.as_tensor(a, device=device) for a in (self.obs, self.acts, self.next_obs, self.dones))
