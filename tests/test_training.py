import numpy as np
import pytest
import torch
from helpers import random_pairs, spaces

from rlhp.data import PreferenceDataset
from rlhp.feedback import SyntheticGatherer
from rlhp.rewards import RewardNet
from rlhp.training import RewardTrainer


def labelled(n: int, seed: int = 0) -> PreferenceDataset:
    pairs = random_pairs(n, length=6, seed=seed)
    gatherer = SyntheticGatherer(np.random.default_rng(seed), temperature=0, sample=False)
    ds = PreferenceDataset()
    ds.push(pairs, gatherer.probabilities(pairs).astype(np.float32), np.arange(n))
    return ds


@pytest.mark.parametrize("members", [1, 3])
def test_learns_the_true_reward_ordering(members):
    torch.manual_seed(0)
    net = RewardNet(*spaces(), members=members)
    trainer = RewardTrainer(net, np.random.default_rng(0), epochs=30, lr=3e-3)
    first = trainer.train(labelled(300), epoch_multiplier=1 / 30)
    final = trainer.train(labelled(300))
    assert final["reward_accuracy"] > 0.95 > first["reward_accuracy"]
    assert final["reward_loss"] < first["reward_loss"]
    assert final["gt_reward_accuracy"] == 1.0
    held_out = random_pairs(200, length=6, seed=1)
    with torch.no_grad():
        corr = np.corrcoef(net(*held_out.tensors()).mean(0).numpy().ravel(), held_out.rews.ravel())[0, 1]
    assert corr > 0.9


def test_gradient_accumulation_matches_full_batch():
    nets = []
    for minibatch in (None, 8):
        torch.manual_seed(0)
        net = RewardNet(*spaces())
        # One batch of all 64 pairs: one optimiser step, whose gradients stay on the parameters.
        RewardTrainer(net, np.random.default_rng(0), batch_size=64, minibatch_size=minibatch, epochs=1
                      ).train(labelled(64))
        nets.append(net)
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7)


def test_batch_must_be_multiple_of_minibatch():
    with pytest.raises(ValueError, match="multiple"):
        RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), batch_size=32, minibatch_size=5)


def test_validation_split_errors_when_a_side_is_empty_and_adapts_weight_decay():
    trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), val_split=0.1)
    with pytest.raises(ValueError, match="val_split=0.1 leaves an empty validation set with 4 pairs"):
        trainer.train(labelled(4))
    trainer = RewardTrainer(RewardNet(*spaces(), hidden_sizes=[256, 256]), np.random.default_rng(0),
                            val_split=0.5, weight_decay=1e-3, weight_decay_adapt=2.0, epochs=20)
    metrics = trainer.train(labelled(40))
    assert {"val_loss", "val_accuracy"} <= metrics.keys()
    assert metrics["weight_decay"] != 1e-3  # over-fitting 20 pairs with a wide net moves it
