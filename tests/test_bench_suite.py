"""The suite benchmark's share of the loop spent training the reward, with updates run beside the agent or not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlhp.report.folders import Run
from rlhp.runs import RunFolder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_suite import reward_share  # noqa: E402


def run(rows: list[dict]) -> Run:
    return Run(RunFolder(Path(".")), {}, "finished", rows)


def test_reward_trainings_share_counts_what_the_loop_waited_for():
    synchronous = [{"time_sample_s": 1.0, "time_reward_training_s": 3.0, "time_agent_training_s": 6.0}] * 2
    # metrics.csv's rows: round 0 fits the reward first (no wait); later updates overlap the agent's phase.
    asynchronous = [{"time_sample_s": 1.0, "time_reward_training_s": 3.0, "time_agent_training_s": 6.0,
                     "time_reward_wait_s": None},
                    {"time_sample_s": 1.0, "time_reward_training_s": 3.0, "time_agent_training_s": 6.0,
                     "time_reward_wait_s": 0.5}]
    assert reward_share([run(synchronous), run(asynchronous)]) == pytest.approx([30.0, 100 * 3.5 / 17.5])


def test_a_failed_run_ends_a_benchmark_with_rlhp_trains_reason_and_no_traceback(tmp_path):
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_learners.py"
    done = subprocess.run([sys.executable, str(script), "--env", "Pendulum-v1", "--agents", "sac", "--steps", "100",
                           "--override", "agent.not_a_key=1", "--root", str(tmp_path),
                           "--ledger", str(tmp_path / "runs.csv")], capture_output=True, text=True)
    assert done.returncode == 2  # rlhp-train's own status for a config error
    assert "config error: config key `agent.not_a_key` is not an option of SAC" in done.stderr
    assert "Traceback" not in done.stderr
