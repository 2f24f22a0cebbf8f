"""The human gatherer: people answer queries in a web page while the agent trains on.

The web querent publishes each round's queries in the run folder's ``queries.sqlite``; the annotation
server (``rlhp-annotate``, started in the background here) hands them to people and records their
answers there; each round this gatherer takes whatever has been answered. It waits only for the first
labels (there is nothing to learn from before) and, later, at most ``timeout_s`` for a share of the
open queries.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.errors import ArgumentError, NetworkError
from rlhp.feedback.gatherer import Answers, PreferenceGatherer, Ratings, no_answers
from rlhp.human.store import QueryStore
from rlhp.logs import CONSOLE
from rlhp.runs import RunFolder
from rlhp.runs.announce import announced
from rlhp.runs.folder import LOOPBACK

log = logging.getLogger(__name__)


class HumanGatherer(PreferenceGatherer):
    """Labels from people, through the annotation server; unanswered queries stay pending across rounds.

    Args:
        run_dir: the run folder (its ``queries.sqlite`` is shared with the server).
        min_answered_frac: after the first labels, wait for this share of the open queries...
        timeout_s: ...but no longer than this many seconds per round.
        max_pending: open queries kept; beyond it the oldest without an answer expire.
        poll_s: seconds between looks at the store while waiting.
        serve: start the annotation server in the background for the run's lifetime.
        host, port: where it listens (port 0: any free port).
        token: access token; required (and generated when null) on an address other than loopback.
        lease_s: seconds a query handed to a person is theirs alone.
        min_gold_accuracy: leave out a person whose answers to gold queries (``querent.gold_rate``) are right less
            often than this, once they gave ``min_gold_answers`` of them: from then on their answers count
            nowhere, and the queries that lose an answer by it are asked again (0: keep everyone). The decision is
            logged, and shows on the status API and in the label export.
        min_gold_answers: gold answers a person gives before they are judged.
        ranking_as: what a ranking (``querent.mode=rank``) trains the reward on: ``pairs``, the pairs it implies
            (Bradley-Terry, each pair alike), or ``list``, the ranking itself (Plackett-Luce, a term a clip:
            :mod:`rlhp.training.rankings`).
    """

    RANKING_AS = ("pairs", "list")
    unsaved = frozenset({"_server", "url", "_stop"})
    """Not in a checkpoint: the labelling server, its address and its stop request, which belong to the process
    that serves them."""

    reads_published_queries = True

    def __init__(self, run_dir: str | Path, min_answered_frac: float = 0.5, timeout_s: float = 30.0,
                 max_pending: int = 200, poll_s: float = 0.2, serve: bool = True, host: str = "127.0.0.1",
                 port: int = 8765, token: str | None = None, lease_s: float = 120.0, min_gold_accuracy: float = 0.0,
                 min_gold_answers: int = 5, ranking_as: str = "pairs") -> None:
        ArgumentError.check_share("min_answered_frac", min_answered_frac)
        for key, value in (("timeout_s", timeout_s), ("poll_s", poll_s), ("lease_s", lease_s)):
            if value <= 0:
                raise ArgumentError(key, f"must be positive, got {value}")
        ArgumentError.check_share("min_gold_accuracy", min_gold_accuracy)
        ArgumentError.check_count("min_gold_answers", min_gold_answers)
        ArgumentError.check_count("max_pending", max_pending)
        self.min_gold_accuracy, self.min_gold_answers = min_gold_accuracy, min_gold_answers
        if ranking_as not in self.RANKING_AS:
            raise ArgumentError("ranking_as", f"must be one of {', '.join(self.RANKING_AS)}, got {ranking_as!r}")
        self.ranking_as = ranking_as
        if not 0 <= port < 65536:
            raise ArgumentError("port", f"must be a TCP port (0 for any free one), got {port}")
        self.run = RunFolder(run_dir)
        self.store = QueryStore(self.run.queries_db)
        self.min_answered_frac, self.timeout_s, self.poll_s = min_answered_frac, timeout_s, poll_s
        self.max_pending = max_pending
        self.serve, self.host, self.port, self.token, self.lease_s = serve, host, port, token, lease_s
        self.rounds = 0
        self.received = 0
        self.url: str | None = None
        self._server: AnnotationProcess | None = None
        self._stop: Callable[[], bool] = lambda: False
        self._last: dict[str, float] = {}

    def add(self, pairs: FragmentPairs, ids: np.ndarray) -> None:
        """The querent has published these; keep the open queries within ``max_pending``."""
        expired = self.store.expire_oldest(self.max_pending)
        if expired:
            log.info("%d unanswered queries expired (gatherer.max_pending=%d)", expired, self.max_pending)

    def decline(self, ids: np.ndarray) -> None:
        """Withdraw these published queries from the page: another teacher labels them."""
        self.store.withdraw(ids)

    def __call__(self) -> Answers:
        """Wait as configured, then take every answered query."""
        if self._server is not None and not self._server.alive():
            log.warning("the annotation server ended (see annotate.log); starting it again", extra=CONSOLE)
            self._start_server()
        # Labels taken in rounds after the checkpoint a resumed run starts from are taken again.
        self.store.untake(self.rounds)
        start = time.monotonic()
        if len(self.store.open_ids()):
            self._wait(sum(self.store.count_answered()))  # a ranking's clips, not the pairs they imply
        left_out = self._judge_team()
        ids = self.store.open_ids()  # with the pairs a ranking implied while it waited
        taken = self.store.take(ids, self.rounds)
        self.rounds += 1
        self._last = {"queries_pending": self.store.count_answered()[1], "labels_answered": int(taken.done.sum()),
                      "label_wait_s": time.monotonic() - start, "annotators_left_out": left_out}
        if not taken.done.any():
            return no_answers()
        self.received += int(taken.done.sum())
        ids = ids[taken.done]  # only these pairs are read back from the store
        pairs = ~taken.rated
        who = np.array(taken.annotators, dtype=object)
        answers = Answers(self.store.pairs(ids[pairs]) if pairs.any() else None, taken.labels[pairs], ids[pairs],
                          who[pairs].tolist(), taken.times[pairs])
        if taken.rated.any():
            rated = taken.rated
            answers.ratings = Ratings(self.store.rated(ids[rated]), taken.labels[rated], ids[rated],
                                      who[rated].tolist(), taken.times[rated], taken.scale)
        if self.hands_ranking_as_list:
            ranking = self.store.ranking_in_training()
            answers.ranking = ranking if len(ranking) else None
        return answers

    def _wait(self, open_queries: int) -> None:
        """Until ``min_answered_frac`` of the open queries are answered: for ever before the first label,
        else for at most ``timeout_s``; a stop request ends it."""
        first = self.received == 0
        wanted = max(1, math.ceil(self.min_answered_frac * open_queries)) if first else \
            math.ceil(self.min_answered_frac * open_queries)
        deadline = math.inf if first else time.monotonic() + self.timeout_s
        told = False
        while not self._stop():
            answered, _ = self.store.count_answered()
            if answered >= wanted or time.monotonic() >= deadline:
                return
            if not told:
                where = f" at {self.url}" if self.url else f" (serve them with `rlhp-annotate {self.run.path}`)"
                log.info("waiting for %d of %d labels%s%s", wanted - answered, open_queries, where,
                         "" if first else f", for at most {self.timeout_s:g} s", extra=CONSOLE)
                told = True
            time.sleep(self.poll_s)

    @property
    def hands_ranking_as_list(self) -> bool:
        """Whether it hands over people's ranking as a list (``ranking_as=list``)."""
        return self.ranking_as == "list"

    @property
    def judges_on_gold(self) -> bool:
        """Whether it judges people on gold queries (``min_gold_accuracy`` above 0)."""
        return self.min_gold_accuracy > 0

    def _judge_team(self) -> int:
        """Leave out, with a logged reason, each person whose gold answers fall under ``min_gold_accuracy``;
        return how many are left out now."""
        team = self.store.team()
        reasons = {name: f"right on {p.gold_accuracy:.0%} of {p.gold_answers} gold queries, under "
                         f"gatherer.min_gold_accuracy={self.min_gold_accuracy:g}"
                   for name, p in team.items() if not p.left_out and p.gold_answers >= self.min_gold_answers
                   and p.gold_accuracy < self.min_gold_accuracy}
        for name, reason in reasons.items():
            log.warning("annotator %r is left out: %s; their answers no longer count", name, reason, extra=CONSOLE)
        if reasons:
            self.store.leave_out(reasons)
        return sum(bool(p.left_out) for p in team.values()) + len(reasons)

    def num_pending(self) -> int:
        """Open queries: published and not yet taken (some may be answered since the last round)."""
        answered, pending = self.store.count_answered()
        return answered + pending

    def metrics(self) -> dict[str, float]:
        """``queries_pending`` after the round's gathering, ``labels_answered`` in it, ``label_wait_s``,
        ``annotators_left_out`` (so far)."""
        return dict(self._last)

    @contextlib.contextmanager
    def session(self, stop: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """Serve the labelling page while the loop runs (when ``serve``); waiting ends on ``stop()``."""
        self._stop = stop
        if not self.serve:
            yield
            return
        self._server = AnnotationProcess(self.run, self.host, self.port, self.token, self.lease_s)
        try:
            self._start_server()
            yield
        finally:
            self._server.stop()
            self._server, self.url = None, None

    def _start_server(self) -> None:
        self.url = self._server.start()
        log.info("label the queries at %s", self.url, extra=CONSOLE)



class AnnotationProcess:
    """``rlhp-annotate`` on a run folder, in a child process that ends with this one."""

    def __init__(self, run: RunFolder, host: str, port: int, token: str | None, lease_s: float) -> None:
        if token is None and host not in LOOPBACK:
            # Made here, not by each child, so that a restarted server keeps the URL people already have.
            token = secrets.token_urlsafe(16)
        self.run, self.host, self.port, self.token, self.lease_s = run, host, port, token, lease_s
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> str:
        """Start the server and return its URL once it listens (another server of the run, an ``rlhp-annotate``,
        keeps its own entry in ``annotate.json``)."""
        env = {**os.environ, **({"RLHP_TOKEN": self.token} if self.token else {})}
        command = [sys.executable, "-m", "rlhp.human.server", str(self.run.path), "--host", self.host,
                   "--port", str(self.port), "--lease-s", str(self.lease_s), "--parent", str(os.getpid())]
        log_path = self.run.path / "annotate.log"
        with log_path.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            mine = [s for s in announced(self.run.annotate_json) if s["pid"] == self.process.pid]
            if mine:
                return mine[0]["url"]
            if self.process.poll() is not None:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
                raise NetworkError(f"the annotation server did not start: {tail[0]} (see {log_path})")
            time.sleep(0.05)
        self.stop()
        raise NetworkError(f"the annotation server did not listen within {timeout_s:g} s (see {log_path})")

    def alive(self) -> bool:
        """Whether the server process runs."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop the server (it has nothing to save: every answer is already in the store)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
