"""The B-Pref benchmark's ledger and table: a run recorded again replaces its row, a cell reads the largest budget
recorded (DMC's return, Meta-World's success rate in percent), and a task with no run says so."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
from bench_bpref import (  # noqa: E402
    CURVE_FIELDS,
    PUBLISHED,
    TARGETS,
    first_steps,
    ledger_name,
    merge,
    plot,
    protocol,
    read_ledger,
    read_variants,
    record,
    remember_variant,
    rounds,
    score,
    write_ledger,
)
from test_bpref import TASKS  # noqa: E402

from rlhp.loop.schedules import comparison_schedule  # noqa: E402
from rlhp.report.folders import Run  # noqa: E402
from rlhp.runs import RunFolder  # noqa: E402


def row(task: str = "walker_walk", method: str = "pebble", seed: int = 0, steps: int = 500_000, ret: float = 0.0,
        success: str = "", protocol: str = "cpu") -> dict[str, str]:
    return {"task": task, "method": method, "protocol": protocol, "seed": str(seed), "steps": str(steps),
            "labels": "100", "return": str(ret), "success_rate": success, "wall_min": "", "machine": "a test",
            "date": "2026-11-28"}


def test_dmc_scores_its_return_and_metaworld_its_success_in_percent():
    assert score([row(ret=300.0), row(seed=1, ret=200.0)], 500_000) == "250.0 ± 635.3 (2)"
    assert score([row(ret=4000.0, success="0.6")], 500_000) == "60% (1)"
    assert score([], 500_000) == "not yet run"


def test_a_cell_reads_its_largest_budget_and_names_it_when_short_of_the_tasks():
    rows = [row(steps=100_000, ret=100.0), row(seed=1, steps=100_000, ret=300.0), row(steps=500_000, ret=900.0)]
    assert score(rows, 500_000) == "900.0 (1)"
    assert score(rows[:2], 500_000) == "200.0 ± 1270.6 (2) at 100,000 steps"


def test_a_run_recorded_again_replaces_its_row_and_the_ledger_round_trips(tmp_path):
    old = [row(ret=1.0), row(seed=1, ret=2.0), row(steps=100_000, ret=3.0)]
    merged = merge(old, [row(ret=9.0)])
    assert sorted((r["seed"], r["steps"], r["return"]) for r in merged) == [
        ("0", "100000", "3.0"), ("0", "500000", "9.0"), ("1", "500000", "2.0")]
    write_ledger(tmp_path / "runs.csv", merged)
    assert sorted(map(str, read_ledger(tmp_path / "runs.csv"))) == sorted(map(str, merged))
    assert read_ledger(tmp_path / "missing.csv") == []
    (tmp_path / "other.csv").write_text("task,score\nwalker_walk,1\n")
    with pytest.raises(SystemExit, match="not a ledger of B-Pref runs"):
        read_ledger(tmp_path / "other.csv")


def test_overridden_runs_are_recorded_under_a_name_of_their_own_and_never_replace_the_methods_rows(tmp_path):
    ledger = tmp_path / "runs.csv"
    write_ledger(ledger, [row(ret=1.0)])
    script = [sys.executable, str(SCRIPTS / "bench_bpref.py"), "--tasks", "window_open", "--ledger", str(ledger),
              "--root", str(tmp_path / "runs"), "--override", "query_schedule.rounds=19"]
    refused = subprocess.run(script, capture_output=True, text=True)
    assert refused.returncode == 2 and "name the change with --variant" in refused.stderr
    assert not (tmp_path / "runs").exists() and [r["return"] for r in read_ledger(ledger)] == ["1.0"]
    odd = subprocess.run([*script, "--variant", "Spread 20"], capture_output=True, text=True)
    assert odd.returncode == 2 and "--variant takes lower-case letters" in odd.stderr
    assert merge([row(ret=1.0)], [row(method=ledger_name("pebble", "spread20"), ret=9.0)]) == [
        row(ret=1.0), row(method="pebble+spread20", ret=9.0)]
    assert ledger_name("pebble", "") == "pebble"


def test_a_variant_names_one_set_of_overrides_and_a_column_shows_it_with_them(tmp_path):
    variants = tmp_path / "bpref_variants.csv"
    remember_variant(variants, "spread", ["query_schedule.rounds=19", "initial_comparison_frac=0.05"])
    remember_variant(variants, "spread", ["query_schedule.rounds=19", "initial_comparison_frac=0.05"])  # more seeds
    with pytest.raises(SystemExit, match="name this change with another --variant"):
        remember_variant(variants, "spread", ["query_schedule.rounds=9"])
    assert read_variants(variants) == {"spread": "query_schedule.rounds=19 initial_comparison_frac=0.05"}
    ledger = tmp_path / "runs.csv"
    write_ledger(ledger, [row(task="window_open", success="0.2"), row(task="window_open", method="pebble+spread",
                                                                      success="0.8")])
    script = [sys.executable, str(SCRIPTS / "bench_bpref.py"), "--ledger", str(ledger), "--root", str(tmp_path / "r")]
    out = subprocess.run([*script, "--methods", "pebble", "pebble+spread"], capture_output=True, text=True,
                         check=True).stdout
    window = next(line for line in out.splitlines() if line.startswith("| window_open |"))
    assert "| 20% (1) | none: 1 of 5 fresh seeds | 80% (1) |" in window and "method=pebble seed=0,1,2,3,4" in window
    assert ("`rlhp pebble+spread`: the command with `method=pebble query_schedule.rounds=19 "
            "initial_comparison_frac=0.05`.") in out
    unknown = subprocess.run([*script, "--methods", "pebble+other"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "no overrides are recorded for the variants ['other']" in unknown.stderr
    # A variant is recorded by running it with --variant, never by naming it as a method to run.
    run = subprocess.run([*script, "--tasks", "window_open", "--methods", "pebble+spread"], capture_output=True,
                         text=True)
    assert run.returncode == 2 and "run a variant with --override and --variant" in run.stderr
    assert not (tmp_path / "r").exists()


def test_more_seeds_run_from_the_first_seed_asked_and_a_negative_one_is_refused(tmp_path, monkeypatch):
    import bench_bpref

    swept = []
    monkeypatch.setattr(bench_bpref, "sweep", lambda folder, overrides, jobs: swept.append(overrides) or [])
    given = ["bench_bpref.py", "--tasks", "walker_walk", "--seeds", "2", "--ceiling-seeds", "0", "--ledger",
             str(tmp_path / "runs.csv"), "--root", str(tmp_path / "r")]
    monkeypatch.setattr(sys, "argv", [*given, "--first-seed", "3"])
    bench_bpref.main()
    assert len(swept) == 1 and swept[0][-1] == "seed=3,4"  # the method's seeds 3 and 4; no ceiling
    monkeypatch.setattr(sys, "argv", [*given, "--first-seed", "-1"])
    with pytest.raises(SystemExit) as refused:
        bench_bpref.main()
    assert refused.value.code == 2 and len(swept) == 1


def test_a_methods_own_setting_can_be_overridden_with_steps_and_one_no_config_has_is_refused(tmp_path, monkeypatch):
    import bench_bpref

    swept = []
    monkeypatch.setattr(bench_bpref, "sweep", lambda folder, overrides, jobs: swept.append(overrides) or [])
    given = ["bench_bpref.py", "--tasks", "door_open", "--methods", "qpa", "--steps", "150000", "--ceiling-seeds", "0",
             "--ledger", str(tmp_path / "runs.csv"), "--root", str(tmp_path / "r")]
    # QPA's recent replay exists only once method=qpa is chosen: the short run's rounds are composed with it.
    monkeypatch.setattr(sys, "argv", [*given, "--variant", "v", "--override",
                                      "agent.replay_buffer_kwargs.recent_steps=30000"])
    bench_bpref.main()
    assert len(swept) == 1 and {"agent.replay_buffer_kwargs.recent_steps=30000", "method=qpa",
                                "total_timesteps=150000"} <= set(swept[0])
    monkeypatch.setattr(sys, "argv", [*given, "--variant", "w", "--override", "agent.no_such=1"])
    with pytest.raises(SystemExit, match=r"experiment=bpref_cpu/door_open agent.no_such=1 method=qpa: .*no_such"):
        bench_bpref.main()
    assert len(swept) == 1


def test_a_finished_run_folder_is_recorded_with_its_own_seed(tmp_path):
    folder = RunFolder(tmp_path / "run")
    folder.write_record(OmegaConf.create({"seed": 7}), ["seed=7"])
    folder.eval_json.write_text("{}")
    run = Run(folder, {}, "finished", [{"timesteps": 500_000.0, "comparisons": 100.0, "wall_s": 600.0}],
              {"true_return_mean": 452.84, "success_rate": 0.25, "protocol": {"name": "cpu", "changed": []}})
    assert record("door_open", "pebble", run, "a test") == {
        "task": "door_open", "method": "pebble", "protocol": "cpu", "seed": "7", "steps": "500000", "labels": "100",
        "return": "452.8",
        "success_rate": "0.250", "wall_min": "10.0", "machine": "a test", "date": datetime.date.today().isoformat()}


def point(seed: int, timesteps: int, ret: float, method: str = "pebble", steps: int = 500_000,
          task: str = "walker_walk", success: str = "") -> dict[str, str]:
    return {"task": task, "method": method, "protocol": "cpu", "seed": str(seed), "steps": str(steps),
            "timesteps": str(timesteps), "return": str(ret), "success_rate": success}


def test_a_runs_rounds_are_its_curve_and_a_run_recorded_again_replaces_all_of_them(tmp_path):
    folder = RunFolder(tmp_path / "run")
    folder.write_record(OmegaConf.create({"seed": 2}), ["seed=2"])
    rows = [{"timesteps": 20_000.0, "true_return_mean": None}, {"timesteps": 40_000.0, "true_return_mean": 12.34},
            {"timesteps": 60_000.0, "true_return_mean": 56.0, "success_rate": 0.5}]
    got = rounds("door_open", "pebble", Run(folder, {}, "finished", rows, {}))
    # The round with no finished episode has no point; each keeps the run's budget, to be replaced with it.
    assert [(r["seed"], r["steps"], r["timesteps"], r["return"], r["success_rate"]) for r in got] == [
        ("2", "60000", "40000", "12.3", ""), ("2", "60000", "60000", "56.0", "0.500")]
    old = [point(0, 10, 1.0), point(0, 20, 2.0), point(1, 10, 3.0)]
    merged = merge(old, [point(0, 10, 9.0)])
    assert sorted((r["seed"], r["timesteps"], r["return"]) for r in merged) == [("0", "10", "9.0"),
                                                                               ("1", "10", "3.0")]
    write_ledger(tmp_path / "curves.csv", merged, CURVE_FIELDS)
    assert sorted(map(str, read_ledger(tmp_path / "curves.csv", CURVE_FIELDS))) == sorted(map(str, merged))


def test_the_curves_average_the_seeds_at_the_largest_budget_and_meta_world_draws_its_success(tmp_path):
    curves = [point(0, 10, 9999.0, steps=100_000),  # a smaller budget: not drawn beside the larger
              point(0, 10, 100.0), point(0, 20, 300.0), point(1, 10, 200.0), point(1, 20, 500.0),
              point(0, 20, 900.0, method="ceiling"),
              point(0, 10, 1.0, task="door_open", success="0.25"), point(0, 20, 2.0, task="door_open", success="")]
    drawn = plot(curves, ["pebble"], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert list(drawn) == ["walker_walk", "door_open"]  # the published order
    assert drawn["walker_walk"]["rlhp pebble, cpu (2)"].tolist() == [150.0, 400.0]
    assert drawn["walker_walk"]["rlhp ceiling, cpu (1)"].tolist() == [900.0]
    door = drawn["door_open"]["rlhp pebble, cpu (1)"]
    assert door[0] == 25.0 and np.isnan(door[1])


def test_each_protocol_is_a_line_and_the_published_figures_are_points_where_they_were_measured(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr("matplotlib.pyplot.close", figures.append)  # keep the figure to read its lines
    earlier = {**point(0, 10, 50.0), "protocol": "earlier"}
    drawn = plot([point(0, 10, 100.0), earlier], ["pebble"], tmp_path / "curves.png")
    assert set(drawn["walker_walk"]) == {"rlhp pebble, cpu (1)", "rlhp pebble, earlier (1)"}
    marks = [c for c in figures[0].axes[0].containers if "published" in c.get_label()]
    assert {tuple(m.lines[0].get_xydata()[0]) for m in marks} == {(500_000, 453), (500_000, 796)}  # PEBBLE, QPA


def test_a_line_keeps_its_colour_on_every_panel_whatever_a_panel_lacks(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr("matplotlib.pyplot.close", figures.append)  # keep the figure to read its lines
    curves = [point(0, 10, 100.0), point(0, 10, 200.0, method="qpa"), point(0, 10, 900.0, method="ceiling"),
              point(0, 10, 1.0, task="door_open", success="0.5", method="qpa"),  # door: no pebble
              point(0, 10, 2.0, task="door_open", success="1.0", method="ceiling")]
    plot(curves, ["pebble", "qpa"], tmp_path / "curves.png")
    colours = {}
    for ax in figures[0].axes:
        for line in ax.get_lines():
            colours.setdefault(line.get_label().split(",")[0].split(" (")[0], set()).add(line.get_color())
    ours = [colours.pop(f"rlhp {m}") for m in ("pebble", "qpa", "ceiling")]
    assert all(len(c) == 1 for c in ours) and len(set.union(*ours)) == 3, ours  # one each, none shared


def test_the_table_comes_from_the_ledger_and_lists_every_target(tmp_path):
    ledger = tmp_path / "runs.csv"
    write_ledger(ledger, [row(ret=400.0), row(seed=1, ret=500.0), row(method="ceiling", ret=900.0),
                          row(task="hammer", ret=1.0, success="1.0"), row(task="door_open", method="ceiling",
                                                                          steps=300_000, ret=5.0, success="0.5")])
    write_ledger(tmp_path / "bpref_curves.csv", [point(0, 10, 1.0), point(0, 20, 2.0)], CURVE_FIELDS)
    out = subprocess.run([sys.executable, str(SCRIPTS / "bench_bpref.py"), "--ledger", str(ledger), "--plot",
                          "fig/curves.png"], capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    lines = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(lines) == {"task", *TARGETS, "hammer"}
    assert "[runs.csv](runs.csv)" in out  # printed, not written into a page: linked from the working folder
    # The curves come from the file beside the ledger, drawn where --plot says, and linked.
    assert (tmp_path / "fig" / "curves.png").is_file() and "--plot fig/curves.png` from the" in out
    assert "![Learning curves of the recorded runs](fig/curves.png)" in out and "(bpref_curves.csv)." in out
    assert "| cpu | 100 |" in lines["walker_walk"]
    assert "| 450.0 ± 635.3 (2) | none: 2 of 5 fresh seeds | 900.0 (1) | 500,000 |" in lines["walker_walk"]
    # The command a row needs: 5 fresh seeds, in the row's protocol.
    assert lines["walker_walk"].endswith("experiment=bpref_cpu/walker_walk method=pebble seed=0,1,2,3,4` |")
    assert "| 100% (1) | none: 1 of 5 fresh seeds | not yet run |" in lines["hammer"]
    assert lines["cheetah_run"].count("not yet run") == 2
    assert "| not yet run |  | 50% (1) | 300,000 |" in lines["door_open"]  # the ceiling's budget when it ran alone
    assert lines["cheetah_run"].endswith("seed=0,1,2,3,4 hydra/launcher=slurm` |")  # not run here: a cluster's


def test_the_published_figures_are_at_the_experiments_own_label_budgets():
    assert {task: labels for task, (labels, _) in PUBLISHED.items()} == {t: v[1] for t, v in TASKS.items()}


def labels_per_round(cfg: DictConfig) -> list[int]:
    """The labels each round of the run ``cfg`` composes gathers."""
    return comparison_schedule(cfg.total_comparisons, cfg.initial_comparison_frac, cfg.num_rounds,
                               instantiate(cfg.query_schedule))


@pytest.mark.parametrize("task", TASKS)
def test_a_runs_first_steps_are_the_full_runs_rounds_with_the_same_labels(task):
    full = protocol(f"bpref/{task}", [])
    round_steps = full.total_timesteps // full.num_rounds
    for share in [0.05, 0.2, 0.3, 0.6, 1.0]:
        steps = max(2, round(share * full.num_rounds)) * round_steps
        cut = full.copy()
        for override in first_steps(full, steps):
            key, value = override.split("=")
            OmegaConf.update(cut, key, yaml.safe_load(value))
        assert cut.total_timesteps // cut.num_rounds == round_steps
        whole, first = labels_per_round(full), labels_per_round(cut)
        # The shorter run gathers what the full one gathers in the same rounds.
        assert first == whole[:len(first)], (share, first, whole[:len(first)])


def test_a_runs_first_steps_must_be_whole_rounds_of_it():
    full = protocol("bpref/window_open", [])
    with pytest.raises(SystemExit, match="multiple of the protocol's round, 5,000 steps"):
        first_steps(full, 301_000)
    for steps in [5_000, 505_000]:
        with pytest.raises(SystemExit, match="from two rounds up to its 500,000"):
            first_steps(full, steps)


@pytest.mark.parametrize(("returns", "spread", "word"), [
    ([700, 720, 710, 690, 705], None, "above (its mean; ± not recorded)"),   # PEBBLE's published 453
    ([300, 320, 310, 290, 305], None, "below (its mean; ± not recorded)"),
    ([0, 900, 450, 300, 600], None, "within (its mean; ± not recorded)"),
    ([700, 720, 710, 690, 705], 400.0, "within"),   # Welch's t: a published spread this wide carries no verdict
    ([700, 720, 710, 690, 705], 10.0, "above"),
])
def test_the_verdict_is_computed_from_five_fresh_seeds_against_the_published_figure(monkeypatch, returns, spread,
                                                                                      word):
    import bench_bpref

    if spread is not None:
        monkeypatch.setitem(bench_bpref.PUBLISHED_STD, ("walker_walk", "PEBBLE"), spread)
    rows = [row(seed=i, ret=r) for i, r in enumerate(returns)]
    assert bench_bpref.verdict(rows, "walker_walk", "pebble") == word
    assert bench_bpref.verdict(rows[:4], "walker_walk", "pebble") == "none: 4 of 5 fresh seeds"
    # Tuning seeds never count: four fresh seeds and a tuning one carry no verdict, and are shown apart.
    tuned = [*rows[:4], row(seed=100, ret=returns[4])]
    assert bench_bpref.verdict(tuned, "walker_walk", "pebble") == "none: 4 of 5 fresh seeds"
    assert score(tuned, 500_000).endswith("(4); tuning seeds apart: 1")
