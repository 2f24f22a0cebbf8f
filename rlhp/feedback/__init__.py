"""Feedback: querents give fragment pairs ids as queries, gatherers return the labelled ones (synthetic,
ranked and mixed teachers; people are in :mod:`rlhp.human`)."""

from rlhp.feedback.gatherer import Answers, OracleGatherer, PreferenceGatherer, Ratings
from rlhp.feedback.label_file import LabelFileGatherer
from rlhp.feedback.mixed import MixedGatherer
from rlhp.feedback.querent import Querent
from rlhp.feedback.ranked import RankedGatherer
from rlhp.feedback.synthetic import SyntheticGatherer

__all__ = ["Answers", "LabelFileGatherer", "MixedGatherer", "OracleGatherer", "PreferenceGatherer", "Querent",
           "RankedGatherer", "Ratings", "SyntheticGatherer"]
