"""Trajectory datasets on the Hugging Face Hub: the dataset card, upload to a *dataset* repo, and
loading from a save_to_disk folder, Parquet files, a Hub dataset repo id or a Minari dataset id.

A Hub repo holds ``data/train-*.parquet``, ``README.md`` (the card; rlhp's metadata sits in its
YAML under ``rlhp``) and ``preview.mp4``, so ``datasets.load_dataset(repo_id)`` reads it as is.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import yaml
from datasets.exceptions import DatasetGenerationError
from huggingface_hub import DatasetCard, HfApi
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from rlhp.data.hf import dataset_metadata, dataset_to_trajectories, load_saved
from rlhp.data.minari import local_minari_id, looks_like_minari_id, open_minari
from rlhp.data.spaces import space_from_json
from rlhp.data.trajectory import Trajectory
from rlhp.errors import ConfigError, DataError, NetworkError

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
PREVIEW = "preview.mp4"
HUB_CONFIGS = [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}]
"""The card's data section: the staged Parquet files are the train split."""
RATINGS_CONFIG = {"config_name": "ratings", "data_files": [{"split": "train", "path": "ratings/train-*.parquet"}]}
"""A label export's second config: the clips people rated (``querent.mode=rate``)."""


def is_repo_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Hub repo id, ``owner/name``."""
    return bool(_REPO_ID.match(text))


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def _expert_rows(policy: dict[str, Any], stats: dict[str, Any]) -> list[tuple[str, str]]:
    """The card's rows on the expert and its episodes: what it is, how many episodes and steps, their return."""
    return [("expert", f"{policy.get('algorithm', '?')} `{policy.get('name', '?')}` "
                       f"({policy.get('source', '?')}, {policy.get('training_steps', '?')} training steps)"),
            ("episodes", str(stats["episodes"])), ("transitions", str(stats["steps"])),
            ("return", f"{_fmt(stats['return_mean'])} ± {_fmt(stats['return_std'])} "
                       f"(min {_fmt(stats['return_min'])}, max {_fmt(stats['return_max'])})")]


def dataset_card(meta: dict[str, Any], repo_id: str | None = None, video: str | None = None) -> DatasetCard:
    """A card: YAML (tags, data files, rlhp metadata) and a readable page with stats and how to load it."""
    stats, policy = meta["summary"], meta.get("policy", {})
    env_id = meta.get("env_id", "unknown env")
    spaces = {k: str(space_from_json(meta[k])) for k in ("observation_space", "action_space") if k in meta}
    header = {
        "license": "mit",
        "task_categories": ["reinforcement-learning"],
        "tags": ["rlhp", "reinforcement-learning", "demonstrations", env_id.replace("/", "-"),
                 *([policy["algorithm"].lower()] if "algorithm" in policy else [])],
        "size_categories": ["n<1K" if stats["episodes"] < 1000 else "1K<n<10K"],
        "configs": HUB_CONFIGS,
        "rlhp": meta,
    }
    name = repo_id or "<repo id>"
    rows = [("environment", f"`{env_id}`"), *((k.replace("_", " "), f"`{v}`") for k, v in spaces.items()),
            *_expert_rows(policy, stats)]
    made = meta.get("collection", {})
    ranking = meta.get("ranking", [])
    body = [
        f"# Demonstrations: {env_id}", "",
        f"Episodes of an expert in `{env_id}`, one row per episode, written by "
        "`rlhp-collect` (rlhp, reinforcement learning from human preferences).", "",
        "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), "",
    ]
    if video:
        body += ["## Preview", "", f'<video controls src="{video}"></video>', ""]
    if ranking:
        body += ["## Ranks", "", "Quality varies on purpose (for T-REX); rank 0 is the worst.", "",
                 "| rank | checkpoint (steps) | epsilon | mean return |", "|---|---|---|---|",
                 *(f"| {r['rank']} | {r['checkpoint']} | {r['epsilon']} | {_fmt(r['return_mean'])} |" for r in ranking),
                 ""]
    how = (f"every episode the expert trained on, from its first, until its last {made.get('window')} averaged "
           f"{made.get('stop_at_return')} (the replay, as D4RL's medium-replay datasets)" if made.get("replay")
           else f"{'deterministic' if made.get('deterministic', True) else 'stochastic'} actions, "
                f"epsilon {made.get('epsilon', 0.0)}")
    body += [
        "## How it was made", "",
        f"`{' '.join(['rlhp-collect', *made.get('overrides', [])])}` (seed {made.get('seed', '?')}, {how}).", "",
        "## How to load", "",
        "```python", "import datasets", f'ds = datasets.load_dataset("{name}", split="train")',
        '# or, from the run folder: datasets.load_from_disk("dataset")', "```", "",
        "Columns: `obs` and `acts` (per step; `obs` has one more row, the final observation), `rews` "
        "(true rewards), `terminal` (ended by termination, not a time limit), `infos` (JSON)"
        + (", `rank`, `checkpoint`, `epsilon`" if ranking else "") + ". With rlhp, exact dtypes and spaces:", "",
        "```python", "from rlhp.data.hub import open_trajectories",
        f'trajectories, metadata = open_trajectories("{name}")', "```", "",
    ]
    return DatasetCard("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(body))


def trajectories_card(meta: dict[str, Any]) -> DatasetCard:
    """A card for a folder of per-round Parquet files of sampled trajectories (rlhp's metadata in its YAML)."""
    header = {"tags": ["rlhp", "reinforcement-learning"],
              "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": "round-*.parquet"}]}],
              "rlhp": meta}
    body = (f"# Trajectories: {meta.get('env_id', 'unknown env')}\n\nEpisodes that `rlhp-train` sampled to cut "
            "fragments from, one Parquet file per round, one row per episode (obs, acts, rews, terminal, infos; "
            "stacked observations as `frames`, each frame once).\n")
    return DatasetCard("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body)


def _asked_lines(meta: dict[str, Any]) -> list[str]:
    """The card's lines on what people were asked: each text of instructions and its labels' count."""
    body = ["## What people were asked", "", "Each label's `instructions` column holds the text shown above its clips.",
            ""]
    for text, count in meta.get("instructions", {}).items():
        quoted = "\n".join(f"> {line}" for line in text.splitlines()) if text else \
            "> (no instructions: the page asked \"Which clip does the task better?\")"
        body += [f"{count} label{'s' if count != 1 else ''}:", "", quoted, ""]
    return body


def _team_lines(team: dict[str, dict[str, Any]]) -> list[str]:
    """The card's table of the team: each person's answers, gold accuracy and agreement (none without a team)."""
    if not team:
        return []

    def share(value: float | None) -> str:
        return "–" if value is None else f"{value:.0%}"

    return ["## The team", "",
            "Each person's answers to gold queries (whose answer a teacher knows, from the true returns) and "
            "how often their labels match another person's on the same query. A person left out of the run "
            "counts in no label above.", "",
            "| annotator | answers | gold answers | right on gold | agreement (comparisons) | left out |",
            "|---|---:|---:|---:|---:|---|",
            *(f"| {name} | {p['answers']} | {p['gold_answers']} | {share(p['gold_accuracy'])} | "
              f"{share(p['agreement'])} ({p['compared']}) | {p['left_out'] or 'no'} |" for name, p in team.items()),
            ""]


def labels_card(meta: dict[str, Any], repo_id: str | None = None) -> DatasetCard:
    """A card for people's preference labels: who labelled how much, and how to read them."""
    header = {"license": "mit", "task_categories": ["reinforcement-learning"],
              "tags": ["rlhp", "reinforcement-learning", "human-preferences", "rlhf",
                       meta.get("env_id", "unknown").replace("/", "-")],
              "configs": (HUB_CONFIGS if meta.get("pairs", 0) or meta.get("skipped", 0) else []) +
                         ([RATINGS_CONFIG] if meta.get("ratings") else []),
              "rlhp": meta}
    people = meta.get("annotators", {})
    body = [
        f"# Human preferences: {meta.get('env_id', 'unknown env')}", "",
        "Pairs of trajectory fragments and which one people preferred, labelled in rlhp's web page while "
        "`rlhp-train ... gatherer=human` trained an agent on them.", "",
        "| | |", "|---|---|", f"| labelled pairs | {meta.get('pairs', '?')} |",
        f"| skipped (\"can't tell\") | {meta.get('skipped', '?')} |",
        f"| annotators | {', '.join(f'{k} ({v})' for k, v in people.items()) or '?'} |", "",
        "Columns: `label`, the probability that the **first** (left) fragment is better (1 left, 0 right, "
        "0.5 equal; the mean when several people answered; NaN and `skipped` for \"can't tell\"), "
        "`annotator` (comma-separated), `answered_at` (Unix seconds), `round`, `id` (the query), and each "
        "fragment pair's `frames`, `acts`, `dones`, `rews` (true rewards), `episode`, `start`. A fragment of "
        "n steps holds n + k frames, k the frame stack (`frame_stack` in the card's rlhp metadata, 1 without "
        "stacking): step t's observation is frames t to t + k - 1, its next observation the same one frame on.",
        "",
        "```python", "import datasets",
        f'ds = datasets.load_dataset("{repo_id or "<repo id>"}", split="train")',
        "# an exported folder (load_dataset(folder) may serve an earlier folder of the same name from its cache):",
        'ds = datasets.load_dataset("parquet", data_files="<folder>/data/*.parquet", split="train")', "```", "",
    ]
    if meta.get("ratings"):
        body += [
            "## Ratings", "",
            f"{meta['ratings']} clips rated alone on a scale of 1 to {meta.get('rating_scale', '?')} "
            f"({meta.get('ratings_skipped', 0)} of them \"can't tell\"), in the `ratings` config: the same columns, "
            "each row one clip (the fragment axis has length 1) and `label` its rating (NaN when skipped).", "",
            "```python", f'ratings = datasets.load_dataset("{repo_id or "<repo id>"}", "ratings", split="train")',
            'ratings = datasets.load_dataset("parquet", data_files="<folder>/ratings/*.parquet", split="train")',
            "```", ""]
    body += _asked_lines(meta) + _team_lines(meta.get("team", {}))
    return DatasetCard("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(body))


def stage_for_hub(ds: datasets.Dataset | None, folder: str | Path, card: DatasetCard, video: str | Path | None,
                  more: dict[str, datasets.Dataset] | None = None) -> Path:
    """Write the repo's files into ``folder``: Parquet data (``ds`` in ``data/``, each of ``more`` in a folder of its
    name: another config of the repo), the card and the preview video."""
    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, part in (({"data": ds} if ds is not None else {}) | (more or {})).items():
        (folder / name).mkdir()
        part.to_parquet(str(folder / name / "train-00000-of-00001.parquet"))
    card.save(folder / "README.md")
    if video is not None:
        shutil.copy(video, folder / PREVIEW)
    return folder


def push_to_hub(folder: str | Path, repo_id: str, private: bool = False, api: HfApi | None = None,
                message: str = "Upload demonstrations with rlhp-collect") -> str:
    """Create the *dataset* repo if needed and upload a staged folder in one commit; return its URL."""
    if not is_repo_id(repo_id):
        raise ConfigError("push_to_hub.repo_id", f"{repo_id!r} is not a repo id like 'my-org/cartpole-expert'")
    api = api or HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="dataset",
                          commit_message=message)
    except (HfHubHTTPError, OfflineModeIsEnabled, OSError, ValueError) as err:
        raise NetworkError(f"upload of {str(folder)!r} to dataset repo {repo_id!r} failed "
                           f"({type(err).__name__}: {err}). The files are kept there; log in "
                           f"(`hf auth login`) and upload them with `hf upload {repo_id} {folder} "
                           "--repo-type dataset`") from None
    return f"https://huggingface.co/datasets/{repo_id}"


def _card_metadata(card_path: str | Path) -> dict[str, Any]:
    try:
        return DatasetCard.load(card_path, repo_type="dataset").data.to_dict().get("rlhp", {})
    except (OSError, HfHubHTTPError, OfflineModeIsEnabled, ValueError):
        return {}


def _saved_to_disk(path: Path) -> bool:
    return path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists())


def _parquet_files(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(path.rglob("*.parquet"))


def is_minari_source(source: str) -> bool:
    """Whether ``source`` names a Minari dataset rather than a path or a Hub repo: it is in the local Minari root,
    or it is no local path and has a Minari id's shape that no Hub repo id has (``namespace/name/kind-v0``)."""
    if Path(source).expanduser().exists():
        return False
    return local_minari_id(source) or (looks_like_minari_id(source) and not is_repo_id(source))


def check_source(source: str, key: str) -> Path | None:
    """The local dataset that ``source`` names (None for a Hub dataset repo id or a Minari dataset id), refused
    when it does not exist (a config error naming ``key``) or is no dataset (a data error): a command checks this
    before it makes anything."""
    if not source.strip():
        raise ConfigError(key, "is empty; give a dataset folder, Parquet files, a Hub dataset repo id or a "
                          "Minari dataset id")
    if is_minari_source(source):
        if not local_minari_id(source):
            open_minari(source, key)  # refuses, saying where the dataset was looked for and how to fetch it
        return None
    path = Path(source).expanduser()
    where = repr(str(path))
    if _saved_to_disk(path):
        return path
    if path.exists():
        files = _parquet_files(path)
        if not files or any(f.suffix != ".parquet" for f in files):
            raise DataError(f"{where} (from {key}) is not a dataset: no save_to_disk files (state.json) and no "
                            "Parquet files in it")
        return path
    if not is_repo_id(source):
        raise ConfigError(key, f"{where} does not exist (nor is it a Hub dataset repo id like 'org/name')")
    return None


def _open(source: str, key: str) -> tuple[datasets.Dataset, dict[str, Any]]:
    path = check_source(source, key)
    where = repr(str(path))
    if path is not None and _saved_to_disk(path):
        ds = load_saved(path)
        if isinstance(ds, datasets.DatasetDict):
            ds = ds["train"] if "train" in ds else next(iter(ds.values()))
        return ds, dataset_metadata(ds)
    if path is not None:
        try:
            ds = datasets.Dataset.from_parquet([str(f) for f in _parquet_files(path)])
        except (OSError, pa.ArrowInvalid, ValueError, DatasetGenerationError) as err:
            cause = err.__cause__ or err  # datasets wraps the reader's error in a generic one
            raise DataError(f"{where} has Parquet files that could not be read ({cause})") from None
        card = (path if path.is_dir() else path.parent) / "README.md"
        return ds, _card_metadata(card) if card.exists() else {}
    try:
        ds = datasets.load_dataset(source, split="train")
    except Exception as err:  # datasets wraps network, auth and format errors in many types
        raise NetworkError(f"{source!r} is not a local path, and loading it as a Hub dataset repo failed "
                           f"({type(err).__name__}: {err})") from None
    return ds, _card_metadata(source)


def open_trajectories(source: str | Path, key: str = "path") -> tuple[list[Trajectory], dict[str, Any]]:
    """Trajectories and rlhp metadata from a save_to_disk folder, Parquet files, a Hub dataset repo id (rlhp's
    own layout, or imitation's huggingface_utils one) or a Minari dataset id; errors name the source and the
    problem."""
    if is_minari_source(str(source)):
        return open_minari(str(source), key)
    ds, meta = _open(str(source), key)
    missing = {"obs" if "frames" not in ds.column_names else "frames", "acts", "terminal"} - set(ds.column_names)
    if missing:
        raise DataError(f"{str(source)!r} has no column(s) {sorted(missing)}: not a trajectory dataset")
    if "rews" not in ds.column_names:
        raise DataError(f"{str(source)!r} has no rews column: rlhp needs the true rewards to label and evaluate")
    try:
        return dataset_to_trajectories(ds, meta), meta
    except (pa.ArrowException, AttributeError, KeyError, ValueError, TypeError) as err:
        raise DataError(f"{str(source)!r} is not a trajectory dataset (one episode per row): {err}") from None
