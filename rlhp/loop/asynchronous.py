"""Reward learning beside the agent, as Christiano et al. (2017) ran it: the reward model trains in a second thread
while the agent trains on the reward published at the last round's end, so that neither waits for the other.

The two meet at each round's end: the update is awaited and published to the agent's copy before the round's
callbacks run, so a checkpoint holds one state and a resumed run continues exactly as an uninterrupted one. On a
CPU the second thread uses a second core: torch runs each thread's operations without the interpreter's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rlhp.loop.learning import PreferenceLearning
from rlhp.loop.rounds import Callback, Metrics, PhaseClock, RoundResult
from rlhp.rewards import RewardNet
from rlhp.rewards.bodies import masks_drawn_from


class BackgroundTask:
    """``work()`` run in a daemon thread (a second Ctrl-C ends the process without waiting for it); :meth:`wait`
    returns its value, or raises what it raised."""

    def __init__(self, work: Callable[[], Metrics], name: str) -> None:
        self.value: Metrics = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self.thread.start()

    def _run(self, work: Callable[[], Metrics]) -> None:
        try:
            self.value = work()
        except BaseException as err:  # handed to the waiting thread, which raises it as its own
            self.error = err

    def wait(self) -> Metrics:
        """The work's value, once it has finished."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


class AsynchronousPreferenceLearning(PreferenceLearning):
    """:class:`PreferenceLearning` whose reward updates run beside the agent: round 0 fits the reward before the agent
    trains, as the synchronous loop does; from round 1 on a round samples, queries and gathers, then trains the
    reward on every label so far in a second thread while the agent trains on the reward published at the end of
    the round before (one round's labels behind the synchronous loop's). :meth:`settle` awaits the update and
    publishes it.

    Args:
        published: the agent's copy of the reward net, which it reads while the trainer's net trains.
        *args, **kwargs: as for :class:`PreferenceLearning`.

    The update draws from the trainer's generator, which no other part draws from while the agent trains, and its
    dropout masks from a torch generator seeded from it (the agent's thread draws from torch's default one).
    """

    def __init__(self, *args: Any, published: RewardNet, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published = published
        self.pending: BackgroundTask | None = None
        """The running update, between :meth:`learn` and :meth:`settle` (a checkpoint is written after)."""

    def learn(self, result: RoundResult, clock: PhaseClock, callbacks: Sequence[Callback]) -> None:
        """Round 0: as the synchronous loop, then publish. Later rounds: sample, query and gather, then start the
        reward's update in a second thread."""
        if result.iteration == 0:
            super().learn(result, clock, callbacks)
            self.reward_trainer.net.publish_to(self.published)
            return
        self.collect(result, clock, callbacks)
        self.warm_start(result, clock)
        if self.update_due:
            # The update writes its own metrics: the agent's thread writes the round's meanwhile.
            update = RoundResult(result.iteration, {}, result.sampled)
            masks = torch.Generator(self.reward_trainer.net.device).manual_seed(
                int(self.reward_trainer.rng.integers(np.iinfo(np.int64).max)))

            def work() -> Metrics:
                with masks_drawn_from(self.reward_trainer.net, masks):
                    self.train_reward(update, PhaseClock(update.metrics))
                return update.metrics

            self.pending = BackgroundTask(work, name=f"rlhp-reward-round-{result.iteration}")

    def settle(self, result: RoundResult, clock: PhaseClock) -> None:
        """Await the round's reward update (``time_reward_wait_s``: what the agent's thread waited for it), take
        its metrics and publish it to the agent's copy."""
        if self.pending is None:
            return
        task, self.pending = self.pending, None
        with clock("reward_wait"):
            result.metrics.update(task.wait())
        self.reward_trainer.net.publish_to(self.published)
