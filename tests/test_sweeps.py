"""Sweeps on the launchers people run (joblib, submitit, Ray) and Optuna search (slow: real runs, in CI)."""

import csv
import importlib.util
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import yaml
from helpers import BIN, FAST, run_cli, wandb_records

from rlhp.report import write_report

pytestmark = pytest.mark.slow


def rows(job):
    with open(job / "metrics.csv") as f:
        return list(csv.DictReader(f))


def finals(job):
    return rows(job)[-1]


def test_a_2x2_grid_runs_in_parallel_processes_grouped_in_wandb_and_reported(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli("rlhp-train", "-m", "debug=fast", "logger=wandb", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                   "seed=0,1", "reward_net=basic,ensemble", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr  # the jobs ran side by side
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [p.name for p in jobs] == ["0", "1", "2", "3"]
    assert all((job / "eval.json").exists() and (job / "checkpoints" / "final").is_dir() for job in jobs)
    runs = [wandb_records(job, "run")[0] for job in jobs]
    assert {r.run_group for r in runs} == {"sweep"}
    # The job type is the overrides without the seed: the seeds of one configuration share it.
    common = "debug=fast,logger=wandb,"
    assert sorted(r.job_type for r in runs) == [common + "reward_net=basic"] * 2 + [common + "reward_net=ensemble"] * 2
    assert sorted(r.display_name for r in runs)[0] == common + "seed=0,reward_net=basic"
    report = write_report(sweep).read_text()
    for net in ("basic", "ensemble"):
        members = [job for job in jobs if f"reward_net={net}" in (job / ".hydra" / "overrides.yaml").read_text()]
        returns = [json.loads((job / "eval.json").read_text())["true_return_mean"] for job in members]
        wall = np.mean([float(finals(job)["wall_s"]) for job in members])
        assert f"| reward_net={net} | 2 | {np.mean(returns):,.1f} ± {np.std(returns, ddof=1):,.1f} |" in report
        assert f"| 20 | 2,048 | {wall:,.1f} |" in report


def test_ctrl_c_in_a_joblib_sweep_checkpoints_every_running_job_and_the_same_command_continues_it(tmp_path):
    # joblib ends its pool when a job exits: the job still finishing its round would die without its checkpoint.
    sweep = tmp_path / "sweep"
    command = ["-m", "debug=fast", "logger=none", "num_rounds=17", "seed=0,1,2", "hydra/launcher=joblib",
               "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen([str(BIN / "rlhp-train"), *command], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all((sweep / job / "metrics.csv").is_file() and
                                                  len(rows(sweep / job)) >= 2 for job in "01"):
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the launcher and its workers
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("rlhp-train: ")]
    assert lines[-1].startswith("rlhp-train: sweep stopped by SIGINT") and f"hydra.sweep.dir={sweep}" in lines[-1]
    for job in "01":  # each stopped after its round, its checkpoint of that round saved
        stopped = [line for line in lines if line.endswith(f"resume={sweep / job}`")]
        assert len(stopped) == 1 and "stopped: SIGINT after round" in stopped[0]
        last = int(stopped[0].split("after round ")[1].split()[0])
        assert len(rows(sweep / job)) == last + 1 and (sweep / job / "checkpoints" / f"iter_{last:04d}").is_dir()
    assert not (sweep / "2" / "metrics.csv").exists()  # queued behind the stop: not started
    run_cli("rlhp-train", *command, cwd=tmp_path)
    assert all(len(rows(sweep / job)) == 17 and (sweep / job / "eval.json").is_file() for job in "012")
    evaluations = [(sweep / job / "eval.json").read_text() for job in "012"]
    again = run_cli("rlhp-train", *command, cwd=tmp_path)  # every run finished: each kept as it is
    assert (again.stdout + again.stderr).count("finished before, kept as it is") == 3
    assert [(sweep / job / "eval.json").read_text() for job in "012"] == evaluations


def test_the_submitit_local_launcher_runs_a_2_job_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    run_cli("rlhp-train", "-m", *FAST, "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10",
            "seed=0,1", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert all((sweep / job / "eval.json").exists() for job in ("0", "1"))
    assert list((sweep / ".submitit").glob("*/*_result.pkl"))  # submitit ran them


def test_an_optuna_search_runs_its_trials_and_stores_the_study(tmp_path):
    sweep = tmp_path / "search"
    run_cli("rlhp-train", "-m", "hparams_search=cartpole", *FAST, "hydra.sweeper.n_trials=3",
            "hydra.sweeper.params.total_comparisons='choice(20,30)'",  # quoted: a value, not a sweep of this run
            "hydra.sweeper.params.fragment_length='choice(5,10)'",
            f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    trials = sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "eval.json").exists())
    assert len(trials) == 3 and (sweep / "optuna.db").exists()
    values = [json.loads((t / "eval.json").read_text())["optimized_metric"]["value"] for t in trials]
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert best["best_value"] == max(values)
    report = write_report(sweep).read_text()
    assert f"Best true_return_mean: {max(values):,.4f}" in report and "effect_reward_trainer.lr.png" in report


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_the_ray_launcher_runs_a_sweep_on_a_local_ray_instance(tmp_path):
    sweep = tmp_path / "sweep"
    run_cli("rlhp-train", "-m", *FAST, "hydra/launcher=ray", "seed=0,1", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert all((sweep / job / "eval.json").exists() for job in ("0", "1"))
