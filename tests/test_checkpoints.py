"""The save contract: a checkpoint is the loop's state as data, large arrays in shared chunks written once,
a replay buffer's rewards not at all (they are relabelled before they are read)."""


import numpy as np
import pytest
from helpers import composed, loaded_into

from rlhp.experiment.callbacks import Checkpointer
from rlhp.experiment.checkpoints import CHUNK, RunRecord, load_checkpoint
from rlhp.experiment.compose import compose
from rlhp.experiment.config import build
from rlhp.runs import RunFolder

SAC = ["debug=fast", "env=gym", "env.id=Pendulum-v1", "agent=sac", "agent.learning_starts=100",
       "agent.buffer_size=100000", "++agent.policy_kwargs.net_arch=[32,32]", "reward_net.use_action=true",
       "keep_checkpoints=1"]  # small nets: what a round writes is then mostly the buffer's


def test_a_round_writes_only_the_chunks_its_new_transitions_touch_and_loading_restores_the_buffer(tmp_path):
    cfg = composed("train", SAC)
    run = RunFolder(tmp_path)
    loop = compose(cfg, run.path)
    buffer = loop.agent.algorithm.replay_buffer
    checkpointer = Checkpointer(run, RunRecord(cfg, SAC), every=1, keep=1)
    written_chunks = []
    for _ in range(3):
        before = set(run.chunks_dir.iterdir()) if run.chunks_dir.exists() else set()
        result = loop.round()
        checkpointer(loop, result)
        written_chunks.append(set(run.chunks_dir.iterdir()) - before)
    columns = ("observations", "next_observations", "actions", "dones", "timeouts")
    # Round 2 added 128 steps of 4 envs: each column rewrites the one or two chunks they fall in, nothing more
    # (the rewards are not stored, and the unused zeros are one chunk for every column).
    assert 0 < len(written_chunks[2]) <= 2 * len(columns)
    chunks = list(run.chunks_dir.iterdir())
    assert chunks and all(p.stat().st_size <= CHUNK for p in chunks)
    used = set((run.checkpoint("iter_0002") / "chunks.txt").read_text().split())
    assert {p.name for p in chunks} == used  # older checkpoints were pruned, and their chunks with them
    back, _, _ = load_checkpoint(run.checkpoint("iter_0002"))
    again = back.agent.algorithm.replay_buffer
    for column in columns:
        np.testing.assert_array_equal(getattr(again, column), getattr(buffer, column))
    assert not again.rewards.any() and buffer.rewards[:buffer.pos].any()  # not stored: relabelled when read
    for agent in (back.agent, loop.agent):  # every agent phase starts by relabelling
        agent.train(0)
    np.testing.assert_array_equal(again.rewards, buffer.rewards)


def test_mujoco_models_are_built_again_not_saved_and_a_loaded_env_steps_on_exactly(tmp_path):
    pytest.importorskip("metaworld")
    cfg = composed("train", ["debug=fast", "env=metaworld", "agent=sac", "agent.learning_starts=10000",
                             "env.n_envs=2", "agent.buffer_size=10000", "reward_net.use_action=true",
                             "total_timesteps=400", "num_rounds=2", "total_comparisons=4",
                             "keep_checkpoints=2"])  # no gradient steps: the test is about the envs
    run = RunFolder(tmp_path)
    loop = compose(cfg, run.path)
    checkpointer = Checkpointer(run, RunRecord(cfg, []), every=1, keep=2)
    checkpointer(loop, loop.round())
    # Six copies (training and sampling, two each) of a 22 MB model: none is saved (the config builds them again,
    # and Meta-World's placements are a few arrays), only each simulation's integration state.
    state = sum((run.checkpoint("iter_0000") / name).stat().st_size for name in ("resume.json", "arrays.npz"))
    chunks = sum(p.stat().st_size for p in run.chunks_dir.iterdir())
    assert state < 5e6 and chunks < 5e6, (state, chunks)
    checkpointer(loop, loop.round())
    back, _, _ = load_checkpoint(run.checkpoint("iter_0001"))
    actions = np.zeros((2, *loop.source.venv.action_space.shape), np.float32) + 0.3
    for venv in (loop.source.venv, back.source.venv):  # both step on from where the checkpoint left them
        venv.step_async(actions)
    np.testing.assert_array_equal(loop.source.venv.step_wait()[0], back.source.venv.step_wait()[0])


def test_an_asynchronous_loop_pays_its_agent_a_copy_of_the_reward_that_a_checkpoint_keeps_apart(tmp_path):
    cfg = composed("train", ["debug=fast", "reward_learning=asynchronous", "num_rounds=4", "keep_checkpoints=1"])
    run = RunFolder(tmp_path)
    loop = compose(cfg, run.path)
    checkpointer = Checkpointer(run, RunRecord(cfg, []), every=1, keep=1)
    for _ in range(2):
        checkpointer(loop, loop.round())
    back, _, _ = load_checkpoint(run.checkpoint("iter_0001"))
    for each in (loop, back):
        learning = each.reward_learning
        paid = each.agent.venv.reward  # what the agent's env copies pay it
        # The agent reads a copy while the trainer's net trains; the round's end made them one state.
        assert paid is learning.published and paid is not learning.reward_trainer.net
        trained = learning.reward_trainer.net.state_dict()
        assert all(np.array_equal(value, trained[key]) for key, value in paid.state_dict().items())


@pytest.mark.parametrize("env", [["env=dmc"], ["env=gym", "env.id=HalfCheetah-v5"]])
def test_a_mujoco_simulation_loaded_into_a_fresh_copy_steps_on_exactly(env):
    # dm_control's step reads what the last one computed from the state, gymnasium's starts from the solver's warm
    # start: the loaded simulation must hold both as the saved one did.
    made = build(composed("train", ["debug=fast", *env]).env)
    venv = made.make(0)
    venv.reset()
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (50, venv.num_envs, *venv.action_space.shape)).astype(np.float32)
    for act in actions[:25]:
        venv.step(act)
    loaded = loaded_into(venv, made.make(7))
    for act in actions[25:]:
        (obs, rewards, *_), (obs_again, rewards_again, *_) = venv.step(act), loaded.step(act)
        np.testing.assert_array_equal(obs_again, obs)
        np.testing.assert_array_equal(rewards_again, rewards)
