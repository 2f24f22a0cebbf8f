"""What happens around the rounds besides learning, each a part of the ``callbacks`` config group: the
progress bar, metrics.csv, trajectory files, the label journal and checkpoints, each written so that a
crash never leaves half a file. A resumed run's callbacks first forget what rounds after its checkpoint
wrote: the resumed run writes it again, identically."""

from __future__ import annotations

import logging

import numpy as np
from tqdm.auto import tqdm

from rlhp.data import PreferenceDataset
from rlhp.data.hf import dataset_metadata, trajectories_to_dataset
from rlhp.data.hub import trajectories_card
from rlhp.envs import GymEnv
from rlhp.experiment.checkpoints import RunRecord, prune_checkpoints, save_checkpoint
from rlhp.feedback import Answers, Ratings
from rlhp.files import written_whole
from rlhp.loop import Callback, Loop, RoundResult
from rlhp.runs import MetricsCSV, RunFolder

log = logging.getLogger(__name__)


class ProgressBar(Callback):
    """A tqdm bar over rounds showing timesteps, comparisons (and queries pending, with people),
    reward accuracy and true return.

    The round's whole metrics go to the log file, not the console.
    """

    def __init__(self) -> None:
        self.bar: tqdm | None = None

    def start(self, loop: Loop) -> None:
        """Open the bar at the rounds already done."""
        self.bar = tqdm(total=loop.num_rounds, initial=loop.iteration, desc="rounds", unit="round",
                        dynamic_ncols=True)

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Advance one round."""
        metrics = result.metrics
        shown = {"steps": metrics["timesteps"], "prefs": metrics["comparisons"]}
        for key, name, fmt in (("ratings", "rated", "{:.0f}"), ("ranked_clips", "ranked", "{:.0f}"),
                               ("queries_pending", "pending", "{:.0f}"), ("reward_accuracy", "acc", "{:.2f}"),
                               ("rating_accuracy", "rating_acc", "{:.2f}"),
                               ("ranking_accuracy", "ranking_acc", "{:.2f}"), ("true_return_mean", "return", "{:.1f}")):
            if key in metrics:
                shown[name] = fmt.format(metrics[key])
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update()
        log.info("round %d: %s", result.iteration, {k: round(v, 4) for k, v in metrics.items()})

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()


class MetricsWriter(Callback):
    """Appends each round's metrics to ``metrics.csv`` (every key, see :class:`~rlhp.runs.MetricsCSV`)."""

    def __init__(self, run: RunFolder) -> None:
        self.csv = MetricsCSV(run.metrics_csv)

    def start(self, loop: Loop) -> None:
        """Drop the rows of rounds after the checkpoint."""
        self.csv.keep_rounds(loop.iteration)

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Write the round's row."""
        self.csv.append(result.metrics)


class TrajectoryWriter(Callback):
    """Appends each round's sampled trajectories to ``trajectories/`` as one new Parquet file
    (``round-XXXX.parquet``, never rewritten), beside a dataset card with the spaces and env, so the
    folder loads as a dataset (``trajectories=dataset trajectories.path=<run>/trajectories``)."""

    def __init__(self, run: RunFolder, env: GymEnv) -> None:
        self.run = run
        self.spaces = dict(zip(("observation_space", "action_space"), env.spaces()))
        self.metadata = {"env_id": env.id, "policy": {"name": "rlhp-train agent", "source": str(run.path)}}

    def start(self, loop: Loop) -> None:
        """Delete the shards of rounds after the checkpoint."""
        self.run.trajectory_journal.forget(loop.iteration)

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Write the round's shard (and the card, once)."""
        if not result.sampled:
            return
        ds = trajectories_to_dataset(result.sampled, metadata=self.metadata, **self.spaces)
        card = self.run.trajectories_dir / "README.md"
        if not card.exists():
            card.parent.mkdir(parents=True, exist_ok=True)
            meta = {k: v for k, v in dataset_metadata(ds).items() if k != "summary"}  # the card outlives a round
            trajectories_card(meta).save(card)
        shard = self.run.trajectory_journal.round(result.iteration)
        with written_whole(shard) as tmp:
            ds.to_parquet(str(tmp))


class LabelJournal(Callback):
    """Saves every batch of labels the moment it is gathered, before training on it, as
    ``labels/round_XXXX/`` (a preference dataset), and every batch of ratings as ``ratings/round_XXXX/`` (rated
    clips, one fragment a row): a crash in training loses no label."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run

    def start(self, loop: Loop) -> None:
        """Delete the labels of rounds after the checkpoint (the resumed run gathers them again)."""
        self.run.label_journal.forget(loop.iteration)
        self.run.rating_journal.forget(loop.iteration)

    def on_labels(self, iteration: int, answers: Answers) -> None:
        """Save one round's labels, with who gave each, when, and whether it was skipped (label NaN)."""
        batch = PreferenceDataset()
        batch.push(answers.pairs, answers.labels, answers.ids)
        batch.save(self.run.label_journal.round(iteration), annotator=answers.annotators, answered_at=answers.times,
                   skipped=~answers.told)

    def on_ratings(self, iteration: int, ratings: Ratings) -> None:
        """Save one round's ratings (NaN: skipped), with who gave each and when."""
        batch = PreferenceDataset()  # any rating, a skipped one too: the rated dataset holds only 1..scale
        batch.push(ratings.clips, ratings.ratings, ratings.ids)
        batch.save(self.run.rating_journal.round(iteration), annotator=ratings.annotators,
                   answered_at=ratings.times, skipped=~ratings.told, scale=np.full(len(ratings.ids), ratings.scale))


class Checkpointer(Callback):
    """Saves the loop to ``checkpoints/iter_XXXX`` every ``every`` rounds (0: only at the end) and when
    the run stops, keeping the newest ``keep``, and to ``checkpoints/final`` after the last round; see
    :mod:`rlhp.experiment.checkpoints`.

    Args:
        run: the run folder.
        record: the run's config and command-line overrides, saved in each checkpoint.
        every: rounds between checkpoints.
        keep: round checkpoints kept (``final/`` is extra).
    """

    order = 1  # after every other callback: a round's checkpoint never comes before the round's files

    def __init__(self, run: RunFolder, record: RunRecord, every: int = 1, keep: int = 3) -> None:
        # Their bounds are checked once, on the top-level keys they come from (checkpoint_every, keep_checkpoints).
        self.run, self.record, self.every, self.keep = run, record, every, keep
        self.saved_rounds = -1

    def start(self, loop: Loop) -> None:
        """The checkpoint the run resumed from holds the rounds done."""
        self.saved_rounds = loop.iteration

    def __call__(self, loop: Loop, result: RoundResult) -> None:
        """Save when due, and always after the last round."""
        if loop.done or (self.every and result.iteration % self.every == 0):
            self.save(loop, f"iter_{result.iteration:04d}")

    def end(self, loop: Loop) -> None:
        """Save ``final`` after the last round, or the round a stop ended on (unless saved already)."""
        if loop.done:
            self.save(loop, "final")
        elif self.saved_rounds != loop.iteration:
            self.save(loop, f"iter_{loop.iteration - 1:04d}")

    def save(self, loop: Loop, name: str) -> None:
        """Write ``checkpoints/<name>`` and prune the old ones."""
        save_checkpoint(self.run, loop, name, self.record)
        self.saved_rounds = loop.iteration
        prune_checkpoints(self.run, self.keep)
