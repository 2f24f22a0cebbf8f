"""The trainer's side of the query store: it publishes queries, draws their clips, takes their labels and leaves
people out (the file, its schema and the states of a query: :mod:`rlhp.human.schema`)."""

from __future__ import annotations

import math
import sqlite3
import time

import numpy as np

from rlhp.data.pairs import FragmentPairs
from rlhp.data.rankings import RankedClips
from rlhp.human.schema import (
    ANSWERS_OF_Q,
    COUNTED,
    WANTS_MORE,
    StoreFile,
    Taken,
    clip_ids,
    clip_media,
    clip_pairs,
    clip_sources,
    pair_to_blob,
)


class QueryStore(StoreFile):
    """The trainer's use of ``queries.sqlite``."""

    def publish(self, ids: np.ndarray, round_: int, clips: list[tuple[str, str]], pairs: FragmentPairs,
                wanted: int | np.ndarray, instructions: str, drawn: bool = True,
                gold: np.ndarray | None = None) -> None:
        """Add queries, each wanting ``wanted`` answers (one number, or one per query) and asking people
        ``instructions`` (kept once however many queries share them). With ``drawn``, their clips are already
        written under ``media/``; else nobody is handed them until :meth:`mark_drawn`. ``gold`` holds the known
        label of each gold query, NaN for the others."""
        now = time.time()
        gold = np.full(len(ids), np.nan) if gold is None else gold
        known = [None if math.isnan(g) else float(g) for g in gold]
        wanted = np.broadcast_to(wanted, len(ids))
        with self._transaction() as db:
            told = self._instructions_id(db, instructions)
            rows = [(int(q), round_, left, right, int(w), now, pair_to_blob(pairs, i), told, int(drawn), g)
                    for i, (q, (left, right), w, g) in enumerate(zip(ids, clips, wanted, known, strict=True))]
            db.executemany("INSERT INTO queries (id, round, left_clip, right_clip, wanted, created, pair, "
                           "instructions, drawn, gold) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def publish_clips(self, sources: np.ndarray, round_: int, pairs: FragmentPairs, instructions: str) -> None:
        """Add both clips of each pair (published as ``sources``, their files drawn under ``media/`` as
        :func:`clip_media` names them) to be placed in the ranking: the first clip ever ranked opens it, each other
        gets its first comparison (people place them in any order)."""
        now = time.time()
        with self._transaction() as db:
            told = self._instructions_id(db, instructions)
            for clip in _add_clips(db, sources, round_, pairs, "placing"):
                self._advance(db, clip, "", now, told)

    def publish_ratings(self, sources: np.ndarray, round_: int, pairs: FragmentPairs, instructions: str,
                        scale: int) -> None:
        """Ask for a rating of each clip of each pair (published as ``sources``, their files drawn under ``media/``
        as :func:`clip_media` names them), on a scale of 1 to ``scale``."""
        now = time.time()
        with self._transaction() as db:
            told = self._instructions_id(db, instructions)
            clips = _add_clips(db, sources, round_, pairs, "rated")
            db.executemany("INSERT INTO queries (round, left_clip, right_clip, wanted, created, pair, instructions, "
                           "kind, clip, scale) VALUES (?, ?, '', 1, ?, x'', ?, 'rate', ?, ?)",
                           [(round_, clip_media(c), now, told, c, scale) for c in clips])

    @staticmethod
    def _instructions_id(db: sqlite3.Connection, instructions: str) -> int:
        db.execute("INSERT OR IGNORE INTO instructions (text) VALUES (?)", (instructions,))
        return db.execute("SELECT id FROM instructions WHERE text = ?", (instructions,)).fetchone()[0]

    def to_draw(self, ahead: int) -> tuple[int, str, str] | None:
        """The query whose clips to draw next, the newest undrawn (people are handed the newest first), while
        fewer than ``ahead`` drawn ones wait for people: (id, left clip, right clip); None when none is due."""
        with self._connect() as db:
            waiting = db.execute(
                f"SELECT count(*) FROM queries q WHERE state = 'pending' AND drawn = 1 AND {WANTS_MORE}",
                {"now": time.time()}).fetchone()[0]
            if waiting >= ahead:
                return None
            return db.execute("SELECT id, left_clip, right_clip FROM queries WHERE state = 'pending' AND drawn = 0 "
                              "ORDER BY id DESC LIMIT 1").fetchone()

    def mark_drawn(self, ids: list[int]) -> None:
        """These queries' clips are written: people may be handed them."""
        with self._transaction() as db:
            db.executemany("UPDATE queries SET drawn = 1 WHERE id = ?", [(int(q),) for q in ids])

    def max_id(self) -> int:
        """The largest query id, -1 when there is none."""
        with self._connect() as db:
            return db.execute("SELECT coalesce(max(id), -1) FROM queries").fetchone()[0]

    def open_ids(self) -> np.ndarray:
        """Ids of the queries the trainer still waits for (pending or answered, not taken), oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT id FROM queries WHERE state IN ('pending', 'answered') ORDER BY id").fetchall()
        return np.array([r[0] for r in rows], np.int64)

    def max_source(self) -> int:
        """The largest id of a pair published for ranking, -1 when there is none."""
        with self._connect() as db:
            return db.execute("SELECT coalesce(max(id), -1) FROM sources").fetchone()[0]

    def ranking_in_training(self) -> RankedClips:
        """The ranked clips that a pair in training names (an implied pair taken), with their levels in the ranking
        as it stands (0 the worst; the levels of clips not in training are skipped), in the order of their ids."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT c.id, g.position FROM clips c JOIN groups g ON g.id = c.grp WHERE c.id IN (SELECT clip FROM "
                "queries WHERE kind = 'implied' AND state = 'taken' UNION SELECT versus FROM queries WHERE kind = "
                "'implied' AND state = 'taken') ORDER BY c.id").fetchall()
            clips = clip_sources(db, {r[0] for r in rows})
        ranking = RankedClips()
        if rows:
            ids, positions = np.array(rows, np.int64).T
            levels = np.unique(positions, return_inverse=True)[1].astype(np.float32)
            ranking.push(clip_pairs([(int(c),) for c in ids], clips), levels, ids)
        return ranking

    def take(self, ids: np.ndarray, round_: int) -> Taken:
        """Mark the answered ones of ``ids`` as taken in ``round_`` and return their labels (an implied pair's is the
        ranking's, by whoever placed its newer clip, when they did)."""
        with self._transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS asked (id INTEGER PRIMARY KEY)")
            db.execute("DELETE FROM asked")
            db.executemany("INSERT INTO asked VALUES (?)", [(int(i),) for i in ids])
            rows = db.execute(
                "SELECT q.id, avg(a.label), group_concat(a.annotator, ','), max(a.answered_at), q.kind = 'rate', "
                "coalesce(q.scale, 0) "
                "FROM queries q JOIN asked USING (id) JOIN answers a ON a.query_id = q.id WHERE q.state = 'answered' "
                f"AND a.{COUNTED} GROUP BY q.id UNION ALL SELECT q.id, q.implied, c.placed_by, c.placed_at, 0, 0 FROM "
                "queries q JOIN asked USING (id) JOIN clips c ON c.id = q.clip WHERE q.state = 'answered' AND "
                "q.kind = 'implied'").fetchall()
            db.execute("UPDATE queries SET state = 'taken', taken_round = ? WHERE state = 'answered' "
                       "AND id IN (SELECT id FROM asked)", (round_,))
        found = {r[0]: r for r in rows}
        done = np.array([int(i) in found for i in ids], dtype=bool)
        chosen = [found[int(i)] for i in ids[done]]
        labels = np.array([math.nan if r[1] is None else r[1] for r in chosen], np.float32)
        return Taken(done, labels, [r[2] for r in chosen], np.array([r[3] for r in chosen], np.float64),
                     np.array([bool(r[4]) for r in chosen], bool), max((r[5] for r in chosen), default=0))

    def expire_oldest(self, keep: int) -> int:
        """Expire the oldest pending queries without an answer, beyond the newest ``keep`` of them; return how
        many."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE queries SET state = 'expired' WHERE id IN (SELECT id FROM queries q WHERE state = 'pending' "
                "AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.query_id = q.id) ORDER BY id DESC LIMIT -1 "
                "OFFSET ?)", (keep,))
            _drop_stalled(db)
            return cursor.rowcount

    def withdraw(self, ids: np.ndarray) -> None:
        """Expire these queries unless answered: another teacher labels them, so nobody is asked."""
        with self._transaction() as db:
            db.executemany("UPDATE queries SET state = 'expired' WHERE id = ? AND state = 'pending' AND NOT EXISTS "
                           "(SELECT 1 FROM answers a WHERE a.query_id = queries.id)", [(int(q),) for q in ids])
            _drop_stalled(db)

    def untake(self, from_round: int) -> None:
        """Give back the labels taken in rounds ``from_round`` and later (a resumed run takes them again)."""
        with self._transaction() as db:
            db.execute("UPDATE queries SET state = 'answered', taken_round = NULL WHERE state = 'taken' "
                       "AND taken_round >= ?", (from_round,))

    def leave_out(self, reasons: dict[str, str]) -> None:
        """Leave these annotators out, each for its reason: their answers count nowhere from now on, and the
        queries that lose an answer by it want one again."""
        now = time.time()
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO left_out VALUES (?, ?, ?)",
                           [(name, now, reason) for name, reason in reasons.items()])
            db.execute(f"UPDATE queries AS q SET state = 'pending' WHERE state = 'answered' AND {ANSWERS_OF_Q} "
                       "< q.wanted")

def _add_clips(db: sqlite3.Connection, sources: np.ndarray, round_: int, pairs: FragmentPairs,
               state: str) -> list[int]:
    """Store each pair (as ``sources``) once and both its clips, in ``state``; return the clips' ids."""
    db.executemany("INSERT INTO sources (id, pair) VALUES (?, ?)",
                   [(int(q), pair_to_blob(pairs, i)) for i, q in enumerate(sources)])
    clips = [int(c) for c in clip_ids(sources).ravel()]
    db.executemany("INSERT INTO clips (id, source, side, media, round, state) VALUES (?, ?, ?, ?, ?, ?)",
                   [(c, c // 2, c % 2, clip_media(c), round_, state) for c in clips])
    return clips

def _drop_stalled(db: sqlite3.Connection) -> None:
    """Clips being placed whose comparison expired are placed nowhere: nobody is asked about them again."""
    db.execute("UPDATE clips SET state = 'dropped' WHERE state = 'placing' AND NOT EXISTS (SELECT 1 FROM queries q "
               "WHERE q.kind = 'step' AND q.clip = clips.id AND q.state = 'pending')")
