"""Feedback: querents publish fragment pairs as queries, gatherers return the labelled ones."""

from rlhp.feedback.gatherer import Answered, PreferenceGatherer
from rlhp.feedback.querent import Querent
from rlhp.feedback.ranked import RankedGatherer
from rlhp.feedback.synthetic import SyntheticGatherer

__all__ = ["Answered", "PreferenceGatherer", "Querent", "RankedGatherer", "SyntheticGatherer"]
