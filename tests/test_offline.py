"""The offline track: Minari datasets, the offline agents (IQL, TD3+BC in JAX) and offline runs."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
from helpers import assert_loads_in_a_fresh_interpreter, composed, random_dataset, run_cli, run_killed, trajectory

from rlhp.agents.offline import OfflineAgent
from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data.hub import check_source, open_trajectories
from rlhp.data.label_files import SegmentLabels, read_label_files, write_label_files
from rlhp.data.minari import RECIPES, save_minari
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError, DataError
from rlhp.experiment.config import validate_collect
from rlhp.experiment.preflight import check_command_line
from rlhp.offline import OfflineAlgorithm, Transitions, saved_policy
from rlhp.rewards import EnvReward

PENDULUM = "rlhp/pendulum/random-v0"


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory):
    """A local Minari root holding a small dataset of a random policy on Pendulum (10 episodes, 2,000 steps)."""
    root = tmp_path_factory.mktemp("minari")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        env = GymEnv("Pendulum-v1", n_envs=2)
        venv = env.make(0)
        venv.action_space.seed(0)
        save_minari(rollout(venv, random_policy(venv.action_space), 2000), PENDULUM, *env.spaces(), env.id,
                    "random", "a random policy")
        yield root


@pytest.fixture()
def in_root(minari_root, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    return minari_root


def test_a_minari_dataset_round_trips_and_is_found_by_id(in_root):
    env = GymEnv("Pendulum-v1")
    rng = np.random.default_rng(1)
    episodes = [trajectory(5), trajectory(3, offset=10.0, terminal=True)]
    episodes = [t.__class__(obs=np.repeat(t.obs, 3, axis=1), acts=rng.uniform(-2, 2, (len(t), 1)).astype(np.float32),
                            rews=t.rews.astype(np.float64), terminal=t.terminal) for t in episodes]
    folder = save_minari(episodes, "test/round-v0", *env.spaces(), env.id, "hand-made", "two episodes")
    assert folder == in_root / "test" / "round-v0"
    assert check_source("test/round-v0", "trajectories.path") is None  # an id, not a folder
    back, meta = open_trajectories("test/round-v0", key="trajectories.path")
    assert meta["env_id"] == "Pendulum-v1" and meta["minari_id"] == "test/round-v0"
    assert [len(t) for t in back] == [5, 3] and [t.terminal for t in back] == [False, True]
    for a, b in zip(episodes, back):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.acts, b.acts)
        np.testing.assert_array_equal(a.rews, b.rews)
    # An id already in the root is refused, and the dataset there is left as it was.
    before = sorted(p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file())
    with pytest.raises(ConfigError, match="already exists in the Minari root"):
        save_minari(episodes[:1], "test/round-v0", *env.spaces(), env.id, "hand-made", "one episode")
    assert sorted(p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()) == before
    assert len(open_trajectories("test/round-v0")[0]) == 2


def test_a_minari_id_that_is_not_local_says_where_it_looked_and_how_to_fetch_it(in_root):
    for check in (lambda s: check_source(s, "trajectories.path"), lambda s: open_trajectories(s, "trajectories.path")):
        with pytest.raises(ConfigError) as err:
            check("mujoco/hopper/medium-v0")
        assert err.value.key == "trajectories.path"
        assert str(in_root) in str(err.value) and "minari download mujoco/hopper/medium-v0" in str(err.value)


@pytest.mark.parametrize("dataset", ["rlhp/hopper/medium-replay-v0", "rlhp/walker2d/medium-replay-v0",
                                     "rlhp/mine/replay-v0"])
def test_an_rlhp_dataset_that_is_not_local_is_answered_with_the_command_that_makes_it(in_root, dataset):
    # No server has rlhp's own datasets: `minari download` would fail; rlhp-collect makes them.
    with pytest.raises(ConfigError) as err:
        open_trajectories(dataset, "trajectories.path")
    message = str(err.value)
    assert "minari download" not in message and f"minari_id={dataset}`" in message
    command = message.split("`")[-2]
    assert command == RECIPES.get(dataset, command)
    if dataset in RECIPES:  # the command itself is good: it passes rlhp-collect's checks
        argv = command.split()[1:]
        assert check_command_line(argv, "collect", "rlhp-collect") is None
        validate_collect(composed("collect", argv))


def test_transitions_cut_episodes_at_their_ends_and_relabel_in_one_pass_per_block():
    episodes = [trajectory(3, terminal=True), trajectory(2, offset=10.0)]
    data = Transitions.of([t.__class__(obs=t.obs, acts=np.ones((len(t), 1), np.float32), rews=t.rews,
                                       terminal=t.terminal) for t in episodes])
    np.testing.assert_array_equal(data.obs[:, 0], [0, 1, 2, 10, 11])
    np.testing.assert_array_equal(data.next_obs[:, 0], [1, 2, 3, 11, 12])
    np.testing.assert_array_equal(data.terminals, [0, 0, 1, 0, 0])  # the terminated end only, not the cut one
    np.testing.assert_array_equal(data.episode, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(data.rewards(EnvReward()), [0, 1, 2, 10, 11])
    assert data.return_range(data.rewards(EnvReward())) == 21 - 3


class ActionReward:
    """A reward that pays the action itself, times ``sign``: what the agent learns shows in its actions."""

    reads_env_reward, markovian = False, True

    def __init__(self, sign: float) -> None:
        self.sign = sign

    def agent_reward(self, obs, acts, next_obs, dones, env_rewards, update_stats=True):
        return self.sign * acts[:, 0]

    def relabel(self, obs, acts, next_obs, dones, env_rewards, starts):
        return self.agent_reward(obs, acts, next_obs, dones, env_rewards)


@pytest.mark.parametrize("name", ["IQL", "TD3PlusBC"])
def test_an_offline_agent_learns_the_reward_it_is_paid_not_the_envs(name, tmp_path):
    env = GymEnv("Pendulum-v1", n_envs=2)
    venv = env.make(0)
    venv.action_space.seed(0)
    data = Transitions.of(rollout(venv, random_policy(venv.action_space), 2000))  # actions uniform in [-2, 2]
    means = {}
    for sign in (1.0, -1.0):
        algorithm = OfflineAlgorithm(name, {"hidden_units": [32, 32], "batch_size": 64},
                                     normalize_observations=name == "TD3PlusBC")
        agent = OfflineAgent(algorithm, data, *env.spaces(), ActionReward(sign), seed=0)
        assert agent.train(300).steps == 300
        actions = agent.policy(data.obs[:500])
        assert actions.shape == (500, 1) and np.all(np.abs(actions) <= 2.0 + 1e-5)  # the env's bounds
        # The saved policy, run with NumPy alone, acts as the agent does.
        agent.save(tmp_path)
        np.testing.assert_allclose(saved_policy(tmp_path / "agent.npz")(data.obs[:500]), actions, atol=1e-5)
        means[sign] = float(actions.mean())
    assert means[1.0] > 0.5 and means[-1.0] < -0.5, means


@pytest.mark.parametrize(("offset", "scaling"), [("none", "none"), ("nonnegative", "none"),
                                                 ("none", "return_range"), ("nonnegative", "return_range")])
def test_the_learner_is_paid_the_reward_offset_then_scaled_as_configured(offset, scaling):
    env = GymEnv("Pendulum-v1", n_envs=2)
    venv = env.make(0)
    venv.action_space.seed(0)
    data = Transitions.of(rollout(venv, random_policy(venv.action_space), 1000))
    algorithm = OfflineAlgorithm("IQL", {"hidden_units": [8]}, reward_scaling=scaling, return_range=100.0,
                                 reward_offset=offset)
    paid = OfflineAgent(algorithm, data, *env.spaces(), ActionReward(1.0), seed=0).rewards()
    raw = data.acts[:, 0]  # actions uniform in [-2, 2]: some rewards below 0
    want = raw - raw.min() if offset == "nonnegative" else raw
    if scaling == "return_range":
        want = want * 100.0 / data.return_range(want)
        assert data.return_range(paid) == pytest.approx(100.0, rel=1e-5)
    np.testing.assert_allclose(paid, want, rtol=1e-5, atol=1e-5)
    assert (paid.min() == pytest.approx(0.0, abs=1e-6)) == (offset == "nonnegative")
    # The env's own reward keeps its offset: the ceiling is the same run whatever the setting.
    ceiling = OfflineAgent(algorithm, data, *env.spaces(), EnvReward(), seed=0).rewards()
    want = data.env_rews * (100.0 / data.return_range(data.env_rews)) if scaling == "return_range" else data.env_rews
    np.testing.assert_allclose(ceiling, want, rtol=1e-5, atol=1e-5)


def test_an_unknown_reward_offset_is_refused_naming_it():
    with pytest.raises(ArgumentError, match="^reward_offset must be none or nonnegative"):
        OfflineAlgorithm("IQL", {"hidden_units": [8]}, reward_offset="positive")


def test_an_offline_agent_refuses_discrete_actions():
    env = GymEnv("CartPole-v1")
    with pytest.raises(ConfigError, match="continuous"):
        OfflineAgent(OfflineAlgorithm("IQL", {"hidden_units": [8]}), Transitions.of([trajectory(3)]), *env.spaces(),
                     EnvReward(), seed=0)


def test_transitions_refuse_dict_observations():
    episode = trajectory(2)
    episode.obs = {"a": episode.obs}
    with pytest.raises(DataError, match="flat"):
        Transitions.of([episode])


@pytest.mark.parametrize(("name", "learner", "key"), [
    ("IQN", {"hidden_units": [8]}, "agent.name"),
    ("IQL", {"hidden_units": [8], "expectil": 0.7}, "agent.learner.expectil"),
    ("IQL", {"hidden_units": [8], "expectile": 1.0}, "agent.learner.expectile"),
    ("IQL", {"hidden_units": []}, "agent.learner.hidden_units"),
    ("TD3PlusBC", {"hidden_units": [8], "gamma": 1.5}, "agent.learner.gamma"),
    ("IQL", {"hidden_units": [8], "n_critics": 2**63}, "agent.learner.n_critics"),  # would hang building them
])
def test_an_unknown_algorithm_a_key_it_lacks_or_a_value_outside_its_domain_is_refused_naming_it(name, learner, key):
    env = GymEnv("Pendulum-v1")
    with pytest.raises(ConfigError) as err:
        OfflineAgent(OfflineAlgorithm(name, learner), Transitions.of([trajectory(3)]), *env.spaces(), EnvReward(),
                     seed=0)
    assert err.value.key == key


OFFLINE = ["env=gym", "env.id=Pendulum-v1", "trajectories=dataset", f"trajectories.path={PENDULUM}", "debug=fast",
           "logger=none", "total_timesteps=64", "agent.learner.hidden_units=[32,32]", "agent.learner.batch_size=32"]


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "learning", "net"), [("iql", "preferences", "mujoco"), ("td3bc", "none", "mujoco"),
                                                      ("iql", "preferences", "preference_transformer")])
def test_an_offline_run_trains_on_a_minari_dataset_and_saves_a_policy_numpy_runs(tmp_path, in_root, agent, learning,
                                                                                 net):
    # The learned reward (Markovian or Preference Transformer), or the true one (the ceiling).
    proc = run_cli("rlhp-train", *OFFLINE, f"agent={agent}", f"reward_learning={learning}", f"reward_net={net}",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert "gradient steps after the last round" in proc.stdout or learning == "none"
    run = tmp_path / "run"
    result = json.loads((run / "eval.json").read_text())
    assert np.isfinite(result["true_return_mean"]) and result["episodes"] == 2
    rows = (run / "metrics.csv").read_text().splitlines()
    timesteps = [r.split(",")[rows[0].split(",").index("timesteps")] for r in rows[1:]]
    assert timesteps[-1] == "64" and set(timesteps[:-1]) == {"0"}  # every step in the last round
    act = saved_policy(run / "checkpoints" / "final" / "agent.npz")
    assert act(np.zeros((1, 3), np.float32)).shape == (1, 1)


@pytest.mark.slow
@pytest.mark.parametrize(("net", "moment"), [("mujoco", ("rlhp.agents.offline", "OfflineAgent.train", 1)),
                                             ("preference_transformer", ("rlhp.training", "RewardTrainer.train", 2))],
                         ids=["before_the_agent_trains", "transformer_between_reward_updates"])
def test_an_offline_run_killed_resumes_to_the_same_result(tmp_path, in_root, net, moment):
    overrides = [*OFFLINE, "agent=iql", "seed=4", f"reward_net={net}"]
    whole = tmp_path / "whole"
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={whole}", cwd=tmp_path)
    run = tmp_path / "run"
    killed = run_killed(*moment, *overrides, f"hydra.run.dir={run}", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    # The checkpoint holds the dataset's path and hash, not its episodes or transitions (read again on resume).
    for path in (run / "checkpoints").iterdir():
        source = json.loads((path / "resume.json").read_text())["loop"]["state"]["source"]["state"]
        assert {"path", "digest"} <= set(source) and "trajectories" not in source and "_held_out" not in source
        assert "transitions" not in source["_agent"]["state"]
    assert_loads_in_a_fresh_interpreter(run)
    run_cli("rlhp-train", *overrides, f"hydra.run.dir={run}", cwd=tmp_path)
    assert json.loads((run / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())


def test_an_offline_agent_is_refused_where_an_agent_gathers_its_own_data(tmp_path):
    proc = run_cli("rlhp-train", "env=gym", "env.id=Pendulum-v1", "agent=iql", "debug=fast", "logger=none",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("rlhp-train: config error: config key `agent` (IQL) learns offline, from a fixed "
                                   "dataset: run it with trajectories=dataset trajectories.path=<dataset>, or pick "
                                   "an online agent")


REPLAY = ["expert=sac_pendulum", "replay.keep=true", "expert.total_timesteps=1200",
          "+expert.algorithm.learning_starts=100000", "video.episodes=0"]


@pytest.mark.slow
def test_collect_keeps_the_experts_training_replay_and_writes_it_to_minari_too(tmp_path, in_root):
    whole = tmp_path / "whole"
    run_cli("rlhp-collect", *REPLAY, "minari_id=test/replay-v0", f"hydra.run.dir={whole}", cwd=tmp_path)
    result = json.loads((whole / "collect.json").read_text())
    assert result["episodes_saved"] == 6 and result["steps"] == 1200  # every 200-step episode it trained on
    saved, meta = open_trajectories(str(whole / "dataset"))
    assert meta["collection"]["replay"] is True
    minari, _ = open_trajectories("test/replay-v0")
    for a, b in zip(saved, minari, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.rews, b.rews)
    # The replay ends once the last `window` training episodes average the return asked for.
    early = tmp_path / "early"
    run_cli("rlhp-collect", *REPLAY, "replay.stop_at_return=-100000", "replay.window=2",
            f"hydra.run.dir={early}", cwd=tmp_path)
    assert json.loads((early / "collect.json").read_text())["episodes_saved"] == 2
    # An id already in the root is refused before anything trains.
    refused = tmp_path / "refused"
    proc = run_cli("rlhp-collect", *REPLAY, "minari_id=test/replay-v0", f"hydra.run.dir={refused}", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2 and "already exists in the Minari root" in proc.stderr
    assert not (refused / "expert.zip").exists()


@pytest.mark.parametrize(("overrides", "key"), [
    (["expert=zip", "expert.path=model.zip", "replay.keep=true"], "replay.keep"),
    ([*REPLAY, "ranked.epsilons=[1.0,0.0]"], "replay.keep"),
    ([*REPLAY, "replay.window=0"], "replay.window"),
    ([*REPLAY, "minari_id=not an id"], "minari_id"),
])
def test_collect_refuses_a_replay_it_cannot_keep_in_one_line(tmp_path, overrides, key):
    (tmp_path / "model.zip").write_bytes(b"")  # refused before it is read
    proc = run_cli("rlhp-collect", *overrides, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"rlhp-collect: config error: config key `{key}`"), proc.stderr


@pytest.fixture(scope="module")
def pendulum_folder(tmp_path_factory):
    """Six 200-step Pendulum episodes of a random policy, as an rlhp dataset folder."""
    return random_dataset(tmp_path_factory.mktemp("data") / "pendulum", "Pendulum-v1", episodes=6)


def hand_made_labels(n: int, length: int) -> SegmentLabels:
    """``n`` pairs of ``length``-step segments of :func:`pendulum_folder`'s dataset (1,200 transitions), each inside
    one episode, labelled 1, 0 or 0.5 in turn."""
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 6, (n, 2)) * 200 + rng.integers(0, 200 - length + 1, (n, 2))
    return SegmentLabels(starts, np.resize(np.array([1.0, 0.0, 0.5], np.float32), n), length)


@pytest.mark.parametrize("fmt", ["pt", "uni_rlhf"])
def test_label_files_round_trip_through_a_run_and_its_export(tmp_path, pendulum_folder, fmt):
    made = hand_made_labels(12, 20)
    write_label_files(made, tmp_path / "given", fmt, env="Pendulum-v1")
    read = read_label_files(tmp_path / "given", fmt)
    np.testing.assert_array_equal(read.starts, made.starts)
    np.testing.assert_array_equal(read.labels, made.labels)
    assert read.length == 20
    # A run learns from the file's pairs and labels (12 over its rounds), and exports them as it was given them.
    run = tmp_path / "run"
    run_cli("rlhp-train", "env=gym", "env.id=Pendulum-v1", "trajectories=dataset",
            f"trajectories.path={pendulum_folder}", "fragmenter=label_file", "gatherer=label_file",
            f"fragmenter.path={tmp_path / 'given'}", f"fragmenter.format={fmt}", "total_comparisons=12",
            "fragment_length=20", "debug=fast", "logger=none", f"hydra.run.dir={run}", cwd=tmp_path)
    state = json.loads((run / "checkpoints" / "final" / "state.json").read_text())
    assert state["comparisons"] == 12  # every pair, ties too
    proc = run_cli("rlhp-annotate", str(run), "--export", str(tmp_path / "out"), "--format", fmt, cwd=tmp_path)
    assert proc.stdout.strip() == f"labels written to {tmp_path / 'out'}"
    out = read_label_files(tmp_path / "out", fmt)
    np.testing.assert_array_equal(out.starts, made.starts)
    np.testing.assert_array_equal(out.labels, made.labels)


def test_label_files_that_do_not_fit_the_dataset_are_refused_in_one_line(tmp_path, pendulum_folder):
    write_label_files(SegmentLabels(np.array([[0, 190]]), np.ones(1, np.float32), 20), tmp_path / "late", "pt")
    proc = run_cli("rlhp-train", "env=gym", "env.id=Pendulum-v1", "trajectories=dataset",
                   f"trajectories.path={pendulum_folder}", "fragmenter=label_file", "gatherer=label_file",
                   f"fragmenter.path={tmp_path / 'late'}", "total_comparisons=1", "fragment_length=20", "debug=fast",
                   "logger=none", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "runs past its episode's end" in proc.stderr
    write_label_files(hand_made_labels(3, 20), tmp_path / "given", "pt")
    proc = run_cli("rlhp-train", "env=gym", "env.id=Pendulum-v1", "trajectories=dataset",
                   f"trajectories.path={pendulum_folder}", "fragmenter=label_file", "gatherer=label_file",
                   f"fragmenter.path={tmp_path / 'given'}", "total_comparisons=3", "fragment_length=10", "debug=fast",
                   "logger=none", f"hydra.run.dir={tmp_path / 'short'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "config key `fragment_length` is 10, but the label file's segments are 20" \
        in proc.stderr


def test_behavioural_cloning_first_is_refused_for_an_offline_agent(tmp_path, in_root, pendulum_folder):
    proc = run_cli("rlhp-train", *OFFLINE, "agent=iql", "pretrain=bc", f"pretrain.path={pendulum_folder}",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("rlhp-train: config error: config key `pretrain` clones into a stable-baselines3")


def test_the_one_minute_path_runs_on_the_dataset_shipped_in_the_package(tmp_path):
    # No Minari root, no dataset of one's own: the experiment reads the replay inside the package.
    proc = run_cli("rlhp-train", "experiment=offline/pendulum", "logger=none", "total_timesteps=64",
                   "evaluation.episodes=1", "agent.learner.hidden_units=[16]", f"hydra.run.dir={tmp_path / 'run'}",
                   cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "overlap" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    result = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert result["episodes"] == 1 and result["reward_correlation"] > 0.5
    config = (tmp_path / "run" / ".hydra" / "config.yaml").read_text()
    assert "${rlhp.sample:pendulum-medium-replay}" in config  # found wherever the package is installed


def test_compiled_programs_are_kept_between_commands_and_change_no_figure(tmp_path, monkeypatch):
    # JAX's persistent cache, in the user's cache folder: the second command loads what the first compiled, and
    # trains to the same bytes.
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tiny = ["experiment=offline/pendulum", "logger=none", "total_timesteps=64", "evaluation.episodes=1",
            "agent.learner.hidden_units=[16]"]
    for name in ("first", "second"):
        run_cli("rlhp-train", *tiny, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        if name == "first":
            kept = {p.name for p in (tmp_path / "rlhp" / "jax").glob("*-cache")}
            assert any(n.startswith("jit__steps") for n in kept), sorted(kept)[:5]
    assert (tmp_path / "first" / "eval.json").read_bytes() == (tmp_path / "second" / "eval.json").read_bytes()
    assert {p.name for p in (tmp_path / "rlhp" / "jax").glob("*-cache")} == kept  # nothing compiled twice
