"""Run folders: metrics.csv keeps every key, and a run folder reads without the training code."""

import csv
import subprocess
import sys

from rlhp.runs import MetricsCSV, RunFolder, read_metrics


def test_new_keys_add_columns_and_earlier_rows_read_back_exactly(tmp_path):
    path = tmp_path / "metrics.csv"
    writer = MetricsCSV(path)
    writer.append({"iteration": 0, "reward_loss": 0.5})
    writer.append({"iteration": 1, "reward_loss": 0.25, "val_loss": 0.75})
    writer.append({"iteration": 2, "true_return_mean": 3.0})
    with path.open() as f:
        lines = f.read().splitlines()
    assert lines == ["iteration,reward_loss,val_loss,true_return_mean", "0,0.5,,", "1,0.25,0.75,", "2,,,3.0"]
    assert read_metrics(path)[1] == {"iteration": 1.0, "reward_loss": 0.25, "val_loss": 0.75,
                                     "true_return_mean": None}
    assert not (tmp_path / "metrics.csv.tmp").exists()
    # A writer opened on an existing file (a resumed run) keeps its columns.
    MetricsCSV(path).append({"iteration": 3, "val_loss": 0.5})
    assert list(csv.DictReader(path.open()))[-1] == {"iteration": "3", "reward_loss": "", "val_loss": "0.5",
                                                      "true_return_mean": ""}


def test_a_run_folders_journals_list_their_complete_rounds_in_order_and_forget_the_later_ones(tmp_path):
    run = RunFolder(tmp_path)
    labels, ratings, shards = run.label_journal, run.rating_journal, run.trajectory_journal
    assert labels.rounds() == ratings.rounds() == shards.rounds() == {}
    labels.forget(0)  # no folder yet: nothing to forget
    for path in (labels.round(10), labels.round(2), labels.round(12345), ratings.round(0)):
        path.mkdir(parents=True)
    (run.labels_dir / "round_0003.tmp").mkdir()  # half-written
    (run.labels_dir / "round-0004.parquet").write_text("")  # another journal's name
    (run.labels_dir / "notes.txt").write_text("mine")
    run.trajectories_dir.mkdir()
    for name in ("README.md", "round-0001.parquet", "round-0004.parquet.tmp", "round_0005"):
        (run.trajectories_dir / name).write_text("")
    assert labels.rounds() == {2: tmp_path / "labels" / "round_0002", 10: tmp_path / "labels" / "round_0010",
                               12345: tmp_path / "labels" / "round_12345"}
    assert list(labels.rounds()) == [2, 10, 12345]
    assert ratings.rounds() == {0: tmp_path / "ratings" / "round_0000"}
    assert shards.rounds() == {1: tmp_path / "trajectories" / "round-0001.parquet"}
    labels.forget(3)
    assert sorted(p.name for p in run.labels_dir.iterdir()) == ["notes.txt", "round-0004.parquet", "round_0002"]
    shards.forget(2)
    assert sorted(p.name for p in run.trajectories_dir.iterdir()) == ["README.md", "round-0001.parquet",
                                                                      "round_0005"]


def test_a_run_folder_reads_without_importing_the_loop(tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 3\nenv: {id: Pendulum-v1}\n")
    MetricsCSV(tmp_path / "metrics.csv").append({"iteration": 0, "comparisons": 10})
    (tmp_path / "eval.json").write_text('{"reward_correlation": 0.5}')
    for name in ("iter_0001", "iter_0000", "final"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    code = ("import sys; from rlhp.runs import RunFolder; run = RunFolder(sys.argv[1]); "
            "print(run.config().seed, run.metrics()[0]['comparisons'], run.evaluation()['reward_correlation'], "
            "[p.name for p in run.checkpoints()]); "
            "heavy = [m for m in ('rlhp.loop', 'rlhp.experiment.train', 'torch', 'stable_baselines3', 'datasets') "
            "if m in sys.modules]; "
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "3 10.0 0.5 ['iter_0000', 'iter_0001']"
    assert RunFolder(tmp_path).checkpoint("final").is_dir()


def test_training_never_imports_the_web_server_and_the_server_never_imports_training():
    code = ("import sys; import rlhp.experiment.train, rlhp.experiment.compose, rlhp.feedback; "
            "server = [m for m in ('rlhp.human.server', 'rlhp.human.server.app', 'fastapi', 'uvicorn') "
            "if m in sys.modules]; "
            "assert not server, server; "
            "import rlhp.human.server.app")
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    code = ("import sys; import rlhp.human.server.app, rlhp.human.server.serve; "
            "training = [m for m in ('rlhp.loop', 'rlhp.experiment.train', 'rlhp.experiment.compose', 'rlhp.training', "
            "'rlhp.human.gatherer', 'rlhp.human.querent', 'stable_baselines3') "
            "if m in sys.modules]; assert not training, training")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
