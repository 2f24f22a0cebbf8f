"""Every command the README and docs give: collected from their fenced blocks and inline code, not listed by hand.

The fast form (the suite) reads each ``rlhp-train``, ``rlhp-collect`` and ``rlhp-bc`` command as the command line
would before it runs anything (overrides Hydra can read, no group by an old name, no option that does not exist)
and composes and validates its config, with placeholders (``<run>``, ``N``) filled and each sweep at its first
value. ``RLHP_FUZZ_DEEP=1`` also runs each ``rlhp-train`` command with ``debug=fast``, except those that need
people, a cluster or a run folder of their own.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from helpers import composed, run_cli
from hydra.core.override_parser.overrides_parser import OverridesParser

import rlhp.experiment.cli as cli
import rlhp.experiment.options as options
from rlhp.experiment.config import validate_collect, validate_train
from rlhp.experiment.preflight import check_command_line, extra_in_overrides

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEEP = os.environ.get("RLHP_FUZZ_DEEP") == "1"
COMMAND = re.compile(r"^(rlhp-(?:train|collect|bc))(?:\s|$)")
# What a placeholder stands for where a command is composed; the path of a dataset need not exist to compose.
FILL = {"N": "0", "...": "placeholder", "<name>": "placeholder"}
NOT_HERE = {
    "resume=": "resumes a run folder of its own",
    "gatherer=human": "needs people at the page",
    "hydra/launcher=slurm": "needs a SLURM cluster",
    "hydra.launcher.ray.init.address": "needs a Ray cluster",
    "push_to_hub": "needs the Hub",
    "expert=hub": "needs the Hub",
}
"""Why a command does not run here in the deep form (it is still composed and validated)."""


def commands() -> list[tuple[str, str]]:
    """(page, command) for every rlhp command a page shows, in fenced blocks and inline code; extending.md's name
    the reader's own configs, and tests/test_extending.py makes them and runs those commands."""
    found = []
    for page in PAGES:
        if page.name == "extending.md":
            continue
        text = page.read_text()
        for lang, block in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S):
            if lang not in ("", "bash", "sh", "console"):
                continue
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" # ")[0].strip()
                if COMMAND.match(line) and not line.startswith(("rlhp-train:", "rlhp-collect:", "rlhp-bc:")):
                    found.append((page.name, line))
        for code in re.findall(r"`(rlhp-(?:train|collect|bc)(?: [^`]*)?)`", text):
            found.append((page.name, code))
    return list(dict.fromkeys(found))


def words(command: str) -> list[str]:
    return shlex.split(command.replace("<", "'<").replace(">", ">'")) if "<" in command else shlex.split(command)


def filled(command: str) -> list[str]:
    """The command's words after its name, placeholders filled."""
    out = []
    for word in words(command)[1:]:
        key, eq, value = word.partition("=")
        if re.fullmatch(r"<[^>]*>", value) and options.group_options(key) is not None:
            continue  # `expert=<option>`: any of the group's options
        out.append(f"{key}={FILL.get(value, re.sub(r'<[^>]*>', 'placeholder', value))}" if eq else word)
    return out


def overrides(command: str) -> list[str]:
    """The command's overrides, placeholders filled and sweeps at their first value; flags dropped."""
    out, parser = [], OverridesParser.create()
    for word in filled(command):
        if word.startswith("-") or "=" not in word or word.startswith(("hydra.", "hydra/", "resume=")):
            continue
        key, value = word.split("=", 1)
        (parsed,) = parser.parse_overrides([f"{key}={value}"])
        if parsed.is_sweep_override():
            value = next(iter(parsed.sweep_string_iterator()))
        out.append(f"{key}={value}")
    return out


COMMANDS = commands()


def test_the_docs_give_commands_of_every_kind():
    assert len(COMMANDS) > 100
    assert {c.split()[0] for _, c in COMMANDS} == {"rlhp-train", "rlhp-collect", "rlhp-bc"}
    assert any("reward_trainer/crop=temporal" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}: {c[:80]}" for p, c in COMMANDS])
def test_every_documented_command_reads_composes_and_validates(page, command, tmp_path, monkeypatch):
    # An empty Minari root, as a reader's first run has: a dataset this machine made once must not refuse the
    # documented command that makes it.
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    argv = filled(command)
    name = words(command)[0].removeprefix("rlhp-")
    for check in (cli.unreadable_override, cli.moved_group, cli.unknown_option, extra_in_overrides,
                  lambda argv: check_command_line(argv, name, f"rlhp-{name}")):
        error = check(argv)
        assert error is None, f"{page}: `{command}`: {error}"
    cfg = composed(name, overrides(command))
    if name == "train":
        validate_train(cfg)
    elif name == "collect":
        validate_collect(cfg)


RUNNABLE = [(p, c) for p, c in COMMANDS if c.startswith("rlhp-train")] if DEEP else []


@pytest.mark.slow
@pytest.mark.skipif(not DEEP, reason="runs every documented rlhp-train command: RLHP_FUZZ_DEEP=1")
@pytest.mark.parametrize(("page", "command"), RUNNABLE, ids=[f"{p}: {c[:80]}" for p, c in RUNNABLE])
def test_every_documented_training_command_runs_at_the_debug_budget(page, command, tmp_path):
    reason = next((why for key, why in NOT_HERE.items() if key in command), None)
    if reason or "<" in command or "--help" in command:
        pytest.skip(reason or "needs a file of the reader's")
    proc = run_cli("rlhp-train", *overrides(command), "debug=fast", "logger=none",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 0, f"{page}: `{command}`:\n{proc.stderr[-3000:]}"
