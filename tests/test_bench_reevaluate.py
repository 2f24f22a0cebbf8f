"""scripts/bench_reevaluate.py: a finished run's agent, at its end or at a round's checkpoint, over more episodes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_reevaluate.py"
sys.path.insert(0, str(SCRIPT.parent))
from bench_reevaluate import success  # noqa: E402


def test_the_success_cell_is_a_percentage_where_the_env_reports_success_and_a_dash_elsewhere():
    assert success({"true_return_mean": 1.0, "success_rate": 0.85}) == "85%"
    assert success({"true_return_mean": 1.0}) == "—"


@pytest.mark.slow
def test_a_rounds_checkpoint_is_evaluated_from_its_own_agent_and_a_missing_one_is_refused(train):
    run, _ = train("checkpoint_every=1")
    (run / "checkpoints" / "final" / "agent.zip").unlink()  # so the round's agent alone can be the one evaluated

    def reevaluate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT), str(run), "--episodes", "2", *args],
                              capture_output=True, text=True, timeout=600)

    done = reevaluate("--checkpoint", "iter_0000")
    assert done.returncode == 0, done.stderr
    assert "iter_0000, over 2 episodes" in done.stdout
    assert done.stdout.rstrip().endswith(", — |")  # CartPole reports no success
    refused = reevaluate()  # the final agent is gone
    assert refused.returncode == 2 and "no checkpoint 'final'" in refused.stderr
    assert "Traceback" not in refused.stderr
