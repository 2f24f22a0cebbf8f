"""The save contract: a checkpoint is the loop pickled whole, large arrays in shared chunks written once,
a replay buffer's rewards not at all (they are relabelled before they are read)."""

import sys
import warnings

import numpy as np
import pytest
from helpers import composed
from omegaconf import OmegaConf

from rlhp.experiment.callbacks import Checkpointer
from rlhp.experiment.checkpoints import CHUNK, RunRecord, load_checkpoint, save_checkpoint
from rlhp.experiment.compose import compose
from rlhp.runs import RunFolder

SAC = ["debug=fast", "env=gym", "env.id=Pendulum-v1", "agent=sac", "agent.learning_starts=100",
       "agent.buffer_size=100000", "++agent.policy_kwargs.net_arch=[32,32]", "reward_net.use_action=true",
       "keep_checkpoints=1"]  # small nets: what a round writes is then mostly the buffer's


def test_a_round_writes_only_the_chunks_its_new_transitions_touch_and_loading_restores_the_buffer(tmp_path):
    cfg = composed("train", SAC)
    run = RunFolder(tmp_path)
    loop = compose(cfg, run.path)
    buffer = loop.source.agent.algorithm.replay_buffer
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
    again = back.source.agent.algorithm.replay_buffer
    for column in columns:
        np.testing.assert_array_equal(getattr(again, column), getattr(buffer, column))
    assert not again.rewards.any() and buffer.rewards[:buffer.pos].any()  # not stored: relabelled when read
    for agent in (back.source.agent, loop.source.agent):  # every agent phase starts by relabelling
        agent.train(0)
    np.testing.assert_array_equal(again.rewards, buffer.rewards)


def test_mujoco_models_go_to_the_chunks_once_and_a_loaded_env_steps_on_exactly(tmp_path):
    pytest.importorskip("metaworld")
    cfg = composed("train", ["debug=fast", "env=metaworld", "agent=sac", "agent.learning_starts=10000",
                             "env.n_envs=2", "agent.buffer_size=10000", "reward_net.use_action=true",
                             "total_timesteps=400", "num_rounds=2", "total_comparisons=4",
                             "keep_checkpoints=2"])  # no gradient steps: the test is about the envs
    run = RunFolder(tmp_path)
    loop = compose(cfg, run.path)
    checkpointer = Checkpointer(run, RunRecord(cfg, []), every=1, keep=2)
    checkpointer(loop, loop.round())
    # Six copies (training and sampling, two each; the run's own env keeps none) of a 22 MB model and its data,
    # each data with a model of its own: stored once, and the pickle holds none of them.
    pickled = (run.checkpoint("iter_0000") / "resume.pt").stat().st_size
    chunks = sum(p.stat().st_size for p in run.chunks_dir.iterdir())
    assert pickled < 10e6 and chunks < 80e6, (pickled, chunks)
    before = set(run.chunks_dir.iterdir())
    checkpointer(loop, loop.round())
    assert sum(p.stat().st_size for p in set(run.chunks_dir.iterdir()) - before) < 20e6  # the models are there
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
        paid = each.source.agent.venv.reward  # what the agent's env copies pay it
        # The agent reads a copy while the trainer's net trains; the round's end made them one state.
        assert paid is learning.published and paid is not learning.reward_trainer.net
        trained = learning.reward_trainer.net.state_dict()
        assert all(np.array_equal(value, trained[key]) for key, value in paid.state_dict().items())


LOUD_LIBRARY = """
import warnings

warnings.simplefilter("default")  # as dm_control's composer does at its import
warnings.warn("a library imported after it is deprecated", DeprecationWarning)
warnings.warn("worth reading", UserWarning)


class Loop:
    def save(self, folder):
        return {}

    def derived_arrays(self):
        return []
"""


def test_loading_a_checkpoint_leaves_the_warnings_shown_as_they_were_whatever_its_parts_import(tmp_path,
                                                                                              monkeypatch):
    (tmp_path / "loud_library.py").write_text(LOUD_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True):  # its first import, here: warnings not under test
        from loud_library import Loop
    run = RunFolder(tmp_path / "run")
    path = save_checkpoint(run, Loop(), "iter_0000", RunRecord(OmegaConf.create({"seed": 0}), []))
    monkeypatch.delitem(sys.modules, "loud_library")  # a new process imports it as it unpickles the loop
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("ignore", DeprecationWarning)  # Python's default outside __main__
        before = list(warnings.filters)
        loop, _, _ = load_checkpoint(path)
        assert warnings.filters == before
    assert type(loop).__module__ == "loud_library" and "loud_library" in sys.modules
    assert [(w.category, str(w.message)) for w in shown] == [(UserWarning, "worth reading")]
