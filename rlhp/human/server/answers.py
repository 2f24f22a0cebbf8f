"""The annotation server's side of the query store: it hands queries to people and records their answers, ratings
and undos, and reports on them (the file, its schema and the states of a query: :mod:`rlhp.human.schema`)."""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import asdict

import numpy as np

from rlhp.human.schema import (
    ANSWERS_OF_Q,
    CHOICES,
    INSTRUCTIONS,
    WANTS_MORE,
    OffScale,
    Query,
    QueryError,
    StoreFile,
    UnknownQuery,
)


class AnswerStore(StoreFile):
    """The annotation server's use of ``queries.sqlite``."""

    def lease_next(self, annotator: str, lease_s: float) -> Query | None:
        """Lease the newest query this annotator has neither answered nor holds, that wants more answers
        than it has answers and live leases, gold queries first (each person is measured before they label much);
        None when there is none, or when the annotator is left out."""
        now = time.time()
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM left_out WHERE annotator = ?", (annotator,)).fetchone():
                return None
            # Newest first: it shows the agent as it is now, and the oldest unanswered ones expire.
            row = db.execute(
                f"SELECT id, left_clip, right_clip, {INSTRUCTIONS}, kind = 'step', coalesce(scale, 0) FROM queries q "
                "WHERE state = 'pending' AND drawn = 1 AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.query_id = q.id "
                "AND a.annotator = :who) AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.query_id = q.id AND "
                f"l.annotator = :who AND l.expires > :now) AND {WANTS_MORE} ORDER BY gold IS NOT NULL DESC, id DESC "
                "LIMIT 1",
                {"who": annotator, "now": now}).fetchone()
            if row is None:
                return None
            db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (row[0], annotator, now + lease_s))
        return Query(row[0], row[1], row[2], now + lease_s, row[3], bool(row[4]), row[5])

    def release(self, annotator: str) -> int:
        """Give up this annotator's leases (a page opened anew: what it held is handed out again, first to them);
        return how many."""
        with self._transaction() as db:
            return db.execute("DELETE FROM leases WHERE annotator = ?", (annotator,)).rowcount

    def answer(self, query_id: int, annotator: str, choice: str) -> int:
        """Record an answer to a query leased to this annotator that compares two clips; return how many answers
        they have given."""
        label = _label(choice)
        with self._transaction() as db:
            kind, clip = self._record(db, query_id, annotator, "pair", choice, label)
            if kind == "step":  # its label reaches training as implied pairs, once the clip is placed
                db.execute("UPDATE queries SET state = 'done' WHERE id = ?", (query_id,))
                if label is None:  # can't tell: the clip is placed nowhere
                    db.execute("UPDATE clips SET state = 'dropped' WHERE id = ?", (clip,))
                else:
                    self._advance(db, clip, annotator, time.time())
            return db.execute("SELECT count(*) FROM answers WHERE annotator = ?", (annotator,)).fetchone()[0]

    def rate(self, query_id: int, annotator: str, rating: int | None) -> int:
        """Record a rating (None: can't tell) of the clip of a query leased to this annotator that asks for one;
        return how many answers they have given."""
        with self._transaction() as db:
            self._record(db, query_id, annotator, "rate", "cant_tell" if rating is None else str(rating), rating)
            return db.execute("SELECT count(*) FROM answers WHERE annotator = ?", (annotator,)).fetchone()[0]

    @staticmethod
    def _record(db: sqlite3.Connection, query_id: int, annotator: str, asks: str, choice: str,
                label: float | None) -> tuple[str, int | None]:
        """Record an answer of the kind ``asks`` (``pair``: a choice between clips; ``rate``: a rating) to a query
        leased to this annotator, refusing it when the query asks the other kind, or when a rating is off its
        scale; return the query's kind and clip."""
        now = time.time()
        row = db.execute("SELECT state, wanted, kind, clip, scale FROM queries WHERE id = ?", (query_id,)).fetchone()
        if row is None:
            raise UnknownQuery(f"no query has id {query_id}")
        state, _, kind, clip, scale = row
        if (kind == "rate") != (asks == "rate"):
            wants = "a rating of its clip (POST /api/ratings)" if kind == "rate" else \
                "a choice between its clips (POST /api/answers)"
            raise QueryError(f"query {query_id} asks for {wants}")
        if scale is not None and label is not None and not 1 <= label <= scale:
            raise OffScale(f"query {query_id} rates on a scale of 1 to {scale}, not {label:g}")
        if db.execute("SELECT 1 FROM answers WHERE query_id = ? AND annotator = ?", (query_id, annotator)).fetchone():
            raise QueryError(f"{annotator!r} has already answered query {query_id}")
        if state != "pending":
            raise QueryError(f"query {query_id} is {state} and takes no more answers")
        lease = db.execute("SELECT expires FROM leases WHERE query_id = ? AND annotator = ?",
                           (query_id, annotator)).fetchone()
        if lease is None or lease[0] <= now:
            raise QueryError(f"{annotator!r} holds no live lease on query {query_id} (leases expire); "
                             "ask for the next query")
        db.execute("DELETE FROM leases WHERE query_id = ? AND annotator = ?", (query_id, annotator))
        db.execute("INSERT INTO answers (query_id, annotator, choice, label, answered_at) VALUES (?, ?, ?, ?, ?)",
                   (query_id, annotator, choice, label, now))
        db.execute(f"UPDATE queries AS q SET state = 'answered' WHERE q.id = ? AND {ANSWERS_OF_Q} >= q.wanted",
                   (query_id,))
        return kind, clip

    def undo(self, annotator: str, lease_s: float) -> Query:
        """Withdraw this annotator's last answer and lease its query to them again."""
        now = time.time()
        with self._transaction() as db:
            row = db.execute(f"SELECT a.seq, q.id, q.state, q.left_clip, q.right_clip, {INSTRUCTIONS}, q.kind, "
                             "q.clip, coalesce(q.scale, 0) FROM answers a JOIN queries q ON q.id = a.query_id WHERE "
                             "a.annotator = ? ORDER BY a.seq DESC LIMIT 1", (annotator,)).fetchone()
            if row is None:
                raise QueryError(f"{annotator!r} has no answer to undo")
            seq, query_id, state, left, right, instructions, kind, clip, scale = row
            if kind == "step":
                _unplace(db, query_id, clip)
            elif state not in ("pending", "answered"):
                raise QueryError(f"query {query_id} is {state}: its label is already "
                                 f"{'in training' if state == 'taken' else 'dropped'} and cannot be undone")
            db.execute("DELETE FROM answers WHERE seq = ?", (seq,))
            db.execute("UPDATE queries SET state = 'pending' WHERE id = ?", (query_id,))
            db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (query_id, annotator, now + lease_s))
        return Query(query_id, left, right, now + lease_s, instructions, kind == "step", scale)

    def status(self) -> dict:
        """Queries by state (``answered``: the queries people answered, a ranking's comparisons included; ``implied``:
        the pairs a ranking implied; ``in_training``: the labels the trainer took, of both), answers per annotator
        and how many of them rated a clip (``ratings``: one clip watched, not two), agreement where a query has
        several labels, each annotator's figures (:meth:`team`), and in ranking mode the clips ranked and their
        groups."""
        with self._connect() as db:
            # A ranking's implied pairs are labels nobody was asked for: counted apart from the queries answered.
            counts = db.execute("SELECT state, kind = 'implied', count(*) FROM queries GROUP BY 1, 2").fetchall()
            states = {state: n for state, implied, n in counts if not implied}
            implied = {state: n for state, implied, n in counts if implied}
            people = dict(db.execute("SELECT annotator, count(*) FROM answers GROUP BY annotator").fetchall())
            ratings = db.execute("SELECT count(*) FROM answers a JOIN queries q ON q.id = a.query_id "
                                 "WHERE q.kind = 'rate'").fetchone()[0]
            multi = db.execute("SELECT count(*), coalesce(sum(min_label = max_label), 0) FROM (SELECT "
                               "min(label) AS min_label, max(label) AS max_label FROM answers WHERE label IS NOT NULL "
                               "GROUP BY query_id HAVING count(*) > 1)").fetchone()
            ranked, groups = db.execute("SELECT count(*), count(DISTINCT grp) FROM clips WHERE state = 'ranked'"
                                        ).fetchone()
        return {
            "pending": states.get("pending", 0),
            "answered": states.get("answered", 0) + states.get("taken", 0) + states.get("done", 0),
            "implied": sum(implied.values()),
            "in_training": states.get("taken", 0) + implied.get("taken", 0),
            "expired": states.get("expired", 0),
            "answers": sum(people.values()),
            "ratings": ratings,
            "annotators": people,
            "multi_labelled": multi[0],
            "agreement": multi[1] / multi[0] if multi[0] else None,
            "team": {name: asdict(person) for name, person in self.team().items()},
            "ranked_clips": ranked,
            "ranking_groups": groups,
        }

    def instructions(self, ids: np.ndarray) -> list[str]:
        """What people were asked when they answered queries ``ids``, in that order."""
        with self._connect() as db:
            found = dict(db.execute(f"SELECT id, {INSTRUCTIONS} FROM queries q WHERE id IN "
                                    f"({','.join('?' * len(ids))})", [int(i) for i in ids]).fetchall())
        return [found.get(int(i), "") for i in ids]

    def answers(self) -> list[tuple[int, str, str, float | None, float]]:
        """Every answer, oldest first: (query id, annotator, choice, label, time)."""
        with self._connect() as db:
            return db.execute("SELECT query_id, annotator, choice, label, answered_at FROM answers "
                              "ORDER BY seq").fetchall()

    def ranking(self) -> list[list[str]]:
        """The ranked clips' files under ``media/`` by group, worst first (the clips of a group are equally good)."""
        with self._connect() as db:
            rows = db.execute("SELECT g.id, c.media FROM groups g JOIN clips c ON c.grp = g.id "
                              "ORDER BY g.position, c.id").fetchall()
        groups: dict[int, list[str]] = {}
        for group, media in rows:
            groups.setdefault(group, []).append(media)
        return list(groups.values())

def _unplace(db: sqlite3.Connection, step: int, clip: int) -> None:
    """Take back what comparison ``step`` of ``clip`` led to: the clip's next comparison, or its place in the
    ranking with every pair it implied; refused when someone answered a later comparison of the clip, or when one of
    those pairs is in training."""
    if db.execute("SELECT 1 FROM queries q JOIN answers a ON a.query_id = q.id WHERE q.kind = 'step' AND q.clip = ? "
                  "AND q.id > ?", (clip, step)).fetchone():
        raise QueryError(f"query {step}'s clip has been compared again since, by someone else: the answer stands")
    implied = "kind = 'implied' AND (clip = :clip OR versus = :clip)"
    if db.execute(f"SELECT 1 FROM queries WHERE {implied} AND state = 'taken'", {"clip": clip}).fetchone():
        raise QueryError(f"query {step} placed its clip in the ranking, and the labels that implies are already in "
                         "training: it cannot be undone")
    later = "SELECT id FROM queries WHERE kind = 'step' AND clip = :clip AND id > :step"
    db.execute(f"DELETE FROM leases WHERE query_id IN ({later})", {"clip": clip, "step": step})
    db.execute(f"DELETE FROM queries WHERE id IN ({later})", {"clip": clip, "step": step})
    db.execute(f"DELETE FROM queries WHERE {implied}", {"clip": clip})
    group = db.execute("SELECT grp FROM clips WHERE id = ?", (clip,)).fetchone()[0]
    db.execute("UPDATE clips SET state = 'placing', grp = NULL, placed_by = NULL, placed_at = NULL WHERE id = ?",
               (clip,))
    if group is not None and not db.execute("SELECT 1 FROM clips WHERE grp = ?", (group,)).fetchone():
        position = db.execute("DELETE FROM groups WHERE id = ? RETURNING position", (group,)).fetchone()[0]
        db.execute("UPDATE groups SET position = position - 1 WHERE position > ?", (position,))

def _label(choice: str) -> float | None:
    if choice not in CHOICES:
        raise QueryError(f"unknown answer {choice!r}; one of {', '.join(CHOICES)}")
    value = CHOICES[choice]
    return None if math.isnan(value) else value
