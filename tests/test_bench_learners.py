"""The learners' benchmark: its ledger of runs and its table against the baseline's largest budget."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_learners import FIELDS, table  # noqa: E402
from ledger import read_rows  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_learners.py"


def row(agent: str = "sac", steps: int = 300_000, seed: int = 0, ret: float = 5000.0, wall: float = 60.0,
        env: str = "HalfCheetah-v5", overrides: str = "", n_envs: int = 1) -> dict[str, str]:
    return {"env": env, "n_envs": str(n_envs), "agent": agent, "overrides": overrides, "steps": str(steps),
            "seed": str(seed),
            "steps_per_s": "80.0", "return": f"{ret:.1f}", "wall_min": f"{wall:.1f}", "machine": "m", "date": "d"}


def test_each_budget_is_set_against_the_baselines_largest_on_its_own_env():
    ledger = [row(ret=4000.0, wall=60.0), row(seed=1, ret=6000.0, wall=66.0),  # SAC at 300k: 5000.0, 63 min
              row(steps=50_000, ret=100.0, wall=10.0),  # a smaller SAC budget: not the one set against
              row(steps=1_000_000, ret=1.0, wall=1.0, overrides="+agent.y=2"),  # another SAC: not the baseline
              row("crossq", 50_000, ret=5500.0, wall=20.0), row("crossq", 50_000, seed=1, ret=4700.0, wall=22.0),
              row("crossq", 50_000, ret=9.0, wall=1.0, overrides="+agent.x=1"),
              row("crossq", 50_000, ret=1.0, wall=1.0, env="Hopper-v5")]  # no SAC on Hopper: nothing to set against
    lines = table(ledger, ["sac", "ppo"])
    assert len(lines) == 6
    crossq = next(line for line in lines if "`crossq` |" in line and "HalfCheetah" in line)
    assert "| 50,000 | 0, 1 |" in crossq and "| 5100.0 ± " in crossq and "| 5500.0, 4700.0 |" in crossq
    assert "| 21.0 | 0.33x `sac`'s wall, +100.0 return (at 300,000: 5000.0) |" in crossq
    assert "0.02x `sac`'s wall, -4991.0 return" in next(line for line in lines if "+agent.x=1" in line)
    assert lines[0].startswith("| HalfCheetah-v5 | 1 | `sac` | 50,000 |") and "0.16x `sac`'s wall" in lines[0]
    assert lines[1].startswith("| HalfCheetah-v5 | 1 | `sac` | 300,000 |") and lines[1].endswith("| 63.0 | — |")
    assert lines[2].startswith("| HalfCheetah-v5 | 1 | `sac` `+agent.y=2` | 1,000,000 |")
    assert "0.02x `sac`'s wall" in lines[2]
    assert lines[-1].startswith("| Hopper-v5 | 1 | `crossq` |") and lines[-1].endswith("| — |")


def test_the_first_baseline_with_runs_on_an_env_and_its_copies_is_the_one_set_against():
    cartpole = "rlhp/CartPole-FixedHorizon-v0"
    ledger = [row("ppo", 150_000, ret=500.0, wall=2.0, env=cartpole, n_envs=16),
              row("sbx_ppo", 150_000, ret=490.0, wall=1.0, env=cartpole, n_envs=16),
              row("sac", 150_000, ret=10.0, wall=9.0, env=cartpole),  # one copy: not the 16 copies' baseline
              row(), row("ppo", 20_000, ret=1.0, wall=1.0)]  # SAC comes first on HalfCheetah
    lines = table(ledger, ["sac", "ppo"])
    assert [line.split(" | ")[:3] for line in lines] == [["| HalfCheetah-v5", "1", "`sac`"],
                                                        ["| HalfCheetah-v5", "1", "`ppo`"],
                                                        [f"| {cartpole}", "1", "`sac`"],
                                                        [f"| {cartpole}", "16", "`ppo`"],
                                                        [f"| {cartpole}", "16", "`sbx_ppo`"]]
    assert lines[1].endswith("| 0.02x `sac`'s wall, -4999.0 return (at 300,000: 5000.0) |")
    assert lines[2].endswith("| 9.0 | — |") and lines[3].endswith("| 2.0 | — |")
    assert lines[4].endswith("| 0.50x `ppo`'s wall, -10.0 return (at 150,000: 500.0) |")


def test_a_budget_per_agent_or_one_for_all():
    done = subprocess.run([sys.executable, str(SCRIPT), "--agents", "sac", "crossq", "--steps", "1", "2", "3"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "one per agent (2), not 3" in done.stderr


@pytest.mark.slow
def test_runs_are_recorded_in_the_ledger_and_reused(tmp_path):
    ledger = tmp_path / "runs.csv"
    jobs = str(min(2, len(os.sched_getaffinity(0))))  # side by side where the machine lets this test
    command = [sys.executable, str(SCRIPT), "--env", "Pendulum-v1", "--agents", "sac", "td3", "--steps", "600", "400",
               "--jobs", jobs, "--root", str(tmp_path / "runs"), "--ledger", str(ledger), "--machine", "here"]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert first.stdout.count("$ rlhp-train") == 2
    rows = read_rows(ledger, FIELDS, "learner runs")
    assert sorted((r["agent"], r["steps"], r["machine"]) for r in rows) == [("sac", "600", "here"),
                                                                             ("td3", "400", "here")]
    assert "| Pendulum-v1 | 1 | `td3` | 400 | 0 |" in first.stdout and "x `sac`'s wall" in first.stdout
    again = subprocess.run(command, capture_output=True, text=True, check=True)  # finished runs are reused
    assert "$ rlhp-train" not in again.stdout and read_rows(ledger, FIELDS, "learner runs") == rows
    other = subprocess.run([*command, "--override", "agent.gamma=0.98"], capture_output=True, text=True)
    assert other.returncode == 1 and "holds a run of other settings" in other.stderr  # not read as these settings
    assert read_rows(ledger, FIELDS, "learner runs") == rows
