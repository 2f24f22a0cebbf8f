"""B-Pref's protocol as experiments: each task at the anchors' label budget, with B-Pref's rhythm of queries, and
the published methods as options on top."""

import pytest
from helpers import composed

from rlhp.agents.hybrid_replay import HybridReplayBuffer
from rlhp.experiment.compose import compose
from rlhp.experiment.config import build
from rlhp.loop.pools import RecentEpisodes
from rlhp.loop.schedules import comparison_schedule

# task: (env id, labels, agent steps, steps between reward updates, labels an update): the five tasks of the
# headline from PPE's Tables 1 and 10 (rlhp/experiment/protocols.py), the rest from B-Pref's and QPA's scripts.
TASKS = {
    "walker_walk": ("walker-walk", 100, 500_000, 20_000, 10),
    "cheetah_run": ("cheetah-run", 100, 1_000_000, 20_000, 10),
    "quadruped_walk": ("quadruped-walk", 1_000, 500_000, 20_000, 100),
    "humanoid_stand": ("humanoid-stand", 10_000, 2_000_000, 5_000, 50),
    "drawer_open": ("drawer-open-v3", 4_000, 1_000_000, 5_000, 50),
    "door_open": ("door-open-v3", 3_000, 1_000_000, 5_000, 30),
    "sweep_into": ("sweep-into-v3", 10_000, 1_000_000, 5_000, 50),
    "button_press": ("button-press-v3", 2_000, 1_000_000, 5_000, 25),
    "window_open": ("window-open-v3", 400, 500_000, 5_000, 10),
    "hammer": ("hammer-v3", 10_000, 1_000_000, 5_000, 50),
}


@pytest.mark.parametrize("task", TASKS)
def test_each_task_queries_its_budget_in_b_prefs_batches_then_stops(task):
    env_id, labels, steps, interval, batch = TASKS[task]
    cfg = composed("train", [f"experiment=bpref/{task}"])
    assert cfg.env.id == env_id and cfg.total_timesteps == steps
    assert steps / cfg.num_rounds == interval  # a round, and a reward update, every `interval` steps
    plan = comparison_schedule(cfg.total_comparisons, cfg.initial_comparison_frac, cfg.num_rounds,
                               build(cfg.query_schedule))
    rounds = labels // batch
    assert plan == [batch] * rounds + [0] * (len(plan) - rounds)
    # A round samples the steps it trained, so the window of the last 100 episodes holds every episode.
    assert cfg.transition_oversampling * 2 * batch * cfg.fragment_length == pytest.approx(interval)
    assert (cfg.fragment_length, cfg.trajectories.unsupervised_steps, cfg.query_pool.episodes) == (50, 9_000, 100)
    assert cfg.fragmenter.fragment_sample_factor == 10 and cfg.fragmenter.uncertainty_on == "probability"
    assert cfg.gatherer.temperature == 0  # B-Pref's oracle: the larger return wins


@pytest.mark.parametrize("method", ["pebble", "surf", "rune", "qpa", "qpa_dmc", "qpa_metaworld", "entropy", "filter",
                                    "rime"])
def test_every_method_composes_on_a_task_and_changes_only_its_own_parts(method):
    base = composed("train", ["experiment=bpref/walker_walk"])
    cfg = composed("train", ["experiment=bpref/walker_walk", f"method={method}"])
    changed = {k for k in set(base) | set(cfg) if base.get(k) != cfg.get(k)}
    expected = {"pebble": set(), "surf": {"reward_trainer"}, "rune": {"reward_net"},
                "qpa": {"fragmenter", "reward_trainer", "query_pool", "reward_net", "agent"},
                "qpa_dmc": {"fragmenter", "reward_trainer", "query_pool", "reward_net", "agent"},
                "qpa_metaworld": {"fragmenter", "reward_trainer", "query_pool", "reward_net", "agent"},
                "entropy": {"fragmenter"}, "filter": {"reward_trainer"}, "rime": {"reward_trainer"}}[method]
    assert changed == expected
    if method == "qpa":
        assert cfg.query_pool.episodes == 10 and cfg.agent.replay_buffer_kwargs.recent_frac == 0.5
    if method == "qpa_dmc":  # QPA's DMC reward update: 20 crops of 35-45 steps a pair, up to 2,000 passes
        assert cfg.query_pool == composed("train", ["experiment=bpref/walker_walk", "method=qpa"]).query_pool
        crop, fit = cfg.reward_trainer.crop, cfg.reward_trainer
        assert (crop.min_shorten, crop.max_shorten, crop.copies, cfg.fragment_length) == (5, 15, 20, 50)
        assert (cfg.reward_net.output, fit.epochs, fit.stop_accuracy, cfg.reward_net.members) == ("tanh", 2000, 0.98, 1)
    if method == "qpa_metaworld":  # QPA's Meta-World scripts: a 30-episode window for queries and replay alike
        assert cfg.reward_net.members == 1 and cfg.reward_trainer.crop._target_.endswith("TemporalCrop")
        assert cfg.agent.replay_buffer_kwargs.recent_steps == cfg.query_pool.episodes * 500 == 15_000
        fit = cfg.reward_trainer
        assert (cfg.reward_net.output, fit.epochs, fit.stop_accuracy, fit.bootstrap) == ("tanh", 200, 0.97, False)


def test_qpa_builds_its_window_and_its_hybrid_replay_into_sbx_sac_and_trains(tmp_path):
    pytest.importorskip("dm_control")
    pytest.importorskip("sbx")
    loop = compose(composed("train", ["experiment=bpref/walker_walk", "method=qpa", "debug=fast",
                                      "agent.learning_starts=100", "agent.replay_buffer_kwargs.recent_steps=50"]),
                   tmp_path)
    pool, agent = loop.reward_learning.pool, loop.agent
    assert isinstance(pool, RecentEpisodes) and pool.window.maxlen == 10
    buffer = agent.algorithm.replay_buffer
    assert type(buffer) is HybridReplayBuffer and (buffer.recent_frac, buffer.recent_steps) == (0.5, 50)
    assert agent.train(300).steps == 300  # SBX's SAC trains on the hybrid batches
