import datasets
import numpy as np
from helpers import SPACES, assert_nested_equal, stacked, trajectory
from hypothesis import given, settings
from hypothesis import strategies as st

from rlhp.data import Trajectory, TrajectoryRecorder, dataset_to_trajectories, load_trajectories, save_trajectories
from rlhp.data.hf import dataset_metadata
from rlhp.data.spaces import space_from_json


def test_trajectories_round_trip_through_a_saved_dataset(tmp_path):
    trajs = [trajectory(7, terminal=True), trajectory(3, offset=50)]
    save_trajectories(trajs, tmp_path / "t")
    plain = datasets.load_from_disk(str(tmp_path / "t"))
    assert plain.num_rows == 2 and len(plain[0]["obs"]) == 8 and plain[0]["terminal"] is True
    for got, want in zip(load_trajectories(tmp_path / "t"), trajs):
        for key in ("obs", "acts", "rews"):
            np.testing.assert_array_equal(getattr(got, key), getattr(want, key))
            assert getattr(got, key).dtype == getattr(want, key).dtype
        assert got.terminal == want.terminal and got.infos == want.infos
    assert len(dataset_to_trajectories(plain)) == 2


def test_recorder_cuts_episodes_per_env():
    rec = TrajectoryRecorder(2)
    obs = np.zeros((2, 1), np.float32)
    for t in range(5):
        dones = np.array([t == 2, t == 4])
        infos = [{"terminal_observation": np.array([99.0 + i]), "TimeLimit.truncated": i == 1} if d else {}
                 for i, d in enumerate(dones)]
        nxt = obs + 1
        ended = rec.record(obs, np.array([t, -t]), np.array([1.0, 2.0]), dones, infos,
                           np.where(dones[:, None], [[99.0], [100.0]], nxt))
        obs = np.where(dones[:, None], 0, nxt).astype(np.float32)
        assert len(ended) == dones.sum()
    first, second = rec.pop_finished()
    assert len(first) == 3 and first.terminal and first.obs[:, 0].tolist() == [0, 1, 2, 99]
    assert len(second) == 5 and not second.terminal and second.acts.tolist() == [0, -1, -2, -3, -4]
    assert second.rews.tolist() == [2.0] * 5 and rec.pop_finished() == []


@settings(max_examples=25, deadline=None)
@given(obs_space=st.sampled_from(SPACES), act_space=st.sampled_from(SPACES),
       lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_every_space_round_trips_losslessly(tmp_path_factory, obs_space, act_space, lengths, seed):
    obs_space.seed(seed), act_space.seed(seed + 1)
    trajs = [Trajectory(obs=stacked(obs_space, n + 1), acts=stacked(act_space, n),
                        rews=np.random.default_rng(seed).normal(size=n).astype(np.float32),
                        terminal=bool(n % 2), infos=[{"i": i, "x": [1.5]} for i in range(n)]) for n in lengths]
    path = tmp_path_factory.mktemp("ds") / "t"
    save_trajectories(trajs, path, observation_space=obs_space, action_space=act_space, metadata={"env_id": "X"})
    plain = datasets.load_from_disk(str(path))
    meta = dataset_metadata(plain)
    assert space_from_json(meta["observation_space"]) == obs_space
    assert space_from_json(meta["action_space"]) == act_space
    assert meta["summary"]["episodes"] == len(lengths) and meta["summary"]["steps"] == sum(lengths)
    for got, want in zip(load_trajectories(path), trajs, strict=True):
        assert_nested_equal(got.obs, want.obs)
        assert_nested_equal(got.acts, want.acts)
        assert_nested_equal(got.rews, want.rews)
        assert got.terminal == want.terminal and got.infos == want.infos
