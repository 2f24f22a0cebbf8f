"""A killed run resumes to the same result; stops, locks and guard rails (slow: real runs, run in CI)."""

import csv
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sbx
import stable_baselines3
from helpers import assert_loads_in_a_fresh_interpreter, run_cli, run_killed
from stable_baselines3 import PPO

from rlhp.data import PreferenceDataset
from rlhp.data.hub import open_trajectories

pytestmark = pytest.mark.slow
RUN = ["debug=fast", "logger=none", "seed=5", "num_rounds=6", "keep_checkpoints=2"]

# Where a run is killed (SIGKILL, by run_killed): the n-th call of a function of a module.
MOMENTS = {
    "between gathering and reward training (round 2)": ("rlhp.training", "RewardTrainer.train", 3),
    "inside a checkpoint write (round 2, after reward_net.pt)": ("torch", "save", 8),
    "before agent training (round 3)": ("rlhp.agents.agent", "AgentTrainer.train", 4),
    "before round 1's trajectory shard": ("rlhp.experiment.callbacks", "TrajectoryWriter.__call__", 2),
    "before round 3's metrics row": ("rlhp.runs.metrics", "MetricsCSV.append", 4),
    "between a checkpoint and pruning (round 4)": ("rlhp.experiment.callbacks", "prune_checkpoints", 5),
    "during the final evaluation": ("rlhp.experiment.train", "evaluate", 1),
}


def whole_and_killed(tmp_path: Path, overrides: list[str], moment: tuple[str, str, int]) -> tuple[Path, Path]:
    """The run folders of ``overrides`` run unbroken, and run until SIGKILL at ``moment`` (see :data:`MOMENTS`)."""
    whole, run_dir = tmp_path / "whole", tmp_path / "run"
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={whole}", cwd=tmp_path)
    killed = run_killed(*moment, *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    return whole, run_dir


def state_bytes(checkpoint: Path) -> int:
    """The bytes of a checkpoint's state outside the shared chunks."""
    return sum((checkpoint / name).stat().st_size for name in ("resume.json", "arrays.npz"))


def untimed_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return [{k: v for k, v in r.items() if not k.startswith("time_") and k != "wall_s"} for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("whole")
    run_cli("rlhp-train", *RUN, f"hydra.run.dir={where / 'run'}", cwd=where)
    return where / "run"


@pytest.mark.parametrize("moment", MOMENTS)
def test_a_run_killed_at_any_moment_resumes_to_the_same_result(tmp_path, uninterrupted, moment):
    run_dir = tmp_path / "run"
    killed = run_killed(*MOMENTS[moment], *RUN, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (run_dir / "eval.json").exists()
    resumed = run_cli("rlhp-train", *RUN, f"hydra.run.dir={run_dir}", cwd=tmp_path)  # the same command again
    assert "Traceback" not in resumed.stderr
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((uninterrupted / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(uninterrupted)
    # Every gathered preference is present exactly once: in the final dataset and in the label journal.
    final = PreferenceDataset.load(run_dir / "checkpoints" / "final" / "preferences")
    assert final.ids.tolist() == list(range(20))
    journal = [PreferenceDataset.load(p) for p in sorted((run_dir / "labels").iterdir())]
    assert sorted(np.concatenate([d.ids for d in journal]).tolist()) == list(range(20))
    np.testing.assert_array_equal(final.labels, PreferenceDataset.load(
        uninterrupted / "checkpoints" / "final" / "preferences").labels)
    # The trajectories are those of the uninterrupted run, each round's once.
    got, want = (open_trajectories(d / "trajectories")[0] for d in (run_dir, uninterrupted))
    assert len(got) == len(want) and all(np.array_equal(g.obs, w.obs) for g, w in zip(got, want))
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["final", "iter_0004", "iter_0005"]


def start(run_dir: Path, *overrides: str) -> subprocess.Popen:
    """rlhp-train in the background, long enough (40 rounds) to be stopped part-way."""
    return subprocess.Popen([str(Path(sys.executable).parent / "rlhp-train"), "debug=fast", "logger=none",
                             "num_rounds=41", f"hydra.run.dir={run_dir}", *overrides],
                            cwd=run_dir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HYDRA_FULL_ERROR": "0"})


def wait_for_rounds(run_dir: Path, rounds: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (run_dir / "metrics.csv").exists() and len(untimed_rows(run_dir)) >= rounds:
            return
        time.sleep(0.05)
    pytest.fail(f"no {rounds} rounds: {proc.poll()} {proc.stderr.read() if proc.poll() is not None else ''}")


ASYNCHRONOUS = [*RUN, "reward_learning=asynchronous"]


@pytest.fixture(scope="module")
def uninterrupted_asynchronous(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("whole_asynchronous")
    run_cli("rlhp-train", *ASYNCHRONOUS, f"hydra.run.dir={where / 'run'}", cwd=where)
    return where / "run"


@pytest.mark.parametrize("moment", ["between gathering and reward training (round 2)",
                                    "before agent training (round 3)"])
def test_a_run_learning_its_reward_asynchronously_resumes_to_the_same_result(tmp_path, uninterrupted_asynchronous,
                                                                             moment):
    # Killed inside the update's thread, or in the agent's while the update runs beside it.
    whole, run_dir = uninterrupted_asynchronous, tmp_path / "run"
    killed = run_killed(*MOMENTS[moment], *ASYNCHRONOUS, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_cli("rlhp-train", *ASYNCHRONOUS, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(whole)


def test_sigterm_saves_a_checkpoint_and_resume_finishes_the_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(run_dir, "gatherer=deterministic")
    wait_for_rounds(run_dir, 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith("rlhp-train: stopped: SIGTERM after round ") and f"resume={run_dir}" in last
    stopped_at = int(last.split("after round ")[1].split()[0])
    assert (run_dir / "checkpoints" / f"iter_{stopped_at:04d}").is_dir()
    assert len(untimed_rows(run_dir)) == stopped_at + 1
    resumed = run_cli("rlhp-train", f"resume={run_dir}", cwd=tmp_path)
    assert len(untimed_rows(run_dir)) == 41 and (run_dir / "eval.json").exists()
    assert "agent=ppo, gatherer=deterministic, seed 0" in resumed.stderr + resumed.stdout  # the run's, not the default
    assert "resume=" not in (run_dir / ".hydra" / "overrides.yaml").read_text()  # the run's own record stays


def test_a_second_ctrl_c_stops_at_once_with_one_line(tmp_path):
    run_dir = tmp_path / "run"
    # Long rounds (~15k steps each), so the second Ctrl-C lands inside one even on a loaded machine.
    proc = start(run_dir, "total_timesteps=600000")
    wait_for_rounds(run_dir, 1, proc)
    # Round 0's row comes before its checkpoint: a Ctrl-C in between is honoured right after that
    # checkpoint, before a second one can land. So wait until round 1 is under way.
    while not (run_dir / "checkpoints" / "iter_0000").is_dir() and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    for line in proc.stdout:  # the first is acknowledged on the console
        if "stopping after this round" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "rlhp-train: interrupted; the last checkpoint is kept"


@pytest.mark.parametrize("how", ["the same command", "resume="])
def test_a_resumed_run_saves_as_its_new_command_says(tmp_path, uninterrupted, how):
    """How often a run saves itself may change when it resumes; what it computes may not."""
    run_dir = tmp_path / "run"
    run_killed(*MOMENTS["before agent training (round 3)"], *RUN, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    refused = run_cli("rlhp-train", f"resume={run_dir}", "checkpoint_every=3", "seed=9", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "drop the other overrides ['seed=9']" in refused.stderr
    nonsense = run_cli("rlhp-train", f"resume={run_dir}", "keep_checkpoints=0", cwd=tmp_path, check=False)
    assert nonsense.returncode == 2 and "keep_checkpoints" in nonsense.stderr and "Traceback" not in nonsense.stderr
    again = [*RUN[:-1], f"hydra.run.dir={run_dir}"] if how == "the same command" else [f"resume={run_dir}"]
    run_cli("rlhp-train", *again, "keep_checkpoints=3", "checkpoint_every=3", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((uninterrupted / "eval.json").read_text())
    # Saved every round up to round 2, then at round 3 and the last; the newest three of them kept.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["final", "iter_0002", "iter_0003",
                                                                           "iter_0005"]
    final = (run_dir / "checkpoints" / "final")
    assert "checkpoint_every=3" in (final / "overrides.yaml").read_text()
    assert "checkpoint_every: 3" in (final / "config.yaml").read_text()


LONG = ["debug=fast", "logger=none", "seed=5", "query_schedule=constant", "total_timesteps=2048", "num_rounds=4",
        "total_comparisons=24", "initial_comparison_frac=0.25"]
"""Four rounds of 512 agent steps and 6 comparisons each."""
LONG_BUDGET = LONG[4:]


def test_a_finished_run_runs_on_to_a_longer_budget_as_the_longer_run_would(tmp_path):
    """``resume=`` with a longer budget continues a finished run; its first rounds must be the longer run's."""
    whole, short = tmp_path / "whole", tmp_path / "short"
    run_cli("rlhp-train", *LONG, f"hydra.run.dir={whole}", cwd=tmp_path)
    # Its first two rounds: as long and as labelled.
    run_cli("rlhp-train", *LONG[:4], "total_timesteps=1024", "num_rounds=2", "total_comparisons=12",
            "initial_comparison_frac=0.5", f"hydra.run.dir={short}", cwd=tmp_path)
    evaluated = (short / "eval.json").read_text()
    for budget, key in [(["total_timesteps=4096", *LONG_BUDGET[1:]], "total_timesteps"),
                        ([*LONG_BUDGET[:2], "total_comparisons=12", "initial_comparison_frac=0.5"],
                         "total_comparisons"),
                        (["total_timesteps=512", "num_rounds=2"], "num_rounds"),
                        ([*LONG_BUDGET, "seed=9"], "resume")]:
        refused = run_cli("rlhp-train", f"resume={short}", *budget, cwd=tmp_path, check=False)
        assert refused.returncode == 2 and f"`{key}`" in refused.stderr and "Traceback" not in refused.stderr, \
            refused.stderr[-1000:]
        assert (short / "eval.json").read_text() == evaluated and (short / "checkpoints" / "final").is_dir()
    run_cli("rlhp-train", f"resume={short}", *LONG_BUDGET, cwd=tmp_path)
    assert json.loads((short / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(short) == untimed_rows(whole)
    assert (short / "eval_1024.json").read_text() == evaluated  # the shorter run's evaluation, kept
    assert "num_rounds=4" in (short / "checkpoints" / "final" / "overrides.yaml").read_text()


def test_a_locked_or_finished_folder_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(run_dir)
    wait_for_rounds(run_dir, 1, proc)
    while not (run_dir / "checkpoints" / "iter_0001").is_dir():  # a checkpoint to resume from, complete
        assert proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGSTOP)  # alive and holding the folder, but it cannot finish the run meanwhile
    second = run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={run_dir}", cwd=tmp_path, check=False)
    proc.kill()
    proc.wait()
    assert second.returncode == 5 and f"run error: run folder '{run_dir}' is in use by rlhp pid {proc.pid}" in \
        second.stderr
    finished = tmp_path / "finished"
    run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={finished}", cwd=tmp_path)
    again = run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={finished}", cwd=tmp_path, check=False)
    assert again.returncode == 5 and "holds a finished run" in again.stderr
    other = run_cli("rlhp-train", "debug=fast", "logger=none", "num_rounds=41", "seed=9",
                    f"hydra.run.dir={run_dir}", cwd=tmp_path, check=False)
    assert other.returncode == 2 and "config key `seed` differs from the run already in" in other.stderr


def test_a_diverging_reward_model_stops_the_run_with_no_nan_written(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_cli("rlhp-train", "debug=fast", "logger=none", "agent=dqn", "reward_trainer.lr=1e30",
                   f"hydra.run.dir={run_dir}", cwd=tmp_path, check=False)
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    assert "rlhp-train: run error: round 0: the reward model diverged (reward_loss = nan" in proc.stderr
    assert not (run_dir / "eval.json").exists() and not (run_dir / "checkpoints").exists()


def test_wandb_logs_a_resumed_run_under_the_same_id(tmp_path):
    run_dir = tmp_path / "run"
    killed = run_killed("rlhp.training", "RewardTrainer.train", 3, *RUN[:1], "logger=wandb", *RUN[2:],
                        f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL
    run_cli("rlhp-train", *RUN[:1], "logger=wandb", *RUN[2:], f"hydra.run.dir={run_dir}", cwd=tmp_path)
    run_id = (run_dir / "wandb" / "rlhp-run-id").read_text()
    launches = sorted(p.name for p in (run_dir / "wandb").glob("offline-run-*"))
    assert len(launches) == 2 and all(name.endswith(f"-{run_id}") for name in launches)


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (needs root, as CI and this machine have; skipped elsewhere)."""
    mounts = []

    def mount(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True).returncode:
            pytest.skip("mounting a tmpfs needs root")
        mounts.append(where)
        return where

    yield mount
    for where in mounts:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_fails_in_one_line_naming_the_folder_and_the_run_resumes_after(tmp_path, tmpfs):
    disk = tmpfs("disk", "size=1500k")
    run_dir = disk / "run"
    proc = run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={run_dir}", cwd=tmp_path, check=False)
    assert proc.returncode == 6 and "Traceback" not in proc.stderr and "Logging error" not in proc.stderr
    assert f"rlhp-train: storage error: cannot write '{run_dir}': No space left on device" in proc.stderr
    subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
    run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert (run_dir / "eval.json").exists() and not list((run_dir / "checkpoints").glob("*.tmp"))


def test_an_unwritable_output_folder_fails_in_one_line(tmp_path, tmpfs):
    readonly = tmpfs("readonly", "size=1m,ro")
    proc = run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={readonly / 'run'}", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 6 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"rlhp-train: storage error: cannot write '{readonly / 'run'}': Read-only file "
                                   "system; free space or choose another folder (hydra.run.dir=...); a resumed run "
                                   "continues from the last checkpoint")


def test_sigterm_during_an_experts_training_keeps_what_was_trained(tmp_path):
    run_dir = tmp_path / "collect"
    proc = subprocess.Popen([str(Path(sys.executable).parent / "rlhp-collect"), "expert.total_timesteps=1000000",
                             "expert.env.n_envs=2", f"hydra.run.dir={run_dir}"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("rlhp-collect: expert=ppo_cartpole")
    time.sleep(3)  # training has begun
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    assert "rlhp-collect: stopped: SIGTERM during the expert's training: the expert trained for" in err
    expert = PPO.load(run_dir / "expert.zip", device="cpu")
    assert 0 < expert.num_timesteps < 1_000_000 and not (run_dir / "dataset").exists()


# SAC on Pendulum with a buffer large enough (200k transitions, 2.4 MB of observations) to go to chunks/; 1,024
# steps, 256 a round, of which CrossQ's take half its time.
OFF_POLICY = ["debug=fast", "logger=none", "seed=3", "num_rounds=5", "total_timesteps=1024", "env=gym",
              "env.id=Pendulum-v1", "agent=sac",
              "agent.learning_starts=200", "agent.buffer_size=200000", "++agent.policy_kwargs.net_arch=[32,32]",
              "reward_net.use_action=true"]


@pytest.mark.parametrize("agent", ["sac", "sbx_sac", "tqc", "crossq"])
def test_an_off_policy_run_killed_resumes_to_the_same_result_from_chunks_and_relabelled_rewards(tmp_path, agent):
    # SBX's agents (JAX) hold jitted functions and Flax train states: the config builds the one, the other is data.
    overrides = [*OFF_POLICY, f"agent={agent}"]
    whole, run_dir = whole_and_killed(tmp_path, overrides, ("rlhp.agents.agent", "AgentTrainer.train", 3))
    assert any((run_dir / "chunks").iterdir())  # the buffer's columns are chunks, not part of arrays.npz
    assert all(state_bytes(p) < 1_000_000 for p in (run_dir / "checkpoints").iterdir())
    assert_loads_in_a_fresh_interpreter(run_dir)
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(whole)
    # Pruning leaves exactly the chunks that the kept checkpoints use.
    used = {n for p in (run_dir / "checkpoints").iterdir() for n in (p / "chunks.txt").read_text().split()}
    assert {p.name for p in (run_dir / "chunks").iterdir()} == used
    # The saved agent loads with its own library alone, no rlhp, and acts.
    library = {"sac": stable_baselines3.SAC, "sbx_sac": sbx.SAC, "tqc": sbx.TQC, "crossq": sbx.CrossQ}[agent]
    loaded = library.load(run_dir / "checkpoints" / "final" / "agent.zip", device="cpu")
    assert loaded.predict(np.zeros(3, np.float32), deterministic=True)[0].shape == (1,)


def test_an_sbx_ppo_run_killed_resumes_to_the_same_result_and_its_agent_loads_with_sbx_alone(tmp_path):
    # SBX's PPO (JAX) keeps its random key with the policy; a resume that drew a fresh one would act otherwise.
    overrides = [*RUN, "agent=sbx_ppo"]
    whole, run_dir = whole_and_killed(tmp_path, overrides, MOMENTS["before agent training (round 3)"])
    assert_loads_in_a_fresh_interpreter(run_dir)
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(whole)
    loaded = sbx.PPO.load(run_dir / "checkpoints" / "final" / "agent.zip", device="cpu")
    assert int(loaded.predict(np.zeros(4, np.float32), deterministic=True)[0]) in (0, 1)


def test_a_refused_command_leaves_the_run_folder_as_it_was(tmp_path):
    missing = tmp_path / "nowhere"
    proc = run_cli("rlhp-train", f"resume={missing}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"rlhp-train: config error: config key `resume` is '{missing}', which is not a folder; give the folder "
        "of a run")
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("rlhp-train", f"resume={empty}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "which holds no rlhp run" in proc.stderr and not list(empty.iterdir())
    finished = tmp_path / "finished"
    run_cli("rlhp-train", "debug=fast", "logger=none", f"hydra.run.dir={finished}", cwd=tmp_path)
    record = {p.name: p.read_bytes() for p in (finished / ".hydra").iterdir()}
    for command in ([f"resume={finished}", "seed=7"], ["debug=fast", "logger=none", "seed=7",
                                                       f"hydra.run.dir={finished}"]):
        proc = run_cli("rlhp-train", *command, cwd=tmp_path, check=False)
        assert proc.returncode in (2, 5) and "Traceback" not in proc.stderr
        assert {p.name: p.read_bytes() for p in (finished / ".hydra").iterdir()} == record  # how it was trained


class Payload:
    """What a crafted checkpoint holds: a pickle that runs a command when it is loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("shared")
    run_cli("rlhp-train", "debug=fast", "logger=none", "num_rounds=3", f"hydra.run.dir={where / 'run'}", cwd=where)
    (where / "run" / "eval.json").unlink()  # unfinished again: resume reads its checkpoints
    shutil.rmtree(where / "run" / "checkpoints" / "final")
    return where / "run"


@pytest.mark.parametrize("name", ["resume.json", "arrays.npz", "config.yaml", "overrides.yaml", "state.json",
                                  "reward_net.pt", "trainer.pt", "agent.zip", "resume.pt"])
def test_a_pickle_payload_in_a_checkpoint_file_runs_nothing_on_resume(tmp_path, shared_run, name):
    run_dir = tmp_path / "run"
    shutil.copytree(shared_run, run_dir)
    marker = tmp_path / "pwned"
    for checkpoint in (run_dir / "checkpoints").iterdir():
        (checkpoint / name).write_bytes(pickle.dumps(Payload(marker)))
    resumed = run_cli("rlhp-train", f"resume={run_dir}", cwd=tmp_path, check=False)
    assert not marker.exists() and "Traceback" not in resumed.stderr
    if name in ("resume.json", "arrays.npz", "config.yaml", "overrides.yaml"):  # what resume reads: refused
        assert resumed.returncode == 2, resumed.stderr[-2000:]
        assert resumed.stderr.strip().splitlines()[-1].endswith("holds no complete checkpoint to resume from")
        assert all("cannot be read" in line or "not the one it was saved with" in line
                   for line in resumed.stderr.strip().splitlines()[:-1] if line.startswith("ignoring"))
    else:  # files for people, or one this rlhp never reads: resume goes on from the state, as if untouched
        assert resumed.returncode == 0, resumed.stderr[-2000:]


def test_a_checkpoint_pickled_by_an_older_rlhp_is_refused_in_one_line_saying_how_to_convert_it(tmp_path,
                                                                                                shared_run):
    run_dir = tmp_path / "run"
    shutil.copytree(shared_run, run_dir)
    newest = sorted((run_dir / "checkpoints").iterdir())[-1]
    (newest / "resume.json").rename(newest / "resume.pt")
    resumed = run_cli("rlhp-train", f"resume={run_dir}", cwd=tmp_path, check=False)
    assert resumed.returncode != 0 and "Traceback" not in resumed.stderr
    last = resumed.stderr.strip().splitlines()[-1]
    assert "is a pickle (resume.pt" in last and f"rlhp-convert {run_dir} --trust" in last


def test_a_run_saved_in_format_4_resumes_in_this_release(tmp_path):
    # Kept from the first release that saved checkpoints as data: every later release must resume it.
    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "format4-run", run_dir)
    resumed = run_cli("rlhp-train", f"resume={run_dir}", cwd=tmp_path)
    assert "resuming from" in resumed.stdout and "2 of 3 rounds done" in resumed.stdout
    assert json.loads((run_dir / "eval.json").read_text())["episodes"] == 2
    assert len(untimed_rows(run_dir)) == 3


def test_a_run_pickled_by_rlhp_0_1_is_converted_only_on_trust_and_then_resumes_as_if_never_stopped(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "format3-run", run_dir)
    refused = run_cli("rlhp-convert", str(run_dir), cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "add --trust" in refused.stderr and not list(run_dir.rglob("resume.json"))
    run_cli("rlhp-convert", str(run_dir), "--trust", cwd=tmp_path)
    checkpoint = run_dir / "checkpoints" / "iter_0001"
    assert (checkpoint / "resume.json").is_file() and (checkpoint / "resume.pt").is_file()  # the pickle is kept
    resumed = run_cli("rlhp-train", f"resume={run_dir}", cwd=tmp_path)
    assert "2 of 3 rounds done" in resumed.stdout
    # The same run, never stopped, in this release: the converted state is the state rlhp 0.1 saved.
    whole = tmp_path / "whole"
    run_cli("rlhp-train", "debug=fast", "logger=none", "num_rounds=3", "keep_checkpoints=3",
            f"hydra.run.dir={whole}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(whole)


def test_a_pixel_run_with_the_cnn_reward_killed_between_reward_updates_resumes_to_the_same_result(tmp_path):
    overrides = ["debug=fast", "logger=none", "env=minatar", "env.id=Breakout", "reward_net=cnn",
                 "reward_net.members=2", "num_rounds=3", "seed=3"]
    whole, run_dir = whole_and_killed(tmp_path, overrides, ("rlhp.training", "RewardTrainer.train", 2))
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
    assert untimed_rows(run_dir) == untimed_rows(whole)
