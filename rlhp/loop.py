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
from typing import Any

import numpy as np
import torch

from rlhp.data import PreferenceDataset, Trajectory
from rlhp.errors import DivergedError, VariableHorizonError
from rlhp.evaluation import reward_correlation
from rlhp.feedback import Answers, PreferenceGatherer, Querent
from rlhp.fragments import Fragmenter
from rlhp.schedules import apportion
from rlhp.sources import TrajectorySource
from rlhp.training import RewardTrainer

log = logging.getLogger(__name__)

Metrics = dict[str, float]
RoundCallback = Callable[["PreferenceComparisons", Metrics], None]
"""Called after every round with the loop and the round's metrics (logging, checkpoints, progress)."""
LabelSink = Callable[[int, Answers], None]
"""Called with (round, answers) as soon as labels are gathered (skipped ones too), before any training on them."""


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


class PreferenceComparisons:
    """Alternates reward learning from preferences with agent training on the learned reward.

    Args:
        source: where trajectories come from (agent trainer or fixed dataset).
        fragmenter, querent, gatherer: choose pairs, publish them, collect their labels.
        dataset: the labelled pairs.
        reward_trainer: fits the reward net to the dataset.
        comparisons: comparisons to query per round, round 0 first (see ``comparison_schedule``).
        total_timesteps: agent env steps over all rounds.
        fragment_length: steps per fragment.
        rng: the generator shared by the parts (saved with the loop's state).
        transition_oversampling: sample this many times the transitions the fragments need.
        initial_epoch_multiplier: round 0 trains the reward model this many times longer.
        allow_variable_horizon: accept terminal episodes of different lengths.
        label_sink: told of every batch of labels as soon as it is gathered (to save it at once).

    ``iteration`` counts the rounds done; ``sampled`` holds the last round's trajectories only.
    """

    def __init__(self, source: TrajectorySource, fragmenter: Fragmenter, querent: Querent,
                 gatherer: PreferenceGatherer, dataset: PreferenceDataset, reward_trainer: RewardTrainer,
                 comparisons: list[int], total_timesteps: int, fragment_length: int, rng: np.random.Generator,
                 transition_oversampling: float = 1.0, initial_epoch_multiplier: float = 200.0,
                 allow_variable_horizon: bool = False, label_sink: LabelSink | None = None) -> None:
        self.source, self.fragmenter, self.querent, self.gatherer = source, fragmenter, querent, gatherer
        self.dataset, self.reward_trainer, self.rng = dataset, reward_trainer, rng
        self.comparisons = comparisons
        # Cumulative step targets: what one round could not fit in whole rollouts, the next trains.
        self.timestep_targets = np.cumsum(apportion(total_timesteps, np.ones(len(comparisons)))).tolist()
        self.total_timesteps = total_timesteps
        self.fragment_length = fragment_length
        self.transition_oversampling = transition_oversampling
        self.initial_epoch_multiplier = initial_epoch_multiplier
        self.allow_variable_horizon = allow_variable_horizon
        self.label_sink = label_sink
        self.iteration = 0
        self.timesteps = 0
        self.episode_lengths: dict[int, bool] = {}
        self.sampled: list[Trajectory] = []
        self.wall_s = 0.0

    @property
    def num_rounds(self) -> int:
        """Gathering rounds: the initial one plus one per iteration."""
        return len(self.comparisons)

    @property
    def done(self) -> bool:
        """Whether every round has run."""
        return self.iteration >= self.num_rounds

    def run(self, callbacks: Sequence[RoundCallback] = (), stop: Callable[[], bool] = lambda: False) -> Metrics:
        """Run the remaining rounds, calling each callback with the round's metrics; after a round,
        return early when ``stop()`` says so."""
        metrics: Metrics = {}
        while not self.done:
            metrics = self.round()
            for callback in callbacks:
                callback(self, metrics)
            if stop():
                return metrics
        if self.source.agent is not None and self.timesteps != self.total_timesteps:
            log.info("trained %d agent steps of total_timesteps=%d: the agent trains whole rollouts "
                     "(make total_timesteps a multiple of the rollout size to train it exactly)",
                     self.timesteps, self.total_timesteps)
        return metrics

    def round(self) -> Metrics:
        """One round of sample, fragment, query, gather, train reward, train agent."""
        start = time.perf_counter()
        k, n = self.iteration, self.comparisons[self.iteration]
        metrics: Metrics = {"iteration": k}
        clock = _PhaseClock(metrics)
        self.sampled = []
        if n > 0:
            steps = math.ceil(self.transition_oversampling * 2 * n * self.fragment_length)
            with clock("sample"):
                trajectories = self.source.sample(steps)
            metrics.update(self.source.metrics())
            if not self.allow_variable_horizon:
                check_fixed_horizon(trajectories, self.episode_lengths)
            self.sampled = trajectories
            with clock("fragment"):
                pairs = self.fragmenter(trajectories, self.fragment_length, n)
            with clock("query"):
                self.gatherer.add(pairs, self.querent(pairs, k))
        with clock("gather"):
            answers = self.gatherer()
        if len(answers):
            if self.label_sink is not None:
                self.label_sink(k, answers)
            told = answers.told  # "can't tell" is kept in the journal, never trained on
            if told.any():
                self.dataset.push(answers.pairs[told], answers.labels[told], answers.ids[told])
        metrics["comparisons"] = len(self.dataset)
        metrics.update(self.gatherer.metrics())
        agent = self.source.agent
        if len(self.dataset):
            multiplier = self.initial_epoch_multiplier if k == 0 else 1.0
            with clock("reward_training"):
                metrics.update(self.reward_trainer.train(self.dataset, epoch_multiplier=multiplier))
            _check_finite(k, "the reward model", {"reward_loss": metrics["reward_loss"]},
                          self.reward_trainer.net.named_parameters())
            if agent is not None:
                agent.reward_changed()
            if self.sampled:  # how well the reward just learned ranks this round's transitions
                corr = reward_correlation(self.reward_trainer.net, self.sampled)
                if corr is not None:
                    metrics["sampled_reward_correlation"] = corr
        if agent is not None:
            wanted = self.timestep_targets[k] - self.timesteps
            if wanted > 0:
                with clock("agent_training"):
                    report = agent.train(wanted)
                self.timesteps += report.steps
                if len(report.returns):
                    metrics.update(true_return_mean=float(report.returns.mean()),
                                   true_return_std=float(report.returns.std()))
                _check_finite(k, "the agent", {}, agent.named_parameters())
        metrics["timesteps"] = self.timesteps
        self.wall_s += time.perf_counter() - start
        metrics["wall_s"] = self.wall_s
        self.iteration += 1
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """The loop's counters, the shared generator and every part's state: what a resume needs."""
        return {
            "iteration": self.iteration, "timesteps": self.timesteps, "comparisons": list(self.comparisons),
            "timestep_targets": list(self.timestep_targets), "episode_lengths": dict(self.episode_lengths),
            "wall_s": self.wall_s, "rng": self.rng.bit_generator.state,
            "querent": self.querent.state_dict(), "gatherer": self.gatherer.state_dict(),
            "dataset": self.dataset.state_dict(), "reward_trainer": self.reward_trainer.state_dict(),
            "source": self.source.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the schedule comes from the config and must match)."""
        if list(state["comparisons"]) != list(self.comparisons):
            raise ValueError(f"the saved schedule {state['comparisons']} differs from this config's "
                             f"{self.comparisons}")
        self.iteration, self.timesteps, self.wall_s = state["iteration"], state["timesteps"], state["wall_s"]
        self.episode_lengths = {int(k): bool(v) for k, v in state["episode_lengths"].items()}
        self.rng.bit_generator.state = state["rng"]
        self.querent.load_state_dict(state["querent"])
        self.gatherer.load_state_dict(state["gatherer"])
        self.dataset.load_state_dict(state["dataset"])
        self.reward_trainer.load_state_dict(state["reward_trainer"])
        self.source.load_state_dict(state["source"])
