"""Preference Transformer: what it learns that a Markovian reward cannot, how a dataset is relabelled, refusals."""

import numpy as np
import pytest
import torch
from helpers import random_pairs, run_cli, spaces

from rlhp.data import PreferenceDataset
from rlhp.errors import ArgumentError
from rlhp.rewards import PreferenceTransformer, RewardNet
from rlhp.training import RewardTrainer


def last_step_labels(n: int, seed: int) -> PreferenceDataset:
    """Pairs labelled by where each segment ends (its last observation), not by any sum over its steps."""
    pairs = random_pairs(n, length=8, seed=seed)
    last = pairs.frames[:, :, -2, 0]  # the last step's observation
    dataset = PreferenceDataset()
    dataset.push(pairs, (last[:, 0] > last[:, 1]).astype(np.float32), np.arange(n))
    return dataset


def held_out_accuracy(net: RewardNet, dataset: PreferenceDataset) -> float:
    with torch.no_grad():
        returns = net.returns(net.encode(*dataset.pairs.tensors()), 1.0)[0]
    return float(((returns[:, 0] > returns[:, 1]).numpy() == (dataset.labels > 0.5)).mean())


def test_it_learns_a_preference_for_how_a_segment_ends_which_a_sum_of_step_rewards_cannot():
    accuracy = {}
    for name, net in (("transformer", PreferenceTransformer(*spaces(), embed_dim=32, attention_dim=16, dropout=0.0)),
                      ("markovian", RewardNet(*spaces(), hidden_sizes=[64, 64]))):
        torch.manual_seed(0)
        RewardTrainer(net, np.random.default_rng(0), epochs=60, lr=3e-3).train(last_step_labels(400, seed=0))
        accuracy[name] = held_out_accuracy(net, last_step_labels(300, seed=1))
    # Random steps of equal law: a sum over them cannot tell which came last.
    assert accuracy["transformer"] > 0.85 and accuracy["markovian"] < 0.7, accuracy


def test_a_relabelled_step_reads_its_own_episode_and_at_most_context_steps():
    torch.manual_seed(0)
    net = PreferenceTransformer(*spaces(obs_dim=3), context=4)
    rng = np.random.default_rng(0)
    obs, acts = rng.normal(size=(30, 3)).astype(np.float32), rng.integers(0, 2, 30)
    starts = np.array([0, 10])

    def relabelled(obs: np.ndarray) -> np.ndarray:
        return net.relabel(obs, acts, obs, np.zeros(30, bool), np.zeros(30, np.float32), starts)

    before = relabelled(obs)
    for row, reads_it in ((12, range(12, 16)), (9, range(9, 10))):  # the second episode starts at row 10
        changed = obs.copy()
        changed[row] += 1.0
        moved = np.flatnonzero(~np.isclose(relabelled(changed), before, atol=1e-6))
        assert moved.tolist() == list(reads_it), (row, moved)
    # Each episode alone gives its steps the same rewards as laid end to end.
    alone = net.relabel(obs[10:], acts[10:], obs[10:], np.zeros(20, bool), np.zeros(20, np.float32), np.array([0]))
    np.testing.assert_allclose(alone, before[10:], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("options", "argument", "says"), [
    ({"heads": 3}, "heads", "must divide embed_dim"),
    ({"context": 30, "max_length": 20}, "context", "must not exceed max_length"),
    ({"dropout": 1.0}, "dropout", "[0, 1)"),
    ({"layers": 0}, "layers", "must lie in"),
])
def test_options_it_cannot_build_with_are_refused_by_name(options, argument, says):
    with pytest.raises(ArgumentError) as err:
        PreferenceTransformer(*spaces(), **options)
    assert err.value.argument == argument and says in str(err.value)


@pytest.mark.parametrize(("overrides", "says"), [
    (["agent=sac"], "cannot be paid it step by step"),
    (["reward_net.max_length=8", "reward_net.context=4", "fragment_length=9"],
     "`reward_net.max_length` (8) is shorter than the fragments (9 steps)"),
])
def test_a_run_it_cannot_serve_is_refused_in_one_line(tmp_path, overrides, says):
    proc = run_cli("rlhp-train", "env=gym", "env.id=Pendulum-v1", "debug=fast", "logger=none",
                   "reward_net=preference_transformer", *overrides, f"hydra.run.dir={tmp_path / 'run'}",
                   cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert says in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
