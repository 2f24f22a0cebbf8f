"""Refit a finished run's reward model on the run's own labels, round by round, under other settings.

What would another reward net or trainer have learned from the same labels? Rerunning the agent to find out takes
hours; refitting takes minutes. For each round of RUN's labels (``labels/round_XXXX``) it adds them to the dataset,
trains the reward as the run's config says with ``overrides`` on top (round 0 for ``initial_epoch_multiplier``
times the passes), and prints a table: the labels so far, the final pass's training accuracy, and the learned
reward's Pearson correlation with the true one per transition on the episodes the run sampled
(``trajectories/``): on all of them, and on the next labelled round's (the agent's behaviour under the reward that
round had, which no label had covered yet). It reads the run folder only. Labels alone are refitted: a run's
pseudo-labels, warm start, ratings and rankings are not, and the reward trains once per round that brought labels
(``reward_updates=new_labels``).

    python scripts/refit_reward.py outputs/train/2026-11-29/10-00-00 reward_trainer.stop_accuracy=0.97 \
        reward_trainer.bootstrap=false reward_net.output=tanh --seed 1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import datasets
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlhp.data import PreferenceDataset, Trajectory
from rlhp.data.hub import open_trajectories
from rlhp.data.spaces import space_from_json
from rlhp.errors import RlhpError
from rlhp.experiment.config import build
from rlhp.rewards import RewardNet
from rlhp.rewards.net import reward_correlation
from rlhp.runs.folder import RunFolder
from rlhp.training import RewardTrainer


def overridden(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """``cfg`` with ``key=value`` overrides (values read as Hydra reads them), each in a part the run's config has
    (a key newer than the run is taken: building the part checks it is one of its options)."""
    for override in overrides:
        key, sep, _ = override.partition("=")
        part = key.rpartition(".")[0]
        if not sep or not isinstance(OmegaConf.select(cfg, part) if part else cfg, DictConfig):
            raise SystemExit(f"{override!r} is no override of a part the run's config has (key=value, e.g. "
                             "reward_net.output=tanh)")
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(overrides))


def label_rounds(folder: RunFolder) -> dict[int, Path]:
    """The run's labelled rounds, by round."""
    rounds = folder.label_journal.rounds()
    if not rounds:
        raise SystemExit(f"{str(folder.labels_dir)!r} holds no round of labels (labels/round_XXXX): is "
                         f"{str(folder.path)!r} a run of rlhp-train with its labels callback?")
    return rounds


def sampled(folder: RunFolder, rounds: list[int]) -> tuple[dict[int, list[Trajectory]], dict]:
    """The episodes each of ``rounds`` sampled (those the run kept), and the dataset card's metadata."""
    episodes, meta = {}, {}
    for k, shard in folder.trajectory_journal.rounds().items():
        if k in rounds:
            episodes[k], meta = open_trajectories(shard)
    if not episodes or "observation_space" not in meta:
        raise SystemExit(f"{str(folder.trajectories_dir)!r} holds no round's episodes with their spaces "
                         "(trajectories/round-XXXX.parquet beside README.md): the correlations need them")
    return episodes, meta


def correlation(net: RewardNet, episodes: list[Trajectory]) -> float:
    """The learned reward's correlation with the true one on ``episodes``; NaN where either is constant."""
    value = reward_correlation(net, episodes)
    return np.nan if value is None else value


def refit(folder: RunFolder, overrides: list[str], seed: int) -> list[dict[str, float]]:
    """One row per labelled round: labels so far, training accuracy, correlation on all and on the next round's
    sampled episodes (NaN where there is none)."""
    cfg = overridden(folder.config(), overrides)
    rounds = label_rounds(folder)
    episodes, meta = sampled(folder, list(rounds))
    every = [t for k in sorted(episodes) for t in episodes[k]]
    torch.manual_seed(seed)
    net: RewardNet = build(cfg.reward_net, observation_space=space_from_json(meta["observation_space"]),
                           action_space=space_from_json(meta["action_space"]))
    trainer: RewardTrainer = build(cfg.reward_trainer, reward_net=net, rng=np.random.default_rng(seed))
    dataset, rows = PreferenceDataset(), []
    for k, path in rounds.items():
        new = PreferenceDataset.load(path)
        dataset.push(new.pairs, new.labels, new.ids)
        metrics = trainer.train(dataset, cfg.initial_epoch_multiplier if k == 0 else 1.0)
        later = [j for j in rounds if j > k and j in episodes]
        rows.append({"round": k, "labels": len(dataset), "accuracy": metrics.get("reward_accuracy", np.nan),
                     "all": correlation(net, every), "next": correlation(net, episodes[later[0]]) if later else np.nan})
        print(f"| {k} | {len(dataset)} | {rows[-1]['accuracy']:.3f} | {rows[-1]['all']:.3f} | "
              f"{rows[-1]['next']:.3f} |", flush=True)
    return rows


def main() -> None:
    """Parse the command line and print the table, a row per labelled round as it finishes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder of rlhp-train (labels/ and trajectories/ in it)")
    parser.add_argument("overrides", nargs="*", help="key=value on the run's config, e.g. reward_net.output=tanh")
    parser.add_argument("--seed", type=int, default=0, help="seed of the net's initialisation and the shuffles")
    args = parser.parse_args()
    folder = RunFolder(args.run)
    if not folder.config_yaml.exists():
        raise SystemExit(f"{str(args.run)!r} is no run folder of rlhp-train (no {folder.config_yaml.name} in it)")
    datasets.disable_progress_bars()  # its per-file bars would bury the table
    print(f"Reward refitted on the labels of {args.run}, seed {args.seed}"
          + (f", with {' '.join(args.overrides)}" if args.overrides else "") + ":\n")
    print("| round | labels | training accuracy | correlation, all episodes | correlation, next round's |")
    print("|---:|---:|---:|---:|---:|")
    try:
        refit(folder, args.overrides, args.seed)
    except RlhpError as err:  # a bad value for a key, or a run folder that cannot be read
        raise SystemExit(f"{type(err).__name__}: {err}") from None


if __name__ == "__main__":
    main()
