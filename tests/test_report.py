"""rlhp-report on hand-made run folders: the numbers in report.md are those of the CSVs and eval.json."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from rlhp.report import find_runs, write_report
from rlhp.runs import MetricsCSV, RunFolder


def fake_run(folder, overrides, returns, correlation=0.9, finished=True):
    """A run folder as rlhp-train writes it: .hydra/, metrics.csv with one row per round, eval.json."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    csv = MetricsCSV(folder / "metrics.csv")
    for i, ret in enumerate(returns):
        csv.append({"iteration": i, "timesteps": 1000 * (i + 1), "comparisons": 10 * (i + 1),
                    "reward_accuracy": 0.5 + 0.1 * i, "true_return_mean": ret, "wall_s": 2.0 * (i + 1)})
    if finished:
        (folder / "eval.json").write_text(json.dumps({"true_return_mean": returns[-1] + 1,
                                                      "reward_correlation": correlation}))


@pytest.fixture
def sweep(tmp_path):
    """A 2 x 2 sweep (reward_net x seed) plus a crashed job."""
    finals = {("basic", 0): [10, 20, 30], ("basic", 1): [12, 26, 50], ("ensemble", 0): [20, 60, 100],
              ("ensemble", 1): [24, 70, 120]}
    for job, ((net, seed), returns) in enumerate(finals.items()):
        fake_run(tmp_path / str(job), [f"reward_net={net}", f"seed={seed}", "debug=fast"], returns)
    fake_run(tmp_path / "4", ["reward_net=ensemble", "seed=2", "debug=fast"], [5], finished=False)
    return tmp_path


def test_a_success_column_and_curve_appear_only_where_an_env_reports_success(tmp_path):
    for job, (task, seed, rates, final) in enumerate([("door", 0, [0.0, 0.5], 0.6), ("door", 1, [0.5, 1.0], 0.8),
                                                       ("button", 0, [0.0, 0.0], 0.2)]):
        folder = tmp_path / str(job)
        fake_run(folder, [f"env.id={task}", f"seed={seed}"], [1.0, 2.0])
        csv = MetricsCSV(folder / "metrics.csv")
        for i, rate in enumerate(rates):
            csv.append({"iteration": 2 + i, "timesteps": 3000 + 1000 * i, "comparisons": 30, "true_return_mean": 2.0,
                        "success_rate": rate, "wall_s": 6.0})
        (folder / "eval.json").write_text(json.dumps({"true_return_mean": 3.0, "success_rate": final}))
    report = write_report(tmp_path).read_text()
    half = stats.t.ppf(0.975, 1) * np.std([60.0, 80.0], ddof=1) / np.sqrt(2)
    assert "| success rate |" in report and f"| 70.0% ± {half:,.1f} |" in report and "| 20.0% |" in report
    assert "success_rate_vs_timesteps.png" in report and (tmp_path / "success_rate_vs_timesteps.png").stat().st_size
    without = tmp_path / "without"
    fake_run(without / "0", ["seed=0"], [1.0, 2.0])
    report = write_report(without).read_text()
    assert "success" not in report and not (without / "success_rate_vs_timesteps.png").exists()


def test_runs_are_found_grouped_by_what_was_swept_and_their_status_read(sweep):
    runs = find_runs(sweep)
    assert [r.name for r in runs] == ["0", "1", "2", "3", "4"]
    assert [r.status for r in runs] == ["finished"] * 4 + ["crashed"]
    assert runs[0].overrides == {"reward_net": "basic", "seed": "0", "debug": "fast"}
    with RunFolder(sweep / "4").lock():  # a live run holds its folder's lock
        assert find_runs(sweep)[4].status == "running"


def test_the_report_holds_the_numbers_of_the_runs(sweep):
    report = write_report(sweep).read_text()
    # Final returns from eval.json: basic 31 and 51, ensemble 101 and 121.
    for name, finals in (("basic", [31.0, 51.0]), ("ensemble", [101.0, 121.0])):
        mean, std = np.mean(finals), np.std(finals, ddof=1)
        half = stats.t.ppf(0.975, 1) * std / np.sqrt(2)
        ci = f"[{mean - half:,.1f}, {mean + half:,.1f}]"
        row = f"| reward_net={name} | 2 | {mean:,.1f} ± {std:,.1f} | {ci} | 0.900 | 30 |"
        assert row in report, row
    assert "4 finished, 0 running, 1 crashed" in report
    assert "| 4 | `reward_net=ensemble` | crashed | 1 |" in report
    pngs = re.findall(r"\]\((.+?\.png)\)", report)
    assert {"true_return_mean_vs_timesteps.png", "true_return_mean_vs_comparisons.png",
            "reward_accuracy_vs_timesteps.png"} <= set(pngs)
    for png in pngs:
        assert (sweep / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_return_of_zero_is_a_figure_and_a_missing_correlation_is_n_a(tmp_path, recwarn):
    for job, seed in enumerate((0, 1)):
        fake_run(tmp_path / str(job), [f"seed={seed}"], [-2.0, -1.0])
        (tmp_path / str(job) / "eval.json").write_text(json.dumps({"true_return_mean": 0.0,
                                                                   "reward_correlation": None}))
    report = write_report(tmp_path).read_text()
    assert "| all runs | 2 | 0.0 ± 0.0 | [0.0, 0.0] | n/a | 20 |" in report
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # no "Mean of empty slice"


def test_a_single_run_is_plotted_too_and_an_empty_folder_is_an_error(tmp_path):
    fake_run(tmp_path / "run", ["seed=3"], [1, 2, 3])
    report = write_report(tmp_path / "run").read_text()
    assert "| all runs | 1 | 4.0 ± 0.0 | n/a |" in report and "true_return_mean_vs_timesteps.png" in report
    proc = subprocess.run([sys.executable, "-m", "rlhp.report.cli", str(tmp_path / "nothing")], capture_output=True,
                          text=True)
    assert proc.returncode == 3 and "rlhp-report: data error: no rlhp-train run under" in proc.stderr


def test_a_refused_launch_is_skipped_and_keys_show_the_values_runs_had(sweep, recwarn):
    # A launch refused before its run began: Hydra's record and a log, nothing else (it is no crashed run).
    refused = sweep / "5"
    (refused / ".hydra").mkdir(parents=True)
    (refused / ".hydra" / "overrides.yaml").write_text("- reward_net=mlp\n- agent.learning_rate=0.1\n")
    (refused / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (refused / "train.log").write_text("config error\n")
    # A run that names a key only to set the value the others have from their config.
    fake_run(sweep / "6", ["reward_net=basic", "seed=2", "debug=fast", "agent.gamma=0.99"], [1, 2, 3])
    for job in range(5):
        (sweep / str(job) / ".hydra" / "config.yaml").write_text("seed: 0\nagent:\n  gamma: 0.99\n")
    (sweep / "6" / ".hydra" / "config.yaml").write_text("seed: 0\nagent:\n  gamma: 0.99\n")
    runs = find_runs(sweep)
    assert [r.name for r in runs] == ["0", "1", "2", "3", "4", "6"]
    report = write_report(sweep).read_text()
    assert "5 finished, 0 running, 1 crashed" in report
    assert "| reward_net=basic | 3 |" in report and "default" not in report and "agent.gamma" not in report
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_long_configuration_names_plot_without_a_warning(tmp_path, recwarn):
    # 40 configurations of long names: tight_layout gave up on such a legend with a UserWarning.
    for job in range(40):
        fake_run(tmp_path / str(job), [f"fragmenter.warning_threshold={job}" + ",x" * 60, "seed=0"], [1.0, 2.0])
    write_report(tmp_path)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
