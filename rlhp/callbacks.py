"""What happens after each round besides learning: the progress bar, metrics.csv, trajectories,
labels and checkpoints, each written so that a crash never leaves half a file."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import gymnasium as gym
from omegaconf import DictConfig
from tqdm.auto import tqdm

from rlhp.checkpoints import prune_checkpoints, save_checkpoint
from rlhp.data import PreferenceDataset
from rlhp.data.hf import dataset_metadata, trajectories_to_dataset
from rlhp.data.hub import trajectories_card
from rlhp.feedback import Answers
from rlhp.loop import Metrics, PreferenceComparisons
from rlhp.runs import MetricsCSV, RunFolder
from rlhp.runs.folder import HALF_WRITTEN

log = logging.getLogger(__name__)


class ProgressBar:
    """A tqdm bar over rounds showing timesteps, comparisons (and queries pending, with people),
    reward accuracy and true return.

    The round's whole metrics go to the log file, not the console.
    """

    def __init__(self, total: int, done: int = 0) -> None:
        self.bar = tqdm(total=total, initial=done, desc="rounds", unit="round", dynamic_ncols=True)

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Advance one round."""
        shown = {"steps": metrics["timesteps"], "prefs": metrics["comparisons"]}
        for key, name, fmt in (("queries_pending", "pending", "{:.0f}"), ("reward_accuracy", "acc", "{:.2f}"),
                               ("true_return_mean", "return", "{:.1f}")):
            if key in metrics:
                shown[name] = fmt.format(metrics[key])
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update()
        log.info("round %d: %s", metrics["iteration"], {k: round(v, 4) for k, v in metrics.items()})

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


class MetricsWriter:
    """Appends each round's metrics to ``metrics.csv`` (every key, see :class:`~rlhp.runs.MetricsCSV`)."""

    def __init__(self, csv: MetricsCSV) -> None:
        self.csv = csv

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Write the round's row."""
        self.csv.append(metrics)


def forget_rounds(folder: Path, rounds: int) -> None:
    """Delete what ``folder`` holds for rounds ``rounds`` and later: ``round-XXXX.parquet`` files and
    ``round_XXXX/`` datasets, half-written ones included."""
    for path in folder.glob("round[-_]*"):
        if int(path.name[6:10]) < rounds:
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


class TrajectoryWriter:
    """Appends each round's sampled trajectories to ``trajectories/`` as one new Parquet file
    (``round-XXXX.parquet``, never rewritten), beside a dataset card with the spaces and env, so the
    folder loads as a dataset (``trajectories=dataset trajectories.path=<run>/trajectories``)."""

    def __init__(self, run: RunFolder, env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.folder = run.trajectories_dir
        self.spaces = {"observation_space": observation_space, "action_space": action_space}
        self.metadata = {"env_id": env_id, "policy": {"name": "rlhp-train agent", "source": str(run.path)}}

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Write the round's shard (and the card, once)."""
        if not loop.sampled:
            return
        ds = trajectories_to_dataset(loop.sampled, metadata=self.metadata, **self.spaces)
        if not (self.folder / "README.md").exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            meta = {k: v for k, v in dataset_metadata(ds).items() if k != "summary"}  # the card outlives a round
            trajectories_card(meta).save(self.folder / "README.md")
        shard = self.folder / f"round-{int(metrics['iteration']):04d}.parquet"
        tmp = shard.with_name(shard.name + HALF_WRITTEN)
        ds.to_parquet(str(tmp))
        os.replace(tmp, shard)

    def forget_after(self, rounds: int) -> None:
        """Delete the shards of rounds ``rounds`` and later (a resumed run writes them again)."""
        forget_rounds(self.folder, rounds)


class LabelJournal:
    """Saves every batch of labels the moment it is gathered, before training on it, as
    ``labels/round_XXXX/`` (a preference dataset): a crash in training loses no label."""

    def __init__(self, run: RunFolder) -> None:
        self.folder = run.labels_dir

    def __call__(self, round_: int, answers: Answers) -> None:
        """Save one round's labels, with who gave each, when, and whether it was skipped (label NaN)."""
        batch = PreferenceDataset()
        batch.push(answers.pairs, answers.labels, answers.ids)
        batch.save(self.folder / f"round_{round_:04d}", annotator=answers.annotators, answered_at=answers.times,
                   skipped=~answers.told)

    def forget_after(self, rounds: int) -> None:
        """Delete the labels of rounds ``rounds`` and later (a resumed run gathers them again)."""
        forget_rounds(self.folder, rounds)


class Checkpointer:
    """Saves the whole loop to ``checkpoints/iter_XXXX`` every ``every`` rounds (0: only at the end)
    and after the last, keeping the newest ``keep``; see :mod:`rlhp.checkpoints`.

    Args:
        run: the run folder.
        every: rounds between checkpoints.
        keep: round checkpoints kept (``final/`` is extra).
        cfg, overrides: the run's config and command-line overrides, saved in each checkpoint.
        reward_net_config: the config that built the reward net, saved beside its weights.
    """

    def __init__(self, run: RunFolder, every: int, keep: int, cfg: DictConfig, overrides: list[str],
                 reward_net_config: dict) -> None:
        self.run, self.every, self.keep = run, every, keep
        self.cfg, self.overrides, self.reward_net_config = cfg, overrides, reward_net_config
        self.saved_rounds = -1

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Save when due, and always after the last round."""
        k = int(metrics["iteration"])
        if loop.done or (self.every and k % self.every == 0):
            self.save(loop, f"iter_{k:04d}")

    def save(self, loop: PreferenceComparisons, name: str) -> None:
        """Write ``checkpoints/<name>`` and prune the old ones."""
        save_checkpoint(self.run, loop, name, self.cfg, self.overrides, self.reward_net_config)
        self.saved_rounds = loop.iteration
        prune_checkpoints(self.run, self.keep)
