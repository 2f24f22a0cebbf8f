"""The annotation server's API: every endpoint, every bad input, leases, several annotators, tokens."""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import datasets
import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from helpers import BIN, random_pairs
from omegaconf import OmegaConf
from test_hub import RecordingApi

from rlhp.data import PreferenceDataset
from rlhp.errors import ConfigError, DataError
from rlhp.human.schema import QueryError
from rlhp.human.server.answers import AnswerStore
from rlhp.human.server.app import create_app
from rlhp.human.server.export import export_labels
from rlhp.human.server.serve import serve
from rlhp.human.store import QueryStore
from rlhp.runs import RunFolder


def publish(run_dir: Path, n: int, wanted: int = 1, first: int = 0, instructions: str = "") -> QueryStore:
    """``n`` queries with real fragment pairs (the clips are placeholder files), in a run folder."""
    run = RunFolder(run_dir)
    run.write_record(OmegaConf.create({"seed": 0}), [])  # rlhp-annotate serves only run folders
    run.media_dir.mkdir(parents=True, exist_ok=True)
    ids = np.arange(first, first + n)
    names = [(f"q{q}-left.mp4", f"q{q}-right.mp4") for q in ids]
    for pair in names:
        for name in pair:
            (run.media_dir / name).write_bytes(b"clip")
    store = QueryStore(run.queries_db)
    store.publish(ids, 0, names, random_pairs(n, 3), wanted, instructions)
    return store


@pytest.fixture
def api(tmp_path):
    publish(tmp_path, 3)
    with TestClient(create_app(tmp_path, lease_s=60)) as client:
        yield client


def lease(client, who="alice"):
    return client.get("/api/next", params={"annotator": who}).json()["query"]


def post(client, query_id, who="alice", label="left"):
    return client.post("/api/answers", json={"query_id": query_id, "annotator": who, "label": label})


def test_next_answer_and_status(api):
    first = lease(api)
    assert first["query_id"] == 2 and first["left"] == "media/q2-left.mp4"  # the newest query first
    assert api.get("/" + first["left"]).content == b"clip"
    assert lease(api)["query_id"] == 1  # alice holds 2: she gets another
    out = post(api, 2, label="right")
    assert out.status_code == 200 and out.json() == {"query_id": 2, "label": "right", "labelled": 1}
    status = api.get("/api/status").json()
    assert status["pending"] == 2 and status["answered"] == 1 and status["annotators"] == {"alice": 1}
    assert api.get("/").status_code == 200 and "Which clip" in api.get("/").text
    assert set(api.get("/openapi.json").json()["paths"]) == {"/api/next", "/api/answers", "/api/ratings", "/api/undo",
                                                             "/api/release", "/api/status"}
    assert api.get("/docs").status_code == 200


def test_a_query_carries_its_instructions_to_the_page_as_text_and_as_escaped_html(tmp_path):
    publish(tmp_path, 2, instructions="Prefer the **backflip**. <script>alert(1)</script>")
    store = QueryStore(RunFolder(tmp_path).queries_db)
    desk = AnswerStore(store.path)
    store.publish(np.array([2]), 1, [("q2-left.mp4", "q2-right.mp4")], random_pairs(1, 3), 1, "")  # none
    with TestClient(create_app(tmp_path, lease_s=60)) as client:
        newest = lease(client)
        assert newest["query_id"] == 2 and newest["instructions"] == newest["instructions_html"] == ""
        query = lease(client)
        assert query["instructions"] == "Prefer the **backflip**. <script>alert(1)</script>"
        assert query["instructions_html"] == \
            "<p>Prefer the <strong>backflip</strong>. &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
        assert post(client, query["query_id"]).status_code == 200
        undone = client.post("/api/undo", json={"annotator": "alice"}).json()
        assert undone["query_id"] == query["query_id"] and undone["instructions"] == query["instructions"]
    with sqlite3.connect(store.path) as db:  # the text is kept once, however many queries ask it
        assert db.execute("SELECT count(*) FROM instructions").fetchone()[0] == 2
    assert desk.instructions(np.array([1, 2, 0])) == [query["instructions"], "", query["instructions"]]


def test_a_store_from_before_instructions_opens_and_asks_none(tmp_path):
    old = tmp_path / "queries.sqlite"
    with sqlite3.connect(old) as db:  # the schema as it was, with one query
        db.execute("CREATE TABLE queries (id INTEGER PRIMARY KEY, round INTEGER NOT NULL, left_clip TEXT NOT NULL, "
                   "right_clip TEXT NOT NULL, wanted INTEGER NOT NULL, created REAL NOT NULL, state TEXT NOT NULL "
                   "DEFAULT 'pending', taken_round INTEGER, pair BLOB NOT NULL)")
        db.execute("INSERT INTO queries (id, round, left_clip, right_clip, wanted, created, pair) "
                   "VALUES (0, 0, 'l.mp4', 'r.mp4', 1, 0, x'00')")
    store = QueryStore(old)
    desk = AnswerStore(store.path)
    assert desk.lease_next("alice", 60).instructions == ""
    store.publish(np.array([1]), 1, [("a.mp4", "b.mp4")], random_pairs(1, 3), 1, "Pick the faster one.")
    assert desk.instructions(np.array([0, 1])) == ["", "Pick the faster one."]


@pytest.mark.parametrize("body, status, says", [
    ({"query_id": 99, "annotator": "alice", "label": "left"}, 404, "no query has id 99"),
    ({"query_id": 2, "annotator": "alice", "label": "up"}, 422, "left"),
    ({"query_id": 2, "annotator": "alice"}, 422, "label"),
    ({"query_id": "two", "annotator": "alice", "label": "left"}, 422, "query_id"),
    ({"query_id": 2, "annotator": "<script>", "label": "left"}, 422, "annotator"),
    ({"query_id": 2, "annotator": "", "label": "left"}, 422, "annotator"),
])
def test_bad_answers_get_a_4xx_with_the_reason(api, body, status, says):
    lease(api)
    response = api.post("/api/answers", json=body)
    assert response.status_code == status and says in json.dumps(response.json())


@pytest.mark.parametrize(("path", "body"), [("/api/answers", b'{"query_id": 1, "annotator": "alice", "label": 1e309}'),
                                            ("/api/undo", b'{"annotator": 1e309}')])
def test_a_number_json_cannot_carry_back_is_refused_in_a_4xx_with_one_log_line(api, path, body, caplog):
    # 1e309 parses as infinity: echoed back in the 422 it made FastAPI's own handler fail with a 500.
    with caplog.at_level("INFO", logger="rlhp.human.server.app"):
        response = api.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"]
    assert "inf" not in response.text.lower()
    refused = [r for r in caplog.records if r.name == "rlhp.human.server.app"]
    assert len(refused) == 1 and refused[0].getMessage().startswith(f"refused POST {path} (422): ")
    assert refused[0].exc_info is None


@pytest.mark.parametrize("made", [False, True])
def test_rlhp_annotate_refuses_a_folder_that_holds_no_run_and_makes_nothing_there(tmp_path, made):
    folder = tmp_path / "leftover"
    if made:
        folder.mkdir()
    proc = subprocess.run([BIN / "rlhp-annotate", str(folder)], capture_output=True, text=True, timeout=60)
    what = "holds no rlhp run (no .hydra/config.yaml)" if made else "is not a folder"
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"rlhp-annotate: config error: '{folder}' {what}; give the folder of an rlhp-train run")
    assert (list(folder.iterdir()) == []) if made else not folder.exists()


@pytest.mark.parametrize("damage", ["not a database", "truncated", "emptied"])
def test_rlhp_annotate_refuses_a_damaged_query_store_naming_it_and_leaves_it_as_it_is(tmp_path, damage):
    publish(tmp_path, 3)
    db = tmp_path / "queries.sqlite"
    for extra in ("-wal", "-shm"):  # a copied folder without the write-ahead log
        db.with_name(db.name + extra).unlink(missing_ok=True)
    whole = db.read_bytes()
    db.write_bytes({"not a database": b"garbage " * 512, "truncated": whole[:1500],
                    "emptied": b"\0" * len(whole)}[damage])
    damaged = db.read_bytes()
    proc = subprocess.run([BIN / "rlhp-annotate", str(tmp_path), "--port", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"rlhp-annotate: data error: query store '{db}' cannot be read (")
    assert db.read_bytes() == damaged  # never overwritten
    with pytest.raises(DataError, match="cannot be read"):
        QueryStore(db)


def test_malformed_json_oversized_bodies_and_missing_names_are_refused(api):
    bad = api.post("/api/answers", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 422
    huge = api.post("/api/answers", content=b"x" * 5000, headers={"content-type": "application/json"})
    assert huge.status_code == 413 and "4096 bytes" in huge.json()["detail"]
    assert api.get("/api/next").status_code == 422
    assert api.get("/api/next", params={"annotator": "a" * 65}).status_code == 422


def test_answers_need_a_live_lease_and_count_once(tmp_path):
    publish(tmp_path, 2)
    with TestClient(create_app(tmp_path, lease_s=0.2)) as api:
        assert post(api, 1).status_code == 409  # never leased to alice
        query = lease(api)["query_id"]
        time.sleep(0.3)
        expired = post(api, query)
        assert expired.status_code == 409 and "no live lease" in expired.json()["detail"]
        assert lease(api, "bob")["query_id"] == query  # the expired lease freed it
        assert post(api, query, "bob").status_code == 200
        again = post(api, query, "bob")
        assert again.status_code == 409 and "already answered" in again.json()["detail"]
        lease(api, "alice")
        assert post(api, query, "alice").status_code == 409  # answered: it takes no more


def test_a_leased_query_is_nobody_elses_and_never_twice_anyones(tmp_path):
    publish(tmp_path, 1, wanted=2)
    with TestClient(create_app(tmp_path)) as api:
        assert lease(api, "alice")["query_id"] == 0
        assert lease(api, "bob")["query_id"] == 0  # it wants two labels
        assert lease(api, "carol") is None  # two live leases: carol waits
        assert post(api, 0, "alice", "left").status_code == 200
        assert lease(api, "alice") is None  # never twice to the same person
        assert post(api, 0, "bob", "right").status_code == 200
        status = api.get("/api/status").json()
        assert status["answered"] == 1 and status["multi_labelled"] == 1 and status["agreement"] == 0.0
    taken = QueryStore(RunFolder(tmp_path).queries_db).take(np.array([0]), round_=0)
    assert taken.labels.tolist() == [0.5] and taken.annotators == ["alice,bob"]  # labels are averaged


def test_a_person_who_opens_the_page_anew_gets_back_what_they_held_at_once(api):
    held = [lease(api)["query_id"], lease(api)["query_id"]]
    assert api.post("/api/release", json={"annotator": "bob"}).json() == {"released": 0}
    assert lease(api)["query_id"] == 0  # the last one free: alice still holds the other two
    assert api.post("/api/release", json={"annotator": "alice"}).json() == {"released": 3}
    assert lease(api)["query_id"] == held[0]  # the newest again, at once


def test_undo_takes_back_the_last_answer_until_it_is_in_training(api, tmp_path):
    assert api.post("/api/undo", json={"annotator": "alice"}).status_code == 409  # nothing yet
    query = lease(api)["query_id"]
    post(api, query, label="cant_tell")
    undone = api.post("/api/undo", json={"annotator": "alice"})
    assert undone.status_code == 200 and undone.json()["query_id"] == query
    assert api.get("/api/status").json()["answers"] == 0
    assert post(api, query, label="left").status_code == 200  # leased back: answered anew
    QueryStore(RunFolder(tmp_path).queries_db).take(np.array([query]), round_=0)
    late = api.post("/api/undo", json={"annotator": "alice"})
    assert late.status_code == 409 and "in training" in late.json()["detail"]


def test_undo_takes_back_an_answer_to_a_query_that_still_waits_for_others(tmp_path):
    publish(tmp_path, 1, wanted=2)
    with TestClient(create_app(tmp_path, lease_s=60)) as client:
        post(client, lease(client)["query_id"], label="left")
        assert client.get("/api/status").json()["pending"] == 1  # one of its two answers
        undone = client.post("/api/undo", json={"annotator": "alice"})
        assert undone.status_code == 200 and undone.json()["query_id"] == 0
        assert client.get("/api/status").json()["answers"] == 0


def test_an_answer_outside_the_choices_is_refused_naming_them(tmp_path):
    store = publish(tmp_path, 1)
    desk = AnswerStore(store.path)
    query = desk.lease_next("alice", 60)
    with pytest.raises(QueryError, match="unknown answer 'maybe'; one of left, right, equal, cant_tell"):
        desk.answer(query.id, "alice", "maybe")
    assert desk.status()["answers"] == 0


def test_a_store_makes_its_folder_and_refuses_queries_without_their_clips(tmp_path):
    store = QueryStore(tmp_path / "not" / "yet" / "queries.sqlite")
    with pytest.raises(ValueError):  # two ids, one pair of clips: nothing is published
        store.publish(np.arange(2), 0, [("a.mp4", "b.mp4")], random_pairs(2, 3), 1, "")
    assert store.max_id() == -1


def test_agreement_is_the_share_of_multi_labelled_queries_whose_labels_agree(tmp_path):
    store = publish(tmp_path, 3, wanted=2)
    desk = AnswerStore(store.path)
    for who, choices in (("alice", ["left", "left", "right"]), ("bob", ["left", "right", "right"])):
        for choice in choices:
            desk.answer(desk.lease_next(who, 60).id, who, choice)
    status = desk.status()
    assert status["multi_labelled"] == 3 and status["agreement"] == pytest.approx(2 / 3)


def test_the_label_convention(tmp_path):
    store = publish(tmp_path, 4)
    desk = AnswerStore(store.path)
    for choice in ("left", "right", "equal", "cant_tell"):
        query = desk.lease_next("alice", 60)
        desk.answer(query.id, "alice", choice)
    taken = store.take(np.arange(4), round_=0)
    labels = dict(zip(reversed(range(4)), taken.labels[::-1].tolist(), strict=True))
    assert labels[3] == 1.0 and labels[2] == 0.0 and labels[1] == 0.5 and math.isnan(labels[0])


def test_media_paths_cannot_leave_media(api):
    for path in ("/media/../queries.sqlite", "/media/%2e%2e/queries.sqlite", "/media/..%2fqueries.sqlite"):
        response = api.get(path)
        assert response.status_code == 404 and b"SQLite" not in response.content


def test_a_token_guards_every_request(tmp_path):
    publish(tmp_path, 1)
    with TestClient(create_app(tmp_path, token="s3cret")) as api:
        assert api.get("/api/status").status_code == 401
        assert api.get("/media/q0-left.mp4").status_code == 401
        assert api.get("/api/status", headers={"x-rlhp-token": "wrong"}).status_code == 401
        assert api.get("/api/status", headers={"x-rlhp-token": "s3cret"}).status_code == 200
        assert api.get("/", params={"token": "s3cret"}).status_code == 200
        assert api.get("/media/q0-left.mp4").status_code == 200  # the cookie the page got carries it


def test_listening_beyond_loopback_needs_a_token(tmp_path):
    with pytest.raises(ConfigError, match="token"):
        serve(tmp_path, host="0.0.0.0", port=0, token=None)


@pytest.mark.slow
def test_50_annotators_post_2000_answers_to_a_live_server_and_none_is_lost_or_doubled(tmp_path):
    store = publish(tmp_path, 2000)
    desk = AnswerStore(store.path)
    server = subprocess.Popen([BIN / "rlhp-annotate", str(tmp_path), "--port", "0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        url = wait_for_url(tmp_path)
        accepted, refused = Counter(), Counter()

        def annotate(who: str) -> None:
            with httpx.Client(base_url=url, timeout=60) as http:
                while (query := http.get("/api/next", params={"annotator": who}).json()["query"]) is not None:
                    response = http.post("/api/answers", json={"query_id": query["query_id"], "annotator": who,
                                                               "label": "left"})
                    (accepted if response.status_code == 200 else refused)[query["query_id"]] += 1

        threads = [threading.Thread(target=annotate, args=(f"annotator-{i}",)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.terminate()
        server.wait(10)
    assert not refused and sum(accepted.values()) == 2000 and set(accepted.values()) == {1}
    answers = desk.answers()
    assert len(answers) == 2000 and len({a[0] for a in answers}) == 2000
    assert desk.status()["pending"] == 0 and len(desk.status()["annotators"]) == 50


def test_the_server_announces_its_url_and_cleans_up(tmp_path):
    RunFolder(tmp_path).write_record(OmegaConf.create({"seed": 0}), [])
    server = subprocess.Popen([BIN / "rlhp-annotate", str(tmp_path), "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = wait_for_url(tmp_path)
        assert httpx.get(url + "api/status").json()["pending"] == 0
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=10)
    assert f"labelling page: {url}" in out
    assert not RunFolder(tmp_path).annotate_json.exists()


def test_a_public_address_gets_a_generated_token(tmp_path):
    RunFolder(tmp_path).write_record(OmegaConf.create({"seed": 0}), [])
    server = subprocess.Popen([BIN / "rlhp-annotate", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = wait_for_url(tmp_path)
        assert "?token=" in url
        # A name a colleague can open: the machine's, then each interface's address; never the wildcard.
        urls = json.loads(RunFolder(tmp_path).annotate_json.read_text())["urls"]
        assert url == urls[0] and url.startswith(f"http://{socket.gethostname()}:")
        assert all("0.0.0.0" not in u and "127.0.0.1" not in u for u in urls)
        for each in urls:  # every address printed is the server's (this machine's)
            assert httpx.get(each).status_code == 200
            assert httpx.get(each.split("?")[0] + "api/status").status_code == 401
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=10)
    assert f"labelling page: {urls[0]} (or {', '.join(urls[1:])})" in out and "plain HTTP" in out


def test_a_second_server_of_a_run_leaves_the_first_announced_when_it_stops(tmp_path):
    RunFolder(tmp_path).write_record(OmegaConf.create({"seed": 0}), [])
    path = RunFolder(tmp_path).annotate_json
    first = subprocess.Popen([BIN / "rlhp-annotate", str(tmp_path), "--port", "0"], stdout=subprocess.DEVNULL)
    try:
        url = wait_for_url(tmp_path)
        second = subprocess.Popen([BIN / "rlhp-annotate", str(tmp_path), "--port", "0"], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(json.loads(path.read_text()).get("servers", [])) < 2:
            assert time.monotonic() < deadline, "the second server never announced itself"
            time.sleep(0.05)
        assert json.loads(path.read_text())["url"] != url  # the newest at the top level
        second.terminate()
        second.wait(10)
        assert json.loads(path.read_text())["url"] == url  # stopping one never hides the other
        assert httpx.get(url + "api/status").status_code == 200
    finally:
        first.terminate()
        first.wait(10)
    assert not path.exists()


def wait_for_url(run_dir: Path, timeout_s: float = 60) -> str:
    path = RunFolder(run_dir).annotate_json
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        assert time.monotonic() < deadline, "the server never announced its URL"
        time.sleep(0.05)
    return json.loads(path.read_text())["url"]


def test_labels_export_to_a_folder_and_a_hub_dataset_repo(tmp_path):
    run = RunFolder(tmp_path / "run")
    for round_, people in ((0, ["alice", "alice,bob"]), (1, ["bob"])):
        labels = np.array([1.0, np.nan] if round_ == 0 else [0.5], np.float32)
        batch = PreferenceDataset()
        batch.push(random_pairs(len(labels), 3), labels, np.arange(len(labels)) + 10 * round_)
        batch.save(run.label_journal.round(round_), annotator=people, answered_at=np.ones(len(labels)),
                   skipped=np.isnan(labels))
    (run.labels_dir / "round_0002.tmp").mkdir()  # a round whose writing a crash cut off: not exported
    (run.labels_dir / "round_0002.tmp" / "data-00000-of-00001.arrow").write_bytes(b"\0half")
    store = QueryStore(run.queries_db)
    store.publish(np.array([0, 1]), 0, [("a", "b"), ("c", "d")], random_pairs(2, 3), 1, "Prefer the *higher* jump.")
    store.publish(np.array([10]), 1, [("e", "f")], random_pairs(1, 3), 1, "Prefer\nthe backflip.")
    where = export_labels(run.path, str(tmp_path / "out"))
    ds = datasets.load_dataset("parquet", data_files=f"{where}/data/*.parquet", split="train")
    assert ds["round"] == [0, 0, 1] and ds["annotator"] == ["alice", "alice,bob", "bob"]
    assert ds["skipped"] == [False, True, False] and ds["id"] == [0, 1, 10]
    assert ds["instructions"] == ["Prefer the *higher* jump."] * 2 + ["Prefer\nthe backflip."]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "alice (2), bob (2)" in card and "| labelled pairs | 2 |" in card
    assert "2 labels:\n\n> Prefer the *higher* jump.\n" in card and "1 label:\n\n> Prefer\n> the backflip.\n" in card
    api = RecordingApi()
    assert export_labels(run.path, "my-lab/cartpole-labels", api=api) == \
        "https://huggingface.co/datasets/my-lab/cartpole-labels"
    assert api.calls[1][2]["folder_path"] == str(run.path / "hub-labels")
    with pytest.raises(DataError, match="holds no labels"):
        export_labels(tmp_path / "empty", str(tmp_path / "nowhere"))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing"])
def test_an_export_of_a_damaged_label_journal_names_the_round_and_writes_nothing(tmp_path, damage):
    run = RunFolder(tmp_path / "run")
    run.write_record(OmegaConf.create({"seed": 0}), [])
    for round_ in (0, 1):
        batch = PreferenceDataset()
        batch.push(random_pairs(2, 3), np.array([1.0, 0.0], np.float32), np.arange(2) + 10 * round_)
        batch.save(run.labels_dir / f"round_{round_:04d}", annotator=["a", "b"], answered_at=np.ones(2),
                   skipped=np.zeros(2, bool))
    (arrow,) = (run.labels_dir / "round_0001").glob("*.arrow")
    if damage == "missing":
        arrow.unlink()
    else:
        arrow.write_bytes(b"\0garbage" * 50 if damage == "garbage" else arrow.read_bytes()[:300])
    proc = subprocess.run([BIN / "rlhp-annotate", str(run.path), "--export", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"rlhp-annotate: data error: '{run.labels_dir / 'round_0001'}' ")
    assert not (tmp_path / "out").exists()


def test_an_export_never_deletes_what_it_did_not_write(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.write_record(OmegaConf.create({"env": {"id": "CartPole-v1"}}), [])
    batch = PreferenceDataset()
    batch.push(random_pairs(1, 3), np.ones(1, np.float32), np.arange(1))
    batch.save(run.labels_dir / "round_0000", annotator=["alice"], answered_at=np.ones(1), skipped=np.zeros(1, bool))
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("mine")
    for dest, problem in (("notes.txt", "is a file"), ("mine", "holds other files")):
        proc = subprocess.run([BIN / "rlhp-annotate", str(run.path), "--export", str(tmp_path / dest)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.startswith("rlhp-annotate: config error: option `--export` ")
        assert problem in proc.stderr and proc.stderr.count("\n") == 1
    assert (tmp_path / "notes.txt").read_text() == (tmp_path / "mine" / "thesis.tex").read_text() == "mine"
    # An earlier export, or an empty folder, is written (again).
    (tmp_path / "empty").mkdir()
    for dest in ("out", "out", "empty"):
        assert export_labels(run.path, str(tmp_path / dest)) == str(tmp_path / dest)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["README.md", "data"]


def test_an_id_beyond_sqlite_integers_is_a_422_not_a_500(api):
    assert post(api, 2**70).status_code == 422


def test_a_name_the_schema_refuses_is_refused(api):
    # The OpenAPI schema's pattern is read as ECMA regex, where \w is ASCII; so must the server read it.
    assert api.get("/api/next", params={"annotator": "José"}).status_code == 422
    assert api.get("/api/next", params={"annotator": "jose.m+1@lab"}).status_code == 200


def gold_store(tmp_path: Path, gold: list[float], wanted: int = 1) -> QueryStore:
    """Queries 0..n-1 whose known labels are ``gold`` (NaN: not a gold query)."""
    store = publish(tmp_path, 0)
    n = len(gold)
    store.publish(np.arange(n), 0, [(f"q{q}-left.mp4", f"q{q}-right.mp4") for q in range(n)], random_pairs(n, 3),
                  wanted, "", gold=np.array(gold))
    return store


def answer_all(store: QueryStore, who: str, choices: dict[int, str]) -> None:
    desk = AnswerStore(store.path)
    for _ in choices:
        query = desk.lease_next(who, 60)
        desk.answer(query.id, who, choices[query.id])


def test_the_team_view_measures_each_person_on_gold_queries_and_against_the_others(tmp_path):
    store = gold_store(tmp_path, [1.0, 0.0, 0.5, math.nan], wanted=2)
    answer_all(store, "alice", {3: "left", 2: "equal", 1: "right", 0: "left"})  # right on all three gold ones
    answer_all(store, "bob", {3: "right", 2: "left", 1: "right", 0: "cant_tell"})  # right on one of two told
    team = store.team()
    assert (team["alice"].gold_answers, team["alice"].gold_accuracy) == (3, 1.0)
    assert (team["bob"].gold_answers, team["bob"].gold_accuracy) == (2, 0.5)  # can't tell is no answer
    # Compared where both told: queries 1, 2, 3; they match on query 1 only.
    assert (team["alice"].compared, team["alice"].agreement) == (3, pytest.approx(1 / 3))
    assert team["bob"].agreement == team["alice"].agreement and not team["bob"].left_out
    with TestClient(create_app(tmp_path, lease_s=60)) as client:
        seen = client.get("/api/status").json()["team"]
    assert seen["bob"] == {"answers": 4, "gold_answers": 2, "gold_accuracy": 0.5, "compared": 3,
                           "agreement": pytest.approx(1 / 3), "left_out": ""}


def test_gold_queries_are_handed_out_first_so_each_person_is_measured_early(tmp_path):
    store = gold_store(tmp_path, [math.nan, 1.0, math.nan, 0.0, math.nan], wanted=2)
    desk = AnswerStore(store.path)
    assert [desk.lease_next("alice", 60).id for _ in range(5)] == [3, 1, 4, 2, 0]  # gold, then newest first


def test_a_person_left_out_counts_nowhere_and_the_queries_they_answered_are_asked_again(tmp_path):
    store = gold_store(tmp_path, [1.0, math.nan])
    desk = AnswerStore(store.path)
    answer_all(store, "mallory", {1: "right", 0: "right"})
    assert store.count_answered() == (2, 0)
    store.leave_out({"mallory": "wrong on gold"})
    assert store.count_answered() == (0, 2)  # both want an answer again
    assert store.team()["mallory"].left_out == "wrong on gold"
    answer_all(store, "alice", {1: "left", 0: "left"})
    taken = store.take(np.arange(2), 0)
    assert taken.done.all() and taken.labels.tolist() == [1.0, 1.0] and taken.annotators == ["alice", "alice"]
    # A left-out person is handed nothing more.
    store.publish(np.array([5]), 1, [("a", "b")], random_pairs(1, 3), 1, "")
    assert desk.lease_next("mallory", 60) is None and desk.lease_next("alice", 60).id == 5


def test_gold_queries_are_a_steady_share_of_the_ids_with_the_true_returns_answer():
    from rlhp.human.querent import gold_answers

    pairs = random_pairs(1000, 3)
    gold = gold_answers(np.arange(1000), pairs, 0.2)
    chosen = ~np.isnan(gold)
    assert chosen.sum() == 200 and all(chosen[lo:lo + 50].sum() in (9, 10, 11) for lo in range(0, 1000, 50))
    returns = pairs.rews.sum(-1)
    np.testing.assert_array_equal(gold[chosen], (returns[chosen, 0] > returns[chosen, 1]).astype(float))
    assert np.isnan(gold_answers(np.arange(10), pairs[:10], 0.0)).all()
    pairs.rews[:] = np.nan  # an env without a true reward knows no gold answer
    with pytest.raises(DataError, match="querent.gold_rate"):
        gold_answers(np.arange(10), pairs[:10], 0.2)


def test_the_label_export_and_its_card_carry_each_persons_figures(tmp_path):
    run = RunFolder(tmp_path / "run")
    store = QueryStore(run.queries_db)
    store.publish(np.arange(3), 0, [("a", "b")] * 3, random_pairs(3, 3), 1, "", gold=np.array([1.0, 0.0, math.nan]))
    answer_all(store, "mallory", {2: "right", 1: "left", 0: "right"})
    store.leave_out({"mallory": "right on 0% of 2 gold queries"})
    answer_all(store, "alice", {2: "left", 1: "right", 0: "left"})
    taken = store.take(np.arange(3), 0)
    batch = PreferenceDataset()
    batch.push(store.pairs(np.arange(3)[taken.done]), taken.labels, np.arange(3)[taken.done])
    batch.save(run.labels_dir / "round_0000", annotator=taken.annotators, answered_at=taken.times,
               skipped=np.isnan(taken.labels))
    export_labels(run.path, str(tmp_path / "out"))
    card = (tmp_path / "out" / "README.md").read_text()
    assert taken.annotators == ["alice"] * 3
    assert "| alice | 3 | 2 | 100% | 0% (3) | no |" in card
    assert "| mallory | 3 | 2 | 0% | 0% (3) | right on 0% of 2 gold queries |" in card
    assert "gold_accuracy: 0.0" in card  # the card's metadata holds the same figures, for tools
