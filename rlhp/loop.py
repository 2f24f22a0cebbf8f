"""The preference-comparisons loop (Christiano et al. 2017), one round at a time.

Each round: sample trajectories, cut fragment pairs, publish them as queries, gather the
answered ones into the preference dataset, train the reward model, then train the agent on it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from rlhp.data import PreferenceDataset, Trajectory
from rlhp.errors import DivergedError, VariableHorizonError
from rlhp.feedback import Answers, PreferenceGatherer, Querent
from rlhp.feedback.gatherer import no_answers
from rlhp.fragments import Fragmenter
from rlhp.rewards import reward_correlation
from rlhp.schedules import apportion
from rlhp.sources import TrajectorySource
from rlhp.training import RewardTrainer

log = logging.getLogger(__name__)

Metrics = dict[str, float]


@dataclass
class RoundResult:
    """What one round did: its metrics, the trajectories it sampled and the labels it gathered."""

    iteration: int
    metrics: Metrics
    sampled: list[Trajectory] = field(default_factory=list)
    answers: Answers = field(default_factory=no_answers)


class Callback:
    """Told of a run's rounds (metrics.csv, trajectory files, the label journal, checkpoints, the bar).

    Every hook does nothing unless overridden.
    """

    order: int = 0
    """Callbacks of a round run in ascending order (a checkpoint comes after every file of its round)."""

    def start(self, loop: AgentRounds) -> None:
        """The run starts, or resumes after ``loop.iteration`` rounds: what later rounds wrote is written again."""

    def on_labels(self, iteration: int, answers: Answers) -> None:
        """Labels (skipped ones too) were just gathered in round ``iteration``, before any training on them."""

    def __call__(self, loop: AgentRounds, result: RoundResult) -> None:
        """Round ``result.iteration`` ended."""

    def end(self, loop: AgentRounds) -> None:
        """The rounds ended: all of them (``loop.done``), or those before a stop."""

    def close(self) -> None:
        """The run is over, however it ended: release what the callback holds (always called, last)."""


def check_fixed_horizon(trajectories: list[Trajectory], lengths: dict[int, bool]) -> None:
    """Record episode lengths (-> whether one ended by termination); raise if a terminated
    episode's length differs from another episode's."""
    for t in trajectories:
        lengths[len(t)] = lengths.get(len(t), False) or t.terminal
    if len(lengths) > 1 and any(lengths.values()):
        ended = sorted(n for n, terminal in lengths.items() if terminal)
        raise VariableHorizonError(
            f"episodes ended by termination at different lengths (terminated at {ended[:5]}, "
            f"all lengths seen {sorted(lengths)[:5]}). "
            "When the episode length depends on the policy, it leaks the reward: a fragment's "
            "length says how well the agent did, and any positive learned reward 'solves' the "
            "task. Use a fixed-horizon env (env=cartpole, or a wrapper that ignores termination), "
            "or set allow_variable_horizon=true if you know the risks.")


def _check_finite(round_: int, part: str, values: dict[str, float],
                  parameters: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Raise :class:`DivergedError` naming the round and the part when a value or weight is NaN or infinite."""
    bad = [f"{k} = {v}" for k, v in values.items() if not math.isfinite(v)]
    bad += [f"non-finite weights in {name}" for name, p in parameters if not torch.isfinite(p).all()][:3]
    if bad:
        raise DivergedError(f"round {round_}: {part} diverged ({'; '.join(bad)}); the run stops here and its "
                            "last checkpoint is the last good state. Lower the learning rate and run again")


class _PhaseClock:
    """``with clock("name"):`` adds the block's seconds to ``metrics["time_name_s"]``."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.metrics[f"time_{name}_s"] = time.perf_counter() - start


class AgentRounds:
    """The agent trained over rounds, with callbacks (metrics, checkpoints) between them. Alone, it is the
    true-reward ceiling: the source's agent learns on the env's own reward and nothing is queried.

    Args:
        source: where trajectories come from; its agent is trained.
        num_rounds: rounds to run.
        total_timesteps: agent env steps over all rounds (0 for a source that trains no agent).

    ``iteration`` counts the rounds done.
    """

    def __init__(self, source: TrajectorySource, num_rounds: int, total_timesteps: int) -> None:
        self.source, self.total_timesteps = source, total_timesteps
        # Cumulative step targets: what one round could not fit in whole rollouts, the next trains.
        self.timestep_targets = np.cumsum(apportion(total_timesteps, np.ones(num_rounds))).tolist()
        self.iteration = 0
        self.timesteps = 0
        self.wall_s = 0.0

    @property
    def num_rounds(self) -> int:
        """Rounds in the whole run."""
        return len(self.timestep_targets)

    @property
    def done(self) -> bool:
        """Whether every round has run."""
        return self.iteration >= self.num_rounds

    def run(self, callbacks: Sequence[Callback] = (), stop: Callable[[], bool] = lambda: False) -> None:
        """Run the remaining rounds, calling each callback after each; after a round, return early when
        ``stop()`` says so."""
        while not self.done:
            result = self.round(callbacks)
            for callback in callbacks:
                callback(self, result)
            if stop():
                return
        if self.timesteps != self.total_timesteps:
            log.info("trained %d agent steps of total_timesteps=%d: the agent trains whole rollouts "
                     "(make total_timesteps a multiple of the rollout size to train it exactly)",
                     self.timesteps, self.total_timesteps)

    def round(self, callbacks: Sequence[Callback] = ()) -> RoundResult:
        """One round: learn the reward (nothing here), then train the agent on it."""
        start = time.perf_counter()
        result = RoundResult(self.iteration, {"iteration": self.iteration})
        clock = _PhaseClock(result.metrics)
        self.learn_reward(result, clock, callbacks)
        wanted = self.timestep_targets[self.iteration] - self.timesteps
        if wanted > 0:
            agent = self.source.agent
            with clock("agent_training"):
                report = agent.train(wanted)
            self.timesteps += report.steps
            if len(report.returns):
                result.metrics.update(true_return_mean=float(report.returns.mean()),
                                      true_return_std=float(report.returns.std()))
            _check_finite(self.iteration, "the agent", {}, agent.named_parameters())
        result.metrics["timesteps"] = self.timesteps
        self.wall_s += time.perf_counter() - start
        result.metrics["wall_s"] = self.wall_s
        self.iteration += 1
        return result

    def learn_reward(self, result: RoundResult, clock: _PhaseClock, callbacks: Sequence[Callback]) -> None:
        """What the round does before the agent trains: the env's own reward needs no labels."""
        result.metrics["comparisons"] = 0

    def session(self, stop: Callable[[], bool] = lambda: False) -> contextlib.AbstractContextManager[None]:
        """What the rounds need while they run (people's labelling server); waiting ends when ``stop()`` says so."""
        return contextlib.nullcontext()


class PreferenceComparisons(AgentRounds):
    """Alternates reward learning from preferences with agent training on the learned reward.

    Args:
        source: where trajectories come from (agent trainer or fixed dataset).
        fragmenter, querent, gatherer: choose pairs, publish them, collect their labels.
        dataset: the labelled pairs.
        reward_trainer: fits the reward net to the dataset.
        comparisons: comparisons to query per round, round 0 first (see ``comparison_schedule``).
        total_timesteps: agent env steps over all rounds.
        fragment_length: steps per fragment.
        rng: the generator shared by the parts (saved with the loop).
        transition_oversampling: sample this many times the transitions the fragments need.
        initial_epoch_multiplier: round 0 trains the reward model this many times longer.
        allow_variable_horizon: accept terminal episodes of different lengths.
    """

    def __init__(self, source: TrajectorySource, fragmenter: Fragmenter, querent: Querent,
                 gatherer: PreferenceGatherer, dataset: PreferenceDataset, reward_trainer: RewardTrainer,
                 comparisons: list[int], total_timesteps: int, fragment_length: int, rng: np.random.Generator,
                 transition_oversampling: float = 1.0, initial_epoch_multiplier: float = 200.0,
                 allow_variable_horizon: bool = False) -> None:
        super().__init__(source, len(comparisons), total_timesteps)
        self.fragmenter, self.querent, self.gatherer = fragmenter, querent, gatherer
        self.dataset, self.reward_trainer, self.rng = dataset, reward_trainer, rng
        self.comparisons = comparisons
        self.fragment_length = fragment_length
        self.transition_oversampling = transition_oversampling
        self.initial_epoch_multiplier = initial_epoch_multiplier
        self.allow_variable_horizon = allow_variable_horizon
        self.episode_lengths: dict[int, bool] = {}

    def session(self, stop: Callable[[], bool] = lambda: False) -> contextlib.AbstractContextManager[None]:
        """The gatherer's session (the human gatherer's web server)."""
        return self.gatherer.session(stop)

    def learn_reward(self, result: RoundResult, clock: _PhaseClock, callbacks: Sequence[Callback]) -> None:
        """Sample, fragment, query, gather, and train the reward model on every label so far."""
        k, n, metrics = self.iteration, self.comparisons[self.iteration], result.metrics
        unlabelled = self.reward_trainer.unlabelled_wanted(len(self.dataset) + n)
        # A trainer that learns from unlabelled pairs gets fresh ones every round, sampled as for a round that
        # queries as many pairs as are labelled, even in rounds that query none.
        sampled_for = max(n, len(self.dataset)) if unlabelled else n
        if sampled_for > 0:
            steps = math.ceil(self.transition_oversampling * 2 * sampled_for * self.fragment_length)
            with clock("sample"):
                result.sampled = self.source.sample(steps)
            metrics.update(self.source.metrics())
            if not self.allow_variable_horizon:
                check_fixed_horizon(result.sampled, self.episode_lengths)
            with clock("fragment"):
                if unlabelled:
                    self.reward_trainer.remember_unlabelled(
                        self.fragmenter.uniform(result.sampled, self.fragment_length, unlabelled))
                pairs = self.fragmenter(result.sampled, self.fragment_length, n) if n > 0 else None
            if pairs is not None:
                with clock("query"):
                    self.gatherer.add(pairs, self.querent(pairs, k))
        with clock("gather"):
            answers = result.answers = self.gatherer()
        if len(answers):
            for callback in callbacks:
                callback.on_labels(k, answers)
            told = answers.told  # "can't tell" is kept in the journal, never trained on
            if told.any():
                self.dataset.push(answers.pairs[told], answers.labels[told], answers.ids[told])
        metrics["comparisons"] = len(self.dataset)
        metrics.update(self.gatherer.metrics())
        if len(self.dataset):
            multiplier = self.initial_epoch_multiplier if k == 0 else 1.0
            with clock("reward_training"):
                metrics.update(self.reward_trainer.train(self.dataset, epoch_multiplier=multiplier))
            _check_finite(k, "the reward model", {"reward_loss": metrics["reward_loss"]},
                          self.reward_trainer.net.named_parameters())
            if result.sampled:  # how well the reward just learned ranks this round's transitions
                corr = reward_correlation(self.reward_trainer.net, result.sampled)
                if corr is not None:
                    metrics["sampled_reward_correlation"] = corr
