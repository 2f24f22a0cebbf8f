"""Trajectory sources: the agent being trained on the learned reward, or a fixed dataset."""

from rlhp.sources.agent import AgentTrainer
from rlhp.sources.base import Agent, AgentReport, NoAgent, TrajectorySource, take
from rlhp.sources.dataset import DatasetSource
from rlhp.sources.demos import DemoSource
from rlhp.sources.offline import OfflineAgent
from rlhp.sources.reward_env import RewardVecEnvWrapper

__all__ = ["Agent", "AgentReport", "AgentTrainer", "DatasetSource", "DemoSource", "NoAgent", "OfflineAgent",
           "RewardVecEnvWrapper", "TrajectorySource", "take"]
