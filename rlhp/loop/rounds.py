"""The loop: the agent trained over rounds, each round first learning the reward where a part does so.

Alone (:class:`~rlhp.loop.learning.NoRewardLearning`) it is the true-reward ceiling; with
:class:`~rlhp.loop.learning.PreferenceLearning` it is the preference-comparisons loop of Christiano et al. 2017.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhp.agents import Agent
from rlhp.data import Trajectory
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, DivergedError
from rlhp.feedback import Answers, Ratings
from rlhp.feedback.gatherer import no_answers
from rlhp.loop.schedules import apportion
from rlhp.rewards import RewardNet
from rlhp.sources import TrajectorySource

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

    def start(self, loop: Loop) -> None:
        """The run starts, or resumes after ``loop.iteration`` rounds: what later rounds wrote is written again."""

    def on_labels(self, iteration: int, answers: Answers) -> None:
        """Labels (skipped ones too) were just gathered in round ``iteration``, before any training on them."""

    def on_ratings(self, iteration: int, ratings: Ratings) -> None:
        """Ratings of clips (skipped ones too) were just gathered in round ``iteration``, before any training."""

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Round ``result.iteration`` ended."""

    def end(self, loop: Loop) -> None:
        """The rounds ended: all of them (``loop.done``), or those before a stop."""

    def close(self) -> None:
        """The run is over, however it ended: release what the callback holds (always called, last)."""


def check_finite(round_: int, part: str, values: dict[str, float],
                 parameters: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Raise :class:`DivergedError` naming the round and the part when a value or weight is NaN or infinite."""
    bad = [f"{k} = {v}" for k, v in values.items() if not math.isfinite(v)]
    bad += [f"non-finite weights in {name}" for name, p in parameters if not torch.isfinite(p).all()][:3]
    if bad:
        raise DivergedError(f"round {round_}: {part} diverged ({'; '.join(bad)}); the run stops here and its "
                            "last checkpoint is the last good state. Lower the learning rate and run again")


class PhaseClock:
    """``with clock("name"):`` adds the block's seconds to ``metrics["time_name_s"]``."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name``."""
        start = time.perf_counter()
        yield
        self.metrics[f"time_{name}_s"] = time.perf_counter() - start


class RewardLearning:
    """The reward-learning part of the loop. This one learns nothing: the agent is paid the env's own
    reward (the ceiling)."""

    learns: bool = False
    """Whether it learns a reward (then the final evaluation measures its fit)."""

    def learn(self, result: RoundResult, clock: PhaseClock, callbacks: Sequence[Callback]) -> None:
        """What round ``result.iteration`` does before the agent trains."""
        result.metrics["comparisons"] = 0

    def settle(self, result: RoundResult, clock: PhaseClock) -> None:
        """What round ``result.iteration`` finishes once the agent has trained (a reward update left running)."""

    def session(self, stop: Callable[[], bool] = lambda: False) -> contextlib.AbstractContextManager[None]:
        """What its rounds need while they run (people's labelling server)."""
        return contextlib.nullcontext()

    def save(self, folder: Path) -> dict[str, Any]:
        """Write what it learned into a checkpoint's ``folder``; return its counters for ``state.json``."""
        return {}

    def fit(self, measure: Callable[[RewardNet], dict[str, Any]]) -> dict[str, Any]:
        """``measure`` of the learned reward net (its fit to the true reward); nothing where none is learned."""
        return {}

    def lengthen(self, schedule: list[int], done: int) -> None:
        """Query as ``schedule`` says (comparisons per round of a run lengthened or shortened), the first ``done``
        rounds of which have run; raises :class:`ArgumentError` where it would have queried them otherwise
        (nothing to check where nothing is queried)."""


class Loop:
    """The agent trained over rounds, with callbacks (metrics, checkpoints) between them; each round first
    lets the reward-learning part learn (nothing, for the ceiling), then trains the agent on its reward.

    Args:
        env: the run's env, which the source's copies are made from (the final evaluation makes its own).
        source: where trajectories come from.
        agent: the agent trained each round on the reward it is paid (the source's own: an agent being trained
            samples the trajectories; a dataset's is an offline learner, or none).
        reward_learning: what each round learns before the agent trains (:mod:`rlhp.loop.learning`).
        num_rounds: rounds to run.
        total_timesteps: agent env steps over all rounds (0 for a source that trains no agent).

    ``iteration`` counts the rounds done; ``last_round`` holds the metrics of the last of them (saved with the
    loop, so a run resumed after its last round still has them).
    """

    def __init__(self, env: GymEnv, source: TrajectorySource, agent: Agent, reward_learning: RewardLearning,
                 num_rounds: int, total_timesteps: int) -> None:
        self.env = env
        self.source, self.agent, self.reward_learning = source, agent, reward_learning
        self.total_timesteps = total_timesteps
        self.timestep_targets = self.step_targets(total_timesteps, num_rounds)
        self.iteration = 0
        self.timesteps = 0
        self.wall_s = 0.0
        self.last_round: Metrics = {}

    @property
    def num_rounds(self) -> int:
        """Rounds in the whole run."""
        return len(self.timestep_targets)

    def step_targets(self, total_timesteps: int, num_rounds: int) -> list[int]:
        """The agent steps done by the end of each of ``num_rounds`` rounds sharing ``total_timesteps``: cumulative,
        so what one round could not fit in whole rollouts, the next trains."""
        return np.cumsum(apportion(total_timesteps, self.agent.step_weights(num_rounds))).tolist()

    def lengthen(self, total_timesteps: int, num_rounds: int, comparisons: list[int]) -> None:
        """Run on to ``total_timesteps`` over ``num_rounds`` rounds, with ``comparisons`` queried per round, as a
        run given that budget from the start would: the rounds already run must be its first rounds (as long, and
        as labelled); raises :class:`ArgumentError` naming the key that breaks that."""
        if num_rounds <= self.iteration:
            raise ArgumentError("num_rounds", f"must leave a round to run: {self.iteration} of the run's rounds "
                                f"are done, so at least {self.iteration + 1}")
        targets = self.step_targets(total_timesteps, num_rounds)
        done, would = self.timestep_targets[:self.iteration], targets[:self.iteration]
        if would != done:
            raise ArgumentError("total_timesteps", f"with these rounds gives the rounds run so far other lengths "
                                f"(agent steps by the end of the last three: {would[-3:]} against {done[-3:]}); keep "
                                "total_timesteps / num_rounds as it was")
        self.reward_learning.lengthen(comparisons, self.iteration)
        self.timestep_targets, self.total_timesteps = targets, total_timesteps

    @property
    def done(self) -> bool:
        """Whether every round has run."""
        return self.iteration >= self.num_rounds

    def iterate(self, callbacks: Sequence[Callback] = (), stop: Callable[[], bool] = lambda: False) -> Metrics:
        """Run the remaining rounds, calling each callback after each; after a round, return early when
        ``stop()`` says so. Returns the last round's metrics (:attr:`last_round`)."""
        while not self.done:
            result = self.round(callbacks)
            for callback in callbacks:
                callback(self, result)
            if stop():
                return self.last_round
        if self.timesteps != self.total_timesteps:
            log.info("trained %d agent steps of total_timesteps=%d: the agent trains whole rollouts "
                     "(make total_timesteps a multiple of the rollout size to train it exactly)",
                     self.timesteps, self.total_timesteps)
        return self.last_round

    def round(self, callbacks: Sequence[Callback] = ()) -> RoundResult:
        """One round: learn the reward, then train the agent on it (or, where the reward learns beside the agent,
        both at once until the reward's update is settled)."""
        start = time.perf_counter()
        result = RoundResult(self.iteration, {"iteration": self.iteration})
        clock = PhaseClock(result.metrics)
        self.reward_learning.learn(result, clock, callbacks)
        self.train_agent(result, clock)
        self.reward_learning.settle(result, clock)
        self.wall_s += time.perf_counter() - start
        result.metrics["wall_s"] = self.wall_s
        self.iteration += 1
        self.last_round = result.metrics
        return result

    def train_agent(self, result: RoundResult, clock: PhaseClock) -> None:
        """Train the agent up to this round's share of ``total_timesteps``, on the reward it is paid."""
        wanted = self.timestep_targets[self.iteration] - self.timesteps
        if wanted > 0:
            agent = self.agent
            with clock("agent_training"):
                report = agent.train(wanted)
            self.timesteps += report.steps
            if len(report.returns):
                result.metrics.update(true_return_mean=float(report.returns.mean()),
                                      true_return_std=float(report.returns.std()))
            if len(report.successes):
                result.metrics["success_rate"] = float(report.successes.mean())
            check_finite(self.iteration, "the agent", {}, agent.named_parameters())
        result.metrics["timesteps"] = self.timesteps

    def session(self, stop: Callable[[], bool] = lambda: False) -> contextlib.AbstractContextManager[None]:
        """What the rounds need while they run (people's labelling server); waiting ends when ``stop()`` says so."""
        return self.reward_learning.session(stop)

    def save(self, folder: Path) -> dict[str, Any]:
        """Each part writes the files a person reads without rlhp into ``folder`` (the learned reward and its
        labels, the agent); returns the counters of ``state.json``."""
        counters: dict[str, Any] = {"iteration": self.iteration, "num_rounds": self.num_rounds,
                                    "timesteps": self.timesteps, "wall_s": self.wall_s}
        counters.update(self.reward_learning.save(folder))
        self.agent.save(folder)
        return counters

    def derived_arrays(self) -> list[np.ndarray]:
        """Arrays a part recomputes before reading them again (a checkpoint stores their shapes only)."""
        return self.agent.derived_arrays()
