"""Trajectories and their storage as Hugging Face datasets."""

from rlhp.data.hf import dataset_to_trajectories, load_trajectories, save_trajectories, trajectories_to_dataset
from rlhp.data.pairs import FragmentPairs
from rlhp.data.trajectory import Trajectory, TrajectoryRecorder

__all__ = [
    "FragmentPairs",
    "Trajectory",
    "TrajectoryRecorder",
    "dataset_to_trajectories",
    "load_trajectories",
    "save_trajectories",
    "trajectories_to_dataset",
]
