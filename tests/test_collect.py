"""``rlhp-collect``: collection helpers, then the installed command end to end (slow)."""

import json
import subprocess
import sys

import datasets
import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
from helpers import Counter, run_cli, zoo_repo
from huggingface_hub import DatasetCard
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from rlhp.agents.rollout import rollout
from rlhp.data import Trajectory
from rlhp.data.hf import summary
from rlhp.data.hub import open_trajectories
from rlhp.demos.experts import TrainedExpert
from rlhp.envs import GymEnv
from rlhp.errors import ConfigError, RunError
from rlhp.experiment.collect import check_quality
from rlhp.video import check_renders

QUICK = ["episodes=4", "n_envs=2", "video.episodes=0", "min_mean_return=null", "expert.total_timesteps=1024",
         "expert.env.n_envs=2", "expert.algorithm.n_steps=64", "expert.algorithm.batch_size=64",
         "expert.algorithm.n_epochs=2"]


def test_rollout_collects_whole_episodes_in_equal_shares():
    # Copy 0's episodes last 2 steps, copy 1's 5 and copy 2's 9: the first 7 to end would mostly be copy 0's.
    venv = DummyVecEnv([lambda n=n, tag=tag: Counter(terminate_at=n, tag=tag) for tag, n in enumerate((2, 5, 9))])
    lengths = []
    got = rollout(venv, lambda obs: np.zeros(len(obs), dtype=np.int64), episodes=7,
                  on_episode=lambda t: lengths.append(len(t)))
    copies = [int(t.obs[0, 0]) // 10_000 for t in got]
    assert sorted(copies) == [0, 0, 0, 1, 1, 2, 2]  # 7 = 3 + 2 + 2, the remainder to the first copy
    assert [len(t) for t in got] == lengths and all(len(t) == (2, 5, 9)[c] for t, c in zip(got, copies))
    steps = rollout(venv, lambda obs: np.zeros(len(obs), dtype=np.int64), steps=100)
    assert sum(map(len, steps)) >= 100 and sum(map(len, steps[:-1])) < 100  # stops at the episode that covers it


def returns_summary(*returns: float) -> dict:
    """Summary statistics of one-step episodes with these returns."""
    return summary([Trajectory(obs=np.zeros((2, 1)), acts=np.zeros(1), rews=np.array([r], np.float32),
                               terminal=False) for r in returns])


def test_quality_gate_refuses_with_the_measured_figure():
    check_quality(returns_summary(480.0, 490.0), 475)
    check_quality(returns_summary(1.0), None)
    with pytest.raises(RunError, match=r"quality gate: .* over 2 episodes is 150.0 ± 50.0, below min_mean_return=475"):
        check_quality(returns_summary(100.0, 200.0), 475)


@pytest.mark.slow
def test_acceptance_default_expert_in_plain_datasets_and_replayable(collect, tmp_path):
    run_dir, _ = collect()
    result = json.loads((run_dir / "collect.json").read_text())
    assert result["episodes"] == 50 and result["return_mean"] >= 475
    for name in ("expert.zip", "preview.mp4", "README.md", "collect.log"):
        assert (run_dir / name).stat().st_size > 0, name
    # A plain Python shell, with no rlhp import, reads the dataset.
    code = ("import datasets, sys; ds = datasets.load_from_disk(sys.argv[1]); "
            "assert 'rlhp' not in sys.modules; print(ds.num_rows, sum(map(sum, ds['rews'])) / ds.num_rows)")
    out = subprocess.run([sys.executable, "-c", code, str(run_dir / "dataset")], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "50" and float(out[1]) >= 475
    # rlhp reads back exactly what was collected: replaying the saved expert in the same seeded envs.
    got, meta = open_trajectories(run_dir / "dataset")
    venv = GymEnv("rlhp/CartPole-FixedHorizon-v0").make(seed=1000, n_envs=8)
    model = PPO.load(run_dir / "expert.zip", device="cpu")
    want = rollout(venv, lambda obs: model.predict(obs, deterministic=True)[0], episodes=50)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.obs, w.obs)
        np.testing.assert_array_equal(g.acts, w.acts)
        np.testing.assert_array_equal(g.rews, w.rews)
    assert meta["policy"]["name"] == "ppo_cartpole" and meta["summary"]["return_mean"] == result["return_mean"]


@pytest.mark.slow
def test_ranked_checkpoints_video_and_card(collect):
    run_dir, _ = collect(*QUICK, "ranked.checkpoints=[128,512]", "video.episodes=1", "video.fps=100")
    ds = datasets.load_from_disk(str(run_dir / "dataset"))
    assert ds["rank"] == [0] * 4 + [1] * 4 + [2] * 4 and ds["epsilon"] == [0.0] * 12
    assert ds["checkpoint"][0] == 128 and ds["checkpoint"][4] == 512 and ds["checkpoint"][8] >= 1024
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_00000128.zip",
                                                                           "step_00000512.zip"]
    reader = imageio.get_reader(run_dir / "preview.mp4")
    assert reader.get_meta_data()["fps"] == 100 and reader.get_meta_data()["size"] == (600, 400)
    assert reader.count_frames() == 501  # one 500-step episode: the reset frame and one per step
    card = DatasetCard.load(run_dir / "README.md")
    assert [r["rank"] for r in card.data.rlhp["ranking"]] == [0, 1, 2] and "## Ranks" in card.text
    assert "collect.log" in {p.name for p in run_dir.iterdir()}


@pytest.mark.slow
def test_noise_ranks_from_a_zip_expert_and_stochastic_timesteps(collect, tmp_path):
    source, _ = collect(*QUICK, name="source")
    run_dir, _ = collect("expert=zip", f"expert.path={source / 'expert.zip'}", "ranked.epsilons=[1.0,0.0]",
                         "episodes=null", "timesteps=1000", "deterministic=false", "n_envs=2", "video.episodes=0",
                         name="zip")
    ds = datasets.load_from_disk(str(run_dir / "dataset"))
    lengths = np.array([len(r) for r in ds["rews"]])
    ranks = np.array(ds["rank"])
    assert ds["epsilon"][0] == 1.0 and set(ranks) == {0, 1}
    assert all(lengths[ranks == r].sum() >= 1000 for r in (0, 1))
    meta = json.loads(ds.info.description)["rlhp"]
    assert meta["policy"]["source"] == str(source / "expert.zip") and not meta["collection"]["deterministic"]
    # The demonstrations feed reward learning directly.
    trained = tmp_path / "train"
    run_cli("rlhp-train", "debug=fast", "logger=none", "trajectories=dataset",
            f"trajectories.path={run_dir / 'dataset'}", f"hydra.run.dir={trained}", cwd=tmp_path)
    assert (trained / "checkpoints" / "final" / "reward_net.pt").exists()


@pytest.mark.slow
def test_zoo_layout_hub_repo_with_normalisation(collect, tmp_path):
    repo = zoo_repo(tmp_path, normalize=True)
    run_dir, _ = collect("expert=hub", f"expert.repo_id={repo}", "episodes=3", "n_envs=2", "video.episodes=0")
    got, meta = open_trajectories(run_dir / "dataset")
    assert len(got) == 3 and meta["env_id"] == "CartPole-v1" and meta["policy"]["source"] == f"hf://{repo}"
    # CartPole resets uniformly in [-0.05, 0.05]: the stored first observations are raw, while the
    # normalised ones the policy saw are not in that range.
    first = np.stack([t.obs[0] for t in got])
    assert np.abs(first).max() <= 0.05
    stats = VecNormalize.load(str(repo / "vec_normalize.pkl"), DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    assert np.abs(stats.normalize_obs(first)).max() > 0.05


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "message"), [
    (["episodes=5", "timesteps=100"], "config key `episodes` and timesteps: set exactly one"),
    (["epsilon=2"], "config key `epsilon` must lie in [0, 1], got 2"),
    (["ranked.checkpoints=[10]", "ranked.epsilons=[0.5]"], "config key `ranked` sets both"),
    (["expert=zip"], "config key `expert.path` is required with expert=zip"),
    (["expert=zip", "expert.path=/no/such.zip"], "config key `expert.path` '/no/such.zip' does not exist"),
    (["expert=zip", "expert.path=README.md", "expert.algo=ppg"], "names algorithm 'ppg'; use one of a2c"),
    (["expert=hub", "expert.repo_id=someone/cartpole"], "is not named like a zoo repo"),
    (["min_mean_return=abc"], "config key `min_mean_return` must be a number or null"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_collect_config_fails_with_a_message_naming_the_key(collect, tmp_path, overrides, message):
    (tmp_path / "README.md").write_text("not a model")
    run_dir, proc = collect(*overrides, check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_file_that_is_no_model_is_a_data_error(collect, tmp_path):
    (tmp_path / "README.md").write_text("not a model")
    _, proc = collect("expert=zip", "expert.path=README.md", check=False)
    assert proc.returncode == 3 and "rlhp-collect: data error: 'README.md' (from expert.path) is not a PPO model" \
        in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_quality_gate_and_zoo_wrappers_refuse_to_save(collect, tmp_path):
    run_dir, proc = collect(*QUICK[:-5], "expert.total_timesteps=256", "expert.env.n_envs=2",
                            "expert.algorithm.n_steps=64", "expert.algorithm.batch_size=64",
                            "min_mean_return=475", check=False)
    assert proc.returncode == 5 and "rlhp-collect: run error: quality gate" in proc.stderr
    assert "refusing to save" in proc.stderr and "over 4 episodes is" in proc.stderr
    assert (run_dir / "expert.zip").exists() and not (run_dir / "dataset").exists()
    repo = zoo_repo(tmp_path, normalize=False, frame_stack=4)
    _, proc = collect("expert=hub", f"expert.repo_id={repo}", name="stacked", check=False)
    assert proc.returncode == 2 and "was trained with frame_stack=4" in proc.stderr


@pytest.mark.slow
def test_push_without_network_keeps_dataset_and_staged_repo(collect, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run_dir, proc = collect(*QUICK, "video.episodes=1", "push_to_hub.repo_id=me/cartpole-demos", check=False)
    assert proc.returncode == 4 and "rlhp-collect: network error: upload" in proc.stderr
    assert "hf upload me/cartpole-demos" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in (run_dir / "hub").iterdir()) == ["README.md", "data", "preview.mp4"]
    assert 'load_dataset("me/cartpole-demos"' in (run_dir / "hub" / "README.md").read_text()
    staged, _ = open_trajectories(run_dir / "hub")
    saved, _ = open_trajectories(run_dir / "dataset")
    assert len(staged) == len(saved) == 4
    for a, b in zip(staged, saved):
        np.testing.assert_array_equal(a.obs, b.obs)


@pytest.mark.parametrize(("checkpoints", "message"), [
    ([500, 1024], r"has \[1024\] at or after the end of training \(expert.total_timesteps=1024\)"),
    ([2000], r"has \[2000\] at or after the end"),
    ([100, 100], "must be distinct positive training steps"),
])
def test_ranked_checkpoints_outside_training_are_refused_before_training(tmp_path, checkpoints, message):
    expert = TrainedExpert(lambda env, seed: pytest.fail("trained despite a bad checkpoint"),
                           GymEnv("CartPole-v1", n_envs=1), total_timesteps=1024)
    with pytest.raises(ConfigError, match=message):
        expert.snapshots(tmp_path, seed=0, checkpoints=checkpoints)


class NoPygame(gym.Wrapper):
    """An env whose renderer is missing, as classic control is without pygame."""

    def render(self):
        raise gym.error.DependencyNotInstalled("pygame is not installed")


def test_a_missing_renderer_is_a_config_error_naming_the_video_key_before_any_work():
    check_renders(gym.make("CartPole-v1", render_mode="rgb_array"), "video.episodes")  # renders: no error
    with pytest.raises(ConfigError, match=r"`video.episodes` .*CartPole-v1 cannot render here \(pygame is not "
                                          r"installed\); install what it names, or set video.episodes=0"):
        check_renders(NoPygame(gym.make("CartPole-v1", render_mode="rgb_array")), "video.episodes")
