"""Ranking mode (``querent.mode=rank``): binary insertion, the store's comparisons and implied pairs, undo, expiry,
the querent, the API and a run labelled by ranking."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
from pathlib import Path

import imageio.v3
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from helpers import random_pairs, run_cli, saved_state, spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from omegaconf import OmegaConf
from scipy.stats import spearmanr
from test_clips import cartpole_pairs

from rlhp.data import PreferenceDataset, RankedClips
from rlhp.errors import ArgumentError
from rlhp.human.querent import WebQuerent
from rlhp.human.ranking import Compare, Join, Open, next_step
from rlhp.human.schema import QueryError
from rlhp.human.server.answers import AnswerStore
from rlhp.human.server.app import create_app
from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.human.store import QueryStore
from rlhp.rewards import RewardNet
from rlhp.runs import RunFolder
from rlhp.training import RewardTrainer
from rlhp.training.rankings import plackett_luce_loss, ranking_concordance


def insert(order: list[int], value: float, values: dict[int, float]) -> tuple[list[int], int, int | None]:
    """Place ``value`` into ``order`` (group ids, worst first; ``values`` each group's value) by asking
    :func:`next_step`: the new order, the comparisons it took and the group it joined (None: it opened one)."""
    answers: list[tuple[int, float]] = []
    while True:
        step = next_step(order, answers)
        if isinstance(step, Compare):
            theirs = values[step.group]
            answers.append((step.group, 0.5 * (1 + np.sign(value - theirs))))
        elif isinstance(step, Join):
            return order, len(answers), step.group
        else:
            group = len(values)
            values[group] = value
            return [*order[:step.position], group, *order[step.position:]], len(answers), None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40))
def test_binary_insertion_sorts_with_ties_in_at_most_log2_comparisons_a_clip(values):
    order: list[int] = []
    groups: dict[int, float] = {}
    for value in values:
        before, seen = len(order), value in groups.values()
        order, asked, joined = insert(order, value, groups)
        assert asked <= math.ceil(math.log2(before + 1))
        assert (joined is not None) == seen  # an equal clip joins its group, any other opens one
    ranked = [groups[g] for g in order]
    assert ranked == sorted(set(values))  # one group per distinct value, worst first


def test_a_bound_from_a_group_that_is_gone_is_passed_over_and_new_groups_between_are_candidates():
    assert next_step([], []) == Open(0)
    assert next_step([5, 6, 7], [(6, 1.0)]) == Compare(7)
    assert next_step([5, 6, 7], [(6, 1.0), (7, 0.0)]) == Open(2)
    assert next_step([5, 7], [(6, 1.0)]) == Compare(7)  # 6 was emptied by an undo: the bound is looser
    assert next_step([5, 6, 8, 7], [(6, 1.0), (7, 0.0)]) == Compare(8)  # someone opened 8 meanwhile
    assert next_step([5, 6, 7], [(6, 1.0), (7, 0.5)]) == Join(7)


def chosen_in_turn(returns: list[float], levels: list[int]) -> float:
    """-log P(ranking) under Plackett-Luce, clip by clip: the best remaining clip is drawn from all that remain (a tied
    level's clips each from the clips at that level or below, Breslow's way)."""
    left = sorted(zip(levels, returns, strict=True), reverse=True)
    total = 0.0
    while left:
        level = left[0][0]
        tied = [r for lv, r in left if lv == level]
        pool = math.log(sum(math.exp(r) for _, r in left))
        total += sum(pool - r for r in tied)
        left = [(lv, r) for lv, r in left if lv != level]
    return total


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(-20, 20), st.integers(0, 4)), min_size=1, max_size=9), st.floats(-50, 50))
def test_a_ranking_costs_each_clip_its_choice_among_those_at_or_below_it_whatever_the_returns_offset(clips, offset):
    returns, levels = (list(v) for v in zip(*clips, strict=True))
    loss = plackett_luce_loss(torch.tensor(returns, dtype=torch.float64), torch.tensor(levels))
    assert (loss >= 0).all()
    assert float(loss.sum()) == pytest.approx(chosen_in_turn(returns, levels), rel=1e-9, abs=1e-9)
    shifted = plackett_luce_loss(torch.tensor(returns, dtype=torch.float64) + offset, torch.tensor(levels))
    np.testing.assert_allclose(shifted.numpy(), loss.numpy(), atol=1e-9)  # only differences of returns count


def test_two_clips_ranked_are_a_bradley_terry_pair_and_a_tie_pulls_their_returns_together():
    returns = torch.tensor([1.5, -0.5], requires_grad=True)
    loss = plackett_luce_loss(returns, torch.tensor([1, 0]))
    np.testing.assert_allclose(loss.detach().numpy(), [-math.log(torch.sigmoid(torch.tensor(2.0))), 0.0], rtol=1e-6)
    tied = torch.tensor([1.5, -0.5], requires_grad=True)
    plackett_luce_loss(tied, torch.tensor([0, 0])).sum().backward()
    assert tied.grad[0] > 0 > tied.grad[1]  # descending lowers the higher return and raises the lower one
    right, compared = ranking_concordance(torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[2, 0, 0]]))
    assert (right.tolist(), compared.tolist()) == ([2], [2])  # the tie is not compared


def clips_ranked_by_return(n: int, seed: int = 0) -> tuple[RankedClips, np.ndarray]:
    """``n`` random 5-step clips at the levels of their true returns, rounded (so some tie)."""
    pairs = random_pairs(n, seed=seed)
    clips = pairs[np.arange(n)]
    clips = type(clips).from_columns({k: v[:, :1] for k, v in clips.columns().items()}, clips.frame_stack)
    returns = clips.rews[:, 0].sum(-1)
    ranking = RankedClips()
    ranking.push(clips, np.unique(np.round(returns), return_inverse=True)[1].astype(np.float32), np.arange(n))
    return ranking, returns


def test_a_reward_learned_from_a_ranking_alone_orders_clips_as_their_true_returns_do():
    ranking, _ = clips_ranked_by_return(300)
    obs, acts = spaces()
    net = RewardNet(obs, acts, hidden_sizes=[32], members=2)
    metrics = RewardTrainer(net, np.random.default_rng(0), epochs=1, lr=3e-3).train(PreferenceDataset(),
                                                                                      ranking=ranking)
    assert metrics["ranking_accuracy"] > 0.8 and metrics["ranking_loss"] > 0
    held, returns = clips_ranked_by_return(200, seed=1)
    with torch.no_grad():
        learned = net.returns(net.encode(*held.pairs.tensors()), 1.0).mean(0)[:, 0].numpy()
    assert spearmanr(learned, returns).statistic > 0.9


def test_ranked_clips_hold_one_fragment_a_row_at_whole_levels(tmp_path):
    ranking, _ = clips_ranked_by_return(10)
    for pairs, levels in ((ranking.pairs[:1], [0.5]), (ranking.pairs[:1], [-1.0]), (random_pairs(1), [0.0])):
        with pytest.raises(ValueError):
            ranking.push(pairs, np.array(levels, np.float32), np.array([99]))
    assert len(ranking) == 10


def test_the_ranking_in_training_holds_the_clips_of_pairs_taken_at_their_levels_as_the_ranking_now_stands(tmp_path):
    store, returns = ranked_store(tmp_path)
    assert not len(store.ranking_in_training())  # nothing placed yet
    place_all(store)
    assert not len(store.ranking_in_training())  # placed, not taken
    store.take(store.open_ids(), 0)
    first = store.ranking_in_training()
    assert first.ids.tolist() == list(range(12))
    np.testing.assert_array_equal(first.labels, np.unique(returns, return_inverse=True)[1])
    np.testing.assert_array_equal(first.pairs.rews[:, 0].sum(-1), returns)  # each clip's own fragment
    more = random_pairs(1, seed=7)
    more.rews[:] = returns.max() + 1  # a clip above every other, and its pair's twin
    store.publish_clips(np.array([6]), 1, more, "Keep it up")
    place_all(store)
    assert len(store.ranking_in_training()) == 12  # placed, not yet taken
    store.take(store.open_ids(), 1)
    now = store.ranking_in_training()
    assert now.ids.tolist() == list(range(14)) and now.labels[12] == now.labels[13] == now.labels.max()
    np.testing.assert_array_equal(now.labels[:12], first.labels)


def returns_label(pairs) -> str:
    left, right = pairs.rews[0].sum(-1)
    return "equal" if left == right else "left" if left > right else "right"


def place_all(store: QueryStore, people=("alice",)) -> int:
    """Answer every comparison from the fragments' true returns, people taking turns; return how many."""
    desk = AnswerStore(store.path)
    asked = 0
    while True:
        leased = [(who, desk.lease_next(who, 60)) for who in people]
        leased = [(who, q) for who, q in leased if q is not None]
        if not leased:
            return asked
        for who, query in leased:
            assert query.placing
            desk.answer(query.id, who, returns_label(store.pairs(np.array([query.id]))))
            asked += 1


def ranked_store(tmp_path, n: int = 6, seed: int = 1) -> tuple[QueryStore, np.ndarray]:
    pairs = random_pairs(n, seed=seed)
    pairs.rews[:] = np.round(pairs.rews * 2) / 2  # ties among the fragments' returns
    store = QueryStore(tmp_path / "queries.sqlite")
    store.publish_clips(np.arange(n), 0, pairs, "Keep it up")
    return store, pairs.rews.sum(-1).ravel()


@pytest.mark.parametrize("people", [("alice",), ("alice", "bob")])
def test_every_clip_is_placed_and_each_pair_the_ranking_implies_is_a_label_its_returns_agree_with(tmp_path, people):
    store, returns = ranked_store(tmp_path)
    desk = AnswerStore(store.path)
    asked = place_all(store, people)
    status = desk.status()
    assert status["ranked_clips"] == 12 and status["ranking_groups"] == len(set(returns))
    assert asked == status["answers"] < 12 * math.ceil(math.log2(13))
    # The status tells the comparisons people answered from the pairs the ranking implied.
    assert (status["answered"], status["implied"], status["in_training"]) == (asked, 12 * 11 // 2, 0)
    ids = store.open_ids()
    taken = store.take(ids, 0)
    assert taken.done.all() and len(ids) == 12 * 11 // 2  # one label for each two clips ranked
    assert (desk.status()["answered"], desk.status()["in_training"]) == (asked, 12 * 11 // 2)
    got = store.pairs(ids).rews.sum(-1)
    np.testing.assert_array_equal(taken.labels, 0.5 * (1 + np.sign(got[:, 0] - got[:, 1])))
    assert set(taken.annotators) <= set(people) | {""}  # the first clip opened the ranking with nobody asked
    ranking = desk.ranking()
    by_clip = {f"clip{c:06d}.mp4": r for c, r in enumerate(returns)}
    assert [sorted({by_clip[m] for m in group}) for group in ranking] == [[r] for r in sorted(set(returns))]
    instructions = desk.instructions(ids)
    assert set(instructions) == {"Keep it up"}


def pending_step(store: QueryStore, clip: int | None = None) -> tuple[int, int]:
    """The (id, clip) of a comparison waiting for an answer (of ``clip``'s, when given)."""
    with sqlite3.connect(store.path) as db:
        return db.execute("SELECT id, clip FROM queries WHERE kind = 'step' AND state = 'pending' AND "
                          "coalesce(clip = ?, 1) ORDER BY id DESC", (clip,)).fetchone()


def test_undo_takes_back_the_comparison_an_answer_led_to_and_the_clip_is_placed_by_the_new_answer(tmp_path):
    pairs = random_pairs(2, seed=0)
    pairs.rews[:] = np.array([[[0.0], [1.0]], [[2.0], [3.0]]])  # clips 0..3 worth 0, 1, 2, 3
    store = QueryStore(tmp_path / "queries.sqlite")
    desk = AnswerStore(store.path)
    store.publish_clips(np.arange(2), 0, pairs, "")
    # Clip 0 opened the ranking; 1, 2 and 3 each wait for a comparison with it.
    first = desk.lease_next("alice", 60)
    desk.answer(first.id, "alice", "right")  # the newest, clip 3, wrongly called worse than clip 0
    assert desk.status()["ranked_clips"] == 2
    again = desk.undo("alice", 60)
    assert again.id == first.id and again.placing and desk.status()["ranked_clips"] == 1
    assert store.take(store.open_ids(), 0).done.sum() == 0  # the pair it implied is gone with it
    desk.answer(first.id, "alice", "left")
    place_all(store)
    assert desk.ranking() == [[f"clip{c:06d}.mp4"] for c in range(4)]


def test_undoing_a_placement_takes_back_every_pair_it_implied_and_the_ranking_closes_the_gap(tmp_path):
    pairs = random_pairs(2, seed=0)
    pairs.rews[:] = np.array([[[5.0], [9.0]], [[7.0], [1.0]]])  # clips 0..3 worth 5, 9, 7 and 1 a step
    store = QueryStore(tmp_path / "queries.sqlite")
    desk = AnswerStore(store.path)
    store.publish_clips(np.arange(2), 0, pairs, "")  # clip 0 opens the ranking
    desk.answer(desk.lease_next("alice", 60).id, "alice", "right")  # clip 3 is worse than clip 0
    desk.answer(desk.lease_next("bob", 60).id, "bob", "left")  # clip 2 is better
    assert desk.ranking() == [["clip000003.mp4"], ["clip000000.mp4"], ["clip000002.mp4"]]
    again = desk.undo("alice", 60)  # clip 3 leaves, with its pair against clip 0 and clip 2's against it
    assert desk.ranking() == [["clip000000.mp4"], ["clip000002.mp4"]]
    ids = store.open_ids()
    taken = store.take(ids, 0)
    assert taken.labels.tolist() == [1.0] and store.pairs(ids[taken.done]).rews[..., 0].tolist() == [[7.0, 5.0]]
    desk.answer(again.id, "alice", "right")
    place_all(store)  # clip 1, the best, placed from its return above them all
    assert desk.ranking() == [[f"clip{c:06d}.mp4"] for c in (3, 0, 2, 1)]


def test_undo_mid_placement_withdraws_the_next_comparison_even_from_whoever_holds_it(tmp_path):
    store, _ = ranked_store(tmp_path, n=8)
    desk = AnswerStore(store.path)
    place_all(store)
    pairs = random_pairs(1, seed=9)
    pairs.rews[:] = 100.0  # better than every clip: placed after several comparisons
    store.publish_clips(np.array([8]), 1, pairs, "")
    step = desk.lease_next("alice", 60)
    _, clip = pending_step(store)
    desk.answer(step.id, "alice", "left")
    follow, _ = pending_step(store, clip)
    assert desk.lease_next("bob", 60).id == follow  # the newest comparison
    desk.undo("alice", 60)
    with pytest.raises(QueryError, match="no query"):
        desk.answer(follow, "bob", "left")  # bob's comparison was taken back: nothing is recorded
    assert pending_step(store, clip) == (step.id, clip)


def test_an_undo_is_refused_once_a_later_comparison_of_the_clip_or_its_implied_pairs_are_settled(tmp_path):
    store, _ = ranked_store(tmp_path, n=8)
    desk = AnswerStore(store.path)
    place_all(store)
    pairs = random_pairs(1, seed=9)
    pairs.rews[:] = 100.0
    store.publish_clips(np.array([8]), 1, pairs, "")
    desk.answer(desk.lease_next("alice", 60).id, "alice", "left")
    desk.answer(desk.lease_next("bob", 60).id, "bob", "left")
    with pytest.raises(QueryError, match="compared again since"):
        desk.undo("alice", 60)
    place_all(store, ("bob",))
    store.take(store.open_ids(), 1)
    with pytest.raises(QueryError, match="already in training"):
        desk.undo("bob", 60)


def test_cant_tell_an_expired_or_a_withdrawn_comparison_leaves_the_clip_out_of_the_ranking(tmp_path):
    store, _ = ranked_store(tmp_path, n=3)  # clip 0 opens the ranking, five wait for a comparison
    desk = AnswerStore(store.path)
    desk.answer(desk.lease_next("alice", 60).id, "alice", "cant_tell")
    store.expire_oldest(keep=2)  # the two oldest of the four waiting expire
    store.withdraw(np.array([pending_step(store)[0]]))
    place_all(store)
    with sqlite3.connect(store.path) as db:
        states = dict(db.execute("SELECT state, count(*) FROM clips GROUP BY state").fetchall())
    assert states == {"dropped": 4, "ranked": 2}
    assert desk.status()["ranked_clips"] == 2 and len(store.open_ids()) == 1


def test_labels_taken_after_a_checkpoint_are_taken_again_on_resume(tmp_path):
    store, _ = ranked_store(tmp_path, n=3)
    place_all(store)
    first = store.take(store.open_ids(), 4)
    store.untake(4)
    again = store.take(store.open_ids(), 4)
    np.testing.assert_array_equal(first.labels, again.labels)


def test_a_ranking_querent_draws_each_clip_once_and_refuses_what_ranking_cannot_ask(tmp_path):
    env, pairs = cartpole_pairs(2)
    querent = WebQuerent(env, tmp_path, width=160, mode="rank")
    checkpoint = saved_state(querent)
    assert querent(pairs).tolist() == [0, 1]
    for clip in range(4):
        assert imageio.v3.imread(tmp_path / "media" / f"clip{clip:06d}.mp4").shape == (6, 106, 160, 3)
    resumed = checkpoint(WebQuerent(env, tmp_path, width=160, mode="rank"))
    assert resumed(pairs[:1]).tolist() == [2]  # never a source id published since
    for kwargs, key in (({"mode": "ranks"}, "mode"), ({"mode": "rank", "gold_rate": 0.2}, "gold_rate"),
                        ({"mode": "rank", "labels_per_query": 2}, "labels_per_query")):
        with pytest.raises(ArgumentError) as err:
            WebQuerent(env, tmp_path, **kwargs)
        assert err.value.argument == key


def test_the_api_says_when_a_query_places_a_clip_and_how_far_the_ranking_has_come(tmp_path):
    RunFolder(tmp_path).write_record(OmegaConf.create({"seed": 0}), [])
    ranked_store(tmp_path, n=2)
    with TestClient(create_app(tmp_path, lease_s=60)) as client:
        query = client.get("/api/next", params={"annotator": "alice"}).json()["query"]
        assert query["placing"] and query["right"] == "media/clip000000.mp4"
        assert client.post("/api/answers", json={"query_id": query["query_id"], "annotator": "alice",
                                                 "label": "equal"}).status_code == 200
        status = client.get("/api/status").json()
        assert (status["ranked_clips"], status["ranking_groups"]) == (2, 1)
        assert client.post("/api/undo", json={"annotator": "alice"}).json()["placing"]


@pytest.mark.slow
def test_a_person_ranking_clips_over_http_teaches_cartpole_in_a_third_of_the_answers(tmp_path):
    run_dir = tmp_path / "run"
    with ScriptedAnnotator(run_dir, "person", pause_s=0.05) as person:
        # Each round waits for every answer, so it trains on the same ranking at any pace (as ratings' test).
        run_cli("rlhp-train", "experiment=cartpole_100_labels", "gatherer=human", "querent=web", "querent.mode=rank",
                "total_comparisons=10", "gatherer.port=0", "gatherer.min_answered_frac=1", "logger=none",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text())["true_return_mean"] >= 475
    status = AnswerStore(RunFolder(run_dir).queries_db).status()
    assert status["answers"] == person.answered <= 34 and status["ranked_clips"] == 20
    assert RunFolder(run_dir).metrics()[-1]["comparisons"] == 190  # every pair of the 20 clips


def test_a_ranking_trained_as_a_list_replaces_its_pairs_in_training_and_they_stay_in_the_journal(tmp_path):
    run_dir = tmp_path / "run"
    with ScriptedAnnotator(run_dir, "person", pause_s=0.0):
        run_cli("rlhp-train", "debug=fast", "gatherer=human", "querent=web", "querent.mode=rank",
                "gatherer.ranking_as=list", "total_comparisons=6", "gatherer.port=0", "gatherer.min_answered_frac=1",
                "logger=none", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    run = RunFolder(run_dir)
    last = run.metrics()[-1]
    assert (last["comparisons"], last["ranked_clips"]) == (0, 12) and last["ranking_loss"] > 0
    ranking = PreferenceDataset.load(run.path / "checkpoints" / "final" / "ranking")
    assert sorted(ranking.ids.tolist()) == list(range(12))
    assert AnswerStore(run.queries_db).status()["in_training"] == 12 * 11 // 2
    journal = [PreferenceDataset.load(p) for p in sorted(run.labels_dir.iterdir())]
    assert sum(len(d) for d in journal) == 12 * 11 // 2  # the pairs it implies, journalled


class Ranking(RuleBasedStateMachine):
    """Three people placing clips through the API in any order, with any answers, undos, the trainer's takes and
    expiries and new clips; after each step the ranking is whole: every clip placed at most once, one waiting
    comparison for each clip being placed, and exactly one implied pair for each two ranked clips, its label what
    the ranking says now."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        RunFolder(self.folder).write_record(OmegaConf.create({"seed": 0}), [])
        self.store = QueryStore(RunFolder(self.folder).queries_db)
        self.sources, self.round = 0, 0
        self.publish()
        self.client = TestClient(create_app(self.folder, lease_s=600))
        self.held: list[tuple[str, int]] = []

    @rule()
    def publish(self) -> None:
        self.store.publish_clips(np.array([self.sources]), self.round, random_pairs(1, seed=self.sources), "")
        self.sources += 1

    @rule(who=st.sampled_from(["alice", "bob", "carol"]))
    def lease(self, who: str) -> None:
        response = self.client.get("/api/next", params={"annotator": who})
        assert response.status_code == 200
        query = response.json()["query"]
        if query is not None:
            assert query["placing"]
            self.held.append((who, query["query_id"]))

    @precondition(lambda self: self.held)
    @rule(data=st.data(), choice=st.sampled_from(["left", "right", "equal", "cant_tell"]))
    def answer(self, data: st.DataObject, choice: str) -> None:
        who, query = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
        response = self.client.post("/api/answers", json={"query_id": query, "annotator": who, "label": choice})
        assert response.status_code in (200, 404, 409), response.text  # 404: an undo took it back

    @rule(who=st.sampled_from(["alice", "bob", "carol"]))
    def undo(self, who: str) -> None:
        response = self.client.post("/api/undo", json={"annotator": who})
        assert response.status_code in (200, 409), response.text
        if response.status_code == 200:
            self.held.append((who, response.json()["query_id"]))

    @rule()
    def take(self) -> None:
        self.store.take(self.store.open_ids(), self.round)
        self.round += 1

    @rule(keep=st.integers(0, 3))
    def expire(self, keep: int) -> None:
        self.store.expire_oldest(keep)

    @invariant()
    def the_ranking_is_whole(self) -> None:
        with sqlite3.connect(self.store.path) as db:
            position = dict(db.execute("SELECT c.id, g.position FROM clips c JOIN groups g ON g.id = c.grp "
                                       "WHERE c.state = 'ranked'"))
            assert db.execute("SELECT count(*) FROM clips WHERE state = 'ranked'").fetchone()[0] == len(position)
            assert sorted(set(position.values())) == list(range(len(set(position.values()))))  # no empty group
            waiting = db.execute("SELECT c.id, count(q.id) FROM clips c LEFT JOIN queries q ON q.clip = c.id AND "
                                 "q.kind = 'step' AND q.state = 'pending' WHERE c.state = 'placing' GROUP BY c.id")
            assert all(n == 1 for _, n in waiting)
            implied = db.execute("SELECT clip, versus, implied FROM queries WHERE kind = 'implied'").fetchall()
        assert len(implied) == len({frozenset(p[:2]) for p in implied}) == len(position) * (len(position) - 1) // 2
        for clip, versus, label in implied:
            assert label == 0.5 * (1 + np.sign(position[clip] - position[versus]))

    def teardown(self) -> None:
        self.client.close()
        shutil.rmtree(self.folder)


Ranking.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None, database=None,
                                     suppress_health_check=list(HealthCheck))
test_the_ranking_stays_whole_through_any_sequence_of_answers_undos_takes_and_expiries = Ranking.TestCase


def test_a_round_waits_for_its_share_of_clips_placed_and_takes_the_pairs_they_implied_meanwhile(tmp_path):
    from rlhp.human.gatherer import HumanGatherer

    store, _ = ranked_store(tmp_path, n=4)  # clip 0 opens the ranking; 7 wait for a comparison
    desk = AnswerStore(store.path)
    assert store.count_answered() == (0, 7)
    gatherer = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.5, poll_s=0.01)

    def person() -> None:  # places four clips, one comparison at a time, as the round waits
        while desk.status()["ranked_clips"] < 5:
            query = desk.lease_next("alice", 60)
            desk.answer(query.id, "alice", returns_label(store.pairs(np.array([query.id]))))

    import threading

    worker = threading.Thread(target=person)
    worker.start()
    answers = gatherer()
    worker.join()
    assert store.count_answered() == (0, 3)  # the four placed by then counted, and all they implied taken
    assert len(answers) == 5 * 4 // 2
