import numpy as np
import pytest
import torch
from helpers import spaces, trajectory

from rlhp.errors import RunError
from rlhp.loop.fragmenters import ActiveSelectionFragmenter, RandomFragmenter
from rlhp.preference_model import preference_logprobs
from rlhp.rewards import RewardNet


def test_random_fragments_are_true_slices_of_their_trajectories():
    trajs = [trajectory(30, offset=1000 * i, terminal=True) for i in range(4)]
    pairs = RandomFragmenter(np.random.default_rng(0))(trajs, 10, 25)
    assert pairs.obs.shape == (25, 2, 10, 1) and pairs.acts.shape == (25, 2, 10)
    first = pairs.obs[..., 0, 0]  # offset + start of each fragment
    which, start = (first // 1000).astype(int), (first % 1000).astype(int)
    steps = start[..., None] + np.arange(10)
    np.testing.assert_array_equal(pairs.obs[..., 0], 1000 * which[..., None] + steps)
    np.testing.assert_array_equal(pairs.next_obs[..., 0], pairs.obs[..., 0] + 1)
    np.testing.assert_array_equal(pairs.rews, pairs.obs[..., 0])
    np.testing.assert_array_equal(pairs.acts, steps % 2)
    # terminal only where the fragment reaches the end of its (terminal) trajectory
    np.testing.assert_array_equal(pairs.dones, steps == 29)


def test_short_trajectories_dropped_and_error_when_none_fit(caplog):
    trajs = [trajectory(5), trajectory(20, offset=100)]
    with caplog.at_level("INFO"):
        pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(trajs, 10, 8)
    assert (pairs.obs >= 100).all() and "dropped 1 of 2" in caplog.text
    with pytest.raises(RunError, match=r"fragment_length \(50\) is longer than every sampled trajectory"):
        RandomFragmenter(np.random.default_rng(0))(trajs, 50, 2)


def test_warns_when_fragments_would_overlap(caplog):
    RandomFragmenter(np.random.default_rng(0))([trajectory(40)], 10, 5)
    assert "will overlap" in caplog.text


@pytest.mark.parametrize("uncertainty_on", ["logit", "probability", "label", "entropy"])
def test_active_selection_keeps_the_most_disputed_pairs(uncertainty_on):
    net = RewardNet(*spaces(1), members=4, input_clip=None)
    base = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)
    active = ActiveSelectionFragmenter(base, net, fragment_sample_factor=5, uncertainty_on=uncertainty_on)
    trajs = [trajectory(60, offset=i) for i in range(6)]
    candidates = RandomFragmenter(np.random.default_rng(1), warning_threshold=0)(trajs, 8, 50)
    # Reference scores, one pair at a time.
    scores = []
    for i in range(len(candidates)):
        with torch.no_grad():
            returns = net(*candidates[i:i + 1].tensors())[:, 0].sum(-1)  # (members, 2)
        diff = returns[:, 0] - returns[:, 1]
        prob = preference_logprobs(returns)[0].exp()
        votes = (prob > 0.5).float().mean()
        first, second = torch.nn.functional.logsigmoid(diff), torch.nn.functional.logsigmoid(-diff)
        entropy = -(first.exp() * first + second.exp() * second).mean()  # each member's, then their mean
        scores.append({"logit": diff.var(), "probability": prob.var(), "label": votes * (1 - votes),
                       "entropy": entropy}[uncertainty_on])
    np.testing.assert_allclose(active.disagreement(candidates), torch.stack(scores).numpy(), rtol=1e-5, atol=1e-7)
    active.base = lambda *_: candidates
    chosen = active(trajs, 8, 10)
    top = np.sort(torch.stack(scores).numpy())[::-1][:10]
    np.testing.assert_allclose(np.sort(active.disagreement(chosen))[::-1], top, rtol=1e-5, atol=1e-7)


def test_active_selection_refuses_single_net_and_bad_measure():
    base = RandomFragmenter(np.random.default_rng(0))
    with pytest.raises(ValueError, match="ensemble"):
        ActiveSelectionFragmenter(base, RewardNet(*spaces(1), members=1))
    with pytest.raises(ValueError, match="uncertainty_on"):
        ActiveSelectionFragmenter(base, RewardNet(*spaces(1), members=2), uncertainty_on="variance")


def test_active_selection_asks_its_base_for_factor_times_the_pairs():
    asked = []

    class SpyBase(RandomFragmenter):
        def __call__(self, trajectories, fragment_length, num_pairs):
            asked.append(num_pairs)
            return super().__call__(trajectories, fragment_length, num_pairs)

    trajs = [trajectory(40, offset=10 * i) for i in range(5)]
    active = ActiveSelectionFragmenter(SpyBase(np.random.default_rng(0), warning_threshold=0),
                                       RewardNet(*spaces(1), members=3), fragment_sample_factor=2.5)
    assert len(active(trajs, 8, 7)) == 7 and asked == [18]  # ceil(2.5 * 7)


def test_entropy_selection_picks_the_pairs_whose_preference_is_least_certain():
    # One state feature, reward = w_m * obs: a pair's returns differ by w_m * (sum of its first fragment's
    # observations - the second's), so pairs with equal sums are the most uncertain and far-apart sums the least.
    net = RewardNet(*spaces(1), members=3, hidden_sizes=[], use_action=False, input_clip=None, normalize_input=False)
    with torch.no_grad():
        net.body.biases[-1].zero_()
        net.body.weights[-1][:] = torch.tensor([1.0, 1.5, 2.0]).view(3, 1, 1)
    trajs = [trajectory(8, offset=10 * i) for i in range(6)]
    pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(trajs, 2, 40)
    gap = np.abs(pairs.obs[:, 0].sum((1, 2)) - pairs.obs[:, 1].sum((1, 2)))
    active = ActiveSelectionFragmenter(RandomFragmenter(np.random.default_rng(0)), net, uncertainty_on="entropy")
    active.base = type("Fixed", (), {"__call__": lambda self, *_: pairs})()
    chosen = active(trajs, 2, 5)
    chosen_gap = np.abs(chosen.obs[:, 0].sum((1, 2)) - chosen.obs[:, 1].sum((1, 2)))
    assert sorted(chosen_gap) == sorted(np.sort(gap)[:5])  # the five closest pairs, whichever members say it


def test_uniform_pairs_come_from_the_base_without_selection_or_warning(caplog):
    trajs = [trajectory(40, offset=10 * i) for i in range(2)]
    active = ActiveSelectionFragmenter(RandomFragmenter(np.random.default_rng(3)), RewardNet(*spaces(1), members=2))
    expected = RandomFragmenter(np.random.default_rng(3))(trajs, 10, 30)
    caplog.clear()
    pairs = active.uniform(trajs, 10, 30)  # 600 of 80 transitions: they overlap, as unlabelled pairs may
    np.testing.assert_array_equal(pairs.obs, expected.obs)
    assert "overlap" not in caplog.text
