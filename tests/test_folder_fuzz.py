"""Run-folder fuzzing: every file a real run wrote, damaged in the ways disks and copies damage files, then read
back by the commands that read run folders.

The property: the command ends well (a resume falls back to an older checkpoint and says so, a report leaves the
run out of nothing), or it refuses in one line with its own exit code that names the file, writes nothing in its
place and leaves the damaged file as it was. A traceback fails.

The fast form (the suite) gives one file of each kind one damage, in turn, and reads the folder with
``rlhp-report``; ``rlhp-train resume=`` reads a sample of them (the labelling store is fuzzed in
test_annotate.py). ``RLHP_FUZZ_DEEP=1`` gives every file every damage and resumes each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import BIN, run_cli

from rlhp.report.cli import main as report_main

pytestmark = pytest.mark.slow
DEEP = os.environ.get("RLHP_FUZZ_DEEP") == "1"
RUN = ["debug=fast", "logger=none", "seed=1", "num_rounds=4"]


def garbage(path: Path) -> None:
    path.write_bytes(b"\0not what was written\xff" * 40)


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def missing(path: Path) -> None:
    path.unlink()


def a_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGES: list[Callable[[Path], None]] = [garbage, truncated, emptied, missing, a_folder]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """A real run stopped after round 2: its newest checkpoint is iter_0002, and it has no eval.json."""
    where = tmp_path_factory.mktemp("made")
    run_cli("rlhp-train", *RUN, f"hydra.run.dir={where / 'run'}", cwd=where)
    run = where / "run"
    (run / "eval.json").unlink()
    for name in ("final", "iter_0003"):
        shutil.rmtree(run / "checkpoints" / name)
    return run


def read_back(run: Path) -> list[Path]:
    """The files a later command may read: all but logs and the lock (a log is only appended to)."""
    return sorted(p.relative_to(run) for p in run.rglob("*") if p.is_file()
                  and p.name not in (".lock", "train.log") and p.suffix != ".log")


def kind(rel: Path) -> str:
    """A file's kind: its path with round and checkpoint numbers taken out."""
    return re.sub(r"\d+", "#", str(rel))


def cases(run: Path) -> list[tuple[Path, Callable[[Path], None]]]:
    files = read_back(run)
    if DEEP:
        return [(f, d) for f in files for d in DAMAGES]
    one_of_each = list({kind(f): f for f in reversed(files)}.values())[::-1]
    return [(f, DAMAGES[i % len(DAMAGES)]) for i, f in enumerate(one_of_each)]


def damaged_copy(stopped_run: Path, tmp_path: Path, rel: Path, damage: Callable[[Path], None]) -> Path:
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    damage(run / rel)
    return run


def state(path: Path) -> bytes | str | None:
    return "folder" if path.is_dir() else path.read_bytes() if path.exists() else None


def assert_refused_or_fine(rc: int, stderr: str, command: str, run: Path, rel: Path, before: bytes | str | None):
    assert "Traceback" not in stderr, stderr[-3000:]
    if rc == 0:
        return
    lines = stderr.strip().splitlines()
    assert rc not in (1,) and lines, stderr[-3000:]
    assert lines[-1].startswith(f"{command}: "), stderr[-3000:]
    named = {str(run / rel), str(run / rel.parent), str(run)}
    assert any(name in lines[-1] for name in named), lines[-1]
    assert state(run / rel) == before  # never overwritten


def test_the_fuzz_reads_every_kind_of_file_a_run_writes(stopped_run):
    files = {str(p) for p in read_back(stopped_run)}
    for wanted in (".hydra/config.yaml", ".hydra/overrides.yaml", "metrics.csv", "checkpoints/iter_0002/resume.json",
                   "checkpoints/iter_0002/agent.zip", "checkpoints/iter_0002/state.json",
                   "labels/round_0000/state.json", "trajectories/round-0000.parquet"):
        assert wanted in files, wanted


def test_rlhp_report_reads_a_damaged_run_or_names_the_file(stopped_run, tmp_path, capsys):
    for i, (rel, damage) in enumerate(cases(stopped_run)):
        run = damaged_copy(stopped_run, tmp_path / str(i), rel, damage)
        before = state(run / rel)
        rc = report_main([str(run)])
        err = capsys.readouterr().err
        assert_refused_or_fine(rc, err, "rlhp-report", run, rel, before)


RESUMED = [".hydra/config.yaml", "metrics.csv", "checkpoints/iter_0002/resume.json", ".hydra/overrides.yaml",
           "checkpoints/iter_0002/config.yaml", "checkpoints/iter_0002/arrays.npz", "checkpoints/iter_0002/chunks.txt"]


@pytest.mark.parametrize("rel", RESUMED if DEEP else RESUMED[:3])
def test_rlhp_train_resumes_a_damaged_run_from_a_good_checkpoint_or_names_the_file(stopped_run, tmp_path, rel):
    damages = DAMAGES if DEEP else [DAMAGES[RESUMED.index(rel) % len(DAMAGES)]]
    for damage in damages:
        run = damaged_copy(stopped_run, tmp_path / damage.__name__, Path(rel), damage)
        before = state(run / rel)
        proc = subprocess.run([str(BIN / "rlhp-train"), f"resume={run}"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
        assert_refused_or_fine(proc.returncode, proc.stderr, "rlhp-train", run, Path(rel), before)
        if proc.returncode == 0:
            assert (run / "eval.json").is_file()


@pytest.mark.parametrize("damage", [garbage, missing, a_folder], ids=lambda d: d.__name__)
def test_a_damaged_file_is_named_by_the_readers_of_a_run_folder(stopped_run, tmp_path, damage):
    # (Half a YAML or CSV file often still reads: the fuzz above checks what follows from that.)
    code = ("import sys\nfrom rlhp.runs import RunFolder\nfrom rlhp.errors import DataError\n"
            "r = RunFolder(sys.argv[1])\n"
            "for read in (r.config, r.overrides, r.metrics):\n"
            "    try: read()\n"
            "    except DataError as err: print(err)\n")
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    named = [".hydra/config.yaml", "metrics.csv"] + ([] if damage is missing else [".hydra/overrides.yaml"])
    for rel in named:  # missing overrides.yaml: none were given
        damage(run / rel)
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stdout.splitlines()
    assert sorted(line.split("'")[1] for line in lines) == sorted(str(run / rel) for rel in named)
