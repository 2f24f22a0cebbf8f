"""IQL (Kostrikov, Nair & Levine, ICLR 2022): a value fitted to an expectile of the Q-values, Q-learning on that
value, and a policy extracted by advantage-weighted regression, never querying an action outside the data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from rlhp.offline.learner import Batch, Learner, State
from rlhp.offline.networks import MLP, Critics, adam_step, soft_update

LOG_STD = (-5.0, 2.0)
"""The bounds of the policy's log standard deviation (the paper's code)."""


class IQL(Learner):
    """IQL's three networks: a Gaussian policy (a tanh'd mean and one learned log deviation per action), ``n_critics``
    Q-functions with their targets, and a value.

    Args:
        actor_learning_rate, critic_learning_rate: Adam's step sizes (the value's is the critics').
        gamma: the discount.
        tau: the targets' Polyak step.
        n_critics: Q-functions in the ensemble; the value fits the minimum of their targets.
        expectile: the value's expectile of the Q-values (the paper's tau).
        weight_temp: the advantage's inverse temperature in the policy's weights (the paper's beta).
        max_weight: the policy's weights are clipped to this.
        hidden_units: every network's hidden layers.
        Others: see :class:`~rlhp.offline.learner.Learner`.
    """

    def __init__(self, obs_dim: int, act_dim: int, seed: int, batch_size: int = 256,
                 hidden_units: tuple[int, ...] = (256, 256), actor_learning_rate: float = 3e-4,
                 critic_learning_rate: float = 3e-4, gamma: float = 0.99, tau: float = 0.005, n_critics: int = 2,
                 expectile: float = 0.7, weight_temp: float = 3.0, max_weight: float = 100.0) -> None:
        self.gamma, self.tau, self.expectile = gamma, tau, expectile
        self.weight_temp, self.max_weight = weight_temp, max_weight
        self.actor = MLP(tuple(hidden_units), act_dim)
        self.critics = Critics(tuple(hidden_units), n_critics)
        self.value = MLP(tuple(hidden_units), 1)
        self.actor_opt, self.critic_opt = optax.adam(actor_learning_rate), optax.adam(critic_learning_rate)
        super().__init__(obs_dim, act_dim, seed, batch_size)

    def initial_state(self, key: jax.Array) -> State:
        """Fresh weights, their optimisers' states, the critics' targets."""
        k_actor, k_critic, k_value = jax.random.split(key, 3)
        obs, act = jnp.zeros((1, self.obs_dim)), jnp.zeros((1, self.act_dim))
        actor = {"mean": self.actor.init(k_actor, obs), "log_std": jnp.zeros(self.act_dim)}
        critic, value = self.critics.init(k_critic, obs, act), self.value.init(k_value, obs)
        return {"actor": actor, "actor_opt": self.actor_opt.init(actor), "critic": critic,
                "critic_opt": self.critic_opt.init(critic), "critic_target": critic, "value": value,
                "value_opt": self.critic_opt.init(value)}

    def step(self, state: State, batch: Batch) -> State:
        """The value, then the policy, then the critics and their targets, as the paper's code orders them."""
        q_target = self.critics.apply(state["critic_target"], batch.obs, batch.acts).min(0)

        def value_loss(params: dict) -> jax.Array:
            diff = q_target - self.value.apply(params, batch.obs)[:, 0]
            return (jnp.where(diff > 0, self.expectile, 1 - self.expectile) * diff ** 2).mean()

        value, value_opt = adam_step(self.critic_opt, state["value"], state["value_opt"],
                                     jax.grad(value_loss)(state["value"]))
        advantage = q_target - self.value.apply(value, batch.obs)[:, 0]
        weights = jnp.minimum(jnp.exp(self.weight_temp * advantage), self.max_weight)

        def actor_loss(params: dict) -> jax.Array:
            mean = jnp.tanh(self.actor.apply(params["mean"], batch.obs))
            log_std = jnp.clip(params["log_std"], *LOG_STD)
            log_prob = (-0.5 * ((batch.acts - mean) / jnp.exp(log_std)) ** 2 - log_std).sum(-1)
            return -(weights * log_prob).mean()

        actor, actor_opt = adam_step(self.actor_opt, state["actor"], state["actor_opt"],
                                     jax.grad(actor_loss)(state["actor"]))
        target = batch.rewards + self.gamma * (1 - batch.terminals) * self.value.apply(value, batch.next_obs)[:, 0]

        def critic_loss(params: dict) -> jax.Array:
            return ((self.critics.apply(params, batch.obs, batch.acts) - target) ** 2).mean(1).sum()

        critic, critic_opt = adam_step(self.critic_opt, state["critic"], state["critic_opt"],
                                       jax.grad(critic_loss)(state["critic"]))
        return {"actor": actor, "actor_opt": actor_opt, "critic": critic, "critic_opt": critic_opt,
                "critic_target": soft_update(state["critic_target"], critic, self.tau), "value": value,
                "value_opt": value_opt}

    def act(self, state: State, obs: jax.Array) -> jax.Array:
        """The policy's mean."""
        return jnp.tanh(self.actor.apply(state["actor"]["mean"], obs))
