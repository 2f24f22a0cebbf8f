"""The data that flows through rlhp: trajectories, fragment pairs, preferences, and their storage."""

from rlhp.data.hf import dataset_to_trajectories, load_trajectories, save_trajectories, trajectories_to_dataset
from rlhp.data.pairs import FragmentPairs
from rlhp.data.preferences import PreferenceDataset
from rlhp.data.rankings import RankedClips
from rlhp.data.ratings import RatingDataset
from rlhp.data.trajectory import Trajectory, TrajectoryRecorder

__all__ = [
    "FragmentPairs",
    "PreferenceDataset",
    "RankedClips",
    "RatingDataset",
    "Trajectory",
    "TrajectoryRecorder",
    "dataset_to_trajectories",
    "load_trajectories",
    "save_trajectories",
    "trajectories_to_dataset",
]
