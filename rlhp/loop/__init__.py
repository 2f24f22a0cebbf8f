"""The loop: rounds of reward learning (an optional part) and agent training, the fragmenters that cut
pairs from the sampled trajectories, and the schedules of how many pairs each round queries."""

from rlhp.loop.asynchronous import AsynchronousPreferenceLearning
from rlhp.loop.learning import PreferenceLearning, RewardLearning, check_fixed_horizon
from rlhp.loop.rounds import Callback, Loop, Metrics, PhaseClock, RoundResult

__all__ = ["AsynchronousPreferenceLearning", "Callback", "Loop", "Metrics", "PhaseClock", "PreferenceLearning",
           "RewardLearning", "RoundResult", "check_fixed_horizon"]
