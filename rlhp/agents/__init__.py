"""The agent: what the loop trains on the learned reward (an SB3 or SBX algorithm on env copies, or an offline
learner on a dataset), and what only the agent uses (its reward wrapper, exploration, replay, policies)."""

from rlhp.agents.agent import AgentTrainer
from rlhp.agents.base import Agent, AgentReport, NoAgent, TrajectorySource, take
from rlhp.agents.offline import OfflineAgent
from rlhp.agents.reward_env import RewardVecEnvWrapper

__all__ = ["Agent", "AgentReport", "AgentTrainer", "NoAgent", "OfflineAgent", "RewardVecEnvWrapper",
           "TrajectorySource", "take"]
