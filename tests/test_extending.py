"""docs/extending.md as a reader runs it: its files saved in a folder outside the repo, its commands run there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def save_files(folder: Path) -> list[str]:
    """Save each python and yaml block under the path its first line names; return the paths."""
    paths = []
    for lang, body in BLOCK.findall(PAGE.read_text()):
        first, _, rest = body.partition("\n")
        if lang in ("python", "yaml"):
            assert re.fullmatch(r"# [\w./]+\.(py|yaml)", first), f"a {lang} block must open with its path: {first}"
            (folder / first[2:]).parent.mkdir(parents=True, exist_ok=True)
            (folder / first[2:]).write_text(rest)
            paths.append(first[2:])
    return paths


def commands() -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == "bash"]


def test_the_selector_fits_in_under_60_lines_and_every_file_names_its_path(tmp_path):
    paths = save_files(tmp_path)
    assert {"my_selector.py", "conf/fragmenter/least_margin.yaml", "conf/method/least_margin.yaml",
            "hydra_plugins/my_method_configs/__init__.py"} <= set(paths)
    assert len((tmp_path / "my_selector.py").read_text().splitlines()) < 60


@pytest.mark.slow
def test_the_pages_commands_run_verbatim_outside_the_repo(tmp_path):
    save_files(tmp_path)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "WANDB_MODE": "offline"}
    env.pop("PYTHONPATH", None)  # the page sets its own
    script = "set -e\n" + "\n".join(commands())
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tmp_path / "sweep" / "report.md").read_text()
    for method in ("pebble", "qpa", "least_margin"):  # the three side by side, each a finished run
        assert re.search(rf"^\| method={method} \| 1 \| ", report, re.M), method
    assert "my_selector.LeastMargin" in (tmp_path / "sweep" / "2" / ".hydra" / "config.yaml").read_text()
    for run in ("teacher", "reward", "plugged"):
        assert (tmp_path / run / "eval.json").is_file()
    assert "last-steps" in (tmp_path / "teacher" / "labels").rglob("*.arrow").__next__().read_bytes().decode(
        "latin-1")
    assert not (ROOT / "sweep").exists() and not (ROOT / "my_selector.py").exists()
