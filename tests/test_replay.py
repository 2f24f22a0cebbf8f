"""Which pairs a pass of reward training covers: every label, or a bounded window of new ones and a replay
sample of older ones."""

import numpy as np
import pytest
import torch
from helpers import random_pairs, spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from rlhp.data import PreferenceDataset
from rlhp.errors import ArgumentError
from rlhp.rewards import RewardNet
from rlhp.training import AllLabels, RecentWindow, RewardTrainer


def resample(members: int, pairs: int, seed: int) -> np.ndarray:
    """Bootstrap resamples of a training split, as the trainer draws them."""
    rng = np.random.default_rng(seed)
    return rng.permutation(pairs * 2)[:pairs][rng.integers(0, pairs, (members, pairs))]


@settings(max_examples=60, deadline=None)
@given(members=st.integers(1, 4), pairs=st.integers(1, 80), recent=st.integers(1, 30), older=st.integers(0, 30),
       seed=st.integers(0, 2**16))
def test_a_window_holds_each_members_newest_pairs_and_older_ones_from_its_own_resample(members, pairs, recent,
                                                                                    older, seed):
    sample = resample(members, pairs, seed)
    drawn = RecentWindow(recent, older).draw(sample, np.random.default_rng(seed))
    assert drawn.shape == (members, min(pairs, recent + older))
    for row, own in zip(drawn, sample, strict=True):
        newest = sorted(own, reverse=True)
        if pairs <= recent + older:  # the whole resample, reordered
            assert sorted(row, reverse=True) == newest
            continue
        kept = sorted(row, reverse=True)
        assert kept[:recent] == newest[:recent]  # the window's newest are the resample's newest
        rest = list(newest[recent:])
        for value in kept[recent:]:  # the others are distinct draws from the rest of the resample
            rest.remove(value)


def test_older_pairs_are_drawn_uniformly_and_each_pass_anew():
    sample = np.arange(100)[None]  # one member, pairs 0-99, newest 99
    rng = np.random.default_rng(0)
    counts = np.zeros(100)
    passes = [RecentWindow(10, 30).draw(sample, rng)[0] for _ in range(3000)]
    for drawn in passes:
        counts[drawn] += 1
    assert (counts[90:] == 3000).all()  # the ten newest, every pass
    share = counts[:90] / 3000  # each older pair: 30 of 90, a third of the passes
    assert abs(share.mean() - 1 / 3) < 1e-9 and share.min() > 0.28 and share.max() < 0.39
    assert len({tuple(sorted(d)) for d in passes[:20]}) == 20


def test_all_labels_is_the_whole_resample_reshuffled():
    sample = resample(3, 50, 0)
    drawn = AllLabels().draw(sample, np.random.default_rng(0))
    assert [sorted(r) for r in drawn] == [sorted(r) for r in sample] and not (drawn == sample).all()


@pytest.mark.parametrize(("kwargs", "name"), [({"recent": 0}, "recent"), ({"older": -1}, "older"),
                                              ({"recent": 2.5}, "recent"), ({"older": True}, "older")])
def test_a_window_refuses_sizes_it_cannot_draw_by_name(kwargs, name):
    with pytest.raises(ArgumentError) as err:
        RecentWindow(**kwargs)
    assert err.value.argument == name


def steps_taken(trainer: RewardTrainer) -> int:
    """Optimiser steps so far (AdamW counts them per parameter)."""
    return int(next(iter(trainer.optimizer.state.values()))["step"])


def test_a_windowed_round_costs_the_same_whatever_the_datasets_size():
    taken = {}
    for replay in (AllLabels(), RecentWindow(recent=32, older=32)):
        trainer = RewardTrainer(RewardNet(*spaces(), members=3), np.random.default_rng(0), batch_size=32,
                                epochs=2, replay=replay)
        counts = []
        for n in (64, 256, 640):
            dataset = PreferenceDataset()
            pairs = random_pairs(n, length=6, seed=0)
            dataset.push(pairs, np.ones(n, np.float32), np.arange(n))
            before = steps_taken(trainer) if trainer.optimizer.state else 0
            trainer.train(dataset)
            counts.append(steps_taken(trainer) - before)
        taken[type(replay).__name__] = counts
    assert taken == {"AllLabels": [4, 16, 40], "RecentWindow": [4, 4, 4]}


def test_a_window_trains_the_reward_as_well_as_every_label_on_a_growing_dataset():
    # 20 rounds of 30 new labels; the window covers 64 pairs a pass where the last rounds hold 600.
    accuracy = {}
    for replay in (AllLabels(), RecentWindow(recent=32, older=32)):
        torch.manual_seed(0)
        net = RewardNet(*spaces(), members=1)
        trainer = RewardTrainer(net, np.random.default_rng(0), epochs=3, lr=3e-3, replay=replay)
        pairs = random_pairs(600, length=6, seed=0)
        labels = (pairs.rews[:, 0].sum(-1) > pairs.rews[:, 1].sum(-1)).astype(np.float32)
        for n in range(30, 601, 30):
            dataset = PreferenceDataset()
            dataset.push(pairs[:n], labels[:n], np.arange(n))
            trainer.train(dataset)
        held_out = random_pairs(300, length=6, seed=1)
        with torch.no_grad():
            returns = net(*held_out.tensors()).mean(0).sum(-1)
        accuracy[type(replay).__name__] = float(((returns[:, 0] > returns[:, 1]).numpy()
                                                 == (held_out.rews[:, 0].sum(-1) > held_out.rews[:, 1].sum(-1))).mean())
    assert accuracy["RecentWindow"] > 0.9 and accuracy["AllLabels"] > 0.9
