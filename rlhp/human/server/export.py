"""A run's human labels as one dataset: Parquet and a card in a folder, or in a Hub dataset repo."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import datasets
import numpy as np
from huggingface_hub import HfApi
from omegaconf import OmegaConf

from rlhp.data.hf import load_saved
from rlhp.data.hub import is_repo_id, labels_card, open_trajectories, push_to_hub, stage_for_hub
from rlhp.data.label_files import LabelFormat, SegmentLabels, flat_starts, write_label_files
from rlhp.errors import ConfigError, DataError
from rlhp.human.server.answers import AnswerStore
from rlhp.runs import RunFolder
from rlhp.runs.folder import Journal


def journal_dataset(journal: Journal) -> datasets.Dataset | None:
    """Every row of a journal's complete rounds, each with its round; None when it has none."""
    rounds = journal.rounds()
    if not rounds:
        return None
    parts = {k: load_saved(p) for k, p in rounds.items()}
    return datasets.concatenate_datasets([ds.add_column("round", [k] * len(ds)) for k, ds in parts.items()])


def labels_dataset(run: RunFolder) -> datasets.Dataset:
    """Every label the run's label journal holds (``labels/round_XXXX``), one row per query, with its round."""
    ds = journal_dataset(run.label_journal)
    if ds is None:
        raise DataError(f"{str(run.path)!r} holds no labels yet (its labels/ folder is empty)")
    return ds


EXPORTED = {"README.md", "data", "ratings"}
"""What an export writes into its folder: a folder holding only these may be written again."""


def check_export_dest(dest: str) -> None:
    """Refuse an export folder that is a file or holds anything but an earlier export (which would be
    deleted), naming it; a Hub repo id that is no local path is the Hub's."""
    path = Path(dest).expanduser()
    if is_repo_id(dest) and not path.exists():
        return
    if path.exists() and not path.is_dir():
        raise ConfigError("--export", f"{dest!r} is a file; give a folder to write the labels into",
                          noun="option")
    if path.is_dir() and not {p.name for p in path.iterdir()} <= EXPORTED:
        raise ConfigError("--export", f"{dest!r} holds other files, which the export would delete; give a new "
                          "or empty folder", noun="option")


def export_labels(run_dir: str | Path, dest: str, private: bool = False, api: HfApi | None = None) -> str:
    """Write the labels (and the ratings, in a second config) to folder ``dest``, or push them to dataset repo
    ``dest`` (``owner/name``); return where they went."""
    check_export_dest(dest)
    run = RunFolder(run_dir)
    ds, rated = journal_dataset(run.label_journal), journal_dataset(run.rating_journal)
    if ds is None and rated is None:
        raise DataError(f"{str(run.path)!r} holds no labels yet (its labels/ and ratings/ folders are empty)")
    store = AnswerStore(run.queries_db) if run.queries_db.is_file() else None
    parts = {name: part for name, part in (("pairs", ds), ("ratings", rated)) if part is not None}
    asked = []
    for name, part in parts.items():
        told = store.instructions(part["id"]) if store else [""] * len(part)
        parts[name] = part.add_column("instructions", told)
        asked += told
    names = Counter(n for part in parts.values() if "annotator" in part.column_names
                    for joined in part["annotator"] for n in joined.split(","))
    env_id = run.config().env.id if run.config_yaml.is_file() else "unknown env"

    def skipped(part: datasets.Dataset | None) -> int:
        return sum(part["skipped"]) if part is not None and "skipped" in part.column_names else 0

    first = next(iter(parts.values()))
    meta = {"env_id": env_id, "pairs": len(ds) - skipped(ds) if ds is not None else 0, "skipped": skipped(ds),
            "annotators": dict(names), "frame_stack": json.loads(first.info.description or "{}").get("frame_stack", 1),
            "instructions": dict(Counter(asked)),
            "team": {name: asdict(person) for name, person in store.team().items()} if store else {}}
    if rated is not None:
        meta.update(ratings=len(rated) - skipped(rated), ratings_skipped=skipped(rated),
                    rating_scale=int(rated["scale"][0]) if "scale" in rated.column_names else None)
    repo = dest if is_repo_id(dest) and not Path(dest).exists() else None
    folder = run.path / "hub-labels" if repo else Path(dest)
    stage_for_hub(parts.get("pairs"), folder, labels_card(meta, repo), None,
                  {"ratings": parts["ratings"]} if "ratings" in parts else None)
    if repo is None:
        return str(folder)
    return push_to_hub(folder, repo, private, api, message="Upload human preference labels with rlhp-annotate")


def export_label_files(run_dir: str | Path, dest: str, fmt: LabelFormat) -> str:
    """Write the labels of a run on a dataset (``trajectories=dataset``) into folder ``dest`` as Preference
    Transformer's or Uni-RLHF's label files: start indices into the dataset's transitions laid end to end."""
    run = RunFolder(run_dir)
    path = Path(dest).expanduser()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError("--export", f"{dest!r} is a file or holds files already; give a new or empty folder",
                          noun="option")
    config = run.config()
    source = OmegaConf.select(config, "trajectories.path")
    if source is None or "DatasetSource" not in str(OmegaConf.select(config, "trajectories._target_")):
        raise ConfigError("--format", "writes start indices into a dataset; this run did not label one "
                          "(trajectories=dataset)", noun="option")
    ds = labels_dataset(run)
    told = ~np.isnan(np.asarray(ds["label"], np.float32))
    episodes, _ = open_trajectories(source, key="trajectories.path")
    lengths = np.array([len(t) for t in episodes])
    position_of = {int(t.episode): i for i, t in enumerate(episodes)}
    episode = np.asarray(ds["episode"], np.int64)[told]
    start = np.asarray(ds["start"], np.int64)[told]
    length = int(np.asarray(ds[0]["dones"]).shape[-1])
    position = np.vectorize(position_of.__getitem__, otypes=[np.int64])(episode) if len(episode) else episode
    pairs = SegmentLabels(flat_starts(position, start, lengths), np.asarray(ds["label"], np.float32)[told], length)
    write_label_files(pairs, path, fmt, env=str(config.env.id).replace("/", "-"))
    return str(path)
