"""Trajectory sources: the agent being trained on the learned reward, or a fixed dataset."""

from rlhp.sources.agent import AgentTrainer
from rlhp.sources.base import Agent, AgentReport, NoAgent, TrajectorySource, take
from rlhp.sources.dataset import DatasetSource
from rlhp.sources.demos import DemoSource
from rlhp.sources.reward_env import RewardVecEnvWrapper

__all__ = ["Agent", "AgentReport", "NoAgent", "AgentTrainer", "DatasetSource", "DemoSource", "RewardVecEnvWrapper",
           "TrajectorySource", "take"]
