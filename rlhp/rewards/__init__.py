"""Rewards an agent trains on: the learned reward nets (MLP and CNN bodies, Preference Transformer) and the env's
own reward."""

from rlhp.rewards.agent_reward import AgentReward, EnvReward
from rlhp.rewards.bodies import BatchedCNN, BatchedMLP
from rlhp.rewards.cnn import CnnRewardNet
from rlhp.rewards.net import RewardInputs, RewardNet, reward_correlation
from rlhp.rewards.norm import RunningNorm
from rlhp.rewards.transformer import PreferenceTransformer

__all__ = ["AgentReward", "BatchedCNN", "BatchedMLP", "CnnRewardNet", "EnvReward", "PreferenceTransformer",
           "RewardInputs", "RewardNet", "RunningNorm", "reward_correlation"]
