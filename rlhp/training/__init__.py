"""Reward-model training on preferences, and the parts that change what it learns from: crops of the
fragments, pseudo-labels on unlabelled pairs, which labels it believes, which a pass covers, and what it learns
before its first label."""

from rlhp.training.augment import Crop, TemporalCrop, WholeFragments
from rlhp.training.filters import DropContradicted, Judgement, KeepAll, LabelFilter, TrustAndFlip
from rlhp.training.pseudo import NoPseudoLabels, PseudoLabelled, PseudoLabeller, PseudoLabels
from rlhp.training.replay import AllLabels, LabelReplay, RecentWindow
from rlhp.training.trainer import PairScores, RewardTrainer, summarise
from rlhp.training.warm_start import IntrinsicWarmStart, NoWarmStart, WarmStart

__all__ = ["AllLabels", "Crop", "DropContradicted", "IntrinsicWarmStart", "Judgement", "KeepAll", "LabelFilter",
           "LabelReplay", "NoPseudoLabels", "NoWarmStart", "PairScores", "PseudoLabelled", "PseudoLabeller",
           "PseudoLabels", "RecentWindow", "RewardTrainer", "TemporalCrop", "TrustAndFlip", "WarmStart",
           "WholeFragments", "summarise"]
