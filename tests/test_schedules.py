import numpy as np
import pytest
from helpers import composed
from hypothesis import given
from hypothesis import strategies as st

from rlhp.errors import ArgumentError, ConfigError
from rlhp.experiment.config import build
from rlhp.loop.schedules import (
    Constant,
    FirstRounds,
    Hyperbolic,
    InverseQuadratic,
    Until,
    apportion,
    comparison_schedule,
)


def test_apportion_largest_remainder_by_hand():
    # 10 * [1, 1, 1] / 3 = 3.33 each: floors 3, 3, 3 and the one leftover goes to the first.
    assert apportion(10, np.array([1.0, 1.0, 1.0])).tolist() == [4, 3, 3]
    # exact shares 1.5, 2.5, 6.0 (sum 10): floors 1, 2, 6 leave 1; remainders .5/.5 -> first wins
    assert apportion(10, np.array([1.5, 2.5, 6.0])).tolist() == [2, 2, 6]


@given(st.integers(0, 10_000), st.lists(st.floats(0.01, 100), min_size=1, max_size=50))
def test_apportion_sums_exactly_and_stays_close(total, weights):
    shares = apportion(total, np.array(weights))
    exact = total * np.array(weights) / np.sum(weights)
    assert shares.sum() == total
    assert np.all(np.abs(shares - exact) < 1)


def test_hyperbolic_schedule_by_hand():
    # 100 comparisons, 10% initial; 3 iterations at t = 0, .5, 1: f = 1, 2/3, 1/2 (sum 13/6)
    # 90 * (6/13, 4/13, 3/13) = 41.54, 27.69, 20.77 -> floors 41, 27, 20 (88); +1 to .77 and .69
    assert comparison_schedule(100, 0.1, 4, Hyperbolic()) == [10, 41, 28, 21]


def test_constant_and_inverse_quadratic():
    assert comparison_schedule(50, 0.0, 6, Constant()) == [0, 10, 10, 10, 10, 10]
    # t = 0, 1: f = 1, 1/2 -> 20 * (2/3, 1/3) = 13.33, 6.67 -> 13 + 1 to the larger remainder
    assert comparison_schedule(20, 0.0, 3, InverseQuadratic()) == [0, 13, 7]


def test_until_queries_b_prefs_batches_then_stops():
    # B-Pref's walker-walk at 100 labels: 10 a round every 20k of 500k steps until the budget is spent.
    # 25 rounds: round 0 takes 10, rounds 1-24 sit at t = 0, 1/23, ...; t <= 0.35 holds for rounds 1-9.
    assert comparison_schedule(100, 0.1, 25, Until(0.35)) == [10] * 10 + [0] * 15
    # A shorter run keeps the shape: the labels still go in the first 35% of its rounds.
    assert comparison_schedule(100, 0.1, 5, Until(0.35)) == [10, 45, 45, 0, 0]
    assert comparison_schedule(30, 0.0, 4, Until(0.0)) == [0, 30, 0, 0]


@pytest.mark.parametrize("until", [-0.1, 1.5, float("nan")])
def test_until_outside_the_run_is_refused(until):
    with pytest.raises(ArgumentError, match="^until must"):
        Until(until)


def test_first_rounds_queries_b_prefs_batches_in_the_rounds_counted_then_stops():
    # Window-open at 400 labels: 50 in round 0, then 50 in each of rounds 1-7 of 200.
    assert comparison_schedule(400, 0.125, 200, FirstRounds(7)) == [50] * 8 + [0] * 192
    # Cut to 60 rounds, the labelled rounds stay the first ones, with the same batches.
    assert comparison_schedule(400, 0.125, 60, FirstRounds(7)) == [50] * 8 + [0] * 52
    # A run with fewer rounds than counted spreads the budget over all of them.
    assert comparison_schedule(20, 0.0, 3, FirstRounds(7)) == [0, 10, 10]


@pytest.mark.parametrize("rounds", [0, -3, 2.5, True, "7"])
def test_first_rounds_must_be_a_whole_positive_count(rounds):
    with pytest.raises(ArgumentError, match="^rounds must"):
        FirstRounds(rounds)


@pytest.mark.parametrize(("option", "key", "value"), [("until", "until", 2), ("first_rounds", "rounds", 0)])
def test_a_refused_schedule_names_its_config_key_once(option, key, value):
    cfg = composed("train", [f"query_schedule={option}", f"query_schedule.{key}={value}"])
    with pytest.raises(ConfigError, match=rf"^config key `query_schedule\.{key}` must"):
        build(cfg.query_schedule)


@pytest.mark.parametrize("schedule", [Constant(), Hyperbolic(), InverseQuadratic(), Until(0.5), FirstRounds(12)])
def test_schedules_total(schedule):
    plan = comparison_schedule(500, 0.3, 21, schedule)
    assert len(plan) == 21 and sum(plan) == 500 and plan[0] == 150


def test_the_initial_share_is_rounded_not_truncated():
    assert 100 * 0.57 < 57  # floating point: 56.99999999999999
    assert comparison_schedule(100, 0.57, 3, Constant())[0] == 57
    assert comparison_schedule(10, 0.25, 3, Constant())[0] == 2  # a tie rounds to even, as Python's round
