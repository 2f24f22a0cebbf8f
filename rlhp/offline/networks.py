"""The offline learners' networks (Flax): an MLP, an ensemble of Q-functions, and the steps they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

Params = Any
"""A network's weights: Flax's nested dict of arrays."""


class MLP(nn.Module):
    """Dense layers of ``widths`` with ReLU between them, then a linear layer of ``out`` units."""

    widths: Sequence[int]
    out: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """The network's output for a batch ``x``."""
        for width in self.widths:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.out)(x)


class Critics(nn.Module):
    """``n`` Q-functions of one shape, side by side (one batched network): Q(s, a) as an (n, batch) array."""

    widths: Sequence[int]
    n: int

    @nn.compact
    def __call__(self, obs: jax.Array, acts: jax.Array) -> jax.Array:
        """Every member's value of each (observation, action) row."""
        ensemble = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=None,
                           out_axes=0, axis_size=self.n)
        return ensemble(self.widths, 1)(jnp.concatenate([obs, acts], -1))[..., 0]


def adam_step(optimiser: optax.GradientTransformation, params: Params, opt_state: Any,
              grads: Params) -> tuple[Params, Any]:
    """Weights and optimiser state after one step of ``optimiser`` along ``grads``."""
    updates, opt_state = optimiser.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def soft_update(target: Params, online: Params, tau: float) -> Params:
    """Polyak averaging: the target moves ``tau`` of the way to the online weights."""
    return optax.incremental_update(online, target, tau)


def flat(tree: Params, prefix: str) -> dict[str, np.ndarray]:
    """Every array of a tree, as NumPy, named by its path (``actor.params.Dense_0.kernel``)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {prefix + "".join(f".{getattr(k, 'key', getattr(k, 'idx', k))}" for k in path): np.asarray(leaf)
            for path, leaf in leaves}
