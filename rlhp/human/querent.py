"""The web querent: renders each query's clips and publishes it in the run's query store, where people see it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.data.ratings import MAX_SCALE
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, DataError
from rlhp.feedback import Querent
from rlhp.human.clips import ClipRenderer
from rlhp.human.prefetch import ClipPrefetcher, DrawOnPublish
from rlhp.human.schema import clip_ids, clip_media
from rlhp.human.store import QueryStore
from rlhp.runs import RunFolder

INSTRUCTION_FILES = (".md", ".markdown", ".txt")
"""Endings that make ``instructions`` a file to read rather than the text itself."""
GOLDEN = (5**0.5 - 1) / 2
"""The golden ratio's fractional part: ``id * GOLDEN mod 1`` spreads evenly over [0, 1) for consecutive ids."""
MODES = ("pairs", "rank", "rate")
"""What people are asked: which of two clips is better, where a new clip goes in a ranking, or a clip's score."""
SCALE, RATE_SHARE = 5, 1.0
"""Rating mode's defaults: the scale's top and the share of pairs whose clips are rated."""
MAX_INSTRUCTIONS = 20_000
"""Most characters of instructions: a page of text is what a person reads before labelling."""


def read_instructions(instructions: str) -> str:
    """The instructions' text: ``instructions`` itself, or the file it names (one line ending in
    :data:`INSTRUCTION_FILES`); refused, by key, when that file is missing, unreadable or too long."""
    if not isinstance(instructions, str):
        raise ArgumentError("instructions", f"must be text or a file name, got {instructions!r}")
    text = instructions.strip()
    if "\n" not in text and text.lower().endswith(INSTRUCTION_FILES):
        path = Path(text).expanduser()
        if not path.is_file():
            raise ArgumentError("instructions", f"names {text!r}, which is not a file (give the text itself or "
                                "the path of a .md or .txt file)")
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            raise ArgumentError("instructions", f"{text!r} cannot be read as UTF-8 text: {err}") from None
    if len(text) > MAX_INSTRUCTIONS:
        raise ArgumentError("instructions", f"are {len(text):,} characters; at most {MAX_INSTRUCTIONS:,}, a page a "
                            "person reads before labelling")
    return text


def gold_answers(ids: np.ndarray, pairs: FragmentPairs, rate: float) -> np.ndarray:
    """The known label of each gold query of ``ids`` (1: the first fragment has the larger true return, 0: the
    second, 0.5: equal), NaN for the others. Which ids are gold follows the golden ratio's sequence: a share
    ``rate`` of any run of consecutive ids, the same after a resume."""
    chosen = (ids * GOLDEN % 1.0) < rate
    gold = np.full(len(ids), np.nan)
    if not chosen.any():
        return gold
    returns = pairs.rews[chosen].sum(-1)
    if np.isnan(returns).any():
        raise DataError("querent.gold_rate needs the fragments' true rewards to know the gold answers, and this "
                        "env gives none; set querent.gold_rate=0")
    gold[chosen] = 0.5 * (1 + np.sign(returns[:, 0] - returns[:, 1]))
    return gold


class WebQuerent(Querent):
    """Renders each query's two clips into the run's ``media/`` and publishes the query in its
    ``queries.sqlite``, where the annotation server finds it.

    In ``rank`` mode (:mod:`rlhp.human.ranking`) both clips of each pair are placed in one ranking instead, by
    binary insertion: each comparison shows a new clip beside a ranked one, a clip finds its place in about
    ``log2(groups)`` of them, and the ranking implies a label against every other ranked clip. Its clips are drawn
    as they are published (never lazily), and it asks no gold queries, one person per comparison.

    In ``rate`` mode people score each clip of a share ``rate_share`` of the pairs alone, on a scale of 1 to
    ``scale`` (the reward learns from ratings under the cumulative-logit model, :mod:`rlhp.training.ratings`); the
    other pairs are asked as pairs, so a run mixes both. Rated clips too are drawn as they are published, one
    person rating each, and no gold query is asked.

    Args:
        env: the run's env (its frames are drawn again from the fragments' observations).
        run_dir: the run folder.
        labels_per_query: different people asked for each query; their labels are averaged.
        width: clip width in pixels.
        fps: clip frames per second (None: the env's own).
        instructions: what people are asked to judge, shown above the clips and kept with each label: Markdown
            text, or the path of a ``.md`` or ``.txt`` file that holds it (read now, so the run keeps the text).
            Empty: the task's own (``env.task``: a backflip says what a backflip is), else the page asks which
            clip does the task better.
        prefetch: where clips are slow to draw (MuJoCo), they are drawn in the background, newest first, this
            many ahead of the people labelling (:mod:`rlhp.human.prefetch`); a query is handed out only once
            drawn. Other clips are drawn when their queries are published.
        gold_rate: share of the queries that are gold: their answer is known (the teacher's, from the fragments'
            true returns), so people's answers to them measure each person (the team's figures on the status
            API); they are labelled and trained on as the others are.
        gold_labels: different people asked for each gold query, so that every person meets some (at most the
            number of people labelling: a gold query waits for as many).
        mode: ``pairs``, each query a pair to judge; ``rank``, each query's clips placed in a ranking; ``rate``,
            each query's clips rated alone (a share ``rate_share`` of them).
        scale: ratings run from 1 to this (``rate`` mode), at most :data:`~rlhp.data.ratings.MAX_SCALE`.
        rate_share: the share of each round's pairs whose clips are rated (``rate`` mode): which ones follows the
            golden ratio's sequence over their ids; the others are asked as pairs.
    """

    publishes = True
    unsaved = frozenset({"renderer", "drawing"})
    """Not in a checkpoint: a live env and a drawing thread, which the config builds again."""

    def __init__(self, env: GymEnv, run_dir: str | Path, labels_per_query: int = 1, width: int = 320,
                 fps: float | None = None, instructions: str = "", prefetch: int = 6, gold_rate: float = 0.0,
                 gold_labels: int = 2, mode: str = "pairs", scale: int = SCALE,
                 rate_share: float = RATE_SHARE) -> None:
        super().__init__()
        if mode not in MODES:
            raise ArgumentError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        if mode != "pairs" and gold_rate > 0:
            raise ArgumentError("gold_rate", f"gold queries are measured in mode=pairs, and mode={mode} asks none: "
                                "set gold_rate=0, or mode=pairs")
        if mode != "pairs" and labels_per_query > 1:
            raise ArgumentError("labels_per_query", f"mode={mode} asks one person per comparison or rating: set "
                                "labels_per_query=1, or mode=pairs")
        for key, value, default in (("scale", scale, SCALE), ("rate_share", rate_share, RATE_SHARE)):
            if mode != "rate" and value != default:  # else a forgotten mode=rate asks pairs without a word
                raise ArgumentError(key, f"applies to mode=rate, and this querent asks mode={mode}: set mode=rate, "
                                    f"or leave {key} at {default:g}")
        if mode == "rate" and rate_share == 0:
            raise ArgumentError("rate_share", "0 rates no clip: every query would be a pair; set mode=pairs, or a "
                                "share above 0")
        if not 2 <= scale <= MAX_SCALE:
            raise ArgumentError("scale", f"must lie in [2, {MAX_SCALE}] (keys 1 to 9, and 0 for 10), got {scale}")
        ArgumentError.check_share("rate_share", rate_share)
        self.mode, self.scale, self.rate_share = mode, scale, rate_share
        ArgumentError.check_share("gold_rate", gold_rate)
        ArgumentError.check_count("gold_labels", gold_labels)
        self.gold_rate, self.gold_labels = gold_rate, gold_labels
        self.instructions = read_instructions(instructions) or env.task.instructions
        ArgumentError.check_count("labels_per_query", labels_per_query)
        if width < 16 or width % 2:
            raise ArgumentError("width", f"must be an even number of pixels >= 16, got {width}")
        self.run = RunFolder(run_dir)
        self.store = QueryStore(self.run.queries_db)
        self.labels_per_query = labels_per_query
        ArgumentError.check_count("prefetch", prefetch)
        self.prefetch = prefetch
        self._start_drawing(ClipRenderer(env, width=width, fps=fps))

    @property
    def one_query_a_pair(self) -> bool:
        """Whether each pair is one query (``pairs`` mode): ranked and rated clips are asked about one by one."""
        return self.mode == "pairs"

    @property
    def ranks(self) -> bool:
        """Whether people place its clips in one ranking (``rank`` mode)."""
        return self.mode == "rank"

    @property
    def asks_gold(self) -> bool:
        """Whether some of its queries are gold (``gold_rate`` above 0)."""
        return self.gold_rate > 0

    def _start_drawing(self, renderer: ClipRenderer) -> None:
        self.renderer = renderer
        self.needs_states = renderer.drawer.needs_states
        self.drawing = ClipPrefetcher(self.store, renderer, self.run.media_dir, self.prefetch) \
            if renderer.drawer.slow else DrawOnPublish(renderer, self.run.media_dir)

    def __call__(self, pairs: FragmentPairs, round_: int = 0) -> np.ndarray:
        """Render, store and publish the queries (in ``rank`` mode: their clips, to be placed; in ``rate`` mode a
        share of them as clips to rate); return their ids (a rated pair's: the id of the pair its clips came from)."""
        if self.mode == "rank":
            return self._rank(pairs, round_)
        if self.mode == "rate":
            rated = (np.arange(self.next_id, self.next_id + len(pairs)) * GOLDEN % 1.0) < self.rate_share
            asked = self._ask(pairs[~rated], round_) if not rated.all() else np.zeros(0, np.int64)
            return np.concatenate([asked, self._rate(pairs[rated], round_) if rated.any() else asked[:0]])
        return self._ask(pairs, round_)

    def _ask(self, pairs: FragmentPairs, round_: int) -> np.ndarray:
        """Publish each pair as a query to judge."""
        # After a resume the store may hold queries published after the checkpoint: never reuse their ids.
        self.next_id = max(self.next_id, self.store.max_id() + 1)
        ids = Querent.__call__(self, pairs, round_)
        names = [(f"q{q:06d}-left.mp4", f"q{q:06d}-right.mp4") for q in ids]
        self.drawing.publishing(pairs, names)
        gold = gold_answers(ids, pairs, self.gold_rate)
        wanted = np.where(np.isnan(gold), self.labels_per_query, max(self.labels_per_query, self.gold_labels))
        self.store.publish(ids, round_, names, pairs, wanted, self.instructions,
                           drawn=self.drawing.drawn_when_published, gold=gold)
        self.drawing.published()
        return ids

    def _rank(self, pairs: FragmentPairs, round_: int) -> np.ndarray:
        """Draw both clips of each pair now and publish them to be placed in the ranking."""
        ids = self._draw_clips(pairs, round_)
        self.store.publish_clips(ids, round_, pairs, self.instructions)
        return ids

    def _rate(self, pairs: FragmentPairs, round_: int) -> np.ndarray:
        """Draw both clips of each pair now and publish them to be rated."""
        ids = self._draw_clips(pairs, round_)
        self.store.publish_ratings(ids, round_, pairs, self.instructions, self.scale)
        return ids

    def _draw_clips(self, pairs: FragmentPairs, round_: int) -> np.ndarray:
        """Give the pairs ids and draw their clips under the names :func:`clip_media` gives them."""
        self.next_id = max(self.next_id, self.store.max_source() + 1)  # as in pairs mode, after a resume
        ids = Querent.__call__(self, pairs, round_)
        names = [(clip_media(int(left)), clip_media(int(right))) for left, right in clip_ids(ids)]
        self.renderer.write(pairs, names, self.run.media_dir)
        return ids

