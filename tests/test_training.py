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


class RecordingTrainer(RewardTrainer):
    """Records the pair indices of every training (2-D: members x pairs) and validation (1-D) pass."""

    def _returns(self, inputs, idx):
        self.seen = [*getattr(self, "seen", []), idx.clone()]
        return super()._returns(inputs, idx)


def test_each_member_trains_on_its_own_resample_of_the_training_split():
    trainer = RecordingTrainer(RewardNet(*spaces(), members=4), np.random.default_rng(0), val_split=0.25,
                               batch_size=100, epochs=1)
    trainer.train(labelled(80))
    train_idx = torch.cat([i for i in trainer.seen if i.dim() == 2], dim=1)  # (members, 60)
    val_idx = torch.cat([i for i in trainer.seen if i.dim() == 1])
    assert train_idx.shape == (4, 60) and len(val_idx) == 20 and len(set(val_idx.tolist())) == 20
    used = set(train_idx.unique().tolist())
    assert not used & set(val_idx.tolist()) and used <= set(range(80)) - set(val_idx.tolist())
    members = [sorted(row.tolist()) for row in train_idx]
    assert all(a != b for i, a in enumerate(members) for b in members[i + 1:])  # each its own resample
    assert all(len(set(row)) < 60 for row in members)  # with replacement


def test_summing_member_losses_gives_each_member_its_own_gradient():
    torch.manual_seed(0)
    net = RewardNet(*spaces(), members=3)
    trainer = RewardTrainer(net, np.random.default_rng(0))
    ds = labelled(12)
    inputs, labels = ds.pairs.tensors(), torch.as_tensor(ds.labels)
    idx = torch.as_tensor(np.random.default_rng(1).integers(0, 12, (3, 8)))

    def grads(member: int | None) -> list[torch.Tensor]:
        net.zero_grad()
        loss, _ = trainer.losses(trainer._returns(inputs, idx), labels[idx])
        (loss.sum() if member is None else loss[member].sum()).div(8).backward()
        return [p.grad.clone() for p in net.parameters()]

    together = grads(None)
    for m in range(3):
        alone = grads(m)
        for both, own in zip(together, alone):
            torch.testing.assert_close(both[m], own[m])  # no cross-member terms, no 1/members scaling
