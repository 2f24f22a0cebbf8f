"""Feedback: querents publish fragment pairs as queries, gatherers return the labelled ones."""

from rlhp.feedback.gatherer import Answers, OracleGatherer, PreferenceGatherer
from rlhp.feedback.human import HumanGatherer
from rlhp.feedback.mixed import MixedGatherer
from rlhp.feedback.querent import Querent, WebQuerent
from rlhp.feedback.ranked import RankedGatherer
from rlhp.feedback.synthetic import SyntheticGatherer

__all__ = ["Answers", "HumanGatherer", "MixedGatherer", "OracleGatherer", "PreferenceGatherer", "Querent",
           "RankedGatherer", "SyntheticGatherer", "WebQuerent"]
