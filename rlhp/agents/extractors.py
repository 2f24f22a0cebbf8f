"""Feature extractors for SB3 policies on inputs its own CnnPolicy cannot take (MinAtar's 10x10 frames)."""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class SmallGridCNN(BaseFeaturesExtractor):
    """One 3x3 convolution of 16 filters and a dense layer, MinAtar's own DQN network (Young & Tian 2019).

    SB3's NatureCNN needs frames of at least 36 pixels a side; MinAtar's are 10x10, a channel per kind of
    object. Give it with ``policy_kwargs: {features_extractor_class: ..., normalize_images: false}``.
    """

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128, filters: int = 16) -> None:
        super().__init__(observation_space, features_dim)
        channels, height, width = observation_space.shape
        self.net = nn.Sequential(nn.Conv2d(channels, filters, 3), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(filters * (height - 2) * (width - 2), features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """(N, channels, height, width) -> (N, features_dim)."""
        return self.net(observations)
