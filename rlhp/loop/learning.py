"""What a round learns before the agent trains: nothing (the true-reward ceiling), or a reward model from
preferences (sample, fragment, query, gather, train the reward), each part saving what it holds."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlhp.data import PreferenceDataset, RankedClips, RatingDataset, Trajectory
from rlhp.envs.base import FIXED_HORIZON_ADVICE
from rlhp.errors import ArgumentError, VariableHorizonError
from rlhp.feedback import PreferenceGatherer, Querent
from rlhp.loop.fragmenters import Fragmenter
from rlhp.loop.pools import THIS_ROUND, QueryPool
from rlhp.loop.rounds import Callback, PhaseClock, RewardLearning, RoundResult, check_finite
from rlhp.rewards import RewardNet, reward_correlation
from rlhp.sources import TrajectorySource
from rlhp.training import RewardTrainer


def check_fixed_horizon(trajectories: list[Trajectory], lengths: dict[int, bool],
                        remedy: str = FIXED_HORIZON_ADVICE) -> None:
    """Record episode lengths (-> whether one ended by termination); raise if a terminated
    episode's length differs from another episode's, saying ``remedy``."""
    for t in trajectories:
        lengths[len(t)] = lengths.get(len(t), False) or t.terminal
    if len(lengths) > 1 and any(lengths.values()):
        ended = sorted(n for n, terminal in lengths.items() if terminal)
        raise VariableHorizonError(
            f"episodes ended by termination at different lengths (terminated at {ended[:5]}, "
            f"all lengths seen {sorted(lengths)[:5]}). "
            "When the episode length depends on the policy, it leaks the reward: a fragment's "
            "length says how well the agent did, and any positive learned reward 'solves' the "
            f"task. To fix it, {remedy}; or set allow_variable_horizon=true if you know the risks.")


REWARD_UPDATES = ("every_round", "new_labels")
"""When the reward model trains: in every round, on every label so far (the paper's loop), or only in rounds whose
gathering brought new labels (B-Pref's: once its label budget is spent, the reward stays as it is)."""


class PreferenceLearning(RewardLearning):
    """Each round: sample trajectories, cut fragment pairs, publish them as queries, gather the answered ones
    into the preference dataset, and train the reward model on every label so far.

    Args:
        source: where trajectories come from (agent trainer or fixed dataset).
        fragmenter, querent, gatherer: choose pairs, publish them, collect their labels.
        dataset: the labelled pairs.
        reward_trainer: fits the reward net to the dataset (and asks for unlabelled pairs, with SURF).
        reward_net_config: the config that built the reward net, saved beside its weights.
        schedule: comparisons to query per round, round 0 first (see ``comparison_schedule``).
        fragment_length: steps per fragment.
        transition_oversampling: sample this many times the transitions the fragments need.
        initial_epoch_multiplier: round 0 trains the reward model this many times longer.
        allow_variable_horizon: accept terminal episodes of different lengths.
        horizon_remedy: what makes the env's episodes run to its time limit, said when they do not.
        pool: the episodes a round's pairs are cut from (the round's own sample, or a window across rounds).
        reward_updates: ``every_round`` or ``new_labels`` (:data:`REWARD_UPDATES`).
    """

    learns = True
    ratings: RatingDataset | None = None
    """The clips people rated, once some are (then the reward learns from them beside the pairs)."""
    ranking: RankedClips | None = None
    """The ranking people build, as it stands, where it is trained on as a list (then its pairs are not)."""

    def __init__(self, source: TrajectorySource, fragmenter: Fragmenter, querent: Querent,
                 gatherer: PreferenceGatherer, dataset: PreferenceDataset, reward_trainer: RewardTrainer,
                 reward_net_config: dict[str, Any], schedule: list[int], fragment_length: int,
                 transition_oversampling: float = 1.0, initial_epoch_multiplier: float = 200.0,
                 allow_variable_horizon: bool = False,
                 horizon_remedy: str = FIXED_HORIZON_ADVICE, pool: QueryPool = THIS_ROUND,
                 reward_updates: str = "every_round") -> None:
        if reward_updates not in REWARD_UPDATES:
            raise ArgumentError("reward_updates", f"must be one of {', '.join(REWARD_UPDATES)}, got {reward_updates!r}")
        self.reward_updates = reward_updates
        """When the reward trains (:data:`REWARD_UPDATES`)."""
        self.new_labels = False
        """Whether this round's gathering brought a label (a pair's, a rating or a ranking)."""
        self.source, self.fragmenter, self.querent, self.gatherer = source, fragmenter, querent, gatherer
        self.dataset, self.reward_trainer, self.reward_net_config = dataset, reward_trainer, reward_net_config
        self.schedule = schedule
        self.fragment_length = fragment_length
        self.transition_oversampling = transition_oversampling
        self.initial_epoch_multiplier = initial_epoch_multiplier
        self.allow_variable_horizon, self.horizon_remedy = allow_variable_horizon, horizon_remedy
        self.episode_lengths: dict[int, bool] = {}
        self.pool = pool

    def learn(self, result: RoundResult, clock: PhaseClock, callbacks: Sequence[Callback]) -> None:
        """Sample, fragment, query, gather, and train the reward model on every label so far when an update is due
        (in the round of the first sample, after its warm start on the agent's unsupervised pre-training, which that
        sample ran)."""
        self.collect(result, clock, callbacks)
        self.warm_start(result, clock)
        if self.update_due:
            self.train_reward(result, clock)

    def warm_start(self, result: RoundResult, clock: PhaseClock) -> None:
        """Fit the reward model to the unsupervised pre-training the source ran in this round's sample, where the
        trainer has a warm start (the source hands the pre-training over once, and lets it go either way)."""
        explored = self.source.pretraining_episodes()
        if explored and self.reward_trainer.warm_start.needs_pretraining:
            with clock("warm_start"):
                result.metrics.update(self.reward_trainer.start_warm(explored))

    @property
    def labelled(self) -> bool:
        """Whether there is a label (a pair's, a rating or a ranking) to train on."""
        return len(self.dataset) > 0 or self.ratings is not None or self.ranking is not None

    @property
    def update_due(self) -> bool:
        """Whether the reward model trains this round: on labels, in every round or in those that brought some."""
        return self.labelled and (self.reward_updates == "every_round" or self.new_labels)

    def collect(self, result: RoundResult, clock: PhaseClock, callbacks: Sequence[Callback]) -> None:
        """Sample, fragment, query and gather: this round's labels into the dataset."""
        wanted = self.schedule[result.iteration]
        unlabelled = self.reward_trainer.unlabelled_wanted(len(self.dataset) + wanted)
        if self.sample(result, clock, wanted, unlabelled):
            self.query(result, clock, wanted, unlabelled)
        self.gather(result, clock, callbacks)

    def sample(self, result: RoundResult, clock: PhaseClock, wanted: int, unlabelled: int) -> bool:
        """Trajectories enough for this round's fragments, from the source's current policy (whether any were
        needed)."""
        # A trainer that learns from unlabelled pairs gets fresh ones every round, sampled as for a round that
        # queries as many pairs as are labelled, even in rounds that query none.
        sampled_for = max(wanted, len(self.dataset)) if unlabelled else wanted
        if sampled_for <= 0:
            return False
        steps = math.ceil(self.transition_oversampling * 2 * sampled_for * self.fragment_length)
        with clock("sample"):
            result.sampled = self.source.sample(steps)
        result.metrics.update(self.source.metrics())
        if not self.allow_variable_horizon:
            check_fixed_horizon(result.sampled, self.episode_lengths, self.horizon_remedy)
        return True

    def query(self, result: RoundResult, clock: PhaseClock, wanted: int, unlabelled: int) -> None:
        """Cut ``wanted`` fragment pairs (and the trainer's unlabelled ones) from the pool and publish them as
        queries."""
        with clock("fragment"):
            episodes = self.pool(result.sampled)
            if unlabelled:
                self.reward_trainer.remember_unlabelled(
                    self.fragmenter.uniform(episodes, self.fragment_length, unlabelled))
            pairs = self.fragmenter(episodes, self.fragment_length, wanted) if wanted > 0 else None
        if pairs is not None:
            with clock("query"):
                self.gatherer.add(pairs, self.querent(pairs, result.iteration))

    def gather(self, result: RoundResult, clock: PhaseClock, callbacks: Sequence[Callback]) -> None:
        """The answered queries: journaled by the callbacks first, then those told apart added to the dataset."""
        with clock("gather"):
            answers = result.answers = self.gatherer()
        # "Can't tell" is kept in the journal, never trained on; a ranking's new places come as the pairs they imply.
        told, rated = answers.told, answers.ratings
        self.new_labels = bool(told.any() or (rated is not None and rated.told.any()))
        if len(answers):
            for callback in callbacks:
                callback.on_labels(result.iteration, answers)
            if answers.ranking is not None:  # its pairs are journalled, and the list trained on in their stead
                self.ranking = answers.ranking
            elif told.any():
                self.dataset.push(answers.pairs[told], answers.labels[told], answers.ids[told])
        if rated is not None:
            for callback in callbacks:
                callback.on_ratings(result.iteration, rated)
            if rated.told.any():
                if self.ratings is None:
                    self.ratings = RatingDataset(rated.scale)
                self.ratings.push(rated.clips[rated.told], rated.ratings[rated.told], rated.ids[rated.told])
        result.metrics["comparisons"] = len(self.dataset)
        if self.ratings is not None:
            result.metrics["ratings"] = len(self.ratings)
        if self.ranking is not None:
            result.metrics["ranked_clips"] = len(self.ranking)
        result.metrics.update(self.gatherer.metrics())

    def train_reward(self, result: RoundResult, clock: PhaseClock) -> None:
        """Fit the reward model to every label so far (round 0 longer), and measure it on this round's sample."""
        k, metrics, net = result.iteration, result.metrics, self.reward_trainer.net
        with clock("reward_training"):
            metrics.update(self.reward_trainer.train(
                self.dataset, epoch_multiplier=self.initial_epoch_multiplier if k == 0 else 1.0, ratings=self.ratings,
                ranking=self.ranking))
        losses = {key: metrics[key] for key in ("reward_loss", "rating_loss", "ranking_loss") if key in metrics}
        check_finite(k, "the reward model", losses, net.named_parameters())
        if result.sampled:  # how well the reward just learned ranks this round's transitions
            corr = reward_correlation(net, result.sampled)
            if corr is not None:
                metrics["sampled_reward_correlation"] = corr

    def session(self, stop: Callable[[], bool] = lambda: False) -> contextlib.AbstractContextManager[None]:
        """The gatherer's session (the human gatherer's web server)."""
        return self.gatherer.session(stop)

    def save(self, folder: Path) -> dict[str, Any]:
        """The reward net (weights and config) and its optimiser, the labelled pairs, the rated clips and the ranking
        trained as a list, and the counters of the querent and the gatherer."""
        self.reward_trainer.save(folder, self.reward_net_config)
        if len(self.dataset):
            self.dataset.save(folder / "preferences")
        rated = {}
        if self.ratings is not None:
            self.ratings.save(folder / "ratings")
            rated = {"ratings": len(self.ratings), "rating_scale": self.ratings.scale}
        if self.ranking is not None:
            self.ranking.save(folder / "ranking")
            rated["ranked_clips"] = len(self.ranking)
        return {"comparisons": len(self.dataset), **rated, **self.querent.counters(), **self.gatherer.counters()}

    def fit(self, measure: Callable[[RewardNet], dict[str, Any]]) -> dict[str, Any]:
        """``measure`` of the reward net."""
        return measure(self.reward_trainer.net)

    def lengthen(self, schedule: list[int], done: int) -> None:
        """Query as ``schedule`` says from round ``done`` on; its first ``done`` rounds must be those run."""
        if schedule[:done] != self.schedule[:done]:
            raise ArgumentError("total_comparisons", f"with these rounds would have queried the rounds run so far "
                                f"otherwise (comparisons a round: {schedule[:done][-3:]} against "
                                f"{self.schedule[:done][-3:]}, the last three of {done}); keep the comparisons of "
                                "the rounds run (total_comparisons, initial_comparison_frac, query_schedule)")
        self.schedule = schedule
