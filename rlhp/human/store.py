"""The query store: human queries, their leases and answers in the run folder's SQLite database.

The trainer (which publishes queries and takes their labels) and the annotation server (which hands
queries to people and records their answers) share nothing else. Every change is one transaction in
WAL mode, written when it happens, so either process can be killed at any moment and nothing is lost
or counted twice.

A query's ``state``: ``pending`` (it wants more answers), ``answered`` (it has ``wanted`` of them,
the trainer has not taken it yet), ``taken`` (its label is in the trainer's dataset, since round
``taken_round``) or ``expired`` (the trainer dropped it unanswered).

In ranking mode (:mod:`rlhp.human.ranking`) the published unit is a *clip* to place in the run's ranking, not a
pair: a query of kind ``step`` compares it with a clip already ranked, and the answer leads to the next step or
places it; once placed, one query of kind ``implied`` per other ranked clip carries the label the ranking implies
(state ``answered`` at once, taken like an answered pair). Steps end ``done``: their labels reach training as implied
pairs. A clip's steps and implied pairs name the clips they show (``clip``, ``versus``) instead of holding a pair.

In rating mode a query of kind ``rate`` asks for one clip's score on a scale of 1 to ``scale``; its answers' labels
are the ratings.

A *gold* query's answer is known (``gold``: the label a teacher gives it): people's answers to gold queries
measure them. A person the trainer *leaves out* (``left_out``) is handed no more queries, and their answers count
nowhere: not towards a query's wanted answers, not in its label.
"""

from __future__ import annotations

import io
import math
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlhp.data.pairs import FragmentPairs
from rlhp.data.rankings import RankedClips
from rlhp.errors import DataError, RlhpError
from rlhp.human.ranking import Compare, Join, next_step

CHOICES = {"left": 1.0, "right": 0.0, "equal": 0.5, "cant_tell": math.nan}
"""An answer and its label: the probability that the *left* (first) clip is better; NaN is "can't tell"."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    round INTEGER NOT NULL,
    left_clip TEXT NOT NULL,
    right_clip TEXT NOT NULL,
    wanted INTEGER NOT NULL,
    created REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    taken_round INTEGER,
    pair BLOB NOT NULL,
    instructions INTEGER REFERENCES instructions (id),
    drawn INTEGER NOT NULL DEFAULT 1,
    gold REAL,
    kind TEXT NOT NULL DEFAULT 'pair',
    clip INTEGER REFERENCES clips (id),
    versus INTEGER REFERENCES clips (id),
    pivot INTEGER,
    implied REAL,
    scale INTEGER
);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    pair BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS clips (
    id INTEGER PRIMARY KEY,
    source INTEGER NOT NULL REFERENCES sources (id),
    side INTEGER NOT NULL,
    media TEXT NOT NULL,
    round INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'placing',
    grp INTEGER REFERENCES groups (id),
    placed_by TEXT,
    placed_at REAL
);
CREATE TABLE IF NOT EXISTS groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS instructions (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS queries_state ON queries (state, id);
CREATE TABLE IF NOT EXISTS leases (
    query_id INTEGER NOT NULL REFERENCES queries (id),
    annotator TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (query_id, annotator)
);
CREATE TABLE IF NOT EXISTS left_out (
    annotator TEXT PRIMARY KEY,
    since REAL NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    query_id INTEGER NOT NULL REFERENCES queries (id),
    annotator TEXT NOT NULL,
    choice TEXT NOT NULL,
    label REAL,
    answered_at REAL NOT NULL,
    UNIQUE (query_id, annotator)
);
"""


_COUNTED = "annotator NOT IN (SELECT annotator FROM left_out)"
"""SQL: an answer counts (its author is not left out)."""

_ANSWERS_OF_Q = f"(SELECT count(*) FROM answers a WHERE a.query_id = q.id AND a.{_COUNTED})"
"""SQL: the answers that count of query ``q``."""

_WANTS_MORE = (f"{_ANSWERS_OF_Q} + (SELECT count(*) FROM leases l WHERE l.query_id = q.id AND l.expires > :now "
               f"AND l.{_COUNTED}) < q.wanted")
"""SQL: query ``q`` wants more answers than it has answers and live leases that count (``:now``: the time)."""

_ADDED_COLUMNS = {"instructions": "INTEGER REFERENCES instructions (id)", "drawn": "INTEGER NOT NULL DEFAULT 1",
                  "gold": "REAL", "kind": "TEXT NOT NULL DEFAULT 'pair'", "clip": "INTEGER REFERENCES clips (id)",
                  "versus": "INTEGER REFERENCES clips (id)", "pivot": "INTEGER", "implied": "REAL",
                  "scale": "INTEGER"}
"""Columns of ``queries`` that a store made before them lacks, and how they are added to it."""

_INSTRUCTIONS = "coalesce((SELECT text FROM instructions i WHERE i.id = q.instructions), '')"
"""A query's instructions in SQL (``q`` the query): empty for a query published before there were any."""


class QueryError(RlhpError):
    """An annotation request that the store's state refuses (the server answers it with a 4xx)."""

    exit_code = 3
    status = 409


class OffScale(QueryError):
    """A rating outside the query's scale."""

    status = 422


class UnknownQuery(QueryError):
    """No query has this id."""

    status = 404


@dataclass(frozen=True)
class Query:
    """One query as a person sees it: its id, the file names of its two clips under ``media/``, when its lease
    ends, what people were asked to judge (empty: nothing beyond "which does the task better?") and whether it
    places the left clip in the ranking (a ``step``: the right one is ranked already); ``scale`` is the rating scale
    of a query that asks to rate its left clip alone (its right clip is empty), 0 for one that compares two."""

    id: int
    left_clip: str
    right_clip: str
    lease_expires: float
    instructions: str
    placing: bool = False
    scale: int = 0


@dataclass(frozen=True)
class Person:
    """How one annotator labels: ``answers`` in all, ``gold_answers`` given to gold queries (can't-tell left
    out), the share of those matching the known label, the share of their labels that match another person's on
    the same query (``compared``: how many such comparisons), and why they are left out (empty: they are not)."""

    answers: int
    gold_answers: int
    gold_accuracy: float | None
    compared: int
    agreement: float | None
    left_out: str


@dataclass(frozen=True)
class Taken:
    """Labels the trainer takes: mask over the asked ids, and per taken query its mean label (NaN when
    every answer was "can't tell"; a rating for a query that rates one clip), its annotators (comma-joined), when
    its last answer came, and whether it rates one clip; ``scale``: the rating scale of those that do (0: none)."""

    done: np.ndarray
    labels: np.ndarray
    annotators: list[str]
    times: np.ndarray
    rated: np.ndarray
    scale: int = 0


def clip_ids(sources: np.ndarray) -> np.ndarray:
    """The ids of the two clips cut from each published pair ``sources``, (pairs, 2): source ``s`` gives ``2s`` and
    ``2s + 1``, so the querent names their files before the store has them."""
    return 2 * np.asarray(sources, np.int64)[:, None] + np.arange(2)


def clip_media(clip: int) -> str:
    """The file name of a ranking clip under ``media/``."""
    return f"clip{clip:06d}.mp4"


def pair_to_blob(pairs: FragmentPairs, i: int) -> bytes:
    """Pair ``i`` of ``pairs`` as ``.npz`` bytes (readable with numpy alone)."""
    buf = io.BytesIO()
    np.savez(buf, frame_stack=pairs.frame_stack, **{k: v[i] for k, v in pairs.columns().items()})
    return buf.getvalue()


_NPY_HEADERS = threading.Lock()


def pairs_from_blobs(blobs: list[bytes]) -> FragmentPairs:
    """The pairs saved by :func:`pair_to_blob`, stacked."""
    # numpy parses .npy headers with ast.literal_eval, which CPython 3.11 before 3.11.9 breaks when threads
    # call it at once ("AST constructor recursion depth mismatch").
    with _NPY_HEADERS:
        loaded = [dict(np.load(io.BytesIO(b))) for b in blobs]
    names = [k for k in loaded[0] if k != "frame_stack"]  # blobs stored before frames: obs and next_obs
    return FragmentPairs.from_columns({k: np.stack([d[k] for d in loaded]) for k in names},
                                      int(loaded[0].get("frame_stack", 1)))


class QueryStore:
    """``queries.sqlite`` in a run folder; safe to use from several processes and threads at once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA.split(";", 1)[0])  # the queries table first: a store may predate a column
            have = {row[1] for row in db.execute("PRAGMA table_info(queries)")}
            for column, kind in _ADDED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE queries ADD COLUMN {column} {kind}")
            db.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"QueryStore({str(self.path)!r})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # A connection per use: cheap, and safe across threads and forks.
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                yield db
            finally:
                db.close()
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # rlhp's own misuse, not the file's
        except sqlite3.DatabaseError as err:  # a damaged, truncated or foreign file, or one that cannot be opened
            raise DataError(f"query store {str(self.path)!r} cannot be read ({err}); it is left as it is: put a "
                            "good copy in its place, or move it away to start the run's queries anew") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once so that concurrent writers queue instead of failing."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # The trainer's side.

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

    def _advance(self, db: sqlite3.Connection, clip: int, annotator: str, now: float, told: int | None = None) -> None:
        """Ask a clip's next comparison, or place it where its answers lead (:func:`next_step`)."""
        order = [row[0] for row in db.execute("SELECT id FROM groups ORDER BY position")]
        answers = db.execute(f"SELECT q.pivot, a.label FROM queries q JOIN answers a ON a.query_id = q.id WHERE "
                             f"q.kind = 'step' AND q.clip = ? AND a.label IS NOT NULL AND a.{_COUNTED}",
                             (clip,)).fetchall()
        if told is None:  # the instructions of the clip's first comparison
            told = db.execute("SELECT instructions FROM queries WHERE kind = 'step' AND clip = ? ORDER BY id LIMIT 1",
                              (clip,)).fetchone()[0]
        step = next_step(order, answers)
        media, round_ = db.execute("SELECT media, round FROM clips WHERE id = ?", (clip,)).fetchone()
        if isinstance(step, Compare):
            versus, shown = db.execute("SELECT id, media FROM clips WHERE grp = ? ORDER BY id LIMIT 1",
                                       (step.group,)).fetchone()
            db.execute("INSERT INTO queries (round, left_clip, right_clip, wanted, created, pair, instructions, kind, "
                       "clip, versus, pivot) VALUES (?, ?, ?, 1, ?, x'', ?, 'step', ?, ?, ?)",
                       (round_, media, shown, now, told, clip, versus, step.group))
            return
        if isinstance(step, Join):
            group = step.group
        else:
            db.execute("UPDATE groups SET position = position + 1 WHERE position >= ?", (step.position,))
            group = db.execute("INSERT INTO groups (position) VALUES (?)", (step.position,)).lastrowid
        db.execute("UPDATE clips SET state = 'ranked', grp = ?, placed_by = ?, placed_at = ? WHERE id = ?",
                   (group, annotator, now, clip))
        # One implied label against every other ranked clip: 1 when this clip's group ranks higher.
        db.execute(
            "INSERT INTO queries (round, left_clip, right_clip, wanted, created, pair, instructions, state, kind, "
            "clip, versus, implied) SELECT n.round, n.media, o.media, 0, :now, x'', :told, 'answered', 'implied', "
            "n.id, o.id, CASE WHEN gn.position > go.position THEN 1.0 WHEN gn.position < go.position THEN 0.0 "
            "ELSE 0.5 END FROM clips n JOIN groups gn ON gn.id = n.grp, clips o JOIN groups go ON go.id = o.grp "
            "WHERE n.id = :clip AND o.id != :clip AND o.state = 'ranked' ORDER BY o.id",
            {"now": now, "told": told, "clip": clip})

    def ranking(self) -> list[list[str]]:
        """The ranked clips' files under ``media/`` by group, worst first (the clips of a group are equally good)."""
        with self._connect() as db:
            rows = db.execute("SELECT g.id, c.media FROM groups g JOIN clips c ON c.grp = g.id "
                              "ORDER BY g.position, c.id").fetchall()
        groups: dict[int, list[str]] = {}
        for group, media in rows:
            groups.setdefault(group, []).append(media)
        return list(groups.values())

    def to_draw(self, ahead: int) -> tuple[int, str, str] | None:
        """The query whose clips to draw next, the newest undrawn (people are handed the newest first), while
        fewer than ``ahead`` drawn ones wait for people: (id, left clip, right clip); None when none is due."""
        with self._connect() as db:
            waiting = db.execute(
                f"SELECT count(*) FROM queries q WHERE state = 'pending' AND drawn = 1 AND {_WANTS_MORE}",
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

    def pairs(self, ids: np.ndarray) -> FragmentPairs:
        """The fragment pairs of queries ``ids``, in that order (a ranking query's from the clips it names)."""
        keys = [int(i) for i in ids]
        with self._connect() as db:
            rows = {r[0]: r[1:] for r in db.execute(
                f"SELECT id, pair, clip, versus FROM queries WHERE id IN ({','.join('?' * len(keys))})", keys)}
            clips = _clip_sources(db, {c for i in keys if rows[i][1] is not None for c in rows[i][1:]})
        stored = [i for i in keys if rows[i][1] is None]
        refs = [i for i in keys if rows[i][1] is not None]
        parts = []
        if stored:
            parts.append(pairs_from_blobs([rows[i][0] for i in stored]))
        if refs:
            parts.append(_clip_pairs([rows[i][1:] for i in refs], clips))
        order = {q: n for n, q in enumerate(stored + refs)}
        return FragmentPairs.concat(parts)[np.array([order[i] for i in keys], np.int64)]

    def rated(self, ids: np.ndarray) -> FragmentPairs:
        """The clips that queries ``ids`` rate, in that order: a batch of one fragment a row (its second axis 1)."""
        keys = [int(i) for i in ids]
        with self._connect() as db:
            clip_of = dict(db.execute(f"SELECT id, clip FROM queries WHERE id IN ({','.join('?' * len(keys))})", keys))
            clips = _clip_sources(db, set(clip_of.values()))
        return _clip_pairs([(clip_of[i],) for i in keys], clips)

    def ranking_in_training(self) -> RankedClips:
        """The ranked clips that a pair in training names (an implied pair taken), with their levels in the ranking
        as it stands (0 the worst; the levels of clips not in training are skipped), in the order of their ids."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT c.id, g.position FROM clips c JOIN groups g ON g.id = c.grp WHERE c.id IN (SELECT clip FROM "
                "queries WHERE kind = 'implied' AND state = 'taken' UNION SELECT versus FROM queries WHERE kind = "
                "'implied' AND state = 'taken') ORDER BY c.id").fetchall()
            clips = _clip_sources(db, {r[0] for r in rows})
        ranking = RankedClips()
        if rows:
            ids, positions = np.array(rows, np.int64).T
            levels = np.unique(positions, return_inverse=True)[1].astype(np.float32)
            ranking.push(_clip_pairs([(int(c),) for c in ids], clips), levels, ids)
        return ranking

    def count_answered(self) -> tuple[int, int]:
        """(answered and not yet taken, still pending) queries, a ranking's clips counting as one query each: a clip
        placed whose implied pairs wait to be taken is answered, a clip being placed (its comparison) pending."""
        with self._connect() as db:
            counts = dict(db.execute("SELECT state, count(*) FROM queries WHERE kind != 'implied' GROUP BY state"))
            placed = db.execute("SELECT count(DISTINCT clip) FROM queries WHERE kind = 'implied' AND "
                                "state = 'answered'").fetchone()[0]
        return counts.get("answered", 0) + placed, counts.get("pending", 0)

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
                f"AND a.{_COUNTED} GROUP BY q.id UNION ALL SELECT q.id, q.implied, c.placed_by, c.placed_at, 0, 0 FROM "
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

    # The annotators' side.

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
                f"SELECT id, left_clip, right_clip, {_INSTRUCTIONS}, kind = 'step', coalesce(scale, 0) FROM queries q "
                "WHERE state = 'pending' AND drawn = 1 AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.query_id = q.id "
                "AND a.annotator = :who) AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.query_id = q.id AND "
                f"l.annotator = :who AND l.expires > :now) AND {_WANTS_MORE} ORDER BY gold IS NOT NULL DESC, id DESC "
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
        db.execute(f"UPDATE queries AS q SET state = 'answered' WHERE q.id = ? AND {_ANSWERS_OF_Q} >= q.wanted",
                   (query_id,))
        return kind, clip

    def undo(self, annotator: str, lease_s: float) -> Query:
        """Withdraw this annotator's last answer and lease its query to them again."""
        now = time.time()
        with self._transaction() as db:
            row = db.execute(f"SELECT a.seq, q.id, q.state, q.left_clip, q.right_clip, {_INSTRUCTIONS}, q.kind, "
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

    def team(self) -> dict[str, Person]:
        """Each annotator's figures (:class:`Person`), by name."""
        with self._connect() as db:
            counts = db.execute(
                "SELECT a.annotator, count(*), coalesce(sum(q.gold IS NOT NULL AND a.label IS NOT NULL), 0), "
                "coalesce(sum(a.label = q.gold), 0) FROM answers a JOIN queries q ON q.id = a.query_id "
                "GROUP BY a.annotator").fetchall()
            agree = {row[0]: row[1:] for row in db.execute(
                "SELECT a.annotator, count(*), sum(a.label = b.label) FROM answers a JOIN answers b ON "
                "b.query_id = a.query_id AND b.annotator != a.annotator WHERE a.label IS NOT NULL AND "
                "b.label IS NOT NULL GROUP BY a.annotator")}
            left = dict(db.execute("SELECT annotator, reason FROM left_out").fetchall())
        team = {}
        for name, answers, gold, right in counts:
            compared, same = agree.get(name, (0, 0))
            team[name] = Person(answers, gold, right / gold if gold else None, compared,
                                same / compared if compared else None, left.get(name, ""))
        return team

    def leave_out(self, reasons: dict[str, str]) -> None:
        """Leave these annotators out, each for its reason: their answers count nowhere from now on, and the
        queries that lose an answer by it want one again."""
        now = time.time()
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO left_out VALUES (?, ?, ?)",
                           [(name, now, reason) for name, reason in reasons.items()])
            db.execute(f"UPDATE queries AS q SET state = 'pending' WHERE state = 'answered' AND {_ANSWERS_OF_Q} "
                       "< q.wanted")

    def instructions(self, ids: np.ndarray) -> list[str]:
        """What people were asked when they answered queries ``ids``, in that order."""
        with self._connect() as db:
            found = dict(db.execute(f"SELECT id, {_INSTRUCTIONS} FROM queries q WHERE id IN "
                                    f"({','.join('?' * len(ids))})", [int(i) for i in ids]).fetchall())
        return [found.get(int(i), "") for i in ids]

    def answers(self) -> list[tuple[int, str, str, float | None, float]]:
        """Every answer, oldest first: (query id, annotator, choice, label, time)."""
        with self._connect() as db:
            return db.execute("SELECT query_id, annotator, choice, label, answered_at FROM answers "
                              "ORDER BY seq").fetchall()


def _add_clips(db: sqlite3.Connection, sources: np.ndarray, round_: int, pairs: FragmentPairs,
               state: str) -> list[int]:
    """Store each pair (as ``sources``) once and both its clips, in ``state``; return the clips' ids."""
    db.executemany("INSERT INTO sources (id, pair) VALUES (?, ?)",
                   [(int(q), pair_to_blob(pairs, i)) for i, q in enumerate(sources)])
    clips = [int(c) for c in clip_ids(sources).ravel()]
    db.executemany("INSERT INTO clips (id, source, side, media, round, state) VALUES (?, ?, ?, ?, ?, ?)",
                   [(c, c // 2, c % 2, clip_media(c), round_, state) for c in clips])
    return clips


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


def _drop_stalled(db: sqlite3.Connection) -> None:
    """Clips being placed whose comparison expired are placed nowhere: nobody is asked about them again."""
    db.execute("UPDATE clips SET state = 'dropped' WHERE state = 'placing' AND NOT EXISTS (SELECT 1 FROM queries q "
               "WHERE q.kind = 'step' AND q.clip = clips.id AND q.state = 'pending')")


def _clip_sources(db: sqlite3.Connection, clips: set[int]) -> dict[int, tuple[int, int, bytes]]:
    """Each of ``clips`` by id: the pair it was cut from (id), its side there, and that pair's blob."""
    named = sorted(clips)
    return {r[0]: r[1:] for r in db.execute(
        f"SELECT c.id, c.source, c.side, s.pair FROM clips c JOIN sources s ON s.id = c.source WHERE c.id IN "
        f"({','.join('?' * len(named))})", named)} if named else {}


def _clip_pairs(shown: list[tuple[int, ...]], clips: dict[int, tuple[int, int, bytes]]) -> FragmentPairs:
    """The clips ``shown`` a row (two: a pair, left then right; one: a rated clip), cut from the pairs they came
    from (``clips``: id to source, side and the source's blob), each source read once."""
    blobs = {source: blob for source, _, blob in clips.values()}
    loaded = pairs_from_blobs(list(blobs.values()))
    row = {source: n for n, source in enumerate(blobs)}
    at = np.array([[(row[clips[c][0]], clips[c][1]) for c in pair] for pair in shown], np.int64)  # (rows, clips, 2)
    return FragmentPairs.from_columns({k: v[at[..., 0], at[..., 1]] for k, v in loaded.columns().items()},
                                      loaded.frame_stack)


def _label(choice: str) -> float | None:
    if choice not in CHOICES:
        raise QueryError(f"unknown answer {choice!r}; one of {', '.join(CHOICES)}")
    value = CHOICES[choice]
    return None if math.isnan(value) else value
