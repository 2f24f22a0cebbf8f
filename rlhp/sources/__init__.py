"""Trajectory sources besides an agent being trained (:class:`rlhp.agents.AgentTrainer`): a fixed dataset, or
demonstrations mixed into an agent's own episodes."""

from rlhp.agents.base import TrajectorySource
from rlhp.sources.dataset import DatasetSource
from rlhp.sources.demos import DemoSource

__all__ = ["DatasetSource", "DemoSource", "TrajectorySource"]
