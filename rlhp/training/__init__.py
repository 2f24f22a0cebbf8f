"""Reward-model training on preferences, and the parts that change what it learns from: crops of the
fragments, pseudo-labels on unlabelled pairs, and which labels it believes."""

from rlhp.training.augment import Crop, TemporalCrop, WholeFragments
from rlhp.training.filters import DropContradicted, KeepAll, LabelFilter
from rlhp.training.pseudo import NoPseudoLabels, PseudoLabelled, PseudoLabeller, PseudoLabels
from rlhp.training.trainer import PairScores, RewardTrainer, summarise

__all__ = ["Crop", "DropContradicted", "KeepAll", "LabelFilter", "NoPseudoLabels", "PairScores", "PseudoLabelled",
           "PseudoLabeller", "PseudoLabels", "RewardTrainer", "TemporalCrop", "WholeFragments", "summarise"]
