import math

import numpy as np
import pytest
import torch
from helpers import random_pairs, spaces

from rlhp.data import PreferenceDataset
from rlhp.errors import ArgumentError
from rlhp.feedback import SyntheticGatherer
from rlhp.rewards import RewardInputs, RewardNet
from rlhp.training import (
    AllLabels,
    DropContradicted,
    Judgement,
    KeepAll,
    NoPseudoLabels,
    PseudoLabels,
    RewardTrainer,
    TemporalCrop,
    TrustAndFlip,
    WholeFragments,
    summarise,
)


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
    for minibatch in (None, 8):  # None: the whole batch at once
        torch.manual_seed(0)
        net = RewardNet(*spaces())
        # Two batches of 32 pairs: the second step's gradients stay on the parameters (a batch that does not
        # start at pair 0 weighs its minibatches by its own size).
        RewardTrainer(net, np.random.default_rng(0), batch_size=32, minibatch_size=minibatch, epochs=1
                      ).train(labelled(64))
        nets.append(net)
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shaping_gamma", [None, 0.99])
def test_encoding_once_trains_exactly_as_encoding_each_batch(monkeypatch, shaping_gamma):
    nets = []
    for limit in (RewardTrainer.ENCODE_ONCE_BYTES, 0):  # 0: too big to hold, as large images are
        monkeypatch.setattr(RewardTrainer, "ENCODE_ONCE_BYTES", limit)
        torch.manual_seed(0)
        net = RewardNet(*spaces(), members=3, shaping_gamma=shaping_gamma)
        RewardTrainer(net, np.random.default_rng(0), epochs=2, val_split=0.2).train(labelled(64))
        nets.append(net)
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(a, b)


def test_batch_must_be_multiple_of_minibatch():
    with pytest.raises(ValueError, match="multiple"):
        RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), batch_size=32, minibatch_size=5)


def test_validation_split_errors_when_a_side_is_empty():
    for split, side in ((0.1, "validation"), (0.9, "training")):
        trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), val_split=split)
        message = (f"val_split ({split}) leaves an empty {side} set with 4 labelled pairs; ask more comparisons in "
                   "the first round or change val_split")
        with pytest.raises(ArgumentError) as err:
            trainer.train(labelled(4))
        assert str(err.value) == message
        with pytest.raises(ArgumentError) as err:
            trainer.check_first_labels(4)
        assert str(err.value) == message
        trainer.check_first_labels(40)


def test_weight_decay_moves_by_its_factor_towards_less_overfitting_and_stays_bounded():
    trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), val_split=0.5, weight_decay=1e-3,
                            weight_decay_adapt=2.0, adapt_tolerance=0.1)

    def decay():
        return trainer.optimizer.param_groups[0]["weight_decay"]

    trainer.adapt_weight_decay(1.05)
    assert decay() == 1e-3  # within tolerance: unchanged
    trainer.adapt_weight_decay(1.5)
    assert decay() == 2e-3  # validation loss above training loss: more decay
    trainer.adapt_weight_decay(0.5)
    trainer.adapt_weight_decay(0.5)
    assert decay() == 5e-4
    for _ in range(30):
        trainer.adapt_weight_decay(10.0)
    assert decay() == pytest.approx(1e-3 * 100)  # 1e-3 would have grown to 537 unbounded
    for _ in range(60):
        trainer.adapt_weight_decay(0.01)
    assert decay() == pytest.approx(1e-3 / 100)


def test_a_wide_net_overfitting_few_pairs_raises_its_weight_decay_to_the_bound():
    trainer = RewardTrainer(RewardNet(*spaces(), hidden_sizes=[256, 256]), np.random.default_rng(0),
                            val_split=0.5, weight_decay=1e-3, weight_decay_adapt=2.0, epochs=20)
    metrics = trainer.train(labelled(40))
    # Unbounded, 20 over-fitting epochs took 1e-3 to 131.
    assert metrics["val_loss"] > 10 * metrics["reward_loss"] and metrics["weight_decay"] == pytest.approx(0.1)


@pytest.mark.parametrize("kwargs", [{"weight_decay": 0.0, "val_split": 0.2}, {"weight_decay": 1e-3, "val_split": 0.0},
                                    {"weight_decay": 1e-3, "val_split": 0.2, "weight_decay_adapt": 1.0}])
def test_weight_decay_adaptation_that_could_never_act_is_refused(kwargs):
    with pytest.raises(ValueError, match="weight_decay_adapt needs"):
        RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), **{"weight_decay_adapt": 2.0, **kwargs})


def test_accuracy_counts_only_pairs_with_a_preference_and_ties_report_their_gap():
    trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0))
    returns = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0], [3.0, 0.0], [0.0, 0.5]])
    labels = torch.tensor([1.0, 1.0, 0.5, 0.5, 0.0])
    metrics = summarise(trainer.scores(returns, labels).totals(), 5, "x_")
    assert metrics["x_accuracy"] == pytest.approx(2 / 3)  # pairs 0 and 4 right, 1 wrong; the ties are not counted
    assert metrics["x_tie_gap"] == pytest.approx((0.0 + torch.sigmoid(torch.tensor(3.0)).item() - 0.5) / 2)
    only_ties = summarise(trainer.scores(returns[2:4], labels[2:4]).totals(), 2, "x_")
    assert "x_accuracy" not in only_ties and "x_tie_gap" in only_ties


class RecordingTrainer(RewardTrainer):
    """Records the pair indices of every training (2-D: members x pairs) and validation (1-D) pass, and
    whether the net was in training mode for it."""

    def _returns(self, inputs, idx):
        self.seen = [*getattr(self, "seen", []), idx.clone()]
        self.modes = [*getattr(self, "modes", []), self.net.training]
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
    # Dropout and batch norm train only on training passes; validation scores in eval mode.
    assert [m for m, i in zip(trainer.modes, trainer.seen, strict=True) if i.dim() == 2] == [True] * 1
    assert not any(m for m, i in zip(trainer.modes, trainer.seen, strict=True) if i.dim() == 1)


@pytest.mark.parametrize("members", [1, 2])
def test_one_member_trains_on_the_whole_training_split_and_two_on_resamples(members):
    trainer = RecordingTrainer(RewardNet(*spaces(), members=members), np.random.default_rng(0), batch_size=100,
                               epochs=1)
    trainer.train(labelled(60))
    (idx,) = trainer.seen
    assert idx.shape == (members, 60)
    distinct = [len(set(row.tolist())) for row in idx]
    assert distinct == ([60] if members == 1 else [d for d in distinct if d < 60])


def test_resamples_draw_from_every_training_pair():
    # 50 members x 20 draws from 20 pairs: a pair left out of every resample (P = 0.95 ** 1000) is a rule broken.
    trainer = RecordingTrainer(RewardNet(*spaces(), members=50), np.random.default_rng(0), batch_size=100, epochs=1)
    trainer.train(labelled(20))
    (idx,) = trainer.seen
    assert set(idx.unique().tolist()) == set(range(20))


def test_each_member_gets_the_gradient_it_would_get_trained_alone():
    torch.manual_seed(0)
    ensemble = RewardNet(*spaces(), members=3, normalize_input=False)
    start = {k: v.clone() for k, v in ensemble.state_dict().items()}
    trainer = RecordingTrainer(ensemble, np.random.default_rng(0), batch_size=64, epochs=1)
    ds = labelled(40)
    trainer.train(ds)  # one batch: one step, whose gradients stay on the parameters
    (idx,) = trainer.seen
    for m in range(3):
        alone = RewardNet(*spaces(), members=1, normalize_input=False)
        alone.load_state_dict({k: v[m:m + 1] if k.startswith("body.") else v for k, v in start.items()})
        solo = RewardTrainer(alone, np.random.default_rng(0))
        returns = solo._returns(solo._encoder(ds.pairs.tensors()), idx[m:m + 1])
        (solo.loss(returns, torch.as_tensor(ds.labels)[idx[m]]).sum() / idx.shape[1]).backward()
        for (name, together), own in zip(ensemble.named_parameters(), alone.parameters()):
            torch.testing.assert_close(together.grad[m], own.grad[0], msg=name)


@pytest.mark.parametrize(("kwargs", "name", "says"), [
    ({"batch_size": 0}, "batch_size", "at least 1"), ({"epochs": 0}, "epochs", "at least 1"),
    ({"minibatch_size": 0}, "minibatch_size", "at least 1"),
    ({"batch_size": 32, "minibatch_size": 64}, "minibatch_size", "(64) must not exceed batch_size (32)"),
    ({"batch_size": 30, "minibatch_size": 8}, "batch_size", "(30) must be a multiple of minibatch_size (8); "
                                                            "set one so that it divides the other, e.g. batch_size=24"),
    ({"batch_size": 12, "minibatch_size": 8}, "batch_size", "(12) must be a multiple of minibatch_size (8); "
                                                            "set one so that it divides the other, e.g. batch_size=8"),
    ({"lr": 0.0}, "lr", "positive finite"), ({"lr": math.inf}, "lr", "positive finite"),
    ({"weight_decay": -1.0}, "weight_decay", "non-negative finite"),
    ({"weight_decay": math.inf}, "weight_decay", "non-negative finite"),
    ({"val_split": 1.0}, "val_split", "[0, 1)"), ({"val_split": 1.5}, "val_split", "[0, 1)"),
    ({"weight_decay_adapt": 1.0, "weight_decay": 0.1, "val_split": 0.2}, "weight_decay_adapt", "needs a factor > 1"),
    ({"weight_decay_adapt": 2.0, "val_split": 0.2}, "weight_decay_adapt", "any multiple of 0 stays 0"),
])
def test_a_trainer_refuses_what_it_cannot_train_with_by_name(kwargs, name, says):
    with pytest.raises(ArgumentError) as err:
        RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), **kwargs)
    assert err.value.argument == name and says in err.value.problem


def test_a_trainers_defaults_and_the_ends_of_its_ranges():
    trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), batch_size=16, minibatch_size=16,
                            lr=0.02)
    group = trainer.optimizer.param_groups[0]
    assert group["lr"] == 0.02 and group["weight_decay"] == 0.0 and group["fused"]
    default = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0))
    assert (default.epochs, default.adapt_tolerance, default.threshold, default.minibatch_size) == (3, 0.1, 50.0, 32)


def test_the_trainers_clip_counts_in_its_loss_and_a_zero_difference_ranks_neither_fragment_first():
    trainer = RewardTrainer(RewardNet(*spaces()), np.random.default_rng(0), threshold=2.0)
    returns, labels = torch.tensor([[10.0, 0.0], [1.0, 1.0]]), torch.tensor([0.0, 1.0])
    torch.testing.assert_close(trainer.loss(returns, labels)[0], torch.tensor(2.0 + math.log1p(math.exp(-2.0))))
    scores = trainer.scores(returns, labels)
    assert scores.correct.tolist() == [0.0, 0.0]  # the first ranks the wrong fragment; the second neither
    ties = trainer.scores(torch.tensor([[5.0, 0.0]]), torch.tensor([0.5]))  # the gap under the trainer's clip
    assert ties.tie_gap.item() == pytest.approx(1 / (1 + math.exp(-2.0)) - 0.5)
    p = 1 / (1 + math.exp(-2.0))
    assert summarise(scores.totals(), 2, "x_")["x_loss"] == pytest.approx(
        (-math.log(1 - p) + math.log(2)) / 2, rel=1e-6)  # the mean over pairs


def test_a_later_batch_weighs_its_pairs_as_the_first_does():
    torch.manual_seed(0)
    net = RewardNet(*spaces(), normalize_input=False)
    start = {k: v.clone() for k, v in net.state_dict().items()}
    # A learning rate too small to move the weights: the last batch's gradients are taken at the start's.
    trainer = RecordingTrainer(net, np.random.default_rng(0), batch_size=32, minibatch_size=8, epochs=1, lr=1e-12)
    ds = labelled(64)
    trainer.train(ds)
    last = torch.cat([i for i in trainer.seen if i.dim() == 2][-4:], dim=1)  # the second batch, in 4 minibatches
    assert last.shape == (1, 32)
    fresh = RewardNet(*spaces(), normalize_input=False)
    fresh.load_state_dict(start)
    solo = RewardTrainer(fresh, np.random.default_rng(0))
    returns = solo._returns(solo._encoder(ds.pairs.tensors()), last)
    (solo.loss(returns, torch.as_tensor(ds.labels)[last]).sum() / 32).backward()  # the batch's mean loss
    for (name, trained), own in zip(net.named_parameters(), fresh.parameters()):
        torch.testing.assert_close(trained.grad, own.grad, rtol=1e-4, atol=1e-8, msg=name)


def flipped(n: int, share: float, seed: int = 0) -> tuple[PreferenceDataset, np.ndarray]:
    """:func:`labelled` pairs with ``share`` of their labels flipped, and which."""
    ds = labelled(n, seed)
    wrong = np.random.default_rng(seed).permutation(n)[:round(share * n)]
    ds.labels[wrong] = 1 - ds.labels[wrong]
    return ds, np.isin(np.arange(n), wrong)


def held_out_accuracy(net: RewardNet) -> float:
    """How often the net ranks fresh pairs as their true returns do."""
    held = random_pairs(500, length=6, seed=5)
    with torch.no_grad():
        returns = net(*held.tensors()).mean(0).sum(-1)
    true = held.rews.sum(-1)
    return float(((returns[:, 0] > returns[:, 1]).numpy() == (true[:, 0] > true[:, 1])).mean())


class LastMask:
    """A label filter that remembers the mask and the members' resamples of its latest epoch."""

    def __init__(self, inner) -> None:
        self.inner, self.judges = inner, inner.judges

    def judge(self, first_probs, labels, trained_on):
        self.judgement, self.trained_on = self.inner.judge(first_probs, labels, trained_on), trained_on
        self.mask = self.judgement.keep
        return self.judgement

    def metrics(self, judgement):
        return self.inner.metrics(judgement)


def kept(label_filter, label_probs, labels, trained_on) -> torch.Tensor:
    """The mask a filter gives members whose probabilities of each pair's label are ``label_probs``."""
    first = torch.where(labels == 0, 1 - label_probs, label_probs)  # the same for label 1; a tie's is 1/2 either way
    judgement = label_filter.judge(lambda: first, labels, trained_on)
    assert not judgement.flip.any()
    return judgement.keep


def test_dropping_contradicted_labels_leaves_out_the_planted_wrong_ones():
    ds, wrong = flipped(300, 0.1)
    nets, dropped = {}, {}
    filters = {"all": KeepAll(), "every member": DropContradicted(confidence=0.9, out_of_bag=False),
               "out of bag": DropContradicted(confidence=0.9)}
    for name, inner in filters.items():
        torch.manual_seed(0)
        nets[name] = RewardNet(*spaces(), members=3)
        label_filter = LastMask(inner)
        metrics = RewardTrainer(nets[name], np.random.default_rng(0), epochs=30, label_filter=label_filter).train(ds)
        dropped[name] = ~label_filter.mask.numpy().astype(bool)
        assert metrics.get("reward_labels_dropped", 0) == dropped[name].sum()
        # The teacher answered from the sign of the true returns, so the flipped labels are the ones it contradicts.
        assert metrics.get("gt_labels_dropped_wrong", -1) == ((dropped[name] & wrong).sum() if inner.judges else -1)
        assert metrics.get("gt_labels_wrong", -1) == (wrong.sum() if inner.judges else -1)
    assert not dropped["all"].any()
    # The flips the true returns contradict clearly are left out (the rest sit near ties), and no right label is;
    # judges that never trained on a pair catch more of them, for at most one right label of 270 (near a tie).
    assert (dropped["every member"] & wrong).sum() >= 2 / 3 * wrong.sum()
    assert (dropped["every member"] & ~wrong).sum() == 0
    assert (dropped["out of bag"] & wrong).sum() > (dropped["every member"] & wrong).sum()
    assert (dropped["out of bag"] & ~wrong).sum() <= 1
    # Left out, they are not learned: fresh pairs are ranked better than by the net that believed them.
    for name in ("every member", "out of bag"):
        assert held_out_accuracy(nets[name]) > held_out_accuracy(nets["all"]) + 0.03


def test_each_member_s_resample_is_what_the_filter_is_told_it_trained_on():
    label_filter = LastMask(DropContradicted())
    trainer = RewardTrainer(RewardNet(*spaces(), members=4), np.random.default_rng(0), epochs=1, val_split=0.25,
                            label_filter=label_filter)
    seen = []
    trainer._returns = lambda inputs, idx, real=trainer._returns: seen.append(idx) or real(inputs, idx)
    trainer.train(labelled(80))
    trained = torch.cat([idx for idx in seen if idx.dim() == 2], dim=1)  # (members, pairs) each member's batches
    told = label_filter.trained_on
    assert told.shape == (4, 80) and told.dtype == torch.bool
    for member in range(4):
        assert set(trained[member].tolist()) == set(told[member].nonzero().ravel().tolist())
    assert 0.5 < told.float().mean() * 80 / 60 < 0.75  # a bootstrap of 60 training pairs holds about 63% of them
    validation = ~told.any(0)
    assert validation.sum() >= 20  # the 20 validation pairs, never trained on


def test_a_pair_is_judged_by_the_members_that_did_not_train_on_it():
    # Two members; pair 0's wrong label memorised by member 0 and contradicted by member 1, which never saw it.
    probs = torch.tensor([[0.99, 0.99, 0.9, 0.20], [0.10, 0.30, 0.9, 0.20]])
    labels = torch.tensor([1.0, 1.0, 0.0, 1.0])
    trained_on = torch.tensor([[True, True, True, True], [False, True, True, False]])
    masks = {oob: kept(DropContradicted(max_fraction=1.0, out_of_bag=oob), probs, labels, trained_on).tolist()
             for oob in (True, False)}
    # Out of bag: pair 0 by member 1 alone; pairs 1 and 2, held by both, by both (mean 0.64 and 0.9); pair 3 by 1.
    assert masks[True] == [0.0, 1.0, 1.0, 0.0]
    assert masks[False] == [1.0, 1.0, 1.0, 0.0]  # every member: pair 0's mean is 0.545


def test_a_label_filter_refuses_confidence_outside_its_range_and_keeps_ties():
    for bad in (0.5, 1.0):
        with pytest.raises(ArgumentError, match=r"^confidence must lie in \(0.5, 1\)"):
            DropContradicted(confidence=bad)
    # Members' probabilities of each pair's label, (members, pairs): the mean decides, against 1 - 0.85.
    probs = torch.tensor([[0.10, 0.00, 0.15, 0.0], [0.15, 0.40, 0.20, 0.0]])
    labels = torch.tensor([1.0, 0.0, 1.0, 0.5])  # the last a tie: never judged
    keep = kept(DropContradicted(confidence=0.85, max_fraction=1.0), probs, labels, probs > 2)
    assert keep.tolist() == [0.0, 1.0, 1.0, 1.0] and keep.dtype == labels.dtype
    everything = KeepAll().judge(lambda: pytest.fail("KeepAll scores nothing"), labels, probs > 2)
    assert everything.keep.tolist() == [1.0] * 4 and not everything.flip.any()
    verdict = Judgement(keep, torch.zeros(4, dtype=torch.bool))
    assert KeepAll().metrics(verdict) == {} and DropContradicted().metrics(verdict) == {"reward_labels_dropped": 1.0}
    # A probability of exactly 1 - confidence is not under it: that label is kept.
    at_the_line = torch.tensor([[0.25, 0.2499]])
    assert kept(DropContradicted(confidence=0.75, max_fraction=1.0), at_the_line, labels[:2],
                at_the_line > 2).tolist() == [1.0, 0.0]


def test_a_label_filter_leaves_out_at_most_its_share_the_most_contradicted_first():
    for bad in (0.0, 1.5):
        with pytest.raises(ArgumentError, match=r"^max_fraction must lie in \(0, 1\]"):
            DropContradicted(max_fraction=bad)
    # Ten pairs, one member: five contradicted (under 0.4), a tie that is never judged.
    probs = torch.tensor([[0.30, 0.90, 0.05, 0.35, 0.20, 0.70, 0.00, 0.10, 0.60, 0.99]])
    labels = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5, 1.0, 0.0, 1.0])
    dropped = {share: (1 - kept(DropContradicted(0.6, max_fraction=share), probs, labels, probs > 2)).nonzero()
                  .ravel().tolist()
               for share in (1.0, 0.3, 0.25, 0.1, 0.05)}
    assert dropped == {1.0: [0, 2, 3, 4, 7], 0.3: [2, 4, 7], 0.25: [2, 7], 0.1: [2], 0.05: []}


def test_rime_trusts_under_its_lower_bound_flips_the_ruled_out_and_leaves_out_the_rest():
    rime = TrustAndFlip(alpha=0.5, beta_start=3.0, beta_end=1.0, decay_epochs=4, flip_below=0.01, rate=0.1)
    labels = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.0], dtype=torch.float64)
    # Two members' probability that the first fragment is preferred; the mean judges.
    first = torch.tensor([[0.9, 0.6, 0.2, 0.3, 1e-5, 0.999], [0.7, 0.6, 0.4, 0.1, 1e-5, 0.997]], dtype=torch.float64)
    p = first.mean(0)
    tie = 0.5 * math.log(0.5 / 1e-5) + 0.5 * math.log(0.5 / (1 - 1e-5))  # KL((1/2, 1/2) || (p, 1 - p))
    kl = torch.tensor([-math.log(0.8), -math.log(0.6), -math.log(0.7), -math.log(0.2), tie, -math.log(0.002)],
                      dtype=torch.float64)
    # The first epoch trusts every pair (rho is 0) and flips the label the members give 0.2% (under 1%); the tie,
    # which the members rule out as surely (a divergence over -ln 0.01), is never flipped.
    assert tie > -math.log(0.01)
    verdict = rime.judge(lambda: first, labels, first > 2)
    assert verdict.keep.tolist() == [1.0] * 6 and verdict.flip.tolist() == [False] * 5 + [True]
    assert verdict.labels(labels).tolist() == [1.0, 1.0, 0.0, 1.0, 0.5, 1.0]
    assert rime.rho == pytest.approx(0.1 * kl.max().item())  # moved a tenth of the way from 0
    assert rime.divergences.var == pytest.approx(kl.var(unbiased=False).item())
    assert rime.metrics(verdict) == {"reward_labels_dropped": 0.0, "reward_labels_flipped": 1.0}
    # Second epoch: the bound is -ln(rho) + alpha rho + min(beta var, 3) with beta 3 - 2 / 4 = 2.5; the pairs
    # over it are left out (unless flipped), those under it trained on with their labels.
    bound = -math.log(rime.rho) + 0.5 * rime.rho + min(2.5 * rime.divergences.var, 3.0)
    verdict = rime.judge(lambda: first, labels, first > 2)
    assert rime.bound == pytest.approx(bound)
    trusted = (kl < bound).tolist()
    assert verdict.keep.bool().tolist() == [t or i == 5 for i, t in enumerate(trusted)]
    assert "reward_trust_bound" in rime.metrics(verdict)
    # Once the trusted divergences reach rho = 0.7 with little spread, the bound is about 0.73: pair 3's label,
    # given 20% (a divergence of 1.61), and the tie are left out, the others trusted, and the flip stays a flip.
    rime.rho, rime.divergences.var = 0.7, 0.01
    verdict = rime.judge(lambda: first, labels, first > 2)
    assert p[3] == pytest.approx(0.2) and verdict.keep.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    assert verdict.flip.tolist() == [False] * 5 + [True]
    assert rime.metrics(verdict)["reward_labels_dropped"] == 2.0
    # flip_below=0 flips nothing: the label given 0.2% is judged like the others (left out here).
    unflipping = TrustAndFlip(flip_below=0.0)
    unflipping.rho, unflipping.divergences.var = 0.7, 0.01
    verdict = unflipping.judge(lambda: first, labels, first > 2)
    assert not verdict.flip.any() and verdict.keep.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    # The leniency falls to beta_end and stays there; a schedule may rise as well (beta 0 to 2 over 4 epochs).
    rising = TrustAndFlip(beta_start=0.0, beta_end=2.0, decay_epochs=4)
    rising.rho, rising.divergences.var, rising.epochs = 0.5, 0.1, 1
    assert rising.lower_bound() == pytest.approx(-math.log(0.5) + 0.25 + 0.5 * 0.1)
    rime.epochs = 100
    rime.rho, rime.divergences.var = 0.5, 10.0
    assert rime.lower_bound() == pytest.approx(-math.log(0.5) + 0.25 + 3.0)
    rime.divergences.var = 0.1
    assert rime.lower_bound() == pytest.approx(-math.log(0.5) + 0.25 + 0.1)


@pytest.mark.parametrize("arguments, message", [
    ({"alpha": -0.1}, r"^alpha must be at least 0"), ({"beta_start": -0.5}, r"^beta_start must be at least 0"),
    ({"decay_epochs": 0}, r"^decay_epochs must be at least 1"), ({"flip_below": 0.5}, r"^flip_below must lie in"),
    ({"flip_below": -0.1}, r"^flip_below must lie in \[0, 0.5\)"),
    ({"rate": 0.0}, r"^rate must lie in \(0, 1\]"), ({"max_uncertainty": -1.0}, r"^max_uncertainty must be")])
def test_rime_refuses_arguments_outside_their_domain(arguments, message):
    with pytest.raises(ArgumentError, match=message):
        TrustAndFlip(**arguments)


def test_rime_against_a_teacher_who_flips_three_labels_in_ten():
    ds, wrong = flipped(300, 0.3)
    nets, judged = {}, {}
    for name, inner in {"all": KeepAll(), "rime": TrustAndFlip()}.items():
        torch.manual_seed(0)
        nets[name] = RewardNet(*spaces(), members=3)
        judged[name] = LastMask(inner)
        metrics = RewardTrainer(nets[name], np.random.default_rng(0), epochs=60,
                                label_filter=judged[name]).train(ds)
    verdict = judged["rime"].judgement
    dropped, flip = ~verdict.keep.bool().numpy(), verdict.flip.numpy()
    assert metrics["reward_labels_flipped"] == flip.sum() and metrics["gt_labels_flipped_wrong"] == (flip & wrong).sum()
    assert metrics["reward_labels_dropped"] == dropped.sum()
    acted = dropped | flip
    # What it leaves out or flips is mostly the planted flips (over twice their 30% share, most of them caught), a
    # label it flips far more often a wrong one, and it ranks fresh pairs better than believing every label.
    assert (acted & wrong).sum() > 0.6 * acted.sum() and (acted & wrong).sum() > 0.5 * wrong.sum()
    assert (flip & wrong).sum() > 0.8 * flip.sum() > 0
    assert held_out_accuracy(nets["rime"]) > held_out_accuracy(nets["all"]) + 0.05


def test_the_trainer_trains_on_the_labels_a_filter_flips():
    class FlipAll:
        judges = False

        def judge(self, first_probs, labels, trained_on):
            return Judgement(torch.ones_like(labels), torch.ones_like(labels, dtype=torch.bool))

        def metrics(self, judgement):
            return {}

    torch.manual_seed(0)
    net = RewardNet(*spaces(), members=1)
    metrics = RewardTrainer(net, np.random.default_rng(0), epochs=30, lr=3e-3, label_filter=FlipAll()).train(
        labelled(300))
    # The figures are against the labels given: a net trained on every label's opposite ranks against them.
    assert metrics["reward_accuracy"] < 0.1 and held_out_accuracy(net) < 0.1


def step_inputs(members: int, pairs: int, length: int) -> RewardInputs:
    """Inputs whose single feature is the step's index in its fragment, with a done flag alike."""
    steps = torch.arange(length, dtype=torch.float32).expand(members, pairs, 2, length)
    return RewardInputs(steps[..., None].clone(), None, steps.clone())


def test_temporal_crops_are_windows_inside_the_fragments_of_the_configured_lengths():
    crop, rng = TemporalCrop(max_shorten=3), np.random.default_rng(0)
    lengths, starts = set(), set()
    for _ in range(200):
        window = crop(step_inputs(2, 16, 8), rng)
        first, size = window.x[..., 0, 0], window.x.shape[-2]
        lengths.add(size)
        starts.update(first.flatten().tolist())
        # Consecutive steps of one fragment, wholly inside it, for every field.
        torch.testing.assert_close(window.x[..., 0], first[..., None] + torch.arange(size, dtype=torch.float32))
        torch.testing.assert_close(window.done, window.x[..., 0])
        assert first.min() >= 0 and first.max() + size <= 8
        assert len(set(first.flatten().tolist())) > 1 or size == 8  # each fragment has its own start
    assert lengths == {5, 6, 7, 8} and starts == {0.0, 1.0, 2.0, 3.0}
    # Shorter fragments than the most a crop drops: every length from one step to the whole, and no shorter.
    short = {TemporalCrop(max_shorten=20)(step_inputs(1, 4, 3), rng).x.shape[-2] for _ in range(100)}
    assert short == {1, 2, 3}
    assert {TemporalCrop(max_shorten=1)(step_inputs(1, 4, 8), rng).x.shape[-2] for _ in range(100)} == {7, 8}
    with pytest.raises(ArgumentError, match=r"^max_shorten must be at least 1"):
        TemporalCrop(max_shorten=0)
    # QPA's: windows between min_shorten and max_shorten steps short of the whole, never the whole fragment.
    qpa = {TemporalCrop(max_shorten=3, min_shorten=2)(step_inputs(1, 4, 8), rng).x.shape[-2] for _ in range(100)}
    assert qpa == {5, 6}
    assert {TemporalCrop(max_shorten=20, min_shorten=5)(step_inputs(1, 4, 3), rng).x.shape[-2]
            for _ in range(50)} == {1}  # too short to drop min_shorten: the shortest window there is
    for kwargs, match in [({"min_shorten": 6}, r"^min_shorten must lie in \[0, max_shorten=5\], got 6"),
                          ({"min_shorten": -1}, r"^min_shorten must lie"),
                          ({"copies": 0}, r"^copies must be a whole number, at least 1, got 0"),
                          ({"copies": True}, r"^copies must be a whole number"),
                          ({"copies": 2.0}, r"^copies must be a whole number")]:
        with pytest.raises(ArgumentError, match=match):
            TemporalCrop(max_shorten=5, **kwargs)


def test_whole_fragments_are_scored_unchanged_and_draw_nothing():
    inputs, rng = step_inputs(1, 2, 4), np.random.default_rng(0)
    assert WholeFragments()(inputs, rng) is inputs
    assert rng.integers(1 << 30) == np.random.default_rng(0).integers(1 << 30)


def test_pseudo_labels_only_where_a_member_is_more_confident_than_the_threshold():
    labeller = PseudoLabels(threshold=0.9, weight=0.5)
    margin = math.log(0.9 / 0.1)  # the return difference at which P(first preferred) is 0.9
    diffs = torch.tensor([[margin + 0.01, -(margin + 0.01), margin - 0.01, -(margin - 0.01), 0.0]])
    returns = torch.stack([diffs, torch.zeros_like(diffs)], -1).requires_grad_()
    pseudo = labeller.label(returns, 50.0)
    assert pseudo.mask.tolist() == [[1.0, 1.0, 0.0, 0.0, 0.0]] and pseudo.labels[0, :2].tolist() == [1.0, 0.0]
    loss = labeller.loss(returns, pseudo, 50.0)
    # Cross-entropy against the member's own rounded prediction (first, second), weighted; none elsewhere.
    expected = 0.5 * torch.nn.functional.softplus(-diffs[0, :2].abs())
    torch.testing.assert_close(loss[0, :2], expected)
    assert (loss[0, 2:] == 0).all()
    loss.sum().backward()  # it trains the net towards its own confident answers
    assert returns.grad[0, 0, 0] < 0 < returns.grad[0, 1, 0]
    rules = {"threshold": r"must lie in \(0.5, 1\)", "weight": "must be a positive finite number",
             "ratio": "must be at least 1"}
    for bad in ({"threshold": 0.5}, {"threshold": 1.0}, {"weight": 0.0}, {"weight": math.inf}, {"ratio": 0}):
        name = next(iter(bad))
        with pytest.raises(ArgumentError, match=f"^{name} {rules[name]}"):
            PseudoLabels(**bad)
    assert PseudoLabels(ratio=1).ratio == 1  # one unlabelled pair a labelled one is the least
    # Under the preference model's clip, a difference of 2 * margin counts as 0.9 * margin: not confident.
    far = torch.tensor([[[2 * margin, 0.0]]])
    assert labeller.label(far, 0.9 * margin).mask.item() == 0.0 and labeller.label(far, 50.0).mask.item() == 1.0
    # The loss reads the clipped difference too: its cross-entropy stops falling at the clip.
    sure = labeller.label(far, 50.0)
    expected = 0.5 * torch.nn.functional.softplus(torch.tensor([[-1.0]]))
    torch.testing.assert_close(labeller.loss(far, sure, 1.0), expected)
    none = NoPseudoLabels().label(returns, 50.0)
    assert NoPseudoLabels.ratio == 0 and (none.mask == 0).all() and (none.labels == 0).all()
    assert (NoPseudoLabels().loss(returns, pseudo, 50.0) == 0).all()
    # A label and a loss per pair, as PseudoLabels gives.
    assert none.mask.shape == NoPseudoLabels().loss(returns, pseudo, 50.0).shape == loss.shape == (1, 5)


def test_the_trainer_learns_from_unlabelled_pairs_only_when_given_pseudo_labels():
    ds = labelled(40)
    unlabelled = random_pairs(200, length=6, seed=3)
    trained = {}
    for name, labeller in (("none", NoPseudoLabels()), ("surf", PseudoLabels(threshold=0.8, ratio=2))):
        torch.manual_seed(0)
        trainer = RewardTrainer(RewardNet(*spaces(), members=2), np.random.default_rng(0), epochs=20,
                                pseudo_labels=labeller)
        assert trainer.unlabelled_wanted(40) == labeller.ratio * 40
        trainer.remember_unlabelled(unlabelled)
        trained[name] = trainer.train(ds)
    assert "reward_pseudo_labelled" not in trained["none"]
    assert 0 < trained["surf"]["reward_pseudo_labelled"] <= 1  # some of the drawn pairs were confident enough
    assert trained["none"]["reward_loss"] != trained["surf"]["reward_loss"]
    # Return differences clipped at 1 (the preference model's threshold) never reach P = 0.8: none is labelled.
    clipped = RewardTrainer(RewardNet(*spaces(), members=2), np.random.default_rng(0), epochs=20, threshold=1.0,
                            pseudo_labels=PseudoLabels(threshold=0.8, ratio=2))
    clipped.remember_unlabelled(unlabelled)
    assert clipped.train(ds)["reward_pseudo_labelled"] == 0


class RecordedNet(RewardNet):
    """A reward net that records, for each ensemble batch it scores, its mode, whether grad is on and its inputs."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[bool, bool, torch.Tensor]] = []

    def returns(self, inputs: RewardInputs, discount_factor: float, per_member: bool = False) -> torch.Tensor:
        if per_member:
            self.calls.append((self.training, torch.is_grad_enabled(), inputs.x))
        return super().returns(inputs, discount_factor, per_member)


def test_members_label_unlabelled_pairs_in_eval_mode_and_backpropagate_only_through_the_labelled_ones():
    torch.manual_seed(0)
    net = RecordedNet(*spaces(), members=2)
    trainer = RewardTrainer(net, np.random.default_rng(0), epochs=20, batch_size=32, crop=TemporalCrop(max_shorten=2),
                            pseudo_labels=PseudoLabels(threshold=0.8, ratio=2))
    trainer.remember_unlabelled(random_pairs(200, length=6, seed=3))
    trainer.train(labelled(40))
    # Each batch: its labelled pairs (train mode, grad), then twice as many unlabelled pairs judged in eval mode
    # without grad, then, where some member labels some, only those scored again in train mode for the loss.
    judged = [i for i, call in enumerate(net.calls) if not call[0]]
    assert judged and all(net.calls[i - 1][:2] == (True, True) for i in judged)
    pairs = {(grad, x.shape[:2]) for _, grad, x in (net.calls[i] for i in judged)}
    assert pairs == {(False, (2, 64)), (False, (2, 16))}  # ratio 2 of batches of 32 and 8
    # The unlabelled pairs are cropped as the labelled ones are: windows of 4 to 6 of their 6 steps.
    assert {net.calls[i][2].shape[-2] for i in judged} == {4, 5, 6}
    # Between one judging and the next: the pairs trained on pseudo-labels, if any, then the next labelled batch.
    gaps = [(net.calls[i][2], net.calls[i + 1], after - i) for i, after in zip(judged, judged[1:])]
    assert {gap for *_, gap in gaps} == {2, 3}  # some batches label no pair at all, and skip the second pass
    trained = [(drawn, call) for drawn, call, gap in gaps if gap == 3]
    assert all(call[:2] == (True, True) and call[2].dim() == drawn.dim()
               and 1 <= call[2].shape[1] <= drawn.shape[1] for drawn, call in trained)
    # Each pair trained on is one of the pairs judged, on the same window, for both members.
    for drawn, (_, _, x) in trained:
        same = (x[:, :, None] == drawn[:, None]).flatten(3).all(-1)  # (members, trained, judged)
        assert (same[0] & same[1]).any(-1).all()  # one column of the judged batch for both members
    assert any(call[2].shape[1] < drawn.shape[1] for drawn, call in trained)  # pairs no member is sure of left out


def test_pseudo_labels_pull_the_model_towards_its_own_confident_answers_on_unlabelled_pairs():
    ds, unlabelled = labelled(40), random_pairs(200, length=6, seed=3)
    margins = {}
    for weight in (1e-9, 1.0):  # the same random draws; only the pseudo-labels' weight differs
        torch.manual_seed(0)
        net = RewardNet(*spaces(), members=2)
        trainer = RewardTrainer(net, np.random.default_rng(0), epochs=20,
                                pseudo_labels=PseudoLabels(threshold=0.6, weight=weight, ratio=4))
        trainer.remember_unlabelled(unlabelled)
        trainer.train(ds)
        with torch.no_grad():
            returns = net(*unlabelled.tensors()).sum(-1)  # (members, pairs, 2)
        margins[weight] = float((returns[..., 0] - returns[..., 1]).abs().mean())
    assert margins[1.0] > 1.15 * margins[1e-9]  # surer of the unlabelled pairs it labels itself


def test_the_crop_shapes_every_training_batch_and_never_validation_or_judging():
    seen = []

    class Recorded:
        copies = 1

        def __call__(self, inputs, rng):
            seen.append(tuple(inputs.x.shape[:-1]))
            return TemporalCrop(max_shorten=2)(inputs, rng)

    trainer = RewardTrainer(RewardNet(*spaces(), members=2), np.random.default_rng(0), batch_size=16, epochs=1,
                            val_split=0.25, crop=Recorded(), label_filter=DropContradicted())
    trainer.train(labelled(64))  # 48 training pairs: three batches of 16; 16 validated and all 64 judged whole
    assert seen == [(2, 16, 2, 6)] * 3


def test_each_pair_trains_on_its_copies_crops_each_with_the_pairs_label():
    seen = []

    class Copied:
        """Whole fragments, each pair scored ``copies`` times: its copies are the pair itself."""

        def __init__(self, copies: int) -> None:
            self.copies = copies

        def __call__(self, inputs, rng):
            seen.append(tuple(inputs.x.shape[:-1]))
            return inputs

        def check_length(self, length: int) -> None:
            """Any length."""

    weights, metrics = [], []
    for copies in (1, 3):
        torch.manual_seed(0)
        net = RewardNet(*spaces(), members=2)
        trainer = RewardTrainer(net, np.random.default_rng(0), batch_size=16, epochs=3, crop=Copied(copies))
        metrics.append(trainer.train(labelled(40)))
        weights.append(torch.cat([p.detach().flatten() for p in net.parameters()]))
    # Three identical copies of each pair, each with its pair's label, train as the pair alone: the same weights and
    # figures; copies given other pairs' labels would not. (Adam magnifies rounding where a gradient is near 0.)
    torch.testing.assert_close(weights[0], weights[1], atol=1e-2, rtol=0)
    assert metrics[0]["reward_loss"] == pytest.approx(metrics[1]["reward_loss"], rel=1e-4)
    assert seen[:3] == [(2, 16, 2, 6), (2, 16, 2, 6), (2, 8, 2, 6)] and seen[9:12] == [(2, 48, 2, 6), (2, 48, 2, 6),
                                                                                      (2, 24, 2, 6)]


def test_the_wrong_labels_counted_are_the_training_pairs_not_the_validation_split():
    ds, wrong = flipped(100, 0.3)
    label_filter = LastMask(DropContradicted())
    trainer = RewardTrainer(RewardNet(*spaces(), members=8), np.random.default_rng(0), epochs=20, val_split=0.5,
                            label_filter=label_filter)
    metrics = trainer.train(ds)
    trained = label_filter.trained_on.any(0).numpy()  # 8 bootstrap resamples of 50 pairs cover them all here
    left_out = label_filter.mask.numpy() == 0
    # The filter judges validation pairs too (here all it leaves out), so counting them would show.
    assert trained.sum() == 50 and (left_out & ~trained & wrong).any()
    assert metrics["gt_labels_wrong"] == wrong[trained].sum() < wrong.sum()
    assert metrics["gt_labels_dropped_wrong"] == (left_out & trained & wrong).sum()


class Recorded(AllLabels):
    """Every pair, as AllLabels draws them, remembering each pass's per-member resample."""

    def __init__(self) -> None:
        self.samples: list[np.ndarray] = []

    def draw(self, sample: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """AllLabels' draw, recorded."""
        self.samples.append(sample.copy())
        return super().draw(sample, rng)


def told_apart(n: int) -> PreferenceDataset:
    """``n`` random pairs labelled by their true returns."""
    pairs = random_pairs(n, length=6, seed=1)
    dataset = PreferenceDataset()
    dataset.push(pairs, (pairs.rews[:, 0].sum(-1) > pairs.rews[:, 1].sum(-1)).astype(np.float32), np.arange(n))
    return dataset


@pytest.mark.parametrize("bootstrap", [True, False])
def test_without_bootstrap_every_member_trains_on_every_pair_in_its_own_order(bootstrap):
    replay = Recorded()
    trainer = RewardTrainer(RewardNet(*spaces(), members=3), np.random.default_rng(0), epochs=1, replay=replay,
                            bootstrap=bootstrap)
    trainer.train(told_apart(50))
    (sample,) = replay.samples
    every_pair = [sorted(row) == list(range(50)) for row in sample]
    assert all(every_pair) != bootstrap  # a resample with replacement of 50 pairs repeats some (p > 1 - 1e-20)
    if not bootstrap:
        assert len({tuple(row) for row in sample}) == 3


@pytest.mark.parametrize(("stop_accuracy", "passes"), [(1.0, 30), (0.0, 1)])
def test_a_round_stops_its_passes_once_training_accuracy_exceeds_stop_accuracy(stop_accuracy, passes):
    replay = Recorded()
    torch.manual_seed(0)
    trainer = RewardTrainer(RewardNet(*spaces(), members=3), np.random.default_rng(0), epochs=30, lr=3e-3,
                            replay=replay, stop_accuracy=stop_accuracy)
    metrics = trainer.train(told_apart(200))
    assert len(replay.samples) == passes and (passes == 30 or metrics["reward_accuracy"] > stop_accuracy)


def test_a_round_at_b_prefs_stop_runs_until_its_accuracy_passes_it():
    replay = Recorded()
    torch.manual_seed(0)
    trainer = RewardTrainer(RewardNet(*spaces(), members=3), np.random.default_rng(0), epochs=200, lr=3e-3,
                            replay=replay, stop_accuracy=0.9)
    metrics = trainer.train(told_apart(200))
    assert 1 < len(replay.samples) < 200 and metrics["reward_accuracy"] > 0.9


@pytest.mark.parametrize("stop_accuracy", [-0.1, 1.5])
def test_a_stop_accuracy_outside_0_1_is_refused(stop_accuracy):
    with pytest.raises(ArgumentError, match="stop_accuracy must lie in"):
        RewardTrainer(RewardNet(*spaces(), members=1), np.random.default_rng(0), stop_accuracy=stop_accuracy)
