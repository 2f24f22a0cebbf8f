"""Trajectory sources through their typed interface: who trains an agent, and state round trips."""

import contextlib
import functools
import importlib
import json

import numpy as np
import pytest
import torch
from helpers import loaded_into, trajectory
from stable_baselines3 import DQN, PPO, SAC, TD3
from stable_baselines3.common.logger import Logger

import rlhp.agents.agent as agent_module
from rlhp.agents import AgentTrainer
from rlhp.agents.exploration import StateEntropyReward
from rlhp.agents.policies import GaussianActionNoise, random_policy
from rlhp.agents.reward_env import RewardVecEnvWrapper
from rlhp.agents.rollout import rollout
from rlhp.data import save_trajectories
from rlhp.data.state import Arrays, Loader, Saver
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.errors import ArgumentError, RunError
from rlhp.rewards import EnvReward, RewardNet
from rlhp.sources import DatasetSource

ENV = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=2)


def trainer(seed: int, algo=PPO, max_episode_steps: int | None = None, max_episode_steps_until: int | None = None,
            **kwargs) -> AgentTrainer:
    obs_space, act_space = ENV.spaces()
    net = RewardNet(obs_space, act_space, hidden_sizes=[8])
    algorithm = functools.partial(algo, "MlpPolicy", device="cpu", **kwargs)
    return AgentTrainer(algorithm, ENV, net, seed=seed, rng=np.random.default_rng(seed),
                        max_episode_steps=max_episode_steps, max_episode_steps_until=max_episode_steps_until)


def test_the_agent_trainer_trains_whole_rollouts_and_comes_back_whole_when_loaded_into_a_fresh_one():
    a = trainer(0, n_steps=64, batch_size=64, n_epochs=1)
    assert a.agent is a and a.rollout_steps == 128
    report = a.train(300)
    assert report.steps == 256 and a.algorithm.num_timesteps == 256 and len(report.returns) == 0
    obs = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    assert not np.array_equal(a.algorithm.predict(obs, deterministic=True)[0],
                              trainer(1, n_steps=64, batch_size=64, n_epochs=1).algorithm.predict(obs, True)[0])
    b = loaded_into(a, trainer(0, n_steps=64, batch_size=64, n_epochs=1))  # the save contract: state as data
    np.testing.assert_array_equal(a.algorithm.predict(obs, deterministic=True)[0],
                                  b.algorithm.predict(obs, deterministic=True)[0])
    assert b.algorithm.num_timesteps == 256
    for name, tensor in a.algorithm.policy.optimizer.state_dict()["state"][0].items():
        np.testing.assert_array_equal(tensor, b.algorithm.policy.optimizer.state_dict()["state"][0][name])


def test_max_episode_steps_cuts_the_agents_episodes_but_not_the_envs_until_it_is_lifted():
    a = trainer(0, n_steps=64, batch_size=64, n_epochs=1, max_episode_steps=30, max_episode_steps_until=128)
    report = a.train(128)
    assert len(report.returns) == 4 and (report.returns <= 30).all()
    assert {len(t) for t in a.sample(100)} == {30} and not any(t.terminal for t in a.recorder.finished)
    assert {len(t) for t in rollout(ENV.make(seed=0), a.policy, episodes=2)} == {500}
    report = a.train(1024)  # from 128 steps on, the env's own 500 steps
    assert report.steps == 1024 and len(report.returns) == 2 and a.algorithm.num_timesteps == 1152
    assert {len(t) for t in a.recorder.finished} == {500} and {len(t) for t in a.sample(100)} == {500}
    with pytest.raises(ArgumentError, match="max_episode_steps must be >= 1"):
        trainer(0, max_episode_steps=0)
    with pytest.raises(ArgumentError, match="max_episode_steps_until lifts"):
        trainer(0, max_episode_steps_until=1000)


def test_off_policy_rollouts_are_train_freq_steps_per_env_copy():
    assert trainer(0, algo=DQN, train_freq=4, learning_starts=0).rollout_steps == 8
    assert trainer(0, algo=DQN, train_freq=(1, "episode"), learning_starts=0).rollout_steps == 2


def test_a_dataset_source_trains_no_agent_and_saves_its_path_and_content_hash_not_its_episodes(tmp_path):
    venv = ENV.make(seed=0)
    venv.action_space.seed(0)
    episodes = rollout(venv, random_policy(venv.action_space), episodes=5)
    save_trajectories(episodes, tmp_path / "d")
    source = DatasetSource(str(tmp_path / "d"), ENV, np.random.default_rng(0), held_out_frac=0.4)
    assert len(source.held_out(0)) == 2 and sum(map(len, source.sample(10_000))) == 1500
    assert not source.agent.trains and source.agent.train(1000).steps == 0
    arrays = Arrays({})
    saved = json.dumps(Saver(arrays)(source))
    assert len(saved) < 2_000 and sum(a.nbytes for a in arrays.small.values()) < 2_000  # not 1,500 transitions

    def built() -> DatasetSource:  # as resuming builds it from the config, reading the dataset again
        return DatasetSource(str(tmp_path / "d"), ENV, np.random.default_rng(0), held_out_frac=0.4)

    back = Loader(arrays).load(json.loads(saved), built())
    assert [t.obs.tolist() for t in back.trajectories] == [t.obs.tolist() for t in source.trajectories]
    assert [t.obs.tolist() for t in back.held_out(0)] == [t.obs.tolist() for t in source.held_out(0)]
    save_trajectories(episodes[:4], tmp_path / "d")  # the data changed under the run
    with pytest.raises(RunError, match="changed since the run began"):
        Loader(arrays).load(json.loads(saved), built())


def test_sampling_takes_the_freshest_training_episodes_first_and_gives_exploration_its_share():
    source = trainer(0, n_steps=64, batch_size=64, n_epochs=1)
    source.exploration_frac, source.random_prob, source.switch_prob = 0.5, 1.0, 1.0
    source.policy = lambda obs: np.zeros(len(obs), dtype=np.int64)  # the agent always pushes left
    old, mid, new = (trajectory(200, offset=k) for k in (0, 1000, 2000))
    source.recorder.finished = [old, mid, new]
    got = source.sample(800)
    # 400 steps from training episodes, newest first; 400 from exploration, which is all random here.
    assert got[0] is new and got[1] is mid and all(t is not old for t in got)
    explored = got[2:]
    assert sum(map(len, explored)) >= 400 and all(len(t) == 500 for t in explored)
    assert all(t.acts.mean() > 0.3 for t in explored)  # random actions, not the agent's zeros
    assert source.recorder.finished == [old]  # the one left over waits; sampled ones are not sampled again
    assert source.metrics() == {"sampled_from_training_steps": 400, "sampled_rollout_steps": 0,
                                "sampled_exploration_steps": sum(map(len, explored))}
    source.exploration_frac = 0.0
    newer = trajectory(200, offset=3000)
    source.recorder.finished.append(newer)  # an episode that training finished since
    assert source.sample(300) == [newer, old] and source.recorder.finished == []
    topped_up = source.sample(300)  # nothing fresh left: rollouts of the agent's own policy
    assert sum(map(len, topped_up)) >= 300 and all((t.acts == 0).all() for t in topped_up)
    assert source.metrics()["sampled_exploration_steps"] == 0


def test_a_dataset_source_never_samples_its_held_out_episodes(tmp_path):
    venv = ENV.make(seed=1)
    venv.action_space.seed(1)
    save_trajectories(rollout(venv, random_policy(venv.action_space), episodes=10), tmp_path / "d")
    source = DatasetSource(str(tmp_path / "d"), ENV, np.random.default_rng(0), held_out_frac=0.3)
    held = {id(t) for t in source.held_out(0)}
    assert len(held) == 3
    for _ in range(30):
        assert not held & {id(t) for t in source.sample(600)}
    assert len({id(t) for t in source.sample(10_000)}) == 7


@pytest.mark.parametrize(("algo", "env_id", "kwargs"), [
    (DQN, FIXED_HORIZON_CARTPOLE, {"learning_starts": 50, "train_freq": 4, "buffer_size": 300}),
    (SAC, "Pendulum-v1", {"learning_starts": 50, "buffer_size": 1000}),
    (TD3, "Pendulum-v1", {"learning_starts": 50, "buffer_size": 1000, "action_noise": GaussianActionNoise(0.1)}),
    # a buffer relabelled in chunks of 7 rows (an image buffer's gigabytes are never converted at once)
    (DQN, FIXED_HORIZON_CARTPOLE, {"learning_starts": 50, "train_freq": 4, "buffer_size": 300, "chunk_rows": 7}),
    # episodes that end by termination (the reward sees `done`) and by the time limit (it must not)
    (DQN, "CartPole-v1", {"learning_starts": 50, "train_freq": 4, "buffer_size": 300}),
    # SB3's memory-saving layout: the next observation is the following row's observation
    (DQN, "CartPole-v1", {"learning_starts": 50, "train_freq": 4, "buffer_size": 300, "optimize_memory_usage": True,
                          "replay_buffer_kwargs": {"handle_timeout_termination": False}}),
    (SAC, "Reacher-v5", {"learning_starts": 50, "buffer_size": 1000}),  # actions of two dimensions
])
def test_an_off_policy_agents_replay_buffer_is_relabelled_with_the_current_reward(algo, env_id, kwargs, monkeypatch):
    chunk = 0
    if "chunk_rows" in kwargs:
        kwargs = dict(kwargs)
        chunk = kwargs.pop("chunk_rows")
        monkeypatch.setattr(agent_module, "RELABEL_BYTES", chunk * 2 * 2 * 4 * 4)  # rows x copies x obs, next x 4 B
    if env_id.startswith("Reacher"):
        pytest.importorskip("mujoco")
    env = GymEnv(env_id, n_envs=2)
    net = RewardNet(*env.spaces(), hidden_sizes=[8], use_action=True, use_next_state=True, use_done=True,
                    normalize_input=False)
    source = AgentTrainer(functools.partial(algo, "MlpPolicy", device="cpu", **kwargs), env, net, seed=0,
                          rng=np.random.default_rng(0))
    source.train(400)  # the buffer wraps around for DQN (300 x 2 copies)
    buffer = source.algorithm.replay_buffer
    n = buffer.buffer_size if buffer.full else buffer.pos
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p))  # a reward update
    stale = buffer.rewards[:n].copy()
    assert [id(a) for a in source.derived_arrays()] == [id(buffer.rewards)]  # a checkpoint stores no rewards
    passes = []
    relabel_rows = source._relabel_rows
    monkeypatch.setattr(source, "_relabel_rows", lambda buf, rows: (passes.append(rows), relabel_rows(buf, rows)))
    source.train(0)  # every training phase relabels first
    # One pass per chunk of the budget's rows, each stored row once, and no row the buffer has not filled.
    assert np.array_equal(np.concatenate(passes), np.arange(n))
    assert [len(r) for r in passes] == ([chunk] * (n // chunk) + [n % chunk] * bool(n % chunk) if chunk else [n])
    # Each stored transition, scored alone by the updated net, as the agent would now be paid.
    ended = 0
    for i in range(n):
        for copy in range(buffer.n_envs):
            terminated = bool(buffer.dones[i, copy]) and not bool(buffer.timeouts[i, copy])
            ended += terminated
            act = buffer.actions[i, copy].reshape(env.spaces()[1].shape)
            # SB3's memory-saving buffer keeps the next observation as the next row's observation.
            following = buffer.observations[(i + 1) % buffer.buffer_size, copy] if buffer.optimize_memory_usage \
                else buffer.next_observations[i, copy]
            obs, next_obs = buffer.observations[i, copy][None], following[None]
            want = net.agent_reward(obs, act[None], next_obs, np.array([terminated]), update_stats=False)[0]
            # float32 sums in another order (a batch, not one row) of hidden units of size ~10 after the update
            # (seen up to 2e-5); a stale or misread transition is off by about the reward's size, ~1
            assert buffer.rewards[i, copy] == pytest.approx(want, rel=1e-4, abs=1e-4)
    assert not np.allclose(stale, buffer.rewards[:n])
    assert ended > 5 if env_id == "CartPole-v1" else ended == 0  # the rule for `done` was put to the test


def test_the_env_reward_is_kept_in_the_replay_buffer_never_relabelled():
    env = GymEnv("Pendulum-v1", n_envs=2)
    source = AgentTrainer(functools.partial(SAC, "MlpPolicy", device="cpu", learning_starts=50, buffer_size=1000),
                          env, EnvReward(), seed=0, rng=np.random.default_rng(0))
    source.train(200)
    buffer = source.algorithm.replay_buffer
    rewards = buffer.rewards[:buffer.pos].copy()
    assert (rewards < 0).all()  # Pendulum's own cost, not a learned reward
    source.train(0)
    np.testing.assert_array_equal(buffer.rewards[:buffer.pos], rewards)
    assert source.derived_arrays() == []


def pendulum_cost(obs: np.ndarray, scaled_acts: np.ndarray) -> np.ndarray:
    """Pendulum-v1's own reward of each step, from the observation before it and SB3's scaled action."""
    theta = np.arctan2(obs[..., 1], obs[..., 0])
    return -(theta**2 + 0.1 * obs[..., 2] ** 2 + 0.001 * (2 * scaled_acts[..., 0]) ** 2)


@pytest.mark.parametrize("buffer_size", [1000, 60])  # 60: 30 rows of 2 copies, and the pre-training wrote 150
def test_the_env_reward_replaces_the_pre_trainings_intrinsic_one_in_the_replay_buffer(buffer_size):
    env = GymEnv("Pendulum-v1", n_envs=2)
    source = AgentTrainer(functools.partial(SAC, "MlpPolicy", device="cpu", learning_starts=50,
                                            buffer_size=buffer_size), env, EnvReward(), seed=0,
                          rng=np.random.default_rng(0), unsupervised_steps=300)
    source.sample(10)
    buffer = source.algorithm.replay_buffer
    n = buffer.buffer_size if buffer.full else buffer.pos
    assert n == min(150, buffer.buffer_size)
    # Every stored step pays Pendulum's cost of its state and action (the state-entropy reward is positive).
    np.testing.assert_allclose(buffer.rewards[:n], pendulum_cost(buffer.observations[:n], buffer.actions[:n]),
                               rtol=1e-4, atol=1e-4)
    assert source.venv.env_rewards_while_intrinsic == []


def test_a_learned_reward_relabels_the_buffer_before_the_critic_starts_again_then_trains_it(monkeypatch):
    env = GymEnv("Pendulum-v1", n_envs=2)
    net = RewardNet(*env.spaces(), hidden_sizes=[8], use_action=True)
    source = AgentTrainer(functools.partial(SAC, "MlpPolicy", device="cpu", learning_starts=50, buffer_size=1000,
                                            policy_kwargs={"net_arch": [16]}), env, net, seed=0,
                          rng=np.random.default_rng(0), unsupervised_steps=300, reset_critic=True,
                          reset_critic_updates=7)
    assert not source.critic_reset_due
    source.sample(10)
    assert source.critic_reset_due
    buffer, policy = source.algorithm.replay_buffer, source.algorithm.policy
    events = []
    restart, train = agent_module.restart_critic, source.algorithm.train

    def restarted(algorithm, seed):
        obs, acts = buffer.observations[:buffer.pos], buffer.actions[:buffer.pos]
        paid = net.agent_reward(obs.reshape(-1, 3), acts.reshape(-1, 1), buffer.next_observations[:buffer.pos]
                                .reshape(-1, 3), np.zeros(obs.size // 3, bool), update_stats=False)
        events.append(("reset", np.allclose(buffer.rewards[:buffer.pos].ravel(), paid, atol=1e-5), seed))
        restart(algorithm, seed)

    def trained(gradient_steps, batch_size):
        events.append(("train", gradient_steps))
        train(gradient_steps=gradient_steps, batch_size=batch_size)

    monkeypatch.setattr(agent_module, "restart_critic", restarted)
    monkeypatch.setattr(source.algorithm, "train", trained)
    actor = {k: v.clone() for k, v in policy.actor.state_dict().items()}
    source.train(0)  # no env steps: only the reset and its own gradient steps
    # Relabelled first, then reset from the run's seed, then 7 gradient steps on the buffer.
    assert events == [("reset", True, 0), ("train", 7)]
    assert any(not torch.equal(actor[k], v) for k, v in policy.actor.state_dict().items())  # the actor trained on
    source.train(64)
    assert [e for e in events if e[0] == "reset"] == [("reset", True, 0)] and not source.critic_reset_due


def test_a_critic_starts_again_from_the_seeds_fresh_weights_and_forgets_its_optimisers_moments():
    from rlhp.agents.critic_reset import can_restart_critic, restart_critic

    env = GymEnv("Pendulum-v1", n_envs=2)
    algos = [SAC("MlpPolicy", env.make(0), learning_starts=10, buffer_size=500, policy_kwargs={"net_arch": [16]},
                 seed=s, device="cpu") for s in (0, 1)]
    for algo in algos:
        algo.set_logger(Logger(None, []))
        algo.learn(60)
    actor = {k: v.clone() for k, v in algos[0].policy.actor.state_dict().items()}
    trained = {k: v.clone() for k, v in algos[0].policy.critic.state_dict().items()}
    for algo in algos:
        restart_critic(algo, 5)
    first, second = (a.policy.critic.state_dict() for a in algos)
    assert all(torch.equal(first[k], second[k]) for k in first)  # the seed's weights, whatever came before
    assert all(not torch.equal(first[k], trained[k]) for k in first if k.endswith("weight"))
    target = algos[0].policy.critic_target.state_dict()
    assert all(torch.equal(first[k], target[k]) for k in first)
    assert not algos[0].policy.critic.optimizer.state
    assert all(torch.equal(actor[k], v) for k, v in algos[0].policy.actor.state_dict().items())
    assert can_restart_critic(algos[0]) and not can_restart_critic(DQN("MlpPolicy", ENV.make(0), device="cpu"))


@pytest.mark.parametrize("name", ["SAC", "TQC", "CrossQ"])
def test_a_jax_critic_starts_again_from_the_seeds_fresh_weights_and_trains_on(name):
    sbx = pytest.importorskip("sbx")
    import jax

    from rlhp.agents.critic_reset import can_restart_critic, restart_critic

    env = GymEnv("Pendulum-v1", n_envs=1)
    algos = [getattr(sbx, name)("MlpPolicy", env.make(0), learning_starts=10, buffer_size=500, seed=s,
                                policy_kwargs={"net_arch": [16]}) for s in (0, 1)]
    for algo in algos:
        algo.learn(30)
    states = [n for n in ("qf_state", "qf1_state", "qf2_state") if hasattr(algos[0].policy, n)]
    trained = {n: getattr(algos[0].policy, n) for n in states}
    actor = algos[0].policy.actor_state.params
    for algo in algos:
        restart_critic(algo, 5)
    leaves = jax.tree_util.tree_leaves
    for n in states:
        first, second = (getattr(a.policy, n) for a in algos)
        assert all((x == y).all() for x, y in zip(leaves(first.params), leaves(second.params), strict=True))
        assert any((x != y).any() for x, y in zip(leaves(first.params), leaves(trained[n].params), strict=True))
        if hasattr(first, "target_params"):
            assert all((x == y).all() for x, y in zip(leaves(first.params), leaves(first.target_params), strict=True))
        fresh_moments = leaves(first.tx.init(first.params))
        assert all((x == y).all() for x, y in zip(leaves(first.opt_state), fresh_moments, strict=True))
    assert all((x == y).all() for x, y in zip(leaves(actor), leaves(algos[0].policy.actor_state.params), strict=True))
    assert can_restart_critic(algos[0]) and not can_restart_critic(sbx.DQN("MlpPolicy", ENV.make(0)))
    algos[0].train(gradient_steps=3, batch_size=8)  # the fresh critic fits the policy's functions


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"reset_critic": True}, "reset_critic"),  # no pre-training to end
    ({"reset_critic": True, "unsupervised_steps": 64, "algo": PPO}, "reset_critic"),  # no critic to reset
    ({"reset_critic": True, "unsupervised_steps": 64, "algo": DQN}, "reset_critic"),  # its Q-network is its policy
    ({"reset_critic_updates": -1}, "reset_critic_updates"),
])
def test_a_critic_reset_that_cannot_happen_is_refused_naming_its_key(kwargs, key):
    kwargs = dict(kwargs)
    algo = kwargs.pop("algo", SAC)
    env = GymEnv("Pendulum-v1" if algo is SAC else FIXED_HORIZON_CARTPOLE, n_envs=2)
    with pytest.raises(ArgumentError) as err:
        AgentTrainer(functools.partial(algo, "MlpPolicy", device="cpu"), env, RewardNet(*env.spaces()), seed=0,
                     rng=np.random.default_rng(0), **kwargs)
    assert err.value.argument == key


def test_state_entropy_pays_for_the_unvisited_and_forgets_the_oldest():
    reward = StateEntropyReward(k=2, capacity=8)
    crowd = np.zeros((6, 3), np.float32) + np.random.default_rng(0).normal(scale=0.01, size=(6, 3)).astype(np.float32)
    reward(crowd)
    near, far = reward(np.array([[0.0, 0.0, 0.01], [5.0, 5.0, 5.0]], np.float32))
    assert far > near + 1 and near < 0.1
    reward(np.full((8, 3), 9.0, np.float32))  # fills the memory: the crowd is forgotten
    assert len(reward.memory) == 8 and reward(np.zeros((1, 3), np.float32))[0] > 2


def test_pebble_trains_on_state_entropy_once_before_the_first_sample():
    source = AgentTrainer(functools.partial(PPO, "MlpPolicy", n_steps=32, batch_size=64, device="cpu"), ENV,
                          RewardNet(*ENV.spaces()), seed=0, rng=np.random.default_rng(0), unsupervised_steps=512)
    given = []
    reward_env = source.venv
    original = reward_env.step_wait

    def spy():
        obs, rews, dones, infos = original()
        given.append((reward_env.intrinsic is not None, rews))
        return obs, rews, dones, infos

    reward_env.step_wait = spy
    source.sample(100)
    assert source.metrics()["unsupervised_steps"] == 512 and source.algorithm.num_timesteps == 512
    assert all(intrinsic for intrinsic, _ in given) and len(given) == 512 // ENV.n_envs
    assert np.concatenate([r for _, r in given]).std() > 0  # not CartPole's constant 1 or the untrained net
    source.sample(100)
    assert "unsupervised_steps" not in source.metrics() and source.algorithm.num_timesteps == 512


@pytest.mark.parametrize("library", ["stable_baselines3", "sbx"])
def test_an_on_policy_rollout_is_paid_its_learned_reward_in_one_pass_as_it_would_be_step_by_step(monkeypatch,
                                                                                                  library):
    # Truncated 20-step episodes inside 64-step rollouts: the library adds a value bootstrap to a truncated step's
    # reward, which must survive the later payment. No output normalisation, so both ways score the same rewards.
    ppo = importlib.import_module(library).PPO
    def rollout_buffer(per_step: bool) -> tuple[object, int]:
        torch.manual_seed(0)
        net = RewardNet(*ENV.spaces(), hidden_sizes=[8], normalize_output=False)
        calls = []
        score = net.agent_reward
        monkeypatch.setattr(net, "agent_reward", lambda *a, **k: calls.append(len(a[0])) or score(*a, **k))
        if per_step:  # the step-by-step way: nothing deferred, nothing paid at a rollout's end
            monkeypatch.setattr(RewardVecEnvWrapper, "deferred", contextlib.nullcontext)
            monkeypatch.setattr(agent_module.PayRollout, "_on_rollout_end", lambda self: None)
        source = AgentTrainer(functools.partial(ppo, "MlpPolicy", device="cpu", n_steps=64, batch_size=64,
                                                n_epochs=1), ENV, net, seed=0, rng=np.random.default_rng(0),
                              max_episode_steps=20)
        source.train(256)
        monkeypatch.undo()
        return source.algorithm.rollout_buffer, calls

    (paid, paid_calls), (stepped, step_calls) = rollout_buffer(False), rollout_buffer(True)
    assert paid_calls == [128] * 2 and step_calls == [2] * 128  # two rollouts of 64 steps of 2 env copies
    for name in ("rewards", "advantages", "returns", "values"):
        np.testing.assert_allclose(getattr(paid, name), getattr(stepped, name), rtol=1e-5, atol=1e-6)
    assert (paid.episode_starts[1:] == 1).any()  # episodes ended inside the rollout
