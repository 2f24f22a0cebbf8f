import json
import math

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch
from helpers import random_pairs

from rlhp.data import FragmentPairs, PreferenceDataset
from rlhp.data.arrow import to_fixed
from rlhp.preference_model import clipped_difference, discounted_returns, preference_logprobs, preference_loss


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_probabilities_match_hand_computation():
    returns = torch.tensor([[3.0, 1.0], [0.0, 2.5], [100.0, 0.0]], dtype=torch.float64)
    first, second = preference_logprobs(returns, noise_prob=0.1, threshold=50)
    expected = [0.05 + 0.9 * sigmoid(2.0), 0.05 + 0.9 * sigmoid(-2.5), 0.05 + 0.9 * sigmoid(50.0)]
    np.testing.assert_allclose(first.exp().numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose((first.exp() + second.exp()).numpy(), 1.0, rtol=1e-12)


def test_clipping_keeps_log_probabilities_finite():
    first, second = preference_logprobs(torch.tensor([[1e6, -1e6]]), threshold=50)
    assert torch.isfinite(first).all() and torch.isfinite(second).all()
    assert second.item() == pytest.approx(math.log(sigmoid(-50)), rel=1e-5)


def test_discounted_returns():
    rews = torch.tensor([[1.0, 1.0, 1.0]])
    assert discounted_returns(rews, 0.5).item() == pytest.approx(1 + 0.5 + 0.25)
    assert discounted_returns(rews).item() == 3.0


def test_dataset_fifo_eviction_and_label_checks():
    ds = PreferenceDataset(max_size=5)
    pairs = random_pairs(4)
    ds.push(pairs, np.array([1, 0, 0.5, 1], np.float32), np.arange(4))
    ds.push(pairs[:3], np.array([0, 0, 1], np.float32), np.arange(4, 7))
    assert len(ds) == 5 and ds.ids.tolist() == [2, 3, 4, 5, 6]
    np.testing.assert_array_equal(ds.pairs.obs[0], pairs.obs[2])
    with pytest.raises(ValueError, match="float32"):
        ds.push(pairs, np.array([1, 0, 1, 1]), np.arange(4))
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        ds.push(pairs, np.ones((4, 1), np.float32), np.arange(4))


def test_dataset_saves_as_arrow_readable_without_rlhp(tmp_path):
    ds = PreferenceDataset()
    pairs = random_pairs(6, length=4)
    labels = np.array([1, 0, 0.5, 1, 0, 1], np.float32)
    ds.push(pairs, labels, np.arange(10, 16))
    ds.save(tmp_path / "prefs")
    plain = datasets.load_from_disk(str(tmp_path / "prefs"))
    assert plain.num_rows == 6 and plain[2]["label"] == 0.5
    assert np.asarray(plain[0]["frames"]).shape == (2, 5, 3)  # 4 steps: their observations and the next
    back = PreferenceDataset.load(tmp_path / "prefs")
    np.testing.assert_array_equal(back.labels, labels)
    np.testing.assert_array_equal(back.pairs.obs, pairs.obs)
    np.testing.assert_array_equal(back.pairs.next_obs, pairs.next_obs)
    assert back.pairs.acts.dtype == pairs.acts.dtype and back.ids.tolist() == list(range(10, 16))


def test_a_dataset_saved_with_obs_and_next_obs_columns_loads_as_frames(tmp_path):
    pairs = random_pairs(3, length=4)
    columns = {k: v for k, v in pairs.columns().items() if k != "frames"}
    columns.update(obs=pairs.obs, next_obs=pairs.next_obs)
    table = pa.table({"id": np.arange(3), "label": np.ones(3, np.float32),
                      **{k: to_fixed(np.ascontiguousarray(v)) for k, v in columns.items()}})
    info = datasets.DatasetInfo(description=json.dumps({k: v.dtype.str for k, v in columns.items()}))
    datasets.Dataset(table, info=info).save_to_disk(str(tmp_path / "old"))
    back = PreferenceDataset.load(tmp_path / "old")
    np.testing.assert_array_equal(back.pairs.frames, pairs.frames)
    columns["next_obs"] = columns["next_obs"] + 1  # not fragments of trajectories: refused, not misread
    with pytest.raises(ValueError, match="next_obs is not obs one step on"):
        FragmentPairs.from_columns(columns)


@pytest.mark.parametrize("capacity", [0, 3, 100])
def test_the_dataset_grows_in_place_past_or_within_its_capacity(capacity):
    ds = PreferenceDataset(capacity=capacity)
    batches = [random_pairs(4, seed=s) for s in range(5)]
    for i, b in enumerate(batches):
        ds.push(b, np.full(4, i % 2, np.float32), np.arange(4 * i, 4 * i + 4))
    want = FragmentPairs.concat(batches)
    for key, value in want.columns().items():
        np.testing.assert_array_equal(ds.pairs.columns()[key], value)
    assert ds.ids.tolist() == list(range(20))
    with pytest.raises(ValueError, match="fragment length"):
        ds.push(random_pairs(2, length=3), np.ones(2, np.float32), np.arange(2))


def test_the_loss_gradient_is_sigmoid_of_the_difference_minus_the_label_inside_the_clip():
    diff = torch.tensor([-60.0, -3.0, -0.5, 0.0, 0.7, 4.0, 60.0])
    labels = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0])
    returns = torch.stack([diff, torch.zeros_like(diff)], dim=-1).requires_grad_()
    preference_loss(returns, labels, threshold=50.0).sum().backward()
    inside = diff.abs() < 50
    want = torch.sigmoid(diff) - labels
    torch.testing.assert_close(returns.grad[inside, 0], want[inside])
    torch.testing.assert_close(returns.grad[inside, 1], -want[inside])
    assert (returns.grad[~inside] == 0).all()  # the clip stops the gradient


def test_swapping_the_fragments_and_flipping_the_label_leaves_the_loss_unchanged():
    returns = torch.randn(50, 2) * 5
    labels = torch.rand(50)
    for noise in (0.0, 0.1):
        loss = preference_loss(returns, labels, noise_prob=noise)
        torch.testing.assert_close(loss, preference_loss(returns.flip(-1), 1 - labels, noise_prob=noise))


def test_the_fused_noiseless_loss_equals_the_cross_entropy_of_the_log_probabilities():
    returns = (torch.randn(200, 2) * 40).requires_grad_()  # some differences beyond the clip
    labels = torch.rand(200).round() * torch.rand(200).ge(0.2) + torch.rand(200).lt(0.2) * 0.5
    fused = preference_loss(returns, labels, threshold=50.0)
    (fused_grad,) = torch.autograd.grad(fused.sum(), returns)
    first, second = preference_logprobs(returns, threshold=50.0)
    general = -(labels * first + (1 - labels) * second)
    (general_grad,) = torch.autograd.grad(general.sum(), returns)
    torch.testing.assert_close(fused, general)
    torch.testing.assert_close(fused_grad, general_grad)


@pytest.mark.parametrize("noise_prob", [0.0, 0.1])
def test_the_loss_is_the_cross_entropy_of_the_hand_computed_probability_under_any_clip(noise_prob):
    returns = torch.tensor([[3.0, 1.0], [0.0, 2.5], [10.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([1.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    clipped = [2.0, -2.0, 2.0, 0.0]  # threshold 2, well inside the default of 50
    p = torch.tensor([noise_prob / 2 + (1 - noise_prob) * sigmoid(d) for d in clipped], dtype=torch.float64)
    want = -(labels * p.log() + (1 - labels) * (1 - p).log())
    torch.testing.assert_close(preference_loss(returns, labels, noise_prob, threshold=2.0), want)
    first, second = preference_logprobs(returns, noise_prob, threshold=2.0)
    torch.testing.assert_close(first.exp(), p), torch.testing.assert_close(second.exp(), 1 - p)


def test_a_teacher_who_always_answers_at_random_teaches_nothing():
    returns, labels = torch.tensor([[5.0, -5.0], [0.0, 1.0]]), torch.tensor([1.0, 0.0])
    first, second = preference_logprobs(returns, noise_prob=1.0)
    torch.testing.assert_close(first, torch.full((2,), math.log(0.5))), torch.testing.assert_close(second, first)
    torch.testing.assert_close(preference_loss(returns, labels, noise_prob=1.0), torch.full((2,), math.log(2)))


def test_the_default_clip_is_50():
    returns = torch.tensor([[100.0, 0.0]])
    assert clipped_difference(returns).item() == 50.0
    assert preference_logprobs(returns)[1].item() == pytest.approx(math.log(sigmoid(-50)), rel=1e-5)
    assert preference_loss(returns, torch.zeros(1)).item() == pytest.approx(50.0, rel=1e-6)  # -log sigmoid(-50)


def test_discounting_keeps_the_returns_precision():
    rews = torch.rand(3, 40, dtype=torch.float64)
    returns = discounted_returns(rews, 0.3)
    assert returns.dtype == torch.float64
    want = [sum(0.3**t * float(r[t]) for t in range(40)) for r in rews]
    np.testing.assert_allclose(returns.numpy(), want, rtol=1e-14)
