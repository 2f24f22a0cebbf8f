"""What an offline learner is: a tree of arrays (weights, optimiser states, targets, a key) and a pure update
step, run over many mini-batches at once by one compiled loop (``jax.lax.scan``), so Python pays per call and
not per gradient step."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlhp.offline.networks import flat

State = dict[str, Any]
"""A learner's whole state: a dict of arrays and trees of arrays."""


class Batch(NamedTuple):
    """A mini-batch of transitions (actions in [-1, 1], observations as the learner reads them)."""

    obs: jax.Array
    acts: jax.Array
    rewards: jax.Array
    next_obs: jax.Array
    terminals: jax.Array


class Learner(ABC):
    """An offline RL algorithm on flat observations and actions in [-1, 1].

    Args:
        obs_dim, act_dim: the sizes of an observation and an action.
        seed: seeds the networks' first weights (and any noise the updates draw).
        batch_size: transitions a gradient step.
    """

    def __init__(self, obs_dim: int, act_dim: int, seed: int, batch_size: int) -> None:
        self.obs_dim, self.act_dim, self.batch_size = obs_dim, act_dim, batch_size
        self.state = self.initial_state(jax.random.PRNGKey(seed))

    @abstractmethod
    def initial_state(self, key: jax.Array) -> State:
        """The state before any training."""

    @abstractmethod
    def step(self, state: State, batch: Batch) -> State:
        """The state after one gradient step on ``batch`` (pure: JAX compiles it)."""

    @abstractmethod
    def act(self, state: State, obs: jax.Array) -> jax.Array:
        """The greedy actions in [-1, 1] for a batch of observations (pure)."""

    def update(self, data: Batch, rows: np.ndarray) -> None:
        """One gradient step per row of ``rows`` (a (steps, batch_size) array of indices into ``data``)."""
        self.state = self._steps(self.state, data, jnp.asarray(rows, jnp.int32))

    def predict(self, obs: np.ndarray) -> np.ndarray:
        """The greedy actions in [-1, 1], as NumPy."""
        return np.asarray(self._act(self.state, jnp.asarray(obs, jnp.float32)))

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array of the state, as NumPy, named by its path (``actor.params.Dense_0.kernel``)."""
        return {name: array for key, tree in self.state.items() for name, array in flat(tree, key).items()}

    # The learner is static (its settings and networks); compiled once per learner and per shape of ``rows``.
    @functools.partial(jax.jit, static_argnums=0)
    def _steps(self, state: State, data: Batch, rows: jax.Array) -> State:
        def one(state: State, index: jax.Array) -> tuple[State, None]:
            return self.step(state, Batch(*(column[index] for column in data))), None

        return jax.lax.scan(one, state, rows)[0]

    @functools.partial(jax.jit, static_argnums=0)
    def _act(self, state: State, obs: jax.Array) -> jax.Array:
        return self.act(state, obs)
