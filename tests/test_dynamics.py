import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import spaces

from rlhp.data import FragmentPairs, PreferenceDataset
from rlhp.errors import ArgumentError
from rlhp.feedback import SyntheticGatherer
from rlhp.rewards import RewardInputs, RewardNet
from rlhp.training import NextInputPrediction, NoSelfSupervision, PseudoLabels, RewardTrainer

ONE_FEATURE = (gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), gym.spaces.Discrete(2))


def counting_inputs(length: int, calls: list[torch.Tensor]) -> Callable[[torch.Tensor], RewardInputs]:
    """Encoded pairs whose single input at step t is t (both fragments alike); records each index asked for."""
    def inputs(idx: torch.Tensor) -> RewardInputs:
        calls.append(idx)
        steps = torch.arange(length, dtype=torch.float32).expand(*idx.shape, 2, length)
        return RewardInputs(steps[..., None].clone(), None, None)
    return inputs


def test_each_step_predicts_the_next_steps_input_not_its_own():
    net = RewardNet(*ONE_FEATURE, members=2, use_action=False)
    part = NextInputPrediction(weight=0.5, ratio=0)
    head = part.head(net)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()  # predicts 0 everywhere: the loss is the mean square of the targets
    labelled = torch.zeros((2, 3), dtype=torch.long)
    loss = part.loss(head, net, labelled, counting_inputs(5, []), counting_inputs(5, []), 0,
                     np.random.default_rng(0))
    # Targets are steps 1..4 (the next inputs), for each of 2 members, times the weight.
    torch.testing.assert_close(loss, torch.tensor(2 * 0.5 * np.mean(np.arange(1, 5) ** 2), dtype=torch.float32))
    with torch.no_grad():
        head.bias.fill_(1.0)  # now a prediction of 1 at every step matches only the target of step 0
    loss = part.loss(head, net, labelled, counting_inputs(5, []), counting_inputs(5, []), 0,
                     np.random.default_rng(0))
    torch.testing.assert_close(loss, torch.tensor(2 * 0.5 * np.mean(np.arange(0, 4) ** 2), dtype=torch.float32))


def test_the_prediction_loss_trains_the_reward_nets_own_features():
    torch.manual_seed(0)
    net = RewardNet(*ONE_FEATURE, members=2, use_action=False)
    part = NextInputPrediction()
    head = part.head(net)
    labelled = torch.zeros((2, 3), dtype=torch.long)
    part.loss(head, net, labelled, counting_inputs(5, []), counting_inputs(5, []), 0,
              np.random.default_rng(0)).backward()
    assert all(w.grad is not None and w.grad.abs().sum() > 0 for w in net.body.weights[:-1])
    assert net.body.weights[-1].grad is None  # the reward's own output layer is the labels' alone


def test_unlabelled_pairs_are_drawn_ratio_per_labelled_pair_from_the_pool_and_none_without_one():
    net = RewardNet(*ONE_FEATURE, members=2, use_action=False)
    part = NextInputPrediction(ratio=3)
    head = part.head(net)
    labelled_calls, unlabelled_calls = [], []
    labelled = torch.zeros((2, 4), dtype=torch.long)
    rng = np.random.default_rng(0)
    part.loss(head, net, labelled, counting_inputs(5, labelled_calls), counting_inputs(5, unlabelled_calls), 0, rng)
    assert len(labelled_calls) == 1 and unlabelled_calls == []
    assert rng.integers(1 << 30) == np.random.default_rng(0).integers(1 << 30)  # nothing drawn without a pool
    part.loss(head, net, labelled, counting_inputs(5, []), counting_inputs(5, unlabelled_calls), 10, rng)
    (drawn,) = unlabelled_calls
    assert drawn.shape == (2, 12) and 0 <= int(drawn.min()) and int(drawn.max()) < 10


def test_without_self_supervision_nothing_is_added_or_drawn():
    net, rng = RewardNet(*spaces(), members=2), np.random.default_rng(0)
    part = NoSelfSupervision()
    head = part.head(net)
    assert list(head.parameters()) == []
    loss = part.loss(head, net, torch.zeros((2, 4), dtype=torch.long), counting_inputs(5, []),
                     counting_inputs(5, []), 100, rng)
    assert float(loss) == 0.0 and rng.integers(1 << 30) == np.random.default_rng(0).integers(1 << 30)
    assert RewardTrainer(net, rng).unlabelled_wanted(40) == 0


def test_the_trainer_keeps_unlabelled_pairs_for_the_larger_of_its_parts_ratios():
    for pseudo, ssl, wanted in ((2, 5, 5), (4, 1, 4)):
        trainer = RewardTrainer(RewardNet(*spaces(), members=2), np.random.default_rng(0),
                                pseudo_labels=PseudoLabels(ratio=pseudo),
                                self_supervision=NextInputPrediction(ratio=ssl))
        assert trainer.unlabelled_wanted(10) == 10 * wanted


def rotating(n: int, length: int = 6, seed: int = 0) -> FragmentPairs:
    """Pairs whose observation turns by a fixed rotation each step: a next state the features can predict."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * math.pi, (n, 2, 1)) + 0.4 * np.arange(length + 1)
    radius = rng.uniform(0.5, 2.0, (n, 2, 1))
    frames = np.stack([radius * np.cos(angle), radius * np.sin(angle)], -1).astype(np.float32)
    return FragmentPairs(frames=frames, acts=rng.integers(0, 2, (n, 2, length)), dones=np.zeros((n, 2, length), bool),
                         rews=frames[:, :, :-1, 0].copy(), episode=np.arange(2 * n).reshape(n, 2),
                         start=np.zeros((n, 2), np.int64), quality=frames[:, :, :-1, 0].sum(-1).astype(np.float64))


def test_training_with_next_input_prediction_learns_the_fragments_dynamics():
    pairs = rotating(60)
    gatherer = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False)
    dataset = PreferenceDataset()
    dataset.push(pairs, gatherer.probabilities(pairs).astype(np.float32), np.arange(len(pairs)))
    errors = {}
    for weight in (1e-9, 1.0):  # the same draws; only the prediction loss's weight differs
        torch.manual_seed(0)
        net = RewardNet(*spaces(2), members=2, use_action=False, hidden_sizes=[32, 32])
        part = NextInputPrediction(weight=weight, ratio=2)
        trainer = RewardTrainer(net, np.random.default_rng(0), epochs=30, lr=1e-2, self_supervision=part)
        trainer.remember_unlabelled(rotating(100, seed=1))
        before = [p.detach().clone() for p in trainer.head.parameters()]
        trainer.train(dataset)
        assert all((b != p).any() for b, p in zip(before, trainer.head.parameters()))  # the head trains too
        held_out = rotating(50, seed=2)
        encoded = net.encode(*held_out.tensors())
        with torch.no_grad():
            errors[weight] = float(NextInputPrediction(ratio=0).loss(
                trainer.head, net, torch.arange(50).expand(2, 50), encoded.select, encoded.select, 0,
                np.random.default_rng(0))) / 2
    assert errors[1.0] < 0.05 * errors[1e-9]  # it predicts where the state turns next, on pairs it never saw


@pytest.mark.parametrize(("kwargs", "name"), [({"weight": 0.0}, "weight"), ({"weight": math.inf}, "weight"),
                                              ({"ratio": -1}, "ratio")])
def test_next_input_prediction_refuses_nonsense_by_name(kwargs, name):
    with pytest.raises(ArgumentError, match=name):
        NextInputPrediction(**kwargs)


def test_one_step_fragments_have_no_next_input_to_predict():
    net = RewardNet(*ONE_FEATURE, members=1, use_action=False)
    part = NextInputPrediction(ratio=0)
    with pytest.raises(ArgumentError, match="fragment_length"):
        part.loss(part.head(net), net, torch.zeros((1, 2), dtype=torch.long), counting_inputs(1, []),
                  counting_inputs(1, []), 0, np.random.default_rng(0))
