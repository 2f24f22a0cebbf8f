"""The installed ``rlhp-train`` end to end, with tiny budgets (tier 4: slow, run in CI)."""

import csv
import json
import subprocess
import sys

import datasets
import numpy as np
import pytest
import torch
from helpers import composed, config_groups, group_options, imitation_dataset, run_cli, wandb_history
from stable_baselines3 import PPO

import rlhp.experiment.cli as cli
from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import PreferenceDataset, save_trajectories
from rlhp.data.frames import held_bytes
from rlhp.data.hub import open_trajectories
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv

pytestmark = pytest.mark.slow


def rows(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_default_run_writes_everything(train):
    run_dir, _ = train()
    assert (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "train.log").exists()
    metrics = rows(run_dir)
    assert [int(r["iteration"]) for r in metrics] == [0, 1, 2]
    assert int(metrics[-1]["comparisons"]) == 20
    assert int(metrics[-1]["timesteps"]) == 2048  # debug: 4 envs x 128 steps divide it exactly
    for name in ("iter_0000", "iter_0002", "final"):
        ckpt = run_dir / "checkpoints" / name
        agent = PPO.load(ckpt / "agent.zip", device="cpu")
        assert agent.num_timesteps > 0
        saved = torch.load(ckpt / "reward_net.pt", weights_only=True)
        assert saved["config"]["members"] == 5 and "body.weights.0" in saved["state_dict"]
        prefs = datasets.load_from_disk(str(ckpt / "preferences"))
        assert set(prefs.column_names) >= {"id", "label", "frames", "acts"}
    assert PreferenceDataset.load(run_dir / "checkpoints" / "final" / "preferences").labels.shape == (20,)
    # One Parquet file per round, and a card: plain `datasets` reads the folder.
    assert sorted(p.name for p in (run_dir / "trajectories").iterdir()) == [
        "README.md", "round-0000.parquet", "round-0001.parquet", "round-0002.parquet"]
    trajs = datasets.load_dataset("parquet", data_files=str(run_dir / "trajectories" / "*.parquet"), split="train")
    assert set(trajs.column_names) == {"obs", "acts", "rews", "terminal", "infos"}
    episodes, meta = open_trajectories(run_dir / "trajectories")
    # debug=fast's 100-step episodes on fixed-horizon CartPole: all truncated, none ended by a fall.
    assert len(episodes) == trajs.num_rows and all(len(t) == 100 and not t.terminal for t in episodes)
    assert meta["env_id"] == "rlhp/CartPole-FixedHorizon-v0" and "observation_space" in meta
    # Every label reached labels/ in its round, each exactly once.
    journal = [PreferenceDataset.load(p) for p in sorted((run_dir / "labels").iterdir())]
    assert [len(d) for d in journal] == [6, 9, 5]  # 30% up front, then 14 split 1 : 1/1.5 (hyperbolic)
    assert sorted(np.concatenate([d.ids for d in journal]).tolist()) == list(range(20))
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["episodes"] == 2 and 0 <= result["true_return_mean"] <= 100
    assert -1 <= result["reward_correlation"] <= 1


def test_a_short_cartpole_run_learns_beyond_a_random_policy_and_logs_every_round_to_wandb(tmp_path):
    run_dir = tmp_path / "run"
    # 92k steps: at 61k, seed 0 was still at 38 (seeds 1 and 2: 170 and 160); at 92k it is at 105.
    run_cli("rlhp-train", "logger=wandb", "total_timesteps=92160", "total_comparisons=200", "num_rounds=7",
            "evaluation.episodes=10", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    result = json.loads((run_dir / "eval.json").read_text())
    venv = GymEnv(FIXED_HORIZON_CARTPOLE).make(seed=20_000, n_envs=10)
    venv.action_space.seed(0)
    random_return = np.mean([t.rews.sum() for t in rollout(venv, random_policy(venv.action_space), episodes=10)])
    # A random policy scores about 24.
    assert result["true_return_mean"] > 3 * random_return and result["reward_correlation"] > 0.7
    history, csv_rows = wandb_history(run_dir), rows(run_dir)
    assert len(history) == len(csv_rows) == 7
    for logged, written in zip(history, csv_rows):
        assert {k for k, v in written.items() if v != ""} <= set(logged)
        assert logged["comparisons"] == int(written["comparisons"]) and logged["reward_loss"] == pytest.approx(
            float(written["reward_loss"]))


def test_the_console_shows_the_bar_and_three_lines_and_the_log_has_the_rest(train):
    run_dir, proc = train("logger=wandb")  # as `make train` runs: W&B offline
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines] == ["rlhp-train", "run folder", "evaluation"], proc.stdout
    assert lines[1] == f"run folder: {run_dir}" and "true_return_mean = " in lines[2]
    assert "rounds: 100%" in proc.stderr  # the bar
    assert "warn" not in (proc.stdout + proc.stderr).lower() and "round 0:" not in proc.stdout + proc.stderr
    log = (run_dir / "train.log").read_text()
    assert "round 0: {'iteration': 0" in log and "evaluation:" in log


def test_same_seed_same_preferences_and_return(train):
    a, _ = train("seed=3", name="a")
    b, _ = train("seed=3", name="b")
    c, _ = train("seed=4", name="c")
    prefs = [datasets.load_from_disk(str(d / "checkpoints" / "final" / "preferences")) for d in (a, b, c)]
    assert prefs[0]["label"] == prefs[1]["label"]
    np.testing.assert_array_equal(np.asarray(prefs[0]["frames"]), np.asarray(prefs[1]["frames"]))
    assert not np.array_equal(np.asarray(prefs[0]["frames"]), np.asarray(prefs[2]["frames"]))
    evals = [json.loads((d / "eval.json").read_text()) for d in (a, b)]
    assert evals[0] == evals[1]
    untimed = [[{k: v for k, v in r.items() if k != "wall_s" and not k.startswith("time_")} for r in rows(d)]
               for d in (a, b)]
    assert untimed[0] == untimed[1] and "reward_loss" in untimed[0][0]


@pytest.mark.parametrize("overrides", [
    ["env=gym", "env.id=Pendulum-v1", "agent=sac", "agent.learning_starts=100", "agent.batch_size=32",
     "reward_net=basic",
     "query_schedule=constant", "reward_net.use_action=true"],
    ["env=gym", "env.id=Pendulum-v1", "agent=td3", "agent.learning_starts=100", "agent.batch_size=32",
     "reward_net.use_action=true"],
    ["agent=a2c", "fragmenter=active", "fragmenter.uncertainty_on=probability",
     "query_schedule=inverse_quadratic", "reward_trainer.minibatch_size=8", "reward_net.shaping_gamma=0.99"],
    ["agent=dqn", "agent.learning_starts=100", "fragmenter=active", "fragmenter.uncertainty_on=label",
     "trajectories.exploration_frac=0.5", "reward_trainer.val_split=0.2", "reward_trainer.weight_decay=1e-3",
     "reward_trainer.weight_decay_adapt=2"],
], ids=["pendulum-sac-basic-constant", "pendulum-td3", "a2c-active-probability", "dqn-active-label-explore"])
def test_every_option_runs(train, overrides):
    run_dir, _ = train(*overrides)
    metrics = rows(run_dir)
    assert len(metrics) == 3 and (run_dir / "eval.json").exists()
    assert (run_dir / "checkpoints" / "final" / "agent.zip").exists()
    # Each option visibly takes effect.
    if "query_schedule=constant" in overrides:
        assert [int(r["comparisons"]) for r in metrics] == [6, 13, 20]  # 6 up front, then 7 and 7
    if "trajectories.exploration_frac=0.5" in overrides:
        assert all(int(r["sampled_exploration_steps"]) >= 0.5 * int(r["sampled_from_training_steps"])
                   + 0.5 * int(r["sampled_rollout_steps"]) > 0 for r in metrics)
    if "reward_trainer.val_split=0.2" in overrides:
        assert all(r["val_loss"] != "" for r in metrics) and float(metrics[-1]["weight_decay"]) != 1e-3
    if "reward_net.shaping_gamma=0.99" in overrides:
        saved = torch.load(run_dir / "checkpoints" / "final" / "reward_net.pt", weights_only=True)
        assert any(k.startswith("potential.") for k in saved["state_dict"])


def test_wandb_offline_run_lands_in_the_run_folder(train):
    run_dir, _ = train("logger=wandb", "logger.mode=offline")
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


def test_multirun_sweeps_into_the_sweep_folder(tmp_path):
    run_cli("rlhp-train", "-m", "debug=fast", "logger=none", "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sweep'}",
            cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == ["0", "1"]
    assert all((tmp_path / "sweep" / d / "eval.json").exists() for d in ("0", "1"))


@pytest.mark.parametrize(("overrides", "message"), [
    (["agent=foo"],
     "config group `agent` has no option 'foo'; its options are a2c, crossq, dqn, iql, ppo, sac, sbx_ppo, sbx_sac, "
     "td3, td3bc, tqc"),
    (["total_timesteps=abc"], "config key `total_timesteps` must be an integer, got 'abc'"),
    (["total_comparisons=-5"], "config key `total_comparisons` must be at least 1, got -5"),
    (["reward_trainer.batch_size=30", "reward_trainer.minibatch_size=8"],
     "config key `reward_trainer.batch_size` (30) must be a multiple of minibatch_size (8); set one so that it "
     "divides the other, e.g. batch_size=24"),
    (["fragment_length=600"], "config key `fragment_length` (600) is longer than any episode"),
    (["fragmenter=active", "fragmenter.uncertainty_on=variance"],
     "config key `fragmenter.uncertainty_on` must be one of logit, probability, label, entropy, got 'variance'"),
    (["fragmenter=active", "reward_net=basic"], "config key `reward_net.members` must be at least 2"),
    (["env=gym"], "config key `env.id` is required with env=gym"),
    (["trajectories=dataset"], "config key `trajectories.path` is required with trajectories=dataset or demos"),
    (["env=gym", "env.id=NoSuchEnv-v0"], "config key `env.id` 'NoSuchEnv-v0' is not a registered gymnasium id"),
    (["agent=sac"], "config key `agent` cannot train on env 'rlhp/CartPole-FixedHorizon-v0'"),
    (["env=gym", "env.id=CartPole-v1"], "episodes ended by termination at different lengths"),
    # A random Acrobot swings up within its 500-step limit in 1 of ~40 episodes; a longer limit
    # makes every episode end by termination, at lengths that differ.
    (["env=gym", "env.id=Acrobot-v1", "env.max_episode_steps=20000", "total_comparisons=100",
      "initial_comparison_frac=1.0"], "episodes ended by termination at different lengths"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_config_fails_with_a_message_naming_the_key(train, overrides, message):
    run_dir, proc = train(*overrides, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "checkpoints").exists()


def test_reward_from_a_saved_dataset_without_an_agent(train, tmp_path):
    source, _ = train("total_comparisons=40", name="source")
    run_dir, _ = train("trajectories=dataset", f"trajectories.path={source / 'trajectories'}",
                       "trajectories.held_out_frac=0.25", name="from_data")
    result = json.loads((run_dir / "eval.json").read_text())
    assert "true_return_mean" not in result and -1 <= result["reward_correlation"] <= 1
    # The correlation on the data's own held-out episodes and on a random policy's states, each alone.
    assert {"reward_correlation_held_out", "reward_correlation_random"} <= result.keys()
    assert "reward_correlation_agent" not in result
    assert (run_dir / "checkpoints" / "final" / "reward_net.pt").exists()
    assert not (run_dir / "checkpoints" / "final" / "agent.zip").exists()
    assert [int(r["timesteps"]) for r in rows(run_dir)] == [0, 0, 0]


def test_bad_datasets_name_the_path_and_the_problem(train, tmp_path):
    source, _ = train(name="source")
    (tmp_path / "empty").mkdir()
    episodes, _ = open_trajectories(source / "trajectories")
    save_trajectories(episodes, tmp_path / "arrow")
    arrow = next((tmp_path / "arrow").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    shard = source / "trajectories" / "round-0001.parquet"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    _, proc = train("trajectories=dataset", f"trajectories.path={tmp_path / 'nope'}", name="bad", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"rlhp-train: config error: config key `trajectories.path` '{tmp_path / 'nope'}' does not exist" \
        in proc.stderr
    for path, message in ((tmp_path / "empty", "(from trajectories.path) is not a dataset: no save_to_disk files "
                                               "(state.json) and no Parquet"),
                          (tmp_path / "arrow", "could not be read, its files may be damaged or truncated"),
                          (source / "trajectories", "has Parquet files that could not be read")):
        _, proc = train("trajectories=dataset", f"trajectories.path={path}", name="bad", check=False)
        assert proc.returncode == 3 and f"rlhp-train: data error: '{path}' {message}" in proc.stderr
        assert "Traceback" not in proc.stderr
    _, proc = train("trajectories=dataset", f"trajectories.path={source / 'checkpoints' / 'final' / 'preferences'}",
                    name="bad", check=False)
    assert "not a trajectory dataset" in proc.stderr


def test_dataset_from_another_env_is_refused(train):
    source, _ = train(name="source")
    _, proc = train("env=gym", "env.id=Pendulum-v1", "trajectories=dataset",
                    f"trajectories.path={source / 'trajectories'}", name="bad", check=False)
    assert proc.returncode == 3 and "was recorded with observation_space" in proc.stderr


def test_imitation_format_dataset_trains_a_reward_and_is_shape_checked(train, tmp_path):
    source, _ = train(name="source")
    imitation_dataset(open_trajectories(source / "trajectories")[0]).save_to_disk(str(tmp_path / "imit"))
    run_dir, _ = train("trajectories=dataset", f"trajectories.path={tmp_path / 'imit'}", name="from_imitation")
    assert (run_dir / "checkpoints" / "final" / "reward_net.pt").exists()
    _, proc = train("env=gym", "env.id=Pendulum-v1", "trajectories=dataset", f"trajectories.path={tmp_path / 'imit'}",
                    name="bad", check=False)
    assert proc.returncode == 3 and "has observation of shape (4,) per step, but env 'Pendulum-v1'" in proc.stderr


@pytest.mark.slow
def test_the_true_reward_ceiling_trains_the_same_agent_with_no_preferences(train):
    run_dir, proc = train("reward_learning=none")
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["optimized_metric"]["name"] == "true_return_mean" and "reward_correlation" not in result
    assert "on the true reward (the ceiling)" in proc.stdout
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    assert {r["comparisons"] for r in rows} == {"0"} and int(rows[-1]["timesteps"]) >= 2048
    assert not (run_dir / "labels").exists() and not (run_dir / "trajectories").exists()


@pytest.mark.parametrize(("override", "key", "what", "extra"), [
    ("hparams_search=cartpole", "hparams_search", "Hydra's Optuna sweeper", "search"),
    ("hydra/launcher=ray", "hydra/launcher", "Hydra's Ray launcher", "ray"),
    ("agent=crossq", "agent", "SBX's JAX agents", "jax"),
    ("agent=sbx_ppo", "agent", "SBX's JAX agents", "jax"),
])
def test_a_feature_of_a_missing_extra_is_a_config_error_naming_the_extra(tmp_path, override, key, what, extra):
    # The entry point as installed, with the extra's plugin absent (it is installed in the test venv).
    code = ("import sys, rlhp.experiment.cli as cli, rlhp.experiment.preflight as p; p._installed = lambda m: False; "
            "sys.argv = ['rlhp-train', '-m', sys.argv[1]]; cli.train_main()")
    proc = subprocess.run([sys.executable, "-c", code, override], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"rlhp-train: config error: config key `{key}` needs {what}, which comes with "
                                   f"an extra: pip install 'rlhp[{extra}]'")
    assert not list(tmp_path.iterdir())  # refused before Hydra made a folder


@pytest.mark.parametrize(("command", "override", "problem"), [
    ("train", "hydra.sweep.dir=/runs/mistake=0.1", "mismatched input '=' expecting <EOF>"),
    ("train", "seed=[1", "no viable alternative at input '[1'"),
    ("bc", "seed=1=2", "mismatched input '=' expecting <EOF>"),
    ("collect", "seed=1=2", "mismatched input '=' expecting <EOF>"),
])
def test_an_override_hydra_cannot_read_is_named(tmp_path, command, override, problem):
    code = (f"import sys, rlhp.experiment.cli as cli; sys.argv = ['rlhp-{command}', '-m', 'seed=0', sys.argv[1]]; "
            f"cli.{command}_main()")
    proc = subprocess.run([sys.executable, "-c", code, override], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"rlhp-{command}: config error: override `{override}` cannot be read ({problem}); "
                                   "quote a value that holds '=', brackets, commas or spaces (key='a=b')")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("group", config_groups())
def test_a_misspelt_option_of_any_group_is_refused_naming_the_group_and_its_options(group):
    options = group_options(group)
    typo = options[0][:-1] + "q"
    picks = [f"{group}=[{options[0]},{typo}]"] if group == "callbacks" else [f"{group}={typo}",
                                                                           f"{group}={options[0]},{typo}"]
    for pick in picks:
        error = cli.unknown_option(["-m", "seed=0", pick])
        assert error is not None, pick
        assert str(error).startswith(f"config group `{group}` has no option '{typo}'")
        assert str(error).endswith("its options are " + ", ".join(options))
    assert cli.unknown_option([f"{group}=[{options[0]}]" if group == "callbacks" else f"{group}={options[0]}"]) is None


@pytest.mark.parametrize("args", [["experiment=pendullum", "debug=fast"], ["debug=fsat"]])
def test_a_misspelt_optional_group_is_refused_before_anything_runs(tmp_path, args):
    # Hydra skips an optional group's option it cannot find: the typo ran the default CartPole to exit 0.
    proc = run_cli("rlhp-train", *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "has no option" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("override", "new"), [
    ("crop=temporal", "reward_trainer/crop=temporal"), ("pseudo_labels=surf", "reward_trainer/pseudo_labels=surf"),
    ("label_filter=contradicted", "reward_trainer/label_filter=contradicted"),
    ("feedback=true_reward", "reward_learning=none"),
])
def test_a_group_that_moved_is_refused_by_its_old_name_naming_the_new(tmp_path, override, new):
    code = "import sys, rlhp.experiment.cli as cli; sys.argv = ['rlhp-train', 'seed=0', sys.argv[1]]; cli.train_main()"
    proc = subprocess.run([sys.executable, "-c", code, override], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    key = override.split("=")[0]
    assert proc.stderr.startswith(f"rlhp-train: config error: config key `{key}` is now the group ")
    assert new in proc.stderr
    assert not list(tmp_path.iterdir())
    # The new name composes.
    assert composed("train", [new])


@pytest.mark.parametrize(("command", "overrides", "code", "message"), [
    ("rlhp-train", ["trajectories=dataset", "trajectories.path=missing"], 2,
     "config key `trajectories.path` 'missing' does not exist"),
    ("rlhp-train", ["trajectories=demos", "trajectories.path=notes.txt"], 3,
     "'notes.txt' (from trajectories.path) is not a dataset"),
    ("rlhp-train", ["pretrain=bc", "pretrain.path=missing"], 2, "config key `pretrain.path` 'missing' does not exist"),
    ("rlhp-bc", ["pretrain.path=folder"], 3, "'folder' (from pretrain.path) is not a dataset"),
    ("rlhp-collect", ["expert=zip", "expert.path=folder"], 2, "config key `expert.path` 'folder' is a folder"),
    ("rlhp-collect", ["expert=zip", "expert.path=notes.txt", "expert.vec_normalize=missing.pkl"], 2,
     "config key `expert.vec_normalize` 'missing.pkl' does not exist"),
], ids=lambda v: v if isinstance(v, str) and v.startswith("rlhp") else None)
def test_a_missing_or_wrong_input_path_is_refused_before_anything_is_made(tmp_path, command, overrides, code, message):
    (tmp_path / "notes.txt").write_text("not data")
    (tmp_path / "folder").mkdir()
    for sweep in ([], ["-m"]):
        proc = run_cli(command, *sweep, *overrides, "debug=fast" if command == "rlhp-train" else "seed=0",
                       cwd=tmp_path, check=False)
        kind = "config error" if code == 2 else "data error"
        assert proc.returncode == code and proc.stderr.startswith(f"{command}: {kind}: "), proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "notes.txt"]  # no outputs/ or multirun/


@pytest.mark.parametrize("game", [
    ["env=minatar", "env.id=Breakout"],
    ["experiment=pong", "env.max_episode_steps=100", "env.n_envs=2", "total_timesteps=512", "num_rounds=2",
     "total_comparisons=6", "evaluation.correlation_steps=200"],  # the paper's Atari settings, a smoke run
], ids=["minatar", "pong"])
def test_a_game_learns_from_pixels_with_the_cnn_reward(train, game):
    run_dir, _ = train(*game, "reward_net=cnn", "reward_net.members=2")
    result = json.loads((run_dir / "eval.json").read_text())
    assert np.isfinite(result["true_return_mean"]) and -1 <= result["reward_correlation"] <= 1
    saved = torch.load(run_dir / "checkpoints" / "final" / "reward_net.pt", weights_only=True)
    assert "body.convs.0.weight" in saved["state_dict"]  # the CNN, not an MLP over flattened pixels
    episodes, _ = open_trajectories(run_dir / "trajectories")
    assert episodes[0].obs.dtype == np.uint8 and episodes[0].obs.ndim == 4  # frames kept as bytes
    stack = 4 if "experiment=pong" in game else 1  # Atari's stacks are stored as their frames, each once
    assert episodes[0].frame_stack == stack  # the episodes loaded share one buffer of their frames, each once
    assert held_bytes(episodes[0].obs) == sum(t.frames.nbytes for t in episodes)
    assert len(episodes[0].frames) == len(episodes[0]) + stack
    prefs = PreferenceDataset.load(run_dir / "checkpoints" / "final" / "preferences").pairs
    assert prefs.frame_stack == stack and prefs.frames.shape[2] == prefs.dones.shape[-1] + stack


def test_a_mujoco_env_that_ends_early_is_refused_naming_the_one_key_that_fixes_it(tmp_path):
    pytest.importorskip("mujoco")
    # docs/human-labels.md's Hopper command without the key: its episodes end when the hopper falls.
    proc = run_cli("rlhp-train", "env=gym", "env.id=Hopper-v5", "agent=sac", "debug=fast", "logger=none",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    assert "To fix it, add +env.kwargs.terminate_when_unhealthy=false (Hopper-v5's episodes" in proc.stderr


@pytest.mark.slow
def test_the_sb3_agents_run_without_the_jax_extra(tmp_path):
    # jax and sbx made unimportable: an SB3 run must not touch them (the jax extra is optional).
    code = ("import sys; sys.modules['jax'] = sys.modules['sbx'] = None; import rlhp.experiment.cli as cli; "
            "sys.argv = ['rlhp-train', *sys.argv[1:]]; cli.train_main()")
    proc = subprocess.run([sys.executable, "-c", code, "debug=fast", "logger=none", "env=gym", "env.id=Pendulum-v1",
                           "agent=sac", "agent.learning_starts=100", "total_timesteps=512",
                           f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "eval.json").is_file()


@pytest.mark.parametrize("argv", [["total_comparisons=0"], ["method=qpa"], ["-m", "total_comparisons=0,1"]])
def test_a_command_refused_after_hydra_made_its_folder_leaves_none(tmp_path, argv):
    # Refused by the config's checks or a part's constructor, after Hydra made the run (or sweep) folder.
    proc = run_cli("rlhp-train", *argv, "debug=fast", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("rlhp-train: config error: "), proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_refused_command_keeps_the_folders_it_did_not_make(tmp_path):
    (tmp_path / "mine").mkdir()
    proc = run_cli("rlhp-train", "total_comparisons=0", f"hydra.run.dir={tmp_path / 'mine' / 'run'}", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2
    assert [p.name for p in tmp_path.iterdir()] == ["mine"] and not list((tmp_path / "mine").iterdir())
    # The run folder itself, made beforehand and empty: kept, as it was.
    (tmp_path / "mine" / "run").mkdir()
    proc = run_cli("rlhp-train", "total_comparisons=0", f"hydra.run.dir={tmp_path / 'mine' / 'run'}", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2 and (tmp_path / "mine" / "run").is_dir()
    assert not list((tmp_path / "mine" / "run").iterdir())
