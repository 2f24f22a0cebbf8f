"""When a query's clips are drawn: as it is published (cheap drawers), or lazily, by a background thread that
draws published queries' clips only a few ahead of the people labelling them, newest first (the order they
are handed out), so that slow drawing (MuJoCo's, seconds a query on a CPU) never holds up training and
nothing is drawn that nobody will see."""

from __future__ import annotations

import atexit
import logging
import threading
from pathlib import Path

import numpy as np

from rlhp.data import FragmentPairs
from rlhp.human.clips import ClipRenderer
from rlhp.human.store import QueryStore
from rlhp.logs import CONSOLE

log = logging.getLogger(__name__)


class DrawOnPublish:
    """Draws a round's clips as its queries are published, before anyone is handed them."""

    drawn_when_published = True

    def __init__(self, renderer: ClipRenderer, folder: Path) -> None:
        self.renderer, self.folder = renderer, folder

    def publishing(self, pairs: FragmentPairs, names: list[tuple[str, str]]) -> None:
        """Draw these queries' clips now."""
        self.renderer.write(pairs, names, self.folder)

    def published(self) -> None:
        """Nothing is left to draw."""

    def stop(self) -> None:
        """Nothing draws in the background."""


class ClipPrefetcher:
    """Keeps ``ahead`` queries drawn and waiting for people, drawing one query at a time in a background thread.

    Args:
        store: the run's query store (queries published undrawn).
        renderer: draws and encodes a query's clips.
        folder: where the clips go (the run's ``media/``).
        ahead: drawn queries kept waiting.
        poll_s: seconds between looks at the store when nothing is to be drawn.
    """

    drawn_when_published = False

    def __init__(self, store: QueryStore, renderer: ClipRenderer, folder: Path, ahead: int,
                 poll_s: float = 0.05) -> None:
        self.store, self.renderer, self.folder, self.ahead, self.poll_s = store, renderer, folder, ahead, poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publishing(self, pairs: FragmentPairs, names: list[tuple[str, str]]) -> None:
        """Nothing yet: the queries are drawn when people near them."""

    def published(self) -> None:
        """Draw the new queries as people near them."""
        self.start()

    @property
    def running(self) -> bool:
        """Whether its thread draws (or waits for queries to draw)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start drawing in the background (once)."""
        if not self.running:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="rlhp-clips", daemon=True)
            self._thread.start()
            atexit.register(self.stop)  # let a clip being drawn finish before the interpreter goes

    def stop(self) -> None:
        """Stop after the query being drawn (its clips are then complete)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        atexit.unregister(self.stop)

    def _run(self) -> None:
        while not self._stop.is_set():
            due = self.store.to_draw(self.ahead)
            if due is None:
                self._stop.wait(self.poll_s)
                continue
            query, left, right = due
            try:
                self.renderer.write(self.store.pairs(np.array([query])), [(left, right)], self.folder)
            except Exception:  # a clip that cannot be drawn: nothing more will be; say so where people look
                log.exception("drawing query %d's clips failed; no more clips are drawn", query, extra=CONSOLE)
                return
            self.store.mark_drawn([query])
