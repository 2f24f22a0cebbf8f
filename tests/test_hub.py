
import datasets
import gymnasium as gym
import numpy as np
import pytest
from helpers import SPACES, assert_nested_equal, imitation_dataset, stacked, trajectory
from huggingface_hub import DatasetCard, HfApi
from hypothesis import given, settings
from hypothesis import strategies as st

from rlhp.data import Trajectory, trajectories_to_dataset
from rlhp.data.hf import dataset_metadata
from rlhp.data.hub import dataset_card, open_trajectories, push_to_hub, stage_for_hub
from rlhp.data.spaces import space_from_json
from rlhp.errors import ConfigError, DataError, NetworkError

META = {"env_id": "CartPole-v1", "policy": {"name": "ppo_cartpole", "algorithm": "PPO", "source": "trained",
                                            "training_steps": 1000},
        "collection": {"seed": 3, "deterministic": True, "epsilon": 0.1, "overrides": ["seed=3"]}}


def staged(tmp_path, trajs, obs_space, act_space, video=None, **kwargs):
    ds = trajectories_to_dataset(trajs, obs_space, act_space, metadata=META, **kwargs)
    card = dataset_card(dataset_metadata(ds), "me/demos", "preview.mp4" if video else None)
    return stage_for_hub(ds, tmp_path / "hub", card, video), ds


@settings(max_examples=12, deadline=None)
@given(obs_space=st.sampled_from(SPACES), act_space=st.sampled_from(SPACES),
       lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_hub_copy_round_trips_every_space_with_spaces_from_the_card(tmp_path_factory, obs_space, act_space,
                                                                    lengths, seed):
    obs_space.seed(seed), act_space.seed(seed + 1)
    trajs = [Trajectory(obs=stacked(obs_space, n + 1), acts=stacked(act_space, n), rews=np.ones(n, np.float32),
                        terminal=False, infos=[{"i": i} for i in range(n)]) for n in lengths]
    folder, _ = staged(tmp_path_factory.mktemp("h"), trajs, obs_space, act_space)
    got, meta = open_trajectories(folder)
    assert space_from_json(meta["observation_space"]) == obs_space
    assert space_from_json(meta["action_space"]) == act_space
    for g, w in zip(got, trajs, strict=True):
        assert_nested_equal(g.obs, w.obs)
        assert_nested_equal(g.acts, w.acts)
        assert g.infos == w.infos


def test_staged_repo_loads_with_plain_datasets_and_has_card_and_video(tmp_path):
    video = tmp_path / "v.mp4"
    video.write_bytes(b"mp4")
    trajs = [trajectory(4), trajectory(6, offset=10, terminal=True)]
    folder, ds = staged(tmp_path, trajs, gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), gym.spaces.Discrete(2),
                        video=video, columns={"rank": [0, 1]})
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "data", "preview.mp4"]
    plain = datasets.load_dataset("parquet", data_files=str(folder / "data" / "*.parquet"), split="train")
    assert plain.num_rows == 2 and plain["rank"] == [0, 1] and len(plain[1]["obs"]) == 7
    card = DatasetCard.load(folder / "README.md")
    assert card.data.rlhp["summary"]["episodes"] == 2 and "reinforcement-learning" in card.data.task_categories
    assert card.data.configs[0]["data_files"][0]["path"] == "data/train-*.parquet"


def test_card_tells_env_spaces_expert_returns_provenance_and_how_to_load():
    meta = {**META, "summary": {"episodes": 50, "steps": 25000, "return_mean": 487.25, "return_std": 3.5,
                                "return_min": 470.0, "return_max": 500.0},
            "observation_space": {"type": "Discrete", "n": 3, "start": 0},
            "ranking": [{"rank": 0, "checkpoint": 100, "epsilon": 0.0, "return_mean": 12.0},
                        {"rank": 1, "checkpoint": 1000, "epsilon": 0.0, "return_mean": 487.25}]}
    text = str(dataset_card(meta, "me/demos", "preview.mp4"))
    for needle in ("`CartPole-v1`", "`Discrete(3)`", "PPO `ppo_cartpole` (trained, 1000 training steps)",
                   "| episodes | 50 |", "487.25 ± 3.50 (min 470.00, max 500.00)", "`rlhp-collect seed=3`",
                   "epsilon 0.1", 'datasets.load_dataset("me/demos", split="train")', 'src="preview.mp4"',
                   "| 0 | 100 | 0.0 | 12.00 |", "`rank`, `checkpoint`, `epsilon`"):
        assert needle in text, needle


class RecordingApi(HfApi):
    """The real client up to the network: records what would be sent."""

    def __init__(self) -> None:
        super().__init__(token="hf_test")
        self.calls = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs["repo_id"], kwargs))


def test_push_goes_to_a_dataset_repo_in_one_upload(tmp_path):
    folder, _ = staged(tmp_path, [trajectory(3)], None, None)
    api = RecordingApi()
    url = push_to_hub(folder, "me/demos", private=True, api=api)
    assert url == "https://huggingface.co/datasets/me/demos"
    (create, repo, create_kw), (upload, repo2, upload_kw) = api.calls
    assert (create, upload, repo, repo2) == ("create_repo", "upload_folder", "me/demos", "me/demos")
    assert create_kw["repo_type"] == upload_kw["repo_type"] == "dataset" and create_kw["private"]
    assert upload_kw["folder_path"] == str(folder)


def test_push_failure_keeps_files_and_says_how_to_upload(tmp_path, monkeypatch):
    folder, _ = staged(tmp_path, [trajectory(3)], None, None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(NetworkError, match="hf upload me/demos .* --repo-type dataset"):
        push_to_hub(folder, "me/demos")
    assert (folder / "README.md").exists()
    with pytest.raises(ConfigError, match="is not a repo id"):
        push_to_hub(folder, "not a repo")


def test_imitation_format_loads(tmp_path):
    rng = np.random.default_rng(0)
    trajs = [Trajectory(obs=rng.normal(size=(n + 1, 3)).astype(np.float32), acts=rng.integers(0, 4, n),
                        rews=rng.normal(size=n).astype(np.float32), terminal=bool(n % 2),
                        infos=[{"step": i} for i in range(n)]) for n in (4, 9)]
    imitation_dataset(trajs).save_to_disk(str(tmp_path / "imit"))
    got, meta = open_trajectories(tmp_path / "imit")
    assert meta == {}
    for g, w in zip(got, trajs, strict=True):
        for key in ("obs", "acts", "rews"):
            np.testing.assert_array_equal(getattr(g, key), getattr(w, key))
            assert getattr(g, key).dtype == getattr(w, key).dtype
        assert g.terminal == w.terminal and g.infos == w.infos


def test_parquet_files_without_a_card_load(tmp_path):
    trajs = [trajectory(5), trajectory(2, offset=3)]
    trajectories_to_dataset(trajs).to_parquet(str(tmp_path / "pq" / "part-0.parquet"))
    got, _ = open_trajectories(tmp_path / "pq")
    np.testing.assert_array_equal(got[1].obs, trajs[1].obs)
    single, _ = open_trajectories(tmp_path / "pq" / "part-0.parquet")
    assert len(single) == 2


def test_bad_sources_name_the_source_and_the_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hi")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    datasets.Dataset.from_dict({"x": [1, 2]}).save_to_disk(str(tmp_path / "other"))
    cases = [(tmp_path / "missing" / "x", ConfigError, "does not exist"),
             (tmp_path / "notes", DataError, "is not a dataset: no save_to_disk files"),
             (tmp_path / "bad.parquet", DataError, "Parquet files that could not be read"),
             (tmp_path / "other", DataError, "has no column(s) ['acts', 'obs', 'terminal']"),
             ("nobody/no-such-dataset", NetworkError, "loading it as a Hub dataset repo failed")]
    for source, error, message in cases:
        with pytest.raises(error) as err:
            open_trajectories(source, key="trajectories.path")
        assert str(source) in str(err.value) and message in str(err.value)
    # Only a path that points nowhere is a mistake in the config key itself.
    with pytest.raises(ConfigError, match="config key `trajectories.path`"):
        open_trajectories(tmp_path / "missing", key="trajectories.path")
