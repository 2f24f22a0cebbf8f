"""``rlhp-train --help``: a page a person reads (what each group builds, example commands, where the docs are);
the composed config stays behind ``--cfg job``."""

from __future__ import annotations

from importlib.resources import files

from rlhp.experiment.options import OPTION_FOLDERS, group_options

GROUPS = {
    "env": "the environment",
    "task": "the true reward: the env's own or a behaviour",
    "agent": "the RL agent (SB3, SBX in JAX, offline)",
    "trajectories": "where trajectories come from",
    "reward_net": "the reward model",
    "reward_trainer": "how the reward model trains",
    "reward_trainer/crop": "the steps of a pair a batch scores",
    "reward_trainer/pseudo_labels": "SURF's pseudo-labels",
    "reward_trainer/label_filter": "labels left out or flipped (erring teachers)",
    "reward_trainer/replay": "the labels each pass covers",
    "reward_trainer/warm_start": "RIME's warm start before the first labels",
    "fragmenter": "which pairs to ask about",
    "query_pool": "where candidate pairs are cut from",
    "query_schedule": "how many labels each round asks for",
    "querent": "how a pair becomes a query (ids, clips)",
    "gatherer": "who answers (a teacher, people, a file)",
    "reward_learning": "learned, learned beside the agent, or none",
    "logger": "W&B (offline by default) or none",
    "callbacks": "what a run writes as it goes",
    "pretrain": "behavioural cloning first",
    "experiment": "a versioned record of settings",
    "method": "a published method on top of an experiment",
    "hparams_search": "an Optuna search over a sweep (-m)",
    "debug": "tiny budgets for a smoke run",
}
"""What each of ``rlhp-train``'s config groups builds, one line each."""

EXAMPLES = [
    ("rlhp-train env=cartpole gatherer=synthetic", "the CartPole demo, labels from the true reward"),
    ("rlhp-train experiment=bpref/walker_walk method=qpa seed=1", "a B-Pref task with a method"),
    ("rlhp-train -m experiment=cartpole seed=0,1,2,3,4", "a sweep (hydra/launcher=joblib, slurm or ray)"),
    ("rlhp-train env=cartpole gatherer=human", "people label clips at http://127.0.0.1:8765/"),
    ("rlhp-train resume=outputs/train/<date>/<time>", "continue a stopped or killed run, exactly"),
]
"""The commands the page opens with, and what each does."""

DOCS = ["README.md (words, commands)", "docs/configuration.md (every group and key)", "docs/runs.md (run folders)",
        "docs/human-labels.md", "docs/sweeps.md", "docs/benchmarks.md"]
"""The pages the help points to."""

NOT_GROUPS = frozenset({"hydra", "expert", "__pycache__"})
"""Folders of ``rlhp/conf`` that are not ``rlhp-train``'s groups (Hydra's own; rlhp-collect's experts)."""


def train_groups() -> dict[str, list[str]]:
    """``rlhp-train``'s config groups and their options, as the option check reads them from ``rlhp/conf`` (an
    experiment in a sub-folder is one option, ``bpref/walker_walk``)."""
    conf = files("rlhp.conf")
    names = [f.name for f in conf.iterdir() if f.is_dir() and f.name not in NOT_GROUPS]
    names += [f"{name}/{sub.name}" for name in names if name not in OPTION_FOLDERS
              for sub in conf.joinpath(name).iterdir() if sub.is_dir() and sub.name != "__pycache__"]
    return {name: options for name in names if (options := group_options(name))}


def train_help(width: int = 120) -> str:
    """The text ``rlhp-train --help`` prints."""
    groups = train_groups()
    pad = max(len(name) for name in groups) + 2
    lines = ["rlhp-train: preference comparisons (Christiano et al. 2017). Every part is a config group: group=option",
             "picks it, key=value sets one of its values (reward_trainer.lr=3e-3), -m sweeps (seed=0,1,2).", "",
             "Examples:"]
    command_pad = max(len(c) for c, _ in EXAMPLES) + 2
    lines += [f"  {command:<{command_pad}}{what}" for command, what in EXAMPLES]
    lines += ["", "Groups (group=option): what each builds, and its options"]
    for name in sorted(groups, key=lambda n: list(GROUPS).index(n) if n in GROUPS else len(GROUPS)):
        shown = groups[name]
        if name == "experiment":
            shown = ["bpref/<task>", "offline/<dataset>", *(o for o in shown if "/" not in o)]
        head = f"  {name:<{pad}}{GROUPS.get(name, '')}: "
        lines.append(head + _cut(", ".join(shown), width - len(head)))
    lines += ["", "Every key and its value: rlhp-train <overrides> --cfg job. Hydra's own options: --hydra-help.",
              "Docs: " + "; ".join(DOCS[:3]) + ";", "      " + "; ".join(DOCS[3:]) + "."]
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a comma, with an ellipsis where it was cut."""
    if len(text) <= width:
        return text
    return text[:text.rfind(",", 0, width - 4)] + ", ..."
