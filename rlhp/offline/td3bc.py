"""TD3+BC (Fujimoto & Gu, NeurIPS 2021): TD3 whose policy is also pulled towards the data's actions, the
Q-term scaled by the inverse of its mean magnitude so that one weight fits every task."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from rlhp.offline.learner import Batch, Learner, State
from rlhp.offline.networks import MLP, Critics, adam_step, soft_update


class TD3PlusBC(Learner):
    """A deterministic policy (tanh), ``n_critics`` Q-functions, and the targets of both.

    Args:
        actor_learning_rate, critic_learning_rate: Adam's step sizes.
        gamma: the discount.
        tau: the targets' Polyak step.
        n_critics: Q-functions in the ensemble; the target is the minimum of their targets.
        target_smoothing_sigma, target_smoothing_clip: the target action's Gaussian noise and its bound.
        alpha: the weight of Q against behavioural cloning (lambda = alpha / mean |Q|).
        update_actor_interval: critic steps per policy step (the targets move with the policy).
        hidden_units: every network's hidden layers.
        Others: see :class:`~rlhp.offline.learner.Learner`.
    """

    def __init__(self, obs_dim: int, act_dim: int, seed: int, batch_size: int = 256,
                 hidden_units: tuple[int, ...] = (256, 256), actor_learning_rate: float = 3e-4,
                 critic_learning_rate: float = 3e-4, gamma: float = 0.99, tau: float = 0.005, n_critics: int = 2,
                 target_smoothing_sigma: float = 0.2, target_smoothing_clip: float = 0.5, alpha: float = 2.5,
                 update_actor_interval: int = 2) -> None:
        self.gamma, self.tau, self.alpha, self.interval = gamma, tau, alpha, update_actor_interval
        self.sigma, self.clip = target_smoothing_sigma, target_smoothing_clip
        self.actor, self.critics = MLP(tuple(hidden_units), act_dim), Critics(tuple(hidden_units), n_critics)
        self.actor_opt, self.critic_opt = optax.adam(actor_learning_rate), optax.adam(critic_learning_rate)
        super().__init__(obs_dim, act_dim, seed, batch_size)

    def initial_state(self, key: jax.Array) -> State:
        """Fresh weights, their optimisers' states and targets, the noise's key and the step counter."""
        k_actor, k_critic, key = jax.random.split(key, 3)
        obs, act = jnp.zeros((1, self.obs_dim)), jnp.zeros((1, self.act_dim))
        actor, critic = self.actor.init(k_actor, obs), self.critics.init(k_critic, obs, act)
        return {"actor": actor, "actor_opt": self.actor_opt.init(actor), "actor_target": actor, "critic": critic,
                "critic_opt": self.critic_opt.init(critic), "critic_target": critic, "key": key,
                "step": jnp.zeros((), jnp.int32)}

    def step(self, state: State, batch: Batch) -> State:
        """A critic step; every ``update_actor_interval``-th, a policy step and the targets' move too."""
        key, noise_key = jax.random.split(state["key"])
        noise = jnp.clip(self.sigma * jax.random.normal(noise_key, batch.acts.shape), -self.clip, self.clip)
        next_acts = jnp.clip(self.act({"actor": state["actor_target"]}, batch.next_obs) + noise, -1, 1)
        next_q = self.critics.apply(state["critic_target"], batch.next_obs, next_acts).min(0)
        target = batch.rewards + self.gamma * (1 - batch.terminals) * next_q

        def critic_loss(params: dict) -> jax.Array:
            return ((self.critics.apply(params, batch.obs, batch.acts) - target) ** 2).mean(1).sum()

        critic, critic_opt = adam_step(self.critic_opt, state["critic"], state["critic_opt"],
                                       jax.grad(critic_loss)(state["critic"]))
        state = {**state, "critic": critic, "critic_opt": critic_opt, "key": key, "step": state["step"] + 1}
        return jax.lax.cond(state["step"] % self.interval == 0, self._policy_step, lambda s, b: s, state, batch)

    def _policy_step(self, state: State, batch: Batch) -> State:
        """The policy's step (Q against behavioural cloning) and the targets' move."""
        def actor_loss(params: dict) -> jax.Array:
            acts = self.act({"actor": params}, batch.obs)
            q = self.critics.apply(state["critic"], batch.obs, acts)[0]
            weight = jax.lax.stop_gradient(self.alpha / jnp.abs(q).mean())
            return -weight * q.mean() + ((acts - batch.acts) ** 2).mean()

        actor, actor_opt = adam_step(self.actor_opt, state["actor"], state["actor_opt"],
                                     jax.grad(actor_loss)(state["actor"]))
        return {**state, "actor": actor, "actor_opt": actor_opt,
                "actor_target": soft_update(state["actor_target"], actor, self.tau),
                "critic_target": soft_update(state["critic_target"], state["critic"], self.tau)}

    def act(self, state: State, obs: jax.Array) -> jax.Array:
        """The policy's action."""
        return jnp.tanh(self.actor.apply(state["actor"], obs))
