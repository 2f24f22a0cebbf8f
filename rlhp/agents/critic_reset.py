"""PEBBLE's critic reset: once the state-entropy pre-training ends and the buffer holds the task's reward, the
critic starts again from fresh weights (B-Pref's ``reset_critic``), since its values estimate the pre-training's
intrinsic return, not the task's; the actor keeps what it learned about moving."""

from __future__ import annotations

import torch
from stable_baselines3.common.base_class import BaseAlgorithm


def can_restart_critic(algorithm: BaseAlgorithm) -> bool:
    """Whether :func:`restart_critic` knows this algorithm's critic: SB3's SAC, TD3 and DDPG (``policy.critic``) and
    SBX's SAC, TQC and CrossQ (flax train states)."""
    policy = algorithm.policy
    # SBX's DQN has a Q-network state too, but it is its policy: an actor's state marks an actor-critic.
    return hasattr(policy, "critic_target") or (hasattr(policy, "actor_state") and bool(_jax_critic_states(policy)))


def restart_critic(algorithm: BaseAlgorithm, seed: int) -> None:
    """Draw the critic's weights afresh from ``seed`` (its target network a copy of them) and forget its optimiser's
    moments, as a newly built agent has them."""
    policy = algorithm.policy
    if hasattr(policy, "critic_target"):
        _reset_torch_critic(policy.critic, policy.critic_target, seed)
        return
    import jax

    for name, key in zip(_jax_critic_states(policy), jax.random.split(jax.random.PRNGKey(seed), 3), strict=False):
        setattr(policy, name, _fresh_jax_state(policy, getattr(policy, name), key))


def _reset_torch_critic(critic: torch.nn.Module, target: torch.nn.Module, seed: int) -> None:
    # The features extractor is the actor's own when the two share it: only the critic's heads start again then.
    shared = getattr(critic, "share_features_extractor", False)
    parts = list(critic.q_networks) if shared else [critic]
    with torch.random.fork_rng(devices=[]):  # the run's own random stream goes on untouched
        torch.manual_seed(seed)
        for part in parts:
            for module in part.modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
    target.load_state_dict(critic.state_dict())
    critic.optimizer.state.clear()  # Adam's moments of the old weights


def _jax_critic_states(policy: object) -> list[str]:
    """The names of an SBX policy's critic train states (TQC has two)."""
    return [name for name in ("qf_state", "qf1_state", "qf2_state") if hasattr(policy, name)]


def _fresh_jax_state(policy: object, state: object, key: object) -> object:
    """``state`` with the weights (and batch statistics) a new critic of ``policy`` draws from ``key``."""
    import jax
    import jax.numpy as jnp

    params_key, dropout_key, stats_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, *policy.observation_space.shape), jnp.float32)
    action = jnp.zeros((1, *policy.action_space.shape), jnp.float32)
    variables = policy.qf.init({"params": params_key, "dropout": dropout_key, "batch_stats": stats_key}, obs, action)
    if hasattr(state, "batch_stats"):  # CrossQ: batch renormalisation's statistics, no target network
        params = variables["params"]
        return state.replace(params=params, batch_stats=variables["batch_stats"], opt_state=state.tx.init(params))
    return state.replace(params=variables, target_params=variables, opt_state=state.tx.init(variables))
