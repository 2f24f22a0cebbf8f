"""Fixtures: the installed commands in a fresh folder per test, with tiny budgets."""

from __future__ import annotations

import os
import subprocess
import tempfile
import timeit
from pathlib import Path

import pytest
import torch
from helpers import FAST, run_cli, start_command_server

# One thread a test process, as a run has (train.yaml's torch_threads): the suite runs a process a core, and two
# processes' torch threads spinning on two cores slow small tensor work many times over.
torch.set_num_threads(1)

# JAX's persistent compilation cache, shared by the test processes: SBX's agents compile the same functions in
# every run of a test, and a compile costs seconds on a CPU (the commands the tests start inherit it).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tempfile.gettempdir()) / "rlhp-tests-jax-cache"))
# By default JAX caches only compiles over a second; SBX's many small ones add up to ~3 s a process.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# torch sets its compiler's cache folder in the environment the first time it needs it, inside a test process:
# named up front, the variable is as the command server found it, and commands stay forked (a changed variable
# read at import sends every later command of that process to a fresh interpreter, 3 s each).
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "rlhp-tests-torchinductor"))
# Tests that train SB3's agents directly get its default logger, which makes an empty tempdir/SB3-<time> folder a run.
os.environ.setdefault("SB3_LOGDIR", str(Path(tempfile.gettempdir()) / "rlhp-tests-sb3"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The machine's speed under the suite's time, measured once the tests are done: the same suite's time has
    differed nearly threefold between machines (docs/testing.md, "The suite's time")."""
    took = min(timeit.repeat("sum(range(1_000_000))", number=1, repeat=5))
    terminalreporter.write_line(f"machine speed: sum(range(10**6)) in {took * 1e3:.1f} ms on one core")


@pytest.fixture(scope="session", autouse=True)
def command_server() -> None:
    """The fork server the installed commands run from, started before any test changes the environment."""
    start_command_server()


@pytest.fixture
def train(tmp_path: Path):
    """Run ``rlhp-train`` with the debug config in a fresh folder; return the run folder and the process."""

    def _train(*overrides: str, name: str = "run", check: bool = True) -> tuple[Path, subprocess.CompletedProcess]:
        run_dir = tmp_path / name
        proc = run_cli("rlhp-train", *FAST, *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path, check=check)
        return run_dir, proc

    return _train


@pytest.fixture
def collect(tmp_path: Path):
    """Run the installed ``rlhp-collect`` in a fresh folder; return the run folder and the process."""

    def _collect(*overrides: str, name: str = "run", check: bool = True) -> tuple[Path, subprocess.CompletedProcess]:
        run_dir = tmp_path / name
        proc = run_cli("rlhp-collect", *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path, check=check)
        return run_dir, proc

    return _collect
