"""The labelling API driven through random sequences of leases, answers, undos, releases and the trainer's takes
and expiries (a hypothesis state machine), each answer checked against a model of the rules:

- a person is handed the newest pending query they have neither answered nor hold, while its answers and
  live leases are fewer than it wants;
- an answer needs a live lease of one's own on a pending query, once per person;
- undo withdraws one's last answer, unless the trainer has taken or dropped it, and hands the query back;
- a release gives up every lease of one's own;
- the status counts what the model counts.

Schemathesis' stateful mode follows OpenAPI links, which FastAPI's schema does not have; a model says more
than links would, since it predicts every answer rather than only "no 5xx".
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from test_annotate import publish

from rlhp.human.server.app import create_app
from rlhp.human.store import QueryStore

PEOPLE = ["alice", "bob", "carol"]
QUERIES, WANTED = 5, 2
CHOICES = ["left", "right", "equal", "cant_tell"]
CHOICE_LABELS = {"left": 1.0, "right": 0.0, "equal": 0.5}


class Labelling(RuleBasedStateMachine):
    """Three people and the trainer on one run's queries; the model is plain Python sets."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.store: QueryStore = publish(self.folder, QUERIES, wanted=WANTED)
        self.client = TestClient(create_app(self.folder, lease_s=600))
        self.state = {q: "pending" for q in range(QUERIES)}
        self.answers: list[tuple[int, str, str]] = []  # (query, person, choice), oldest first
        self.leases: set[tuple[int, str]] = set()
        self.round = 0
        self.started = time.time()

    def answered(self, query: int) -> set[str]:
        return {who for q, who, _ in self.answers if q == query}

    def clips(self, response: dict, query: int, start: float) -> None:
        """A handed-out query shows its own two clips, leased from now on."""
        assert (response["left"], response["right"]) == (f"media/q{query}-left.mp4", f"media/q{query}-right.mp4")
        assert start + 599 < response["lease_expires"] <= time.time() + 600

    def expected_lease(self, who: str) -> int | None:
        for q in sorted(self.state, reverse=True):  # newest first
            held = sum(1 for lq, _ in self.leases if lq == q)
            if (self.state[q] == "pending" and who not in self.answered(q) and (q, who) not in self.leases
                    and len(self.answered(q)) + held < WANTED):
                return q
        return None

    @rule(who=st.sampled_from(PEOPLE))
    def lease(self, who: str) -> None:
        expected = self.expected_lease(who)
        start = time.time()
        response = self.client.get("/api/next", params={"annotator": who})
        assert response.status_code == 200
        query = response.json()["query"]
        assert (None if query is None else query["query_id"]) == expected
        if query is not None:
            self.clips(query, expected, start)
        if expected is not None:
            self.leases.add((expected, who))

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), choice=st.sampled_from(CHOICES))
    def answer_a_lease(self, data: st.DataObject, choice: str) -> None:
        """Mostly what people do: answer what they were handed."""
        query, who = data.draw(st.sampled_from(sorted(self.leases)))
        self.answer(who, query, choice)

    @rule(who=st.sampled_from(PEOPLE), query=st.integers(-1, QUERIES), choice=st.sampled_from(CHOICES))
    def answer(self, who: str, query: int, choice: str) -> None:
        """Any answer, to any id (a stale page, a script)."""
        response = self.client.post("/api/answers", json={"query_id": query, "annotator": who, "label": choice})
        if query < 0:
            assert response.status_code == 422  # the schema's bound
        elif query not in self.state:
            assert response.status_code == 404 and f"no query has id {query}" in response.json()["detail"]
        elif who in self.answered(query) or self.state[query] != "pending" or (query, who) not in self.leases:
            assert response.status_code == 409, response.text
            reason = ("has already answered" if who in self.answered(query) else
                      f"is {self.state[query]} and takes no more answers" if self.state[query] != "pending" else
                      "holds no live lease")
            assert reason in response.json()["detail"]
        else:
            assert response.status_code == 200, response.text
            self.leases.discard((query, who))
            self.answers.append((query, who, choice))
            if len(self.answered(query)) >= WANTED:
                self.state[query] = "answered"
            assert response.json()["labelled"] == sum(1 for _, w, _ in self.answers if w == who)

    @rule(who=st.sampled_from(PEOPLE))
    def undo(self, who: str) -> None:
        mine = [i for i, (_, w, _) in enumerate(self.answers) if w == who]
        start = time.time()
        response = self.client.post("/api/undo", json={"annotator": who})
        if not mine or self.state[self.answers[mine[-1]][0]] not in ("pending", "answered"):
            assert response.status_code == 409
            assert ("has no answer to undo" if not mine else "cannot be undone") in response.json()["detail"]
            return
        assert response.status_code == 200, response.text
        query, _, _ = self.answers.pop(mine[-1])
        assert response.json()["query_id"] == query
        self.clips(response.json(), query, start)
        self.state[query] = "pending"
        self.leases.add((query, who))

    @rule(who=st.sampled_from(PEOPLE))
    def release(self, who: str) -> None:
        """A person opens the page anew: the leases they held are given up."""
        response = self.client.post("/api/release", json={"annotator": who})
        held = {lease for lease in self.leases if lease[1] == who}
        assert response.status_code == 200 and response.json() == {"released": len(held)}
        self.leases -= held

    @rule()
    def take(self) -> None:
        """The trainer takes the answered queries' labels."""
        asked = self.store.open_ids()
        assert asked.tolist() == sorted(q for q, s in self.state.items() if s in ("pending", "answered"))
        taken = self.store.take(asked, self.round)
        expected = sorted(q for q, s in self.state.items() if s == "answered")
        assert asked[taken.done].tolist() == expected
        # Each label is the mean of its answers' (can't tell counts for nothing; all can't tell is NaN).
        means = []
        for q in expected:
            values = [CHOICE_LABELS[c] for qq, _, c in self.answers if qq == q and c != "cant_tell"]
            means.append(np.mean(values) if values else np.nan)
        assert taken.labels.dtype == np.float32
        np.testing.assert_allclose(taken.labels, np.array(means, np.float32))
        assert [sorted(a.split(",")) for a in taken.annotators] == [sorted(self.answered(q)) for q in expected]
        assert taken.times.dtype == np.float64 and len(taken.times) == len(expected)
        assert np.all((taken.times > self.started) & (taken.times <= time.time()))
        for q in expected:
            self.state[q] = "taken"
        self.round += 1

    @rule(keep=st.integers(0, QUERIES))
    def expire(self, keep: int) -> None:
        """The trainer drops the oldest queries nobody has answered, beyond the newest ``keep`` of them."""
        unanswered = sorted((q for q, s in self.state.items() if s == "pending" and not self.answered(q)),
                            reverse=True)
        assert self.store.expire_oldest(keep) == len(unanswered[keep:])
        for q in unanswered[keep:]:
            self.state[q] = "expired"

    @invariant()
    def the_trainer_counts_what_the_model_counts(self) -> None:
        states = list(self.state.values())
        assert self.store.count_answered() == (states.count("answered"), states.count("pending"))

    @invariant()
    def status_counts_what_the_model_counts(self) -> None:
        status = self.client.get("/api/status").json()
        states = list(self.state.values())
        assert status["pending"] == states.count("pending") and status["in_training"] == states.count("taken")
        assert status["answered"] == states.count("answered") + states.count("taken")
        assert status["implied"] == 0  # pairs: nothing is implied
        assert status["expired"] == states.count("expired") and status["answers"] == len(self.answers)
        assert status["ratings"] == 0  # pairs: no clip rated
        # Agreement: among queries with several labels (can't tell is none), the share whose labels agree.
        labels = {q: [CHOICE_LABELS[c] for qq, _, c in self.answers if qq == q and c != "cant_tell"]
                  for q in self.state}
        multi = [q for q in self.state if len(labels[q]) > 1]
        assert status["multi_labelled"] == len(multi)
        assert status["agreement"] == (sum(len(set(labels[q])) == 1 for q in multi) / len(multi) if multi else None)

    def teardown(self) -> None:
        self.client.close()
        shutil.rmtree(self.folder)


Labelling.TestCase.settings = settings(max_examples=30, stateful_step_count=20, derandomize=True, deadline=None,
                                       database=None, suppress_health_check=list(HealthCheck))
test_labelling_follows_its_rules_through_any_sequence = Labelling.TestCase
