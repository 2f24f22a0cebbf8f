"""The query store's file: ``queries.sqlite`` in a run folder, its schema and records, and what both of its users read.

The trainer's side is :class:`rlhp.human.store.QueryStore`, the annotation server's
:class:`rlhp.human.server.answers.AnswerStore`; both are a :class:`StoreFile`.

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlhp.data.pairs import FragmentPairs
from rlhp.errors import DataError, RlhpError
from rlhp.human.ranking import Compare, Join, next_step

CHOICES = {"left": 1.0, "right": 0.0, "equal": 0.5, "cant_tell": math.nan}
"""An answer and its label: the probability that the *left* (first) clip is better; NaN is "can't tell"."""

SCHEMA = """
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


COUNTED = "annotator NOT IN (SELECT annotator FROM left_out)"
"""SQL: an answer counts (its author is not left out)."""

ANSWERS_OF_Q = f"(SELECT count(*) FROM answers a WHERE a.query_id = q.id AND a.{COUNTED})"
"""SQL: the answers that count of query ``q``."""

WANTS_MORE = (f"{ANSWERS_OF_Q} + (SELECT count(*) FROM leases l WHERE l.query_id = q.id AND l.expires > :now "
               f"AND l.{COUNTED}) < q.wanted")
"""SQL: query ``q`` wants more answers than it has answers and live leases that count (``:now``: the time)."""

ADDED_COLUMNS = {"instructions": "INTEGER REFERENCES instructions (id)", "drawn": "INTEGER NOT NULL DEFAULT 1",
                  "gold": "REAL", "kind": "TEXT NOT NULL DEFAULT 'pair'", "clip": "INTEGER REFERENCES clips (id)",
                  "versus": "INTEGER REFERENCES clips (id)", "pivot": "INTEGER", "implied": "REAL",
                  "scale": "INTEGER"}
"""Columns of ``queries`` that a store made before them lacks, and how they are added to it."""

INSTRUCTIONS = "coalesce((SELECT text FROM instructions i WHERE i.id = q.instructions), '')"
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


class StoreFile:
    """``queries.sqlite`` in a run folder; safe to use from several processes and threads at once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA.split(";", 1)[0])  # the queries table first: a store may predate a column
            have = {row[1] for row in db.execute("PRAGMA table_info(queries)")}
            for column, kind in ADDED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE queries ADD COLUMN {column} {kind}")
            db.executescript(SCHEMA)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

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

    def _advance(self, db: sqlite3.Connection, clip: int, annotator: str, now: float, told: int | None = None) -> None:
        """Ask a clip's next comparison, or place it where its answers lead (:func:`next_step`)."""
        order = [row[0] for row in db.execute("SELECT id FROM groups ORDER BY position")]
        answers = db.execute(f"SELECT q.pivot, a.label FROM queries q JOIN answers a ON a.query_id = q.id WHERE "
                             f"q.kind = 'step' AND q.clip = ? AND a.label IS NOT NULL AND a.{COUNTED}",
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

    def pairs(self, ids: np.ndarray) -> FragmentPairs:
        """The fragment pairs of queries ``ids``, in that order (a ranking query's from the clips it names)."""
        keys = [int(i) for i in ids]
        with self._connect() as db:
            rows = {r[0]: r[1:] for r in db.execute(
                f"SELECT id, pair, clip, versus FROM queries WHERE id IN ({','.join('?' * len(keys))})", keys)}
            clips = clip_sources(db, {c for i in keys if rows[i][1] is not None for c in rows[i][1:]})
        stored = [i for i in keys if rows[i][1] is None]
        refs = [i for i in keys if rows[i][1] is not None]
        parts = []
        if stored:
            parts.append(pairs_from_blobs([rows[i][0] for i in stored]))
        if refs:
            parts.append(clip_pairs([rows[i][1:] for i in refs], clips))
        order = {q: n for n, q in enumerate(stored + refs)}
        return FragmentPairs.concat(parts)[np.array([order[i] for i in keys], np.int64)]

    def rated(self, ids: np.ndarray) -> FragmentPairs:
        """The clips that queries ``ids`` rate, in that order: a batch of one fragment a row (its second axis 1)."""
        keys = [int(i) for i in ids]
        with self._connect() as db:
            clip_of = dict(db.execute(f"SELECT id, clip FROM queries WHERE id IN ({','.join('?' * len(keys))})", keys))
            clips = clip_sources(db, set(clip_of.values()))
        return clip_pairs([(clip_of[i],) for i in keys], clips)

    def count_answered(self) -> tuple[int, int]:
        """(answered and not yet taken, still pending) queries, a ranking's clips counting as one query each: a clip
        placed whose implied pairs wait to be taken is answered, a clip being placed (its comparison) pending."""
        with self._connect() as db:
            counts = dict(db.execute("SELECT state, count(*) FROM queries WHERE kind != 'implied' GROUP BY state"))
            placed = db.execute("SELECT count(DISTINCT clip) FROM queries WHERE kind = 'implied' AND "
                                "state = 'answered'").fetchone()[0]
        return counts.get("answered", 0) + placed, counts.get("pending", 0)

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

def clip_sources(db: sqlite3.Connection, clips: set[int]) -> dict[int, tuple[int, int, bytes]]:
    """Each of ``clips`` by id: the pair it was cut from (id), its side there, and that pair's blob."""
    named = sorted(clips)
    return {r[0]: r[1:] for r in db.execute(
        f"SELECT c.id, c.source, c.side, s.pair FROM clips c JOIN sources s ON s.id = c.source WHERE c.id IN "
        f"({','.join('?' * len(named))})", named)} if named else {}


def clip_pairs(shown: list[tuple[int, ...]], clips: dict[int, tuple[int, int, bytes]]) -> FragmentPairs:
    """The clips ``shown`` a row (two: a pair, left then right; one: a rated clip), cut from the pairs they came
    from (``clips``: id to source, side and the source's blob), each source read once."""
    blobs = {source: blob for source, _, blob in clips.values()}
    loaded = pairs_from_blobs(list(blobs.values()))
    row = {source: n for n, source in enumerate(blobs)}
    at = np.array([[(row[clips[c][0]], clips[c][1]) for c in pair] for pair in shown], np.int64)  # (rows, clips, 2)
    return FragmentPairs.from_columns({k: v[at[..., 0], at[..., 1]] for k, v in loaded.columns().items()},
                                      loaded.frame_stack)
