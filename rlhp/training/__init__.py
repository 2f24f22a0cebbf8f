"""Reward-model training on preferences, and the parts that change what it learns from: crops of the
fragments, pseudo-labels on unlabelled pairs, which labels it believes, and what its features learn from the
fragments' dynamics."""

from rlhp.training.augment import Crop, TemporalCrop, WholeFragments
from rlhp.training.dynamics import NextInputPrediction, NoSelfSupervision, SelfSupervision
from rlhp.training.filters import DropContradicted, KeepAll, LabelFilter
from rlhp.training.pseudo import NoPseudoLabels, PseudoLabeller, PseudoLabels
from rlhp.training.trainer import PairScores, RewardTrainer, summarise

__all__ = ["Crop", "DropContradicted", "KeepAll", "LabelFilter", "NextInputPrediction", "NoPseudoLabels",
           "NoSelfSupervision", "PairScores", "PseudoLabeller", "PseudoLabels", "RewardTrainer", "SelfSupervision",
           "TemporalCrop", "WholeFragments", "summarise"]
