"""Human labels: the gatherer's waiting and expiry, resumes that lose and double nothing, and
``rlhp-train gatherer=human`` end to end with scripted annotators answering over HTTP."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import sqlite3
import subprocess
import threading
import time

import datasets
import httpx
import imageio
import numpy as np
import pytest
from helpers import BIN, FAST, composed, loaded_into, random_pairs, run_cli
from test_annotate import publish

from rlhp.data import PreferenceDataset
from rlhp.errors import ArgumentError, NetworkError
from rlhp.human.gatherer import AnnotationProcess, HumanGatherer
from rlhp.human.server.answers import AnswerStore
from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.human.store import QueryStore
from rlhp.runs import RunFolder


def answer(store, n, who="alice", choice="left"):
    desk = AnswerStore(store.path)
    for _ in range(n):
        query = desk.lease_next(who, 60)
        desk.answer(query.id, who, choice)


def test_the_first_round_waits_for_labels_and_later_ones_only_until_the_timeout(tmp_path):
    store = publish(tmp_path, 4)
    gatherer = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.5, timeout_s=0.3, poll_s=0.02)
    threading.Timer(0.5, answer, (store, 2)).start()
    start = time.monotonic()
    first = gatherer()
    assert time.monotonic() - start >= 0.5 and sorted(first.ids.tolist()) == [2, 3] and first.told.all()
    # The answers carry their pairs, who answered and when, and the round's figures.
    published = random_pairs(4, 3)  # what publish() stored
    for name, column in first.pairs.columns().items():
        np.testing.assert_array_equal(column, published.columns()[name][first.ids])
    assert first.annotators == ["alice", "alice"] and first.times.shape == (2,)
    assert np.all(np.abs(first.times - time.time()) < 60)
    metrics = gatherer.metrics()
    assert metrics["labels_answered"] == 2 and metrics["queries_pending"] == 2 and 0.5 <= metrics["label_wait_s"] < 5
    start = time.monotonic()
    later = gatherer()
    assert 0.3 <= time.monotonic() - start < 2 and len(later) == 0  # gave up waiting after timeout_s
    assert gatherer.metrics()["queries_pending"] == 2 and gatherer.num_pending() == 2
    assert gatherer.metrics()["labels_answered"] == 0
    answer(store, 1, who="bob")
    assert gatherer().annotators == ["bob"] and gatherer.received == 3 and gatherer.rounds == 3


def test_a_person_wrong_on_gold_queries_is_left_out_with_the_reason_logged_and_their_labels_asked_again(
        tmp_path, caplog):
    from test_annotate import answer_all, gold_store

    store = gold_store(tmp_path, [1.0, 0.0, math.nan, math.nan], wanted=2)  # two gold queries, two people each
    gatherer = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.0, poll_s=0.02, timeout_s=0.1,
                             min_gold_accuracy=0.7, min_gold_answers=2)
    answer_all(store, "alice", {1: "right", 0: "left", 3: "left", 2: "left"})  # right on both gold ones
    answer_all(store, "mallory", {1: "left", 0: "right", 3: "right", 2: "left"})  # wrong on both
    with caplog.at_level("WARNING"):
        taken = gatherer()
    assert "annotator 'mallory' is left out: right on 0% of 2 gold queries, under gatherer.min_gold_accuracy=0.7" \
        in caplog.text
    # Her answers no longer count: each query has one of the two it wants, and is asked again.
    assert len(taken) == 0 and store.count_answered() == (0, 4) and gatherer.metrics()["annotators_left_out"] == 1
    answer_all(store, "bob", {1: "right", 0: "left", 3: "left", 2: "right"})
    again = gatherer()
    assert sorted(again.ids.tolist()) == [0, 1, 2, 3] and set(again.annotators) == {"alice,bob"}
    assert again.labels[again.ids.tolist().index(2)] == 0.5  # alice's left and bob's right, not mallory's


def test_without_a_gold_threshold_everyone_counts(tmp_path):
    from test_annotate import answer_all, gold_store

    store = gold_store(tmp_path, [1.0, 0.0, 1.0])
    answer_all(store, "mallory", {2: "right", 1: "left", 0: "right"})
    taken = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.0, poll_s=0.02)()
    assert len(taken) == 3 and store.team()["mallory"].left_out == ""


def test_a_round_waits_for_its_share_of_the_open_queries_and_says_so_once(tmp_path, caplog):
    store = publish(tmp_path / "a", 4)
    gatherer = HumanGatherer(tmp_path / "a", serve=False, min_answered_frac=0.5, timeout_s=5, poll_s=0.02)
    threading.Timer(0.3, answer, (store, 1)).start()
    threading.Timer(0.9, answer, (store, 1, "bob")).start()
    start = time.monotonic()
    with caplog.at_level("INFO", logger="rlhp.human.gatherer"):
        assert len(gatherer()) == 2 and time.monotonic() - start >= 0.9  # half of the 4, not the first alone
    serve_it = f"(serve them with `rlhp-annotate {RunFolder(tmp_path / 'a').path}`)"
    assert [m for m in caplog.messages if m.startswith("waiting")] == [f"waiting for 2 of 4 labels {serve_it}"]
    caplog.clear()
    publish(tmp_path / "a", 4, first=4)  # 6 open: a later round waits (up to timeout_s) for 3
    answer(store, 1)  # one already in: two more are awaited
    threading.Timer(0.6, answer, (store, 2)).start()
    start = time.monotonic()
    with caplog.at_level("INFO", logger="rlhp.human.gatherer"):
        assert len(gatherer()) == 3 and 0.6 <= time.monotonic() - start < 5
    assert [m for m in caplog.messages if m.startswith("waiting")] == \
        [f"waiting for 2 of 6 labels {serve_it}, for at most 5 s"]
    assert all(getattr(r, "console", False) for r in caplog.records if r.getMessage().startswith("waiting"))
    caplog.clear()
    served = HumanGatherer(tmp_path / "c", serve=False, poll_s=0.02)
    served.url = "http://annotate.example:8765/"  # as a session sets it: the line gives the page's address
    threading.Timer(0.3, answer, (publish(tmp_path / "c", 2), 1)).start()
    with caplog.at_level("INFO", logger="rlhp.human.gatherer"):
        assert len(served()) == 1
    assert [m for m in caplog.messages if m.startswith("waiting")] == \
        ["waiting for 1 of 2 labels at http://annotate.example:8765/"]
    store = publish(tmp_path / "b", 2)
    threading.Timer(0.3, answer, (store, 1)).start()
    start = time.monotonic()
    nothing_owed = HumanGatherer(tmp_path / "b", serve=False, min_answered_frac=0.0, timeout_s=5, poll_s=0.02)
    assert len(nothing_owed()) == 1 and time.monotonic() - start >= 0.3  # a first round waits for one label at least
    start = time.monotonic()
    assert len(nothing_owed()) == 0 and time.monotonic() - start < 1  # a later one owes none: it does not wait


def test_a_human_gatherer_refuses_values_outside_their_ranges_by_name(tmp_path):
    for key, bad in (("min_answered_frac", -0.1), ("min_answered_frac", 1.01), ("timeout_s", 0), ("poll_s", -1),
                     ("lease_s", 0), ("max_pending", 0), ("port", 65536), ("min_gold_accuracy", 1.5),
                     ("min_gold_answers", 0)):
        with pytest.raises(ArgumentError) as refused:
            HumanGatherer(tmp_path, serve=False, **{key: bad})
        assert refused.value.argument == key and str(bad) in refused.value.problem
    for frac in (0.0, 1.0):  # the ends are allowed
        assert HumanGatherer(tmp_path, serve=False, min_answered_frac=frac).min_answered_frac == frac
    one = HumanGatherer(tmp_path, serve=False, max_pending=1)
    assert one.max_pending == 1 and one.metrics() == {}  # no figures before its first round


def test_a_stop_request_ends_the_wait(tmp_path):
    publish(tmp_path, 2)
    gatherer = HumanGatherer(tmp_path, serve=False)
    with gatherer.session(stop=lambda: True):
        assert len(gatherer()) == 0  # would otherwise wait for ever for its first label


def test_the_oldest_unanswered_queries_expire_beyond_max_pending(tmp_path, caplog):
    store = publish(tmp_path, 5)
    desk = AnswerStore(store.path)
    desk.answer(desk.lease_next("alice", 60).id, "alice", "left")  # the newest, 4, has an answer
    gatherer = HumanGatherer(tmp_path, serve=False, max_pending=2)
    with caplog.at_level("INFO", logger="rlhp.human.gatherer"):
        gatherer.add(None, np.zeros(0))
    assert desk.status()["expired"] == 2  # 0 and 1: the oldest without an answer
    assert "2 unanswered queries expired (gatherer.max_pending=2)" in caplog.messages
    assert desk.lease_next("bob", 60).id == 3


def test_a_resumed_gatherer_takes_again_what_it_took_after_its_checkpoint(tmp_path):
    store = publish(tmp_path, 4)
    gatherer = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.0)
    answer(store, 1)
    assert gatherer().ids.tolist() == [3]
    checkpoint = copy.deepcopy(gatherer)  # what a checkpoint after round 0 holds
    answer(store, 2)
    assert gatherer().ids.tolist() == [1, 2]  # round 1 takes these, then the run is killed
    resumed = checkpoint
    assert resumed().ids.tolist() == [1, 2]  # round 1 again: taken again, not lost
    assert len(resumed()) == 0  # and not twice


def test_a_saved_gatherer_leaves_its_session_behind_and_waits_again_when_loaded(tmp_path):
    store = publish(tmp_path, 2)
    gatherer = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.5)
    with gatherer.session(stop=lambda: True):
        gatherer.url, gatherer._server = "http://127.0.0.1:1/", object()  # as a serving session holds them
        loaded = loaded_into(gatherer, HumanGatherer(tmp_path, serve=False, min_answered_frac=0.5))
    assert loaded.url is None and loaded._server is None
    threading.Timer(0.3, answer, (store, 1)).start()
    start = time.monotonic()
    assert len(loaded()) == 1 and time.monotonic() - start >= 0.3  # it waits for the first label, not stopped


def journal(run_dir, kind: str = "labels"):
    folder = RunFolder(run_dir).labels_dir if kind == "labels" else RunFolder(run_dir).ratings_dir
    return [PreferenceDataset.load(p) for p in sorted(folder.iterdir())] if folder.is_dir() else []


@pytest.mark.slow
def test_killed_trainer_resumes_with_no_answer_lost_or_counted_twice(tmp_path):
    # Half of each round's pairs are rated, half asked as pairs: both kinds of answer cross the kill.
    run_dir = tmp_path / "run"
    command = [str(BIN / "rlhp-train"), *FAST, "gatherer=human", "gatherer.port=0", "gatherer.timeout_s=1",
               "total_comparisons=40", "num_rounds=5", "querent.mode=rate", "querent.rate_share=0.5",
               f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "WANDB_MODE": "offline"}
    with ScriptedAnnotator(run_dir, "first"):
        trainer = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        checkpoints = RunFolder(run_dir).checkpoints_dir
        while not (checkpoints / "iter_0001").is_dir():
            assert trainer.poll() is None, trainer.stderr.read().decode()[-3000:]
            time.sleep(0.05)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
    time.sleep(1)  # the server sees its trainer gone and ends
    assert not RunFolder(run_dir).annotate_json.exists()
    with ScriptedAnnotator(run_dir, "second"):
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from" in proc.stderr + proc.stdout
    final = PreferenceDataset.load(run_dir / "checkpoints" / "final" / "preferences")
    taken = np.concatenate([d.ids for d in journal(run_dir)])
    assert len(set(final.ids.tolist())) == len(final.ids) == len(taken) > 0  # nothing counted twice
    assert set(final.ids.tolist()) == set(taken.tolist())
    # The ratings likewise: each once in training, as journalled.
    rated = np.concatenate([d.ids for d in journal(run_dir, "ratings")])
    kept = PreferenceDataset.load(run_dir / "checkpoints" / "final" / "ratings").ids
    assert len(set(kept.tolist())) == len(kept) == len(rated) > 0 and set(kept.tolist()) == set(rated.tolist())
    taken = np.concatenate([taken, rated])
    answered = {a[0] for a in AnswerStore(RunFolder(run_dir).queries_db).answers()}
    # Every answer given is in training, except those that came after the last round took its labels.
    assert set(taken.tolist()) <= answered and len(answered - set(taken.tolist())) <= 10


@pytest.mark.slow
def test_people_answering_over_http_teach_cartpole_while_the_agent_trains(tmp_path):
    run_dir = tmp_path / "run"
    annotators = [ScriptedAnnotator(run_dir, f"annotator-{i}", pause_s=0.05) for i in range(3)]
    for a in annotators:
        a.__enter__()
    try:
        # The README's CartPole at its 100-label budget: a fifth of the default's clips to draw and answer.
        run_cli("rlhp-train", "experiment=cartpole_100_labels", "gatherer=human", "querent=web", "gatherer.port=0",
                "logger=none",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    finally:
        for a in annotators:
            a.__exit__()
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["true_return_mean"] >= 475
    rounds = RunFolder(run_dir).metrics()
    # The agent trained on while queries waited for people: rounds left queries pending, and their labels
    # were taken in later rounds.
    assert any(r["queries_pending"] > 0 for r in rounds)
    with sqlite3.connect(RunFolder(run_dir).queries_db) as db:
        assert db.execute("SELECT count(*) FROM queries WHERE taken_round > round").fetchone()[0] > 0
    assert rounds[-1]["timesteps"] >= composed("train", ["experiment=cartpole_100_labels"]).total_timesteps - 1_000
    names = [n for p in RunFolder(run_dir).labels_dir.iterdir() for n in datasets.load_from_disk(str(p))["annotator"]]
    assert set(",".join(names).split(",")) == {a.name for a in annotators}


@pytest.mark.slow
def test_a_team_member_who_misreads_the_task_is_found_by_the_gold_queries_and_left_out(tmp_path):
    run_dir = tmp_path / "run"
    team = [ScriptedAnnotator(run_dir, "ann", pause_s=0.02), ScriptedAnnotator(run_dir, "bea", pause_s=0.02),
            ScriptedAnnotator(run_dir, "mallory", pause_s=0.02, flip_rate=1.0)]
    with contextlib.ExitStack() as stack:
        for annotator in team:
            stack.enter_context(annotator)
        # Pendulum: its fragments' true returns are never tied, so every gold query has a right answer.
        run_cli("rlhp-train", *FAST, "env=gym", "env.id=Pendulum-v1", "agent=sac", "gatherer=human",
                "gatherer.port=0", "querent.gold_rate=0.5", "gatherer.min_gold_accuracy=0.7",
                "gatherer.min_gold_answers=3", "total_comparisons=40", "num_rounds=4",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    people = QueryStore(RunFolder(run_dir).queries_db).team()
    assert people["mallory"].gold_accuracy == 0.0 and people["mallory"].left_out.startswith("right on 0% of ")
    assert not people["ann"].left_out and not people["bea"].left_out and people["ann"].gold_accuracy == 1.0
    rows = RunFolder(run_dir).metrics()
    since = next(r["iteration"] for r in rows if r["annotators_left_out"] == 1)
    assert rows[-1]["annotators_left_out"] == 1
    later = [datasets.load_from_disk(str(p))["annotator"] for p in sorted(RunFolder(run_dir).labels_dir.iterdir())
             if int(p.name.split("_")[1]) >= since]
    assert later and all("mallory" not in names for names in later for names in names)


@pytest.mark.slow
def test_people_answer_reacher_over_http_from_clips_rendered_from_its_physics(tmp_path):
    pytest.importorskip("mujoco")
    run_dir = tmp_path / "run"
    with ScriptedAnnotator(run_dir, "annotator") as annotator:
        run_cli("rlhp-train", *FAST, "experiment=reacher", "gatherer=human", "gatherer.port=0", "querent.fps=10",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    clips = sorted(RunFolder(run_dir).media_dir.glob("*.mp4"))
    frame = imageio.v3.imread(clips[0], index=0)
    assert frame.shape == (240, 320, 3) and frame.std() > 0  # drawn headless from the recorded physics
    taken = journal(run_dir)
    assert sum(len(d) for d in taken) > 0 and annotator.answered > 0  # the labels reached reward training
    assert json.loads((run_dir / "eval.json").read_text())["episodes"] > 0


def test_a_page_on_another_address_gets_a_token_of_its_own_and_one_on_loopback_none(tmp_path):
    run = RunFolder(tmp_path)
    public = AnnotationProcess(run, "0.0.0.0", 0, None, 60.0)
    assert public.token and len(public.token) >= 22  # 16 random bytes or more, URL-safe
    assert AnnotationProcess(run, "0.0.0.0", 0, None, 60.0).token != public.token
    assert AnnotationProcess(run, "127.0.0.1", 0, None, 60.0).token is None
    assert AnnotationProcess(run, "0.0.0.0", 0, "given", 60.0).token == "given"
    assert not public.alive()
    public.stop()  # nothing started, nothing to stop


def test_a_page_on_another_address_is_served_with_its_token_and_answers_only_with_it(tmp_path):
    publish(tmp_path, 1)
    server = AnnotationProcess(RunFolder(tmp_path), "0.0.0.0", 0, None, 60.0)
    url = server.start()  # the child refuses a public address without the token it is handed
    try:
        assert url.endswith(f"/?token={server.token}")
        local = url.replace("0.0.0.0", "127.0.0.1").split("?")[0]
        assert httpx.get(local + "api/status").status_code == 401
        assert httpx.get(local + "api/status", params={"token": server.token}).json()["pending"] == 1
    finally:
        server.stop()
    assert not server.alive()


def test_a_server_that_cannot_start_says_why_from_annotate_log(tmp_path):
    import socket

    publish(tmp_path, 1)
    # Appended to; an earlier server's output need not be UTF-8 (a crash can cut a character in two).
    (tmp_path / "annotate.log").write_bytes(b"an earlier server's output \xe2\x82\nand its last line\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NetworkError) as refused:
            AnnotationProcess(RunFolder(tmp_path), "127.0.0.1", port, None, 60.0).start()
    log = (tmp_path / "annotate.log").read_text(errors="replace").strip().splitlines()
    assert len(log) == 3 and "address already in use" in log[-1].lower()
    assert str(refused.value) == f"the annotation server did not start: {log[-1]} (see {tmp_path / 'annotate.log'})"


def test_a_server_that_does_not_listen_in_time_is_stopped_and_the_refusal_says_how_long_it_waited(tmp_path):
    publish(tmp_path, 1)
    server = AnnotationProcess(RunFolder(tmp_path), "127.0.0.1", 0, None, 60.0)
    with pytest.raises(NetworkError) as refused:
        server.start(timeout_s=0.01)  # a Python child takes longer than that to import its server
    assert str(refused.value) == f"the annotation server did not listen within 0.01 s (see {tmp_path / 'annotate.log'})"
    assert not server.alive()


def test_a_server_that_dies_is_started_again_and_the_console_gives_each_address(tmp_path, caplog):
    publish(tmp_path, 1)
    gatherer = HumanGatherer(tmp_path, port=0, min_answered_frac=0.0)
    with caplog.at_level("INFO", logger="rlhp.human.gatherer"), gatherer.session(stop=lambda: True):
        first = gatherer.url
        os.kill(json.loads(RunFolder(tmp_path).annotate_json.read_text())["pid"], signal.SIGKILL)
        time.sleep(0.5)
        gatherer()
        second = gatherer.url
        assert second != first and httpx.get(second + "api/status").json()["pending"] == 1
    shown = [r.getMessage() for r in caplog.records if getattr(r, "console", False)]
    assert shown == [f"label the queries at {first}", "the annotation server ended (see annotate.log); starting it "
                     "again", f"label the queries at {second}"]
    assert not RunFolder(tmp_path).annotate_json.exists()


@pytest.mark.slow
def test_people_label_minatar_from_its_own_colours_over_http(tmp_path):
    run_dir = tmp_path / "run"
    with ScriptedAnnotator(run_dir, "annotator"):
        run_cli("rlhp-train", *FAST, "env=minatar", "env.id=Breakout", "reward_net=cnn", "gatherer=human",
                "gatherer.port=0", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    clips = sorted(RunFolder(run_dir).media_dir.glob("*.mp4"))
    assert len(clips) == 2 * 20  # both sides of every query published
    frame = imageio.v3.imread(clips[0], index=0)
    assert frame.shape == (320, 320, 3) and len(np.unique(frame.reshape(-1, 3), axis=0)) > 2  # cells in colour
    taken = journal(run_dir)
    assert sum(len(d) for d in taken) > 0 and json.loads((run_dir / "eval.json").read_text())["episodes"] == 2
