"""T-REX and behavioural cloning: ranks survive loading, fragments keep where they came from, the
ranking and snippet rules, and both entry points with tiny budgets."""

import csv
import json

import numpy as np
import pytest
import torch
from helpers import FAST, run_cli, trajectory
from stable_baselines3 import PPO

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import PreferenceDataset, save_trajectories, trajectories_to_dataset
from rlhp.data.hub import open_trajectories
from rlhp.demos.bc import BehaviourCloning
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.errors import ArgumentError
from rlhp.feedback import Querent, RankedGatherer
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.sources import DatasetSource


def ranked(ranks: list[float | None], length: int = 30) -> list:
    trajs = [trajectory(length, offset=100 * i) for i in range(len(ranks))]
    for i, (t, r) in enumerate(zip(trajs, ranks)):
        t.rank, t.episode = r, i
    return trajs


def test_ranks_and_rows_survive_a_saved_dataset(tmp_path):
    trajs = [trajectory(5), trajectory(7, offset=3), trajectory(4, offset=9)]
    trajectories_to_dataset(trajs, columns={"rank": [2, 0, 1]}).save_to_disk(str(tmp_path / "d"))
    got, _ = open_trajectories(tmp_path / "d")
    assert [t.rank for t in got] == [2, 0, 1] and [t.episode for t in got] == [0, 1, 2]
    save_trajectories(trajs, tmp_path / "plain")
    assert [t.rank for t in open_trajectories(tmp_path / "plain")[0]] == [None] * 3


def test_fragments_keep_their_episode_start_and_quality_through_a_saved_dataset(tmp_path):
    trajs = ranked([0, 1, 2])
    pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(trajs, 6, 40)
    for p in range(len(pairs)):
        for side in (0, 1):
            t = trajs[pairs.episode[p, side]]
            np.testing.assert_array_equal(pairs.obs[p, side], t.obs[pairs.start[p, side]:pairs.start[p, side] + 6])
            assert pairs.quality[p, side] == t.rank
    ds = PreferenceDataset()
    ds.push(pairs, np.full(40, 0.5, np.float32), np.arange(40))
    ds.save(tmp_path / "prefs")
    back = PreferenceDataset.load(tmp_path / "prefs").pairs
    for name in ("episode", "start", "quality"):
        np.testing.assert_array_equal(getattr(back, name), getattr(pairs, name))


def test_without_ranks_the_quality_is_the_episode_return():
    trajs = ranked([None, None])
    pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(trajs, 5, 10)
    returns = np.array([t.rews.sum() for t in trajs])
    np.testing.assert_allclose(pairs.quality, returns[pairs.episode])


def test_rank_by_return_ranks_a_ranked_dataset_by_its_episodes_returns(tmp_path):
    env = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=2)
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    episodes = rollout(venv, random_policy(venv.action_space), episodes=6)
    returns = np.array([t.rews.sum() for t in episodes])
    assert len(set(returns)) > 1
    # Ranks that run against the returns, so the two rules disagree on every pair they do not tie.
    trajectories_to_dataset(episodes, columns={"rank": (-returns).tolist()}).save_to_disk(str(tmp_path / "d"))
    for rank_by, quality in (("rank", -returns), ("return", returns)):
        source = DatasetSource(str(tmp_path / "d"), env, np.random.default_rng(0), held_out_frac=0.0, rank_by=rank_by)
        pairs = RandomFragmenter(np.random.default_rng(0), warning_threshold=0)(source.sample(10_000), 20, 50)
        np.testing.assert_array_equal(pairs.quality, quality[pairs.episode])
        _, labels = RankedGatherer().answer(pairs, np.arange(50))
        assert labels.dtype == np.float32
        first, second = quality[pairs.episode].T
        np.testing.assert_array_equal(labels, 0.5 * (1 + np.sign(first - second)))
    with pytest.raises(ArgumentError, match="rank_by must be rank or return"):
        DatasetSource(str(tmp_path / "d"), env, np.random.default_rng(0), rank_by="returns")


def test_the_better_ranked_fragment_is_preferred_and_equal_ranks_tie():
    trajs = ranked([0, 2, 2, 1])
    pairs = RandomFragmenter(np.random.default_rng(1), warning_threshold=0)(trajs, 5, 200)
    gatherer = RankedGatherer()
    gatherer.add(pairs, Querent()(pairs))
    answers = gatherer()
    answered, labels = answers.pairs, answers.labels
    first, second = answered.quality[:, 0], answered.quality[:, 1]
    np.testing.assert_array_equal(labels[first > second], 1.0)
    np.testing.assert_array_equal(labels[first < second], 0.0)
    np.testing.assert_array_equal(labels[first == second], 0.5)
    assert {0.0, 0.5, 1.0} == set(labels.tolist())


def test_the_snippet_rule_starts_the_better_fragment_no_earlier():
    trajs = ranked([0, 1, 2, 3], length=60)
    free = RandomFragmenter(np.random.default_rng(2), warning_threshold=0)(trajs, 10, 500)
    rule = RandomFragmenter(np.random.default_rng(2), warning_threshold=0, snippet_rule=True)(trajs, 10, 500)
    def better_starts_later(pairs):
        differ = pairs.quality[:, 0] != pairs.quality[:, 1]
        better = np.argmax(pairs.quality, axis=1)
        rows = np.flatnonzero(differ)
        return pairs.start[rows, better[rows]] >= pairs.start[rows, 1 - better[rows]]
    assert better_starts_later(rule).all() and not better_starts_later(free).all()
    # The fragments still are the episodes' own steps at those starts.
    for p in range(0, 500, 50):
        for side in (0, 1):
            t = trajs[rule.episode[p, side]]
            np.testing.assert_array_equal(rule.obs[p, side], t.obs[rule.start[p, side]:rule.start[p, side] + 10])


def test_max_start_keeps_fragments_at_the_start_of_their_episodes_also_under_the_snippet_rule():
    trajs = ranked([0, 1, 2, 3], length=60)
    free = RandomFragmenter(np.random.default_rng(3), warning_threshold=0)(trajs, 10, 300)
    assert free.start.max() > 5
    for rule in (False, True):
        pairs = RandomFragmenter(np.random.default_rng(3), warning_threshold=0, snippet_rule=rule,
                                 max_start=5)(trajs, 10, 300)
        assert pairs.start.max() == 5 and pairs.start.min() == 0
        np.testing.assert_array_equal(pairs.obs[..., 0, 0], 100 * pairs.episode + pairs.start)
    with pytest.raises(ValueError, match="max_start"):
        RandomFragmenter(np.random.default_rng(0), max_start=-1)


def test_the_overlap_warning_counts_only_the_transitions_max_start_can_reach(caplog):
    trajs = ranked([0, 1, 2, 3], length=60)  # 240 transitions; 2 pairs of 10 need 40
    RandomFragmenter(np.random.default_rng(0), warning_threshold=5)(trajs, 10, 2)
    assert "will overlap" not in caplog.text
    RandomFragmenter(np.random.default_rng(0), warning_threshold=5, max_start=0)(trajs, 10, 2)
    assert "only 40 transitions for 2 fragment pairs" in caplog.text


@pytest.mark.slow
def test_trex_and_behavioural_cloning_run_from_a_ranked_collection(tmp_path):
    demos = tmp_path / "demos"
    run_cli("rlhp-collect", "episodes=4", "n_envs=2", "video.episodes=0", "min_mean_return=null",
            "expert.total_timesteps=1024", "expert.env.n_envs=2", "expert.algorithm.n_steps=64",
            "expert.algorithm.batch_size=64", "expert.algorithm.n_epochs=2", "ranked.epsilons=[1.0,0.5,0.0]",
            f"hydra.run.dir={demos}", cwd=tmp_path)
    trex = tmp_path / "trex"
    run_cli("rlhp-train", *FAST, "gatherer=ranked", "trajectories=demos", f"trajectories.path={demos / 'dataset'}",
            "fragmenter.snippet_rule=true", f"hydra.run.dir={trex}", cwd=tmp_path)
    prefs = PreferenceDataset.load(trex / "checkpoints" / "final" / "preferences")
    quality = prefs.pairs.quality
    np.testing.assert_array_equal(prefs.labels, 0.5 * (1 + np.sign(quality[:, 0] - quality[:, 1])))
    assert set(np.unique(quality)) <= {0, 1, 2} and (trex / "checkpoints" / "final" / "agent.zip").exists()
    # Mixed with synthetic labels on the agent's fragments, and offline: every label before the agent trains.
    mixed = tmp_path / "mixed"
    run_cli("rlhp-train", *FAST, "gatherer=mixed", "trajectories=demos", f"trajectories.path={demos / 'dataset'}",
            "trajectories.agent_frac=0.5", "initial_comparison_frac=1.0", f"hydra.run.dir={mixed}", cwd=tmp_path)
    prefs = PreferenceDataset.load(mixed / "checkpoints" / "final" / "preferences")
    from_demos = (prefs.pairs.episode >= 0).all(axis=1)
    assert from_demos.any() and (~from_demos).any()
    rows = list(csv.DictReader((mixed / "metrics.csv").open()))
    assert len(rows) > 1 and {int(r["comparisons"]) for r in rows} == {len(prefs)}
    bc = tmp_path / "bc"
    proc = run_cli("rlhp-train", *FAST, "pretrain=bc", f"pretrain.path={demos / 'dataset'}", "pretrain.epochs=2",
                   f"hydra.run.dir={bc}", cwd=tmp_path)
    result = json.loads((bc / "pretrain.json").read_text())
    assert result["bc_transitions"] == 12 * 500 and result["bc_loss"] > 0 and "behavioural cloning: loss" in proc.stdout
    refused = run_cli("rlhp-train", *FAST, "agent=dqn", "pretrain=bc", f"pretrain.path={demos / 'dataset'}",
                      f"hydra.run.dir={tmp_path / 'dqn'}", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "behavioural cloning needs an actor-critic agent" in refused.stderr
    alone = tmp_path / "bc-alone"
    proc = run_cli("rlhp-bc", f"pretrain.path={demos / 'dataset'}", "pretrain.epochs=2", "evaluation.episodes=2",
                   f"hydra.run.dir={alone}", cwd=tmp_path)
    result = json.loads((alone / "eval.json").read_text())
    assert result["bc_transitions"] == 12 * 500 and result["bc_episodes"] == 2 and (alone / "agent.zip").is_file()
    assert PPO.load(alone / "agent.zip").policy is not None and "true return" in proc.stdout
    missing = run_cli("rlhp-bc", f"hydra.run.dir={tmp_path / 'none'}", cwd=tmp_path, check=False)
    assert missing.returncode == 2 and "`pretrain.path` is required" in missing.stderr


def test_behavioural_cloning_raises_the_likelihood_of_the_demonstrated_actions(tmp_path):
    venv = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=2).make(seed=0)
    always_left = rollout(venv, lambda obs: np.zeros(len(obs), dtype=np.int64), episodes=2)
    save_trajectories(always_left, tmp_path / "demos")
    agent = PPO("MlpPolicy", venv, seed=0, device="cpu")
    obs = torch.as_tensor(np.concatenate([t.obs[:-1] for t in always_left]))
    before = agent.policy.evaluate_actions(obs, torch.zeros(len(obs)))[1].mean().item()
    result = BehaviourCloning(str(tmp_path / "demos"), epochs=20)(agent, seed=0)
    after = agent.policy.evaluate_actions(obs, torch.zeros(len(obs)))[1].mean().item()
    assert before < np.log(0.6) and after > np.log(0.9) and result["bc_transitions"] == 1000
