"""A scripted annotator: answers a run's queries over HTTP, as a person would, from the fragments' true
returns. It exercises the whole human path (server, leases, answers, the gatherer) without a person, for
tests, benchmarks and trying a set-up before people label."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from rlhp.human.server.answers import AnswerStore
from rlhp.runs import RunFolder


class ScriptedAnnotator:
    """Answers a run's queries in a thread until stopped (or the server is gone): the fragment with the
    higher true return is preferred, equal returns are ``equal``. A share ``random_rate`` of its answers are left
    or right at random instead (1: a person answering at random), and a share ``flip_rate`` of the others prefer
    the fragment with the lower return (1: a person who misreads the task); both drawn from ``seed``.

    A clip to rate gets the rating its true return earns on the query's scale between the lowest and the highest
    return it has rated so far, as a person anchors a scale on what they have seen (the first one the middle); at
    random when answering at random, and mirrored when misreading."""

    def __init__(self, run_dir: str | Path, name: str = "script", url: str | None = None, pause_s: float = 0.0,
                 random_rate: float = 0.0, flip_rate: float = 0.0, seed: int = 0) -> None:
        self.run, self.name, self.url, self.pause_s = RunFolder(run_dir), name, url, pause_s
        self.store = AnswerStore(self.run.queries_db)
        self.random_rate, self.flip_rate, self.rng = random_rate, flip_rate, np.random.default_rng(seed)
        self.answered = 0
        self.seen = (np.inf, -np.inf)  # the lowest and highest return of the clips it rated
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        while self.url is None and not self.stop.is_set():  # the server writes its address when it is up
            if self.run.annotate_json.is_file():
                self.url = json.loads(self.run.annotate_json.read_text())["url"]
            time.sleep(0.05)
        if self.url is None:  # stopped before the server came up
            return
        with httpx.Client(base_url=self.url, timeout=30) as http, contextlib.suppress(httpx.TransportError):
            while not self.stop.is_set():
                query = http.get("/api/next", params={"annotator": self.name}).json()["query"]
                if query is None:
                    time.sleep(0.05)
                    continue
                if query["scale"]:
                    rating = self._rating(self._rated_return(query["query_id"]), query["scale"])
                    answered = http.post("/api/ratings", json={"query_id": query["query_id"],
                                                               "annotator": self.name, "rating": rating})
                else:
                    label = self._label(*self._returns(query["query_id"]))
                    answered = http.post("/api/answers", json={"query_id": query["query_id"],
                                                               "annotator": self.name, "label": label})
                if answered.status_code == 409:  # its lease ran out while it paused: on to the next, as a person
                    continue
                answered.raise_for_status()
                self.answered += 1
                time.sleep(self.pause_s)  # a person's pace, however fast the machine

    def _label(self, first: float, second: float) -> str:
        if self.rng.random() < self.random_rate:
            return str(self.rng.choice(["left", "right"]))
        if first == second:
            return "equal"
        return "left" if (first > second) != (self.rng.random() < self.flip_rate) else "right"

    def _rating(self, value: float, scale: int) -> int:
        low, high = self.seen = (min(self.seen[0], value), max(self.seen[1], value))
        if self.rng.random() < self.random_rate:
            return int(self.rng.integers(1, scale + 1))
        rating = (scale + 1) // 2 if high == low else min(scale, 1 + int((value - low) / (high - low) * scale))
        return scale + 1 - rating if self.rng.random() < self.flip_rate else rating

    def _rated_return(self, query_id: int) -> float:
        return float(self.store.rated(np.array([query_id])).rews[0, 0].sum())

    def _returns(self, query_id: int) -> np.ndarray:
        return self.store.pairs(np.array([query_id])).rews[0].sum(axis=-1)

    def __enter__(self) -> ScriptedAnnotator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
