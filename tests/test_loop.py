import pytest
from helpers import trajectory

from rlhp.loop import VariableHorizonError, check_fixed_horizon


def test_fixed_horizon_check():
    lengths: dict[int, bool] = {}
    check_fixed_horizon([trajectory(10), trajectory(10, terminal=True)], lengths)
    check_fixed_horizon([trajectory(10)], lengths)
    with pytest.raises(VariableHorizonError, match="leaks the reward"):
        check_fixed_horizon([trajectory(7, terminal=True)], lengths)
    # Time-limit truncations of different lengths alone are no leak.
    check_fixed_horizon([trajectory(3), trajectory(5)], {})
