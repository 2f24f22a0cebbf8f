import time

import numpy as np
import pytest
from helpers import random_pairs

from rlhp.errors import ArgumentError
from rlhp.feedback import Querent, SyntheticGatherer
from rlhp.human.querent import MAX_INSTRUCTIONS, read_instructions


def with_returns(r1: list[float], r2: list[float]):
    pairs = random_pairs(len(r1), length=2)
    pairs.rews[:, 0] = np.array(r1, np.float32)[:, None] / 2
    pairs.rews[:, 1] = np.array(r2, np.float32)[:, None] / 2
    return pairs


def test_temperature_zero_is_deterministic_with_ties_at_half():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False)
    assert g.probabilities(with_returns([3, 1, 2], [1, 3, 2])).tolist() == [1.0, 0.0, 0.5]


def test_temperature_scales_the_difference():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=2.0, sample=False)
    assert g.probabilities(with_returns([4], [0]))[0] == pytest.approx(1 / (1 + np.exp(-2.0)), rel=1e-12)


def test_sampled_labels_are_binary_and_follow_the_probability():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=1.0, sample=True)
    pairs = with_returns([1.0] * 4000, [0.0] * 4000)
    answered, labels, ids = gathered(g, pairs)
    assert set(np.unique(labels)) == {0.0, 1.0} and labels.dtype == np.float32
    assert abs(labels.mean() - 1 / (1 + np.exp(-1))) < 0.03
    assert g.pending is None and len(ids) == 4000
    assert 0 < g.last_entropy < 1


def test_querent_ids_are_unique_across_calls():
    q = Querent()
    assert np.concatenate([q(random_pairs(3)), q(random_pairs(2))]).tolist() == [0, 1, 2, 3, 4]


def gathered(gatherer, pairs):
    gatherer.add(pairs, Querent()(pairs))
    answers = gatherer()
    return answers.pairs, answers.labels, answers.ids


def test_the_mistake_teacher_flips_its_share_of_labels():
    rng = np.random.default_rng(0)
    r1, r2 = rng.normal(size=10_000), rng.normal(size=10_000)
    g = SyntheticGatherer(np.random.default_rng(1), temperature=0, sample=False, mistake=0.2)
    answered, labels, _ = gathered(g, with_returns(list(r1), list(r2)))
    wrong = labels != (r1 > r2).astype(np.float32)
    assert abs(wrong.mean() - 0.2) < 0.01  # within 1 point of the setting over 10,000 labels


def test_the_myopic_teacher_weighs_later_steps_more():
    pairs = random_pairs(2, length=4)
    pairs.rews[:] = 0
    pairs.rews[:, 0, 0] = 1.0  # the first fragment earns early
    pairs.rews[:, 1, 3] = 1.0  # the second as much, late
    perfect = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False)
    myopic = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, myopic_gamma=0.9)
    assert gathered(perfect, pairs)[1].tolist() == [0.5, 0.5] and gathered(myopic, pairs)[1].tolist() == [0.0, 0.0]


def test_the_skip_teacher_skips_pairs_that_both_return_little_and_never_trains_on_them():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.1)
    answered, labels, ids = gathered(g, with_returns([10, 0.5, 0.2, 3], [0, 0.4, 0.9, 0]))
    # Returns span 0 to 10, so pairs whose better fragment returns under 1 are skipped: answered
    # "can't tell" (NaN), which the loop keeps in the journal and never trains on.
    assert ids.tolist() == [0, 1, 2, 3] and g.pending is None
    assert labels[[0, 3]].tolist() == [1.0, 1.0] and np.isnan(labels[[1, 2]]).all()
    assert g.metrics()["labels_skipped"] == 2


def test_the_equal_teacher_ties_close_returns():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, equal_frac=0.1)
    _, labels, _ = gathered(g, with_returns([10, 5, 5, 2], [0, 5.5, 4.5, 3.5]))
    assert labels.tolist() == [1.0, 0.5, 0.5, 0.0]  # within 1 (10% of the range, 0 to 10) of each other: equal


def test_where_every_return_is_negative_the_skip_teacher_skips_only_the_lowest_share_of_the_range():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.1)
    # Pendulum-like returns from -900 to -50: the lowest 10% of that range is under -815.
    labels = gathered(g, with_returns([-850, -100, -50], [-890, -120, -900]))[1]
    assert np.isnan(labels[0]) and labels[1:].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("shift", [-1000.0, 1000.0])
def test_the_skip_and_equal_teachers_answer_alike_when_every_return_moves_by_a_constant(shift):
    first, second = np.array([10, 0.5, 0.2, 3, 5, 5]), np.array([0, 0.4, 0.9, 0, 5.5, 3.8])
    answers = []
    for offset in (0.0, shift):
        g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.1, equal_frac=0.1)
        answers.append(gathered(g, with_returns(first + offset, second + offset))[1])
    np.testing.assert_array_equal(*answers)
    assert np.isnan(answers[0]).sum() == 2 and (answers[0] == 0.5).sum() == 1


def test_a_teacher_answers_everything_added_since_it_was_last_asked_in_typed_fields():
    gatherer = SyntheticGatherer(np.random.default_rng(0), sample=False)
    empty = gatherer()  # nothing pending: an empty answer of the same types as a full one
    assert empty.labels.dtype == np.float32 and empty.labels.shape == (0,) and empty.ids.dtype == np.int64
    assert len(empty) == 0 and empty.annotators == [] and empty.times.shape == (0,)
    pairs = random_pairs(6)
    gatherer.add(pairs[:2], np.array([7, 8]))
    gatherer.add(pairs[2:], np.array([9, 10, 11, 12]))  # added again before anyone asked
    before = time.time()
    answers = gatherer()
    assert answers.ids.tolist() == [7, 8, 9, 10, 11, 12] and answers.ids.dtype == np.int64
    np.testing.assert_array_equal(answers.pairs.obs, pairs.obs)
    assert answers.annotators == ["synthetic"] * 6 and answers.times.shape == (6,)
    assert before <= answers.times.min() <= answers.times.max() <= time.time()
    assert gatherer.num_pending() == 0 and len(gatherer()) == 0


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"temperature": -0.1}, "temperature"), ({"mistake": -0.1}, "mistake"), ({"mistake": 1.5}, "mistake"),
    ({"skip_frac": 1.5}, "skip_frac"), ({"equal_frac": 1.5}, "equal_frac"), ({"myopic_gamma": 0.0}, "myopic_gamma"),
    ({"myopic_gamma": 1.5}, "myopic_gamma"),
])
def test_values_outside_a_teachers_ranges_are_refused_by_name(kwargs, name):
    with pytest.raises(ArgumentError) as err:
        SyntheticGatherer(np.random.default_rng(0), **kwargs)
    assert err.value.argument == name and "must" in err.value.problem


def test_the_ends_of_a_teachers_ranges_are_accepted():
    SyntheticGatherer(np.random.default_rng(0), temperature=0, mistake=1, skip_frac=1, equal_frac=1, myopic_gamma=1)


def test_a_teacher_samples_binary_labels_unless_told_otherwise():
    labels = gathered(SyntheticGatherer(np.random.default_rng(0)), with_returns([1.0] * 50, [0.0] * 50))[1]
    assert set(labels.tolist()) == {0.0, 1.0}


def test_a_coin_flipping_teacher_without_temperature_moves_each_label_towards_half():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, noise_prob=0.2)
    np.testing.assert_allclose(g.probabilities(with_returns([3, 1, 2], [1, 3, 2])), [0.9, 0.1, 0.5])


def test_the_teachers_clip_discount_and_myopia_are_its_own():
    pairs = random_pairs(1, length=3)
    pairs.rews[:] = [[[1.0, 2.0, 4.0], [0.0, 0.0, 0.0]]]
    discounted = SyntheticGatherer(np.random.default_rng(0), discount_factor=0.5, sample=False)
    assert discounted.returns(pairs)[0, 0].item() == 1 + 0.5 * 2 + 0.25 * 4
    myopic = SyntheticGatherer(np.random.default_rng(0), myopic_gamma=0.3, sample=False)
    assert myopic.returns(pairs)[0, 0].item() == pytest.approx(0.3**2 * 1 + 0.3 * 2 + 4, rel=1e-14)
    clipped = SyntheticGatherer(np.random.default_rng(0), threshold=2.0, sample=False)
    assert clipped.probabilities(pairs)[0] == pytest.approx(1 / (1 + np.exp(-2.0)), rel=1e-12)


def test_a_teachers_figures_before_it_answered_and_for_certain_labels():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.5)
    assert np.isnan(g.metrics()["label_entropy"]) and g.metrics()["labels_skipped"] == 0
    gathered(g, with_returns([3, 1], [1, 3]))
    assert g.metrics()["label_entropy"] == pytest.approx(0.0, abs=1e-9)  # certain labels carry no entropy


def test_the_first_answers_scale_ties_by_their_own_range_of_returns():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, equal_frac=0.5)
    # Returns span 0.1 to 0.3, so returns within 0.1 of each other are equal; nothing seen before counts.
    assert gathered(g, with_returns([0.3, 0.3], [0.25, 0.1]))[1].tolist() == [0.5, 1.0]


def test_returns_exactly_the_tie_margin_apart_are_not_equal():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, equal_frac=0.5)
    assert gathered(g, with_returns([4], [2]))[1].tolist() == [1.0]  # margin 0.5 x 4 = 2: not within it


def test_a_teacher_without_true_rewards_says_so():
    pairs = random_pairs(2)
    pairs.rews[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="needs true rewards, and some fragments have none"):
        SyntheticGatherer(np.random.default_rng(0)).returns(pairs)


def test_a_teacher_who_always_errs_flips_every_label_and_reports_only_its_own_figures():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, mistake=1.0)
    assert gathered(g, with_returns([3, 1, 2], [1, 3, 2]))[1].tolist() == [0.0, 1.0, 0.5]
    assert set(g.metrics()) == {"label_entropy"}  # no skipped count from a teacher that never skips


def test_the_label_entropy_is_the_mean_binary_entropy_of_the_probabilities():
    g = SyntheticGatherer(np.random.default_rng(0), sample=False)
    gathered(g, with_returns([1.0, 0.0], [0.0, 0.0]))
    p = 1 / (1 + np.exp(-1.0))
    assert g.metrics()["label_entropy"] == pytest.approx((-(p * np.log2(p) + (1 - p) * np.log2(1 - p)) + 1) / 2)


def test_a_pair_whose_better_return_is_exactly_the_skip_margin_is_answered():
    g = SyntheticGatherer(np.random.default_rng(0), temperature=0, sample=False, skip_frac=0.5)
    labels = gathered(g, with_returns([4, 2, 1], [0, 0, 0]))[1]  # margin 0 + 0.5 x (4 - 0) = 2
    assert labels[:2].tolist() == [1.0, 1.0] and np.isnan(labels[2])


def test_instructions_are_the_text_itself_or_the_file_it_names(tmp_path):
    task = tmp_path / "Backflip.MD"
    task.write_text("# Backflip\n\nPrefer the clip that **rotates backwards** more.\n", encoding="utf-8")
    assert read_instructions(f"  {task}  ") == "# Backflip\n\nPrefer the clip that **rotates backwards** more."
    assert read_instructions("Prefer the higher hop.") == "Prefer the higher hop."
    text = f"See {task}\nfor the details.md"  # several lines: text, even if it ends like a file name
    assert read_instructions(text) == text
    assert read_instructions("") == ""
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ArgumentError, match="^instructions '.*latin1.txt' cannot be read as UTF-8 text"):
        read_instructions(str(tmp_path / "latin1.txt"))
    (tmp_path / "folder.md").mkdir()
    not_a_file = r"^instructions names '.*{}', which is not a file \(give the text itself or the path of a .md or .txt"
    with pytest.raises(ArgumentError, match=not_a_file.format("folder.md")):
        read_instructions(str(tmp_path / "folder.md"))
    with pytest.raises(ArgumentError, match=not_a_file.format("notes.md")):
        read_instructions(str(tmp_path / "notes.md"))
    read_instructions("x" * MAX_INSTRUCTIONS)
    too_long = f"^instructions are {MAX_INSTRUCTIONS + 1:,} characters; at most {MAX_INSTRUCTIONS:,}, a page a person"
    with pytest.raises(ArgumentError, match=too_long):
        read_instructions("x" * (MAX_INSTRUCTIONS + 1))
    with pytest.raises(ArgumentError, match="^instructions must be text or a file name, got 5$"):
        read_instructions(5)
