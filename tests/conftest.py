"""Shared helpers: run the installed ``rlhp-train`` in a subprocess with tiny budgets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
FAST = ["debug=fast", "logger=none"]


def run_cli(cmd: str, *overrides: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run an installed rlhp command; fail with its output when it exits non-zero unexpectedly."""
    env = {**os.environ, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([str(BIN / cmd), *overrides], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    if check and proc.returncode != 0:
        pytest.fail(f"{cmd} {' '.join(overrides)} exited {proc.returncode}\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


@pytest.fixture
def train(tmp_path: Path):
    """Run ``rlhp-train`` with the debug config in a fresh folder; return the run folder."""

    def _train(*overrides: str, name: str = "run", check: bool = True) -> tuple[Path, subprocess.CompletedProcess]:
        run_dir = tmp_path / name
        proc = run_cli("rlhp-train", *FAST, *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path, check=check)
        return run_dir, proc

    return _train
